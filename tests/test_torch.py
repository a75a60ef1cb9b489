"""engine.torch: exact batches through DataLoader (fork and spawn), elastic resume, epochs, pickling."""

from __future__ import annotations

import os
import pickle
import stat
import time
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")
from torch.utils.data import DataLoader  # noqa: E402

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch  # noqa: E402
from engine.corpus import Partition  # noqa: E402
from engine.errors import BatchError, ConfigurationError  # noqa: E402
from engine.store import EncodedDocument, TokenStore  # noqa: E402
from engine.torch import IGNORE_INDEX, TokenDataset, TokenLoader  # noqa: E402
from engine.windows import CausalWindowConfig  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.fakes import ByteIdsTokenizer  # noqa: E402
from tests.helpers import framed, random_documents, rank_slices  # noqa: E402

T, B = 8, 6


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch") / "store"
    return TokenStore.write(path, {"train": random_documents(60, 1), "validation": [], "test": []},
                            ByteIdsTokenizer())


def make_epoch(source, seed=7, batch_size=B, epoch=0):
    return MiniBatchEpoch.build(source, "train", windows=CausalWindowConfig(T, 3),
                                batches=MiniBatchConfig(batch_size, BatchOrder.shuffled(seed, epoch=epoch)))


def global_sequence(epoch, epochs=1):
    """(epoch, k, inputs, targets) of every global batch, straight from the source."""
    out = []
    for e in range(epochs):
        source = epoch.with_epoch(e)
        for k in range(source.batch_count):
            batch = source.batch(k, dtype=np.int64)
            out.append((e, k, batch.inputs.tolist(), batch.targets.tolist()))
    return out


def collect(items):
    """(epoch, k, inputs, targets) of each batch a loader yields, as lists."""
    return [(int(b["epoch"]), int(b["batch_index"]), b["input_ids"].tolist(), b["targets"].tolist()) for b in items]


def test_import_engine_does_not_import_torch():
    code = "import sys, engine; assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_main_process_batches_equal_the_source(store):
    epoch = make_epoch(store)
    assert epoch.batch_count > 20
    expected = global_sequence(epoch)
    ds = TokenDataset(epoch)
    got = []
    for item in DataLoader(ds, batch_size=None, num_workers=0):
        assert item["input_ids"].dtype == torch.int64 and item["targets"].dtype == torch.int64
        got.append(collect([item])[0])
    assert got == expected
    assert ds.state_dict() == {"seed": 7, "epoch": 1, "next_batch": 0, "global_batch_size": B}
    assert len(ds) == 0  # the run's one epoch is used up


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_yield_the_global_order(store, context):
    epoch = make_epoch(store)
    ds = TokenDataset(epoch, dtype=torch.int32)
    loader = ds.loader(num_workers=2, multiprocessing_context=context)
    got = []
    for item in loader:
        assert item["input_ids"].dtype == torch.int32
        got.append(collect([item])[0])
        if len(got) == 5:
            assert ds.state_dict()["next_batch"] == 5  # kept in the main process
    assert got == global_sequence(epoch)
    assert ds.state_dict() == {"seed": 7, "epoch": 1, "next_batch": 0, "global_batch_size": B}


def test_plain_dataloader_with_workers_yields_the_global_order(store):
    epoch = make_epoch(store, batch_size=4)
    got = collect(DataLoader(TokenDataset(epoch), batch_size=None, num_workers=2, multiprocessing_context="fork"))
    assert got == global_sequence(epoch)


def test_elastic_resume_from_4_ranks_to_2_and_3(store):
    epoch = make_epoch(store, batch_size=12)
    assert epoch.batch_width(epoch.batch_count - 1) == 7  # every batch has rows for 4 ranks
    uninterrupted = global_sequence(epoch, epochs=2)
    four, _ = rank_slices(epoch, 4, collect)
    assert four == uninterrupted
    stop = epoch.batch_count - 3  # resume crosses into the second epoch
    before, states = rank_slices(epoch, 4, collect, stop_after=stop)
    assert before == uninterrupted[:stop]
    state = states[0]
    assert all(s == state for s in states)
    assert state == {"seed": 7, "epoch": 0, "next_batch": stop, "global_batch_size": 12}
    saved = pickle.loads(pickle.dumps(state))
    for world_size, workers in ((2, 0), (3, 2)):
        after, _ = rank_slices(epoch, world_size, collect, state=saved, num_workers=workers)
        assert before + after == uninterrupted


