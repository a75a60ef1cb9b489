"""``ruff check`` (configured in pyproject.toml, ``[tool.ruff]``) passes on the project's code.

ruff comes with the test extra, like pytest itself, so this runs wherever the suite does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "engine", "tests", "bench", "scripts"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"ruff check found problems:\n{result.stdout}{result.stderr}"
