"""Token store (the store rules of engine.store): layout, round trip, zero-copy views, atomic writes, locks,
corruption."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.corpus import Partition
from engine.errors import StoreError
from engine.pipeline import prepare
from engine.store import FORMAT_VERSION, EncodedDocument, TokenStore, TokenStoreWriter
from engine.store.layout import ROLES_FORMAT_VERSION
from engine.tokenizers.char import CharTokenizer
from tests.fakes import ByteIdsTokenizer
from tests.helpers import _small_corpus, small_store

TOK = ByteIdsTokenizer()
TEXTS = {
    Partition.TRAIN: {"t-empty": "", "t-a": "a", "t-long": "the quick brown fox " * 30, "t-greek": "αβγ", "t-nul": "x\x00y"},
    Partition.VALIDATION: {"v-1": "validation", "v-2": ""},
    Partition.TEST: {},
}


def encoded(partition: Partition) -> list[EncodedDocument]:
    return [EncodedDocument(i, partition, TOK.encode_document(t, i)) for i, t in TEXTS[partition].items()]


def write_store(path: Path, tokenizer=TOK, **options) -> TokenStore:
    return TokenStore.write(path, {p: encoded(p) for p in Partition}, tokenizer, **options)


def leftovers(parent: Path) -> list[str]:
    return sorted(n for n in os.listdir(parent) if n.startswith(".") or n.endswith(".lock"))


# -- round trip and layout ---------------------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"row_group_size": 2}, {"max_rows_per_file": 2, "chunk_documents": 3}])
def test_round_trip_every_partition(tmp_path, options):
    store = write_store(tmp_path / "store", **options)
    assert store.partitions == (Partition.TRAIN, Partition.VALIDATION, Partition.TEST)
    for part in Partition:
        expected = encoded(part)
        assert store.ids(part) == [d.id for d in expected]
        assert store.num_documents(part) == len(expected)
        assert store.num_tokens(part) == sum(len(d.tokens) for d in expected)
        values, offsets = store.arrays(part)
        assert values.dtype == np.uint32 and offsets.dtype == np.int64
        assert offsets.tolist() == np.cumsum([0] + [len(d.tokens) for d in expected]).tolist()
        docs = store.documents(part)
        assert len(docs) == len(expected)
        for got, want in zip(docs, expected):
            assert got.id == want.id and got.partition is part and got.tokens.tolist() == want.tokens.tolist()
            assert TOK.decode(got.tokens) == TEXTS[part][got.id]
    assert store.documents("train")[0].tokens.tolist() == [0, 1]  # the empty document is [BOS, EOS]
    assert store.num_tokens("train") == 2 + 3 + 602 + 8 + 5
    assert store.num_documents("test") == 0 and store.arrays("test")[1].tolist() == [0]
    assert (store.tokenizer_hash, store.bos_id, store.eos_id, store.format_version) == (TOK.hash, 0, 1, FORMAT_VERSION)
    assert store.tokenizer() == TOK
    store.verify()
    assert leftovers(tmp_path) == []


def test_layout_manifest_and_file_metadata(tmp_path):
    write_store(tmp_path / "store", max_rows_per_file=2)
    root = tmp_path / "store"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        "_engine.json",
        "_tokenizer.json",
        "split=test/part-00000.parquet",
        "split=train/part-00000.parquet",
        "split=train/part-00001.parquet",
        "split=train/part-00002.parquet",
        "split=validation/part-00000.parquet",
    ]
    manifest = json.loads((root / "_engine.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["tokenizer"] == {"kind": "test-byte-ids", "hash": TOK.hash, "bos_id": 0, "eos_id": 1,
                                     "file": "_tokenizer.json", "vocab_size": 258}
    assert TokenStore.open(root).vocab_size == TOK.vocab_size == 258
    assert [(f["name"], f["rows"]) for f in manifest["splits"]["train"]["files"]] == [
        ("split=train/part-00000.parquet", 2), ("split=train/part-00001.parquet", 2), ("split=train/part-00002.parquet", 1)
    ]
    assert manifest["splits"]["test"] == {
        "documents": 0, "tokens": 0, "files": [{**manifest["splits"]["test"]["files"][0], "rows": 0}]
    }
    for file in root.rglob("*.parquet"):
        meta = pq.read_schema(file).metadata
        assert meta[b"engine.tokenizer_hash"].decode() == TOK.hash
        assert (meta[b"engine.format_version"], meta[b"engine.bos_id"], meta[b"engine.eos_id"]) == (b"1", b"0", b"1")
        assert pq.read_schema(file).field("tokens").type == pa.large_list(pa.uint32())
        assert pq.read_schema(file).field("id").type == pa.string()


def test_write_chunk_streams_rows(tmp_path):
    values = np.array([0, 7, 1, 0, 1, 0, 8, 9, 1], dtype=np.uint32)
    offsets = np.array([0, 3, 5, 9], dtype=np.int64)
    with TokenStore.writer(tmp_path / "s", TOK, row_group_size=1) as writer:
        writer.write_chunk("train", ["a", "b", "c"], values, offsets)
        writer.write_chunk(Partition.TRAIN, ["d"], np.array([0, 1], np.uint32), np.array([0, 2], np.int64))
    store = TokenStore.open(tmp_path / "s", tokenizer=TOK)
    got_values, got_offsets = store.arrays("train")
    assert got_values.tolist() == values.tolist() + [0, 1] and got_offsets.tolist() == [0, 3, 5, 9, 11]
    assert pq.ParquetFile(tmp_path / "s" / "split=train" / "part-00000.parquet").metadata.num_row_groups == 4


# -- zero copy -----------------------------------------------------------------------------------


def test_arrays_are_views_of_the_arrow_buffers(tmp_path):
    store = write_store(tmp_path / "store")
    array = store.tokens_array("train")
    values, offsets = store.arrays("train")
    arrow_values = np.frombuffer(array.buffers()[3], dtype=np.uint32)
    arrow_offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)
    assert np.shares_memory(values, arrow_values) and np.shares_memory(offsets, arrow_offsets)
    assert values.ctypes.data == array.buffers()[3].address + 4 * (array.values.offset + int(offsets[0]))
    assert not values.flags.writeable
    doc = store.documents("train")[2]
    assert np.shares_memory(doc.tokens, values) and doc.tokens.base is not None
    assert store.arrays("train")[0] is values  # cached: one read per split


def test_sliced_arrow_column_is_rebased_without_copying_values(tmp_path):
    store = write_store(tmp_path / "store")
    full = store.table("train")
    store._tables[Partition.TRAIN] = full.slice(2, 2)  # as if Arrow handed out a slice
    store._arrays.clear()
    store._ids.clear()
    values, offsets = store.arrays("train")
    assert offsets.tolist() == [0, 602, 610]
    assert values[:3].tolist() == [0, ord("t") + 2, ord("h") + 2]
    assert np.shares_memory(values, np.frombuffer(store.tokens_array("train").buffers()[3], dtype=np.uint32))
    assert [d.id for d in store.documents("train")] == ["t-long", "t-greek"]


def test_documents_sequence_indexing(tmp_path):
    docs = write_store(tmp_path / "store").documents("validation")
    assert docs[-1].id == "v-2" and [d.id for d in docs[::-1]] == ["v-2", "v-1"]
    with pytest.raises(IndexError, match="document index 2 out of range for 2 validation documents"):
        docs[2]


# -- tokenizer checks ---------------------------------------------------------------------------


def test_tokenizer_hash_mismatch_names_both_hashes(tmp_path):
    write_store(tmp_path / "store")
    other = ByteIdsTokenizer(salt="other")
    with pytest.raises(StoreError) as err:
        TokenStore.open(tmp_path / "store", tokenizer=other)
    assert str(err.value) == (
        f"{tmp_path / 'store'}: tokenizer hash {other.hash} does not match the store's tokenizer hash "
        f"{TOK.hash}; use the tokenizer saved in the store (_tokenizer.json) or re-encode"
    )
    TokenStore.open(tmp_path / "store", tokenizer=ByteIdsTokenizer())  # same payload, same hash


def test_real_char_tokenizer_round_trip(tmp_path):
    from engine.tokenizers.char import CharTokenizer

    tok = CharTokenizer.fit(["hello world", "αβγ"])
    docs = [EncodedDocument(f"d{i}", Partition.TRAIN, tok.encode_document(t)) for i, t in enumerate(["hello", "", "γα"])]
    store = TokenStore.write(tmp_path / "store", {"train": docs}, tok)
    assert [tok.decode(d.tokens) for d in store.documents("train")] == ["hello", "", "γα"]
    assert store.tokenizer() == tok


# -- input validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ids, values, offsets, fragment",
    [
        (["a"], np.array([0, 1], np.int64), np.array([0, 2]), "train chunk: tokens must be a 1-D uint32 array, got "
                                                              "int64 array of shape (2,)"),
        (["a"], np.array([0, 1], np.uint32), np.array([0, 2], np.int32), "train chunk: offsets must be a 1-D int64 "
                                                                         "array, got int32"),
        (["a"], np.array([0, 1], np.uint32), np.array([0, 1, 2]), "train chunk: 3 offsets for 1 ids, expected 2"),
        (["a"], np.array([0, 1], np.uint32), np.array([1, 2]), "train chunk: offsets run from 1 to 2, expected 0 to 2 "
                                                               "(len(values))"),
        (["a", "b"], np.array([0, 1], np.uint32), np.array([0, 3, 2]), "train document 'b': offsets decrease"),
        (["a", "b"], np.array([0, 1, 0], np.uint32), np.array([0, 2, 3]), "train document 'b': it has 1 token(s)"),
        (["a", "b"], np.array([0, 1, 5, 1], np.uint32), np.array([0, 2, 4]), "train document 'b' does not start with "
                                                                             "BOS id 0: found 5"),
        (["a"], np.array([0, 9, 9], np.uint32), np.array([0, 3]), "train document 'a' does not end with EOS id 1: found 9"),
        (["a", ""], np.array([0, 1, 0, 1], np.uint32), np.array([0, 2, 4]), "train document 1: id '' is not a non-empty string"),
        (["a", "a"], np.array([0, 1, 0, 1], np.uint32), np.array([0, 2, 4]), "duplicate document id 'a' (in train and train)"),
    ],
)
def test_write_chunk_validates_before_writing(tmp_path, ids, values, offsets, fragment):
    with pytest.raises(StoreError) as err:
        with TokenStore.writer(tmp_path / "s", TOK) as writer:
            writer.write_chunk("train", ids, values, offsets)
    assert fragment in str(err.value)
    assert not (tmp_path / "s").exists() and leftovers(tmp_path) == []


def test_write_documents_checks_partition_dtype_and_cross_split_ids(tmp_path):
    doc = EncodedDocument("x", Partition.VALIDATION, TOK.encode_document("x"))
    with pytest.raises(StoreError, match="document 'x' belongs to validation but is written to train"):
        TokenStore.write(tmp_path / "s", {"train": [doc]}, TOK)
    wide = EncodedDocument("w", Partition.TRAIN, TOK.encode_document("w").astype(np.int64))
    with pytest.raises(StoreError, match="train document 'w': tokens must be a 1-D uint32 array, got int64"):
        TokenStore.write(tmp_path / "s", {"train": [wide]}, TOK)
    twice = {"train": [EncodedDocument("x", Partition.TRAIN, TOK.encode_document(""))], "validation": [doc]}
    with pytest.raises(StoreError, match=r"duplicate document id 'x' \(in train and validation\)"):
        TokenStore.write(tmp_path / "s", twice, TOK)
    with pytest.raises(StoreError, match="unknown partition 'dev'"):
        TokenStore.write(tmp_path / "s", {"dev": []}, TOK)
    assert leftovers(tmp_path) == [] and not (tmp_path / "s").exists()


# -- atomic replacement ------------------------------------------------------------------------------


def test_failure_mid_write_keeps_the_previous_store(tmp_path, monkeypatch):
    path = tmp_path / "store"
    write_store(path)
    before = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}

    calls = []
    real_append = TokenStoreWriter._append

    def append_then_fail(self, out, table, *rest):
        calls.append(table.num_rows)
        if len(calls) > 1:
            raise OSError("disk full (injected)")
        real_append(self, out, table, *rest)

    monkeypatch.setattr(TokenStoreWriter, "_append", append_then_fail)
    many = [EncodedDocument(f"n{i}", Partition.TRAIN, TOK.encode_document("new")) for i in range(10)]
    with pytest.raises(OSError, match="disk full"):
        TokenStore.write(path, {"train": many}, TOK, chunk_documents=4)
    assert calls == [4, 4]
    assert {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()} == before
    assert leftovers(tmp_path) == []
    TokenStore.open(path, tokenizer=TOK).verify()


def test_exception_in_user_code_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError, match="stop"):
        with TokenStore.writer(tmp_path / "s", TOK) as writer:
            writer.write_documents("train", encoded(Partition.TRAIN))
            assert any(n.startswith(".s.tmp-") for n in os.listdir(tmp_path))
            raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []


def test_replace_existing_store_and_refusals(tmp_path):
    path = tmp_path / "store"
    write_store(path)
    new = TokenStore.write(path, {"test": [EncodedDocument("only", Partition.TEST, TOK.encode_document("z"))]}, TOK)
    assert new.ids("test") == ["only"] and new.num_documents("train") == 0
    assert leftovers(tmp_path) == []
    with pytest.raises(StoreError, match="store: already exists \\(pass overwrite=True to replace it\\)"):
        write_store(path, overwrite=False)
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(StoreError, match="precious: exists and is not a token store \\(no _engine.json\\); refusing "
                                         "to replace it"):
        write_store(tmp_path / "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"


def test_writer_must_be_entered(tmp_path):
    writer = TokenStore.writer(tmp_path / "s", TOK)
    with pytest.raises(StoreError, match="writer is not open"):
        writer.write_documents("train", [])


# -- locks ---------------------------------------------------------------------------------------------


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_lock_held_by_live_process_refuses_a_second_writer(tmp_path):
    lock = tmp_path / "store.lock"
    lock.write_text(f"{os.getppid()}\n")
    with pytest.raises(StoreError) as err:
        write_store(tmp_path / "store")
    assert str(err.value).startswith(
        f"{lock}: token store {tmp_path / 'store'} is being written by process {os.getppid()} (lock file {lock});"
    )
    assert lock.read_text() == f"{os.getppid()}\n" and not (tmp_path / "store").exists()


def test_second_writer_in_the_same_process_is_refused(tmp_path):
    with TokenStore.writer(tmp_path / "s", TOK) as first:
        assert (tmp_path / "s.lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(StoreError, match=f"is being written by process {os.getpid()}"):
            with TokenStore.writer(tmp_path / "s", TOK):
                pass
        first.write_documents("train", encoded(Partition.TRAIN))
    assert not (tmp_path / "s.lock").exists()
    assert TokenStore.open(tmp_path / "s").num_documents("train") == 5


def test_stale_lock_is_taken_over(tmp_path):
    lock = tmp_path / "store.lock"
    lock.write_text(f"{dead_pid()}\n")
    (tmp_path / ".store.tmp-999999").mkdir()  # debris of the dead writer
    store = write_store(tmp_path / "store")
    assert store.num_documents("train") == 5
    assert leftovers(tmp_path) == []


def test_wait_for_lock(tmp_path):
    lock = tmp_path / "store.lock"
    lock.write_text(f"{os.getppid()}\n")
    with pytest.raises(StoreError, match="after waiting 0.2 s"):
        write_store(tmp_path / "store", wait=True, timeout=0.2)
    releaser = threading.Timer(0.3, lock.unlink)
    releaser.start()
    started = time.monotonic()
    write_store(tmp_path / "store", wait=True, timeout=30)
    releaser.join()
    assert time.monotonic() - started >= 0.25 and leftovers(tmp_path) == []


# -- corruption -------------------------------------------------------------------------------------------


def test_missing_and_malformed_stores(tmp_path):
    with pytest.raises(StoreError, match="nowhere: no token store here"):
        TokenStore.open(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match=r"empty/_engine.json: not found; .*empty is not a complete token store"):
        TokenStore.open(tmp_path / "empty")
    path = tmp_path / "store"
    write_store(path)
    manifest = json.loads((path / "_engine.json").read_text())
    (path / "_engine.json").write_text(json.dumps({**manifest, "format_version": ROLES_FORMAT_VERSION + 1}))
    with pytest.raises(StoreError, match=f"store format version {ROLES_FORMAT_VERSION + 1} is newer than this engine reads "
                                         f"\\({ROLES_FORMAT_VERSION}\\); upgrade engine to read it"):
        TokenStore.open(path)
    for bad in (0, -3, True, 258.0, "258"):
        tokenizer = {**manifest["tokenizer"], "vocab_size": bad}
        (path / "_engine.json").write_text(json.dumps({**manifest, "tokenizer": tokenizer}))
        with pytest.raises(StoreError, match=r"_engine.json: manifest is malformed \(TypeError: tokenizer vocab_size "
                                             + re.escape(repr(bad))):
            TokenStore.open(path)
    old = {**manifest, "tokenizer": {k: v for k, v in manifest["tokenizer"].items() if k != "vocab_size"}}
    (path / "_engine.json").write_text(json.dumps(old))  # written before the manifest recorded it
    assert TokenStore.open(path).vocab_size is None
    del manifest["splits"]["train"]["tokens"]
    (path / "_engine.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"_engine.json: manifest is malformed \(KeyError: 'tokens'\)"):
        TokenStore.open(path)


def test_truncated_file_is_detected_on_open(tmp_path):
    path = tmp_path / "store"
    write_store(path)
    file = path / "split=train" / "part-00000.parquet"
    size = file.stat().st_size
    file.write_bytes(file.read_bytes()[:-100])
    with pytest.raises(StoreError) as err:
        TokenStore.open(path)
    assert str(err.value) == (
        f"{file}: size is {size - 100} bytes, the manifest expects {size}; the file is truncated or changed"
    )


def test_corrupted_bytes_are_detected_by_verify(tmp_path):
    path = tmp_path / "store"
    write_store(path)
    file = path / "split=validation" / "part-00000.parquet"
    data = bytearray(file.read_bytes())
    data[10] ^= 0xFF
    file.write_bytes(bytes(data))
    store = TokenStore.open(path)  # same size and footer: the cheap checks pass
    manifest = json.loads((path / "_engine.json").read_text())
    expected = manifest["splits"]["validation"]["files"][0]["sha256"]
    with pytest.raises(StoreError, match=f"part-00000.parquet: sha256 is [0-9a-f]{{64}}, the manifest expects "
                                         f"{expected}; the file is corrupt"):
        store.verify()


def test_row_count_and_missing_file_mismatch(tmp_path):
    path = tmp_path / "store"
    write_store(path)
    manifest = json.loads((path / "_engine.json").read_text())
    manifest["splits"]["train"]["files"][0]["rows"] = 4
    manifest["splits"]["train"]["documents"] = 4  # consistent with itself, not with the file
    (path / "_engine.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"split=train/part-00000.parquet: holds 5 rows, the manifest expects 4"):
        TokenStore.open(path)
    (path / "split=test" / "part-00000.parquet").unlink()
    manifest["splits"]["train"]["files"][0]["rows"] = 5
    manifest["splits"]["train"]["documents"] = 5
    (path / "_engine.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"split=test/part-00000.parquet: missing \(the manifest lists it with 0 rows\)"):
        TokenStore.open(path)


# -- property: any documents, any chunking ---------------------------------------------------------

CONTENT = st.lists(st.integers(0, 2**32 - 1), max_size=12)


@settings(max_examples=25, deadline=None)
@given(
    contents=st.lists(st.tuples(st.sampled_from(list(Partition)), CONTENT), max_size=12),
    chunk=st.integers(1, 5),
    row_group=st.integers(1, 4),
)
def test_round_trip_any_documents(tmp_path_factory, contents, chunk, row_group):
    docs = {p: [] for p in Partition}
    for n, (part, content) in enumerate(contents):
        docs[part].append(EncodedDocument(f"doc{n}", part, np.array([0, *content, 1], dtype=np.uint32)))
    path = tmp_path_factory.mktemp("prop") / "store"
    store = TokenStore.write(path, docs, TOK, chunk_documents=chunk, row_group_size=row_group)
    for part in Partition:
        values, offsets = store.arrays(part)
        expected = [d.tokens.tolist() for d in docs[part]]
        assert [values[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == expected
        assert store.ids(part) == [d.id for d in docs[part]]
        assert store.num_tokens(part) == sum(map(len, expected))


# -- resuming an interrupted write ---------------------------------------------------------------


def _resume_corpus():
    from engine.tokenizers import CharTokenizer

    texts = [f"doc {i} " + "xy" * (i % 7) for i in range(23)]
    tok = CharTokenizer.fit(texts)
    docs = [EncodedDocument(f"d{i}", Partition.TRAIN, tok.encode_document(t)) for i, t in enumerate(texts)]
    valid = [EncodedDocument("v0", Partition.VALIDATION, tok.encode_document("doc 1"))]
    return tok, docs, valid


def _write_interrupted(path: Path, tok, docs, upto: int) -> Path:
    """Write ``docs[:upto]`` as a killed writer would leave them: temp dir of a dead pid, no lock."""
    writer = TokenStore.writer(path, tok, max_rows_per_file=4, chunk_documents=2)
    writer.open()
    writer.write_documents(Partition.TRAIN, docs[:upto])
    for out in writer._outputs.values():  # the open file never gets its footer, as after SIGKILL
        if out.writer is not None:
            out.writer.close()
            name = writer.tmp / out.current_name()
            name.write_bytes(name.read_bytes()[:50])
    writer._lock.release()
    dead = path.with_name(f".{path.name}.tmp-{dead_pid()}")
    os.rename(writer.tmp, dead)
    return dead


def test_resume_keeps_complete_files_and_equals_a_fresh_store(tmp_path):
    tok, docs, valid = _resume_corpus()
    fresh = TokenStore.write(tmp_path / "fresh", {Partition.TRAIN: docs, Partition.VALIDATION: valid}, tok,
                             max_rows_per_file=4, chunk_documents=2)
    path = tmp_path / "store"
    _write_interrupted(path, tok, docs, 10)  # files of 4 + 4 complete, 2 rows in a cut file
    with TokenStore.writer(path, tok, max_rows_per_file=4, chunk_documents=2, resume=True) as w:
        assert w.resumed == {Partition.TRAIN: 8, Partition.VALIDATION: 0, Partition.TEST: 0}
        w.write_documents(Partition.TRAIN, docs[w.resumed[Partition.TRAIN]:])
        w.write_documents(Partition.VALIDATION, valid)
    store = TokenStore.open(path, tokenizer=tok)
    store.verify()
    assert leftovers(tmp_path) == []
    for p in Partition:
        assert store.table(p).equals(fresh.table(p))
    ours = json.loads((path / "_engine.json").read_text())
    theirs = json.loads((tmp_path / "fresh" / "_engine.json").read_text())
    assert ours == theirs  # same files, rows and sha256: byte-identical to a fresh run


def test_resume_ignores_leftovers_of_another_tokenizer(tmp_path):
    from engine.tokenizers import CharTokenizer

    tok, docs, _ = _resume_corpus()
    path = tmp_path / "store"
    _write_interrupted(path, tok, docs, 10)
    other = CharTokenizer.fit(["doc xy0123456789 z"])
    with TokenStore.writer(path, other, max_rows_per_file=4, resume=True) as w:
        assert w.resumed[Partition.TRAIN] == 0
    assert leftovers(tmp_path) == []


def test_resume_needs_files_of_fixed_size(tmp_path):
    tok, _, _ = _resume_corpus()
    with pytest.raises(StoreError, match="resume=True needs max_rows_per_file"):
        TokenStore.writer(tmp_path / "s", tok, resume=True)


# -- token store writer -----------------------------------------------------------------------------


@pytest.fixture()
def char_tok():
    return CharTokenizer.fit("abc")


def write_chunk(path, tok, ids, values, offsets):
    with TokenStore.writer(path, tok) as writer:
        writer.write_chunk("train", ids, values, offsets)


VALUES = np.array([0, 2, 1, 0, 3, 4, 1, 0, 1], np.uint32)


@pytest.mark.parametrize(
    "ids, offsets, fragment",
    [
        (["a", "b", "c"], [0, 3, 2, 9], "train document 'b': offsets decrease (offsets[1] = 3 > offsets[2] = 2; "
                                        "offsets must rise from 0 to 9 = len(values))"),
        (["a", "b", "c"], [0, 3 * 2**61, -3 * 2**61, 9],
         f"train chunk: offsets[1] = {3 * 2**61} is outside the values buffer; expected 0 <= offset <= 9 (len(values))"),
        (["a", "b"], [0, 2**63 - 1, 9], f"offsets decrease (offsets[1] = {2**63 - 1} > offsets[2] = 9"),
        (["a", "b", "c"], [0, 3, 7, 10], "train chunk: offsets run from 0 to 10, expected 0 to 9 (len(values))"),
    ],
)
def test_store_writer_checks_offsets_before_writing(tmp_path, char_tok, ids, offsets, fragment):
    with pytest.raises(StoreError) as err:
        write_chunk(tmp_path / "s", char_tok, ids, VALUES, np.array(offsets, np.int64))
    assert fragment in str(err.value)
    assert sorted(os.listdir(tmp_path)) == []


def test_store_writer_checks_dtypes_ids_documents_and_options(tmp_path, char_tok):
    offsets = np.array([0, 3, 7, 9], np.int64)
    with pytest.raises(StoreError, match=r"train chunk: offsets must be a 1-D int64 array, got int32 array of shape \(4,\)"):
        write_chunk(tmp_path / "s", char_tok, ["a", "b", "c"], VALUES, offsets.astype(np.int32))
    with pytest.raises(StoreError, match=r"train chunk: tokens must be a 1-D uint32 array, got int64"):
        write_chunk(tmp_path / "s", char_tok, ["a", "b", "c"], VALUES.astype(np.int64), offsets)
    with pytest.raises(StoreError, match="train chunk: ids is str, expected a list of str"):
        write_chunk(tmp_path / "s", char_tok, "abc", VALUES, offsets)
    with pytest.raises(StoreError, match=r"train document 1: id 'b\\ud800' holds a lone surrogate at character offset 1"):
        write_chunk(tmp_path / "s", char_tok, ["a", "b\ud800", "c"], VALUES, offsets)
    with pytest.raises(StoreError, match="train document 1: got int, expected EncodedDocument"):
        with TokenStore.writer(tmp_path / "s", char_tok) as writer:
            writer.write_documents("train", [EncodedDocument("a", "train", VALUES[:3]), 5])
    with pytest.raises(StoreError, match="tokenizer is NoneType, expected an engine Tokenizer"):
        TokenStore.writer(tmp_path / "s", None)
    with pytest.raises(StoreError, match="row_group_size='x': row_group_size, chunk_documents and max_rows_per_file "
                                         "must be >= 1"):
        TokenStore.writer(tmp_path / "s", char_tok, row_group_size="x")
    with pytest.raises(StoreError, match="timeout=-1: expected a number of seconds >= 0"):
        TokenStore.writer(tmp_path / "s", char_tok, timeout=-1)
    with pytest.raises(StoreError, match="encoded_partitions is list, expected a mapping"):
        TokenStore.write(tmp_path / "s", [], char_tok)
    assert sorted(os.listdir(tmp_path)) == []


def test_store_manifest_may_not_point_outside_the_store(tmp_path, char_tok):
    path = tmp_path / "s"
    TokenStore.write(path, {"train": [EncodedDocument("a", "train", VALUES[:3])]}, char_tok)
    manifest = json.loads((path / "_engine.json").read_text())
    manifest["splits"]["train"]["files"][0]["name"] = "../elsewhere.parquet"
    (path / "_engine.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"manifest is malformed \(ValueError: file name '../elsewhere.parquet' "
                                         r"leaves the store"):
        TokenStore.open(path)


# -- corrupt files -------------------------------------------------------------------------------


def test_truncated_store_file_is_detected_on_open(tmp_path):
    path = tmp_path / "store"
    small_store(path)
    file = path / "split=train" / "part-00000.parquet"
    size = file.stat().st_size
    file.write_bytes(file.read_bytes()[: size // 2])
    with pytest.raises(StoreError) as err:
        TokenStore.open(path)
    assert str(err.value) == (
        f"{file}: size is {size // 2} bytes, the manifest expects {size}; the file is truncated or changed"
    )


def test_flipped_byte_in_store_is_detected_by_verify(tmp_path):
    path = tmp_path / "store"
    small_store(path)
    file = path / "split=train" / "part-00000.parquet"
    data = bytearray(file.read_bytes())
    data[8] ^= 0x01  # inside the first data page: footer, size and row counts still match
    file.write_bytes(bytes(data))
    store = TokenStore.open(path)
    with pytest.raises(StoreError, match=r"part-00000.parquet: sha256 is [0-9a-f]{64}, the manifest expects "
                                         r"[0-9a-f]{64}; the file is corrupt"):
        store.verify()


# -- the writer lock ---------------------------------------------------------------------------------


HOLD_LOCK = """
import sys, time
from pathlib import Path
from engine.store import EncodedDocument, TokenStore
from engine.tokenizers.char import CharTokenizer
tok = CharTokenizer.fit("ab")
with TokenStore.writer(sys.argv[1], tok) as w:
    w.write_documents("train", [EncodedDocument("held", "train", tok.encode_document("ab"))])
    print("locked", flush=True)
    while not Path(sys.argv[2]).exists():
        time.sleep(0.02)
