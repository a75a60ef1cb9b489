"""``engine pack``: pack one split of a token store into rows with segment ids (SPEC §8).

``engine pack STORE --split train --row-length L [--strategy bfd|sequential|bos_crop] [--seed S]
[--batch-size B] [--out DIR] [--json]`` writes ``DIR/rows.parquet`` (list columns inputs, targets,
segment_ids, position_ids, loss_weights; one Parquet row per packed row) and
``DIR/segments.parquet`` (provenance), into a temporary directory renamed into place, and prints
rows, segments, fill efficiency and waste (padding share; for bos_crop also the cropped share).
With ``--seed`` the rows are written in the packed epoch's shuffled row order (SPEC §8), and
``--batch-size`` reports how many batches of ``B`` rows the epoch holds.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import click
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.commands._options import store_argument
from engine.errors import ConfigurationError
from engine.batches import BatchOrder, MiniBatchConfig
from engine.packed import PackedEpoch
from engine.packing import STRATEGIES, PackedBatch, pack_documents
from engine.store import TokenStore


def _list_column(rows: np.ndarray) -> pa.LargeListArray:
    """A ``large_list`` column over a ``[rows, L]`` array without copying per row."""
    count, length = rows.shape
    offsets = pa.array(np.arange(count + 1, dtype=np.int64) * length)
    return pa.LargeListArray.from_arrays(offsets, pa.array(rows.reshape(-1)))


PACKED_FILES = ("rows.parquet", "segments.parquet")


def write_packed(packed: PackedBatch, out_dir: Path) -> None:
    """Write rows.parquet and segments.parquet under ``out_dir`` atomically (temp dir, then rename)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigurationError(f"--out {out_dir}: exists and is not a directory")
    if out_dir.is_dir():
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in PACKED_FILES)
        if foreign:
            # Replacing the directory would delete these (a token store, for one): never do that.
            raise ConfigurationError(
                f"--out {out_dir}: holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, not only "
                f"{' and '.join(PACKED_FILES)}; expected a new directory or an earlier `engine pack` output"
            )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        rows = pa.table({
            name: _list_column(getattr(packed, name))
            for name in ("inputs", "targets", "segment_ids", "position_ids", "loss_weights")
        })
        pq.write_table(rows, staging / "rows.parquet")
        segments = pa.table({
            "row": packed.segment_row,
            "segment_id": packed.segment_id,
            "column": packed.segment_column,
            "document_id": pa.array([packed.document_ids[d] for d in packed.segment_document.tolist()], pa.string()),
            "source_start": packed.segment_source_start,
            "length": packed.segment_length,
        })
        pq.write_table(segments, staging / "segments.parquet")
        if out_dir.exists():
            previous = out_dir.with_name(f".{out_dir.name}.previous")
            shutil.rmtree(previous, ignore_errors=True)  # left by a run killed between the two renames
            os.replace(out_dir, previous)
            os.replace(staging, out_dir)
            shutil.rmtree(previous)
        else:
            os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@click.command("pack")
@store_argument
@click.option("--split", default="train", show_default=True, type=click.Choice(["train", "validation", "test"]))
@click.option("--row-length", "row_length", required=True, type=int, help="Positions per packed row (L).")
@click.option("--strategy", default="bfd", show_default=True, type=click.Choice(STRATEGIES + ("bos_crop",)),
              help="bfd: best-fit decreasing; sequential: next-fit in document order; bos_crop: every row "
                   "starts at a document start, what does not fit is cropped.")
@click.option("--seed", type=int, default=None, help="Shuffle the rows with this seed (SPEC §6 Fisher-Yates).")
@click.option("--batch-size", "batch_size", type=int, default=None, help="Report batches of B rows.")
@click.option("--buffer-size", "buffer_size", type=int, default=1000, show_default=True,
              help="bos_crop: documents held to choose the best fit from.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Write rows.parquet and segments.parquet here.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
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
                                  batches=MiniBatchConfig(batch_size or 1, order))
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
