"""scripts/train_tiny_gpt.py on CPU: the loss falls, and stop at step 10 + resume equals one run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, shakespeare_path

# The script runs in a subprocess, but it needs torch all the same.
pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")

TINY = ["--context", "16", "--dim", "32", "--heads", "2", "--batch-size", "8", "--eval-every", "10",
        "--eval-batches", "2", "--lr", "0.01"]


def run(*options) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_tiny_gpt.py"), "--data",
                             str(shakespeare_path()), *TINY, *options],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def steps(lines: list[str]) -> list[str]:
    """Training lines: step, loss (6 decimals), epoch, batch index and batch hash."""
    return [line for line in lines if re.match(r"step +\d+ \| loss ", line)]


def test_loss_falls_and_resume_equals_one_run(tmp_path):
    whole = run("--out", str(tmp_path / "whole"), "--steps", "20")
    first = run("--out", str(tmp_path / "split"), "--steps", "10")
    second = run("--out", str(tmp_path / "split"), "--steps", "20", "--resume", str(tmp_path / "split" / "ckpt.pt"),
                 "--workers", "2")
    assert len(steps(whole)) == 20
    assert steps(first) + steps(second) == steps(whole)  # same batches, same losses to 6 decimals
    assert "data state {'seed': 1337, 'epoch': 0, 'next_batch': 10, 'global_batch_size': 8}" in second[0]
    losses = [float(line.split("| loss ")[1].split()[0]) for line in steps(whole)]
    assert losses[0] > 4.0  # about ln(67) at the start
    assert sum(losses[-5:]) / 5 < losses[0] - 0.8
    validation = [line for line in whole if "validation loss" in line]
    assert len(validation) == 2 and "over 256 tokens" in validation[0]
