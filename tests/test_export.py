"""engine.export and ``engine export``: bytes equal to megatron-core's builder, flat files, the BOS
rule, atomic writes, refusals and exit codes; the kernel against its plain-loop twin."""

from __future__ import annotations

import json
import os
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import engine
from engine.errors import ConfigurationError, StoreError
from engine.export import export_flat, export_megatron
from engine.kernels.export import gather_documents
from engine.megatron import dtype_for_vocabulary, index_bytes
from engine.store import EncodedDocument, TokenStore
from engine.tokenizers.byte_bpe import ByteBpeTokenizer
from engine.tokenizers.char import CharTokenizer
from tests.helpers import run
from tests.naive_export import naive_gather

BENCH = "needs the bench extra (pip install -e '.[bench]')"
TEXTS = ["hello world", "", "abc " * 40, "\u00df\u2202\u0192 \u03b1\u03b2", "x", "the end\n"]


def gpt2_style() -> ByteBpeTokenizer:
    """Bytes and one special, <|endoftext|>, that is both BOS and EOS (vocabulary 257: uint16)."""
    return ByteBpeTokenizer([bytes([b]) for b in range(256)], specials={"<|endoftext|>": 256},
                            bos="<|endoftext|>", eos="<|endoftext|>")


def large_vocabulary() -> ByteBpeTokenizer:
    """Bytes, unused ids up to 70,000 and BOS 70,000 / EOS 70,001: Megatron's int32, nanoGPT's uint32."""
    return ByteBpeTokenizer([bytes([b]) for b in range(256)] + [None] * (70_000 - 256),
                            specials={"<bos>": 70_000, "<eos>": 70_001})


def char_tokenizer() -> CharTokenizer:
    return CharTokenizer.fit("".join(TEXTS))


TOKENIZERS = {"char": char_tokenizer, "gpt2-style": gpt2_style, "large": large_vocabulary}


def make_store(path, tok, texts=TEXTS, *, copies=3, **writer) -> TokenStore:
    """A store of ``copies`` rounds of ``texts`` in train (several row groups and files), one in validation."""
    docs = {"train": [EncodedDocument(f"t{i}", "train", tok.encode_document(t))
                      for i, t in enumerate(texts * copies)],
            "validation": [EncodedDocument("v0", "validation", tok.encode_document(texts[0]))],
            "test": []}
    writer = {"row_group_size": 4, "max_rows_per_file": 7} | writer
    return TokenStore.write(path, docs, tok, **writer)


def builder_bytes(tmp_path, documents, dtype) -> tuple[bytes, bytes]:
    """What megatron-core's IndexedDatasetBuilder writes for these documents (add_document each)."""
    torch = pytest.importorskip("torch", reason=BENCH)
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset", reason=BENCH)
    prefix = str(tmp_path / "reference")
    builder = indexed.IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    with warnings.catch_warnings():  # numpy 2's note on torch's __array__, inside the builder
        warnings.simplefilter("ignore", DeprecationWarning)
        for doc in documents:
            builder.add_document(torch.tensor(np.asarray(doc, dtype=np.int64)), [len(doc)])
    builder.finalize(prefix + ".idx")
    with open(prefix + ".bin", "rb") as b, open(prefix + ".idx", "rb") as i:
        return b.read(), i.read()


def expected_documents(store, split, tok, *, bos: bool):
    """The documents as the export writes them, by the rule spelled out: the BOS dropped when
    ``--no-bos`` or when BOS is EOS."""
    drop = (not bos) or tok.bos_id == tok.eos_id
    out = []
    for doc in store.documents(split):
        tokens = [int(t) for t in doc.tokens]
        assert tokens[0] == tok.bos_id and tokens[-1] == tok.eos_id
        out.append(tokens[1:] if drop else tokens)
    return out


# -- the kernel --------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), max_size=6), max_size=8), st.integers(-1, 6), st.booleans(),
       st.integers(0, 3), st.sampled_from([np.uint16, np.int32, np.uint32]))
