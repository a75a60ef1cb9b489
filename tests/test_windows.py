"""Causal windows (the window rule of engine.windows): worked examples, kernels vs plain-loop twins, sampling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.corpus import Partition
from engine.errors import BatchError, ConfigurationError
from engine.kernels import shuffle as shuffle_kernels, windows as kernels
from engine.store import EncodedDocument
from engine.windows import (
    CausalWindowConfig,
    document_window_counts,
    enumerate_windows,
    gather_windows,
    sample_windows,
    window_prefix_sums,
)
from tests import naive_windows as naive

# The worked document: BOS = 0, content 41 42 43 44, EOS = 1 (positions 0..5, n = 6).
WORKED = np.array([0, 41, 42, 43, 44, 1], dtype=np.uint32)


def pairs(config, tokens):
    return [(w.start, w.input.tolist(), w.target.tolist()) for w in config.windows(tokens)]


# -- worked examples --------------------------------------------------------------------------
# With T = 3 one window needs T + 1 = 4 source tokens, so the 6-token document has starts 0, 1, 2
# (count = (6 - 4) // 1 + 1 = 3); the third target ends with EOS (after 44 the document ends). Start
# 3 leaves [43, 44, 1], three tokens: too few to start a window, so it is the incomplete tail (those
# tokens are all inside earlier windows; nothing is padded). With S = 2 the candidates are 0, 2, 4:
# start 1 is skipped by the stride and start 4 leaves [44, 1], the tail.


def test_worked_pairs_T3_S1():
    config = CausalWindowConfig(3, 1)
    assert config.required_source_tokens == 4
    assert config.window_count(6) == 3
    assert pairs(config, WORKED) == [
        (0, [0, 41, 42], [41, 42, 43]),
        (1, [41, 42, 43], [42, 43, 44]),
        (2, [42, 43, 44], [43, 44, 1]),
    ]
    tail = config.incomplete_tail(WORKED)
    assert tail.start == 3 and tail.tokens.tolist() == [43, 44, 1]


def test_worked_pairs_T3_S2_skips_start_1():
    config = CausalWindowConfig(3, 2)
    assert pairs(config, WORKED) == [(0, [0, 41, 42], [41, 42, 43]), (2, [42, 43, 44], [43, 44, 1])]
    tail = config.incomplete_tail(WORKED)
    assert tail.start == 4 and tail.tokens.tolist() == [44, 1]


def test_worked_pairs_T2_S1():
    assert pairs(CausalWindowConfig(2), WORKED) == [
        (0, [0, 41], [41, 42]),
        (1, [41, 42], [42, 43]),
        (2, [42, 43], [43, 44]),
        (3, [43, 44], [44, 1]),
    ]
    assert CausalWindowConfig(2).incomplete_tail(WORKED).tokens.tolist() == [44, 1]


def test_short_document_has_no_pair_and_whole_tail():
    config = CausalWindowConfig(3)
    short = np.array([0, 61, 1], dtype=np.uint32)
    assert config.window_count(3) == 0 and pairs(config, short) == []
    tail = config.incomplete_tail(short)
    assert tail.start == 0 and tail.tokens.tolist() == [0, 61, 1]


def test_empty_content_document_bos_predicts_eos():
    config = CausalWindowConfig(1)
    assert pairs(config, np.array([0, 1], dtype=np.uint32)) == [(0, [0], [1])]
    assert config.incomplete_tail(np.array([0, 1], dtype=np.uint32)).tokens.tolist() == [1]


def test_exact_fit_with_large_stride_has_no_phantom_tail():
    config = CausalWindowConfig(3, 5)
    doc = np.array([0, 7, 8, 1], dtype=np.uint32)
    assert pairs(config, doc) == [(0, [0, 7, 8], [7, 8, 1])]
    assert config.incomplete_tail(doc) is None


def test_empty_slice_has_no_windows_and_no_tail():
    config = CausalWindowConfig(3)
    empty = np.empty(0, dtype=np.uint32)
    assert len(config.windows(empty)) == 0 and config.incomplete_tail(empty) is None


def test_windows_never_cross_documents():
    # [0,10,1] and [0,20,1] with T=2: [10,1] -> [1,0] would only come from a flattened stream.
    config = CausalWindowConfig(2)
    values = np.array([0, 10, 1, 0, 20, 1], dtype=np.uint32)
    offsets = np.array([0, 3, 6], dtype=np.int64)
    inputs, targets = gather_windows(values, offsets, *enumerate_windows(offsets, config), 2)
    assert inputs.tolist() == [[0, 10], [0, 20]] and targets.tolist() == [[10, 1], [20, 1]]
    assert [10, 1] not in inputs.tolist()


def test_partition_pair_totals_of_the_diagram():
    config = CausalWindowConfig(3)
    docs = {
        Partition.TRAIN: [[0, 41, 42, 43, 44, 1], [0, 51, 52, 1]],
        Partition.VALIDATION: [[0, 61, 62, 63, 1]],
        Partition.TEST: [[0, 71, 1]],
    }
    totals = {p: sum(len(config.windows(np.array(d, dtype=np.uint32))) for d in ds) for p, ds in docs.items()}
    assert totals == {Partition.TRAIN: 4, Partition.VALIDATION: 2, Partition.TEST: 0}
    tails = [config.incomplete_tail(np.array(d, dtype=np.uint32)) for d in docs[Partition.TRAIN]]
    assert [(t.start, t.tokens.tolist()) for t in tails] == [(3, [43, 44, 1]), (1, [51, 52, 1])]


def test_windows_are_zero_copy_views():
    doc = EncodedDocument("d", Partition.TRAIN, WORKED.copy())
    window = CausalWindowConfig(3).windows(doc)[1]
    assert np.shares_memory(window.input, doc.tokens) and np.shares_memory(window.target, doc.tokens)
    doc.tokens[2] = 99
    assert window.input.tolist() == [41, 99, 43]
    seq = CausalWindowConfig(3).windows(WORKED)
    assert seq[-1].start == 2 and [w.start for w in seq[0:3:2]] == [0, 2]
    with pytest.raises(IndexError):
        seq[3]


# -- configuration and counting --------------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((0, 1), "context length"),
        ((3, 0), "stride"),
        ((-1, 1), "context length"),
        ((2**64 - 1, 1), r"T \+ 1 must fit in 64 bits"),
        ((2**64, 1), "context length"),
        ((3, 2**64), "stride"),
        ((3.0, 1), "integer"),
        (("3", 1), "integer"),
        ((True, 1), "boolean"),
        ((3, None), "integer"),
    ],
)
def test_config_errors(args, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        CausalWindowConfig(*args)


def test_largest_context_length_is_accepted():
    config = CausalWindowConfig(2**63 - 2, np.int64(3))
    assert config.required_source_tokens == 2**63 - 1 and config.stride == 3


def test_window_count_at_64_bit_extremes():
    config = CausalWindowConfig(1, 1)
    assert config.window_count(2**64 - 1) == 2**64 - 2
    assert CausalWindowConfig(2**63 - 2, 1).window_count(2**64 - 1) == 2**63 + 1
    assert CausalWindowConfig(3, 2**63 - 1).window_count(2**64 - 1) == 2  # starts 0 and 2^63 - 1
    assert CausalWindowConfig(2**63 - 2, 2**63 - 1).window_count(2**63 - 2) == 0
    with pytest.raises(ConfigurationError, match="document length must be >= 0, got -1"):
        config.window_count(-1)


def test_kernel_counts_at_int64_extremes():
    offsets = np.array([0, 1, 2**63 - 1], dtype=np.int64)  # lengths 1 and 2^63 - 2
    for T, S, expected in [(1, 1, [0, 2**63 - 3]), (2**62, 2**62 - 1, [0, 1]), (2**63 - 3, 1, [0, 1]),
                           (2**63 - 2, 1, [0, 0])]:
        config = CausalWindowConfig(T, S)
        assert document_window_counts(offsets, config).tolist() == expected
        assert [config.window_count(n) for n in (1, 2**63 - 2)] == expected
        assert window_prefix_sums(offsets, config).tolist() == [0, expected[0], sum(expected)]


# -- kernels against their twins -------------------------------------------------------------


def random_partition(rng, documents, max_length):
    lengths = rng.integers(0, max_length + 1, size=documents)
    offsets = np.zeros(documents + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 2**32, size=int(offsets[-1]), dtype=np.uint32)
    return values, offsets


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    documents=st.integers(0, 12),
    max_length=st.integers(0, 30),
    T=st.integers(1, 8),
    S=st.integers(1, 9),
)
def test_kernels_match_naive(seed, documents, max_length, T, S):
    rng = np.random.default_rng(seed)
    values, offsets = random_partition(rng, documents, max_length)
    config = CausalWindowConfig(T, S)
    o = offsets.tolist()
    assert document_window_counts(offsets, config).tolist() == naive.window_counts(o, T, S)
    assert window_prefix_sums(offsets, config).tolist() == naive.window_prefix_sums(o, T, S)
    document_index, start = enumerate_windows(offsets, config)
    expected = naive.enumerate_descriptors(o, T, S)
    assert list(zip(document_index.tolist(), start.tolist())) == expected

    prefix = window_prefix_sums(offsets, config)
    positions = np.empty(int(prefix[-1]), dtype=np.int64)
    kernels.enumerate_positions(offsets, prefix, S, positions)
    assert positions.tolist() == [o[d] + s for d, s in expected]
    decoded_d, decoded_s = np.empty_like(positions), np.empty_like(positions)
    kernels.decode_positions(offsets, positions, decoded_d, decoded_s)
    assert [naive.decode_position(o, p) for p in positions.tolist()] == expected
    assert list(zip(decoded_d.tolist(), decoded_s.tolist())) == expected

    # Gather an arbitrary (repeated, reordered) list of descriptors.
    picks = rng.integers(0, max(len(expected), 1), size=7) if expected else np.empty(0, dtype=np.int64)
    chosen = [expected[i] for i in picks.tolist()]
    want_inputs, want_targets = naive.gather(values.tolist(), o, chosen, T)
    d = np.array([c[0] for c in chosen], dtype=np.int64)
    s = np.array([c[1] for c in chosen], dtype=np.int64)
    for dtype in (np.uint32, np.int64):
        inputs, targets = gather_windows(values, offsets, d, s, T, dtype=dtype)
        assert inputs.dtype == dtype and inputs.shape == (len(chosen), T)
        assert inputs.tolist() == want_inputs and targets.tolist() == want_targets
    inputs = np.empty((len(chosen), T), dtype=np.uint32)
    targets = np.empty_like(inputs)
    kernels.gather_positions(values, positions[picks] if expected else positions[:0], T, inputs, targets)
    assert inputs.tolist() == want_inputs and targets.tolist() == want_targets


def test_decode_skips_empty_documents():
    offsets = np.array([0, 0, 0, 4, 4, 9, 9], dtype=np.int64)
    positions = np.array([0, 1, 4, 8], dtype=np.int64)
    d, s = np.empty_like(positions), np.empty_like(positions)
    kernels.decode_positions(offsets, positions, d, s)
    assert d.tolist() == [2, 2, 4, 4] and s.tolist() == [0, 1, 0, 4]


def test_offsets_are_checked():
    values = np.zeros(5, dtype=np.uint32)
    for bad, fragment in [([1, 5], r"offsets\[0\] = 1"), ([0, 3, 2, 5], r"offsets\[2\] = 2"), ([0, 4], r"offsets\[1\] = 4")]:
        with pytest.raises(ConfigurationError, match=fragment):
            gather_windows(values, np.array(bad, dtype=np.int64), [0], [0], 1)
    with pytest.raises(ConfigurationError, match="uint32"):
        gather_windows(values.astype(np.int32), np.array([0, 5], dtype=np.int64), [0], [0], 1)


def test_gather_rejects_incomplete_or_unknown_windows():
    values = np.arange(9, dtype=np.uint32)
    offsets = np.array([0, 4, 9], dtype=np.int64)
    with pytest.raises(ConfigurationError, match="start 1 in document 0 .length 4. is not a complete window"):
        gather_windows(values, offsets, [1, 0], [0, 1], 3)
    with pytest.raises(ConfigurationError, match="document_index 2 is outside 0..1"):
        gather_windows(values, offsets, [2], [0], 1)
    with pytest.raises(ConfigurationError, match="start -1"):
        gather_windows(values, offsets, [1], [-1], 1)


def test_gather_writes_into_caller_arrays():
    values = np.arange(20, dtype=np.uint32)
    offsets = np.array([0, 10, 20], dtype=np.int64)
    out = (np.full((4, 3), 7, dtype=np.int64), np.full((4, 3), 7, dtype=np.int64))
    inputs, targets = gather_windows(values, offsets, [1, 0], [2, 0], 3, out=out)
    assert np.shares_memory(inputs, out[0]) and np.shares_memory(targets, out[1])
    assert out[0].tolist() == [[12, 13, 14], [0, 1, 2], [7, 7, 7], [7, 7, 7]]
    assert out[1][:2].tolist() == [[13, 14, 15], [1, 2, 3]]
    with pytest.raises(ConfigurationError, match="dtype"):
        gather_windows(values, offsets, [0], [0], 3, out=out, dtype=np.uint32)
    with pytest.raises(ConfigurationError, match="shape"):
        gather_windows(values, offsets, [0], [0], 2, out=out)
    with pytest.raises(ConfigurationError, match="C-contiguous"):
        gather_windows(values, offsets, [0], [0], 2, out=(out[0][:, :2], out[1][:, :2]))
    with pytest.raises(ConfigurationError, match="share memory"):
        gather_windows(values, offsets, [0], [0], 3, out=(out[0], out[0]))
    with pytest.raises(ConfigurationError, match="uint32, int32 or int64"):
        gather_windows(values, offsets, [0], [0], 3, dtype=np.float32)


# -- SplitMix64 and random sampling ----------------------------------------------------------


def test_splitmix64_known_outputs():
    # The published SplitMix64 sequence for seed 0.
    out = np.empty(3, dtype=np.uint64)
    state = shuffle_kernels.splitmix64_fill(np.uint64(0), out)
    assert [hex(int(x)) for x in out] == ["0xe220a8397b1dcdaf", "0x6e789e6aa1b965f4", "0x6c45d188009454f"]
    assert int(state) == 3 * 0x9E3779B97F4A7C15 % 2**64
    rng = naive.SplitMix64(0)
    assert [rng.next() for _ in range(3)] == [int(x) for x in out]
    top = np.empty(4, dtype=np.uint64)
    shuffle_kernels.splitmix64_fill(np.uint64(2**64 - 1), top)
    rng = naive.SplitMix64(2**64 - 1)
    assert top.tolist() == [rng.next() for _ in range(4)]


@pytest.mark.parametrize("bound", [1, 2, 3, 7, 1000, 2**32 + 15, 3 * 2**62, 2**63 + 1, 2**64 - 1])
def test_sample_below_matches_naive_including_rejections(bound):
    # For 3 * 2^62 the threshold is 2^62: a quarter of all draws are rejected.
    out = np.empty(200, dtype=np.uint64)
    state = shuffle_kernels.sample_below_fill(np.uint64(12345), np.uint64(bound), out)
    rng = naive.SplitMix64(12345)
    assert out.tolist() == [rng.sample_below(bound) for _ in range(200)]
    assert int(state) == rng.state
    assert (out < np.uint64(bound)).all()


def test_sample_windows_is_seeded_and_uniform_over_valid_starts():
    tokens = np.arange(10, dtype=np.uint32) + 100
    batch = sample_windows(tokens, 4, 3, seed=7)
    rng = naive.SplitMix64(7)
    starts = [rng.sample_below(10 - 3) for _ in range(4)]
    assert batch.starts.tolist() == starts
    assert batch.inputs.tolist() == [[100 + s + t for t in range(3)] for s in starts]
    assert batch.targets.tolist() == [[101 + s + t for t in range(3)] for s in starts]
    again = sample_windows(tokens, 4, 3, seed=7)
    assert np.array_equal(again.inputs, batch.inputs) and np.array_equal(again.starts, batch.starts)
    many = sample_windows(tokens, 5000, 3, seed=1)
    assert sorted(set(many.starts.tolist())) == list(range(7))  # every valid start, never start 7
    assert np.bincount(many.starts).min() > 600  # ~714 each
    assert sample_windows(tokens, 2, 9, seed=0).starts.tolist() == [0, 0]  # N - T = 1 start


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_sample_windows_in_model_dtypes(dtype):
    tokens = np.arange(10, dtype=np.uint32) + 100
    plain = sample_windows(tokens, 4, 3, seed=7)
    batch = sample_windows(tokens, 4, 3, seed=7, dtype=dtype)
    assert batch.inputs.dtype == dtype and batch.targets.dtype == dtype
    assert batch.inputs.tolist() == plain.inputs.tolist() and batch.targets.tolist() == plain.targets.tolist()
    with pytest.raises(ConfigurationError, match="does not fit int32"):
        sample_windows(np.array([2**31, 5, 6], np.uint32), 4, 2, seed=0, dtype=np.int32)
    with pytest.raises(ConfigurationError, match="uint32, int32 or int64"):
        sample_windows(tokens, 4, 3, seed=7, dtype=np.float32)


def test_sample_windows_errors():
    tokens = np.arange(4, dtype=np.uint32)
    with pytest.raises(ConfigurationError, match="needs at least T . 1 = 5 tokens"):
        sample_windows(tokens, 2, 4, seed=0)
    with pytest.raises(ConfigurationError, match="batch size"):
        sample_windows(tokens, 0, 2, seed=0)
    with pytest.raises(ConfigurationError, match="seed"):
        sample_windows(tokens, 1, 2, seed=-1)
    with pytest.raises(ConfigurationError, match="seed"):
        sample_windows(tokens, 1, 2, seed=2**64)
    with pytest.raises(ConfigurationError, match="uint32"):
        sample_windows(tokens.astype(np.int64), 1, 2, seed=0)


def test_count_functions_check_offsets():
    config = CausalWindowConfig(2)
    for bad in (np.array([], dtype=np.int64), np.array([1, 3], dtype=np.int64), np.array([0, 5, 4], dtype=np.int64)):
        for function in (document_window_counts, window_prefix_sums, enumerate_windows):
            with pytest.raises(ConfigurationError, match="offsets"):
                function(bad, config)
    with pytest.raises(ConfigurationError, match="int64"):
        document_window_counts(np.array([0, 3], dtype=np.int32), config)
    assert config.window_counts(np.array([0, 3, 3, 10], dtype=np.int64)).tolist() == [1, 0, 5]
    assert window_prefix_sums(np.array([0], dtype=np.int64), config).tolist() == [0]


@pytest.mark.parametrize("T, S", [(2**63, 1), (2**64 - 2, 2**64 - 1), (3, 2**63), (3, 2**64 - 1)])
def test_64_bit_sizes_beyond_int64_work_in_kernels_epochs_and_audit(T, S):
    """Sizes are 64-bit (engine.windows): T up to 2^64 - 2 and S up to 2^64 - 1 are valid. Kernels see them
    clamped to int64, which changes no count (no array holds 2^63 tokens)."""
    from engine.audit import audit_epoch
    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.corpus import Partition
    from engine.store import EncodedDocument

    config = CausalWindowConfig(T, S)
    tokens = np.arange(10, dtype=np.uint32)
    offsets = np.array([0, 4, 10], dtype=np.int64)
    expected = [config.window_count(4), config.window_count(6)]  # Python ints, exact
    assert document_window_counts(offsets, config).tolist() == expected
    assert expected == ([0, 0] if T > 5 else [1, 1])  # S >= 2^63: only the start 0 fits
    tail = config.incomplete_tail(tokens[:6])
    if T > 5:  # no window: the whole document is the tail
        assert tail.start == 0 and tail.tokens.tolist() == list(range(6))
    else:  # one window at 0; the next candidate start S lies past the end
        assert tail is None
    docs = [EncodedDocument("a", Partition.TRAIN, tokens[:4]), EncodedDocument("b", Partition.TRAIN, tokens[4:])]
    epoch = MiniBatchEpoch.build(docs, Partition.TRAIN, windows=config,
                                 batches=MiniBatchConfig(2, BatchOrder.shuffled(2**64 - 1)))
    assert epoch.window_count == sum(expected)
    assert audit_epoch(epoch).ok


# -- windows, batches, seeds: ranges near 2^63 and 2^64 --------------------------------------------


def test_context_stride_batch_size_and_seed_ranges():
    from engine.batches import BatchOrder, MiniBatchConfig
    from engine.windows import CausalWindowConfig

    with pytest.raises(ConfigurationError, match="must be positive"):
        CausalWindowConfig(0, 1)
    with pytest.raises(ConfigurationError, match="must be positive"):
        CausalWindowConfig(4, 0)
    with pytest.raises(ConfigurationError, match=r"T \+ 1 must fit in 64 bits"):
        CausalWindowConfig(2**64 - 1, 1)
    assert CausalWindowConfig(2**64 - 2, 1).window_count(2**64 - 1) == 1  # no overflow at the edge
    assert CausalWindowConfig(3, 2**64 - 1).window_count(2**64 - 1) == 1
    assert CausalWindowConfig(2**63, 2**63).window_count(2**64 - 1) == (2**64 - 1 - (2**63 + 1)) // 2**63 + 1
    with pytest.raises(ConfigurationError, match=f"stride S is {2**64}, larger than the largest allowed value"):
        CausalWindowConfig(3, 2**64)
    with pytest.raises(BatchError, match="batch size must be a positive integer, got 0"):
        MiniBatchConfig(0)
    for seed in (-1, 2**64):
        with pytest.raises(ConfigurationError, match=f"seed must be an integer in 0..2\\^64-1, got {seed}"):
            BatchOrder.shuffled(seed)
    assert BatchOrder.shuffled(2**64 - 1).seed == 2**64 - 1


# -- byte-level tokenizer batches and ids, and oversized sampled batches ---------------------------


def test_sample_windows_batch_too_large_is_a_configuration_error():
    from engine.windows import sample_windows

    with pytest.raises(ConfigurationError, match="more than this machine can allocate"):
        sample_windows(np.arange(100, dtype=np.uint32), 2**62, 8, seed=1)


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
@pytest.mark.parametrize("seed", range(4))
def test_gather_batch_equals_the_plain_loop(seed):
    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, 9))
    values = rng.integers(0, 2**31, size=200).astype(np.uint32)
    if seed == 1:
        values[rng.integers(0, 200, size=3)] = np.uint32(2**31 + 5)  # ids that do not fit int32
    if seed == 2:
        values[:] = np.uint32(2**32 - 1)  # the largest id everywhere
    positions = rng.integers(0, 200 - T, size=30).astype(np.int64)
    for lo, hi in ((0, 30), (7, 19), (29, 30), (12, 12), (25, 33)):
        want_inputs, want_targets, want_high = naive.gather_batch(values.tolist(), positions.tolist(), lo, hi, T)
        written = len(want_inputs)  # hi past the end of positions: the rows beyond stay as they were
        untouched = [[7] * T] * (hi - lo - written)
        for dtype in (np.uint32, np.int64):
            inputs = np.full((hi - lo + 2, T), 7, dtype)[: hi - lo]
            targets = np.full((hi - lo, T), 7, dtype)
            high = kernels.gather_batch(values, positions, lo, hi, T, inputs, targets)
            assert inputs.tolist() == want_inputs + untouched and targets.tolist() == want_targets + untouched
            assert high == int(want_high)
            if written:  # rows too few or of another length: 2, nothing written
                for shape in ((written - 1, T), (written, T + 1)):
                    short, other = np.full(shape, 7, dtype), np.full((written, T), 7, dtype)
                    for pair in ((short, other), (other, short)):
                        assert kernels.gather_batch(values, positions, lo, hi, T, *pair) == 2
                        assert (pair[0] == 7).all() and (pair[1] == 7).all()
