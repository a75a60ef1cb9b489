"""``engine batches``: the windows and mini-batches of one split of a token store.

``engine batches STORE --split train --context T --stride S --batch-size B [--seed N | --sequential]``
builds the epoch (``MiniBatchEpoch``), prints its window and batch counts and the shapes of the
first and last batch, optionally audits it (``--audit``) and writes its descriptor index
(``--out DIR``, written by ``engine.epoch_index.save_epoch_index``: ``DIR/index-<sha256>.parquet``
and ``DIR/manifest.json``, which names it). ``engine batches show DIR --batch K`` rebuilds batch K from that index
(``engine.epoch_index.load_epoch_index``, which checks the manifest, the index's sha256 and that the
store is the exact one the index was built from) and prints the rows (document ids with control
characters escaped as in ``repr``).

``batches`` is a group whose default subcommand is ``build``: a first argument that is not a
subcommand name is taken as the store (``engine batches build show`` reaches a store named "show").
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.commands._options import json_option, split_option, store_argument
from engine.errors import BatchError, ConfigurationError, StoreError


_IMPLIED_BUILD = "engine.batches.implied_build"  # ctx.meta key: the user typed no "build"


class _StoreOrSubcommand(click.Group):
    """Runs ``build`` when the first argument is not a subcommand name."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["build", *args]
            ctx.meta[_IMPLIED_BUILD] = True
        return super().parse_args(ctx, args)


class _BuildContext(click.Context):
    """``build``'s context: when ``build`` was implied (``engine batches STORE ...``), its usage line,
    ``--help`` and "Try ... --help" name ``engine batches``, the command as the user typed it."""

    @property
    def command_path(self) -> str:
        if self.parent is not None and self.meta.get(_IMPLIED_BUILD):
            return self.parent.command_path
        return super().command_path


class _BuildCommand(click.Command):
    context_class = _BuildContext


@click.group("batches", cls=_StoreOrSubcommand)
def command() -> None:
    """Cut a split of a token store into shuffled mini-batches of causal windows.

    `engine batches STORE ...` is short for `engine batches build STORE ...`.

    \b
    Example:
      engine batches out/store --split train --context 64 --batch-size 32 --seed 7 --audit
      engine batches out/store --context 64 --batch-size 32 --sequential --out out/epoch
      engine batches show out/epoch --batch 3
    """


@command.command("build", cls=_BuildCommand)
@store_argument
@split_option
@click.option("--context", "context_length", type=int, required=True, help="Context length T (tokens per row).")
@click.option("--stride", type=int, default=1, show_default=True, help="Distance S between window starts.")
@click.option("--batch-size", type=int, required=True, help="Rows per batch B (the last batch holds the rest).")
@click.option("--seed", type=int, default=None, help="Shuffle seed, 0..2^64-1 [default: 0].")
@click.option("--sequential", is_flag=True, help="Keep document order instead of shuffling.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the descriptor index and manifest here.")
@click.option("--audit", is_flag=True, help="Check coverage, duplicates, padding, partitions and replay.")
@json_option
def build_command(store_path, split, context_length, stride, batch_size, seed, sequential, out_dir, audit,
                  as_json) -> None:
    """Build the epoch of one split and print its counts and batch shapes.

    \b
    Example:
      engine batches out/store --split train --context 64 --stride 1 --batch-size 32 --seed 7
      engine batches build out/store --context 8 --batch-size 4 --sequential --audit --json
    """
    import numpy as np

    from engine.audit import audit_epoch
    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.epoch_index import epoch_description, save_epoch_index, store_manifest_digest
    from engine.store import TokenStore
    from engine.windows import CausalWindowConfig

    if sequential and seed is not None:
        raise ConfigurationError("--seed and --sequential conflict: pass one of them")
    order = BatchOrder.sequential() if sequential else BatchOrder.shuffled(0 if seed is None else seed)
    windows = CausalWindowConfig(context_length, stride)
    batches = MiniBatchConfig(batch_size, order)
    store_digest = store_manifest_digest(Path(store_path))
    store = TokenStore.open(store_path)
    epoch = MiniBatchEpoch.build(store, split, windows=windows, batches=batches)
    values, offsets = epoch.values, epoch.offsets
    count = epoch.batch_count
    short = int((np.diff(offsets) < windows.context_length + 1).sum())  # documents that give no window
    description = epoch_description(epoch, store, store_digest)
    report = {
        **{key: description[key] for key in ("store", "tokenizer_hash", "store_manifest_sha256", "split")},
        "documents": description["document_count"],
        "tokens": int(values.shape[0]),
        **{key: description[key] for key in ("context_length", "stride", "batch_size", "order", "seed",
                                             "window_count", "batch_count")},
        "first_batch_shape": [epoch.batch_width(0), windows.context_length] if count else None,
        "last_batch_shape": [epoch.batch_width(count - 1), windows.context_length] if count else None,
        "shuffle_state_after": epoch.shuffle_state_after,
        "short_documents": short,
        "warnings": _warnings(split, description["document_count"], epoch.window_count, windows.context_length),
        "audit": None,
        "out": None,
    }
    audit_report = audit_epoch(epoch) if audit else None
    if audit_report is not None:
        report["audit"] = audit_report.to_dict()
    if out_dir is not None:
        if store_manifest_digest(Path(store_path)) != store_digest:
            raise StoreError(f"{store_path}: the store was rewritten while the epoch was built; build it again")
        report["out"] = save_epoch_index(epoch, out_dir, store=store, store_manifest_sha256=store_digest)
    if as_json:  # the warnings are in the JSON ("warnings"), as with prepare --json
        click.echo(json.dumps(report, indent=2))
    else:
        for warning in report["warnings"]:
            click.echo(f"warning: {warning}", err=True)
        click.echo(format_build(report, audit_report))
    if audit_report is not None and not audit_report.ok:
        raise BatchError(f"epoch audit failed: {audit_report.summary()}")


