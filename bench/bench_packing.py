"""Packing plan and dense masks beside their peers (see peers_packing.py for the workloads).

Run: ``pytest bench/bench_packing.py --benchmark-only`` (ENGINE_BENCH_QUICK=1: 100k documents).
Each group holds engine and its peer from the same run; compare their means for the ratio.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from engine.masks import attention_mask, mask_buffer
from engine.packing import plan_packing
from peers_packing import ROW_LENGTH, document_lengths, mask_segments, numpy_mask, python_bfd

COUNT = 100_000 if os.environ.get("ENGINE_BENCH_QUICK") else 1_000_000


@pytest.fixture(scope="module")
def lengths():
    return document_lengths(COUNT)


@pytest.fixture(scope="module")
def mask_case():
    segment_ids = mask_segments()
    rows, length = segment_ids.shape
    return segment_ids, mask_buffer(rows, length), np.tril(np.ones((length, length), np.bool_))


@pytest.mark.benchmark(group="bfd-plan")
def test_bfd_plan_engine(benchmark, lengths):
    plan = benchmark(plan_packing, lengths, ROW_LENGTH)
    benchmark.extra_info["fill_efficiency"] = plan.fill_efficiency


@pytest.mark.benchmark(group="bfd-plan")
def test_bfd_plan_plain_python(benchmark, lengths):
    _, _, rows = benchmark.pedantic(python_bfd, args=(lengths,), rounds=1, iterations=1)
    assert rows == plan_packing(lengths, ROW_LENGTH).rows


@pytest.mark.benchmark(group="dense-mask")
def test_dense_mask_engine(benchmark, mask_case):
    segment_ids, out, _ = mask_case
    benchmark(attention_mask, segment_ids, device="cpu", out=out)


@pytest.mark.benchmark(group="dense-mask")
def test_dense_mask_fill_bandwidth(benchmark, mask_case):
    _, out, _ = mask_case
    benchmark(out.fill, False)


@pytest.mark.benchmark(group="dense-mask")
def test_dense_mask_numpy_broadcast(benchmark, mask_case):
    segment_ids, out, tril = mask_case
    benchmark(numpy_mask, segment_ids, out, tril)
