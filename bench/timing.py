"""Shared pieces of the side-by-side peer rows: best of N wall-clock runs, bundled corpora."""

from __future__ import annotations

import os
import time
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def shakespeare_path() -> Path:
    """Tiny Shakespeare: $ENGINE_SHAKESPEARE, else the copy bundled in data/."""
    env = os.environ.get("ENGINE_SHAKESPEARE")
    return Path(env) if env else DATA_DIR / "tinyshakespeare.txt"


def best_of(fn, rounds: int, *, warmup: bool = False) -> float:
    """Fastest of ``rounds`` calls of ``fn`` in seconds; ``warmup`` runs it once untimed first
    (Numba compilation and caches stay out of the timing)."""
    if warmup:
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