def _warnings(split: str, documents: int, windows: int, context_length: int) -> list[str]:
    """``prepare``'s window warning for the split, or one for a split without documents."""
    from engine.outputs import window_warning

    if not documents:
        return [f"{split}: no complete window: the split holds no documents"]
    line = window_warning(split, documents, windows, context_length)
    return [] if line is None else [line]


def format_build(report: dict, audit_report) -> str:
    order = f"shuffled, seed {report['seed']}" if report["seed"] is not None else "sequential"
    shape = lambda s: "-" if s is None else f"[{s[0]}, {s[1]}]"  # noqa: E731
    lines = [
        f"store        {report['store']} (tokenizer {report['tokenizer_hash'][:12]})",
        f"split        {report['split']}: {report['documents']} documents, {report['tokens']} tokens",
        f"windows      {report['window_count']} (T={report['context_length']}, S={report['stride']})"
        + (f"; {report['short_documents']} document(s) shorter than T + 1 give none" if report["short_documents"] else ""),
        f"batches      {report['batch_count']} of up to {report['batch_size']} rows ({order})",
        f"first batch  {shape(report['first_batch_shape'])}",
        f"last batch   {shape(report['last_batch_shape'])}",
    ]
    if audit_report is not None:
        lines.append(f"audit        {audit_report.summary()}")
    if report["out"] is not None:
        lines.append(f"wrote        {report['out']['index']} and {report['out']['manifest']}")
    return "\n".join(lines)


def _printable(text: str) -> str:
    """``text`` itself when it is printable, else its ``repr`` (newlines and control characters escaped)."""
    return text if text.isprintable() else repr(text)


@command.command("show")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--batch", "k", type=int, required=True, help="Batch index K (0-based).")
@json_option
def show_command(directory: Path, k: int, as_json: bool) -> None:
    """Rebuild batch K from a descriptor index and print its rows with provenance.

    \b
    Example:
      engine batches show out/epoch --batch 0
      engine batches show out/epoch --batch 93 --json
    """
    from engine.epoch_index import load_epoch_index

    index = load_epoch_index(directory)
    index.check_batch(k)
    store = index.open_store()
    result = index.batch(k, store)
    count, split, rows = result["batch_count"], result["split"], result["rows"]
    width, T = result["shape"]
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"batch {k} of {count}: shape [{width}, {T}], {width * T} target tokens, "
               f"{split} split of {_printable(result['store'])}")
    for row in rows:
        click.echo(f"row {row['row']}: {_printable(row['document_id'])} (document {row['document_index']}) @ {row['start']}")
        click.echo(f"  input  {row['input']}")
        click.echo(f"  target {row['target']}")
