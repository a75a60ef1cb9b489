"""engine.corpus.readers and engine.corpus.arrow: JSONL, Parquet, Arrow IPC, folders and text files;
bad lines, invalid UTF-8 and ids named with file and line (engine.corpus.readers)."""

import io
import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from engine.corpus import (
    Corpus,
    Document,
    Partition,
    ReadReport,
    SplitManifest,
    hash_unit,
    iter_folder,
    iter_jsonl,
    iter_parquet,
    iter_parquet_batches,
    open_corpus,
    read_text_file,
)
from engine.errors import ConfigurationError, CorpusError
from engine.pipeline import prepare
from engine.store import TokenStore
from tests.helpers import SETTINGS, run


def write_lines(path: Path, lines: list[bytes | str]) -> Path:
    path.write_bytes(b"".join((line.encode("utf-8") if isinstance(line, str) else line) + b"\n" for line in lines))
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


# Text as a corpus holds it: any code point except lone surrogates (NUL and controls included).
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


# -- corpus readers --------------------------------------------------------------------------------


def test_invalid_utf8_policy_in_every_reader(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "x\xffy"}\n')
    with pytest.raises(CorpusError) as err:
        list(iter_jsonl(jsonl))
    assert str(err.value) == (
        f"{jsonl}:2: invalid UTF-8 at byte offset 48 (byte 0xff); expected UTF-8 text "
        "(on_invalid_utf8='replace' or 'skip' accepts it)"
    )
    assert [d.text for d in iter_jsonl(jsonl, on_invalid_utf8="replace")] == ["ok", "x\ufffdy"]
    report = ReadReport()
    assert [d.id for d in iter_jsonl(jsonl, on_invalid_utf8="skip", report=report)] == ["a"]
    assert report.skipped_invalid_utf8 == 1

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.txt").write_text("fine")
    (folder / "sub" / "bad.txt").write_bytes(b"ab\xc3")
    with pytest.raises(CorpusError, match=r"docs/sub/bad.txt: invalid UTF-8 at byte offset 2 \(byte 0xc3\)"):
        list(iter_folder(folder))
    assert [d.text for d in iter_folder(folder, on_invalid_utf8="replace")] == ["fine", "ab\ufffd"]
    assert [d.id for d in iter_folder(folder, on_invalid_utf8="skip")] == ["good.txt"]

    text = tmp_path / "play.txt"
    text.write_bytes(b"to be\x80")
    with pytest.raises(CorpusError, match=r"play.txt: invalid UTF-8 at byte offset 5 \(byte 0x80\)"):
        read_text_file(text)
    assert read_text_file(text, on_invalid_utf8="replace") == "to be\ufffd"
    with pytest.raises(CorpusError, match="on_invalid_utf8='ignore' is not a policy"):
        list(iter_jsonl(jsonl, on_invalid_utf8="ignore"))


def test_parquet_strings_that_are_not_utf8_name_file_and_row(tmp_path):
    path = tmp_path / "c.parquet"
    raw = pa.array([b"fine", b"bad \xff here"], pa.binary())
    texts = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())  # no UTF-8 validation here
    pq.write_table(pa.table({"id": pa.array(["a", "b"]), "text": texts}), path)
    with pytest.raises(CorpusError) as err:
        list(iter_parquet(path))
    assert str(err.value) == (
        f"{path}: row 1: column 'text' holds invalid UTF-8 (byte offset 4 of the value); expected UTF-8 strings"
    )


