"""Review checks of causal windows and epochs against SPEC §5–§6, with hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from engine.corpus import Partition
from engine.errors import ConfigurationError
from engine.kernels import shuffle as shuffle_kernels
from engine.store import EncodedDocument
from engine.windows import CausalWindowConfig, gather_windows
from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch


@pytest.mark.parametrize("start", [2**63 - 1, 2**63 - 2, 2**62, 10, 9])
def test_gather_windows_rejects_starts_whose_end_overflows(start):
    # start + T wraps past int64 for start = 2^63 - 1; it must still be refused, never read.
    values = np.arange(10, dtype=np.uint32)
    offsets = np.array([0, 10], dtype=np.int64)
    with pytest.raises(ConfigurationError, match="not a complete window"):
        gather_windows(values, offsets, [0], [start], 1)


def test_gather_windows_accepts_the_last_complete_start():
    values = np.arange(10, dtype=np.uint32)
    offsets = np.array([0, 10], dtype=np.int64)
    inputs, targets = gather_windows(values, offsets, [0], [8], 1)
    assert inputs.tolist() == [[8]] and targets.tolist() == [[9]]


@pytest.mark.parametrize(
    ("seed", "n", "permutation", "state_after"),
    [
        (0, 5, [2, 3, 1, 4, 0], 8709371129873690708),
        (7, 5, [4, 1, 3, 0, 2], 8709371129873690715),
        (2**64 - 1, 5, [2, 0, 3, 4, 1], 8709371129873690707),
        (0, 10, [6, 3, 2, 9, 8, 1, 4, 7, 0, 5], 10372713005361028285),
        (2**64 - 1, 2, [1, 0], 11400714819323198484),
        (7, 1, [0], 7),
        (7, 0, [], 7),
    ],
)
def test_fisher_yates_matches_hand_computed_permutations(seed, n, permutation, state_after):
    values = np.arange(n, dtype=np.int64)
    state = shuffle_kernels.fisher_yates_shuffle(values, np.uint64(seed))
    assert values.tolist() == permutation
    assert int(state) == state_after


def test_splitmix64_first_outputs_for_seed_zero():
    out = np.empty(3, dtype=np.uint64)
    shuffle_kernels.splitmix64_fill(np.uint64(0), out)
    assert out.tolist() == [16294208416658607535, 7960286522194355700, 487617019471545679]


@pytest.mark.parametrize(
    ("tokens", "T", "S", "expected"),
    [
        ([0, 41, 42, 43, 44, 1], 3, 1, (3, [43, 44, 1])),
        ([0, 41, 42, 43, 44, 1], 3, 2, (4, [44, 1])),
        (list(range(11)), 2, 5, (10, [10])),
        (list(range(10)), 2, 5, None),
        ([5, 6], 1, 1, (1, [6])),
        ([5, 6], 1, 3, None),
        ([5], 1, 1, (0, [5])),
    ],
)
def test_incomplete_tail_start_and_tokens(tokens, T, S, expected):
    tail = CausalWindowConfig(T, S).incomplete_tail(np.array(tokens, dtype=np.uint32))
    assert (None if tail is None else (tail.start, tail.tokens.tolist())) == expected


def test_worked_epoch_seed_7_state_after():
    docs = [
        EncodedDocument("train-a", Partition.TRAIN, np.array([0, 10, 11, 12, 1], dtype=np.uint32)),
        EncodedDocument("train-b", Partition.TRAIN, np.array([0, 20, 21, 1], dtype=np.uint32)),
    ]
    epoch = MiniBatchEpoch.build(docs, "train", windows=CausalWindowConfig(2, 1),
                                 batches=MiniBatchConfig(3, BatchOrder.shuffled(7)))
    origins = [(p.document_id, p.start) for b in epoch for p in b.provenance]
    assert origins == [("train-b", 1), ("train-a", 1), ("train-b", 0), ("train-a", 0), ("train-a", 2)]
    assert epoch.shuffle_state_after == 8709371129873690715
