"""Epochs and mini-batches (the epoch rules of engine.batches): the seed-7 worked epoch, Fisher–Yates, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch, Provenance
from engine.corpus import Partition
from engine.errors import BatchError, ConfigurationError
from engine.kernels import shuffle as shuffle_kernels
from engine.store import EncodedDocument
from engine.windows import CausalWindowConfig
from tests import naive_windows as naive

TRAIN = Partition.TRAIN


def doc(doc_id, tokens, partition=TRAIN):
    return EncodedDocument(doc_id, partition, np.array(tokens, dtype=np.uint32))


WORKED_DOCS = [doc("train-a", [0, 10, 11, 12, 1]), doc("train-b", [0, 20, 21, 1])]


def build(documents=WORKED_DOCS, seed=7, T=2, S=1, B=3, partition="train"):
    order = BatchOrder.sequential() if seed is None else BatchOrder.shuffled(seed)
    return MiniBatchEpoch.build(documents, partition, windows=CausalWindowConfig(T, S),
                                batches=MiniBatchConfig(B, order))


def origins(epoch):
    return [f"{p.document_id}@{p.start}" for batch in epoch for p in batch.provenance]


# -- the worked epoch ---------------------------------------------------------------------------
# Two train documents, train-a = [0, 10, 11, 12, 1] and train-b = [0, 20, 21, 1], T = 2, S = 1, B = 3.
# train-a (5 tokens) gives starts 0, 1, 2 and train-b (4 tokens) starts 0, 1: five windows, listed
# a@0, a@1, a@2, b@0, b@1. Fisher–Yates seeded with 7 draws j = sample_below(upper + 1) for
# upper = 4, 3, 2, 1 and gets j = 2, 0, 0, 1 (four SplitMix64 outputs, none rejected, so the state
# after is 7 + 4 * 0x9E3779B97F4A7C15 mod 2^64 = 8709371129873690715):
#   swap 4<->2: a@0 a@1 b@1 b@0 a@2;  swap 3<->0: b@0 a@1 b@1 a@0 a@2;
#   swap 2<->0: b@1 a@1 b@0 a@0 a@2;  swap 1<->1: unchanged.
# Batch 0 is the first three windows (3 rows x 2 = 6 target tokens); batch 1 holds the remaining
# two (4 target tokens): smaller, never padded to 3 rows, never dropped.


def test_seed_7_worked_epoch():
    epoch = build()
    assert epoch.window_count == 5 and len(epoch) == 2 and epoch.batch_count == 2
    assert origins(epoch) == ["train-b@1", "train-a@1", "train-b@0", "train-a@0", "train-a@2"]
    first, last = epoch.batch(0), epoch.batch(1)
    assert first.shape == (3, 2) and last.shape == (2, 2)
    assert first.token_count == 6 and last.token_count == 4
    assert first.inputs.tolist() == [[20, 21], [10, 11], [0, 20]]
    assert first.targets.tolist() == [[21, 1], [11, 12], [20, 21]]
    assert last.inputs.tolist() == [[0, 10], [11, 12]]
    assert last.targets.tolist() == [[10, 11], [12, 1]]
    assert first.provenance[0] == Provenance(TRAIN, 1, "train-b", 1)
    assert last.provenance == [Provenance(TRAIN, 0, "train-a", 0), Provenance(TRAIN, 0, "train-a", 2)]
    assert first.inputs[2].tolist() == [0, 20] and first.targets[0].tolist() == [21, 1]
    assert first.inputs.dtype == np.uint32 and first.inputs.flags.c_contiguous


def test_seed_7_state_after_matches_twin():
    _, state = naive.fisher_yates(list(range(5)), 7)
    assert build().shuffle_state_after == state
    assert build(seed=None).shuffle_state_after is None


def test_sequential_order_is_document_then_start():
    assert origins(build(seed=None)) == ["train-a@0", "train-a@1", "train-a@2", "train-b@0", "train-b@1"]
    document_index, start = build(seed=None).descriptors()
    assert document_index.tolist() == [0, 0, 0, 1, 1] and start.tolist() == [0, 1, 2, 0, 1]


def test_same_seed_replays_other_seed_changes_order_not_membership():
    a, b, c = build(), build(), build(seed=8)
    assert np.array_equal(a.positions, b.positions)
    assert all(np.array_equal(x.inputs, y.inputs) for x, y in zip(a, b))
    assert origins(c) != origins(a) and sorted(origins(c)) == sorted(origins(a))
    assert [bt.shape for bt in c] == [(3, 2), (2, 2)]


def test_widths_of_online_minibatch_and_full_grouping():
    assert [b.width for b in build(B=1)] == [1, 1, 1, 1, 1]
    assert [b.width for b in build(B=3)] == [3, 2]
    assert [b.width for b in build(B=5)] == [5]
    assert [b.width for b in build(B=64)] == [5]


# -- Fisher–Yates against the twin -----------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 200), seed=st.integers(0, 2**64 - 1))
def test_shuffle_kernel_matches_naive(n, seed):
    items = np.arange(n, dtype=np.int64) * 3 + 5
    want, state = naive.fisher_yates(items.tolist(), seed)
    state_after = shuffle_kernels.fisher_yates_shuffle(items, np.uint64(seed))
    assert items.tolist() == want and int(state_after) == state


def test_shuffle_kernel_matches_naive_beyond_lookahead():
    items = np.arange(5000, dtype=np.int64)
    want, state = naive.fisher_yates(items.tolist(), 2**64 - 1)
    assert int(shuffle_kernels.fisher_yates_shuffle(items, np.uint64(2**64 - 1))) == state
    assert items.tolist() == want


@settings(max_examples=30, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 12), max_size=8),
    T=st.integers(1, 4),
    S=st.integers(1, 3),
    B=st.integers(1, 6),
    seed=st.one_of(st.none(), st.integers(0, 2**64 - 1)),
)
def test_epoch_matches_naive(lengths, T, S, B, seed):
    rng = np.random.default_rng(len(lengths) * 31 + T)
    documents = [doc(f"d{i}", rng.integers(0, 1000, size=n)) for i, n in enumerate(lengths)]
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    values = np.concatenate([d.tokens for d in documents]).tolist() if documents else []
    descriptors = naive.enumerate_descriptors(offsets, T, S)
    if seed is not None:
        descriptors, _ = naive.fisher_yates(descriptors, seed)
    epoch = build(documents, seed=seed, T=T, S=S, B=B)
    assert epoch.window_count == len(descriptors) and len(epoch) == -(-len(descriptors) // B)
    for k in range(len(epoch)):
        chunk = descriptors[k * B : (k + 1) * B]
        batch = epoch.batch(k)
        want_inputs, want_targets = naive.gather(values, offsets, chunk, T)
        assert batch.inputs.tolist() == want_inputs and batch.targets.tolist() == want_targets
        assert [(p.document_index, p.start) for p in batch.provenance] == chunk
        assert batch.document_ids == [f"d{d}" for d, _ in chunk]


# -- resumption, out=, ranks, dtype ----------------------------------------------------------


def long_documents(count=7, length=40):
    rng = np.random.default_rng(0)
    return [doc(f"doc-{i}", rng.integers(0, 50_000, size=length + i)) for i in range(count)]


def test_batch_k_alone_equals_iteration():
    epoch = build(long_documents(), seed=123, T=8, S=3, B=5)
    everything = list(epoch)
    resumed = build(long_documents(), seed=123, T=8, S=3, B=5)
    for k in (len(everything) - 1, 3, 0):
        assert np.array_equal(resumed.batch(k).inputs, everything[k].inputs)
        assert resumed.batch(k).provenance == everything[k].provenance


def test_out_buffers_are_written_and_returned_as_views():
    epoch = build(long_documents(), seed=1, T=8, S=3, B=5)
    out = (np.zeros((5, 8), dtype=np.uint32), np.zeros((5, 8), dtype=np.uint32))
    last = len(epoch) - 1
    for k in (0, last):
        batch = epoch.batch(k, out)
        fresh = epoch.batch(k)
        assert np.shares_memory(batch.inputs, out[0]) and np.shares_memory(batch.targets, out[1])
        assert np.array_equal(batch.inputs, fresh.inputs) and np.array_equal(batch.targets, fresh.targets)
    assert epoch.batch(last).width < 5  # the smaller final batch fits a full-size buffer
    wide = (np.zeros((5, 8), dtype=np.int64), np.zeros((5, 8), dtype=np.int64))
    assert epoch.batch(0, wide).inputs.dtype == np.int64
    assert epoch.batch(0, dtype=np.int64).inputs.tolist() == epoch.batch(0).inputs.tolist()
    with pytest.raises(ConfigurationError, match="dtype int64, expected uint32"):
        epoch.batch(0, wide, dtype=np.uint32)
    with pytest.raises(ConfigurationError, match=r"shape \(4, 8\), expected \(5, 8\)"):
        epoch.batch(0, (np.zeros((4, 8), np.uint32), np.zeros((4, 8), np.uint32)))
    with pytest.raises(ConfigurationError, match="C-contiguous"):
        epoch.batch(0, (np.zeros((8, 5), np.uint32).T, np.zeros((5, 8), np.uint32)))
    with pytest.raises(ConfigurationError, match="pair"):
        epoch.batch(0, np.zeros((5, 8), np.uint32))


def test_a_remembered_buffer_pair_changed_in_place_is_checked_again():
    """batch(k, out) remembers the pair it accepted; a pair reshaped or retyped in place since is
    refused (or taken) as a new pair would be, never written with the old shape or dtype."""
    epoch = build(long_documents(), seed=1, T=8, S=3, B=5)
    out = (np.zeros((5, 8), dtype=np.uint32), np.zeros((5, 8), dtype=np.uint32))
    for k in range(len(epoch)):  # remembered from the first call on, the last batch is smaller
        batch = epoch.batch(k, out)
        assert batch.width == epoch.batch(k).width and batch.inputs.shape == (batch.width, 8)
        assert np.array_equal(batch.inputs, epoch.batch(k).inputs)
        assert np.array_equal(batch.targets, epoch.batch(k).targets)
    out[0].shape = (10, 4)
    with pytest.raises(ConfigurationError, match=r"shape \(10, 4\), expected \(5, 8\)"):
        epoch.batch(1, out)
    out[0].shape = (5, 8)
    assert np.array_equal(epoch.batch(1, out).inputs, epoch.batch(1).inputs)
    out[1].dtype = np.int32  # the same bytes seen as int32: a pair of two dtypes is refused
    with pytest.raises(ConfigurationError, match="dtype"):
        epoch.batch(2, out)
    out[0].dtype = np.int32
    assert epoch.batch(2, out).inputs.tolist() == epoch.batch(2).inputs.tolist()


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 6])
def test_rank_shares_are_disjoint_and_cover_each_batch(world_size):
    epoch = build(long_documents(), seed=99, T=4, S=5, B=6)
    for k in range(len(epoch)):
        whole = epoch.batch(k)
        if whole.width < world_size:  # the last batch may be narrower than the ranks
            with pytest.raises(BatchError, match=f"batch {k} has {whole.width} rows, fewer than world_size="):
                epoch.batch(k, rank=0, world_size=world_size)
            continue
        shares = [epoch.batch(k, rank=r, world_size=world_size) for r in range(world_size)]
        assert np.array_equal(np.concatenate([s.inputs for s in shares]), whole.inputs)
        assert sum((s.provenance for s in shares), []) == whole.provenance
        widths = [s.width for s in shares]
        assert sum(widths) == whole.width and max(widths) - min(widths) <= 1
        assert widths == [(r + 1) * whole.width // world_size - r * whole.width // world_size
                          for r in range(world_size)]


def test_a_final_batch_narrower_than_the_ranks_is_an_error_not_empty_shares():
    epoch = build(seed=7, B=3)  # final batch has 2 rows
    shares = [epoch.batch(0, rank=r, world_size=3) for r in range(3)]
    assert [s.shape for s in shares] == [(1, 2)] * 3
    with pytest.raises(BatchError) as info:
        epoch.batch(1, rank=0, world_size=3)
    assert str(info.value) == ("batch 1 has 2 rows, fewer than world_size=3: every rank needs at least one row "
                               "(expected a smaller world size or a larger batch)")
    shares = [epoch.batch(1, rank=r, world_size=2) for r in range(2)]
    assert [p for s in shares for p in s.provenance] == epoch.batch(1).provenance


@pytest.mark.parametrize("rank, world_size", [(2, 2), (-1, 2), (0, 0), (1, None), (None, 2), (0.0, 1)])
def test_bad_rank(rank, world_size):
    with pytest.raises(ConfigurationError, match="rank"):
        build().batch(0, rank=rank, world_size=world_size)


@pytest.mark.parametrize("k", [-1, 2, 10**20])
def test_batch_index_out_of_range_names_k_and_count(k):
    with pytest.raises(BatchError, match=rf"batch {k} is out of range: this epoch has 2 batches"):
        build().batch(k)


def test_batch_index_must_be_integer():
    with pytest.raises(BatchError, match="integer"):
        build().batch(1.0)
    with pytest.raises(BatchError, match="batch True is out of range"):
        build().batch(True)


# -- errors and edge cases -------------------------------------------------------------------


def test_document_of_another_partition_is_named():
    docs = [WORKED_DOCS[0], doc("valid-a", [0, 5, 6, 1], Partition.VALIDATION)]
    with pytest.raises(BatchError, match="'valid-a' .documents.1.. belongs to partition 'validation'.*'train'"):
        build(docs)


def test_repeated_document_id_is_named():
    with pytest.raises(BatchError, match="'train-a' is repeated .documents 0 and 2."):
        build([WORKED_DOCS[0], WORKED_DOCS[1], doc("train-a", [0, 1])])


def test_empty_document_id():
    with pytest.raises(BatchError, match="empty id"):
        build([doc("", [0, 1, 2])])


@pytest.mark.parametrize("size", [0, -3, True, 2.5])
def test_bad_batch_size(size):
    with pytest.raises(BatchError, match="batch size"):
        MiniBatchConfig(size, BatchOrder.sequential())


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "7", True])
def test_bad_seed(seed):
    with pytest.raises(ConfigurationError, match="seed"):
        BatchOrder.shuffled(seed)


def test_bad_partition_and_documents():
    with pytest.raises(ConfigurationError, match="unknown partition"):
        build(partition="dev")
    with pytest.raises(ConfigurationError, match="TokenStore or a list"):
        MiniBatchEpoch.build(42, "train", windows=CausalWindowConfig(2), batches=MiniBatchConfig(3))
    with pytest.raises(BatchError, match="expected an EncodedDocument"):
        build([("train-a", [0, 1, 2])])
    with pytest.raises(BatchError, match="token ids"):
        build([doc("a", [0, 1]).__class__("a", TRAIN, np.array([0, -1, 2]))])


def test_validation_partition_epoch_and_generator_source():
    docs = (doc(f"v{i}", [0, 7, 8, 9, 1], Partition.VALIDATION) for i in range(2))
    epoch = build(docs, partition=Partition.VALIDATION, seed=3)
    assert epoch.window_count == 6 and {p.partition for b in epoch for p in b.provenance} == {Partition.VALIDATION}
    assert np.array_equal(epoch.with_order(epoch.order).positions, epoch.positions)


def test_documents_without_windows_and_empty_epoch():
    epoch = build([doc("a", []), doc("b", [0, 1]), doc("c", [0, 5, 1])], T=2)
    assert epoch.window_count == 1 and origins(epoch) == ["c@0"]
    empty = build([doc("a", [0, 1])], T=2)
    assert empty.window_count == 0 and len(empty) == 0 and list(empty) == []
    with pytest.raises(BatchError, match="valid: none"):
        empty.batch(0)
    assert build([], T=2).window_count == 0


def test_descriptors_are_read_only_and_8_bytes_per_window():
    epoch = build(long_documents(), seed=5, T=8)
    assert epoch.positions.dtype == np.int64 and epoch.positions.nbytes == 8 * epoch.window_count
    with pytest.raises(ValueError):
        epoch.positions[0] = 0


# -- epochs of a run (the seed rule of engine.batches) ------------------------------------------


def test_epoch_seed_rule_matches_splitmix64_outputs():
    # Epoch 0 uses the seed; epoch e >= 1 uses the e-th SplitMix64 output seeded with it.
    rng = naive.SplitMix64(7)
    outputs = [rng.next() for _ in range(3)]
    assert outputs == [7191089600892374487, 309689372594955804, 16616101746815609346]
    assert [BatchOrder.shuffled(7, epoch=e).epoch_seed for e in range(4)] == [7] + outputs
    assert BatchOrder.shuffled(2**64 - 1, epoch=1).epoch_seed == 16490336266968443936  # wraps mod 2^64
    assert str(BatchOrder.shuffled(7, epoch=2)) == "shuffled(seed=7, epoch=2)"
    assert str(BatchOrder.shuffled(7)) == "shuffled(seed=7)"
    assert BatchOrder.sequential().with_epoch(5) == BatchOrder.sequential()


def test_epochs_permute_the_same_windows_with_the_twin():
    documents = [doc(f"d{i}", list(range(10 * i, 10 * i + 7))) for i in range(5)]
    first = build(documents, seed=7, T=2, B=4)
    for e in range(4):
        epoch = first.with_epoch(e)
        assert epoch.order == BatchOrder.shuffled(7, epoch=e)
        expected, state = naive.fisher_yates(build(documents, seed=None, T=2, B=4).positions.tolist(),
                                             [7, 7191089600892374487, 309689372594955804,
                                              16616101746815609346][e])
        assert epoch.positions.tolist() == expected and epoch.shuffle_state_after == state
        assert sorted(epoch.positions.tolist()) == sorted(first.positions.tolist())
    assert first.with_epoch(1).positions.tolist() != first.positions.tolist()
    sequential = build(documents, seed=None, T=2, B=4)
    assert sequential.with_epoch(3) is sequential


def test_epoch_must_be_a_non_negative_integer():
    with pytest.raises(ConfigurationError, match="epoch must be >= 0"):
        BatchOrder.shuffled(7, epoch=-1)
    with pytest.raises(ConfigurationError, match="epoch must be an integer"):
        BatchOrder.shuffled(7, epoch=1.5)


# -- row dtypes -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int64])
def test_batch_dtypes_hold_the_same_ids(dtype):
    epoch = build()
    batch = epoch.batch(0, dtype=dtype)
    assert batch.inputs.dtype == dtype and batch.targets.dtype == dtype
    assert batch.inputs.tolist() == [[20, 21], [10, 11], [0, 20]]
    assert batch.targets.tolist() == [[21, 1], [11, 12], [20, 21]]
    out = (np.zeros((3, 2), dtype), np.zeros((3, 2), dtype))
    assert epoch.batch(1, out=out).inputs.tolist() == [[0, 10], [11, 12]]


def test_int32_rows_refuse_ids_past_2_31():
    epoch = build([doc("big", [1, 2**31, 3])], seed=None, T=1, B=2)
    assert epoch.batch(0, dtype=np.int64).inputs.tolist() == [[1], [2**31]]
    with pytest.raises(ConfigurationError, match="does not fit int32"):
        epoch.batch(0, dtype=np.int32)
    with pytest.raises(ConfigurationError, match="uint32, int32 or int64"):
        epoch.batch(0, dtype=np.int16)


# -- pickling -----------------------------------------------------------------------------------


def test_epoch_pickles_as_its_recipe_and_rebuilds_the_same_batches():
    import pickle

    epoch = build(seed=7).with_epoch(2)
    copy = pickle.loads(pickle.dumps(epoch))
    assert copy.order == BatchOrder.shuffled(7, epoch=2)
    assert copy.positions.tolist() == epoch.positions.tolist()
    assert [b.inputs.tolist() for b in copy] == [b.inputs.tolist() for b in epoch]


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
