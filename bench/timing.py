"""Shared timing for the side-by-side peer rows: best of N wall-clock runs."""

from __future__ import annotations

import time


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
