"""Byte-level BPE against tiktoken and Hugging Face tokenizers, side by side in one run.

Corpus: the standard library's .py files (about 34 MB; 3 MB with ``quick``). Vocabulary: 32,768
trained on it by engine with the HF tie rule (4,096 with ``quick``), cached in bench/.cache.
Rows report seconds for engine and the peer and ``ratio = peer_s / engine_s`` (above 1: engine
is faster), except the long-piece row, whose ratio is time("a" * 1e6) / time("a" * 1e5).
Compilation happens before any timed region. Run: ``python bench/peers_byte_bpe.py [--quick]``.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from timing import best_of  # noqa: E402


CACHE = Path(__file__).resolve().parent / ".cache"


def stdlib_texts(max_bytes: int | None = None) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            texts.append(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
        total += len(texts[-1])
        if max_bytes is not None and total >= max_bytes:
            break
    return texts


def trained_tokenizer(texts, vocab_size: int, tag: str):
    """The engine tokenizer for this corpus and size: from bench/.cache, else trained now."""
    from engine.tokenizers.base import load_tokenizer
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    path = CACHE / f"stdlib-{tag}-{vocab_size}.json"
    if path.exists():
        return load_tokenizer(path)
    tokenizer = ByteBpeTrainer(vocab_size=vocab_size, tie_break="hf").train(texts)
    tokenizer.save(path)
    return tokenizer


def rows(quick: bool = False) -> list[dict]:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # HF on one thread unless asked
    from engine.tokenizers.byte_bpe import ByteBpeTrainer
    from engine.tokenizers.pretokenize import PATTERNS

    texts = stdlib_texts(3_000_000 if quick else None)
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    vocab_size = 4096 if quick else 32768
    repeat = 3 if quick else 2
    out = []

    def row(name, engine_s, peer, peer_s, target, ratio=None):
        out.append({"benchmark": name, "engine_s": engine_s, "peer": peer, "peer_s": peer_s,
                    "ratio": peer_s / engine_s if ratio is None else ratio, "target": target})

    tokenizer = trained_tokenizer(texts, vocab_size, "quick" if quick else "full")
    tokenizer.encode_batch(texts[:3])  # compile outside the timed regions
    threads = os.cpu_count() or 1
    engine_one = best_of(lambda: tokenizer.encode_batch(texts, threads=1), repeat)
    engine_all = best_of(lambda: tokenizer.encode_batch(texts, threads=threads), repeat)
    ids = [a.tolist() for a in tokenizer.encode_batch(texts)]
    try:
        import tiktoken

        ranks = {t: i for i, t in enumerate(tokenizer.tokens) if t is not None}
        enc = tiktoken.Encoding("bench", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks, special_tokens={})
        if [enc.encode_ordinary(t) for t in texts] != ids:
            raise RuntimeError("tiktoken ids differ from engine ids")
        peer = best_of(lambda: [enc.encode_ordinary(t) for t in texts], repeat)
        row(f"encode {megabytes:.0f} MB, 1 thread", engine_one, "tiktoken encode_ordinary", peer, ">= 3x")
        peer = best_of(lambda: enc.encode_ordinary_batch(texts, num_threads=threads), repeat)
        row(f"encode {megabytes:.0f} MB, {threads} threads", engine_all, "tiktoken encode_ordinary_batch", peer, ">= 3x")
    except ImportError:
        pass
    try:
        import tokenizers
        from tokenizers import pre_tokenizers, trainers

        from engine.tokenizers.interop import save_hf_tokenizer_json

        path = save_hf_tokenizer_json(tokenizer, CACHE / f"hf-{vocab_size}.json")
        hf = tokenizers.Tokenizer.from_file(str(path))
        peer = best_of(lambda: [hf.encode(t, add_special_tokens=False) for t in texts], 1)
        row(f"encode {megabytes:.0f} MB, 1 thread", engine_one, "HF tokenizers encode", peer, ">= 20x")

        def train_hf():
            model = tokenizers.Tokenizer(tokenizers.models.BPE())
            model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<bos>", "<eos>"],
                                          show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
            model.train_from_iterator(texts, trainer)

        ByteBpeTrainer(vocab_size=300, tie_break="hf").train(texts[:2])  # compile
        engine_train = best_of(lambda: ByteBpeTrainer(vocab_size=vocab_size, tie_break="hf").train(texts), 1)
        peer = best_of(train_hf, 1)
        row(f"train {vocab_size} vocab on {megabytes:.0f} MB, 1 thread", engine_train, "HF BpeTrainer", peer, ">= 2x")
    except ImportError:
        pass
    short, long = "a" * 100_000, "a" * 1_000_000
    tokenizer.encode(short)
    t_short = best_of(lambda: tokenizer.encode(short), 3)
    t_long = best_of(lambda: tokenizer.encode(long), 3)
    row("encode 'a' * 1e6 vs 'a' * 1e5", t_long, "engine 'a' * 1e5", t_short, "ratio <= 15", ratio=t_long / t_short)
    return out


if __name__ == "__main__":
    CACHE.mkdir(exist_ok=True)
    for r in rows(quick="--quick" in sys.argv):
        print(f"{r['benchmark']:<40} engine {r['engine_s']:8.3f}s  {r['peer']:<32} {r['peer_s']:8.3f}s  "
              f"ratio {r['ratio']:6.2f}  target {r['target']}")
