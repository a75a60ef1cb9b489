"""engine bench gathers rows from bench/peers_*.py and prints them; numeric targets are shown and
checked (--check), each row with its verdict (met / missed / info), retired targets are information
that --check never counts, a failing area does not hide the rest but makes the command exit 1, an
unknown --only area exits 2, and the benchmarks never import the test suite."""

import importlib.util
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

import engine.commands.bench as bench_cmd
from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]


def numeric_row(benchmark, ratio, **target):
    return {"benchmark": benchmark, "engine_s": 0.002, "peer": "peer", "peer_s": 0.002 * ratio, "ratio": ratio,
            **target}


def fake_modules(rows_by_area):
    def load(only=()):
        mods = []
        for area, rows in rows_by_area.items():
            if callable(rows):
                mods.append((area, types.SimpleNamespace(rows=rows)))
            else:
                mods.append((area, types.SimpleNamespace(rows=lambda quick, rows=rows: rows)))
        return [m for m in mods if not only or m[0] in only]

    return load


def broken(quick):
    raise RuntimeError("peer exploded")


def test_bench_json_markdown_and_table(monkeypatch):
    good = [{"benchmark": "thing", "engine_s": 0.002, "peer": "peer", "peer_s": 0.010, "ratio": 5.0,
             "at_least": 2, "at_most": None, "engine_under_s": None, "note": ""}]
    monkeypatch.setattr(bench_cmd, "load_peer_modules", fake_modules({"good": good}))
    runner = CliRunner()
    result = runner.invoke(main, ["bench", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"area": "good", **good[0], "target": ">= 2x", "verdict": "met"}]
    md = runner.invoke(main, ["bench", "--markdown"])
    assert md.exit_code == 0
    lines = md.stdout.splitlines()
    assert lines[0] == "| area | benchmark | engine | peer | peer time | ratio | target | verdict |"
    assert lines[1] == "| --- | --- | ---: | --- | ---: | ---: | --- | --- |"
    assert lines[2] == "| good | thing | 2.0 ms | peer | 10.0 ms | 5.00× | >= 2x | met |"
    assert lines[-1] == "This run met 1 of 1 numeric targets."
    table = runner.invoke(main, ["bench"])
    assert table.exit_code == 0
    header, _, body = table.stdout.splitlines()[:3]
    assert header.split() == ["area", "benchmark", "engine", "ms", "peer", "peer", "ms", "ratio", "target", "verdict"]
    assert body.split() == ["good", "thing", "2.00", "peer", "10.00", "5.00x", ">=", "2x", "met"]


def test_markdown_verdict_column_and_summary(monkeypatch):
    """One verdict per row: met, missed, info (no target, or a retired one with its reason), unchecked."""
    rows = [numeric_row("fast", 5.0, at_least=2), numeric_row("slow", 1.5, at_least=2),
            numeric_row("retired", 0.5, at_least=1.6, info="was >= 1.6x; no headroom on 2 cores"),
            numeric_row("plain", 3.0), numeric_row("legacy", 9.0, target=">= 100x")]
    monkeypatch.setattr(bench_cmd, "load_peer_modules", fake_modules({"a": rows}))
    md = CliRunner().invoke(main, ["bench", "--markdown"])
    assert md.exit_code == 0, md.output
    lines = md.stdout.splitlines()
    assert lines[2:7] == [
        "| a | fast | 2.0 ms | peer | 10.0 ms | 5.00× | >= 2x | met |",
        "| a | slow | 2.0 ms | peer | 3.0 ms | 1.50× | >= 2x | missed |",
        "| a | retired | 2.0 ms | peer | 1.0 ms | 0.50× | info: was >= 1.6x; no headroom on 2 cores | info |",
        "| a | plain | 2.0 ms | peer | 6.0 ms | 3.00× |  | info |",
        "| a | legacy | 2.0 ms | peer | 18.0 ms | 9.00× | >= 100x | unchecked |",
    ]
    assert lines[7:] == ["", "This run met 1 of 2 numeric targets, 1 missed, 1 text targets unchecked, "
                             "2 information rows."]