def test_gather_matches_plain_loop(docs, bos, drop, lead, dtype):
    values = np.array([7] * lead + [t for d in docs for t in d], dtype=np.uint32)
    offsets = np.array([lead] + list(lead + np.cumsum([len(d) for d in docs], dtype=np.int64)), dtype=np.int64)
    out = np.full(values.shape[0] + 1, 99, dtype=dtype)
    lengths = np.full(len(docs), -5, dtype=np.int32)
    n, largest = gather_documents(values, offsets, bos, drop, out, lengths)
    want, want_lengths, want_largest = naive_gather(values, offsets, bos, drop, dtype)
    assert n == want.shape[0] and largest == want_largest
    assert np.array_equal(out[:n], want) and out[:n].dtype == want.dtype
    assert np.array_equal(lengths, want_lengths)
    assert np.all(out[n:] == 99)


def test_dtype_rule_is_megatrons():
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset", reason=BENCH)
    for vocab in (1, 257, 32_000, 65_499, 65_500, 65_536, 70_002, 128_256, 1 << 24):
        assert dtype_for_vocabulary(vocab) == np.dtype(indexed.DType.optimal_dtype(vocab)), vocab


# -- Megatron: exact bytes ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
@pytest.mark.parametrize("bos", [True, False])
def test_megatron_bytes_equal_the_builders(tmp_path, name, bos):
    tok = TOKENIZERS[name]()
    store = make_store(tmp_path / "store", tok)
    result = export_megatron(store, "train", tmp_path / "out" / "train", bos=bos)
    documents = expected_documents(store, "train", tok, bos=bos)
    dtype = np.dtype(np.uint16 if tok.vocab_size < 65_500 else np.int32)
    assert result.dtype == dtype.name and result.documents == len(documents)
    assert result.tokens == sum(map(len, documents))
    want_bin, want_idx = builder_bytes(tmp_path, documents, dtype.type)
    assert (tmp_path / "out" / "train.bin").read_bytes() == want_bin
    assert (tmp_path / "out" / "train.idx").read_bytes() == want_idx
    assert index_bytes(np.array([len(d) for d in documents], np.int32), dtype) == want_idx


def test_gpt2_style_writes_one_eos_between_documents(tmp_path):
    tok = gpt2_style()
    store = make_store(tmp_path / "store", tok, copies=1)
    result = export_megatron(store, "train", tmp_path / "train")
    assert result.bos_dropped
    flat = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    eot = tok.eos_id
    # [content..., EOT] per document: as many EOT as documents, one after each, never two in a row
    # except where a document is empty ("" gives a lone EOT right after the previous one).
    want = []
    for text in TEXTS:
        want.extend(list(text.encode("utf-8")) + [eot])
    assert flat.tolist() == want
    assert int((flat == eot).sum()) == len(TEXTS)


def test_indexed_dataset_reads_what_engine_writes(tmp_path):
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset", reason=BENCH)
    for name in ("char", "large"):
        tok = TOKENIZERS[name]()
        store = make_store(tmp_path / name, tok)
        export_megatron(store, "train", tmp_path / f"{name}-train")
        dataset = indexed.IndexedDataset(str(tmp_path / f"{name}-train"))
        docs = store.documents("train")
        assert len(dataset) == len(docs)
        assert dataset.document_indices.tolist() == list(range(len(docs) + 1))
        for i, doc in enumerate(docs):
            assert dataset[i].tolist() == doc.tokens.tolist()
            if len(doc.tokens) >= 3:  # get() does not stop at a sequence's end
                assert dataset.get(i, offset=1, length=2).tolist() == doc.tokens[1:3].tolist()


