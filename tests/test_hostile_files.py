"""Files engine did not write, or that were edited by hand: every JSON file engine reads goes through one
parser with limits (nesting thousands of levels deep, integers of thousands of digits and non-numbers
are exit 2 with the file named, never RecursionError or ValueError), and tokenizer payloads are checked,
never coerced, even when their hash was recomputed."""

import base64
import os
import stat
import copy
import hashlib
import json
import re
from pathlib import Path

import pytest
import regex

from engine.checks import JSON_MAX_DEPTH, JSONLimitError, parse_json
from engine.errors import EngineError, TokenizerError
from engine.store import TokenStore
from engine.tokenizers import load_tokenizer
from engine.tokenizers.base import canonical_json, is_engine_tokenizer_file
from engine.tokenizers.bpe import BpeTrainer
from engine.tokenizers.byte_bpe import ByteBpeTrainer
from engine.tokenizers.pretokenize import PATTERNS
from tests.helpers import _small_corpus, run, small_store

DEEP = "[" * 5000 + "]" * 5000
HUGE_INT = "7" * 5000


def test_parse_json_within_limits_equals_json_loads():
    text = '{"a": [1, -2, 3.5, {"b": [true, null, "x"]}], "c": 12345678901234567890}'
    assert parse_json(text) == json.loads(text)
    assert parse_json("[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH) == json.loads("[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH)


@pytest.mark.parametrize("text, message", [
    (DEEP, "nested more than 64 levels deep"),
    ("[" * 65 + "]" * 65, "nested more than 64 levels deep"),  # below the C parser's own recursion limit
    (HUGE_INT, "an integer of 5000 digits"),
    ('{"id": -' + HUGE_INT + "}", "an integer of 5000 digits"),
    ("[NaN]", "NaN"), ("[Infinity]", "Infinity"), ("1e999", "too large for a float"),
])
def test_parse_json_refuses_past_its_limits(text, message):
    with pytest.raises(JSONLimitError, match=message):
        parse_json(text)


@pytest.fixture
def store_path(tmp_path):
    small_store(tmp_path / "s")
    return tmp_path / "s"


@pytest.mark.parametrize("payload", [DEEP, '{"format_version": ' + HUGE_INT + "}"])
def test_store_manifest_past_limits_is_exit_2(store_path, payload):
    (store_path / "_engine.json").write_text(payload, encoding="utf-8")
    with pytest.raises(EngineError, match="_engine.json: .*JSON past engine's limits"):
        TokenStore.open(store_path)
    result = run("inspect", store_path, "--verify")
    assert result.exit_code == 2, result.output
    assert "_engine.json" in result.output and "limits" in result.output


@pytest.mark.parametrize("payload", [DEEP, '{"kind": "char", "payload": {"bos_id": ' + HUGE_INT + "}}"])
def test_tokenizer_file_past_limits_is_exit_2(tmp_path, payload):
    path = tmp_path / "tokenizer.json"
    path.write_text(payload, encoding="utf-8")
    with pytest.raises(EngineError, match="tokenizer.json: .*limits"):
        load_tokenizer(path)
    result = run("tokenizers", "import", path, "--out", tmp_path / "imported.json")
    assert result.exit_code == 2, result.output
    assert "limits" in result.output


def test_epoch_manifest_past_limits_is_exit_2(store_path, tmp_path):
    out = tmp_path / "epoch"
    assert run("batches", store_path, "--context", 2, "--batch-size", 3, "--seed", 7, "--out", out).exit_code == 0
    (out / "manifest.json").write_text(DEEP, encoding="utf-8")
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2, result.output
    assert "manifest.json" in result.output and "limits" in result.output


def _resealed(obj: dict, edit) -> dict:
    """``obj`` with ``edit`` applied to its payload and the hash recomputed, as a hand-edited file would be."""
    obj = copy.deepcopy(obj)
    edit(obj["payload"])
    obj["hash"] = hashlib.sha256(canonical_json({"kind": obj["kind"], "payload": obj["payload"]})).hexdigest()
    return obj


@pytest.fixture(scope="module")
def byte_bpe_file():
    return ByteBpeTrainer(40).train("hello world the cat sat on the mat " * 50).to_json()


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["specials"].__setitem__("<bos>", 0.9), "special token '<bos>': id 0.9 is float, expected an integer"),
    (lambda p: p["specials"].__setitem__("<bos>", "1"), "special token '<bos>': id '1' is str, expected an integer"),
    (lambda p: p["merges"][0].__setitem__(0, 34.99), "merge 0: id 34.99 is float, expected an integer"),
    (lambda p: p["merges"][3].__setitem__(1, True), "merge 3: id True is bool, expected an integer"),
    (lambda p: p.__setitem__("whole_piece_first", "false"), '"whole_piece_first" must be true or false'),
    (lambda p: p.__setitem__("whole_piece_first", 0), '"whole_piece_first" must be true or false'),
    (lambda p: p.__setitem__("bos", 0), '"bos" must be the name of a special token'),
    (lambda p: p["tokens"].__setitem__(5, 7), '"tokens" must be a list of base64 strings'),
])
def test_byte_bpe_payload_values_are_checked_not_coerced(tmp_path, byte_bpe_file, edit, message):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_resealed(byte_bpe_file, edit)), encoding="utf-8")
    with pytest.raises(TokenizerError, match=re.escape(message)):
        load_tokenizer(path)
    result = run("prepare", _small_corpus(tmp_path), "--hash-split", "0.5,0.25,0.25", "--tokenizer", path,
                 "--out", tmp_path / "out")
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_untouched_payload_loads(tmp_path, byte_bpe_file):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_resealed(byte_bpe_file, lambda p: None)), encoding="utf-8")
    assert load_tokenizer(path).encode("the cat").tolist() == ByteBpeTrainer(40).train(
        "hello world the cat sat on the mat " * 50).encode("the cat").tolist()


