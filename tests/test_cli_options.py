"""Shared CLI options and behaviours: split option group, `engine splits`, OUT/store lookup,
Ctrl-C and a closed stdout pipe."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition, SplitManifest
from engine.pipeline import default_corpus_paths


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "out"
    result = run("prepare", "--out", out, "--tokenizer", "char", "--context", 4, "--quiet")
    assert result.exit_code == 0, result.output
    return out


def test_splits_command_writes_the_hash_manifest_that_prepare_applies(tmp_path):
    corpus, _ = default_corpus_paths()
    out = tmp_path / "splits.json"
    result = run("splits", corpus, "--hash-split", "0.8,0.1,0.1", "--out", out)
    assert result.exit_code == 0, result.output
    ids = [json.loads(line)["id"] for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    rule = SplitManifest.by_hash({"train": 0.8, "validation": 0.1, "test": 0.1})
    expected = {p.value: [i for i in ids if rule.partition_of(i) == p] for p in Partition}
    assert json.loads(out.read_text()) == expected
    assert [len(v) for v in expected.values()] == [40, 4, 5]
    assert result.output.strip() == f"train 40, validation 4, test 5 documents; wrote {out}"

    by_file = run("prepare", corpus, "--splits", out, "--tokenizer", "char", "--out", tmp_path / "a", "--quiet", "--json")
    by_hash = run("prepare", corpus, "--hash-split", "0.8,0.1,0.1", "--tokenizer", "char", "--out", tmp_path / "b",
                  "--quiet", "--json")
    assert by_file.exit_code == 0 and by_hash.exit_code == 0, by_file.output + by_hash.output
    assert json.loads(by_file.output)["partitions"] == json.loads(by_hash.output)["partitions"]

    again = run("splits", corpus, "--hash-split", "0.8,0.1,0.1", "--out", out)
    assert again.exit_code == 2 and "exists; pass --force to replace it" in again.output
    assert run("splits", corpus, "--hash-split", "0.8,0.1,0.1", "--out", out, "--force").exit_code == 0


def test_splits_command_refuses_a_continuous_text(tmp_path):
    text = tmp_path / "play.txt"
    text.write_text("To be, or not to be.", encoding="utf-8")
    result = run("splits", text, "--hash-split", "0.8,0.1,0.1", "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and "split by position" in result.output


@pytest.mark.parametrize("command", [["prepare"], ["tokenizers", "train"]])
def test_splits_and_hash_split_are_alternatives(command, tmp_path):
    corpus, splits = default_corpus_paths()
    args = command + [str(corpus), "--kind", "char", "--out", str(tmp_path / "t.json")][: 1 if command == ["prepare"] else 5]
    args += ["--splits", str(splits), "--hash-split", "0.8,0.1,0.1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "error: --splits and --hash-split are alternatives: give one of them" in result.output


def test_tokenizers_train_takes_a_hash_split(tmp_path):
    corpus, _ = default_corpus_paths()
    out = tmp_path / "char.json"
    result = run("tokenizers", "train", corpus, "--kind", "char", "--hash-split", "0.8,0.1,0.1", "--out", out)
    assert result.exit_code == 0, result.output
    rule = SplitManifest.by_hash({"train": 0.8, "validation": 0.1, "test": 0.1})
    train_text = "".join(json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines()
                         if line.strip() and rule.partition_of(json.loads(line)["id"]) == Partition.TRAIN)
    from engine.tokenizers.base import load_tokenizer

    assert load_tokenizer(out).vocab_size == 2 + len(set(train_text))


def test_bad_hash_split_is_a_usage_error():
    corpus, _ = default_corpus_paths()
    result = run("prepare", corpus, "--hash-split", "0.8,0.2")
    assert result.exit_code == 2
    assert "expected three ratios train,validation,test like 0.8,0.1,0.1" in result.output


def test_inspect_and_batches_find_the_store_inside_a_prepare_out_folder(prepared):
    shown = run("inspect", prepared)
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0].split() == ["store", str(prepared / "store")]
    batches = run("batches", prepared, "--split", "validation", "--context", 4, "--batch-size", 2, "--sequential")
    assert batches.exit_code == 0, batches.output
    assert f"store        {prepared / 'store'}" in batches.output


def test_ctrl_c_exits_130_with_one_line(monkeypatch, prepared):
    import engine.commands.inspect as inspect_command

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_command, "store_summary", interrupted)
    result = run("inspect", prepared)
    assert result.exit_code == 130
    assert result.output.strip() == "interrupted"


def test_ctrl_c_in_prepare_points_at_resume(monkeypatch, tmp_path):
    import engine.pipeline as pipeline

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "prepare", interrupted)
    result = run("prepare", "--out", tmp_path / "o", "--quiet")
    assert result.exit_code == 130
    assert result.output.strip() == "interrupted: rerun with --resume to continue"


def test_closed_stdout_pipe_exits_quietly(prepared, tmp_path):
    epoch = tmp_path / "epoch"
    assert run("batches", prepared, "--split", "train", "--context", 4, "--batch-size", 5000, "--sequential",
               "--out", epoch).exit_code == 0
    reader = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "batches", "show", str(epoch), "--batch", "0"],
                          stdout=reader.stdin, stderr=subprocess.PIPE, timeout=120)
    reader.stdin.close()
    reader.wait()
    assert proc.stderr.decode() == ""
    assert proc.returncode == 1  # click: a closed pipe ends the command without a message