def test_retired_targets_never_count_as_missed(monkeypatch):
    rows = [numeric_row("fast", 5.0, at_least=2),
            numeric_row("workers", 0.2, at_least=1.6, info="was >= 1.6x; two workers share 2 cores"),
            numeric_row("cold", 9.0, at_most=4, info="was <= 4x; compile time")]
    assert [bench_cmd.verdict(r) for r in rows] == ["met", "info", "info"]
    assert bench_cmd.target_text(rows[2]) == "info: was <= 4x; compile time"
    monkeypatch.setattr(bench_cmd, "load_peer_modules", fake_modules({"area": rows}))
    result = CliRunner().invoke(main, ["bench", "--check", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["verdict"] for r in json.loads(result.stdout)] == ["met", "info", "info"]
    assert "missed" not in result.stderr
    assert "check: met 1 of 1 numeric targets, 2 information rows" in result.stderr


def test_only_an_unknown_area_exits_2_naming_the_areas():
    result = CliRunner().invoke(main, ["bench", "--only", "bogus"])
    assert result.exit_code == 2
    areas = sorted(p.stem.removeprefix("peers_") for p in (ROOT / "bench").glob("peers_*.py"))
    assert "byte_bpe" in areas and "torch" in areas
    assert f"error: --only 'bogus': expected one of {', '.join(areas)}" in result.stderr
    assert result.stdout == ""
    mixed = CliRunner().invoke(main, ["bench", "--only", "windows", "--only", "nope", "--json"])
    assert mixed.exit_code == 2 and "--only 'nope'" in mixed.stderr and mixed.stdout == ""


def test_target_text_is_derived_from_the_numbers():
    text = bench_cmd.target_text
    assert text({"at_least": 20}) == ">= 20x"
    assert text({"at_least": 0.5, "note": "of fill bandwidth"}) == ">= 0.5x (of fill bandwidth)"
    assert text({"at_most": 1.5, "note": "peak RSS ratio"}) == "<= 1.5x (peak RSS ratio)"
    assert text({"engine_under_s": 1.0}) == "engine < 1 s"
    assert text({"at_least": 2, "at_most": 8}) == ">= 2x, <= 8x"
    assert text({"target": ">= 3x (legacy)"}) == ">= 3x (legacy)"
    assert text({"at_least": None, "note": "only a note"}) == ""


def test_timing_row_builds_numeric_targets():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from timing import row
    finally:
        sys.path.remove(str(ROOT / "bench"))
    built = row("b", 0.5, "p", 2.0, at_least=3, note="n")
    assert built == {"benchmark": "b", "engine_s": 0.5, "peer": "p", "peer_s": 2.0, "ratio": 4.0, "at_least": 3,
                     "at_most": None, "engine_under_s": None, "note": "n", "target": ">= 3x (n)"}
    assert row("b", 2.0, "p", 1.0, ratio=12.0, at_most=15, extra_mb=3)["ratio"] == 12.0
    assert row("b", 2.0, "p", 1.0, at_most=15, extra_mb=3)["extra_mb"] == 3


def test_verdicts():
    assert bench_cmd.verdict(numeric_row("x", 3.0, at_least=3)) == "met"
    assert bench_cmd.verdict(numeric_row("x", 2.99, at_least=3)) == "missed"
    assert bench_cmd.verdict(numeric_row("x", 16.0, at_most=15)) == "missed"
    assert bench_cmd.verdict(numeric_row("x", 0.1, engine_under_s=0.001)) == "missed"  # engine_s is 0.002
    assert bench_cmd.verdict(numeric_row("x", 0.1, engine_under_s=1)) == "met"
    assert bench_cmd.verdict(numeric_row("x", 5.0, target=">= 2x")) == "unchecked"
    assert bench_cmd.verdict(numeric_row("x", 5.0)) == "info"  # no target: information
    assert bench_cmd.verdict(numeric_row("x", 0.1, at_least=3, info="retired")) == "info"


def test_check_exits_1_and_lists_the_missed_targets(monkeypatch):
    rows = [numeric_row("fast", 5.0, at_least=2), numeric_row("slow", 1.5, at_least=2),
            numeric_row("legacy", 9.0, target=">= 100x"), numeric_row("info", 1.0)]
    monkeypatch.setattr(bench_cmd, "load_peer_modules", fake_modules({"area": rows}))
    runner = CliRunner()
    result = runner.invoke(main, ["bench", "--check"])
    assert result.exit_code == 1, result.output
    assert "missed: area: slow vs peer: ratio 1.50x, engine 2.0 ms; target >= 2x" in result.stderr
    assert "fast" not in result.stderr
    assert "unchecked (text target '>= 100x'): area: legacy vs peer" in result.stderr
    assert "check: met 1 of 2 numeric targets, 1 missed, 1 text targets unchecked, 1 information rows" \
        in result.stderr
    assert ">= 100x" in result.stdout  # a text target is shown as it is
    assert runner.invoke(main, ["bench"]).exit_code == 0  # without --check a miss is only shown


def test_check_passes_when_every_numeric_target_is_met(monkeypatch):
    rows = [numeric_row("fast", 5.0, at_least=2), numeric_row("legacy", 1.0, target="text")]
    monkeypatch.setattr(bench_cmd, "load_peer_modules", fake_modules({"area": rows}))
    result = CliRunner().invoke(main, ["bench", "--check", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["verdict"] for r in json.loads(result.stdout)] == ["met", "unchecked"]
    assert "check: met 1 of 1 numeric targets, 1 text targets unchecked" in result.stderr


def test_a_failing_area_prints_the_others_and_exits_1(monkeypatch):
    monkeypatch.setattr(bench_cmd, "load_peer_modules", fake_modules(
        {"broken": broken, "good": [numeric_row("thing", 5.0, at_least=2)]}))
    result = CliRunner().invoke(main, ["bench", "--markdown"])
    assert result.exit_code == 1
    assert "broken: failed: RuntimeError: peer exploded" in result.stderr
    assert "bench: 1 area(s) failed: broken" in result.stderr
    assert "| good | thing |" in result.stdout


def test_bench_finds_every_peer_module():
    areas = [area for area, _ in bench_cmd.load_peer_modules(("store", "tokenizers", "byte_bpe", "windows", "packing"))]
    assert areas == ["byte_bpe", "packing", "store", "tokenizers", "windows"]
    for _, module in bench_cmd.load_peer_modules(("windows",)):
        assert callable(module.rows)


def test_bench_modules_never_import_the_test_suite(tmp_path):
    """Every bench/*.py imports with ``tests`` unimportable (a package that raises on import)."""
    blocker = tmp_path / "tests"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('bench must not import tests')\n")
    names = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "conftest")
    if importlib.util.find_spec("torch") is None:  # without the torch extra, leave out what imports it
        needs_torch = re.compile(r"^(import torch|from torch|import peers_torch|from peers_torch)", re.M)
        names = [name for name in names
                 if not needs_torch.search((ROOT / "bench" / f"{name}.py").read_text(encoding="utf-8"))]
    code = (  # a module that skips itself for a missing extra (pytest.importorskip) counts as imported
        "import importlib, sys\n"
        "from _pytest.outcomes import Skipped\n"
        f"sys.path[:0] = [{str(tmp_path)!r}, {str(ROOT / 'bench')!r}, {str(ROOT)!r}]\n"
        f"for name in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Skipped:\n"
        "        pass\n"
        "assert 'tests' not in sys.modules or sys.modules['tests'].__file__.startswith("
        f"{str(tmp_path)!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    for path in (ROOT / "bench").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "from tests" not in text and "import tests" not in text, path.name


def test_the_retired_rows_say_why_in_one_line():
    """The cold-start rows and the two-worker DataLoader rows are information: each module names the
    retired target and the reason in one line, and a row built with it is never checked."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from timing import row
    finally:
        sys.path.remove(str(ROOT / "bench"))
    for area, name, was in (("cold_start", "INFO", "was <= 4x"), ("torch", "WORKERS_INFO", "was >= 1.6x")):
        if area == "torch":
            pytest.importorskip("torch", reason="the torch extra is not installed")
        (_, module), = bench_cmd.load_peer_modules((area,))
        reason = getattr(module, name)
        assert was in reason and "\n" not in reason and len(reason) < 200
        built = row("b", 1.0, "p", 9.0, info=reason)
        assert bench_cmd.verdict(built) == "info" and built["target"] == f"info: {reason}"
