"""engine.cli and engine.commands._options: exit codes and one-line errors, the shared split options,
OUT/store lookup, Ctrl-C and a closed stdout pipe."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.pipeline import default_corpus_paths
from tests.helpers import run, small_store


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "out"
    result = run("prepare", "--out", out, "--tokenizer", "char", "--context", 4, "--quiet")
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("command", [["prepare"], ["tokenizers", "train"]])
def test_splits_and_hash_split_are_alternatives(command, tmp_path):
    corpus, splits = default_corpus_paths()
    args = command + [str(corpus), "--kind", "char", "--out", str(tmp_path / "t.json")][: 1 if command == ["prepare"] else 5]
    args += ["--splits", str(splits), "--hash-split", "0.8,0.1,0.1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "error: --splits and --hash-split are alternatives: give one of them" in result.output


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


# -- the CLI -------------------------------------------------------------------------------------------


def test_cli_user_errors_exit_2_with_one_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["inspect", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'nowhere'}: no token store here (directory not found)\n"
    small_store(tmp_path / "store")
    result = runner.invoke(main, ["pack", str(tmp_path / "store"), "--row-length", "0"])
    assert result.exit_code == 2 and result.stderr == "error: --row-length 0: expected an integer >= 1\n"
    assert "Traceback" not in result.output


def test_cli_os_errors_are_user_errors(tmp_path, shakespeare_text):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "play.txt").write_text(shakespeare_text[:2000])
    result = CliRunner().invoke(main, ["tokenizers", "train", str(tmp_path / "play.txt"), "--kind", "char",
                                       "--out", str(tmp_path / "a_file" / "tok.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {tmp_path / 'a_file'}") and result.stderr.count("\n") == 1


def test_cli_internal_errors_exit_1_and_point_to_debug(tmp_path, monkeypatch):
    import engine.commands.inspect as inspect_command

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(inspect_command.TokenStore, "open", broken)
    result = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr == "internal error: RuntimeError: boom (run with --debug for the traceback)\n"
    result = CliRunner().invoke(main, ["--debug", "inspect", str(tmp_path)])
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr and "RuntimeError: boom" in result.stderr


def test_cli_debug_shows_the_traceback_of_user_errors_too(tmp_path):
    result = CliRunner().invoke(main, ["--debug", "inspect", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.endswith(f"error: {tmp_path / 'nowhere'}: no token store here (directory not found)\n")


def test_cli_usage_errors_exit_2(tmp_path):
    runner = CliRunner()
    for args in (["pack", str(tmp_path)], ["no-such-command"], ["pack", str(tmp_path), "--row-length", "ten"]):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, args
        assert "Usage:" in result.stderr and "Traceback" not in result.output
