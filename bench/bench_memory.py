"""Peak memory of ``engine prepare`` does not grow with the corpus: 0.25 GB vs 2 GB (quick: 50 vs 400 MB).

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


# A small launcher runs the job and reports getrusage(RUSAGE_CHILDREN): a child's ru_maxrss starts at
# its parent's RSS at fork time, so the parent must be tiny (not pytest, not the corpus generator).
LAUNCHER = (
    "import resource, subprocess, sys;"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode;"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)"
)


def corpus(size_mb: int) -> Path:
    """``bench/.cache/big-<size>.jsonl``, generated on first use (in its own process)."""
    path = CACHE / f"big-{size_mb}.jsonl"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_big_corpus.py"), "--size-mb", str(size_mb),
                        "--out", str(path)], check=True, stdout=subprocess.DEVNULL)
    return path


def peak_rss_of_prepare(path: Path, *, threads: int = 2, merges: int = 200) -> tuple[float, float]:
    """Run ``engine prepare`` on ``path`` in a child process: (peak RSS in MB, seconds)."""
    with tempfile.TemporaryDirectory(prefix="engine-mem-") as out:
        cmd = [sys.executable, "-m", "engine", "prepare", str(path), "--hash-split", "0.9,0.05,0.05",
               "--tokenizer", "bpe", "--merges", str(merges), "--threads", str(threads), "--quiet",
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


def rows(quick: bool) -> list[dict]:
    """For ``engine bench``: the large corpus against the small one (ratio = peak RSS large / small)."""
    small, large = measure(QUICK_SIZES_MB if quick else SIZES_MB)
    return [row(
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
    args = parser.parse_args()
    print(report(measure(QUICK_SIZES_MB if args.quick else SIZES_MB, threads=args.threads)))
