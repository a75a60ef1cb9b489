"""The kernels' Numba cache is keyed on every kernel source: an edit to a called kernel
invalidates its callers' cached machine code too (Numba alone keys each file on itself)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from engine import kernel_cache
from engine.kernel_cache import KERNEL_LOCATORS, sources_digest
from engine.kernels.bpe_train import train_merges

ROOT = Path(__file__).resolve().parents[1]


def test_engine_kernels_use_the_sources_stamp():
    locator = train_merges._cache._impl.locator
    assert isinstance(locator, KERNEL_LOCATORS)
    assert locator.get_source_stamp() == sources_digest()


def test_digest_covers_every_kernel_file_and_the_version(tmp_path):
    for name, text in (("a.py", "x = 1\n"), ("b.py", "y = 2\n"), ("notes.txt", "n\n")):
        (tmp_path / name).write_text(text)
    before = sources_digest(str(tmp_path), "1.0")
    assert sources_digest(str(tmp_path), "1.0") == before
    (tmp_path / "notes.txt").write_text("other\n")  # not a source: no effect
    assert sources_digest(str(tmp_path), "1.0") == before
    assert sources_digest(str(tmp_path), "1.1") != before
    (tmp_path / "b.py").write_text("y = 3\n")
    changed = sources_digest(str(tmp_path), "1.0")
    assert changed != before
    (tmp_path / "c.py").write_text("")
    assert sources_digest(str(tmp_path), "1.0") not in (before, changed)


CALLER = """
from numba import njit
from engine.kernels._probe_callee import callee

@njit(cache=True, nogil=True)
def caller(x):
    return callee(x) + 1
"""
CALLEE = """
from numba import njit

@njit(cache=True, nogil=True)
def callee(x):
    return x * {factor}
"""
RUN = "from engine.kernels._probe_caller import caller; print(caller(5))"


def test_editing_a_callee_recompiles_its_cached_caller(tmp_path):
    # A copy of the package with two probe kernels: caller (one file) inlines callee (another).
    shutil.copytree(ROOT / "engine", tmp_path / "engine", ignore=shutil.ignore_patterns("__pycache__"))
    probe = tmp_path / "engine" / "kernels"
    (probe / "_probe_caller.py").write_text(CALLER)
    (probe / "_probe_callee.py").write_text(CALLEE.format(factor=2))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run() == "11"
    assert run() == "11"  # from the cache
    (probe / "_probe_callee.py").write_text(CALLEE.format(factor=3))
    assert run() == "16"  # the caller's file is unchanged, yet its stale machine code is not reused
    assert kernel_cache.KERNEL_DIR == str(ROOT / "engine" / "kernels")
