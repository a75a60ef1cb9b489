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
    parser.add_argument("--only", choices=("corpus", "documents", "long"), help="one measurement only")
    args = parser.parse_args()
    if args.only in (None, "corpus"):
        print(report(measure(QUICK_SIZES_MB if args.quick else SIZES_MB, threads=args.threads)))
    if args.only in (None, "documents"):
        print(per_document(QUICK_DOCUMENT_COUNTS if args.quick else DOCUMENT_COUNTS, threads=args.threads))
    if args.only in (None, "long"):
        print(long_document(QUICK_ONE_DOCUMENT_MB if args.quick else ONE_DOCUMENT_MB, threads=args.threads))
