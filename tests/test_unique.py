"""Id uniqueness in 8 bytes per id (engine.corpus.unique): duplicates are found and named with both
places whether they are recent or long past, ids that only share a hash are no error, and memory
per document stays a few bytes."""

import json
import tracemalloc

import pytest

import engine.corpus.documents as documents
import engine.corpus.unique as unique
from engine.corpus import ReadLimits, iter_jsonl
from engine.corpus.unique import SeenIds, find_duplicate
from engine.errors import CorpusError, StoreError
from engine.store import TokenStore
from engine.tokenizers.char import CharTokenizer


SMALL_BUFFER = 4  # most ids live in the sorted runs


def test_seen_ids_find_recent_and_old_duplicates():
    seen = SeenIds(SMALL_BUFFER)
    suspects = []
    for i in range(1000):
        suspects += seen.add(f"id-{i}")
    assert suspects == [] and len(seen) == 1000 and 2 <= len(seen.runs) <= 12  # merged runs, O(log n) of them
    assert seen.add("id-998") == [unique.id_hash("id-998")] or seen.finish() == [unique.id_hash("id-998")]
    later = SeenIds(SMALL_BUFFER)
    later.add_many(f"id-{i}" for i in range(50))
    found = later.add_many(["id-3"]) + later.finish()
    assert found == [unique.id_hash("id-3")]


def test_find_duplicate_tells_a_shared_hash_from_a_duplicate(monkeypatch):
    monkeypatch.setattr(unique, "id_hash", len)  # every id of one length shares a hash
    records = [("ab", "line 1"), ("cd", "line 2"), ("xyz", "line 3"), ("cd", "line 4")]
    assert find_duplicate(iter(records[:3]), [2]) is None
    assert find_duplicate(iter(records), [2]) == ("cd", "line 2", "line 4")


def write_jsonl(path, ids):
    path.write_text("".join(json.dumps({"id": i, "text": "t"}) + "\n" for i in ids), encoding="utf-8")
    return path


@pytest.mark.parametrize("hashing", ["real", "colliding"])
def test_reader_names_both_lines_of_a_duplicate_long_past(tmp_path, monkeypatch, hashing):
    if hashing == "colliding":
        monkeypatch.setattr(unique, "id_hash", lambda doc_id: len(doc_id) % 3)
    ids = [f"d{i}" for i in range(300)]
    small = ReadLimits(id_buffer=SMALL_BUFFER)
    buffers = []

    class Recording(SeenIds):  # the reader's check holds the buffer it was given
        def __init__(self, buffer_ids):
            buffers.append(buffer_ids)
            super().__init__(buffer_ids)

    monkeypatch.setattr(documents, "SeenIds", Recording)
    docs = list(iter_jsonl(write_jsonl(tmp_path / "ok.jsonl", ids), limits=small))
    assert [d.id for d in docs] == ids  # shared hashes of different ids are no error
    path = write_jsonl(tmp_path / "dup.jsonl", ids[:200] + ["d7"] + ids[200:])
    with pytest.raises(CorpusError) as err:
        list(iter_jsonl(path, limits=small))
    assert str(err.value) == f"{path}: duplicate id 'd7' at line 201 (first seen at line 8); ids must be unique"
    assert buffers == [SMALL_BUFFER, SMALL_BUFFER]


def test_store_writer_names_the_splits_of_a_duplicate_long_past(tmp_path, monkeypatch):
    monkeypatch.setattr(unique, "id_hash", lambda doc_id: len(doc_id))
    tok = CharTokenizer("ab")
    values, offsets = tok.encode_documents(["ab"] * 40)
    with TokenStore.writer(tmp_path / "ok", tok, max_rows_per_file=7, id_buffer=SMALL_BUFFER) as writer:
        for part in ("train", "validation"):
            for start in range(0, 40, 10):
                ids = [f"{part}-{i}" for i in range(start, start + 10)]
                writer.write_chunk(part, ids, values[:40], offsets[:11])
        assert writer._seen.buffer_ids == SMALL_BUFFER and writer._seen.runs  # the ids moved past the buffer
    assert TokenStore.open(tmp_path / "ok").num_documents("validation") == 40
    with pytest.raises(StoreError, match=r"duplicate document id 'train-3' \(in train and validation\)"):
        with TokenStore.writer(tmp_path / "dup", tok, max_rows_per_file=7, id_buffer=SMALL_BUFFER) as writer:
            writer.write_chunk("train", [f"train-{i}" for i in range(10)], values[:40], offsets[:11])
            writer.write_chunk("test", [f"test-{i}" for i in range(10)], values[:40], offsets[:11])
            writer.write_chunk("validation", ["v-1", "train-3"] + [f"v{i}" for i in range(8)], values[:40],
                               offsets[:11])
    assert not (tmp_path / "dup").exists()


def peak_reading(path) -> tuple[int, int]:
    tracemalloc.start()
    count = sum(1 for _ in iter_jsonl(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return count, peak


def test_reading_more_documents_costs_a_few_bytes_per_id(tmp_path):
    sizes = (50_000, 250_000)
    peaks = []
    for n in sizes:
        path = tmp_path / f"{n}.jsonl"
        path.write_text("".join(f'{{"id": "document-{i:09d}", "text": "x"}}\n' for i in range(n)), encoding="utf-8")
        count, peak = peak_reading(path)
        assert count == n
        peaks.append(peak)
    per_document = (peaks[1] - peaks[0]) / (sizes[1] - sizes[0])
    assert per_document < 32  # a dict of id -> line held ~150 bytes per document
