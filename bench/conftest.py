"""Session fixtures for the benchmarks: Tiny Shakespeare and a stdlib corpus generated once.

``stdlib_corpus`` is written to ``bench/.cache/stdlib/`` the first time (a few seconds) and reused
afterwards; set ENGINE_STDLIB_CORPUS to a directory holding corpus.jsonl and splits.json to use
another one. ENGINE_SHAKESPEARE overrides the path of tinyshakespeare.txt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:  # so suites can import their peers_<area>.py helpers
    sys.path.insert(0, str(BENCH_DIR))

from timing import shakespeare_path  # noqa: E402


@pytest.fixture(scope="session")
def shakespeare_text() -> str:
    path = shakespeare_path()
    if not path.exists():
        pytest.fail(f"Tiny Shakespeare not found at {path}; set ENGINE_SHAKESPEARE to its path")
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def stdlib_corpus() -> tuple[Path, Path]:
    """(corpus.jsonl, splits.json) of the running Python's standard library (90/5/5 hash split)."""
    from peers_store import stdlib_corpus_paths

    return stdlib_corpus_paths()
