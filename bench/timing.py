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


def best_of_interleaved(engine_fn, peer_fn, rounds: int) -> tuple[float, float]:
    """Fastest of ``rounds`` runs each of ``engine_fn`` and ``peer_fn``, taken in turns, so both
    see the same moments of a shared machine; ``(engine_s, peer_s)``."""
    engine_s = peer_s = float("inf")
    for _ in range(rounds):
        engine_s = min(engine_s, best_of(engine_fn, 1))
        peer_s = min(peer_s, best_of(peer_fn, 1))
    return engine_s, peer_s


def row(benchmark: str, engine_s: float, peer: str, peer_s: float, *, at_least: float | None = None,
        at_most: float | None = None, engine_under_s: float | None = None, note: str = "",
        ratio: float | None = None, **extra) -> dict:
    """One row of ``engine bench``: ``ratio`` = ``peer_s / engine_s`` unless given; the target is
    numeric (``at_least`` / ``at_most`` bound the ratio, ``engine_under_s`` engine's seconds) and
    ``target`` is the text derived from it. ``extra`` fields (measurements) ride along."""
    from engine.commands.bench import target_text

    out = {"benchmark": benchmark, "engine_s": engine_s, "peer": peer, "peer_s": peer_s,
           "ratio": peer_s / engine_s if ratio is None else ratio, "at_least": at_least, "at_most": at_most,
           "engine_under_s": engine_under_s, "note": note, **extra}
    out["target"] = target_text(out)
    return out