def test_bpe_history_must_be_integer_pairs(tmp_path):
    obj = BpeTrainer(10).train("abab cdcd abab " * 20).to_json()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_resealed(obj, lambda p: p["history"][1].__setitem__(1, 3.5))), encoding="utf-8")
    with pytest.raises(TokenizerError, match='"history" must be a list of'):
        load_tokenizer(path)


def _edit_manifest(store_path, edit):
    manifest = json.loads((store_path / "_engine.json").read_text(encoding="utf-8"))
    edit(manifest["splits"])
    (store_path / "_engine.json").write_text(json.dumps(manifest), encoding="utf-8")


@pytest.mark.parametrize("edit, message", [
    # the train entry replaced by a copy of the validation file's entry: its documents would be served as train
    (lambda s: s["train"].__setitem__("files", [dict(s["validation"]["files"][0])]) or s["train"].update(documents=1),
     "split train lists 'split=validation/part-00000.parquet', a file outside its folder split=train/"),
    (lambda s: s["train"]["files"].append(dict(s["train"]["files"][0])) or s["train"].update(documents=40),
     "'split=train/part-00000.parquet' is listed twice"),
    (lambda s: s["train"].update(documents=21), "split train records 21 documents, its files list 20 rows"),
])
def test_store_manifest_must_be_consistent(store_path, edit, message):
    _edit_manifest(store_path, edit)
    with pytest.raises(EngineError, match=re.escape(message)):
        TokenStore.open(store_path)
    result = run("inspect", store_path)
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize("merges", [1 << 40, 10 ** 30, (1 << 24) + 1])
@pytest.mark.parametrize("command", [
    ("tokenizers", "train", "{text}", "--kind", "bpe", "--out", "{tmp}/t.json"),
    ("tokenizers", "train", "{text}", "--kind", "bpe", "--level", "byte", "--out", "{tmp}/t.json"),
    ("tokenizers", "compare", "{text}"),
    ("prepare", "{text}", "--tokenizer", "bpe", "--out", "{tmp}/out"),
])
def test_size_options_are_checked_before_they_size_anything(tmp_path, command, merges):
    """--merges of 2^40 asked for an 8 TiB array (MemoryError, exit 1); past what a vocabulary holds it is exit 2."""
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    args = [a.format(text=text, tmp=tmp_path) for a in command]
    result = run(*args, "--merges", merges)
    assert result.exit_code == 2, result.output
    assert f"{merges}" in result.output and "16777216" in result.output
    assert not (tmp_path / "t.json").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("level, pattern", [("char", r"\w+|[^\w\s]|\s"), ("byte", PATTERNS["gpt2"])])