@pytest.mark.parametrize(
    "line, fragment",
    [
        ('{"id": "b", "text": "x", "id": "c"}', ':2: key "id" appears twice in one object; expected each key once'),
        ("[" * 100_000 + "]" * 100_000, ":2: JSON nested too deeply; expected one flat object per line"),
        ('{"id": "b", "text": 1' + "0" * 5000 + "}", ":2: malformed JSON (Exceeds the limit"),
        ('{"id": "b", "text": "x"', ":2: malformed JSON (Expecting ',' delimiter at column 24); expected one object per line"),
        ('{"id": "", "text": "x"}', ':2: empty "id" (expected a non-empty string)'),
        ('{"id": "b"}', ':2: missing "text" (expected {"id": str, "text": str})'),
    ],
)
def test_malformed_jsonl_lines_name_the_line_or_are_skipped_and_counted(tmp_path, line, fragment):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "ok"}\n' + line + '\n{"id": "z", "text": "end"}\n')
    with pytest.raises(CorpusError) as err:
        Corpus.from_jsonl(path)
    assert str(err.value).startswith(f"{path}{fragment}")
    corpus = Corpus.from_jsonl(path, skip_bad_lines=True)
    assert corpus.ids() == ["a", "z"]
    assert corpus.report.skipped_bad_lines == 1 and corpus.report.first_problems[0].startswith(f"{path}:2:")


def test_nul_in_jsonl_raw_or_escaped_is_text(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "a", "text": "x\\u0000y"}\n{"id": "b", "text": "raw\x00nul"}\n')
    assert [d.text for d in iter_jsonl(path)] == ["x\x00y", "raw\x00nul"]


def test_folder_file_that_cannot_be_read_is_a_corpus_error(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("x")
    original = Path.read_bytes

    def failing(self):
        if self.name == "a.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", failing)
    with pytest.raises(CorpusError, match=r"a.txt: cannot read corpus file: Permission denied"):
        list(iter_folder(tmp_path))


# -- corrupt files -------------------------------------------------------------------------------


def test_truncated_parquet_corpus_is_a_corpus_error(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(100)], "text": ["x" * 50] * 100}), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])
    with pytest.raises(CorpusError, match="c.parquet: cannot read Parquet file: "):
        list(iter_parquet(path))


IDS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


LINE_BYTES = st.binary(max_size=60) | st.sampled_from(
    [b'{"id": "x", "text": "y"}', b'{"id": 1, "text": "y"}', b"[", b'{"id": "x"}', b'"\\ud800"', b"\xff\xfe", b"\x00"]
)


@SETTINGS
@given(lines=st.lists(LINE_BYTES, max_size=6), policy=st.sampled_from(["error", "replace", "skip"]), skip=st.booleans())
def test_jsonl_random_lines_raise_only_corpus_errors(tmp_path, lines, policy, skip):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\n".join(lines))
    try:
        docs = list(iter_jsonl(path, on_invalid_utf8=policy, skip_bad_lines=skip))
    except CorpusError:
        return
    for doc in docs:
        assert isinstance(doc.text, str) and doc.id
        doc.text.encode("utf-8")


@SETTINGS
@given(docs=st.dictionaries(IDS, TEXT, max_size=6), ascii_only=st.booleans())
def test_jsonl_valid_documents_round_trip(tmp_path, docs, ascii_only):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=ascii_only) + "\n" for i, t in docs.items()),
                    encoding="utf-8")
    assert [(d.id, d.text) for d in iter_jsonl(path)] == list(docs.items())


def parquet_bytes(ids, texts) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())}), sink)
    return sink.getvalue()


VALID_PARQUET = parquet_bytes(["a", "b", "c"], ["one", "two\x00", "three ✓"])


