"""``engine bench``: side-by-side peer comparisons, one table of ratios.

Each area keeps a ``bench/peers_<area>.py`` with ``rows(quick) -> list[dict]`` that times engine
and its peers in the same run; this command gathers them. Peers that are not installed (the
``bench`` extra: tiktoken, tokenizers, regex; torch optionally) are skipped with a note.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path

import click

from engine.errors import ConfigurationError


def bench_dir() -> Path:
    path = Path(__file__).resolve().parents[2] / "bench"
    if not path.is_dir():
        raise ConfigurationError(
            f"{path}: benchmark suites not found; `engine bench` runs from a source checkout of engine"
        )
    return path


def load_peer_modules(only: tuple[str, ...] = ()) -> list[tuple[str, object]]:
    root = bench_dir()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    modules = []
    for path in sorted(root.glob("peers_*.py")):
        area = path.stem.removeprefix("peers_")
        if only and area not in only:
            continue
        spec = importlib.util.spec_from_file_location(f"engine_bench_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append((area, module))
    return modules


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


@click.command("bench")
@click.option("--quick", is_flag=True, help="Smaller inputs: a quick check rather than the published numbers.")
@click.option("--only", multiple=True, metavar="AREA", help="Only these areas (store, tokenizers, byte_bpe, windows, packing, ...).")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON.")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (as in README.md).")
def command(quick: bool, only: tuple[str, ...], as_json: bool, markdown: bool) -> None:
    """Time engine beside the peers people use today and print the ratios.

    Ratio = peer time / engine time (higher is better for engine); `target` is the goal the
    project holds itself to. Run from a source checkout with the bench extra installed.

    \b
    Example:
      pip install -e '.[bench]'
      engine bench --quick
      engine bench --only windows --json
      engine bench --markdown > table.md
    """
    from engine.commands.prepare import format_table

    rows: list[dict] = []
    for area, module in load_peer_modules(only):
        try:
            area_rows = module.rows(quick)
        except Exception as exc:  # one failing area must not hide the others
            click.echo(f"{area}: failed: {type(exc).__name__}: {exc}", err=True)
            traceback.print_exc(file=sys.stderr)
            continue
        for row in area_rows:
            rows.append({"area": area, **row})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if markdown:
        click.echo("| area | benchmark | engine | peer | peer time | ratio | target |")
        click.echo("| --- | --- | ---: | --- | ---: | ---: | --- |")
        for r in rows:
            click.echo(
                f"| {r['area']} | {r['benchmark']} | {_ms(r['engine_s'])} | {r['peer']} | {_ms(r['peer_s'])} "
                f"| {r['ratio']:.2f}× | {r.get('target', '')} |"
            )
        return
    table = [
        [r["area"], r["benchmark"], f"{r['engine_s'] * 1e3:.2f}", r["peer"], f"{r['peer_s'] * 1e3:.2f}",
         f"{r['ratio']:.2f}x", r.get("target", "")]
        for r in rows
    ]
    click.echo(format_table(["area", "benchmark", "engine ms", "peer", "peer ms", "ratio", "target"], table))
