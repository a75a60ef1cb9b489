"""Byte-level BPE against tiktoken and Hugging Face tokenizers, side by side in one run.

Corpora: the standard library's .py files (the files of scripts/make_stdlib_corpus.py, about
32 MB; 3 MB with ``quick``), Tiny Shakespeare (data/tinyshakespeare.txt), and the bundled en/el/ru
corpus (data/corpus.jsonl, each of its texts once: about 10 kB). Vocabulary: 32,768 trained on the
stdlib corpus by engine with the HF tie rule (4,096 with ``quick``), cached in bench/.cache, used
for all three. Every encode row checks that tiktoken gives the same ids before timing.

The encode rows time what ``engine prepare`` does: each text encoded once, on text the encoder has
not met. Engine keeps a cache of merged pieces that outlives a call (one per thread, bounded), and
Hugging Face's BPE model keeps one too; a second call on the same text would be answered from what
the first merged. So every timed run starts from emptied caches (``clear_piece_caches``; HF's
``model._clear_cache``), warms up on other text (Tiny Shakespeare before the stdlib rows, the
first megabyte of the stdlib before the others: compilation, and the cache filling as it goes),
then encodes the corpus once; the row shows the fastest of those runs (``*_median_s``: their
median). tiktoken keeps no cache across calls; its runs get the same warm-up. Engine and the peer
are timed in turns.

The "own regex" rows are tiktoken rank files with a pre-tokenizer regex of their own, their ranks
trained with that regex on the same corpus and size (as a model's file is), tiktoken running the same
``pat_str``: Qwen2's (``QWEN2``), which no hand-written scanner cuts, so engine runs its compiled
regex (``engine.tokenizers.regex``); and Llama 3's (``LLAMA3``), which cuts cl100k's pieces, so engine
runs cl100k's scanner (``engine.tokenizers.pretokenize.SCANNER_EQUIVALENTS``).

Rows report seconds for engine and the peer and ``ratio = peer_s / engine_s`` (above 1: engine
is faster), except the long-piece row, whose ratio is time("a" * 1e6) / time("a" * 1e5), and the
2-thread row, whose peer is engine itself on 1 thread.
Compilation happens before any timed region. Run: ``python bench/peers_byte_bpe.py [--quick]``.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path
from timing import (DATA_DIR, best_of, best_of_interleaved, hf_parallelism, median, row as bench_row,
                    runs_interleaved, shakespeare_path)


CACHE = Path(__file__).resolve().parent / ".cache"
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
          r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")  # one digit a piece
_REGEX_TAGS = {"gpt2": "", LLAMA3: "-llama3", QWEN2: "-qwen2"}


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


def multilingual_texts() -> list[str]:
    """The texts of the bundled en/el/ru corpus (data/corpus.jsonl), each once."""
    return [json.loads(line)["text"] for line in (DATA_DIR / "corpus.jsonl").read_text("utf-8").splitlines()
            if line.strip()]


def unseen(tokenizer, warmup: list[str], threads: int = 1):
    """Setup of an engine run on text it has not met: its piece caches emptied, then a warm-up on
    ``warmup`` (other text; the caches keep what it merged)."""
    def setup():
        tokenizer.clear_piece_caches()
        tokenizer.encode_batch(warmup, threads=threads)
    return setup


def trained_tokenizer(texts, vocab_size: int, tag: str, pattern: str = "gpt2"):
    """The engine tokenizer for this corpus, size and pre-tokenizer: from bench/.cache, else trained now."""
    from engine.tokenizers.loading import load_tokenizer
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    path = CACHE / f"stdlib-{tag}-{vocab_size}{_REGEX_TAGS[pattern]}.json"
    if path.exists():
        return load_tokenizer(path)
    tokenizer = ByteBpeTrainer(vocab_size=vocab_size, tie_break="hf", pattern=pattern).train(texts)
    tokenizer.save(path)
    return tokenizer


def own_regex_row(tokenizer, pattern, label, texts, megabytes, warmup, repeat, timed_row) -> None:
    """A tiktoken file with its own regex: ranks trained with ``pattern`` (``tokenizer``), encoded with it
    by engine and by tiktoken (one thread, unseen text)."""
    import tiktoken

    from engine.tokenizers.interop import load_tiktoken, save_tiktoken

    ours = load_tiktoken(save_tiktoken(tokenizer, CACHE / f"own-regex{_REGEX_TAGS[pattern]}.tiktoken"), pattern=pattern)
    ranks = {t: i for i, t in enumerate(ours.tokens) if t is not None}
    enc = tiktoken.Encoding(f"bench{_REGEX_TAGS[pattern]}-regex", pat_str=pattern, mergeable_ranks=ranks,
                            special_tokens={})
    if [a.tolist() for a in ours.encode_batch(texts)] != [enc.encode_ordinary(t) for t in texts]:
        raise RuntimeError(f"tiktoken ids differ from engine ids with {label}")
    engine_runs, peer_runs = runs_interleaved(
        lambda: ours.encode_batch(texts, threads=1), lambda: [enc.encode_ordinary(t) for t in texts], repeat,
        engine_setup=unseen(ours, warmup), peer_setup=lambda: [enc.encode_ordinary(t) for t in warmup])
    timed_row(f"encode {megabytes:.0f} MB once, tiktoken file with its own regex ({label}), 1 thread", engine_runs,
              "tiktoken encode_ordinary, same pat_str", peer_runs, at_least=3)


def rows(quick: bool = False) -> list[dict]:
    with hf_parallelism(False):  # HF on one thread (the rows say so), whatever an area before set
        return _rows(quick)


def _rows(quick: bool) -> list[dict]:
    from engine.tokenizers.byte_bpe import ByteBpeTrainer, bytes_to_unicode
    from engine.tokenizers.pretokenize import PATTERNS

    texts = stdlib_texts(3_000_000 if quick else None)
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    vocab_size = 4096 if quick else 32768
    repeat = 3 if quick else 5
    out = []

    def row(*args, **kwargs):
        out.append(bench_row(*args, **kwargs))

    def timed_row(name, engine_runs, peer, peer_runs, **target):
        row(name, min(engine_runs), peer, min(peer_runs), engine_median_s=median(engine_runs),
            peer_median_s=median(peer_runs), runs=len(engine_runs), **target)

    tokenizer = trained_tokenizer(texts, vocab_size, "quick" if quick else "full")
    tokenizer.encode_batch(texts[:3])  # compile outside the timed regions
    threads = os.cpu_count() or 1
    ids = [a.tolist() for a in tokenizer.encode_batch(texts)]
    shakespeare = [shakespeare_path().read_text("utf-8")]
    first_megabyte = stdlib_texts(1_000_000)
    stdlib_warmup = unseen(tokenizer, shakespeare)
    engine_one = None
    try:
        import tiktoken

        ranks = {t: i for i, t in enumerate(tokenizer.tokens) if t is not None}
        enc = tiktoken.Encoding("bench", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks, special_tokens={})
        multilingual = multilingual_texts()
        corpora = [
            (f"stdlib {megabytes:.0f} MB", texts, shakespeare, repeat),
            ("tinyshakespeare 1 MB", shakespeare, first_megabyte, 2 * repeat + 1),
            (f"en/el/ru corpus {sum(len(t.encode()) for t in multilingual) / 1e3:.0f} kB", multilingual,
             first_megabyte, 10 * repeat + 1),  # milliseconds a run: many runs
        ]
        for name, corpus, warmup, rounds in corpora:
            if [a.tolist() for a in tokenizer.encode_batch(corpus)] != [enc.encode_ordinary(t) for t in corpus]:
                raise RuntimeError(f"tiktoken ids differ from engine ids on {name}")
            ours, theirs = runs_interleaved(
                lambda: tokenizer.encode_batch(corpus, threads=1), lambda: [enc.encode_ordinary(t) for t in corpus],
                rounds, engine_setup=unseen(tokenizer, warmup),
                peer_setup=lambda: [enc.encode_ordinary(t) for t in warmup])
            if corpus is texts:
                engine_one = min(ours)
            timed_row(f"encode {name} once, 1 thread", ours, "tiktoken encode_ordinary", theirs, at_least=5)
        for pattern, label in ((QWEN2, "Qwen2's: engine's regex matcher"), (LLAMA3, "Llama 3's: cl100k's scanner")):
            own_regex_row(trained_tokenizer(texts, vocab_size, "quick" if quick else "full", pattern), pattern, label,
                          texts, megabytes, shakespeare, repeat, timed_row)
        if enc.encode_ordinary_batch(texts, num_threads=threads) != ids:
            raise RuntimeError("tiktoken batch ids differ from engine ids")
        ours, theirs = runs_interleaved(
            lambda: tokenizer.encode_batch(texts, threads=threads),
            lambda: enc.encode_ordinary_batch(texts, num_threads=threads), 2 if quick else 3,
            engine_setup=unseen(tokenizer, shakespeare, threads),
            peer_setup=lambda: enc.encode_ordinary_batch(shakespeare, num_threads=threads))
        timed_row(f"encode {megabytes:.0f} MB once, {threads} threads", ours, "tiktoken encode_ordinary_batch",
                  theirs, at_least=3)
    except ImportError:
        pass
    if threads >= 2:
        if [a.tolist() for a in tokenizer.encode_batch(texts, threads=2)] != ids:
            raise RuntimeError("engine ids on 2 threads differ from 1 thread")
        # five rounds each: a two-thread run needs both cores free, the row most hurt by other work
        two, one = runs_interleaved(lambda: tokenizer.encode_batch(texts, threads=2),
                                    lambda: tokenizer.encode_batch(texts, threads=1), 5,
                                    engine_setup=unseen(tokenizer, shakespeare, 2), peer_setup=stdlib_warmup)
        timed_row(f"encode {megabytes:.0f} MB once, 2 threads", two, "engine on 1 thread", one, at_least=1.8)
    try:
        import tokenizers
        from tokenizers import pre_tokenizers, trainers

        from engine.tokenizers.interop import save_hf_tokenizer_json

        path = save_hf_tokenizer_json(tokenizer, CACHE / f"hf-{vocab_size}.json")
        hf = tokenizers.Tokenizer.from_file(str(path))
        # ids checked on the first 200 files: one more full HF pass would take longer than the timing
        if [hf.encode(t, add_special_tokens=False).ids for t in texts[:200]] != ids[:200]:
            raise RuntimeError("Hugging Face ids differ from engine ids")

        def hf_warmup():  # as for engine: its cache of merged words emptied, a warm-up on other text
            hf.model._clear_cache()
            [hf.encode(t, add_special_tokens=False) for t in shakespeare]

        if engine_one is None:
            engine_one = best_of(lambda: tokenizer.encode_batch(texts, threads=1), repeat, setup=stdlib_warmup)
        # one HF run (it takes seconds); engine's is the fastest of the stdlib row's runs
        peer = best_of(lambda: [hf.encode(t, add_special_tokens=False) for t in texts], 1, setup=hf_warmup)
        row(f"encode {megabytes:.0f} MB once, 1 thread", engine_one, "HF tokenizers encode", peer, at_least=20)

        def train_hf():
            model = tokenizers.Tokenizer(tokenizers.models.BPE())
            model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<bos>", "<eos>"],
                                          show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
            model.train_from_iterator(texts, trainer)
            trained.append(model)

        trained = []

        ByteBpeTrainer(vocab_size=300, tie_break="hf").train(texts[:2])  # compile
        # two alternating rounds each: one HF run takes seconds, and a single engine run can meet a busy moment
        engine_train, peer = best_of_interleaved(
            lambda: ByteBpeTrainer(vocab_size=vocab_size, tie_break="hf").train(texts), train_hf, 1 if quick else 2)
        table = bytes_to_unicode()  # the timed run's merges must be engine's (same tie rule)
        ours = [("".join(table[c] for c in tokenizer.tokens[a]), "".join(table[c] for c in tokenizer.tokens[b]))
                for a, b in tokenizer.merges]
        if [tuple(m) for m in json.loads(trained[-1].to_str())["model"]["merges"]] != ours:
            raise RuntimeError("HF BpeTrainer merges differ from engine's (tie_break='hf')")
        row(f"train {vocab_size} vocab on {megabytes:.0f} MB, 1 thread", engine_train, "HF BpeTrainer", peer,
            at_least=8)
    except ImportError:
        pass
    short, long = "a" * 100_000, "a" * 1_000_000
    tokenizer.encode(short)
    t_long, t_short = best_of_interleaved(lambda: tokenizer.encode(long), lambda: tokenizer.encode(short), 5)
    row("encode 'a' * 1e6 vs 'a' * 1e5", t_long, "engine 'a' * 1e5", t_short, at_most=11, ratio=t_long / t_short)
    return out


if __name__ == "__main__":
    CACHE.mkdir(exist_ok=True)
    for r in rows(quick="--quick" in sys.argv):
        print(f"{r['benchmark']:<40} engine {r['engine_s']:8.3f}s  {r['peer']:<32} {r['peer_s']:8.3f}s  "
              f"ratio {r['ratio']:6.2f}  target {r['target']}")
