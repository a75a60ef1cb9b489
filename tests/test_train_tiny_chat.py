"""scripts/train_tiny_chat.py on CPU: the scored loss falls, and stop at step 8 + resume equals one run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")

TINY = ["--row-length", "64", "--dim", "32", "--heads", "2", "--batch-size", "4", "--eval-every", "8",
        "--merges", "100"]


def run(*options) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_tiny_chat.py"), *TINY, *options],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def steps(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r"step +\d+ \| loss ", line)]


def test_scored_loss_falls_and_resume_equals_one_run(tmp_path):
    whole = run("--out", str(tmp_path / "whole"), "--steps", "16")
    first = run("--out", str(tmp_path / "split"), "--steps", "8")
    second = run("--out", str(tmp_path / "split"), "--steps", "16", "--resume", str(tmp_path / "split" / "ckpt.pt"),
                 "--workers", "2")
    assert len(steps(whole)) == 16
    assert steps(first) + steps(second) == steps(whole)  # same batches, same losses to 6 decimals
    assert "data state {'seed': 1337, 'epoch': 0, 'next_batch': 8, 'global_batch_size': 4}" in second[0]
    losses = [float(line.split("| loss ")[1].split()[0]) for line in steps(whole)]
    scored = [int(line.split("| scored ")[1].split()[0]) for line in steps(whole)]
    assert all(0 < s < 4 * 64 for s in scored)  # only the assistant's tokens: fewer than the positions
    assert sum(losses[-4:]) / 4 < losses[0] - 1.0
    assert len([line for line in whole if "validation loss" in line]) == 2