def test_merges_beyond_what_the_text_holds_stop_early_without_sizing_by_the_request(level, pattern):
    text = "the cathedral sat on the mattress. " * 40
    huge = BpeTrainer(1 << 24, level=level).train(text)  # arrays sized by the text, not by 2^24 merges
    # merged until no pair is left: every piece of the pre-tokenizer is one token
    assert huge.encode(text).shape[0] == len(regex.findall(pattern, text))
    assert huge.to_json() == BpeTrainer(1000, level=level).train(text).to_json()


@pytest.mark.parametrize("value", ["<x>=²", "<x>=٣", "<x>=" + "9" * 5000, "<x>=-1", "=3", "<x>3"])
def test_special_ids_on_the_command_line_are_ascii_integers(tmp_path, value):
    ranks = tmp_path / "r.tiktoken"
    ranks.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)), encoding="ascii")
    result = run("tokenizers", "import", ranks, "--special", value, "--out", tmp_path / "t.json")
    assert result.exit_code == 2, result.output
    assert "expected TOKEN=ID with a non-negative integer ID" in result.output
    assert not (tmp_path / "t.json").exists()


def _full_disk(monkeypatch):
    """Path.write_text writes half its text, then fails as a full disk does."""
    import errno
    import pathlib

    real = pathlib.Path.write_text

    def write_half(self, data, *args, **kwargs):
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", write_half)


def test_a_full_disk_names_the_split_manifest_and_leaves_nothing(tmp_path, monkeypatch):
    from engine.corpus.splits import SplitManifest

    manifest = SplitManifest({"train": ["a", "b"], "validation": ["c"], "test": []})
    _full_disk(monkeypatch)
    with pytest.raises(EngineError, match=re.escape(f"{tmp_path / 'o.json'}: cannot write the split manifest "
                                                    "(No space left on device)")):
        manifest.to_json(tmp_path / "o.json")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_names_the_lock_file_and_leaves_no_draft(tmp_path, monkeypatch):
    from engine.store.lock import WriterLock

    lock = WriterLock(tmp_path / "store", wait=False, timeout=0)
    _full_disk(monkeypatch)
    with pytest.raises(EngineError, match=r"\.store\.lock\.\d+: cannot write the lock file \(No space left on device\)"):
        lock.acquire()
    assert list(tmp_path.iterdir()) == []


def _not_regular(tmp_path, kind):
    path = tmp_path / f"out-{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":  # a character device: one made with /dev/null's numbers, or /dev/null itself
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        except PermissionError:  # making one needs root; a user who is not root cannot replace /dev/null either
            return Path("/dev/null")
    elif kind == "link":
        (tmp_path / "target.json").write_text("mine")
        path.symlink_to(tmp_path / "target.json")
    else:
        path.mkdir()
    return path


@pytest.fixture
def corpus_text(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    return text


def _tokenizer_commands(corpus_text, out):
    ranks = corpus_text.with_name("r.tiktoken")
    ranks.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)), encoding="ascii")
    return [("tokenizers", "train", corpus_text, "--kind", "char", "--out", out),
            ("tokenizers", "import", ranks, "--special", "<|endoftext|>=256", "--out", out)]


@pytest.mark.parametrize("kind", ["fifo", "device", "link", "folder"])
def test_out_files_that_are_not_regular_files_are_never_replaced(tmp_path, corpus_text, kind):
    out = _not_regular(tmp_path, kind)
    refused = ("engine only ever replaces regular files it wrote",) + (("is a directory",) if kind == "folder" else ())
    (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "x"}\n')
    splits = ("splits", tmp_path / "c.jsonl", "--hash-split", "0.8,0.1,0.1", "--out", out)
    for command in _tokenizer_commands(corpus_text, out) + [splits]:
        for force in ((), ("--force",)):
            result = run(*command, *force)
            assert result.exit_code == 2 and any(r in result.output for r in refused), result.output
    assert os.path.lexists(out) and (kind != "link" or (tmp_path / "target.json").read_text() == "mine")
    assert kind != "fifo" or stat.S_ISFIFO(os.lstat(out).st_mode)
    assert kind != "device" or stat.S_ISCHR(os.lstat(out).st_mode)


