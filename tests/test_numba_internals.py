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


def test_a_numba_without_the_refcount_option_is_named():
    stand_in = types.SimpleNamespace(__name__="numba.core.options", DefaultOptions=object)
    with pytest.raises(ImportError, match=r"numba\.core\.options\.DefaultOptions\._nrt"):
        numba_internals.check(options=stand_in)


def _llvm_ir(option: bool) -> str:
    """The LLVM IR of a per-piece loop over inlined helpers that take an array (the shape of
    ``bpe_encode.piece_key``: a branch, a loop), compiled with ``_nrt`` = ``option``."""
    @numba.njit(inline="always")
    def word(values, i, n):
        if i + 8 <= values.shape[0]:
            return values[i] + values[i + 7]
        total = 0
        for j in range(n):
            total += values[i + j]
        return total

    @numba.njit(inline="always")
    def key(values, i, n):
        if n <= 7:
            return word(values, i, n)
        h = 0
        j = 0
        while j < n:
            h = h * 31 + word(values, i + j, min(8, n - j))
            j += 8
        return h

    @numba.njit(**{numba_internals.NO_REFCOUNT_OPTION: option})
    def loop(values, ends):
        total = 0
        pos = 0
        for k in range(ends.shape[0]):
            end = ends[k]
            if end - pos == 1:
                total += values[pos]
            else:
                total += key(values, pos, end - pos)
            pos = end
        return total

    values = np.arange(60, dtype=np.int64)
    expected = 0  # the same sums in plain Python, pieces [0, 1) [1, 5) [5, 30) [30, 60)
    pos = 0
    for end in (1, 5, 30, 60):
        n = end - pos
        if n == 1:
            expected += int(values[pos])
        else:
            def w(i, c):
                return int(values[i] + values[i + 7]) if i + 8 <= 60 else int(values[i:i + c].sum())
            if n <= 7:
                expected += w(pos, n)
            else:
                h = 0
                for j in range(0, n, 8):
                    h = h * 31 + w(pos + j, min(8, n - j))
                expected += h
        pos = end
    assert loop(values, np.array([1, 5, 30, 60], dtype=np.int64)) == expected
    (ir,) = loop.inspect_llvm().values()
    return ir.split("\ndefine ")[1]  # the function itself, not its Python wrapper


def test_the_refcount_option_takes_the_counts_out_of_a_loop():
    """What ``kernel(leaf=True)`` relies on: with ``_nrt`` off no reference count is taken in the loop."""
    assert "@NRT_incref" in _llvm_ir(True)
    assert "@NRT_incref" not in _llvm_ir(False) and "@NRT_decref" not in _llvm_ir(False)


def test_kernel_leaf_sets_the_option_and_every_other_kernel_keeps_counts():
    from engine.kernels import kernel

    def add(a, b):
        return a + b

    assert kernel(leaf=True)(add).targetoptions[numba_internals.NO_REFCOUNT_OPTION] is False
    assert kernel(add).targetoptions[numba_internals.NO_REFCOUNT_OPTION] is True
    assert kernel(inline="always")(add).targetoptions[numba_internals.NO_REFCOUNT_OPTION] is True


def test_a_leaf_calls_a_kernel_that_allocates():
    """A non-leaf kernel keeps its own setting when a leaf calls it (Numba would otherwise compile the
    callee without reference counting, and refuse its arrays)."""
    from engine.kernels.bpe_merge import build_pair_table, merge_word

    lefts = np.array([1, 3, 4], dtype=np.int64)
    rights = np.array([2, 1, 5], dtype=np.int64)
    made = np.array([3, 4, 6], dtype=np.int64)
    priorities = np.array([0, 1, 2], dtype=np.int64)
    pairs, nexts = build_pair_table(lefts, rights)

    @numba.njit(**{numba_internals.NO_REFCOUNT_OPTION: False})
    def leaf(parts, m, part_priority):
        return merge_word(parts, m, 2, False, pairs, nexts, lefts, rights, made, priorities, part_priority)

    parts = np.array([3, 1, 4, 5, 1, 2], dtype=np.int64)  # 3 1 4 5 (1 2) -> (3 1) 4 5 3 -> 4 (4 5) 3 -> 4 6 3
    m = leaf(parts, 6, np.empty(6, dtype=np.int64))  # longer than long_word: the path that allocates
    assert parts[:m].tolist() == [4, 6, 3]
