"""engine.tokenizers.type_table: the compact type table against a dict of Python objects (its plain twin)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.kernels.type_table import fnv1a
from engine.tokenizers.type_table import BYTES_PER_TYPE, TypeCounts


def dict_table(batches):
    """The plain twin: a dict numbered by first appearance, counts summed."""
    index, counts = {}, []
    for types, batch_counts in batches:
        for t, c in zip(types, batch_counts):
            if t not in index:
                index[t] = len(index)
                counts.append(0)
            counts[index[t]] += int(c)
    return list(index), counts


def batches_of(draw_types):
    return st.lists(st.tuples(st.lists(draw_types, unique=True, max_size=30),
                              st.integers(1, 1000)), max_size=12).map(
        lambda bs: [(types, [seed * (i + 1) for i in range(len(types))]) for types, seed in bs])


@settings(max_examples=200, deadline=None)
@given(batches_of(st.text(alphabet="ab\u00e9\u4e2d\U0001F600 ", min_size=1, max_size=6)))
def test_text_types_fold_like_a_dict(batches):
    table = TypeCounts()
    for types, counts in batches:
        table.add(types, np.array(counts, dtype=np.int64))
    types, counts = dict_table(batches)
    assert table.types() == types and table.counts().tolist() == counts and len(table) == len(types)


@settings(max_examples=200, deadline=None)
@given(batches_of(st.binary(min_size=1, max_size=5)))
def test_bytes_types_fold_like_a_dict(batches):
    table = TypeCounts()
    for types, counts in batches:
        table.add(types, counts)
    types, counts = dict_table(batches)
    assert table.types() == types and table.counts().tolist() == counts
    assert table.pool.tobytes() == b"".join(types) and table.starts.tolist() == np.concatenate(
        [[0], np.cumsum([len(t) for t in types])]).astype(np.int64).tolist()


def test_growth_across_many_batches_and_colliding_slots():
    table = TypeCounts()
    rng = np.random.default_rng(7)
    batches = []
    for b in range(60):  # 60 batches, ~100k distinct types: the index and pool grow many times
        words = {bytes(rng.integers(97, 100, size=int(rng.integers(1, 12))).astype(np.uint8)) for _ in range(2000)}
        words = sorted(words)
        batches.append((words, list(range(1, len(words) + 1))))
        table.add(words, np.arange(1, len(words) + 1))
    types, counts = dict_table(batches)
    assert table.types() == types and table.counts().tolist() == counts


def test_memory_is_the_types_bytes_plus_a_bounded_number_per_type():
    table = TypeCounts()
    n = 200_000
    words = [f"w{i}" for i in range(n)]
    for lo in range(0, n, 10_000):
        table.add(words[lo:lo + 10_000], np.ones(10_000, dtype=np.int64))
    own = sum(len(w) for w in words)
    # arrays at most doubled past their use: 2x (bytes + 40 per type), plus the initial minimum
    assert table.nbytes() <= 2 * (own + BYTES_PER_TYPE * n) + (1 << 17)
    assert len(table) == n and table.counts().sum() == n


def test_fnv1a_is_the_reference_hash():
    def plain(data: bytes) -> int:
        h = 0xCBF29CE484222325
        for b in data:
            h = ((h ^ b) * 0x100000001B3) & (2 ** 64 - 1)
        return h or 1

    for data in (b"", b"a", b"hello world", bytes(range(256))):
        assert int(fnv1a(np.frombuffer(data, np.uint8), 0, len(data))) == plain(data)


def naive_most_frequent(types, counts, limit):
    """The type cap rule as a sort: count descending, first appearance on ties; kept in first-appearance order."""
    ranked = sorted(range(len(types)), key=lambda i: (-counts[i], i))[:limit]
    return [types[i] for i in sorted(ranked)], [counts[i] for i in sorted(ranked)]


@settings(max_examples=200, deadline=None)
@given(batches_of(st.text(alphabet="ab\u00e9\u4e2d\U0001F600 ", min_size=1, max_size=6)), st.integers(1, 40),
       st.lists(st.text(alphabet="abc", min_size=1, max_size=3), max_size=5, unique=True))
def test_most_frequent_keeps_the_top_counts_ties_by_first_appearance(batches, limit, later):
    table = TypeCounts()
    for types, counts in batches:
        table.add(types, np.array([c % 7 + 1 for c in counts], dtype=np.int64))  # many ties
    types, counts = dict_table([(t, [c % 7 + 1 for c in cs]) for t, cs in batches])
    capped = table.most_frequent(limit)
    assert (capped.types(), capped.counts().tolist()) == naive_most_frequent(types, counts, limit)
    # the capped table is a table: folding more types into it indexes the kept ones
    kept_types, kept_counts = naive_most_frequent(types, counts, limit)
    capped.add(later, np.ones(len(later), dtype=np.int64))
    assert (capped.types(), capped.counts().tolist()) == dict_table([(kept_types, kept_counts),
                                                                     (later, [1] * len(later))])