"""


def test_second_writer_fails_naming_lock_and_pid_then_waits_and_succeeds(tmp_path):
    store, release = tmp_path / "store", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(store), str(release)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        tok = CharTokenizer.fit("xy")
        docs = {"train": [EncodedDocument("mine", "train", tok.encode_document("xy"))]}
        with pytest.raises(StoreError) as err:
            TokenStore.write(store, docs, tok)
        lock = tmp_path / "store.lock"
        assert str(err.value).startswith(
            f"{lock}: token store {store} is being written by process {holder.pid} (lock file {lock});"
        )
        assert not store.exists()
        result = {}

        def second():
            result["store"] = TokenStore.write(store, docs, tok, wait=True, timeout=60)

        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.3)
        assert waiter.is_alive() and "store" not in result  # still waiting for the first writer
        release.touch()
        assert holder.wait(timeout=60) == 0
        waiter.join(timeout=60)
        assert result["store"].ids("train") == ["mine"]
        assert not lock.exists()
    finally:
        release.touch()
        holder.wait(timeout=60)


def test_store_directory_reads_as_one_parquet_dataset_partitioned_by_split(tmp_path):
    corpus = _small_corpus(tmp_path)
    (tmp_path / "s.json").write_text(json.dumps({"train": ["a"], "validation": ["b"], "test": ["c"]}))
    prepare(corpus, tmp_path / "s.json", tmp_path / "out", tokenizer="char", context_length=2, quiet=True, threads=1)
    root = tmp_path / "out" / "store"
    table = ds.dataset(root, format="parquet", partitioning="hive").to_table()
    rows = sorted(zip(table.column("split").to_pylist(), table.column("id").to_pylist(),
                      table.column("tokens").to_pylist()))
    # char vocabulary of "hello world": " " 2, d 3, e 4, h 5, l 6, o 7, r 8, w 9; empty text -> [BOS, EOS]
    assert rows == [
        ("test", "c", [0, 6, 7, 9, 1]),
        ("train", "a", [0, 5, 4, 6, 6, 7, 2, 9, 7, 8, 6, 3, 1]),
        ("validation", "b", [0, 1]),
    ]
    assert pq.read_table(root).num_rows == 3
    store = TokenStore.open(root)
    assert store.tokenizer().hash == store.tokenizer_hash
