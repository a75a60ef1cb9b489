import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shakespeare_path() -> Path:
    """Tiny Shakespeare: $ENGINE_SHAKESPEARE, else the copy bundled in data/."""
    env = os.environ.get("ENGINE_SHAKESPEARE")
    if env:
        return Path(env)
    return ROOT / "data" / "tinyshakespeare.txt"


@pytest.fixture(scope="session")
def shakespeare_text() -> str:
    path = shakespeare_path()
    if not path.exists():
        pytest.fail(f"Tiny Shakespeare not found at {path}; set ENGINE_SHAKESPEARE to its path")
    return path.read_text(encoding="utf-8")
