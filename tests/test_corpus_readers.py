"""engine.corpus.readers and engine.corpus.arrow: JSONL, Parquet, Arrow IPC, folders and text files;
bad lines, invalid UTF-8 and ids named with file and line (SPEC §2)."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from engine.corpus import (
    Corpus,
    Document,
    Partition,
    ReadReport,
    SplitManifest,
    iter_jsonl,
    iter_parquet_batches,
    read_text_file,
)
from engine.errors import CorpusError


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


# -- property: JSONL round trip -----------------------------------------------------------------


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
