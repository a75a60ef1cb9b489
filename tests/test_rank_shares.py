"""One rank rule for every batch source (``engine.checks.rank_rows``): windows, packed epochs and
mixtures split a batch into the same contiguous shares, and refuse a world size wider than the
batch with the same BatchError."""

from __future__ import annotations

import numpy as np
import pytest

from engine import BatchOrder, CausalWindowConfig, MiniBatchConfig, MiniBatchEpoch
from engine.checks import rank_rows
from engine.errors import BatchError, ConfigurationError
from engine.mixing import Mixture
from engine.packed import PackedEpoch
from engine.partition import Partition
from engine.store import EncodedDocument

B = 5


def documents(seed: int, lengths=(9, 14, 6, 21, 11, 8)):
    rng = np.random.default_rng(seed)
    return [EncodedDocument(f"d{seed}-{k}", Partition.TRAIN, rng.integers(0, 300, size=n).astype(np.uint32))
            for k, n in enumerate(lengths)]


def sources():
    """A window epoch, a packed epoch and a mixture of both, every one with batches of B rows."""
    windows = MiniBatchEpoch.build(documents(1), "train", windows=CausalWindowConfig(4, 2),
                                   batches=MiniBatchConfig(B, BatchOrder.shuffled(3)))
    packed = PackedEpoch.build(documents(2), "train", row_length=8, batches=MiniBatchConfig(B, BatchOrder.shuffled(4)))
    window_rows = MiniBatchEpoch.build(documents(5), "train", windows=CausalWindowConfig(4, 4),
                                       batches=MiniBatchConfig(1, BatchOrder.shuffled(6)))
    mixture = Mixture([(window_rows, 1.0), (windows.with_order(BatchOrder.shuffled(7)), 2.0)], batch_size=B)
    return {"windows": windows, "packed": packed, "mixture": mixture}


@pytest.mark.parametrize("name", ["windows", "packed", "mixture"])
def test_shares_are_contiguous_cover_the_batch_and_differ_by_one_row_at_most(name):
    source = sources()[name]
    whole = source.batch(0)
    assert whole.inputs.shape[0] == B
    for world in range(1, B + 1):
        shares = [source.batch(0, rank=r, world_size=world) for r in range(world)]
        assert [s.inputs.shape[0] for s in shares] == [(r + 1) * B // world - r * B // world for r in range(world)]
        np.testing.assert_array_equal(np.concatenate([s.inputs for s in shares]), whole.inputs)
        np.testing.assert_array_equal(np.concatenate([s.targets for s in shares]), whole.targets)


@pytest.mark.parametrize("name", ["windows", "packed", "mixture"])
def test_a_world_wider_than_the_batch_is_the_same_error_everywhere(name):
    source = sources()[name]
    with pytest.raises(BatchError) as info:
        source.batch(0, rank=0, world_size=B + 1)
    assert str(info.value) == (f"batch 0 has {B} rows, fewer than world_size={B + 1}: every rank needs at least "
                               "one row (expected a smaller world size or a larger batch)")
    with pytest.raises(ConfigurationError, match="^pass both rank and world_size, or neither$"):
        source.batch(1, rank=0)
    with pytest.raises(ConfigurationError, match="^need world_size >= 1 and 0 <= rank < world_size, got rank=3"):
        source.batch(1, rank=3, world_size=3)


def test_rank_rows_exact_values():
    assert rank_rows(10, 17, None, None, batch=2) == (10, 17)
    assert [rank_rows(10, 17, r, 3, batch=2) for r in range(3)] == [(10, 12), (12, 14), (14, 17)]
    assert rank_rows(10, 17, 6, 7, batch=2) == (16, 17)
    with pytest.raises(BatchError, match="^batch 2 has 7 rows, fewer than world_size=8: "):
        rank_rows(10, 17, 0, 8, batch=2)
    with pytest.raises(ConfigurationError, match="pass both"):
        rank_rows(10, 17, None, 2, batch=2)
