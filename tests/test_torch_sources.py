"""engine.torch over packed epochs and mixtures: the same batch source protocol as MiniBatchEpoch.

Packed batches through TokenDataset equal plain-loop packing (naive_pack) with the row order of
the Fisher–Yates of engine.kernels.shuffle per epoch (seed rule of engine.batches); mixtures equal
``mixture.batch(k)``, which test_mixing checks against the plain-loop schedule. Resume is checked
under other world sizes and worker counts.
"""

from __future__ import annotations

import functools
import itertools
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")
from torch.utils.data import DataLoader  # noqa: E402

from engine.batches import PACKED_FIELDS, BatchOrder, MiniBatchConfig, MiniBatchEpoch  # noqa: E402
from engine.corpus import Partition  # noqa: E402
from engine.errors import ConfigurationError  # noqa: E402
from engine.mixing import Mixture  # noqa: E402
from engine.packed import PackedEpoch  # noqa: E402
from engine.store import EncodedDocument, TokenStore  # noqa: E402
from engine.torch import IGNORE_INDEX, TokenDataset, TokenLoader  # noqa: E402
from engine.windows import CausalWindowConfig  # noqa: E402
from tests.fakes import ByteIdsTokenizer  # noqa: E402
from tests.helpers import random_documents as framed_documents, rank_slices  # noqa: E402
from tests.naive_packing import naive_epoch_seed, naive_pack  # noqa: E402
from tests.naive_windows import fisher_yates  # noqa: E402

L, B, SEED = 16, 12, 5
NAMES = ("input_ids", "targets", *PACKED_FIELDS)
SOURCE_FIELDS = ("inputs", "targets", *PACKED_FIELDS)


def random_documents(count, seed, low=2, high=60, prefix="d"):
    """Documents framed as a store keeps them: BOS (0), random ids below 5000, EOS (1)."""
    return framed_documents(count, seed, low, high, prefix, id_high=5000)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch_sources") / "store"
    return TokenStore.write(path, {"train": random_documents(70, 2), "validation": [], "test": []},
                            ByteIdsTokenizer())


def packed(source, batch_size=B, seed=SEED):
    return PackedEpoch.build(source, "train", row_length=L, batches=MiniBatchConfig(batch_size, BatchOrder.shuffled(seed)))


