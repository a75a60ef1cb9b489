"""engine.megatron: a .bin/.idx pair read back as TokenBuffers (checked field by field, zero-copy or
copied, BOS/EOS put back) and every batch source over it equal to the same source over the store
it was exported from; the store's Parquet read by Hugging Face ``datasets``."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import engine
from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.errors import StoreError
from engine.export import export_flat, export_megatron
from engine.kernels.export import wrap_documents, wrapped_lengths
from engine.megatron import index_bytes, open_megatron
from engine.mixing import Mixture
from engine.packed import PackedEpoch
from engine.windows import CausalWindowConfig
from tests.naive_export import naive_wrap
from tests.test_export import BENCH, char_tokenizer, gpt2_style, large_vocabulary, make_store

TORCH = "needs the torch extra (pip install -e '.[torch]')"


def same_buffers(a, b) -> None:
    assert a.values.dtype == b.values.dtype == np.uint32
    assert np.array_equal(a.values, b.values) and np.array_equal(a.offsets, b.offsets)


# -- the wrap kernel -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), max_size=5), max_size=8), st.integers(-1, 5), st.integers(-1, 5),
       st.sampled_from([np.uint16, np.int32, np.uint32]))
def test_wrap_matches_plain_loop(docs, bos, eos, dtype):
    values = np.array([t for d in docs for t in d], dtype=dtype)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    wrapped = np.empty_like(offsets)
    wrapped_lengths(values, offsets, bos, eos, wrapped)
    out = np.full(int(wrapped[-1]), 77, np.uint32)
    wrap_documents(values, offsets, bos, eos, wrapped, out)
    want_values, want_offsets = naive_wrap(values, offsets, bos, eos)
    assert np.array_equal(wrapped, want_offsets) and np.array_equal(out, want_values)


# -- reading back --------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [char_tokenizer, large_vocabulary], ids=["uint16", "int32"])
def test_round_trip_equals_the_store(tmp_path, make):
    store = make_store(tmp_path / "store", make())
    export_megatron(store, "train", tmp_path / "train")
    back = open_megatron(tmp_path / "train")
    same_buffers(back, store.buffers("train"))
    assert back.ids[:2] == ("train:0", "train:1") and back.partition is engine.Partition.TRAIN
    assert not back.values.flags.writeable and not back.offsets.flags.writeable


def test_int32_is_a_memory_map_and_uint16_a_copy(tmp_path):
    big, small = make_store(tmp_path / "big", large_vocabulary()), make_store(tmp_path / "small", char_tokenizer())
    export_megatron(big, "train", tmp_path / "big-train")
    export_megatron(small, "train", tmp_path / "small-train")
    mapped = open_megatron(tmp_path / "big-train").values
    copied = open_megatron(tmp_path / "small-train").values
    first = (int(mapped[0]), int(copied[0]))
    for name, dtype in (("big-train.bin", np.int32), ("small-train.bin", np.uint16)):
        with open(tmp_path / name, "r+b") as fh:  # change the first token on disk, in place
            fh.write(np.array([3], dtype).tobytes())
    assert int(mapped[0]) == 3 != first[0]  # a view of the file's pages
    assert int(copied[0]) == first[1] != 3  # its own memory


@pytest.mark.parametrize("make", [char_tokenizer, gpt2_style], ids=["no-bos", "gpt2-style"])
def test_bos_puts_back_what_the_export_dropped(tmp_path, make):
    tok = make()
    store = make_store(tmp_path / "store", tok)
    export_megatron(store, "train", tmp_path / "train", bos=False)
    assert not np.array_equal(open_megatron(tmp_path / "train").values, store.buffers("train").values)
    same_buffers(open_megatron(tmp_path / "train", bos=tok.bos_id), store.buffers("train"))


def test_eos_is_added_only_where_missing(tmp_path):
    """preprocess_data.py without --append-eod writes no end-of-document token; eos= adds it once."""
    prefix = str(tmp_path / "raw")
    docs = [[5, 6], [], [7, 9], [8]]
    lengths = np.array([len(d) for d in docs], np.int32)
    (tmp_path / "raw.bin").write_bytes(np.array([t for d in docs for t in d], np.uint16).tobytes())
    (tmp_path / "raw.idx").write_bytes(index_bytes(lengths, np.dtype(np.uint16)))
    back = open_megatron(prefix, eos=9)
    assert [back.tokens(i).tolist() for i in range(len(back))] == [[5, 6, 9], [9], [7, 9], [8, 9]]
    back = open_megatron(prefix, bos=1, eos=9)
    assert [back.tokens(i).tolist() for i in range(len(back))] == [[1, 5, 6, 9], [1, 9], [1, 7, 9], [1, 8, 9]]


def test_documents_of_several_sequences(tmp_path):
    """A document is the sequences between two document indices (preprocess_data --split-sentences)."""
    pytest.importorskip("torch", reason=BENCH)  # megatron-core imports it
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset", reason=BENCH)
    builder = indexed.IndexedDatasetBuilder(str(tmp_path / "s.bin"), dtype=np.uint16)
    builder.add_document(np.array([1, 2, 3, 4, 5]), [2, 3])
    builder.add_document(np.array([6]), [1])
    builder.finalize(str(tmp_path / "s.idx"))
    back = open_megatron(tmp_path / "s", partition="validation")
    assert back.offsets.tolist() == [0, 5, 6] and back.values.tolist() == [1, 2, 3, 4, 5, 6]
    assert back.partition is engine.Partition.VALIDATION


def corrupt(tmp_path, edit):
    """Export a small pair, let ``edit(idx bytearray, bin path)`` break it, and return the prefix."""
    store = make_store(tmp_path / "store", char_tokenizer())
    export_megatron(store, "train", tmp_path / "c")
    idx = bytearray((tmp_path / "c.idx").read_bytes())
    edit(idx, tmp_path / "c.bin")
    (tmp_path / "c.idx").write_bytes(bytes(idx))
    return tmp_path / "c"


def _set(offset, fmt, value):
    def edit(idx, _):
        struct.pack_into(fmt, idx, offset, value)
    return edit


CORRUPTIONS = {
    "magic": (_set(0, "<B", ord("X")), r"c\.idx: magic: b'XMIDIDX"),
    "version": (_set(9, "<Q", 2), r"c\.idx: version: 2, expected 1"),
    "dtype code": (_set(17, "<B", 9), r"c\.idx: dtype code: 9, expected one of"),
    "float dtype": (_set(17, "<B", 7), r"c\.idx: dtype code 7 \(float32\) holds no token ids"),
    "sequence count": (_set(18, "<Q", 17), r"c\.idx: size: \d+ bytes, expected \d+ for sequence count 17"),
    "pointer": (_set(34 + 4 * 18 + 8 * 3, "<q", 5), r"c\.idx: pointers\[3\] = 5, expected"),
    "document index": (_set(34 + 12 * 18 + 8 * 2, "<q", 0), r"c\.idx: document indices\[1\] = \d+ > \[2\] = 0"),
    "last document index": (_set(34 + 12 * 18 + 8 * 18, "<q", 17), r"c\.idx: document indices: expected 0 first"),
    "length": (_set(34, "<i", -1), r"c\.idx: lengths\[0\] = -1"),
    "truncated header": (lambda idx, _: idx.__delitem__(slice(20, None)), r"c\.idx: header: 20 bytes"),
    "short bin": (lambda _, b: b.write_bytes(b.read_bytes()[:-2]), r"c\.bin: size: \d+ bytes, expected \d+"),
    "missing bin": (lambda _, b: b.unlink(), r"c\.bin: not found"),
    "modes": (lambda idx, _: idx.extend(b"\x00" * 18), r"c\.idx: holds a mode byte per sequence"),
}


@pytest.mark.parametrize("field", sorted(CORRUPTIONS))
def test_a_corrupt_pair_names_the_file_and_field(tmp_path, field):
    edit, message = CORRUPTIONS[field]
    prefix = corrupt(tmp_path, edit)
    assert len(engine.TokenStore.open(tmp_path / "store").documents("train")) == 18  # the offsets above
    with pytest.raises(StoreError, match=message):
        open_megatron(prefix)


def test_a_missing_index_is_named(tmp_path):
    with pytest.raises(StoreError, match=r"nothing\.idx: not found"):
        open_megatron(tmp_path / "nothing")


def test_an_empty_pair_opens(tmp_path):
    (tmp_path / "e.bin").write_bytes(b"")
    (tmp_path / "e.idx").write_bytes(index_bytes(np.zeros(0, np.int32), np.dtype(np.uint16)))
    back = open_megatron(tmp_path / "e")
    assert len(back) == 0 and back.offsets.tolist() == [0]


def test_a_flat_export_is_not_megatron(tmp_path):
    store = make_store(tmp_path / "store", char_tokenizer())
    export_flat(store, "train", tmp_path / "x.bin")
    with pytest.raises(StoreError, match=r"x\.idx: not found"):
        open_megatron(tmp_path / "x")


# -- every batch source over the pair equals the same source over the store --------------------------


@pytest.fixture
def pair(tmp_path):
    """(store, buffers read back) for a GPT-2-style store exported as Megatron writes it, [content, EOT]."""
    tok = gpt2_style()
    texts = [("document %d " % i) * (i % 7 + 1) for i in range(40)]
    store = make_store(tmp_path / "store", tok, texts=texts, copies=1)
    export_megatron(store, "train", tmp_path / "train")
    return store, open_megatron(tmp_path / "train", bos=tok.bos_id)


def test_windows_epoch_equals_the_stores(pair):
    store, back = pair
    for order in (BatchOrder.sequential(), BatchOrder.shuffled(7)):
        config = dict(windows=CausalWindowConfig(8, 3), batches=MiniBatchConfig(5, order))
        a, b = MiniBatchEpoch.build(store, "train", **config), MiniBatchEpoch.build(back, "train", **config)
        assert a.batch_count == b.batch_count > 3
        for k in range(a.batch_count):
            x, y = a.batch(k), b.batch(k)
            assert np.array_equal(x.inputs, y.inputs) and np.array_equal(x.targets, y.targets)


@pytest.mark.parametrize("strategy", ["bfd", "bos_crop"])
def test_packed_epoch_equals_the_stores(pair, strategy):
    store, back = pair
    config = dict(row_length=32, strategy=strategy, batches=MiniBatchConfig(2, BatchOrder.shuffled(3)))
    a, b = PackedEpoch.build(store, "train", **config), PackedEpoch.build(back, "train", **config)
    assert a.batch_count == b.batch_count > 2
    for k in range(a.batch_count):
        x, y = a.batch(k), b.batch(k)
        for field in ("inputs", "targets", "segment_ids", "position_ids", "loss_weights"):
            assert np.array_equal(getattr(x, field), getattr(y, field)), (k, field)


def test_mixture_equals_the_stores(pair):
    store, back = pair

    def windows(source):
        return Mixture([(MiniBatchEpoch.build(source, "train", windows=CausalWindowConfig(8, 8),
                                              batches=MiniBatchConfig(1, BatchOrder.shuffled(1))), 0.7),
                        (MiniBatchEpoch.build(source, "train", windows=CausalWindowConfig(8, 3),
                                              batches=MiniBatchConfig(1, BatchOrder.shuffled(2))), 0.3)], 4)

    def packed(source):
        return Mixture([(PackedEpoch.build(source, "train", row_length=8, batches=MiniBatchConfig(1, BatchOrder.shuffled(s))),
                         w) for s, w in ((3, 0.5), (4, 0.5))], 3)

    for mixture in (windows, packed):
        a, b = mixture(store), mixture(back)
        for k in range(12):
            x, y = a.batch(k), b.batch(k)
            assert np.array_equal(x.inputs, y.inputs) and np.array_equal(x.targets, y.targets)
            assert np.array_equal(x.source, y.source) and np.array_equal(x.source_slot, y.source_slot)


def test_token_dataset_equals_the_stores(pair):
    pytest.importorskip("torch", reason=TORCH)
    from engine.torch import TokenDataset

    store, back = pair
    config = dict(windows=CausalWindowConfig(8, 4), batches=MiniBatchConfig(4, BatchOrder.shuffled(5)))
    a = list(TokenDataset(MiniBatchEpoch.build(store, "train", **config)))
    b = list(TokenDataset(MiniBatchEpoch.build(back, "train", **config)))
    assert len(a) == len(b) > 2
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            if hasattr(x[key], "shape"):
                assert (x[key] == y[key]).all(), key


# -- Hugging Face datasets reads the store as it is ------------------------------------------------


def test_datasets_loads_the_stores_parquet(tmp_path):
    datasets = pytest.importorskip("datasets", reason=BENCH)
    store = make_store(tmp_path / "store", large_vocabulary())
    files = {split: str(tmp_path / "store" / f"split={split}" / "*.parquet") for split in ("train", "validation")}
    loaded = datasets.load_dataset("parquet", data_files=files, cache_dir=str(tmp_path / "hf-cache"))
    for split in ("train", "validation"):
        rows = loaded[split]
        assert rows.column_names == ["id", "tokens"]
        assert rows["id"] == list(store.ids(split))
        assert [list(map(int, t)) for t in rows["tokens"]] == [d.tokens.tolist() for d in store.documents(split)]
    assert loaded["train"].features["tokens"].feature.dtype == "uint32"
