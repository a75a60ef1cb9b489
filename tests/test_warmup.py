"""engine warmup: runs each area once and reports it; unknown areas are usage errors."""

from click.testing import CliRunner

from engine.cli import main
from engine.warmup import AREAS, warmup


def test_warmup_runs_the_named_areas_in_order():
    seen = []
    timings = warmup(["batches", "tokenizers"], report=lambda name, seconds: seen.append(name))
    assert seen == ["batches", "tokenizers"] and list(timings) == ["batches", "tokenizers"]
    assert all(seconds >= 0 for seconds in timings.values())
    assert list(AREAS) == ["tokenizers", "byte_bpe", "prepare", "batches", "packing", "export"]


def test_warmup_command():
    result = CliRunner().invoke(main, ["warmup", "--only", "batches"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("warm: batches (")
    assert result.stderr.startswith("batches ")
    bad = CliRunner().invoke(main, ["warmup", "--only", "masks"])
    assert bad.exit_code == 2
    assert "error: --only 'masks': expected one of tokenizers, byte_bpe, prepare, batches, packing" in bad.output
