"""Reading a compressed corpus: the stdlib corpus as ``.jsonl.zst`` beside the same corpus as plain
``.jsonl``, both read whole by ``open_corpus`` (every document's id and text, the batches
``prepare`` reads): the fewest wall-clock seconds of interleaved runs (the speed: zstd decompresses
on a thread of its own beside the JSON parse), the fewest CPU seconds of all the process's threads
(the work, which the thread does not reduce), and the peak RSS of a child process that reads each.

Targets: reading ``.jsonl.zst`` at >= 0.8x the speed of the uncompressed file (zstandard level 3;
decompression streams one buffer at a time beside the JSON parse), and memory as flat as for plain
JSONL (the ``.zst`` reader's peak RSS at most 1.1x the plain one's: nothing is decompressed whole).

    python bench/bench_corpus_read.py            # best of 7
    python bench/bench_corpus_read.py --quick    # best of 3
    pytest bench/bench_corpus_read.py --benchmark-only
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:  # run as a script: timing.py sits beside this file
    sys.path.insert(0, str(BENCH_DIR))
from timing import row, runs_interleaved  # noqa: E402

ROOT = BENCH_DIR.parent
SPEED_AT_LEAST = 0.8
RSS_AT_MOST = 1.1  # .zst peak / plain peak
ZSTD_LEVEL = 3

# A child reads the corpus whole and prints its peak RSS (KiB) and the characters read.
READ_CHILD = (
    "import resource, sys; from engine.corpus import open_corpus;"
    "n = sum(len(d.text) for b in open_corpus(sys.argv[1], batch_documents=1024, batch_chars=1 << 20) for d in b);"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, n)"
)


def compressed_copy(plain: Path, folder: Path) -> Path:
    """``plain`` as ``corpus.jsonl.zst`` in ``folder`` (written as a stream, like ``zstd`` does)."""
    import zstandard

    out = folder / (plain.name + ".zst")
    with open(plain, "rb") as src, open(out, "wb") as dst:
        zstandard.ZstdCompressor(level=ZSTD_LEVEL).copy_stream(src, dst)
    return out


def cpu_seconds(engine_fn, peer_fn, rounds: int) -> tuple[float, float]:
    """Fewest CPU seconds (every thread of this process) of ``rounds`` runs each, taken in turns:
    other processes on a shared machine do not count."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for side, fn in enumerate((engine_fn, peer_fn)):
            start = time.process_time()
            fn()
            best[side] = min(best[side], time.process_time() - start)
    return best[0], best[1]


def read_all(path: Path) -> int:
    from engine.corpus import open_corpus

    return sum(len(d.text) for batch in open_corpus(path, batch_documents=1024, batch_chars=1 << 20) for d in batch)


def peak_rss(path: Path) -> tuple[float, float, int]:
    """(peak RSS in MB, seconds, characters read) of a child process reading ``path`` whole."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", READ_CHILD, str(path)], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    seconds = time.perf_counter() - start
    rss, chars = out.stdout.split()
    return int(rss) / 1024, seconds, int(chars)


def rows(quick: bool = False) -> list[dict]:
    from peers_store import stdlib_corpus_paths

    plain, _ = stdlib_corpus_paths()
    rounds = 3 if quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        packed = compressed_copy(plain, Path(tmp))
        assert read_all(packed) == read_all(plain)  # the same documents, and both files warm in the page cache
        zst_runs, plain_runs = runs_interleaved(lambda: read_all(packed), lambda: read_all(plain), rounds)
        zst_cpu, plain_cpu = cpu_seconds(lambda: read_all(packed), lambda: read_all(plain), rounds)
        (zst_rss, zst_s, zst_chars), (plain_rss, plain_s, plain_chars) = peak_rss(packed), peak_rss(plain)
        assert zst_chars == plain_chars
        mb = plain.stat().st_size / 1e6
        ratio_note = f"{mb:.0f} MB of JSONL, {packed.stat().st_size / 1e6:.1f} MB as zstd level {ZSTD_LEVEL}"
        return [
            row("read stdlib corpus .jsonl.zst (open_corpus, wall-clock)", min(zst_runs),
                "the same corpus as plain .jsonl", min(plain_runs), at_least=SPEED_AT_LEAST,
                note=f"{ratio_note}; speed of .zst / speed of plain; zstd decompresses on a thread of its own",
                engine_mb_s=mb / min(zst_runs), peer_mb_s=mb / min(plain_runs)),
            row("read stdlib corpus .jsonl.zst (open_corpus, CPU seconds of all threads)", zst_cpu,
                "the same corpus as plain .jsonl", plain_cpu, at_least=SPEED_AT_LEAST,
                note=f"{ratio_note}; the work, wherever it runs", engine_mb_s=mb / zst_cpu, peer_mb_s=mb / plain_cpu),
            row(f"peak RSS reading .jsonl.zst vs plain .jsonl ({zst_rss:,.0f} vs {plain_rss:,.0f} MB)", zst_s,
                "engine on the plain .jsonl", plain_s, ratio=zst_rss / plain_rss, at_most=RSS_AT_MOST,
                note="peak RSS ratio", zst_peak_rss_mb=zst_rss, plain_peak_rss_mb=plain_rss),
        ]


@pytest.fixture(scope="module")
def corpus_pair(stdlib_corpus, tmp_path_factory):
    plain, _ = stdlib_corpus
    return plain, compressed_copy(plain, tmp_path_factory.mktemp("zst"))


@pytest.mark.benchmark(group="corpus-read")
def test_read_zst(benchmark, corpus_pair):
    benchmark.pedantic(read_all, args=(corpus_pair[1],), rounds=5, iterations=1)


@pytest.mark.benchmark(group="corpus-read")
def test_read_plain(benchmark, corpus_pair):
    benchmark.pedantic(read_all, args=(corpus_pair[0],), rounds=5, iterations=1)


if __name__ == "__main__":
    for r in rows(quick="--quick" in sys.argv):
        print(f"{r['benchmark']}: engine {r['engine_s']:.3f}, {r['peer']} {r['peer_s']:.3f}, ratio {r['ratio']:.2f} "
              f"(target {r['target']})")