def test_gpt_dataset_samples_the_exported_documents(tmp_path):
    """Megatron's GPTDataset (the trainer's own sampler) over the exported pair: sample ``k`` is the 17
    tokens at ``16 * shuffle_index[k]`` of the documents concatenated in its document order."""
    from types import SimpleNamespace

    pytest.importorskip("torch", reason=BENCH)
    gpt = pytest.importorskip("megatron.core.datasets.gpt_dataset", reason=BENCH)
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset", reason=BENCH)
    from megatron.core.datasets.utils import Split

    tok = char_tokenizer()
    store = make_store(tmp_path / "store", tok, copies=20)
    export_megatron(store, "train", tmp_path / "train")
    dataset = indexed.IndexedDataset(str(tmp_path / "train"))
    megatron_tokenizer = SimpleNamespace(vocab_size=tok.vocab_size, eod=tok.eos_id, pad=-1,
                                         unique_identifiers={"class": "engine-test"})
    config = gpt.GPTDatasetConfig(random_seed=1, sequence_length=16, blend=None, split="1,0,0",
                                  tokenizer=megatron_tokenizer, reset_position_ids=False, reset_attention_mask=False,
                                  eod_mask_loss=False, path_to_cache=str(tmp_path / "cache"), mmap_bin_files=True)
    sampled = gpt.GPTDataset(dataset, str(tmp_path / "train"), np.arange(len(dataset), dtype=np.int32), None,
                             Split.train, config)
    docs = store.documents("train")
    stream = np.concatenate([docs[int(d)].tokens for d in sampled.document_index]).astype(np.int64)
    assert len(sampled) >= 10
    for k in range(10):
        start = 16 * int(sampled.shuffle_index[k])
        sample = sampled[k]
        assert np.asarray(sample["tokens"]).tolist() == stream[start:start + 16].tolist()
        assert np.asarray(sample["labels"]).tolist() == stream[start + 1:start + 17].tolist()


# -- nanoGPT ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
@pytest.mark.parametrize("bos", [True, False])
def test_flat_file_is_the_documents_back_to_back(tmp_path, name, bos):
    tok = TOKENIZERS[name]()
    store = make_store(tmp_path / "store", tok)
    path = tmp_path / "train.bin"
    result = export_flat(store, "train", path, bos=bos)
    documents = expected_documents(store, "train", tok, bos=bos)
    dtype = np.uint16 if tok.vocab_size <= 65_536 else np.uint32
    assert path.read_bytes() == np.array([t for d in documents for t in d], dtype=dtype).tobytes()
    described = json.loads((tmp_path / "train.bin.json").read_text())
    assert described["format"] == "engine.export" and described["export"] == "nanogpt"
    assert described["dtype"] == np.dtype(dtype).name and result.dtype == described["dtype"]
    assert described["tokens"] == sum(map(len, documents)) and described["documents"] == len(documents)
    assert described["tokenizer_hash"] == store.tokenizer_hash and described["vocab_size"] == tok.vocab_size
    assert described["files"] == [{"name": "train.bin", "bytes": path.stat().st_size}]
    assert described["bos_dropped"] == ((not bos) or name == "gpt2-style")


def test_uint16_holds_ids_up_to_65535(tmp_path):
    """A vocabulary of exactly 65,536 tokens is uint16 for nanoGPT, int32 for Megatron."""
    tok = ByteBpeTokenizer([bytes([b]) for b in range(256)] + [None] * (65_534 - 256),
                           specials={"<bos>": 65_534, "<eos>": 65_535})
    assert tok.vocab_size == 65_536
    store = make_store(tmp_path / "store", tok, copies=1)
    assert export_flat(store, "train", tmp_path / "a.bin").dtype == "uint16"
    assert np.fromfile(tmp_path / "a.bin", np.uint16)[-1] == 65_535
    assert export_megatron(store, "train", tmp_path / "m").dtype == "int32"
    assert export_megatron(store, "train", tmp_path / "m16", dtype="uint16").dtype == "uint16"


# -- what a store records ---------------------------------------------------------------------------


def test_a_store_without_bos_is_written_as_stored(tmp_path, monkeypatch):
    """A manifest that records no BOS (null): nothing is dropped, even with bos=False and a tokenizer
    that has one; a manifest without the entry: the tokenizer's BOS is the one dropped."""
    tok = char_tokenizer()
    store = make_store(tmp_path / "store", tok, copies=1)
    stored = np.concatenate([d.tokens for d in store.documents("train")]).astype(np.uint16)
    monkeypatch.setattr(TokenStore, "bos_id", property(lambda self: None))
    result = export_flat(store, "train", tmp_path / "a.bin", bos=False)
    assert not result.bos_dropped and result.tokens == stored.shape[0]
    assert np.array_equal(np.fromfile(tmp_path / "a.bin", np.uint16), stored)
    assert json.loads((tmp_path / "a.bin.json").read_text())["bos_id"] is None

    def missing(self):
        raise KeyError("bos_id")

    monkeypatch.setattr(TokenStore, "bos_id", property(missing))
    result = export_flat(store, "train", tmp_path / "b.bin", bos=False)
    assert result.bos_dropped and result.tokens == stored.shape[0] - len(store.documents("train"))


