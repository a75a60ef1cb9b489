"""Peak memory of ``engine prepare`` does not grow with the corpus: 0.25 GB vs 2 GB (quick: 50 vs 400 MB);
grows by at most 16 bytes per document (1M vs 4M tiny documents; quick: 200k vs 1M); and one
single-line document of 1,000 MB (quick: 200 MB) stays under 1.5 GB peak RSS (its text is read from
the file part by part, its ids go to a file and become a store file page by page).

Each size is generated once into ``bench/.cache`` (scripts/make_big_corpus.py: random words from a
fixed 5,000-word vocabulary, so the word-type table is the same size for both), then encoded by
``engine prepare CORPUS --hash-split 0.9,0.05,0.05 --tokenizer bpe --merges 200`` in a child
process. Peak RSS is that child's ``ru_maxrss`` (``getrusage(RUSAGE_CHILDREN)`` in a tiny launcher
process, so nothing of the benchmark's own memory is counted).
Streaming keeps it at a few chunks per thread plus the word-type table and O(documents) id sets,
so the two peaks must be within 1.5x of each other while the corpus grows 8x.

    python bench/bench_memory.py            # 250 MB and 2,000 MB
    python bench/bench_memory.py --quick    # 50 MB and 400 MB
    pytest bench/bench_memory.py --benchmark-only
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:  # run as a script: timing.py sits beside this file
    sys.path.insert(0, str(BENCH_DIR))
from timing import row  # noqa: E402

ROOT = BENCH_DIR.parent
CACHE = BENCH_DIR / ".cache"

SIZES_MB = (250, 2000)
QUICK_SIZES_MB = (50, 400)
RSS_RATIO_LIMIT = 1.5
# One long document (#16: 1 GB under 1.5 GB peak RSS): its text stays in the file, is decoded part by
# part, encoded span by span into a file of ids and written as a store file page by page, so the peak
# is that of a small run plus a few spans, whatever the document's size.
LONG_PEAK_RSS_GB = 1.5


# A small launcher runs the job and reports getrusage(RUSAGE_CHILDREN): a child's ru_maxrss starts at
# its parent's RSS at fork time, so the parent must be tiny (not pytest, not the corpus generator).
LAUNCHER = (
    "import resource, subprocess, sys;"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode;"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)"
)


DOCUMENT_COUNTS = (1_000_000, 4_000_000)
QUICK_DOCUMENT_COUNTS = (200_000, 1_000_000)
BYTES_PER_DOCUMENT_LIMIT = 16
ONE_DOCUMENT_MB = 1000
QUICK_ONE_DOCUMENT_MB = 200


def corpus(size_mb: int, *, name: str = "big", extra: tuple[str, ...] = ()) -> Path:
    """``bench/.cache/<name>-<size>.jsonl``, generated on first use (in its own process)."""
    path = CACHE / f"{name}-{size_mb}.jsonl"
    if not path.exists():
        size = ("--size-mb", str(size_mb)) if "--documents" not in extra else ()
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_big_corpus.py"), *size, *extra,
                        "--out", str(path)], check=True, stdout=subprocess.DEVNULL)
    return path


def tiny_documents(count: int) -> Path:
    """``count`` documents of 4-40 bytes each (what per-document memory is measured on)."""
    return corpus(count, name="tiny", extra=("--documents", str(count), "--doc-bytes", "4,40"))


def one_document(size_mb: int) -> Path:
    """One document of ``size_mb`` MB on one line."""
    return corpus(size_mb, name="one", extra=("--one-document",))


def peak_rss_of_prepare(path: Path, *, threads: int = 2, merges: int = 200, tokenizer: str = "bpe",
                        split: str = "0.9,0.05,0.05") -> tuple[float, float]:
    """Run ``engine prepare`` on ``path`` in a child process: (peak RSS in MB, seconds)."""
    with tempfile.TemporaryDirectory(prefix="engine-mem-") as out:
        cmd = [sys.executable, "-m", "engine", "prepare", str(path), "--hash-split", split,
               "--tokenizer", tokenizer, "--merges", str(merges), "--threads", str(threads), "--quiet",
               "--out", out]
        start = time.perf_counter()
        launched = subprocess.run([sys.executable, "-c", LAUNCHER, *cmd], capture_output=True, text=True)
        seconds = time.perf_counter() - start
        max_rss_kib, code = launched.stdout.split()
        if launched.returncode != 0 or code != "0":
            raise RuntimeError(f"engine prepare {path} failed ({code}): {launched.stderr[-2000:]}")
    return int(max_rss_kib) / 1024.0, seconds  # ru_maxrss is in KiB on Linux


def measure(sizes_mb=SIZES_MB, *, threads: int = 2) -> list[dict]:
    results = []
    for size in sizes_mb:
        path = corpus(size)
        rss, seconds = peak_rss_of_prepare(path, threads=threads)
        results.append({"size_mb": size, "bytes": path.stat().st_size, "peak_rss_mb": rss, "seconds": seconds})
    return results


def per_document(counts=DOCUMENT_COUNTS, *, threads: int = 2) -> dict:
    """Peak RSS of prepare on two counts of tiny documents, and the bytes each extra document costs
    (after a small run, so that compiling the kernels on a first run is in neither peak)."""
    peak_rss_of_prepare(tiny_documents(10_000), threads=threads)
    (few, few_s), (many, many_s) = (peak_rss_of_prepare(tiny_documents(n), threads=threads) for n in counts)
    return {"counts": counts, "peak_rss_mb": (few, many), "seconds": (few_s, many_s),
            "bytes_per_document": (many - few) * 2**20 / (counts[1] - counts[0])}


def long_document(size_mb: int = ONE_DOCUMENT_MB, *, threads: int = 2) -> dict:
    """Peak RSS of prepare (byte-level BPE fitted on it) on one single-line document of ``size_mb`` MB."""
    path = one_document(size_mb)
    # A small run first: kernels compiled, and its peak is the base the long document adds to.
    base, _ = peak_rss_of_prepare(tiny_documents(10_000), threads=threads, tokenizer="byte-bpe")
    rss, seconds = peak_rss_of_prepare(path, threads=threads, tokenizer="byte-bpe", split="1,0,0")
    return {"size_mb": size_mb, "peak_rss_mb": rss, "base_rss_mb": base, "seconds": seconds,
            "rss_per_byte": (rss - base) * 2**20 / (size_mb * 1e6)}


def rows(quick: bool) -> list[dict]:
    """For ``engine bench``: the large corpus against the small one (ratio = peak RSS large / small), the
    bytes per extra document, and one long document's peak RSS per byte."""
    small, large = measure(QUICK_SIZES_MB if quick else SIZES_MB)
    docs = per_document(QUICK_DOCUMENT_COUNTS if quick else DOCUMENT_COUNTS)
    one = long_document(QUICK_ONE_DOCUMENT_MB if quick else ONE_DOCUMENT_MB)
    few, many = docs["counts"]
    return [row(
        f"prepare peak RSS per extra document, {many:,} vs {few:,} tiny documents "
        f"({docs['peak_rss_mb'][1]:,.0f} vs {docs['peak_rss_mb'][0]:,.0f} MB)",
        docs["seconds"][1], f"engine on {few:,} documents", docs["seconds"][0],
        ratio=docs["bytes_per_document"], at_most=BYTES_PER_DOCUMENT_LIMIT, note="bytes per document",
        bytes_per_document=docs["bytes_per_document"],
    ), row(
        f"prepare peak RSS, one {one['size_mb']:,} MB single-line document, byte-level BPE "
        f"({one['peak_rss_mb']:,.0f} MB; {one['base_rss_mb']:,.0f} MB on 10,000 tiny documents)",
        one["seconds"], "the 1.5 GB bound", one["seconds"], ratio=one["peak_rss_mb"] / 1024, at_most=LONG_PEAK_RSS_GB,
        note="peak RSS in GB", long_document_peak_rss_mb=one["peak_rss_mb"], rss_per_byte=one["rss_per_byte"],
    ), row(
        f"prepare peak RSS, {large['size_mb']:,} MB vs {small['size_mb']:,} MB corpus "
        f"({large['peak_rss_mb']:,.0f} vs {small['peak_rss_mb']:,.0f} MB)",
        large["seconds"], f"engine on the {small['size_mb']:,} MB corpus", small["seconds"],
        ratio=large["peak_rss_mb"] / small["peak_rss_mb"], at_most=RSS_RATIO_LIMIT, note="peak RSS ratio",
        small_peak_rss_mb=small["peak_rss_mb"], large_peak_rss_mb=large["peak_rss_mb"],
    )]


