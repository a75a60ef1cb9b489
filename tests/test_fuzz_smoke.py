"""scripts/fuzz.py runs for a few seconds without finding a crash, and reports a planted one."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "fuzz.py"


def load_fuzz_module():
    spec = importlib.util.spec_from_file_location("engine_fuzz_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SECONDS_PER_TARGET = 2


def test_fuzz_script_runs_every_target_briefly_without_a_crash(tmp_path):
    crashes = tmp_path / "crashes"
    fuzz = load_fuzz_module()
    seconds = SECONDS_PER_TARGET * len(fuzz.TARGETS)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", str(seconds), "--target", "all", "--crash-dir", str(crashes)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # atheris scratch stays inside the test's directory
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.startswith("fuzz: ")
    assert f"targets jsonl, parquet, tokenizer, tiktoken, tokenizer.json, epoch, {seconds} s" in result.stdout
    assert not crashes.exists() or not any(crashes.iterdir())
    if "random engine" in result.stdout:  # each target got its share of the time and ran inputs
        summary = result.stdout.strip().splitlines()[-1]
        for name in fuzz.TARGETS:
            match = re.search(rf"(?:\(|, ){re.escape(name)} ([\d,]+) in ([\d.]+) s", summary)
            assert match, summary
            assert int(match.group(1).replace(",", "")) > 0
            assert float(match.group(2)) >= SECONDS_PER_TARGET * 0.5, summary


def test_parser_targets_reach_past_the_checks(tmp_path):
    """Structured edits of the seeds reach the parsers: the engine-tokenizer target recomputes the hash."""
    fuzz = load_fuzz_module()
    seed = fuzz.tokenizer_seeds()[0][0]
    import json

    obj = json.loads(seed)
    edited = fuzz.with_content_hash(fuzz.edit_json(seed, json.loads(seed)))
    assert edited != obj and edited["hash"] == fuzz.with_content_hash(json.loads(json.dumps(edited)))["hash"]
    targets = fuzz.Targets(tmp_path)
    for data in fuzz.tiktoken_seeds():
        targets.tiktoken(data)
    for data in fuzz.hf_json_seeds():
        targets.tokenizer_json(data)
    targets.epoch(targets.epoch_manifest)
    assert (targets.epoch_dir / "manifest.json").read_bytes() == targets.epoch_manifest


def test_random_engine_reports_and_saves_a_crashing_input(tmp_path, capsys):
    fuzz = load_fuzz_module()

    def buggy(data: bytes) -> None:
        if b"\xff" in data:
            raise ValueError("planted bug")

    status = fuzz.run_random({"jsonl": buggy}, {"jsonl": fuzz.jsonl_seeds()}, 30, 0, tmp_path / "crashes")
    assert status == 1
    err = capsys.readouterr().err
    assert "ValueError: planted bug" in err
    saved = list((tmp_path / "crashes").iterdir())
    assert len(saved) == 1 and saved[0].name.startswith("crash-jsonl-")
    assert f"crashing input written to {saved[0]}" in err
    assert b"\xff" in saved[0].read_bytes()


def test_mutations_are_seeded():
    fuzz = load_fuzz_module()
    seeds = fuzz.jsonl_seeds()
    import random

    first = [fuzz.mutate(random.Random(7), seeds[0], seeds) for _ in range(3)]
    again = [fuzz.mutate(random.Random(7), seeds[0], seeds) for _ in range(3)]
    assert first == again