def test_multi_epoch_state_and_resume_mid_epoch(store):
    epoch = make_epoch(store, batch_size=5)
    count = epoch.batch_count
    expected = global_sequence(epoch, epochs=3)
    ds = TokenDataset(epoch, epochs=3)
    assert len(ds) == 3 * count
    first = []
    for item in ds:
        first.append(collect([item])[0])
        if len(first) == count + 2:
            break
    assert ds.state_dict() == {"seed": 7, "epoch": 1, "next_batch": 2, "global_batch_size": 5}
    resumed = TokenDataset(make_epoch(store, batch_size=5), epochs=3)
    resumed.load_state_dict(ds.state_dict())
    assert len(resumed) == 2 * count - 2
    assert first + collect(resumed.loader(num_workers=2, multiprocessing_context="fork")) == expected
    # epochs differ in order only, and the forever dataset keeps going
    assert expected[0] != expected[count]
    forever = iter(TokenDataset(epoch, epochs=None))
    assert [next(forever)["epoch"] for _ in range(3 * count + 1)][-1] == 3


def test_state_at_the_end_of_an_epoch_rolls_over(store):
    epoch = make_epoch(store)
    ds = TokenDataset(epoch, epochs=2)
    ds.load_state_dict({"seed": 7, "epoch": 0, "next_batch": epoch.batch_count, "global_batch_size": B})
    assert ds.state_dict()["epoch"] == 1 and ds.state_dict()["next_batch"] == 0
    assert collect(ds) == global_sequence(epoch, epochs=2)[epoch.batch_count:]


def test_state_errors(store):
    ds = TokenDataset(make_epoch(store))
    with pytest.raises(ConfigurationError, match="seed 8"):
        ds.load_state_dict({"seed": 8, "epoch": 0, "next_batch": 0, "global_batch_size": B})
    with pytest.raises(ConfigurationError, match="global batch size must not change"):
        ds.load_state_dict({"seed": 7, "epoch": 0, "next_batch": 0, "global_batch_size": B + 1})
    with pytest.raises(ConfigurationError, match="outside this source"):
        ds.load_state_dict({"seed": 7, "epoch": 0, "next_batch": 10**6, "global_batch_size": B})
    with pytest.raises(ConfigurationError, match="keys"):
        ds.load_state_dict({"seed": 7})
    with pytest.raises(ConfigurationError, match="batch_size=None"):
        TokenLoader(ds, batch_size=4)


def test_world_size_wider_than_a_batch_is_an_error():
    documents = random_documents(6, 3, low=20, high=21)  # 20 tokens, T=8, S=3: 4 windows each
    epoch = MiniBatchEpoch.build(documents, "train", windows=CausalWindowConfig(T, 3),
                                 batches=MiniBatchConfig(5, BatchOrder.shuffled(1)))
    assert epoch.window_count == 24 and epoch.batch_width(4) == 4
    TokenDataset(epoch, rank=3, world_size=4)
    with pytest.raises(ConfigurationError, match=r"world_size 5 is wider than the last batch \(4\), which holds "
                                                 r"the remaining 4 rows"):
        TokenDataset(epoch, rank=0, world_size=5)
    with pytest.raises(ConfigurationError, match="world_size 6 is wider than a batch of 5 rows"):
        TokenDataset(epoch, rank=0, world_size=6)
    with pytest.raises(ConfigurationError, match="pass both rank and world_size"):
        TokenDataset(epoch, rank=0)
    with pytest.raises(ConfigurationError, match="0 <= rank < world_size"):
        TokenDataset(epoch, rank=2, world_size=2)
    with pytest.raises(ConfigurationError, match="dtype must be"):
        TokenDataset(epoch, dtype=torch.float32)
    with pytest.raises(ConfigurationError, match="without 'batch'"):
        TokenDataset([1, 2, 3])


def test_an_epoch_without_batches_is_refused():
    documents = random_documents(3, 3, low=5, high=6)  # 5 tokens each: no window of T = 8
    epoch = MiniBatchEpoch.build(documents, "train", windows=CausalWindowConfig(T, 1),
                                 batches=MiniBatchConfig(2, BatchOrder.sequential()))
    assert epoch.batch_count == 0
    with pytest.raises(BatchError) as info:
        TokenDataset(epoch)
    assert str(info.value) == (
        f"{epoch!r} has no batches (no document of its partition gives a complete window or row), so a loop "
        "over it would end at once; expected a shorter context or a partition with longer documents")


