"""Packed epochs and block masks beside their peers (see peers_packed_epoch.py for the workloads).

Run: ``pytest bench/bench_packed_epoch.py --benchmark-only``. Each group holds engine and its peer
from the same run; compare their means for the ratio. The block-mask group uses [2, 4096] so
torch's ``create_block_mask`` finishes in seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from peers_packed_epoch import BATCH, ROW_LENGTH, flattening_collator, packed_epoch


@pytest.fixture(scope="module")
def epoch():
    return packed_epoch()


@pytest.fixture(scope="module")
def segments(epoch):
    return np.ascontiguousarray(epoch.materialise(0, 2).segment_ids)


@pytest.mark.benchmark(group="packed-batch")
def test_packed_batch_engine(benchmark, epoch):
    out = (np.empty((BATCH, ROW_LENGTH), np.uint32), np.empty((BATCH, ROW_LENGTH), np.uint32),
           np.empty((BATCH, ROW_LENGTH), np.int32), np.empty((BATCH, ROW_LENGTH), np.int32),
           np.empty((BATCH, ROW_LENGTH), np.uint8))
    benchmark(epoch.batch, 3, out=out)


@pytest.mark.benchmark(group="packed-batch")
def test_packed_batch_flattening_loop(benchmark, epoch):
    inputs = benchmark(flattening_collator, epoch, 3)[0]
    np.testing.assert_array_equal(inputs, epoch.batch(3).inputs)


@pytest.mark.benchmark(group="block-mask")
def test_block_mask_engine(benchmark, segments):
    pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    from engine.torch import block_mask

    benchmark(block_mask, segments)


@pytest.mark.benchmark(group="block-mask")
def test_block_mask_create_block_mask(benchmark, segments):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    from torch.nn.attention.flex_attention import create_block_mask

    from engine.torch import document_causal_mask_mod

    rows, length = segments.shape
    mod = document_causal_mask_mod(torch.from_numpy(segments))
    benchmark.pedantic(create_block_mask, args=(mod, rows, 1, length, length), kwargs={"device": "cpu"},
                       rounds=1, iterations=1)