def naive_packed_sequence(documents, batch_size, seed, epochs):
    """(epoch, k, {field: rows}) of every batch: plain-loop rows in the seed rule's row order per epoch."""
    rows, _, _ = naive_pack([d.tokens.tolist() for d in documents], L, "bfd")
    count = len(rows["inputs"])
    out = []
    for e in range(epochs):
        order, _ = fisher_yates(list(range(count)), naive_epoch_seed(seed, e))
        for k in range(-(-count // batch_size)):
            chosen = order[k * batch_size:(k + 1) * batch_size]
            out.append((e, k, {name: [rows[field][r] for r in chosen] for name, field in
                               zip(NAMES, ("inputs", "targets", *PACKED_FIELDS))}))
    return out


def collect(items, names=NAMES):
    """(epoch, k, {name: rows}) of each batch a loader yields, as lists."""
    return [(int(b["epoch"]), int(b["batch_index"]), {name: b[name].tolist() for name in names}) for b in items]


def source_sequence(source, ks, epochs=(0,)):
    """(epoch, k, {field: rows}) from the source's own batch(k)."""
    out = []
    for e in epochs:
        epoch = source.with_epoch(e)
        for k in (range(epoch.batch_count) if ks is None else ks):
            batch = epoch.batch(k, dtype=np.int64)
            out.append((e, k, {name: getattr(batch, field).tolist() for name, field in zip(NAMES, SOURCE_FIELDS)
                               if getattr(batch, field, None) is not None}))
    return out


def test_packed_epochs_equal_plain_loop_packing_in_every_epoch(store):
    documents = list(store.documents("train"))
    epoch = packed(store)
    expected = naive_packed_sequence(documents, B, SEED, epochs=3)
    assert expected[0][2] != expected[epoch.batch_count][2]  # each epoch reshuffled
    ds = TokenDataset(epoch, epochs=3)
    got = []
    for item in ds.loader():
        assert item["input_ids"].dtype == torch.int64 and item["segment_ids"].dtype == torch.int32
        assert item["position_ids"].dtype == torch.int32 and item["loss_weights"].dtype == torch.uint8
        got += collect([item])
    assert got == expected
    assert ds.state_dict() == {"seed": SEED, "epoch": 3, "next_batch": 0, "global_batch_size": B}


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_packed_batches_through_workers(store, context):
    epoch = packed(store)
    expected = naive_packed_sequence(list(store.documents("train")), B, SEED, epochs=2)
    ds = TokenDataset(epoch, epochs=2, dtype=torch.int32)
    items = ds.loader(num_workers=2, multiprocessing_context=context)
    got = []
    for item in items:
        assert item["input_ids"].dtype == torch.int32
        got += collect([item])
    assert got == expected
    plain = DataLoader(TokenDataset(epoch, epochs=2), batch_size=None, num_workers=2, multiprocessing_context=context)
    assert collect(plain) == expected


def test_packed_elastic_resume_from_4_ranks_to_2_and_3(store):
    epoch = packed(store)
    assert epoch.batch_width(epoch.batch_count - 1) >= 4  # every batch has rows for 4 ranks
    uninterrupted = naive_packed_sequence(list(store.documents("train")), B, SEED, epochs=2)
    stop = epoch.batch_count - 1  # resume crosses into the second epoch
    before, states = rank_slices(epoch, 4, collect, stop_after=stop)
    assert before == uninterrupted[:stop]
    state = states[0]
    assert all(s == state for s in states)
    assert state == {"seed": SEED, "epoch": 0, "next_batch": stop, "global_batch_size": B}
    for world_size, workers in ((2, 0), (3, 2)):
        after, _ = rank_slices(packed(store), world_size, collect, state=pickle.loads(pickle.dumps(state)),
                               num_workers=workers)
        assert before + after == uninterrupted


def window_epoch(documents, seed, batch_size=1):
    return MiniBatchEpoch.build(documents, "train", windows=CausalWindowConfig(L, 5),
                                batches=MiniBatchConfig(batch_size, BatchOrder.shuffled(seed)))


def window_mixture(store):
    small = random_documents(3, 9, low=20, high=40, prefix="s")  # few windows: many epochs of it
    return Mixture([(window_epoch(store, 3), 0.7), (window_epoch(small, 4), 0.299), (window_epoch(small, 8), 0.001)],
                   batch_size=B, names=["web", "small", "rare"])


def packed_mixture(store):
    small = random_documents(4, 11, low=2, high=30, prefix="p")
    return Mixture([(packed(store, 1, 21), 2.0), (packed(small, 1, 22), 1.0)], batch_size=8)


@pytest.mark.parametrize("make", [window_mixture, packed_mixture])
def test_mixture_batches_state_and_elastic_resume(store, make):
    mixture = make(store)
    names = NAMES if mixture.packed else NAMES[:2]
    steps = 40
    expected = source_sequence(mixture, range(steps))
    ds = TokenDataset(mixture)
    got = []
    for item in ds.loader():
        got += collect([item], names)
        if len(got) == 25:
            break
    assert got == expected[:25]
    state = ds.state_dict()
    progress = mixture.progress(25)
    assert state == {"seed": [s.order.seed for s in mixture._sources], "epoch": 0, "next_batch": 25,
                     "global_batch_size": mixture.batch_size, **progress}
    taken = mixture.taken(25 * mixture.batch_size)
    for source, sample_count, record in zip(mixture._sources, taken.tolist(), progress["sources"]):
        per_epoch = source.rows if mixture.packed else source.window_count
        assert (record["epoch"], record["position"], record["samples"]) == divmod(sample_count, per_epoch) + (
            sample_count,)
    if not mixture.packed:
        assert progress["sources"][1]["epoch"] >= 2  # the small source is in a later epoch of its own
    # elastic: 4 ranks to the stop, then 2 or 3 ranks (with workers) from the saved state
    collect_names = functools.partial(collect, names=names)
    before, states = rank_slices(mixture, 4, collect_names, stop_after=25)
    assert before == expected[:25] and all(s == state for s in states)
    for world_size, workers in ((2, 0), (3, 2)):
        after, _ = rank_slices(pickle.loads(pickle.dumps(make(store))), world_size, collect_names, state=state,
                               num_workers=workers, stop_after=steps - 25)
        assert before + after == expected
    with pytest.raises(TypeError, match="endless"):
        len(ds)


def test_mixture_state_must_match_the_mixture(store):
    mixture = window_mixture(store)
    ds = TokenDataset(mixture)
    ds.load_state_dict(TokenDataset(window_mixture(store)).state_dict())
    state = {**ds.state_dict(), "next_batch": 7}
    state.update(mixture.progress(7))
    ds.load_state_dict(state)
    assert ds.state_dict() == state
    other = Mixture([(s, w) for s, w in zip(mixture._sources, (0.5, 0.3, 0.2))], batch_size=B)
    with pytest.raises(ConfigurationError, match="stands at"):
        TokenDataset(other).load_state_dict(state)
    with pytest.raises(ConfigurationError, match="outside this source"):
        ds.load_state_dict({**state, "epoch": 1})
    with pytest.raises(ConfigurationError, match="one endless epoch"):
        mixture.with_epoch(1)


def test_sources_pickle_small_and_rebuild_equal(store):
    mixture = window_mixture(store)
    epoch = packed(store)
    for source in (epoch, epoch.with_epoch(3), packed_mixture(store)):
        copy = pickle.loads(pickle.dumps(source))
        assert copy.order == source.order
        for k in (0, 5):
            for field in SOURCE_FIELDS:
                np.testing.assert_array_equal(getattr(copy.batch(k), field), getattr(source.batch(k), field))
    assert len(pickle.dumps(TokenDataset(epoch))) < 2_000
    copy = pickle.loads(pickle.dumps(mixture))
    assert copy.weights.tolist() == mixture.weights.tolist()
    assert all(np.array_equal(copy.batch(k).inputs, mixture.batch(k).inputs) for k in (0, 30, 99))


def test_loader_options_that_would_break_the_order_are_refused(store):
    ds = TokenDataset(packed(store))
    with pytest.raises(ConfigurationError, match="persistent_workers"):
        TokenLoader(ds, num_workers=2, persistent_workers=True)
    with pytest.raises(ConfigurationError, match="in_order"):
        TokenLoader(ds, num_workers=2, in_order=False)
    with pytest.raises(ConfigurationError, match="world_size 13 is wider than a batch of 12 rows"):
        TokenDataset(window_mixture(store), rank=0, world_size=13)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("make", ["packed", "window_mixture", "packed_mixture"])
def test_kept_batches_equal_the_source(store, make, workers):
    from engine.torch import LoaderLimits

    source = {"packed": packed, "window_mixture": window_mixture, "packed_mixture": packed_mixture}[make](store)
    names = NAMES if source.fields else NAMES[:2]
    limits = LoaderLimits(chunk_ids=source.batch_size * source.context_length)  # a batch per item
    dataset = TokenDataset(source, epochs=3, limits=limits)
    loader = dataset.loader(num_workers=workers, multiprocessing_context="fork" if workers else None)
    if source.batch_count is None:  # a mixture: endless
        kept, expected = list(itertools.islice(loader, 40)), source_sequence(source, range(40))
    else:
        kept, expected = list(loader), source_sequence(source, None, epochs=(0, 1, 2))
    assert len(kept) > 2 * (2 * 2 + 2)  # more items per worker than slots: the workers reuse them
    assert collect(kept, names) == expected


def test_hugging_face_labels_of_packed_rows_exactly():
    # Three documents (BOS 0 ... EOS 1) packed best-fit decreasing into rows of 8, in plan order:
    # row 0 holds c (5 transitions) then a (3), row 1 holds b (2) and 6 positions of padding.
    tokens = {"a": [0, 5, 6, 1], "b": [0, 7, 1], "c": [0, 8, 9, 10, 11, 1]}
    documents = [EncodedDocument(name, Partition.TRAIN, np.array(ids, np.uint32)) for name, ids in tokens.items()]
    epoch = PackedEpoch.build(documents, "train", row_length=8, batches=MiniBatchConfig(2, BatchOrder.sequential()))
    plain = next(iter(TokenDataset(epoch)))
    assert plain["input_ids"][0].tolist() == [0, 8, 9, 10, 11, 0, 5, 6]
    assert plain["targets"].tolist() == [[8, 9, 10, 11, 1, 5, 6, 1], [7, 1, 0, 0, 0, 0, 0, 0]]
    assert plain["loss_weights"].tolist() == [[1] * 8, [1, 1, 0, 0, 0, 0, 0, 0]]
    # labels[t + 1] = targets[t] where scored: c's EOS sits where a's BOS is an input; a's EOS (the
    # last target of row 0) has no place; padding is -100.
    expected = [[-100, 8, 9, 10, 11, 1, 5, 6], [-100, 7, 1, -100, -100, -100, -100, -100]]
    for workers in (0, 2):
        for dtype in (torch.int64, torch.int32):
            dataset = TokenDataset(epoch, labels="ignore_index", dtype=dtype)
            (batch,) = list(dataset.loader(num_workers=workers, multiprocessing_context="fork" if workers else None))
            assert batch["labels"].dtype == dtype and batch["labels"].tolist() == expected
            assert set(batch) == {"input_ids", "labels", *PACKED_FIELDS, "epoch", "batch_index"}
            assert torch.equal(batch["input_ids"], plain["input_ids"].to(dtype))
            assert torch.equal(batch["loss_weights"], plain["loss_weights"])
    # a model that shifts its labels scores exactly the weighted targets of positions 0 .. L-2
    logits = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1))
    shifted = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten().long(),
                                                ignore_index=IGNORE_INDEX, reduction="sum")
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), plain["targets"][:, :-1].flatten(),
                                               reduction="none")
    assert torch.allclose(shifted, (losses * plain["loss_weights"][:, :-1].flatten()).sum(), rtol=0, atol=1e-5)
