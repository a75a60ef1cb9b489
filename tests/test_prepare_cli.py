"""engine prepare (the main job) and the CLI's error contract, through click's CliRunner."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition
from engine.pipeline import default_corpus_paths, prepare
from engine.store import TokenStore
from engine.tokenizers.loading import load_tokenizer


def lines_of(output: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in output.splitlines() if line.split()}


def count_windows(n: int, T: int, S: int) -> int:
    return 0 if n < T + 1 else (n - (T + 1)) // S + 1


@pytest.fixture(scope="module")
def bundled_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("prep") / "out"
    result = CliRunner().invoke(main, ["prepare", "--out", str(out), "--tokenizer", "char", "--context", "8", "--quiet"])
    assert result.exit_code == 0, result.output
    return out, result.output


COLUMNS = ("documents", "characters", "tokens", "windows", "short_documents", "incomplete_tails")


def test_prepare_bundled_table_matches_report(bundled_run):
    out, output = bundled_run
    report = json.loads((out / "report.json").read_text())
    parts = report["partitions"]
    assert [parts[p]["documents"] for p in ("train", "validation", "test")] == [39, 5, 5]
    assert lines_of(output)["partition"] == ["documents", "characters", "tokens", "windows", "short", "tails"]
    lines = lines_of(output)
    for name in ("train", "validation", "test"):
        p = parts[name]
        expected = [f"{p[k]:,}" for k in COLUMNS]
        assert lines[name] == expected
    total = [f"{sum(parts[n][k] for n in parts):,}" for k in COLUMNS]
    assert lines["total"] == total


def test_prepare_numbers_are_recomputed_from_the_corpus(bundled_run):
    out, _ = bundled_run
    report = json.loads((out / "report.json").read_text())
    tok = load_tokenizer(out / "tokenizer.json")
    store = TokenStore.open(out / "store", tokenizer=tok)
    corpus_path, splits_path = default_corpus_paths()
    docs = {}
    for line in corpus_path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            docs[obj["id"]] = obj["text"]
    manifest = json.loads(splits_path.read_text())
    # Only training characters are in the vocabulary: the char tokenizer was fitted on train only.
    train_chars = sorted(set("".join(docs[i] for i in manifest["train"])))
    assert tok.vocab_size == 2 + len(train_chars)
    for name in ("train", "validation", "test"):
        ids = manifest[name]
        p = report["partitions"][name]
        assert p["characters"] == sum(len(docs[i]) for i in ids)
        # char tokens = characters + BOS + EOS per document
        assert p["tokens"] == p["characters"] + 2 * len(ids)
        lengths = [len(docs[i]) + 2 for i in ids]
        assert p["windows"] == sum(count_windows(n, 8, 1) for n in lengths)
        assert p["short_documents"] == sum(n < 9 for n in lengths)
        assert sorted(store.ids(Partition(name))) == sorted(ids)
        values, offsets = store.arrays(Partition(name))
        for doc in store.documents(Partition(name)):
            np.testing.assert_array_equal(doc.tokens, tok.encode_document(docs[doc.id]))
            assert tok.decode(doc.tokens) == docs[doc.id]


def test_the_first_command_prints_no_warning(tmp_path):
    """README's first command, ``engine prepare`` on the bundled corpus: T defaults to 32 there (its held-out
    documents hold 39 to 74 tokens), so every partition gives windows and stderr holds progress, no warning."""
    result = CliRunner().invoke(main, ["prepare", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert not [line for line in result.stderr.splitlines() if "warning" in line.lower()], result.stderr
    assert "windows: context 32, stride 1" in result.stdout.splitlines()
    lines = lines_of(result.stdout)
    assert {name: lines[name][3:] for name in ("train", "validation", "test", "total")} == {
        "train": ["3,571", "4", "39"], "validation": ["126", "0", "5"], "test": ["85", "0", "5"],
        "total": ["3,782", "4", "49"]}
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["context_length"] == 32 and report["warnings"] == []
    # the same corpus named explicitly is any other corpus: T = 64, and its test partition gives no window
    corpus, splits = default_corpus_paths()
    explicit = prepare(corpus, splits, out_dir=tmp_path / "explicit", quiet=True)
    assert explicit.report["context_length"] == 64
    assert explicit.report["warnings"] == [
        "test: no complete window: all 5 document(s) are shorter than T + 1 = 65 tokens (use a smaller --context)"]


def test_prepare_continuous_text_json(tmp_path):
    text = "abcab" * 40
    src = tmp_path / "play.txt"
    src.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(
        main, ["prepare", str(src), "--out", str(tmp_path / "o"), "--tokenizer", "char", "--context", "4",
               "--stride", "3", "--train-fraction", "0.75", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["partitions"]["train"]["characters"] == 150
    assert report["partitions"]["validation"]["characters"] == 50
    assert report["partitions"]["test"]["documents"] == 0
    # train document = 150 chars + BOS + EOS = 152 tokens; (152 - 5) // 3 + 1 = 50 windows
    assert report["partitions"]["train"]["windows"] == 50
    # tail starts at 50 * 3 = 150 < 152: two tokens left over
    assert report["partitions"]["train"]["incomplete_tails"] == 1
    assert report["partitions"]["train"]["tail_tokens"] == 2
    assert report["partitions"]["validation"]["windows"] == (52 - 5) // 3 + 1


def test_prepare_bpe_default(tmp_path):
    result = prepare(out_dir=tmp_path / "o", merges=50, context_length=16, quiet=True)
    assert result.report["tokenizer"]["kind"] == "bpe"
    tok = load_tokenizer(result.tokenizer_path)
    assert tok.vocab_size == result.report["tokenizer"]["vocab_size"]
    store = TokenStore.open(result.store_path, tokenizer=tok)
    for doc in store.documents(Partition.VALIDATION):
        assert doc.tokens[0] == tok.bos_id and doc.tokens[-1] == tok.eos_id


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["prepare", "missing.jsonl"], "missing.jsonl: corpus not found"),
        (["prepare", "--context", "0"], "context"),
        (["prepare", "--stride", "0"], "stride"),
        (["prepare", "--merges", "-1"], "--merges must be >= 0"),
        (["prepare", "--hash-split", "0.5,0.5"], "expected three ratios"),
        (["prepare", "--tokenizer", "nope"], "expected one of char, word, bpe"),
    ],
)
def test_prepare_user_errors_exit_2_with_one_line(tmp_path, args, fragment):
    result = CliRunner().invoke(main, args + ["--out", str(tmp_path / "o"), "--quiet"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.output
    assert not (tmp_path / "o" / "store").exists()


def test_jsonl_without_split_is_an_error(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["prepare", str(src), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "needs a split: pass --splits FILE" in result.output


def test_hash_split_prepare(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": "ab" * (i + 1)}) + "\n" for i in range(30)), encoding="utf-8")
    result = CliRunner().invoke(main, ["prepare", str(src), "--hash-split", "1,0,0", "--tokenizer", "char",
                                       "--out", str(tmp_path / "o"), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    parts = json.loads(result.output)["partitions"]
    assert parts["train"]["documents"] == 30 and parts["validation"]["documents"] == 0


def test_help_has_examples():
    runner = CliRunner()
    for cmd in ["prepare", "inspect", "bench"]:
        result = runner.invoke(main, [cmd, "--help"])
        assert result.exit_code == 0
        assert "Example:" in result.output


def test_prepare_help_names_every_kind_and_the_byte_bpe_command():
    result = CliRunner().invoke(main, ["prepare", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--tokenizer KIND|FILE A kind to fit on the train partition (char, word, bpe, byte-bpe)" in text
    assert ("engine prepare corpus.jsonl --hash-split 0.98,0.01,0.01 --tokenizer byte-bpe --vocab-size 32768"
            in result.output)
    assert "--pattern NAME|REGEX" in text and "--tie-break [first|hf]" in text
