"""Shared pieces of the side-by-side peer rows: best of N wall-clock runs, bundled corpora."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def shakespeare_path() -> Path:
    """Tiny Shakespeare: $ENGINE_SHAKESPEARE, else the copy bundled in data/."""
    env = os.environ.get("ENGINE_SHAKESPEARE")
    return Path(env) if env else DATA_DIR / "tinyshakespeare.txt"


@contextlib.contextmanager
def hf_parallelism(enabled: bool):
    """``TOKENIZERS_PARALLELISM`` for the rows inside, whatever another area set before (Hugging Face
    tokenizers reads it at every call): off for the one-thread rows, on for whole pipelines."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if enabled else "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


def best_of(fn, rounds: int, *, warmup: bool = False, setup=None) -> float:
    """Fastest of ``rounds`` calls of ``fn`` in seconds; ``warmup`` runs it once untimed first
    (Numba compilation and caches stay out of the timing); ``setup`` runs untimed before each call."""
    if warmup:
        fn()
    best = float("inf")
    for _ in range(rounds):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def best_of_interleaved(engine_fn, peer_fn, rounds: int) -> tuple[float, float]:
    """Fastest of ``rounds`` runs each of ``engine_fn`` and ``peer_fn``, taken in turns, so both
    see the same moments of a shared machine; ``(engine_s, peer_s)``."""
    engine_runs, peer_runs = runs_interleaved(engine_fn, peer_fn, rounds)
    return min(engine_runs), min(peer_runs)


def runs_interleaved(engine_fn, peer_fn, rounds: int, *, engine_setup=None,
                     peer_setup=None) -> tuple[list[float], list[float]]:
    """Seconds of ``rounds`` runs each of ``engine_fn`` and ``peer_fn``, taken in turns; each run
    after its side's ``setup`` (untimed: a fresh state, a warm-up). ``(engine runs, peer runs)``."""
    engine_runs, peer_runs = [], []
    for _ in range(rounds):
        for setup, fn, runs in ((engine_setup, engine_fn, engine_runs), (peer_setup, peer_fn, peer_runs)):
            if setup is not None:
                setup()
            start = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - start)
    return engine_runs, peer_runs


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def row(benchmark: str, engine_s: float, peer: str, peer_s: float, *, at_least: float | None = None,
        at_most: float | None = None, engine_under_s: float | None = None, note: str = "",
        ratio: float | None = None, **extra) -> dict:
    """One row of ``engine bench``: ``ratio`` = ``peer_s / engine_s`` unless given; the target is
    numeric (``at_least`` / ``at_most`` bound the ratio, ``engine_under_s`` engine's seconds) and
    ``target`` is the text derived from it. ``extra`` fields (measurements) ride along; ``info``
    (a one-line reason) makes the row information only: shown, never checked."""
    from engine.commands.bench import target_text

    out = {"benchmark": benchmark, "engine_s": engine_s, "peer": peer, "peer_s": peer_s,
           "ratio": peer_s / engine_s if ratio is None else ratio, "at_least": at_least, "at_most": at_most,
           "engine_under_s": engine_under_s, "note": note, **extra}
    out["target"] = target_text(out)
    return out