def test_in_memory_source_pickles_with_its_arrays():
    documents = random_documents(10, 4)
    epoch = make_epoch(documents)
    copy = pickle.loads(pickle.dumps(TokenDataset(epoch)))
    assert collect(copy) == global_sequence(epoch)


def test_pickles_carry_a_path_not_the_tokens(tmp_path):
    # 8M tokens (32 MB of ids): the store, the epoch and the dataset pickle to well under 1 MB.
    rng = np.random.default_rng(5)
    documents = [EncodedDocument(f"doc-{i}", Partition.TRAIN, framed(rng, 40_000, 2**16))
                 for i in range(200)]
    store = TokenStore.write(tmp_path / "big", {"train": documents}, ByteIdsTokenizer())
    values, _ = store.arrays("train")
    assert values.nbytes == 32_000_000
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(64, 64),
                                 batches=MiniBatchConfig(16, BatchOrder.shuffled(3, epoch=1)))
    dataset = TokenDataset(epoch, epochs=2)
    sizes = [len(pickle.dumps(x)) for x in (store, epoch, dataset)]
    assert max(sizes) < 1_000, sizes
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.source.order == BatchOrder.shuffled(3, epoch=1)
    assert np.array_equal(copy.source.positions, epoch.positions)
    assert copy.source.batch(17).inputs.tolist() == epoch.batch(17).inputs.tolist()
    reopened = pickle.loads(pickle.dumps(store))
    assert isinstance(reopened, TokenStore) and reopened.path == store.path.absolute()


class WeightedSource:
    """A batch source of the protocol with per-position fields written into ``out``."""

    fields = ("position_ids", "loss_weights")

    def __init__(self, epoch):
        self.epoch = epoch
        self.batch_count, self.batch_size = epoch.batch_count, epoch.batch_size
        self.context_length, self.order = epoch.context_length, epoch.order

    def batch_width(self, k):
        return self.epoch.batch_width(k)

    def with_epoch(self, e):
        return WeightedSource(self.epoch.with_epoch(e))

    def progress(self, k):
        return {}

    def batch(self, k, out=None, *, rank=None, world_size=None, dtype=None):
        batch = self.epoch.batch(k, out[:2], rank=rank, world_size=world_size, dtype=dtype)
        rows = batch.inputs.shape[0]
        positions, weights = out[2][:rows], out[3][:rows]
        positions[:] = np.arange(self.context_length, dtype=np.int32)
        weights[:] = batch.targets % 2
        return SimpleNamespace(inputs=batch.inputs, targets=batch.targets, position_ids=positions,
                               loss_weights=weights)


def test_source_extras_travel_with_the_batch(store):
    epoch = make_epoch(store)
    wrapper = WeightedSource(epoch)
    for loader in (TokenDataset(wrapper, epochs=2).loader(),
                   TokenDataset(wrapper, epochs=2).loader(num_workers=2, multiprocessing_context="fork")):
        items = [(b["input_ids"].tolist(), b["loss_weights"].tolist(), b["position_ids"].tolist()) for b in loader]
        assert len(items) == 2 * epoch.batch_count
        for (inputs, weights, positions), (e, k, expected_inputs, targets) in zip(items, global_sequence(epoch, 2)):
            assert inputs == expected_inputs
            assert weights == (np.array(targets) % 2).tolist()
            assert positions == [list(range(T))] * len(inputs)


def test_a_second_loop_continues_where_the_first_stopped(store):
    epoch = make_epoch(store)
    ds = TokenDataset(epoch, epochs=2)
    expected = global_sequence(epoch, 2)
    got = []
    for item in ds.loader():
        got += collect([item])
        if len(got) == 7:
            break
    got += collect(ds.loader(num_workers=2, multiprocessing_context="fork"))
    assert got == expected
    assert collect(ds.loader()) == []  # both epochs of the run are used up