def test_the_tokenizer_is_not_loaded_when_the_manifest_records_the_vocabulary(tmp_path, monkeypatch):
    """vocab_size, BOS and EOS come from the manifest: export never loads the tokenizer file (here
    loading it fails); the dtype and the vocabulary bound are the recorded size's."""
    tok = large_vocabulary()
    store = make_store(tmp_path / "store", tok)
    assert store.vocab_size == tok.vocab_size == 70_002
    want = export_megatron(store, "train", tmp_path / "before", bos=False)

    def unloadable(self):
        raise AssertionError("export loaded the tokenizer")

    monkeypatch.setattr(TokenStore, "tokenizer", unloadable)
    result = export_megatron(TokenStore.open(tmp_path / "store"), "train", tmp_path / "after", bos=False)
    assert result.dtype == want.dtype == "int32" and result.tokens == want.tokens
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"after{ext}").read_bytes() == (tmp_path / f"before{ext}").read_bytes()
    assert json.loads((tmp_path / "after.json").read_text())["vocab_size"] == 70_002


def test_a_store_without_a_recorded_vocabulary_loads_its_tokenizer(tmp_path, monkeypatch):
    """A manifest written before it recorded vocab_size: export loads the tokenizer for it, and
    writes the same files as from a store that records it."""
    tok = large_vocabulary()
    store = make_store(tmp_path / "store", tok)
    export_megatron(store, "train", tmp_path / "recorded")
    manifest_path = tmp_path / "store" / "_engine.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["tokenizer"]["vocab_size"]
    manifest_path.write_text(json.dumps(manifest))
    old = TokenStore.open(tmp_path / "store")
    assert old.vocab_size is None
    loaded = []
    original = TokenStore.tokenizer

    def counted(self):
        loaded.append(self.path)
        return original(self)

    monkeypatch.setattr(TokenStore, "tokenizer", counted)
    assert export_megatron(old, "train", tmp_path / "loaded").dtype == "int32"
    assert len(loaded) == 1
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"loaded{ext}").read_bytes() == (tmp_path / f"recorded{ext}").read_bytes()
    with pytest.raises(ConfigurationError, match=r"vocabulary holds 70,002 tokens"):
        export_flat(old, "train", tmp_path / "t.bin", dtype="uint16")


def test_only_a_leading_bos_is_dropped(tmp_path):
    """A document that does not start with BOS keeps its first token under --no-bos."""
    tok = char_tokenizer()
    store = make_store(tmp_path / "store", tok, copies=1)
    values, offsets = store.arrays("train")
    values = values.copy()
    values[offsets[2]] = 5  # document 2 no longer starts with BOS
    out = np.empty(values.shape[0], np.uint16)
    lengths = np.empty(offsets.shape[0] - 1, np.int32)
    n, _ = gather_documents(values, offsets, tok.bos_id, True, out, lengths)
    assert lengths[2] == offsets[3] - offsets[2] and lengths[1] == offsets[2] - offsets[1] - 1
    assert n == values.shape[0] - (offsets.shape[0] - 2)


# -- atomic writes and refusals --------------------------------------------------------------------


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_second_export_replaces_its_own_files(tmp_path):
    tok = char_tokenizer()
    store = make_store(tmp_path / "store", tok)
    out = tmp_path / "out"
    export_megatron(store, "train", out / "train")
    first = (out / "train.bin").read_bytes()
    export_megatron(store, "validation", out / "train")  # same prefix, other split: replaced
    assert (out / "train.bin").read_bytes() != first
    assert json.loads((out / "train.json").read_text())["split"] == "validation"
    assert leftovers(out) == []


@pytest.mark.parametrize("victim", ["train.bin", "train.idx", "train.json"])
def test_refuses_to_replace_a_file_it_did_not_write(tmp_path, victim):
    store = make_store(tmp_path / "store", char_tokenizer())
    out = tmp_path / "out"
    out.mkdir()
    (out / victim).write_bytes(b"user data")
    with pytest.raises(ConfigurationError, match=f"{victim}: exists and was not written by engine export"):
        export_megatron(store, "train", out / "train")
    assert (out / victim).read_bytes() == b"user data"
    assert sorted(p.name for p in out.iterdir()) == [victim]
    export_megatron(store, "train", out / "train", force=True)
    assert (out / "train.idx").read_bytes()[:9] == b"MMIDIDX\x00\x00"