# -- the bounds of issue 28: the type table, one unbroken piece, escaped long lines ----------------
# Each runs in a child under LAUNCHER-like code that prints its own base and peak RSS (KiB), so the
# rows are peak minus what the input itself holds.

TYPE_COUNT = 1_000_000
QUICK_TYPE_COUNT = 200_000
BYTES_PER_TYPE_LIMIT = 48  # beyond the type's own bytes (engine.tokenizers.type_table: 40 by design)
PIECE_MB = 32  # "ab" * 16M: one piece of 32 MB (quick: 8 MB)
QUICK_PIECE_MB = 8
# Peak beyond the text over the span (STREAM_CHARS characters) a fit cuts one piece into: a span of one
# unbroken piece is one type of 2 Mi characters, whose merge training holds ~140 bytes per character
# (the same peak at 8 and 32 MB pieces). Encoding is held to the same multiple: byte-level BPE merges
# a piece window by window (engine.kernels.bpe_merge), what remains is ~5 bytes per byte of the piece.
PIECE_SPAN_LIMIT = 160
ESCAPED_LINE_MB = 64  # one JSONL line of runs of escaped backslashes, scaled down from 1,000 MB
QUICK_ESCAPED_LINE_MB = 16

TYPES_CHILD = """
import resource, sys
import numpy as np
from engine.tokenizers.base import FitOptions, trainer_for
from engine.tokenizers.streaming import training_batches
from engine.tokenizers.type_table import count_types
count, distinct = int(sys.argv[1]), sys.argv[2] == "distinct"
rng = np.random.default_rng(28)
vocabulary = ["".join(w) for w in rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=(5000, 8)).tolist()]
trainer = trainer_for("bpe", FitOptions(unknown="<unk>"))
def batches():  # tiny documents of one 8-letter word: all distinct, or drawn from 5,000
    for start in range(0, count, 10_000):
        k = min(10_000, count - start)
        letters = rng.integers(97, 123, size=(k, 8), dtype=np.uint8)
        yield ([bytes(row).decode() for row in letters] if distinct else
               [vocabulary[i] for i in rng.integers(0, 5000, size=k).tolist()])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
table = count_types(trainer, training_batches(trainer, batches()), 2)
print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(table), table.nbytes())
"""