def test_tokenizer_out_replaces_its_own_files_and_a_users_file_only_with_force(tmp_path, corpus_text):
    out = tmp_path / "tok.json"
    for command in _tokenizer_commands(corpus_text, out):
        out.write_text("my notes")
        result = run(*command)
        assert result.exit_code == 2 and "exists and is not an engine tokenizer file; pass --force" in result.output
        assert out.read_text() == "my notes"
        assert run(*command, "--force").exit_code == 0
        assert is_engine_tokenizer_file(out)
        assert run(*command).exit_code == 0  # an engine tokenizer file is replaced without --force


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.txt", "corpus.jsonl.gz"])
def test_a_fifo_corpus_is_refused_by_name_before_the_lock(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    out = tmp_path / "out"
    result = run("prepare", fifo, "--hash-split", "0.8,0.1,0.1", "--out", out)  # nothing writes the FIFO: no hang
    assert result.exit_code == 2, result.output
    assert str(fifo) in result.output and "is not a regular file" in result.output
    assert not out.exists() or list(out.iterdir()) == []


def test_a_folder_corpus_1100_levels_deep_is_read(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    deep = corpus
    for _ in range(1100):  # one at a time: os.makedirs itself recurses
        deep = deep / "d"
        deep.mkdir()
    (deep / "bottom.txt").write_text("the bottom of the folder", encoding="utf-8")
    (corpus / "top.txt").write_text("the top of the folder", encoding="utf-8")
    from engine.corpus import Corpus

    try:
        documents = Corpus.from_path(corpus)
        assert sorted(d.id for d in documents) == ["/".join(["d"] * 1100 + ["bottom.txt"]), "top.txt"]
    finally:  # bottom up, one level at a time: shutil.rmtree (and pytest's cleanup) recurse too
        (deep / "bottom.txt").unlink()
        while deep != corpus:
            deep.rmdir()
            deep = deep.parent


def test_an_added_token_holding_a_lone_surrogate_is_exit_2(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.train_from_iterator(["hello world"] * 10, trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"]))
    data = json.loads(hf.to_str())
    data["added_tokens"][0]["content"] = "\ud800"
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # json escapes it as \ud800: a valid file
    with pytest.raises(TokenizerError, match="added token 0: '\\\\ud800' holds a lone surrogate U\\+D800"):
        load_tokenizer(path)
    result = run("tokenizers", "import", path, "--out", tmp_path / "t.json")
    assert result.exit_code == 2 and "lone surrogate" in result.output, result.output


@pytest.mark.parametrize("args", [
    ["prepare", "{corpus}", "--hash-split", "0.8,0.1,0.1", "--tokenizer", "char", "--out", "{tmp}/o\udcff"],
    ["tokenizers", "import", "{corpus}", "--special", "\udcff=300", "--out", "{tmp}/t.json"],
    ["splits", "{corpus}", "--hash-split", "0.8,0.1,0.1", "--out", "{tmp}/s\udce9.json"],
])
def test_arguments_that_are_not_utf8_are_usage_errors_naming_them(tmp_path, args):
    """Bytes that are not UTF-8 in an argument (Python keeps them as lone surrogates): exit 2 naming the
    argument's bytes, before anything is read or written (the --out folder was left behind, exit 1)."""
    import subprocess
    import sys

    _small_corpus(tmp_path)
    argv = [a.format(corpus=tmp_path / "c.jsonl", tmp=tmp_path) for a in args]
    result = run(*argv)
    assert result.exit_code == 2, result.output
    bad = next(a for a in argv if any("\udc80" <= c <= "\udcff" for c in a))
    assert f"argument {bad.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]
    # the same bytes from a real command line
    done = subprocess.run([sys.executable, "-m", "engine", *[os.fsencode(a) for a in argv]], capture_output=True)
    assert done.returncode == 2 and b"is not valid UTF-8" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]
