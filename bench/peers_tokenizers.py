"""Classic BPE beside its peers: training and encoding Tiny Shakespeare, one thread.

- Training 200 merges on the first 90% (word splitting included) vs the plain-loop trainer of
  bench/plain_python.py (it recounts every pair per merge, so its cost per merge is nearly
  constant: in quick mode it runs 20 merges and is scaled x10) and vs Hugging Face
  ``tokenizers`` (same regex via ``Split(Regex(...), behavior="isolated")``, ``initial_alphabet``
  = the training characters, vocab = alphabet + merges + 2 specials, TOKENIZERS_PARALLELISM=false).
  With ``tie_break="hf"`` engine produces exactly Hugging Face's merges (checked on the first,
  untimed Hugging Face run); the timed engine run uses the first-occurrence tie rule (same work). The
  plain-loop trainer's merges must equal engine's.
- Training 5,000 merges (target: under a second) vs Hugging Face at 5,000.
- Encoding the whole text with the 200 merges vs the memoised pure-Python encoder (same pieces,
  checked) and vs
  ``tiktoken`` given the same pieces as ranks (piece UTF-8 bytes -> id - 2) and the word regex as
  pattern. The text is ASCII, so bytes are characters and every piece is made by one merge:
  tiktoken's ids + 2 equal engine's ids exactly (checked before timing).
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from engine.tokenizers import BpeTrainer  # noqa: E402

from plain_python import encode_bpe, train_bpe
from timing import best_of, hf_parallelism, row, shakespeare_path


def best_of_warm(fn, repeat: int) -> float:
    return best_of(fn, repeat, warmup=True)


WORD_PATTERN = r"\w+|[^\w\s]|\s"


def shakespeare_text() -> str:
    return shakespeare_path().read_text(encoding="utf-8")


def hf_trainer_run(text: str, merges: int):
    """Train Hugging Face BPE with the word regex; returns the trained tokenizer."""
    import tokenizers
    from tokenizers import Regex, models, pre_tokenizers, trainers

    alphabet = sorted(set(text))
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="isolated")
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + merges + 2, special_tokens=["<bos>", "<eos>"],
        initial_alphabet=alphabet, show_progress=False, min_frequency=0,
    )
    tok.train_from_iterator([text], trainer=trainer)
    return tok


def tiktoken_encoding(bpe):
    import tiktoken

    ranks = {piece.encode("utf-8"): i for i, piece in enumerate(bpe.pieces)}
    return tiktoken.Encoding(name="engine-bpe-words", pat_str=WORD_PATTERN, mergeable_ranks=ranks, special_tokens={})


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def hf_merges(tok) -> list[tuple[str, str]]:
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


def hf_train_checked(train: str, merges: int, repeat: int) -> float:
    """Seconds of Hugging Face training; its first (untimed) run must give engine's ``tie_break="hf"`` merges."""
    if hf_merges(hf_trainer_run(train, merges)) != BpeTrainer(merges, tie_break="hf").train(train).merges:
        raise RuntimeError(f"Hugging Face and engine (tie_break='hf') disagree on {merges} merges")
    return best_of(lambda: hf_trainer_run(train, merges), repeat)


def rows(quick: bool) -> list[dict]:
    with hf_parallelism(False):  # HF on one thread, whatever an area before set
        return _rows(quick)


def _rows(quick: bool) -> list[dict]:
    text = shakespeare_text()
    train = text[: int(len(text) * 0.9)]
    repeat = 3 if quick else 7
    out = []

    engine_train = best_of_warm(lambda: BpeTrainer(200).train(train), repeat)
    naive_merges = 20 if quick else 200
    engine_merges = BpeTrainer(200).train(train).merges
    start = time.perf_counter()
    plain_merges = train_bpe(train, naive_merges)
    naive_train = (time.perf_counter() - start) * (200 / naive_merges)
    if plain_merges != engine_merges[:naive_merges]:  # a long run: the timed one is the checked one
        raise RuntimeError("the plain-loop trainer and engine disagree on the merges")
    label = "plain-loop trainer" + (" (20 merges x10)" if quick else "")
    out.append(row("bpe train 200 merges, 90% tinyshakespeare", engine_train, label, naive_train, at_least=100))

    if _installed("tokenizers"):
        hf_200 = hf_train_checked(train, 200, 1 if quick else 3)
        out.append(row("bpe train 200 merges, 90% tinyshakespeare", engine_train, "hf tokenizers BpeTrainer",
                       hf_200, at_least=3))
    engine_5000 = best_of_warm(lambda: BpeTrainer(5000).train(train), 1 if quick else 3)
    if _installed("tokenizers"):
        hf_5000 = hf_train_checked(train, 5000, 1)
        out.append(row("bpe train 5000 merges, 90% tinyshakespeare", engine_5000, "hf tokenizers BpeTrainer",
                       hf_5000, engine_under_s=1.0))

    bpe = BpeTrainer(200).train(train)
    engine_encode = best_of_warm(lambda: bpe.encode(text), repeat)
    piece_ids = {piece: i + 2 for i, piece in enumerate(bpe.pieces)}
    if [piece_ids[p] for p in encode_bpe(text, bpe.merges)] != bpe.encode(text).tolist():
        raise RuntimeError("the memoised pure-Python encoder and engine disagree on the ids")
    naive_encode = best_of(lambda: encode_bpe(text, bpe.merges), 1)
    out.append(row("bpe encode full text, 200 merges", engine_encode, "memoised pure-Python encoder",
                   naive_encode, at_least=40))
    if _installed("tiktoken"):
        encoding = tiktoken_encoding(bpe)
        ours = bpe.encode(text)
        theirs = encoding.encode_ordinary(text)
        if len(theirs) != len(ours) or any(int(a) != b + 2 for a, b in zip(ours.tolist(), theirs)):
            raise RuntimeError("tiktoken and engine disagree on the ids of the same merges")
        engine_s, tiktoken_s = float("inf"), float("inf")
        for _ in range(repeat):  # alternately, so that both see the same machine load
            engine_s = min(engine_s, best_of(lambda: bpe.encode(text), 1))
            tiktoken_s = min(tiktoken_s, best_of(lambda: encoding.encode_ordinary(text), 1))
        out.append(row("bpe encode full text, 200 merges", engine_s, "tiktoken (same ranks, word regex)",
                       tiktoken_s, at_least=3))
    return out


if __name__ == "__main__":  # pragma: no cover
    for r in rows(quick="--quick" in sys.argv):
        print(f"{r['benchmark']:<45} engine {r['engine_s'] * 1e3:9.2f} ms  {r['peer']:<36} "
              f"{r['peer_s'] * 1e3:10.2f} ms  {r['ratio']:8.1f}x  target {r['target']}")
