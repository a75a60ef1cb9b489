"""The exact words of CLI messages a user meets first: malformed JSON, missing fields, corpus forms,
a missing store, ``engine batches`` usage lines, epochs without windows and ``inspect --verify``."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Corpus, SplitManifest
from engine.corpus.readers import CORPUS_FORMS
from engine.errors import ConfigurationError, CorpusError
from tests.conftest import ROOT
from tests.helpers import run, small_store

FORMS = ("a .jsonl/.json file (plain or .gz/.zst/.bz2/.xz), a .parquet or .arrow/.feather/.ipc file, a folder or "
         "quoted glob of such shards, a datasets save_to_disk folder, a folder of text files, or a .txt file holding one "
         "continuous text")


@pytest.fixture
def store(tmp_path):
    small_store(tmp_path / "store")  # train: 20 documents of 11, 20, 29, ... tokens; validation: 1 of 5
    return tmp_path / "store"


def run_as_typed(*args):
    """``run``, with the program named ``engine`` as in a shell (usage lines name it)."""
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="engine")


def prepare(corpus, tmp_path):
    return run("prepare", corpus, "--hash-split", "0.8,0.1,0.1", "--out", tmp_path / "out", "--quiet")


# -- corpus lines -------------------------------------------------------------------------------


def test_truncated_jsonl_line_says_at_column_once(tmp_path):
    corpus = tmp_path / "badjson.jsonl"
    corpus.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": "abc\n', encoding="utf-8")
    result = prepare(corpus, tmp_path)
    assert result.exit_code == 2
    assert result.output == (f"error: {corpus}:2: malformed JSON (Unterminated string starting at column 21); "
                             "expected one object per line\n")


def test_truncated_split_manifest_says_at_column_once(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"train": ["a\n', encoding="utf-8")
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path)
    assert str(err.value) == f"{path}:1: malformed JSON (Invalid control character at column 14)"


@pytest.mark.parametrize("lines, message", [
    ('{"id": "a", "body": "x"}\n',
     '1: missing "text" (expected {"id": str, "text": str}); the line has "id", "body": name the text field with '
     "--text-column NAME (text_column= in Python)"),
    ('{"id": "a", "text": "x"}\n{"text": "y"}\n',
     '2: missing "id" (expected {"id": str, "text": str}); the line has "text"; line 1 has an "id", so every line '
     'needs one (ids are made from file and line only when no line has an "id")'),
], ids=["text", "id-after-ids"])
def test_a_missing_field_names_the_line_s_fields_and_the_way_out(tmp_path, lines, message):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(lines, encoding="utf-8")
    result = prepare(corpus, tmp_path)
    assert result.exit_code == 2
    assert result.output == f"error: {corpus}:{message}\n"


def test_a_named_id_column_that_is_missing_points_at_id_column(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    result = run("splits", corpus, "--hash-split", "0.8,0.1,0.1", "--id-column", "url", "--out", tmp_path / "s.json")
    assert result.exit_code == 2
    assert result.output == (f'error: {corpus}:1: missing "url" (expected {{"url": str, "text": str}}); '
                             'the line has "id", "text": name the id field with --id-column NAME '
                             "(id_column= in Python)\n")


# -- accepted corpus forms ----------------------------------------------------------------------


def test_one_phrase_lists_every_corpus_form(tmp_path):
    assert CORPUS_FORMS == FORMS
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,text\n", encoding="utf-8")
    result = prepare(corpus, tmp_path)
    assert result.exit_code == 2
    assert result.output == f"error: {corpus}: unknown corpus format '.csv' (expected {FORMS}; --corpus-format FORMAT names it)\n"
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(tmp_path / "nope.jsonl")
    assert str(err.value) == f"{tmp_path / 'nope.jsonl'}: no such corpus file or directory (expected {FORMS})"


def test_missing_corpus_lists_every_corpus_form(tmp_path):
    result = prepare(tmp_path / "nope.jsonl", tmp_path)
    assert result.exit_code == 2
    assert result.output == f"error: {tmp_path / 'nope.jsonl'}: corpus not found (expected {FORMS})\n"


# -- stores -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["inspect"],
    ["pack", "--split", "train", "--row-length", "8"],
    ["batches", "--context", "4", "--batch-size", "2"],
])
def test_a_missing_store_is_one_line_in_every_command(tmp_path, command):
    missing = tmp_path / "nope"
    result = run(command[0], missing, *command[1:])
    assert result.exit_code == 2
    assert result.output == f"error: {missing}: no token store here (directory not found)\n"


def test_batches_usage_names_the_command_as_typed(store):
    result = run_as_typed("batches", store, "--split", "valid", "--context", 4, "--batch-size", 2)
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[:2] == ["Usage: engine batches [OPTIONS] STORE", "Try 'engine batches --help' for help."]
    assert lines[-1] == "Error: Invalid value for '--split': 'valid' is not one of 'train', 'validation', 'test'."
    helped = run_as_typed("batches", store, "--help")
    assert helped.exit_code == 0 and helped.output.splitlines()[0] == "Usage: engine batches [OPTIONS] STORE"
    explicit = run_as_typed("batches", "build", store, "--split", "valid", "--context", 4, "--batch-size", 2)
    assert explicit.output.splitlines()[:2] == ["Usage: engine batches build [OPTIONS] STORE",
                                                "Try 'engine batches build --help' for help."]


def test_batches_show_still_works(store, tmp_path):
    out = tmp_path / "epoch"
    assert run("batches", store, "--context", 4, "--batch-size", 2, "--out", out).exit_code == 0
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("batch 0 of ")
    missing = run_as_typed("batches", "show", out, "--batch", "x")
    assert missing.output.splitlines()[0] == "Usage: engine batches show [OPTIONS] DIRECTORY"


def test_batches_warns_when_the_epoch_has_no_window(store):
    result = run("batches", store, "--split", "validation", "--context", 100_000, "--batch-size", 4)
    assert result.exit_code == 0
    assert result.stderr == ("warning: validation: no complete window: all 1 document(s) are shorter than "
                             "T + 1 = 100,001 tokens (use a smaller --context)\n")
    assert "windows      0 (T=100000, S=1)" in result.stdout


def test_batches_counts_short_documents_without_a_warning(store):
    """Documents shorter than T + 1 give no window: counted on the windows line and in --json, not warned about."""
    result = run("batches", store, "--context", 20, "--batch-size", 4)
    assert result.exit_code == 0 and result.stderr == ""
    # lengths 11 + 9i: 11 and 20 are short; the others give n - 20 windows each, 9 * (1 + ... + 18) in all
    assert "\nwindows      1539 (T=20, S=1); 2 document(s) shorter than T + 1 give none\n" in result.stdout
    as_json = run("batches", store, "--context", 20, "--batch-size", 4, "--json")
    assert as_json.exit_code == 0 and as_json.stderr == ""
    report = json.loads(as_json.stdout)
    assert report["short_documents"] == 2 and report["warnings"] == []
    fine = run("batches", store, "--context", 4, "--batch-size", 4)
    assert fine.stderr == "" and "shorter" not in fine.stdout


def test_batches_warns_about_an_empty_split(store):
    result = run("batches", store, "--split", "test", "--context", 4, "--batch-size", 4)
    assert result.exit_code == 0
    assert result.stderr == "warning: test: no complete window: the split holds no documents\n"


def test_inspect_verify_says_what_it_verified(store):
    result = run("inspect", store, "--verify")
    assert result.exit_code == 0
    assert result.output.splitlines()[-2:] == ["", "verified: 3 files, sha256 match the manifest"]
    assert "verified" not in run("inspect", store).output
    assert json.loads(run("inspect", store, "--verify", "--json").output)["verified"] == {"files": 3, "ok": True}
    assert "verified" not in json.loads(run("inspect", store, "--json").output)


def test_batches_out_refuses_a_store_or_a_foreign_folder(store, tmp_path):
    args = ("batches", store, "--context", 4, "--batch-size", 4, "--seed", 1, "--out")
    before = sorted(p.name for p in store.iterdir())
    result = run(*args, store)
    assert result.exit_code == 2
    assert result.output == (f"error: --out {store}: holds _engine.json, _tokenizer.json, split=test ..., not only "
                             "manifest.json and index-<sha256>.parquet; expected a new directory or an earlier `engine "
                             "batches --out` output\n")
    assert sorted(p.name for p in store.iterdir()) == before
    assert run(*args, store / "split=train").exit_code == 2
    fresh = tmp_path / "epoch"
    assert run(*args, fresh).exit_code == 0
    assert run(*args, fresh).exit_code == 0  # an earlier output is replaced
    index = json.loads((fresh / "manifest.json").read_text())["index"]["file"]
    assert re.fullmatch(r"index-[0-9a-f]{16}\.parquet", index)
    assert sorted(p.name for p in fresh.iterdir()) == [index, "manifest.json"]  # the earlier index is gone


def test_pattern_is_refused_for_a_tokenizer_file_that_fixes_its_own(tmp_path):
    from engine.tokenizers.loading import load_tokenizer
    from engine.tokenizers.byte_bpe import ByteBpeTrainer
    from engine.tokenizers.char import CharTokenizer

    byte_file = ByteBpeTrainer(vocab_size=300).train(["abc abd abe"] * 3).save(tmp_path / "b.json")
    char_file = CharTokenizer.fit("abc").save(tmp_path / "c.json")
    assert load_tokenizer(byte_file, pattern="gpt2").pattern == "gpt2"  # its own pattern: fine
    with pytest.raises(ConfigurationError) as info:
        load_tokenizer(byte_file, pattern="cl100k")
    assert str(info.value) == (f"{byte_file}: pattern= / --pattern cl100k applies to a tiktoken rank file, which "
                               "names no pre-tokenizer; this file fixes its own (gpt2)")
    result = run("prepare", "--tokenizer", char_file, "--pattern", "o200k", "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 2
    assert result.output == (f"error: {char_file}: pattern= / --pattern o200k applies to a tiktoken rank file, which names "
                             "no pre-tokenizer; this file fixes its own (none: it is no byte-level BPE)\n")


def test_numbers_name_their_flag_and_a_zero_batch_size_is_refused(store):
    result = run("pack", store, "--row-length", 8, "--batch-size", 0)
    assert result.exit_code == 2
    assert result.output == "error: batch size must be a positive integer, got 0\n"
    compare = run("tokenizers", "compare", str(ROOT / "data" / "tinyshakespeare.txt"), "--context", 0)
    assert compare.exit_code == 2 and compare.output == "error: --context 0: expected an integer >= 1\n"
