"""``engine bench``: side-by-side peer comparisons, one table of ratios.

Each area keeps a ``bench/peers_<area>.py`` with ``rows(quick) -> list[dict]`` that times engine
and its peers in the same run; this command gathers them. Peers that are not installed (the
``bench`` extra: tiktoken, tokenizers, regex; torch optionally) are skipped with a note.

A row's target is numeric: ``at_least`` / ``at_most`` bound its ratio, ``engine_under_s`` bounds
engine's own seconds, ``note`` says what the target is about. ``target_text`` derives the text
shown in the tables from those numbers; ``verdict`` checks them (``engine bench --check``): "met"
or "missed". A row without a target, or one whose target was retired (``info``: the one-line
reason, shown in the target cell), is information ("info") and never counts as missed. A row that
still carries only a free-text ``target`` is shown as it is and reported as unchecked.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path

import click

from engine.commands._options import json_option
from engine.errors import ConfigurationError

TARGET_FIELDS = ("at_least", "at_most", "engine_under_s")


def bench_dir() -> Path:
    path = Path(__file__).resolve().parents[2] / "bench"
    if not path.is_dir():
        raise ConfigurationError(
            f"{path}: benchmark suites not found; `engine bench` runs from a source checkout of engine"
        )
    return path


def load_peer_modules(only: tuple[str, ...] = ()) -> list[tuple[str, object]]:
    """``(area, module)`` of each ``bench/peers_<area>.py`` (only those named in ``only``, when given);
    a name in ``only`` that is no area raises ConfigurationError naming the known ones."""
    root = bench_dir()
    areas = sorted(path.stem.removeprefix("peers_") for path in root.glob("peers_*.py"))
    unknown = [name for name in only if name not in areas]
    if unknown:
        raise ConfigurationError(f"--only {unknown[0]!r}: expected one of {', '.join(areas)}")
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


def has_numeric_target(row: dict) -> bool:
    return not row.get("info") and any(row.get(field) is not None for field in TARGET_FIELDS)


def target_text(row: dict) -> str:
    """The target as shown in the tables: ``info: <reason>`` for a retired one, else derived from the
    numeric fields, else a legacy ``target`` string."""
    if row.get("info"):
        return f"info: {row['info']}"
    if not has_numeric_target(row):
        return str(row.get("target") or "")
    parts = []
    if row.get("at_least") is not None:
        parts.append(f">= {row['at_least']:g}x")
    if row.get("at_most") is not None:
        parts.append(f"<= {row['at_most']:g}x")
    if row.get("engine_under_s") is not None:
        parts.append(f"engine < {row['engine_under_s']:g} s")
    text = ", ".join(parts)
    return f"{text} ({row['note']})" if row.get("note") else text


def verdict(row: dict) -> str:
    """``"met"`` or ``"missed"`` for a numeric target, ``"unchecked"`` for a text-only one, ``"info"``
    for a row without a target or with a retired one (``info``)."""
    if row.get("info"):
        return "info"
    if not has_numeric_target(row):
        return "unchecked" if row.get("target") else "info"
    ratio, engine_s = row["ratio"], row["engine_s"]
    met = (
        (row.get("at_least") is None or ratio >= row["at_least"])
        and (row.get("at_most") is None or ratio <= row["at_most"])
        and (row.get("engine_under_s") is None or engine_s < row["engine_under_s"])
    )
    return "met" if met else "missed"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def _name(row: dict) -> str:
    return f"{row['area']}: {row['benchmark']} vs {row['peer']}"


def summary(rows: list[dict]) -> str:
    """``met N of M numeric targets`` with the missed, unchecked and information rows counted."""
    verdicts = [verdict(row) for row in rows]
    checked, missed = verdicts.count("met") + verdicts.count("missed"), verdicts.count("missed")
    unchecked, info = verdicts.count("unchecked"), verdicts.count("info")
    return (f"met {checked - missed} of {checked} numeric targets"
            f"{f', {missed} missed' if missed else ''}"
            f"{f', {unchecked} text targets unchecked' if unchecked else ''}"
            f"{f', {info} information rows' if info else ''}")


def _report_check(rows: list[dict]) -> bool:
    """Print the targets missed and the rows left unchecked on stderr; True when none was missed."""
    verdicts = [(row, verdict(row)) for row in rows]
    for row in (row for row, v in verdicts if v == "missed"):
        click.echo(f"  missed: {_name(row)}: ratio {row['ratio']:.2f}x, engine {_ms(row['engine_s'])}; "
                   f"target {target_text(row)}", err=True)
    for row in (row for row, v in verdicts if v == "unchecked"):
        click.echo(f"  unchecked (text target {row['target']!r}): {_name(row)}", err=True)
    click.echo(f"check: {summary(rows)}", err=True)
    return not any(v == "missed" for _, v in verdicts)


@click.command("bench")
@click.option("--quick", is_flag=True, help="Smaller inputs: a quick check rather than the published numbers.")
@click.option("--only", multiple=True, metavar="AREA",
              help="Only these areas (store, tokenizers, byte_bpe, windows, packing, ...).")
@json_option
@click.option("--markdown", is_flag=True, help="Print a Markdown table (as in README.md).")
@click.option("--check", is_flag=True, help="Exit 1 when a measured row misses its numeric target (listed on stderr).")
@click.pass_context
def command(ctx: click.Context, quick: bool, only: tuple[str, ...], as_json: bool, markdown: bool,
            check: bool) -> None:
    """Time engine beside the peers people use today and print the ratios.

    Ratio = peer time / engine time (higher is better for engine); `target` is the goal the
    project holds itself to, `verdict` says met / missed (info: a row without a target, or one
    kept for information with the reason its target was retired). Exits 1 when a benchmark area
    fails (the other areas still print) and, with --check, when a row misses its target; exits 2
    for an unknown --only area. Run from a source checkout with the bench extra installed.

    \b
    Example:
      pip install -e '.[bench]'
      engine bench --quick --check
      engine bench --only windows --json
      engine bench --markdown > table.md
    """
    from engine.commands.prepare import format_table

    rows: list[dict] = []
    failed: list[str] = []
    for area, module in load_peer_modules(only):
        try:
            area_rows = module.rows(quick)
        except Exception as exc:  # one failing area must not hide the others
            click.echo(f"{area}: failed: {type(exc).__name__}: {exc}", err=True)
            traceback.print_exc(file=sys.stderr)
            failed.append(area)
            continue
        for row in area_rows:
            rows.append({"area": area, **row, "target": target_text(row)})
    if as_json:
        click.echo(json.dumps([{**r, "verdict": verdict(r)} for r in rows], indent=2))
    elif markdown:
        click.echo("| area | benchmark | engine | peer | peer time | ratio | target | verdict |")
        click.echo("| --- | --- | ---: | --- | ---: | ---: | --- | --- |")
        for r in rows:
            click.echo(
                f"| {r['area']} | {r['benchmark']} | {_ms(r['engine_s'])} | {r['peer']} | {_ms(r['peer_s'])} "
                f"| {r['ratio']:.2f}× | {r['target']} | {verdict(r)} |"
            )
        click.echo(f"\nThis run {summary(rows)}.")
    else:
        table = [
            [r["area"], r["benchmark"], f"{r['engine_s'] * 1e3:.2f}", r["peer"], f"{r['peer_s'] * 1e3:.2f}",
             f"{r['ratio']:.2f}x", r["target"], verdict(r)]
            for r in rows
        ]
        click.echo(format_table(["area", "benchmark", "engine ms", "peer", "peer ms", "ratio", "target", "verdict"],
                                table))
    met = _report_check(rows) if check else True
    if failed:
        click.echo(f"bench: {len(failed)} area(s) failed: {', '.join(failed)}", err=True)
    if failed or not met:
        ctx.exit(1)
