"""Corpus readers, split manifests, hash and positional splits (SPEC §2)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.corpus import (
    Corpus,
    CorpusPartitions,
    Document,
    Partition,
    ReadReport,
    SplitManifest,
    hash_partition,
    iter_jsonl,
    iter_parquet_batches,
    read_text_file,
)
from engine.errors import ConfigurationError, CorpusError

ROOT = Path(__file__).resolve().parent.parent


def write_lines(path: Path, lines: list[bytes | str]) -> Path:
    path.write_bytes(b"".join((l.encode("utf-8") if isinstance(l, str) else l) + b"\n" for l in lines))
    return path


def jl(doc_id, text) -> str:
    return json.dumps({"id": doc_id, "text": text}, ensure_ascii=False)


# -- JSONL -----------------------------------------------------------------------------------


def test_jsonl_reads_documents_in_order_and_skips_blank_lines(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [jl("a", "alpha"), "", "   ", jl("b", "βήτα\x00nul"), jl("c", "")])
    corpus = Corpus.from_jsonl(path)
    assert [(d.id, d.text) for d in corpus] == [("a", "alpha"), ("b", "βήτα\x00nul"), ("c", "")]
    assert len(corpus) == 3 and corpus[1] == Document("b", "βήτα\x00nul") and corpus.index_of("c") == 2
    assert corpus.report.blank_lines == 2 and corpus.report.documents == 3
    assert corpus[1:].ids() == ["b", "c"]


@pytest.mark.parametrize(
    "line, fragment",
    [
        ('{"id": "x", "text": ', "c.jsonl:2: malformed JSON (Expecting value at column 21)"),
        ('["x", "y"]', 'c.jsonl:2: expected a JSON object {"id": ..., "text": ...}, got list'),
        ('{"text": "t"}', 'c.jsonl:2: missing "id"'),
        ('{"id": "x"}', 'c.jsonl:2: missing "text"'),
        ('{"id": 7, "text": "t"}', 'c.jsonl:2: "id" must be a string, got int'),
        ('{"id": "x", "text": null}', 'c.jsonl:2: "text" must be a string, got NoneType'),
        ('{"id": "", "text": "t"}', 'c.jsonl:2: empty "id"'),
    ],
)
def test_jsonl_bad_lines_name_file_and_line(tmp_path, line, fragment):
    path = write_lines(tmp_path / "c.jsonl", [jl("ok", "fine"), line, jl("ok2", "fine")])
    with pytest.raises(CorpusError) as err:
        Corpus.from_jsonl(path)
    assert fragment in str(err.value)
    assert str(err.value).startswith(str(path))


def test_jsonl_skip_bad_lines_counts_them(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [jl("a", "1"), "{oops", '{"id": ""}', "42", jl("b", "2")])
    corpus = Corpus.from_jsonl(path, skip_bad_lines=True)
    assert corpus.ids() == ["a", "b"]
    assert corpus.report.skipped_bad_lines == 3
    assert corpus.report.first_problems[0].startswith(f"{path}:2: malformed JSON")


def test_jsonl_duplicate_id_names_both_lines_even_when_skipping(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [jl("a", "1"), jl("dup", "2"), "", jl("dup", "3")])
    for skip in (False, True):
        with pytest.raises(CorpusError, match=r"duplicate id 'dup' at line 4 \(first seen at line 2\)"):
            Corpus.from_jsonl(path, skip_bad_lines=skip)


def test_jsonl_invalid_utf8_names_absolute_byte_offset(tmp_path):
    first = jl("a", "héllo").encode("utf-8") + b"\n"  # 'é' makes byte and character offsets differ
    bad = b'{"id": "b", "text": "x\xffy"}\n'
    path = tmp_path / "c.jsonl"
    path.write_bytes(first + bad + jl("c", "z").encode() + b"\n")
    offset = len(first) + bad.index(b"\xff")
    with pytest.raises(CorpusError) as err:
        Corpus.from_jsonl(path)
    assert str(err.value).startswith(f"{path}:2: invalid UTF-8 at byte offset {offset} (byte 0xff)")
    assert offset == 52  # 30 bytes of line 1, then 22 bytes before 0xff

    replaced = Corpus.from_jsonl(path, on_invalid_utf8="replace")
    assert replaced.get("b").text == "x\ufffdy" and replaced.report.replaced_invalid_utf8 == 1
    skipped = Corpus.from_jsonl(path, on_invalid_utf8="skip")
    assert skipped.ids() == ["a", "c"] and skipped.report.skipped_invalid_utf8 == 1
    with pytest.raises(CorpusError, match="on_invalid_utf8='ignore' is not a policy"):
        Corpus.from_jsonl(path, on_invalid_utf8="ignore")


def test_jsonl_lone_surrogate_escape_is_invalid_text(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [jl("a", "ok"), '{"id": "s", "text": "ab\\ud800c"}'])
    with pytest.raises(CorpusError, match=r"c.jsonl:2: document 's' holds a lone surrogate U\+D800 at character offset 2"):
        Corpus.from_jsonl(path)
    assert Corpus.from_jsonl(path, on_invalid_utf8="replace").get("s").text == "ab\ufffdc"
    assert Corpus.from_jsonl(path, on_invalid_utf8="skip").ids() == ["a"]


def test_iter_jsonl_streams_and_fills_report(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [jl(f"d{i}", str(i)) for i in range(3)])
    report = ReadReport()
    stream = iter_jsonl(path, report=report)
    assert next(stream) == Document("d0", "0") and report.documents == 1
    assert [d.id for d in stream] == ["d1", "d2"] and report.documents == 3


def test_missing_file_is_a_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="nope.jsonl: cannot read corpus file"):
        Corpus.from_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(CorpusError, match="nope.jsonl: no such corpus file"):
        Corpus.from_path(tmp_path / "nope.jsonl")


# -- Parquet, folders, text files, dispatch -------------------------------------------------------


def test_parquet_file_and_directory(tmp_path):
    pq.write_table(pa.table({"id": ["p1", "p2", "p3"], "text": ["one", "", "τρία"], "extra": [1, 2, 3]}), tmp_path / "a.parquet")
    (tmp_path / "more").mkdir()
    pq.write_table(pa.table({"id": ["q1"], "text": ["четыре"]}), tmp_path / "more" / "b.parquet")
    assert Corpus.from_parquet(tmp_path / "a.parquet").ids() == ["p1", "p2", "p3"]
    both = Corpus.from_parquet(tmp_path)
    assert [(d.id, d.text) for d in both] == [("p1", "one"), ("p2", ""), ("p3", "τρία"), ("q1", "четыре")]
    assert [len(b) for b in iter_parquet_batches(tmp_path / "a.parquet", batch_size=2)] == [2, 1]
    assert Corpus.from_path(tmp_path).ids() == both.ids()  # a directory of only .parquet files


def test_parquet_errors_name_file_and_row(tmp_path):
    pq.write_table(pa.table({"id": ["a", "b", "a"], "text": ["1", "2", "3"]}), tmp_path / "dup.parquet")
    with pytest.raises(CorpusError, match=r"duplicate id 'a' at dup.parquet row 2 \(first seen at dup.parquet row 0\)"):
        Corpus.from_parquet(tmp_path / "dup.parquet")
    pq.write_table(pa.table({"id": ["a", ""], "text": ["1", "2"]}), tmp_path / "empty.parquet")
    with pytest.raises(CorpusError, match=r'empty.parquet: row 1: empty "id"'):
        Corpus.from_parquet(tmp_path / "empty.parquet")
    pq.write_table(pa.table({"id": ["a"], "body": ["1"]}), tmp_path / "cols.parquet")
    with pytest.raises(CorpusError, match=r"cols.parquet: missing column 'text' \(found: id, body; expected id, text\)"):
        Corpus.from_parquet(tmp_path / "cols.parquet")
    pq.write_table(pa.table({"id": ["a", None], "text": ["1", "2"]}), tmp_path / "null.parquet")
    with pytest.raises(CorpusError, match=r"null.parquet: row 1: null id"):
        Corpus.from_parquet(tmp_path / "null.parquet")


def test_folder_reads_regular_non_hidden_files_sorted(tmp_path):
    root = tmp_path / "docs"
    (root / "b" / "c").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "z.txt").write_text("zed")
    (root / "a.txt").write_text("ay")
    (root / "b" / "c" / "deep.md").write_text("глубоко")
    (root / "b" / "empty").write_text("")
    (root / ".hidden").write_text("no")
    (root / ".git" / "config").write_text("no")
    corpus = Corpus.from_folder(root)
    assert [(d.id, d.text) for d in corpus] == [
        ("a.txt", "ay"), ("b/c/deep.md", "глубоко"), ("b/empty", ""), ("z.txt", "zed")
    ]
    assert Corpus.from_path(root).ids() == corpus.ids()
    (root / "bad.bin").write_bytes("ok é".encode() + b"\xc3\x28")
    with pytest.raises(CorpusError, match=r"bad.bin: invalid UTF-8 at byte offset 5 \(byte 0xc3\)"):
        Corpus.from_folder(root)
    assert "bad.bin" not in Corpus.from_folder(root, on_invalid_utf8="skip").ids()


def test_read_text_file_and_unknown_suffix(tmp_path):
    (tmp_path / "play.txt").write_text("ROMEO:\nHi.\n", encoding="utf-8")
    assert read_text_file(tmp_path / "play.txt") == "ROMEO:\nHi.\n"
    with pytest.raises(CorpusError, match=r"play.txt: unknown corpus format '.txt'"):
        Corpus.from_path(tmp_path / "play.txt")


def test_corpus_constructor_rejects_duplicate_and_empty_ids():
    with pytest.raises(CorpusError, match="duplicate id 'x' at documents 0 and 2"):
        Corpus([Document("x", ""), Document("y", ""), Document("x", "")])
    with pytest.raises(CorpusError, match="corpus document 1: empty or non-string id ''"):
        Corpus([Document("x", ""), Document("", "")])


# -- split manifests -------------------------------------------------------------------------------

CORPUS = Corpus([Document(i, f"text of {i}") for i in ["a", "b", "c", "d", "e"]])


def test_manifest_partitions_in_corpus_order(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"train": ["c", "a", "e"], "validation": ["b"], "test": ["d"]}))
    parts = SplitManifest.from_json(path).partition(CORPUS)
    assert [d.id for d in parts.documents(Partition.TRAIN)] == ["a", "c", "e"]
    assert parts.ids("validation") == ["b"] and parts.ids("test") == ["d"]
    assert parts.counts() == {Partition.TRAIN: 3, Partition.VALIDATION: 1, Partition.TEST: 1}
    assert [(p, len(docs)) for p, docs in parts] == [(Partition.TRAIN, 3), (Partition.VALIDATION, 1), (Partition.TEST, 1)]


def test_manifest_missing_keys_are_empty_and_round_trip(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"train": ["a", "b", "c", "d", "e"]}')
    manifest = SplitManifest.from_json(path)
    assert manifest.counts() == {Partition.TRAIN: 5, Partition.VALIDATION: 0, Partition.TEST: 0}
    manifest.to_json(tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == {"train": list("abcde"), "validation": [], "test": []}
    assert SplitManifest.from_json(tmp_path / "again.json") == manifest


@pytest.mark.parametrize(
    "content, fragment",
    [
        ('{"train": ["a"], "dev": ["b"]}', "unknown key(s) 'dev' (expected train, validation, test)"),
        ('{"train": "a"}', '"train" must be a list of ids, got str'),
        ('{"train": ["a", 3]}', '"train"[1] must be a string id, got int 3'),
        ('{"train": ["a", ""]}', '"train"[1] is an empty id'),
        ('["a"]', "expected a JSON object"),
        ('{"train": ["a",\n', "splits.json:2: malformed JSON"),
    ],
)
def test_manifest_file_errors_name_the_file(tmp_path, content, fragment):
    path = tmp_path / "splits.json"
    path.write_text(content)
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path)
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_manifest_id_in_two_partitions_names_id_file_and_lines(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{\n  "train": ["a", "b"],\n  "validation": ["c"],\n  "test": ["d", "b"]\n}\n')
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path)
    assert str(err.value) == (
        f'{path}: id \'b\' is in both "train" and "test" (lines 2 and 4); every document belongs to exactly one partition'
    )


def test_manifest_id_repeated_inside_one_list(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"train": [\n"a",\n"b",\n"a"\n]}')
    with pytest.raises(CorpusError, match=r"id 'a' appears twice in \"train\" \(lines 2 and 4\); list each id once"):
        SplitManifest.from_json(path)
    with pytest.raises(CorpusError, match=r"^split manifest: id 'x' appears twice in \"test\"; list each id once$"):
        SplitManifest(test=["x", "x"])


def test_manifest_unknown_id_and_forgotten_documents(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"train": ["a", "b", "c"],\n "validation": ["zz"], "test": ["d", "e"]}')
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path).partition(CORPUS)
    assert str(err.value).startswith(f"{path}: id 'zz' in \"validation\" (line 2) is not in the corpus")

    big = Corpus([Document(f"doc{i}", "") for i in range(9)])
    with pytest.raises(CorpusError) as err:
        SplitManifest(train=["doc0", "doc4"]).partition(big)
    assert str(err.value) == (
        "split manifest: 7 corpus document(s) in no partition: 'doc1', 'doc2', 'doc3', 'doc5', 'doc6', ...; "
        "the manifest must name every document"
    )


# -- hash split ---------------------------------------------------------------------------------


def reference_hash_partition(doc_id: str, train: float, validation: float) -> str:
    u = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") / 2**64
    return "train" if u < train else "validation" if u < train + validation else "test"


def test_hash_split_follows_the_documented_rule():
    ratios = {"train": 0.8, "validation": 0.1, "test": 0.1}
    ids = [f"doc-{i}" for i in range(2000)] + ["ελληνικά", "русский", "a/b.py"]
    manifest = SplitManifest.by_hash(ratios)
    for doc_id in ids:
        assert manifest.partition_of(doc_id).value == reference_hash_partition(doc_id, 0.8, 0.1)
        assert hash_partition(doc_id, ratios) is manifest.partition_of(doc_id)
    counts = manifest.assign(ids).counts()
    assert sum(counts.values()) == len(ids) and 1500 < counts[Partition.TRAIN] < 1700
    # Golden values fixed forever by the rule: u("doc-3") = 0.9407, u("doc-9") = 0.8042, u("doc-24") = 0.9016.
    golden = {"doc-0": "train", "doc-3": "test", "doc-9": "validation", "doc-15": "validation", "doc-24": "test"}
    assert {i: manifest.partition_of(i).value for i in golden} == golden


def test_hash_split_partitions_a_corpus_and_zero_ratios_stay_empty():
    parts = SplitManifest.by_hash({"train": 0.5, "test": 0.5}).partition(CORPUS)
    assert parts.counts()[Partition.VALIDATION] == 0
    assert sorted(parts.ids("train") + parts.ids("test")) == ["a", "b", "c", "d", "e"]
    only_train = SplitManifest.by_hash({"train": 1.0})
    assert {only_train.partition_of(f"x{i}") for i in range(500)} == {Partition.TRAIN}


@pytest.mark.parametrize(
    "ratios, fragment",
    [
        ({"train": 0.8, "validation": 0.1}, "split ratios sum to 0.9"),
        ({"train": 1.1, "test": -0.1}, "split ratio for 'test' is -0.1, expected a finite number >= 0"),
        ({"train": 0.9, "dev": 0.1}, "split ratio key 'dev' is not a partition"),
        ({"train": float("nan")}, "split ratio for 'train' is nan"),
    ],
)
def test_hash_split_ratio_errors(ratios, fragment):
    with pytest.raises(ConfigurationError) as err:
        SplitManifest.by_hash(ratios)
    assert fragment in str(err.value)


def test_hash_split_has_no_lists_until_assigned():
    with pytest.raises(ConfigurationError, match="a hash split lists no ids"):
        SplitManifest.by_hash({"train": 1}).to_json("never.json")


# -- partitions -------------------------------------------------------------------------------


def test_from_text_cuts_by_position():
    text = "abcdefghij" * 10 + "é"  # 101 characters
    parts = CorpusPartitions.from_text(text, 0.9, name="play")
    (train,) = parts.documents("train")
    (valid,) = parts.documents(Partition.VALIDATION)
    assert train == Document("play:train", text[:90]) and valid == Document("play:validation", text[90:])
    assert train.text + valid.text == text and parts.documents("test") == []
    default = CorpusPartitions.from_text("x" * 7)
    assert [d.id for _, docs in default for d in docs] == ["text:train", "text:validation"]
    assert default.documents("train")[0].text == "x" * 6  # int(7 * 0.9) = 6
    assert CorpusPartitions.from_text("abc", 1.0).documents("validation") == [Document("text:validation", "")]
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ConfigurationError, match=f"train_fraction is {bad}"):
            CorpusPartitions.from_text("abc", bad)


def test_from_text_on_shakespeare(shakespeare_text):
    parts = CorpusPartitions.from_text(shakespeare_text, 0.9, name="shakespeare")
    cut = int(len(shakespeare_text) * 0.9)
    assert len(parts.documents("train")[0].text) == cut == 1003854
    assert parts.documents("validation")[0].text[:10] == shakespeare_text[cut : cut + 10]


def test_from_mapping_checks_partitions_and_ids():
    parts = CorpusPartitions.from_mapping({"train": [Document("a", "")], Partition.TEST: [Document("b", "")]})
    assert parts.counts() == {Partition.TRAIN: 1, Partition.VALIDATION: 0, Partition.TEST: 1}
    assert parts.manifest() == SplitManifest(train=["a"], test=["b"])
    with pytest.raises(CorpusError, match=r"id 'a' appears twice \(in \"train\" and \"validation\"\)"):
        CorpusPartitions.from_mapping({"train": [Document("a", "")], "validation": [Document("a", "")]})
    with pytest.raises(CorpusError, match=r"id 'a' appears twice \(in \"train\" and \"train\"\)"):
        CorpusPartitions.from_mapping({"train": [Document("a", ""), Document("a", "x")]})
    with pytest.raises(CorpusError, match="unknown partition 'dev'"):
        CorpusPartitions.from_mapping({"dev": []})


# -- the bundled corpus -----------------------------------------------------------------------------


def test_bundled_corpus_and_splits():
    corpus = Corpus.from_jsonl(ROOT / "data" / "corpus.jsonl")
    parts = SplitManifest.from_json(ROOT / "data" / "splits.json").partition(corpus)
    assert len(corpus) >= 48
    texts = {d.id: d.text for d in corpus}
    assert "" in texts.values() and any(len(t) == 1 for t in texts.values())
    assert any(4000 <= len(t.encode("utf-8")) <= 6500 for t in texts.values())
    for part, docs in parts:
        assert {d.id.split("-")[0] for d in docs} == {"en", "el", "ru"}, part
    train_texts = [d.text for d in parts.documents("train")]
    assert "" in train_texts and any(len(t) == 1 for t in train_texts)
    counts = parts.counts()
    assert counts[Partition.TRAIN] / len(corpus) == pytest.approx(0.8, abs=0.05)


# -- property: JSONL round trip -----------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=40, deadline=None)
@given(docs=st.dictionaries(TEXT.filter(bool), TEXT, max_size=8), ascii_only=st.booleans())
def test_jsonl_round_trip_any_text(tmp_path_factory, docs, ascii_only):
    path = tmp_path_factory.mktemp("rt") / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=ascii_only) + "\n" for i, t in docs.items()),
                    encoding="utf-8")
    corpus = Corpus.from_jsonl(path)
    assert [(d.id, d.text) for d in corpus] == list(docs.items())
    manifest = SplitManifest.by_hash({"train": 0.5, "validation": 0.25, "test": 0.25}).assign(corpus.ids())
    manifest.to_json(path.with_name("s.json"))
    parts = SplitManifest.from_json(path.with_name("s.json")).partition(corpus)
    assert sorted(i for p in Partition for i in parts.ids(p)) == sorted(docs)
