"""Column mapping (--text-column, --id-column), ids made from file and row, honest counts of what a
reader skips, replaces or drops, warnings about short documents, and exit 2 for ids that are not UTF-8."""

import json
import os
import sys

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import (
    Corpus, Document, ReadReport, SplitManifest, hash_unit, iter_folder, iter_jsonl, open_corpus, read_text_file,
)
from engine.errors import ConfigurationError, CorpusError
from engine.store import TokenStore


def write_lines(path, lines):
    path.write_bytes(b"".join((line.encode("utf-8") if isinstance(line, str) else line) + b"\n" for line in lines))
    return path


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


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
    assert str(err.value) == f'{path}:1: missing "url" (expected {{"url": str, "text": str}})'
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(path, text_column="body")
    assert str(err.value) == f'{path}:1: missing "body" (expected {{"id": str, "body": str}})'

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
    assert (skipped.documents, skipped.skipped_bad_lines, skipped.skipped_invalid_utf8, skipped.replaced_sequences) == (2, 0, 3, 0)
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


def test_short_documents_and_windowless_partitions_are_counted_and_warned(tmp_path):
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
    assert report["warnings"] == [
        "train: 1 of 2 document(s) are shorter than T + 1 = 5 tokens and give no complete window",
        "validation: no complete window: all 1 document(s) are shorter than T + 1 = 5 tokens (use a smaller --context)",
    ]
    assert result.stderr == "".join(f"warning: {w}\n" for w in report["warnings"])
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
    assert result.stdout == f'note: ids: made from file and row (no "id" column)\ntrain 2, validation 0, test 0 documents; wrote {tmp_path / "m.json"}\n'
    assert json.loads((tmp_path / "m.json").read_text())["train"] == ["c.jsonl:000001", "c.jsonl:000002"]

    result = run("tokenizers", "train", path, "--kind", "char", "--hash-split", "1,0,0", "--text-column", "body",
                 "--out", tmp_path / "t.json")
    assert result.exit_code == 0, result.output
    from engine.tokenizers.base import load_tokenizer
    assert load_tokenizer(tmp_path / "t.json").vocab_size == 2 + 5  # a..e, fitted on the "body" texts

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("x")
    result = run("tokenizers", "train", folder, "--kind", "char", "--hash-split", "1,0,0", "--id-column", "n",
                 "--out", tmp_path / "u.json")
    assert result.exit_code == 2
    assert "apply to JSONL, Parquet and Arrow corpora, not a folder of text files" in result.stderr