PIECE_CHILD = """
import resource, sys, time
import numpy as np
from engine.steps import fit_from_table
from engine.tokenizers.base import FitOptions, trainer_for
from engine.tokenizers.streaming import STREAM_CHARS, training_batches
from engine.tokenizers.type_table import count_types
kind, mb, step = sys.argv[1], int(sys.argv[2]), sys.argv[3]
trainer = trainer_for(kind, FitOptions(merges=50, unknown="<unk>"))
small = trainer.train(["ab" * 1000 + " abba cab"])  # kernels compiled, a tokenizer to encode with
small.encode("ab" * 10_000)
text = "ab" * (mb * 500_000)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if step == "fit":
    table = count_types(trainer, training_batches(trainer, [[text]]), 2)
    tok = trainer.train_from_table(table) if hasattr(trainer, "train_from_table") else trainer.train_from_counts(
        table.types(), table.counts())
else:
    ids = small.encode(text)
print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, STREAM_CHARS, time.perf_counter() - start)
"""


def _child_rss(code: str, *args: str) -> list[float]:
    """Run ``code`` in a fresh interpreter: the numbers it prints (base and peak RSS in KiB first)."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"memory child {args} failed: {done.stderr[-2000:]}")
    return [float(v) for v in done.stdout.split()]


def type_table_bytes(count: int = TYPE_COUNT) -> dict:
    """Peak RSS per distinct type beyond its own 8 bytes: ``count`` tiny documents of distinct random
    8-letter words against the same count drawn from 5,000 words (same reading, same batches)."""
    start = time.perf_counter()
    base_d, peak_d, types_d, nbytes = _child_rss(TYPES_CHILD, str(count), "distinct")
    seconds = time.perf_counter() - start
    base_v, peak_v, types_v, _ = _child_rss(TYPES_CHILD, str(count), "vocabulary")
    extra = ((peak_d - base_d) - (peak_v - base_v)) * 1024 / (types_d - types_v)
    arrays = nbytes / types_d - 8
    # The larger of the two: a peak difference can hide part of the table under the other run's
    # transient peak, while the arrays' capacity is what the table holds at its largest.
    return {"types": int(types_d), "peak_rss_mb": (peak_d - base_d) / 1024, "vocabulary_peak_rss_mb":
            (peak_v - base_v) / 1024, "rss_bytes_per_type": extra - 8, "table_bytes_per_type": arrays,
            "bytes_per_type": max(extra - 8, arrays), "seconds": seconds}


def unbroken_piece(kind: str, step: str, mb: int = PIECE_MB) -> dict:
    """Peak RSS beyond the text of fitting on (``step`` fit) or encoding (encode) one piece ``"ab" * N``
    of ``mb`` MB with ``kind``, in bytes per byte of the span (``STREAM_CHARS`` characters) and of the piece."""
    base, peak, span_chars, seconds = _child_rss(PIECE_CHILD, kind, str(mb), step)
    extra = (peak - base) * 1024
    return {"kind": kind, "step": step, "piece_mb": mb, "extra_mb": extra / 2**20, "span_bytes": span_chars,
            "per_span_byte": extra / span_chars, "per_piece_byte": extra / (mb * 1e6), "seconds": seconds}


def escaped_line(mb: int = ESCAPED_LINE_MB) -> Path:
    """One JSONL line of ``mb`` MB whose text is runs of escaped backslashes (8 MiB of ``\\\\`` each,
    4 Mi backslashes) between words: the reader finds its cuts by the parity of the backslashes."""
    path = CACHE / f"escaped-{mb}.jsonl"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        run = b"\\\\" * (1 << 22) + b" word "
        with open(path, "wb") as fh:
            fh.write(b'{"id": "escaped", "text": "')
            for _ in range(max(1, mb * 10**6 // len(run))):
                fh.write(run)
            fh.write(b'"}\n')
    return path


def escaped_long_line(mb: int = ESCAPED_LINE_MB, *, threads: int = 2) -> dict:
    """Peak RSS of prepare (byte-level BPE) on one ``mb`` MB line of escaped backslash runs."""
    path = escaped_line(mb)
    base, _ = peak_rss_of_prepare(tiny_documents(10_000), threads=threads, tokenizer="byte-bpe")
    rss, seconds = peak_rss_of_prepare(path, threads=threads, tokenizer="byte-bpe", split="1,0,0")
    return {"size_mb": path.stat().st_size / 1e6, "peak_rss_mb": rss, "base_rss_mb": base, "seconds": seconds}


def bound_rows(quick: bool) -> list[dict]:
    """For ``engine bench --only memory_bounds``: the type table's bytes per type, one unbroken piece
    fitted and encoded (bytes of peak per byte of span), and an escaped long line against 1.5 GB."""
    types = type_table_bytes(QUICK_TYPE_COUNT if quick else TYPE_COUNT)
    out = [row(
        f"fit type table: peak RSS per distinct type beyond its 8 bytes, {types['types']:,} random-letter types vs "
        f"5,000 (bpe count_types, 2 threads; peak {types['peak_rss_mb']:,.0f} vs {types['vocabulary_peak_rss_mb']:,.0f} "
        f"MB over the start, {types['rss_bytes_per_type']:.0f} B a type; the arrays' capacity "
        f"{types['table_bytes_per_type']:.0f} B a type, the larger shown)",
        types["seconds"], "the 48-byte bound", types["seconds"], ratio=types["bytes_per_type"],
        at_most=BYTES_PER_TYPE_LIMIT, note="bytes per type", **types)]
    mb = QUICK_PIECE_MB if quick else PIECE_MB
    for kind in ("bpe", "byte-bpe"):
        fit = unbroken_piece(kind, "fit", mb)
        out.append(row(
            f"fit {kind} on one unbroken piece 'ab' * {mb // 2}M ({mb} MB): peak RSS beyond the text "
            f"({fit['extra_mb']:,.0f} MB) per byte of the {fit['span_bytes'] / 2**20:.0f} MiB span it is cut into",
            fit["seconds"], f"{PIECE_SPAN_LIMIT}x the span", fit["seconds"], ratio=fit["per_span_byte"],
            at_most=PIECE_SPAN_LIMIT, note="bytes per span byte", **fit))
    for kind in ("bpe", "byte-bpe"):
        encode = unbroken_piece(kind, "encode", mb)
        out.append(row(
            f"encode one unbroken piece 'ab' * {mb // 2}M ({mb} MB) with a trained {kind}: peak RSS beyond the text "
            f"({encode['extra_mb']:,.0f} MB, {encode['per_piece_byte']:.1f} B per byte of the piece) per byte of the "
            f"{encode['span_bytes'] / 2**20:.0f} MiB span",
            encode["seconds"], f"{PIECE_SPAN_LIMIT}x the span", encode["seconds"], ratio=encode["per_span_byte"],
            at_most=PIECE_SPAN_LIMIT, note="bytes per span byte", **encode))
    line = escaped_long_line(QUICK_ESCAPED_LINE_MB if quick else ESCAPED_LINE_MB)
    out.append(row(
        f"prepare peak RSS, one {line['size_mb']:,.0f} MB JSONL line of escaped-backslash runs (scaled down from "
        f"1,000 MB), byte-level BPE ({line['peak_rss_mb']:,.0f} MB; {line['base_rss_mb']:,.0f} MB on 10,000 tiny "
        "documents)", line["seconds"], "the 1.5 GB bound of a 1,000 MB line", line["seconds"],
        ratio=line["peak_rss_mb"] / 1024, at_most=LONG_PEAK_RSS_GB, note="peak RSS in GB", **line))
    return out


def report(results: list[dict]) -> str:
    lines = [f"{'corpus':>10}  {'peak RSS':>10}  {'time':>8}  {'MB/s':>7}"]
    for r in results:
        lines.append(f"{r['bytes'] / 1e6:>7,.0f} MB  {r['peak_rss_mb']:>7,.0f} MB  {r['seconds']:>7.1f}s"
                     f"  {r['bytes'] / 1e6 / r['seconds']:>7.1f}")
    ratio = results[-1]["peak_rss_mb"] / results[0]["peak_rss_mb"]
    lines.append(f"peak RSS ratio {ratio:.2f} for a {results[-1]['bytes'] / results[0]['bytes']:.1f}x larger corpus "
                 f"(limit {RSS_RATIO_LIMIT})")
    return "\n".join(lines)


def bench_once(benchmark, measured, quick_args, full_args, key: str, limit: float) -> dict:
    """One measurement (quick unless ENGINE_BENCH_FULL is set), kept in the benchmark's extra info;
    ``measured[key]`` must be at most ``limit``."""
    args = quick_args if os.environ.get("ENGINE_BENCH_FULL") is None else full_args
    result = benchmark.pedantic(lambda: measured(args), rounds=1, iterations=1)
    print(f"\n{result}")
    benchmark.extra_info[measured.__name__] = result
    assert result[key] <= limit, result
    return result


def test_memory_per_document_is_a_few_bytes(benchmark):
    bench_once(benchmark, per_document, QUICK_DOCUMENT_COUNTS, DOCUMENT_COUNTS, "bytes_per_document",
               BYTES_PER_DOCUMENT_LIMIT)


def test_one_long_document_stays_under_the_bound(benchmark):
    bench_once(benchmark, long_document, QUICK_ONE_DOCUMENT_MB, ONE_DOCUMENT_MB, "peak_rss_mb", LONG_PEAK_RSS_GB * 1024)


def test_peak_rss_does_not_grow_with_the_corpus(benchmark):
    quick = os.environ.get("ENGINE_BENCH_FULL") is None
    results = benchmark.pedantic(lambda: measure(QUICK_SIZES_MB if quick else SIZES_MB), rounds=1, iterations=1)
    print("\n" + report(results))
    benchmark.extra_info["results"] = results
    assert results[-1]["peak_rss_mb"] <= RSS_RATIO_LIMIT * results[0]["peak_rss_mb"], report(results)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="peak RSS of engine prepare at two corpus sizes")
    parser.add_argument("--quick", action="store_true", help="50 MB and 400 MB instead of 250 MB and 2,000 MB")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=("corpus", "documents", "long", "bounds"), help="one measurement only")
    args = parser.parse_args()
    if args.only in (None, "corpus"):
        print(report(measure(QUICK_SIZES_MB if args.quick else SIZES_MB, threads=args.threads)))
    if args.only in (None, "documents"):
        print(per_document(QUICK_DOCUMENT_COUNTS if args.quick else DOCUMENT_COUNTS, threads=args.threads))
    if args.only in (None, "long"):
        print(long_document(QUICK_ONE_DOCUMENT_MB if args.quick else ONE_DOCUMENT_MB, threads=args.threads))
    if args.only in (None, "bounds"):
        for measured in bound_rows(args.quick):
            print(f"{measured['benchmark']}: {measured['ratio']:.2f} ({measured['target']})")