def test_unpickled_store_maps_its_splits_from_a_decoded_copy(store, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE_DIR", str(tmp_path / "cache"))
    opened = TokenStore.open(store.path)
    values, offsets = opened.arrays("train")
    assert opened.mapped_file("train") is None  # decoded from Parquet
    data = pickle.dumps(opened)
    assert len(data) < 1_000
    copy = pickle.loads(data)
    file = copy.mapped_file("train")
    assert file is not None and file.parent == tmp_path / "cache" and file.suffix == ".arrow"
    assert copy.mapped_file("validation") is None  # never read here: not copied
    mapped_values, mapped_offsets = copy.arrays("train")
    assert np.array_equal(mapped_values, values) and np.array_equal(mapped_offsets, offsets)
    assert copy.ids("train") == opened.ids("train") and not mapped_values.flags.writeable
    assert pickle.loads(pickle.dumps(copy)).mapped_file("train") == file  # written once, reused
    # A copy that does not hold the split is ignored: the split is decoded from Parquet instead.
    file.write_bytes(file.read_bytes()[:100])
    fresh = pickle.loads(data)
    assert fresh.mapped_file("train") is None and np.array_equal(fresh.arrays("train")[0], values)


def _overwrite_tokens(file, value: int) -> None:
    """Overwrite, in place, every token of the decoded copy at ``file`` with ``value``: same ids, sizes
    and counts, only the content differs."""
    table = pa.ipc.open_file(pa.memory_map(str(file), "r")).read_all()
    tokens = table.column("tokens").chunk(0)
    values = tokens.values.to_numpy()[tokens.offsets[0].as_py():tokens.offsets[-1].as_py()]
    raw = bytearray(file.read_bytes())
    start = bytes(raw).find(values.astype("<u4").tobytes())
    assert start >= 0
    raw[start:start + 4 * len(values)] = np.full(len(values), value, "<u4").tobytes()
    file.write_bytes(bytes(raw))


def test_a_changed_copy_with_the_same_sizes_is_never_served(store, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE_DIR", str(tmp_path / "cache"))
    opened = TokenStore.open(store.path)
    values, offsets = opened.arrays("train")
    data = pickle.dumps(opened)
    file = pickle.loads(data).mapped_file("train")
    size = file.stat().st_size
    _overwrite_tokens(file, 999)
    assert file.stat().st_size == size  # same sizes and counts: only the content tells
    fresh = pickle.loads(data)
    assert fresh.mapped_file("train") is None  # refused: decoded from Parquet instead
    assert np.array_equal(fresh.arrays("train")[0], values) and not (fresh.arrays("train")[0] == 999).all()
    # The next pickle rewrites the wrong copy from the parent's table, and it is served again.
    again = pickle.loads(pickle.dumps(opened))
    assert again.mapped_file("train") == file and np.array_equal(again.arrays("train")[0], values)


def test_spawn_workers_never_read_a_changed_copy(store, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE_DIR", str(tmp_path / "cache"))
    epoch = make_epoch(TokenStore.open(store.path))
    expected = global_sequence(epoch)
    pickle.dumps(epoch)  # writes the copy
    (file,) = (tmp_path / "cache").iterdir()
    _overwrite_tokens(file, 999)  # a wrong entry under the right name, same sizes
    loader = TokenDataset(epoch).loader(num_workers=2, multiprocessing_context="spawn")
    assert collect(loader) == expected  # the parent rewrote the copy from its own table before the workers mapped it
    assert not (pa.ipc.open_file(pa.memory_map(str(file), "r")).read_all().column("tokens").chunk(0).values
                .to_numpy() == 999).all()


def test_a_cache_folder_others_may_write_is_not_used(store, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    monkeypatch.setenv("ENGINE_CACHE_DIR", str(cache))
    opened = TokenStore.open(store.path)
    values, _ = opened.arrays("train")
    copy = pickle.loads(pickle.dumps(opened))
    assert copy.mapped_file("train") is None and np.array_equal(copy.arrays("train")[0], values)
    assert list(cache.iterdir()) == []


def test_a_cache_folder_another_user_owns_is_not_used(store, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)  # private, and this user's: seen as another user's below
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)
    monkeypatch.setenv("ENGINE_CACHE_DIR", str(cache))
    opened = TokenStore.open(store.path)
    values, _ = opened.arrays("train")
    copy = pickle.loads(pickle.dumps(opened))
    assert copy.mapped_file("train") is None and np.array_equal(copy.arrays("train")[0], values)
    assert list(cache.iterdir()) == []


def test_the_cache_folder_is_made_private(store, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE_DIR", str(tmp_path / "cache"))
    opened = TokenStore.open(store.path)
    opened.arrays("train")
    assert pickle.loads(pickle.dumps(opened)).mapped_file("train") is not None
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    (tmp_path / "cache").chmod(0o777)  # widened afterwards: no longer used
    (next((tmp_path / "cache").iterdir())).unlink()
    assert pickle.loads(pickle.dumps(opened)).mapped_file("train") is None


def test_spawn_workers_read_the_mapped_copy(store, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE_DIR", str(tmp_path / "cache"))
    epoch = make_epoch(TokenStore.open(store.path))
    loader = TokenDataset(epoch).loader(num_workers=2, multiprocessing_context="spawn")
    assert collect(loader) == global_sequence(epoch)
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".arrow"]  # the train split, once


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_reused_worker_buffers_are_reused_in_turn_without_overwriting_a_batch_in_use(store, context, monkeypatch):
    from engine.torch import LoaderLimits

    chunks, real_views = [], TokenDataset._ring_views
    monkeypatch.setattr(TokenDataset, "_ring_views", lambda self, ring, chunk, slots: chunks.append(chunk) or real_views(
        self, ring, chunk, slots))
    epoch = make_epoch(store, batch_size=5)
    expected = global_sequence(epoch, epochs=2)
    assert len(expected) > 2 * 2 * (2 * 2 + 2)  # more items per worker than slots
    got = []
    # two batches per item: the slots wrap around
    dataset = TokenDataset(epoch, epochs=2, reuse_buffers=True, limits=LoaderLimits(chunk_ids=2 * 5 * T))
    for item in dataset.loader(num_workers=2, multiprocessing_context=context):
        got += collect([item])
        time.sleep(0.001 if len(got) % 7 else 0.02)  # a slow step now and then: workers run ahead
        assert collect([item]) == got[-1:]  # unchanged while it is the current batch
    assert got == expected
    assert chunks == [2, 2]  # each worker's ring: items of two batches (limits.chunk_ids)


def test_loader_limits_are_checked(store):
    from engine.torch import LoaderLimits

    with pytest.raises(ConfigurationError, match=r"LoaderLimits.chunk_ids must be positive \(>= 1\), got 0"):
        LoaderLimits(chunk_ids=0)
    with pytest.raises(ConfigurationError, match=r"LoaderLimits.stage_ids must be >= 0 \(0: never staged\), got -1"):
        LoaderLimits(stage_ids=-1)
    with pytest.raises(ConfigurationError, match="limits is dict; expected a LoaderLimits"):
        TokenDataset(make_epoch(store), limits={"chunk_ids": 8})
    assert TokenDataset(make_epoch(store)).limits == LoaderLimits(chunk_ids=1 << 18, stage_ids=1 << 12)


def test_a_collate_fn_of_your_own_gets_whole_batches(store):
    epoch = make_epoch(store)

    def collate(item):  # runs in the workers on each item: it must be a batch
        assert {"input_ids", "targets", "epoch", "batch_index"} <= set(item) and "slot" not in item
        return item

    loader = TokenDataset(epoch).loader(num_workers=2, multiprocessing_context="fork", collate_fn=collate)
    assert collect(loader) == global_sequence(epoch)


def equal_to_the_source(kept, source, epochs=1, names=("inputs", "targets")):
    """Every kept batch equals ``source.batch(k)`` of its epoch, tensor for tensor, in the run's order."""
    expected = [(e, k) for e in range(epochs) for k in range(source.with_epoch(e).batch_count)]
    assert [(int(b["epoch"]), int(b["batch_index"])) for b in kept] == expected
    for batch in kept:
        want = source.with_epoch(int(batch["epoch"])).batch(int(batch["batch_index"]), dtype=np.int64)
        for key, field in zip(("input_ids", "targets", *source.fields), names + tuple(source.fields)):
            assert torch.equal(batch[key], torch.from_numpy(np.ascontiguousarray(getattr(want, field), np.int64)).to(
                batch[key].dtype)), (batch["epoch"], batch["batch_index"], key)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stage_ids", [0, 1 << 12])  # straight into fresh arrays, or built in a stage and copied
def test_kept_batches_equal_the_source(store, workers, stage_ids):
    from engine.torch import LoaderLimits

    epoch = make_epoch(store, batch_size=6)
    assert epoch.batch_width(epoch.batch_count - 1) == 1  # a short last batch too
    # two batches per worker item: the slots wrap around
    limits = LoaderLimits(chunk_ids=2 * 6 * T, stage_ids=stage_ids)
    dataset = TokenDataset(epoch, epochs=2, limits=limits)
    assert dataset._staged is bool(stage_ids)
    kept = list(dataset.loader(num_workers=workers, multiprocessing_context="fork" if workers else None))
    assert len(kept) == 2 * epoch.batch_count > 2 * 2 * (2 * 2 + 2)  # more items per worker than slots
    equal_to_the_source(kept, epoch, epochs=2)
    if workers == 0:  # every batch in storage of its own
        assert len({b[name].untyped_storage().data_ptr() for b in kept for name in ("input_ids", "targets")}) == 2 * len(
            kept)
    assert dataset.state_dict() == {"seed": 7, "epoch": 2, "next_batch": 0, "global_batch_size": 6}
    plain = list(DataLoader(TokenDataset(epoch, epochs=2), batch_size=None, num_workers=workers,
                            multiprocessing_context="fork" if workers else None))
    equal_to_the_source(plain, epoch, epochs=2)


def test_gradient_accumulation_keeps_its_batches(store):
    epoch = make_epoch(store)
    loader = TokenDataset(epoch).loader(num_workers=2, multiprocessing_context="fork")
    steps, window = [], []
    for batch in loader:
        window.append(batch)
        if len(window) == 4:  # four micro-batches per step, read only at the step
            steps.append(torch.cat([b["input_ids"] for b in window]).tolist())
            window = []
    expected = [[row for k in range(s, s + 4) for row in epoch.batch(k).inputs.tolist()]
                for s in range(0, 4 * len(steps), 4)]
    assert steps == expected and len(steps) == epoch.batch_count // 4


def test_reuse_buffers_is_valid_until_the_next_batch(store):
    epoch = make_epoch(store, batch_size=5)
    count, last = epoch.batch_count, epoch.batch_width(epoch.batch_count - 1)
    dataset = TokenDataset(epoch, reuse_buffers=True)
    kept = []
    for batch in dataset.loader():
        assert collect([batch]) == [global_sequence(epoch)[len(kept)]]  # right while it is the current batch
        kept.append(batch)
    assert len({b["input_ids"].data_ptr() for b in kept}) == 1  # ... and then overwritten: one buffer
    final = epoch.batch(count - 1, dtype=np.int64)
    assert kept[0]["input_ids"][:last].tolist() == final.inputs.tolist() != epoch.batch(0).inputs[:last].tolist()
    with pytest.raises(ConfigurationError, match=r"reuse_buffers=True with pin_memory=True could overwrite a pinned "
                                                 r"buffer while a non_blocking copy"):
        TokenDataset(epoch, reuse_buffers=True, pin_memory=True)


def test_hugging_face_labels_are_the_shifted_targets_exactly():
    # One document 0, 10, 11, ..., 20, 1; windows T = 4, stride 4, in order, 2 per batch.
    document = EncodedDocument("d", Partition.TRAIN, np.array([0, *range(10, 21), 1], np.uint32))
    epoch = MiniBatchEpoch.build([document], "train", windows=CausalWindowConfig(4, 4),
                                 batches=MiniBatchConfig(2, BatchOrder.sequential()))
    assert epoch.batch_count == 2 and epoch.batch_width(1) == 1
    for workers in (0, 2):
        for reuse in (False, True):
            dataset = TokenDataset(epoch, labels="ignore_index", reuse_buffers=reuse)
            got = [(b["input_ids"].tolist(), b["labels"].tolist(), "targets" in b)
                   for b in dataset.loader(num_workers=workers, multiprocessing_context="fork" if workers else None)]
            assert got == [([[0, 10, 11, 12], [13, 14, 15, 16]], [[-100, 10, 11, 12], [-100, 14, 15, 16]], False),
                           ([[17, 18, 19, 20]], [[-100, 18, 19, 20]], False)]
    # what a model that shifts its labels scores is exactly the targets of positions 0 .. T-2
    batch = next(iter(TokenDataset(epoch, labels="ignore_index")))
    targets = next(iter(TokenDataset(epoch)))["targets"]
    logits = torch.randn(2, 4, 32, generator=torch.Generator().manual_seed(0))
    shifted = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten(),
                                                ignore_index=IGNORE_INDEX, reduction="sum")
    direct = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, :-1].flatten(), reduction="sum")
    assert IGNORE_INDEX == -100 and torch.equal(shifted, direct)
    with pytest.raises(ConfigurationError, match="labels must be None .* or 'ignore_index'"):
        TokenDataset(epoch, labels="hf")