def test_a_marker_of_another_kind_does_not_count(tmp_path):
    store = make_store(tmp_path / "store", char_tokenizer())
    export_flat(store, "train", tmp_path / "train")  # writes train and train.json (a nanogpt marker)
    with pytest.raises(ConfigurationError, match="not written by engine export"):
        export_megatron(store, "train", tmp_path / "train")


def test_never_replaces_a_folder_or_a_link(tmp_path):
    store = make_store(tmp_path / "store", char_tokenizer())
    (tmp_path / "train.bin").mkdir()
    with pytest.raises(ConfigurationError, match="is not a regular file"):
        export_megatron(store, "train", tmp_path / "train", force=True)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep")
    (tmp_path / "flat.bin").symlink_to(target)
    with pytest.raises(ConfigurationError, match="is not a regular file"):
        export_flat(store, "train", tmp_path / "flat.bin", force=True)
    assert target.read_bytes() == b"keep"


def test_a_failed_export_leaves_nothing_and_keeps_the_previous_pair(tmp_path, monkeypatch):
    store = make_store(tmp_path / "store", char_tokenizer())
    out = tmp_path / "out"
    export_megatron(store, "train", out / "train")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    import engine.export as module

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, "index_bytes", broken)
    with pytest.raises(OSError, match="No space"):
        export_megatron(store, "validation", out / "train")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_bad_input_names_what_and_where(tmp_path):
    store = make_store(tmp_path / "store", large_vocabulary())
    with pytest.raises(ConfigurationError, match=r"holds no documents"):
        export_megatron(store, "test", tmp_path / "t")
    with pytest.raises(ConfigurationError, match=r"vocabulary holds 70,002 tokens .*uint16 holds ids up to 65,535"):
        export_megatron(store, "train", tmp_path / "t", dtype="uint16")
    with pytest.raises(ConfigurationError, match=r"dtype 'uint32': expected one of uint16, int32"):
        export_megatron(store, "train", tmp_path / "t", dtype="uint32")
    with pytest.raises(ConfigurationError, match=r"named by its prefix \(give .*/t for"):
        export_megatron(store, "train", tmp_path / "t.bin")
    with pytest.raises(StoreError, match="no token store here"):
        export_flat(tmp_path / "missing", "train", tmp_path / "t")
    with pytest.raises(StoreError, match="unknown partition|expected train, validation or test"):
        export_flat(store, "dev", tmp_path / "t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_public_names():
    assert engine.export_megatron is export_megatron and engine.export_flat is export_flat
    assert callable(engine.open_megatron)


# -- the command -------------------------------------------------------------------------------------


def test_cli_exports_megatron_and_nanogpt(tmp_path):
    store = make_store(tmp_path / "store", char_tokenizer())
    result = run("export", tmp_path / "store", "--format", "megatron", "--out", tmp_path / "m" / "train")
    assert result.exit_code == 0, result.output
    assert "megatron, uint16" in result.output and f"{len(store.documents('train')):,} documents" in result.output
    result = run("export", tmp_path / "store", "--split", "validation", "--format", "nanogpt",
                 "--out", tmp_path / "val.bin", "--no-bos", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["bos_dropped"] and summary["documents"] == 1 and summary["split"] == "validation"
    assert np.fromfile(tmp_path / "val.bin", np.uint16).tolist() == store.documents("validation")[0].tokens[1:].tolist()


def test_cli_exit_codes(tmp_path):
    make_store(tmp_path / "store", large_vocabulary())
    (tmp_path / "mine.bin").write_bytes(b"x")
    cases = [
        (["export", tmp_path / "nowhere", "--format", "megatron", "--out", tmp_path / "a"], "no token store here"),
        (["export", tmp_path / "store", "--split", "test", "--format", "megatron", "--out", tmp_path / "a"],
         "split test holds no documents"),
        (["export", tmp_path / "store", "--format", "nanogpt", "--dtype", "uint16", "--out", tmp_path / "a"],
         "uint16 holds ids up to 65,535"),
        (["export", tmp_path / "store", "--format", "megatron", "--out", tmp_path / "mine"],
         "mine.bin: exists and was not written by engine export"),
        (["export", tmp_path / "store", "--split", "dev", "--format", "megatron", "--out", tmp_path / "a"], "dev"),
        (["export", tmp_path / "store", "--format", "parquet", "--out", tmp_path / "a"], "parquet"),
        (["export", tmp_path / "store", "--format", "megatron"], "--out"),
    ]
    for args, message in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
    assert (tmp_path / "mine.bin").read_bytes() == b"x"
    assert not (tmp_path / "a.bin").exists() and not (tmp_path / "a").exists()


def test_cli_help_has_examples():
    result = run("export", "--help")
    assert result.exit_code == 0
    assert "engine export out --split train --format megatron" in result.output
    assert result.output.count("Example:") >= 5


def test_out_folder_is_made(tmp_path):
    store = make_store(tmp_path / "store", char_tokenizer())
    export_flat(store, "train", tmp_path / "a" / "b" / "train.bin")
    assert os.path.getsize(tmp_path / "a" / "b" / "train.bin") > 0


def test_export_streams_row_groups_never_the_whole_split(tmp_path, monkeypatch):
    """The split is read row group by row group (engine.store.stream), never as one table."""
    import engine.store.stream as stream

    tok = char_tokenizer()
    store = make_store(tmp_path / "store", tok, copies=4)  # 24 documents: row groups of 4, files of 7
    want = np.concatenate([d.tokens for d in store.documents("train")]).astype(np.uint16).tobytes()
    reopened = TokenStore.open(tmp_path / "store")
    groups = []
    original = stream.token_batches

    def counted(*args, **kwargs):
        for values, offsets in original(*args, **kwargs):
            groups.append(offsets.shape[0] - 1)
            yield values, offsets

    def whole(self, partition):
        raise AssertionError("the split was read whole")

    monkeypatch.setattr(TokenStore, "table", whole)
    monkeypatch.setattr("engine.export.token_batches", counted)
    export_flat(reopened, "train", tmp_path / "a.bin")
    assert (tmp_path / "a.bin").read_bytes() == want
    assert sum(groups) == 24 and max(groups) <= 4 and len(groups) >= 6


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_parallel_decoding_yields_the_row_groups_in_store_order(tmp_path, threads):
    """Row groups decoded on several threads come back in store order, each exactly as one thread
    decodes it (30 documents in files of 7 rows, row groups of 4: 9 groups over 5 files)."""
    from engine.store.stream import token_batches

    store = make_store(tmp_path / "store", char_tokenizer(), copies=5)
    serial = [(v.copy(), o.copy()) for v, o in token_batches(store, "train")]
    parallel = [(v.copy(), o.copy()) for v, o in token_batches(store, "train", threads=threads)]
    assert [o.shape[0] - 1 for _, o in serial] == [4, 3] * 4 + [2]
    assert len(parallel) == len(serial)
    for (v, o), (w, p) in zip(serial, parallel):
        assert np.array_equal(o, p) and np.array_equal(v, w)
    values, offsets = store.arrays("train")
    flat = np.concatenate([v[o[0]:o[-1]] for v, o in parallel])
    assert np.array_equal(flat, values)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_decoding_runs_at_most_threads_row_groups_ahead(tmp_path, monkeypatch, threads):
    """Row groups are decoded at most ``threads`` ahead of the one the caller holds: memory holds
    ``threads + 1`` row groups, never the split (30 documents, 9 row groups)."""
    import threading

    import engine.store.stream as stream

    store = make_store(tmp_path / "store", char_tokenizer(), copies=5)
    decoded, lock = [], threading.Lock()
    original = stream._decode

    def counted(*args):
        out = original(*args)
        with lock:
            decoded.append(args[1])
        return out

    monkeypatch.setattr(stream, "_decode", counted)
    ahead = []
    for consumed, _ in enumerate(stream.token_batches(store, "train", threads=threads), start=1):
        may = consumed + (threads if threads > 1 else 0)
        deadline = time.monotonic() + 5
        while len(decoded) < min(9, may) and time.monotonic() < deadline:
            time.sleep(0.001)  # the decoding threads run as far ahead as they may
        time.sleep(0.005)  # and no further, given the time
        with lock:
            ahead.append(len(decoded) - consumed)
    assert len(decoded) == 9 and len(ahead) == 9
    assert max(ahead) == (0 if threads == 1 else threads)
