"""engine bench gathers rows from bench/peers_*.py and prints them; one failing area does not hide the rest."""

import json
import types

from click.testing import CliRunner

import engine.commands.bench as bench_cmd
from engine.cli import main


def fake_modules(only=()):
    good = types.SimpleNamespace(rows=lambda quick: [
        {"benchmark": "thing" + ("-quick" if quick else ""), "engine_s": 0.002, "peer": "peer",
         "peer_s": 0.010, "ratio": 5.0, "target": ">= 2x"}])

    def broken(quick):
        raise RuntimeError("peer exploded")

    mods = [("good", good), ("broken", types.SimpleNamespace(rows=broken))]
    return [m for m in mods if not only or m[0] in only]


def test_bench_json_markdown_and_table(monkeypatch):
    monkeypatch.setattr(bench_cmd, "load_peer_modules", fake_modules)
    runner = CliRunner()
    result = runner.invoke(main, ["bench", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows == [{"area": "good", "benchmark": "thing-quick", "engine_s": 0.002, "peer": "peer",
                     "peer_s": 0.010, "ratio": 5.0, "target": ">= 2x"}]
    assert "broken: failed: RuntimeError: peer exploded" in result.stderr
    md = runner.invoke(main, ["bench", "--markdown", "--only", "good"])
    assert md.exit_code == 0
    assert "| good | thing | 2.0 ms | peer | 10.0 ms | 5.00× | >= 2x |" in md.stdout
    table = runner.invoke(main, ["bench", "--only", "good"])
    assert "5.00x" in table.stdout and "thing" in table.stdout


def test_bench_finds_every_peer_module():
    areas = [area for area, _ in bench_cmd.load_peer_modules(("store", "tokenizers", "byte_bpe", "windows", "packing"))]
    assert areas == ["byte_bpe", "packing", "store", "tokenizers", "windows"]
    for _, module in bench_cmd.load_peer_modules(("windows",)):
        assert callable(module.rows)
