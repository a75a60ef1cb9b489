"""``engine pack``: pack one split of a token store into rows with segment ids (the packing rules of engine.packing).

``engine pack STORE --split train --row-length L [--strategy bfd|sequential|bos_crop] [--seed S]
[--batch-size B] [--out DIR] [--json]`` writes ``DIR/rows.parquet`` (list columns inputs, targets,
segment_ids, position_ids, loss_weights; one Parquet row per packed row) and
``DIR/segments.parquet`` (provenance), into a temporary directory renamed into place, and prints
rows, segments, fill efficiency and waste (padding share; for bos_crop also the cropped share).
With ``--seed`` the rows are written in the packed epoch's shuffled row order (engine.packed), and
``--batch-size`` reports how many batches of ``B`` rows the epoch holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.batches import BatchOrder, MiniBatchConfig
from engine.commands._options import json_option, split_option, store_argument
from engine.errors import ConfigurationError
from engine.packed import PACKED_STRATEGIES, PackedEpoch
from engine.packing import STRATEGIES, pack_documents, write_packed
from engine.store import TokenStore


@click.command("pack")
@store_argument
@split_option
@click.option("--row-length", "row_length", required=True, type=int, help="Positions per packed row (L).")
@click.option("--strategy", default="bfd", show_default=True,
              type=click.Choice(tuple(dict.fromkeys(STRATEGIES + PACKED_STRATEGIES))),
              help="bfd: best-fit decreasing; sequential: next-fit in document order; bos_crop: every row "
                   "starts at a document start, what does not fit is cropped.")
@click.option("--seed", type=int, default=None,
              help="Shuffle the rows with this seed (the SplitMix64 Fisher-Yates of engine.kernels.shuffle).")
@click.option("--batch-size", "batch_size", type=int, default=None, help="Report batches of B rows.")
@click.option("--buffer-size", "buffer_size", type=int, default=1000, show_default=True,
              help="bos_crop: documents held to choose the best fit from.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Write rows.parquet and segments.parquet here.")
@json_option
def command(store_path: Path, split: str, row_length: int, strategy: str, seed: int | None, batch_size: int | None,
            buffer_size: int, out_dir: Path | None, as_json: bool) -> None:
    """Pack a split of a token store into rows of L input/target positions.

    Documents longer than a row are cut into pieces that overlap by one token, so every
    transition is scored exactly once (bfd, sequential); bos_crop starts every row at a document
    and crops what does not fit. Documents of fewer than 2 tokens are skipped.

    \b
    Example:
      engine pack out/store --split train --row-length 2048
      engine pack out/store --row-length 2048 --seed 1 --batch-size 8 --out out/packed
      engine pack out/store --row-length 2048 --strategy bos_crop --json
    """
    if strategy == "sequential" and seed is not None:
        raise ConfigurationError("--seed applies to --strategy bfd or bos_crop (a packed epoch), not sequential")
    store = TokenStore.open(store_path)
    cropped_share = 0.0
    if strategy == "bos_crop" or seed is not None or batch_size is not None:
        if strategy == "sequential":
            raise ConfigurationError("--batch-size applies to --strategy bfd or bos_crop, not sequential")
        order = BatchOrder.sequential() if seed is None else BatchOrder.shuffled(seed)
        epoch = PackedEpoch.build(store, split, row_length=row_length, strategy=strategy, buffer_size=buffer_size,
                                  batches=MiniBatchConfig(1 if batch_size is None else batch_size, order))
        packed = epoch.materialise()
        cropped_share = epoch.cropped_share
        batches = epoch.batch_count if batch_size is not None else None
    else:
        packed = pack_documents(store, row_length, strategy, split=split)
        batches = None
    if out_dir is not None:
        write_packed(packed, out_dir)
    summary = {
        "split": split,
        "strategy": strategy,
        "row_length": packed.row_length,
        "rows": packed.rows,
        "segments": packed.segments,
        "documents": len(packed.document_ids),
        "skipped_documents": int(packed.skipped_documents.shape[0]),
        "real_positions": packed.real_positions,
        "fill_efficiency": packed.fill_efficiency,
        "waste": 1.0 - packed.fill_efficiency if packed.rows else 0.0,
        "cropped_share": cropped_share,
        "seed": seed,
        "batch_size": batch_size,
        "batches": batches,
        "out": str(out_dir) if out_dir is not None else None,
    }
    if as_json:
        click.echo(json.dumps(summary))
        return
    click.echo(f"rows: {packed.rows} x {packed.row_length}  segments: {packed.segments}  "
               f"documents: {summary['documents']} (skipped, < 2 tokens: {summary['skipped_documents']})")
    click.echo(f"fill efficiency: {packed.fill_efficiency:.4%} ({packed.real_positions} real positions)  "
               f"waste (padding): {summary['waste']:.4%}")
    if strategy == "bos_crop":
        click.echo(f"cropped: {cropped_share:.4%} of the split's transitions are never scored")
    if batches is not None:
        click.echo(f"batches: {batches} of {batch_size} rows" + (f" (seed {seed})" if seed is not None else ""))
    if out_dir is not None:
        click.echo(f"wrote {out_dir}/rows.parquet and segments.parquet")
