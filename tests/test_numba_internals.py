"""engine.numba_internals: the one door to Numba's undocumented parts, checked at import."""

from __future__ import annotations

import ast
import tomllib
import types
from pathlib import Path

import numba
import numpy as np
import pytest

from engine import numba_internals
from engine.kernels.windows import first_bad_offset

ROOT = Path(__file__).resolve().parent.parent


def test_this_numba_has_every_internal():
    numba_internals.check()
    assert tuple(int(p) for p in numba.__version__.split(".")[:2]) == numba_internals.TESTED_NUMBA


def test_a_missing_internal_is_named():
    with pytest.raises(ImportError) as error:
        numba_internals.check(event=types.SimpleNamespace(__name__="numba.core.event", Listener=object),
                              compiler=types.SimpleNamespace(__name__="numba.core.compiler"))
    message = str(error.value)
    assert "numba.core.event.register" in message
    assert "numba.core.compiler.CompileResult.entry_point" in message
    assert "numba.core.compiler.Flags.no_cfunc_wrapper" in message
    assert "numba.core.event.Listener" not in message
    assert "tested with numba 0.68" in message


def test_a_locator_without_its_hooks_is_named():
    from numba.core import caching

    stand_in = types.SimpleNamespace(__name__="numba.core.caching", CacheImpl=caching.CacheImpl,
                                     UserProvidedCacheLocator=object, InTreeCacheLocator=caching.InTreeCacheLocator,
                                     UserWideCacheLocator=caching.UserWideCacheLocator)
    with pytest.raises(ImportError, match=r"UserProvidedCacheLocator\.from_function, "
                                          r"numba\.core\.caching\.UserProvidedCacheLocator\.get_source_stamp"):
        numba_internals.check(caching=stand_in)


def test_pyproject_bounds_numba_to_the_tested_releases():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    spec = next(r for r in pyproject["project"]["dependencies"] if r.startswith("numba"))
    major, minor = numba_internals.TESTED_NUMBA
    assert spec == f"numba>={major}.{minor},<{major}.{minor + 1}"


def test_compiled_entry_point_is_the_compiled_function():
    offsets = np.array([0, 5, 3, 9], dtype=np.int64)
    expected = first_bad_offset(offsets, 9)
    entry = numba_internals.compiled_entry_point(first_bad_offset, (numba.typeof(offsets), numba.int64))
    assert entry is not None and entry(offsets, 9) == expected
    assert numba_internals.compiled_entry_point(first_bad_offset, (numba.float32,)) is None
    assert numba_internals.compiled_entry_point(len, ()) is None


def test_no_other_module_reaches_numba_internals():
    """Only engine/numba_internals.py imports ``numba.core`` (or llvmlite beyond ``ir``)."""
    offenders = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        if path.name == "numba_internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                          if name.startswith("numba.core") or name.startswith("numba.np")]
    assert offenders == []
