"""engine.kernels.prefetch: a hint only; the kernels that use it give the same results."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from engine.kernels.prefetch import prefetch


@numba.njit
def _sum_ahead(values, table, ahead):
    """Sum ``values`` and ``table[i % rows, 1]``, prefetching ``ahead`` steps early (1-D to read, 2-D to write)."""
    total = 0
    rows = table.shape[0]
    for i in range(values.shape[0]):
        if i + ahead < values.shape[0]:
            prefetch(values, i + ahead, False)
            prefetch(table, ((i + ahead) % rows, 1), True)
        total += values[i] + table[i % rows, 1]
    return total


def test_prefetch_changes_nothing():
    values = np.arange(1000, dtype=np.int64)
    table = np.arange(64, dtype=np.uint64).reshape(32, 2)
    before = (values.copy(), table.copy())
    expected = int(values.sum()) + sum(int(table[i % 32, 1]) for i in range(1000))
    assert _sum_ahead(values, table, 16) == expected
    assert np.array_equal(values, before[0]) and np.array_equal(table, before[1])


def test_the_kind_of_prefetch_is_a_literal():
    @numba.njit
    def by_flag(values, write):
        prefetch(values, 0, write)

    with pytest.raises(numba.core.errors.TypingError):
        by_flag(np.zeros(4), bool(np.random.default_rng(0).integers(2)))
