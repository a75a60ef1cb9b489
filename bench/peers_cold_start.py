"""First runs on an empty Numba cache beside the same runs with the cache filled.

A new machine, container or CI job starts with no compiled kernels: the first run of a command
compiles what it uses (later runs load it from the cache). Each case here runs in a fresh
subprocess with its own temporary ``NUMBA_CACHE_DIR``: first cold (the cache is empty), then warm
(the same cache, now filled by the cold run). The row's ratio is cold / warm, shown for
information: the target <= 4x is retired (``INFO``).

- ``engine prepare`` on the bundled corpus (README's main command: data/corpus.jsonl and
  data/splits.json, classic ``bpe`` tokenizer): wall time of the whole command, process start and
  imports included.
- ``engine tokenizers train --kind bpe --level byte --vocab-size 4096`` on Tiny Shakespeare
  (the default ``gpt2`` pre-tokenizer): wall time of the whole command.
- the first ``pack_documents`` of a process: 50,000 documents of log-normal lengths (mean ~500
  tokens, as in peers_packing.py; ~25M tokens) into rows of 2048 by best-fit decreasing; time of
  the call itself (building the input is left out).

Quick mode runs each pair once; full mode three times, keeping each side's fastest (other work on
the machine only ever adds time). ``python bench/bench_cold_start.py`` prints the rows.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import row, shakespeare_path

ROOT = Path(__file__).resolve().parents[1]
# Information rows: compiling a kernel costs Numba about 0.1 s or more, so a first run is bounded by
# compilation, which only compiling before it (`engine warmup`, once per install) removes.
INFO = ("cold / warm; was <= 4x, retired: a first run is compile time (Numba, >= ~0.1 s a kernel), "
        "which `engine warmup` once after installing removes")
PACK_DOCUMENTS = 50_000
BYTE_VOCAB = 4096

# Run in the subprocess: build the documents, then time the process's first pack_documents.
PACK_SCRIPT = f"""
import json, sys, time
import numpy as np
from engine.packing import pack_documents
rng = np.random.default_rng(0)
lengths = np.clip(np.round(rng.lognormal(np.log(500) - 0.5, 1.0, {PACK_DOCUMENTS})), 1, 8192).astype(np.int64)
offsets = np.zeros(lengths.shape[0] + 1, np.int64)
np.cumsum(lengths, out=offsets[1:])
values = (np.arange(int(offsets[-1]), dtype=np.int64) % 50_000).astype(np.uint32)
ids = [str(i) for i in range(lengths.shape[0])]
start, cpu = time.perf_counter(), time.process_time()
packed = pack_documents((values, offsets, ids), 2048)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
json.dump({{"seconds": seconds, "cpu": cpu, "rows": packed.rows}}, sys.stdout)
"""


def _environment(cache_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = cache_dir
    # This checkout's engine, whatever is installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str], cache_dir: str, cwd: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of ``python args...`` with the given cache; raises on failure."""
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=_environment(cache_dir), capture_output=True,
                          text=True, check=False)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, cpu, done.stdout


def _prepare(cache_dir: str, work: str) -> tuple[float, float]:
    out = Path(work) / "out"
    seconds, cpu, _ = _run(["-m", "engine", "prepare", str(ROOT / "data" / "corpus.jsonl"), "--splits",
                            str(ROOT / "data" / "splits.json"), "--out", str(out), "--quiet"], cache_dir, work)
    return seconds, cpu


def _byte_train(cache_dir: str, work: str) -> tuple[float, float]:
    seconds, cpu, _ = _run(["-m", "engine", "tokenizers", "train", str(shakespeare_path()), "--kind", "bpe",
                            "--level", "byte", "--vocab-size", str(BYTE_VOCAB), "--out", str(Path(work) / "byte.json")],
                           cache_dir, work)
    return seconds, cpu


def _pack(cache_dir: str, work: str) -> tuple[float, float]:
    _, _, stdout = _run(["-c", PACK_SCRIPT], cache_dir, work)
    result = json.loads(stdout)
    return float(result["seconds"]), float(result["cpu"])


CASES = [
    ("engine prepare (bundled corpus, bpe): first run / warm run", _prepare),
    (f"engine tokenizers train --level byte --vocab-size {BYTE_VOCAB} (Tiny Shakespeare): first run / warm run",
     _byte_train),
    (f"first pack_documents of a process ({PACK_DOCUMENTS // 1000}k documents, rows of 2048): empty cache / filled",
     _pack),
]


def cold_and_warm(case, rounds: int) -> dict[str, float]:
    """Fastest cold and warm wall seconds over ``rounds`` fresh caches, and the CPU seconds of those
    runs (``cold_cpu_s``, ``warm_cpu_s``: less disturbed than wall time when other work shares the cores)."""
    best = {"cold_s": float("inf"), "warm_s": float("inf"), "cold_cpu_s": 0.0, "warm_cpu_s": 0.0}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="engine-cold-") as tmp:
            cache_dir = os.path.join(tmp, "numba-cache")
            work = os.path.join(tmp, "work")
            for side in ("cold", "warm"):
                shutil.rmtree(work, ignore_errors=True)  # each run writes its outputs afresh
                os.makedirs(work)
                seconds, cpu = case(cache_dir, work)
                if seconds < best[f"{side}_s"]:
                    best[f"{side}_s"], best[f"{side}_cpu_s"] = seconds, cpu
    return best


def rows(quick: bool) -> list[dict]:
    rounds = 1 if quick else 3
    out = []
    for label, case in CASES:
        times = cold_and_warm(case, rounds)
        out.append(row(label, times["cold_s"], "the same, Numba cache filled", times["warm_s"],
                       ratio=times["cold_s"] / times["warm_s"], info=INFO,
                       cold_cpu_s=times["cold_cpu_s"], warm_cpu_s=times["warm_cpu_s"]))
    return out