@SETTINGS
@given(edits=st.lists(st.tuples(st.integers(0, len(VALID_PARQUET) - 1), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.integers(0, len(VALID_PARQUET)))
def test_parquet_random_corruption_raises_only_corpus_errors(tmp_path, edits, cut):
    data = bytearray(VALID_PARQUET)
    for at, value in edits:
        data[at] = value
    path = tmp_path / "c.parquet"
    path.write_bytes(bytes(data[: max(cut, len(data) - 64)]) if cut % 2 else bytes(data))
    try:
        docs = list(iter_parquet(path, batch_size=2))
    except CorpusError:
        return
    assert all(isinstance(d.text, str) and d.id for d in docs)


@SETTINGS
@given(raw=st.binary(max_size=200))
def test_parquet_random_bytes_raise_only_corpus_errors(tmp_path, raw):
    path = tmp_path / "c.parquet"
    path.write_bytes(raw)
    with pytest.raises(CorpusError):
        list(iter_parquet(path))


@SETTINGS
@given(docs=st.dictionaries(IDS, TEXT, max_size=6))
def test_parquet_valid_documents_round_trip(tmp_path, docs):
    path = tmp_path / "c.parquet"
    path.write_bytes(parquet_bytes(list(docs), list(docs.values())))
    assert [(d.id, d.text) for d in iter_parquet(path, batch_size=2)] == list(docs.items())


@SETTINGS
@given(files=st.lists(st.binary(max_size=30), min_size=1, max_size=4), policy=st.sampled_from(["error", "replace", "skip"]))
def test_folder_random_bytes_raise_only_corpus_errors_and_valid_utf8_round_trips(tmp_path_factory, files, policy):
    root = tmp_path_factory.mktemp("folder")
    for i, raw in enumerate(files):
        (root / f"f{i}.txt").write_bytes(raw)
    report = ReadReport()
    try:
        docs = list(iter_folder(root, on_invalid_utf8=policy, report=report))
    except CorpusError as exc:
        assert policy == "error" and "invalid UTF-8 at byte offset" in str(exc)
        return
    valid = {f"f{i}.txt": raw.decode("utf-8") for i, raw in enumerate(files) if _utf8(raw)}
    for doc in docs:
        if doc.id in valid:
            assert doc.text == valid[doc.id]
    if policy == "skip":
        assert [d.id for d in docs] == sorted(valid)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


# -- columns and made ids: JSONL ------------------------------------------------------------------


def test_jsonl_without_id_makes_ids_from_file_and_line(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"text": "one"}', "", '{"text": "two", "n": 1}', '{"text": "three"}'])
    corpus = Corpus.from_path(path)
    # Lines are counted from 1, blank lines included: the id names the line an editor shows.
    assert [(d.id, d.text) for d in corpus] == [("c.jsonl:000001", "one"), ("c.jsonl:000003", "two"),
                                                ("c.jsonl:000004", "three")]
    assert corpus.report.made_ids is True
    assert corpus.report.notes() == ['ids: made from file and row (no "id" column)']
    assert corpus.report.to_dict()["ids_made_from_file_and_row"] is True


def test_jsonl_columns_by_name(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"url": "u1", "body": "hello", "text": "no"}', '{"url": "u2", "body": "x"}'])
    corpus = Corpus.from_path(path, text_column="body", id_column="url")
    assert [(d.id, d.text) for d in corpus] == [("u1", "hello"), ("u2", "x")]
    assert corpus.report.made_ids is False and corpus.report.notes() == []
    made = Corpus.from_path(path, text_column="body")
    assert made.ids() == ["c.jsonl:000001", "c.jsonl:000002"]
    assert made.report.notes() == ['ids: made from file and row (no "id" column)']


def test_jsonl_named_id_column_must_exist_and_lines_agree(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"id": "a", "text": "x"}'])
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(path, id_column="url")
    assert str(err.value) == (f'{path}:1: missing "url" (expected {{"url": str, "text": str}}); the line has '
                              '"id", "text": name the id field with --id-column NAME (id_column= in Python)')
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(path, text_column="body")
    assert str(err.value) == (f'{path}:1: missing "body" (expected {{"id": str, "body": str}}); the line has '
                              '"id", "text": name the text field with --text-column NAME (text_column= in Python)')

    mixed = write_lines(tmp_path / "m.jsonl", ['{"text": "x"}', '{"id": "b", "text": "y"}', '{"text": "z"}'])
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(mixed)
    assert str(err.value) == (
        f'{mixed}:2: has "id" but line 1 has none, so ids are made from file and line; '
        'expected every line with an "id" or none'
    )
    skipped = Corpus.from_path(mixed, skip_bad_lines=True)
    assert skipped.ids() == ["m.jsonl:000001", "m.jsonl:000003"] and skipped.report.skipped_bad_lines == 1


def test_bad_column_options(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"id": "a", "text": "x"}'])
    with pytest.raises(ConfigurationError, match="text_column and id_column are both 'a'"):
        Corpus.from_path(path, text_column="a", id_column="a")
    with pytest.raises(ConfigurationError, match="text_column='': expected a non-empty column name"):
        Corpus.from_path(path, text_column="")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("x")
    with pytest.raises(ConfigurationError, match="apply to JSONL, Parquet and Arrow corpora, not a folder of text files"):
        open_corpus(folder, id_column="name")
    # The defaults, spelled out, are no column mapping: a folder accepts them.
    assert [d.id for batch in open_corpus(folder, text_column="text") for d in batch] == ["a.txt"]


# -- columns and made ids: Parquet and Arrow ------------------------------------------------------


def test_parquet_without_id_makes_ids_from_file_and_row(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": ["x", "y", "z"]}), path)
    corpus = Corpus.from_path(path, batch_size=2)
    # Rows are counted from 0 inside each file, as Parquet error messages count them.
    assert [(d.id, d.text) for d in corpus] == [("a.parquet:000000", "x"), ("a.parquet:000001", "y"),
                                                ("a.parquet:000002", "z")]
    assert corpus.report.notes() == ['ids: made from file and row (no "id" column)']

    arrow = tmp_path / "b.arrow"
    feather.write_feather(pa.table({"body": ["p", "q"], "key": ["k1", "k2"]}), arrow)
    assert [(d.id, d.text) for d in Corpus.from_path(arrow, text_column="body", id_column="key")] == [("k1", "p"), ("k2", "q")]
    assert Corpus.from_path(arrow, text_column="body").ids() == ["b.arrow:000000", "b.arrow:000001"]
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(arrow, text_column="body", id_column="url")
    assert str(err.value) == f"{arrow}: missing column 'url' (found: body, key; expected url, body)"


def test_parquet_folder_made_ids_use_the_relative_file_name(tmp_path):
    root = tmp_path / "ds"
    (root / "part").mkdir(parents=True)
    pq.write_table(pa.table({"text": ["a0", "a1"]}), root / "a.parquet")
    pq.write_table(pa.table({"text": ["b0"]}), root / "part" / "b.parquet")
    corpus = Corpus.from_path(root)
    assert [(d.id, d.text) for d in corpus] == [("a.parquet:000000", "a0"), ("a.parquet:000001", "a1"),
                                                ("part/b.parquet:000000", "b0")]
    pq.write_table(pa.table({"id": ["x"], "text": ["c0"]}), root / "part" / "c.parquet")
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(root)
    assert str(err.value) == (
        f"{root / 'part' / 'c.parquet'}: has an 'id' column but {root / 'a.parquet'} has none, so ids are made "
        "from file and row; expected every file with an 'id' column or none"
    )


# -- honest counts ----------------------------------------------------------------------------------


def test_continuous_text_skip_drops_only_the_invalid_sequences(tmp_path):
    path = tmp_path / "play.txt"
    path.write_bytes(b"ab\xffcd\xc3(e\xe2\x82")  # three invalid sequences: ff, c3 (then '('), e2 82 (truncated)
    report = ReadReport()
    assert read_text_file(path, on_invalid_utf8="skip", report=report) == "abcd(e"
    assert (report.dropped_sequences, report.replaced_sequences, report.skipped_invalid_utf8) == (3, 0, 0)
    assert report.summary() == "read: 1 document; dropped 3 invalid UTF-8 sequences"
    report = ReadReport()
    assert read_text_file(path, on_invalid_utf8="replace", report=report) == "ab\ufffdcd\ufffd(e\ufffd"
    assert (report.dropped_sequences, report.replaced_sequences, report.replaced_invalid_utf8) == (0, 3, 1)
    assert report.summary() == "read: 1 document; replaced 3 invalid UTF-8 sequences by U+FFFD in 1 document"


def test_jsonl_counts_for_each_policy(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [
        '{"id": "a", "text": "ok"}',
        b'{"id": "b", "text": "x\xffy\xfe"}',   # two invalid bytes
        '{"id": "c", "text": "s\\ud800t"}',       # one lone surrogate
        "",
        b'{"id": "d", "text": "z\xff"',           # malformed JSON, and an invalid byte
        '{"id": "e", "text": "end"}',
    ])
    replaced = ReadReport()
    docs = list(iter_jsonl(path, on_invalid_utf8="replace", skip_bad_lines=True, report=replaced))
    assert [(d.id, d.text) for d in docs] == [("a", "ok"), ("b", "x\ufffdy\ufffd"), ("c", "s\ufffdt"), ("e", "end")]
    # The skipped line's replacement is not counted: only kept documents are.
    assert (replaced.documents, replaced.blank_lines, replaced.skipped_bad_lines, replaced.skipped_invalid_utf8,
            replaced.replaced_invalid_utf8, replaced.replaced_sequences) == (4, 1, 1, 0, 2, 3)
    assert replaced.summary() == (
        "read: 4 documents; skipped 1 bad line (--skip-bad-lines); "
        "replaced 3 invalid UTF-8 sequences by U+FFFD in 2 documents; 1 blank line passed over"
    )
    skipped = ReadReport()
    docs = list(iter_jsonl(path, on_invalid_utf8="skip", skip_bad_lines=True, report=skipped))
    assert [d.id for d in docs] == ["a", "e"]
    # Lines 2, 3 and 5 are dropped for invalid UTF-8 (line 5 before its JSON is parsed).
    counts = (skipped.documents, skipped.skipped_bad_lines, skipped.skipped_invalid_utf8, skipped.replaced_sequences)
    assert counts == (2, 0, 3, 0)
    assert skipped.summary() == (
        "read: 2 documents; skipped 3 documents with invalid UTF-8; 1 blank line passed over"
    )


def test_folder_counts_for_each_policy(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("fine")
    (folder / "b.txt").write_bytes(b"x\xff\xffy")
    report = ReadReport()
    assert [d.text for d in iter_folder(folder, on_invalid_utf8="replace", report=report)] == ["fine", "x\ufffd\ufffdy"]
    assert (report.documents, report.replaced_invalid_utf8, report.replaced_sequences) == (2, 1, 2)
    report = ReadReport()
    assert [d.id for d in iter_folder(folder, on_invalid_utf8="skip", report=report)] == ["a.txt"]
    assert (report.documents, report.skipped_invalid_utf8) == (1, 1)


def _prepare(tmp_path, corpus, *args):
    out = tmp_path / "out"
    result = run("prepare", corpus, "--out", out, "--tokenizer", "char", "--quiet", *args)
    return out, result


def test_prepare_txt_skip_keeps_the_valid_text_and_counts_the_drops(tmp_path):
    path = tmp_path / "play.txt"
    path.write_bytes(b"abababab\xffab")  # 10 valid characters, one invalid byte
    out, result = _prepare(tmp_path, path, "--on-invalid-utf8", "skip", "--context", "2", "--train-fraction", "0.8")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert [report["partitions"][p]["characters"] for p in ("train", "validation")] == [8, 2]
    assert report["read"]["dropped_invalid_utf8_sequences"] == 1
    assert "read: 1 document; dropped 1 invalid UTF-8 sequence\n" in result.stdout
    assert f"  {path}: invalid UTF-8 at byte offset 8 (byte 0xff); expected UTF-8 text " \
           "(--on-invalid-utf8 replace or skip accepts it)\n" in result.stdout
    store = TokenStore.open(out / "store")
    assert store.num_tokens("train") == 8 + 2 and store.num_tokens("validation") == 2 + 2


def test_prepare_jsonl_counts_reach_summary_and_report(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [
        '{"id": "a", "text": "hello"}', b'{"id": "b", "text": "w\xffrld"}', "not json", '{"id": "c", "text": "end"}',
    ])
    out, result = _prepare(tmp_path, path, "--hash-split", "1,0,0", "--on-invalid-utf8", "replace",
                           "--skip-bad-lines", "--context", "2")
    assert result.exit_code == 0, result.output
    read = json.loads((out / "report.json").read_text())["read"]
    assert {k: read[k] for k in ("documents", "blank_lines", "skipped_bad_lines", "skipped_invalid_utf8_documents",
                                 "replaced_invalid_utf8_documents", "replaced_invalid_utf8_sequences",
                                 "dropped_invalid_utf8_sequences", "ids_made_from_file_and_row")} == {
        "documents": 3, "blank_lines": 0, "skipped_bad_lines": 1, "skipped_invalid_utf8_documents": 0,
        "replaced_invalid_utf8_documents": 1, "replaced_invalid_utf8_sequences": 1,
        "dropped_invalid_utf8_sequences": 0, "ids_made_from_file_and_row": False}
    assert ("read: 3 documents; skipped 1 bad line (--skip-bad-lines); "
            "replaced 1 invalid UTF-8 sequence by U+FFFD in 1 document\n") in result.stdout


def test_prepare_made_ids_are_noted_and_stored(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"body": "hello"}', '{"body": "world!"}'])
    out, result = _prepare(tmp_path, path, "--hash-split", "1,0,0", "--text-column", "body", "--context", "2")
    assert result.exit_code == 0, result.output
    assert 'note: ids: made from file and row (no "id" column)\n' in result.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["read"]["notes"] == ['ids: made from file and row (no "id" column)']
    assert report["read"]["text_column"] == "body" and report["read"]["id_column"] is None
    assert TokenStore.open(out / "store").ids("train") == ["c.jsonl:000001", "c.jsonl:000002"]


def test_short_documents_are_counted_and_windowless_partitions_warned(tmp_path):
    # char tokens = characters + BOS + EOS; T = 4 needs 5 tokens: "abc" (5) gives a window, "a" (3) none.
    path = write_lines(tmp_path / "c.jsonl", ['{"id": "long", "text": "abc"}', '{"id": "short", "text": "a"}',
                                              '{"id": "v", "text": "ab"}'])
    splits = tmp_path / "s.json"
    splits.write_text(json.dumps({"train": ["long", "short"], "validation": ["v"]}))
    out, result = _prepare(tmp_path, path, "--splits", splits, "--context", "4")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    parts = report["partitions"]
    assert (parts["train"]["windows"], parts["train"]["short_documents"]) == (1, 1)
    assert (parts["validation"]["windows"], parts["validation"]["short_documents"]) == (0, 1)
    assert (parts["test"]["documents"], parts["test"]["short_documents"]) == (0, 0)
    # A short document is counted (the table's "short" column); only a partition without any window is warned about.
    assert report["warnings"] == [
        "validation: no complete window: all 1 document(s) are shorter than T + 1 = 5 tokens (use a smaller --context)",
    ]
    assert result.stderr == "".join(f"warning: {w}\n" for w in report["warnings"])
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines() if line.split()}
    assert rows["partition"] == ["documents", "characters", "tokens", "windows", "short", "tails"]
    assert rows["train"] == ["2", "4", "8", "1", "1", "2"] and rows["validation"] == ["1", "2", "4", "0", "1", "1"]
    # With --json the warnings are in the JSON, and stdout stays one JSON document.
    _, as_json = _prepare(tmp_path, path, "--splits", splits, "--context", "4", "--json")
    assert as_json.exit_code == 0 and as_json.stderr == ""
    assert json.loads(as_json.stdout)["warnings"] == report["warnings"]


# -- exit 2 for ids that are not UTF-8 -------------------------------------------------------------


def test_jsonl_id_with_a_lone_surrogate_exits_2(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"id": "a", "text": "x"}', '{"id": "b\\ud800", "text": "y"}'])
    _, result = _prepare(tmp_path, path, "--hash-split", "0.5,0.5,0")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {path}:2: the id 'b\\ud800' holds a lone surrogate U+D800 at character offset 1; expected an id "
        "that is valid UTF-8 (--on-invalid-utf8 replace or skip accepts it)\n"
    )
    result = run("splits", path, "--hash-split", "0.5,0.5,0", "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and f"{path}:2: the id 'b\\ud800' holds a lone surrogate" in result.stderr
    # The policy applies to ids as it does to text: replaced (counted), or the document skipped.
    replaced = Corpus.from_path(path, on_invalid_utf8="replace")
    assert replaced.ids() == ["a", "b\ufffd"] and replaced.report.replaced_sequences == 1
    assert Corpus.from_path(path, on_invalid_utf8="skip").ids() == ["a"]


def test_lone_surrogate_ids_given_directly_are_corpus_errors():
    with pytest.raises(CorpusError, match=r"id 'x\\udc00' holds a lone surrogate at character offset 1"):
        hash_unit("x\udc00")
    with pytest.raises(CorpusError, match=r"corpus document 0: id '\\ud800' holds a lone surrogate"):
        SplitManifest.by_hash({"train": 1.0}).partition([Document("\ud800", "t")])


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse names that are not UTF-8")
def test_folder_file_name_that_is_not_utf8_exits_2(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("fine")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as fh:
        fh.write(b"text")
    _, result = _prepare(tmp_path, folder, "--hash-split", "0.5,0.5,0")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {folder}: the file name b'caf\\xe9.txt' is not UTF-8, and a file's id is its relative path; "
        "expected UTF-8 file names (--on-invalid-utf8 replace or skip accepts it)\n"
    )
    result = run("splits", folder, "--hash-split", "0.5,0.5,0", "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and "the file name b'caf\\xe9.txt' is not UTF-8" in result.stderr
    replaced = Corpus.from_path(folder, on_invalid_utf8="replace")
    assert replaced.ids() == ["a.txt", "caf\ufffd.txt"] and replaced.report.replaced_sequences == 1
    skipped = Corpus.from_path(folder, on_invalid_utf8="skip")
    assert skipped.ids() == ["a.txt"] and skipped.report.skipped_invalid_utf8 == 1


def test_parquet_file_name_that_is_not_utf8_is_a_corpus_error(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    pq.write_table(pa.table({"text": ["x"]}), root / "p.parquet")
    os.rename(os.fsencode(root / "p.parquet"), os.path.join(os.fsencode(root), b"p\xff.parquet"))
    result = run("splits", root, "--hash-split", "1,0,0", "--out", tmp_path / "s.json")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {root}: the file name b'p\\xff.parquet' is not UTF-8 (Parquet and Arrow files are opened, and ids "
        "made, by name); expected UTF-8 file names: rename the file\n"
    )


# -- the options on every command that reads a corpus -----------------------------------------------


def test_column_options_on_splits_and_tokenizers_train(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"key": "k1", "body": "abc"}', '{"key": "k2", "body": "de"}'])
    result = run("splits", path, "--hash-split", "1,0,0", "--out", tmp_path / "s.json", "--text-column", "body",
                 "--id-column", "key")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "s.json").read_text()) == {"train": ["k1", "k2"], "validation": [], "test": []}
    result = run("splits", path, "--hash-split", "1,0,0", "--out", tmp_path / "m.json", "--text-column", "body")
    assert result.exit_code == 0, result.output
    assert result.stdout == ('note: ids: made from file and row (no "id" column)\n'
                             f'train 2, validation 0, test 0 documents; wrote {tmp_path / "m.json"}\n')
    assert json.loads((tmp_path / "m.json").read_text())["train"] == ["c.jsonl:000001", "c.jsonl:000002"]

    result = run("tokenizers", "train", path, "--kind", "char", "--hash-split", "1,0,0", "--text-column", "body",
                 "--out", tmp_path / "t.json")
    assert result.exit_code == 0, result.output
    from engine.tokenizers.loading import load_tokenizer
    assert load_tokenizer(tmp_path / "t.json").vocab_size == 2 + 5  # a..e, fitted on the "body" texts

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("x")
    result = run("tokenizers", "train", folder, "--kind", "char", "--hash-split", "1,0,0", "--id-column", "n",
                 "--out", tmp_path / "u.json")
    assert result.exit_code == 2
    assert "apply to JSONL, Parquet and Arrow corpora, not a folder of text files" in result.stderr


def _table():
    return pa.table({"id": ["a", "b", "c"], "text": ["x", "", "αβ"], "extra": [1, 2, 3]})


@pytest.mark.parametrize("suffix, write", [
    (".arrow", lambda t, p: feather.write_feather(t, p)),
    (".feather", lambda t, p: feather.write_feather(t, p, compression="uncompressed")),
    (".ipc", lambda t, p: _write_stream(t, p)),
])
def test_arrow_ipc_corpus_reads_like_parquet(tmp_path, suffix, write):
    path = tmp_path / f"corpus{suffix}"
    write(_table(), path)
    corpus = Corpus.from_path(path)
    assert [(d.id, d.text) for d in corpus] == [("a", "x"), ("b", ""), ("c", "αβ")]
    splits = tmp_path / "s.json"
    splits.write_text(json.dumps({"train": ["a", "c"], "validation": ["b"]}))
    report = prepare(path, splits, tmp_path / "out", tokenizer="char", context_length=1, quiet=True).report
    assert report["partitions"]["train"]["tokens"] == 3 + 4 and report["partitions"]["validation"]["tokens"] == 2


def _write_stream(table, path):
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def test_arrow_corpus_missing_column(tmp_path):
    path = tmp_path / "c.arrow"
    feather.write_feather(pa.table({"id": ["a"]}), path)
    with pytest.raises(CorpusError, match=r"c\.arrow: missing column 'text'"):
        Corpus.from_path(path)


def test_skip_bad_lines_leaves_out_parquet_rows_with_nulls_and_counts_them(tmp_path):
    from click.testing import CliRunner

    from engine.cli import main
    from engine.corpus import ReadReport
    from engine.corpus.readers import open_corpus

    table = pa.table({"url": ["u0", None, "u2", "", "u4"], "body": ["zero", "one", None, "three", "four"]})
    pq.write_table(table, tmp_path / "nulls.parquet")
    with pytest.raises(CorpusError) as info:
        list(open_corpus(tmp_path / "nulls.parquet", text_column="body", id_column="url"))
    assert str(info.value) == (f"{tmp_path / 'nulls.parquet'}: row 1: null id (expected a string); --skip-bad-lines "
                               "(skip_bad_lines=True) leaves such rows out")
    report = ReadReport()
    docs = [d for batch in open_corpus(tmp_path / "nulls.parquet", text_column="body", id_column="url",
                                       skip_bad_lines=True, report=report) for d in batch]
    assert [(d.id, d.text) for d in docs] == [("u0", "zero"), ("u4", "four")]
    assert report.skipped_bad_lines == 3 and report.documents == 2
    assert report.first_problems == [f"{tmp_path / 'nulls.parquet'}: row 1: null id (expected a string)",
                                     f"{tmp_path / 'nulls.parquet'}: row 2: null text (expected a string)",
                                     f"{tmp_path / 'nulls.parquet'}: row 3: empty \"id\" (expected a non-empty string)"]
    # made ids keep the rows' numbers
    pq.write_table(pa.table({"text": ["a", None, "c"]}), tmp_path / "made.parquet")
    made = [d.id for batch in open_corpus(tmp_path / "made.parquet", skip_bad_lines=True) for d in batch]
    assert made == ["made.parquet:000000", "made.parquet:000002"]
    result = CliRunner().invoke(main, ["prepare", str(tmp_path / "nulls.parquet"), "--text-column", "body",
                                       "--id-column", "url", "--hash-split", "1,0,0", "--tokenizer", "char",
                                       "--context", "2", "--skip-bad-lines", "--out", str(tmp_path / "out"),
                                       "--quiet"])
    assert result.exit_code == 0, result.output
