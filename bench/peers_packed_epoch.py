"""Packed epochs and FlexAttention block masks beside their peers.

- Block mask [8, 8192] on CPU (quick: [2, 4096]) from packed rows, block 128:
  ``engine.torch.block_mask`` (tables by a Numba kernel, then ``BlockMask.from_kv_blocks``)
  vs torch's ``create_block_mask`` with the same document-causal ``mask_mod``; the two masks are
  checked equal field by field first. Target: >= 100x.
- Packed ``batch(k)``, B = 8, L = 4096, from a shuffled ``PackedEpoch`` of log-normal documents
  vs the same rows built as Hugging Face's ``DataCollatorWithFlattening`` builds its batches: a
  Python loop over the examples extending lists of input ids, labels and position ids, then one
  array per field (given the same plan, so only the row building is timed; equal output checked).
  Target: >= 20x.
- Row materialisation bandwidth: 64 rows of 4096 (17 bytes per position written: inputs,
  targets, segment ids, position ids, loss weights) into preallocated buffers vs ``np.copyto`` of
  the same number of bytes. Target: >= 0.5 of memcpy bandwidth.

``rows(quick)`` is what ``engine bench`` prints.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from engine import BatchOrder, MiniBatchConfig
from engine.packed import PackedEpoch
from timing import best_of, row  # noqa: E402

ROW_LENGTH = 4096
BATCH = 8


def packed_epoch(documents: int = 20_000, batch_size: int = BATCH, seed: int = 0) -> PackedEpoch:
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(500) - 0.5, 1.0, documents)), 1, 8192).astype(np.int64)
    offsets = np.zeros(documents + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 50_000, size=int(offsets[-1])).astype(np.uint32)
    ids = [f"doc-{d}" for d in range(documents)]
    return PackedEpoch.build((values, offsets, ids), "train", row_length=ROW_LENGTH,
                             batches=MiniBatchConfig(batch_size, BatchOrder.shuffled(seed)))


def flattening_collator(epoch: PackedEpoch, k: int) -> tuple[np.ndarray, ...]:
    """Batch k the way DataCollatorWithFlattening-style code builds it: per example, extend lists."""
    lo, hi = epoch.batch_rows(k)
    plan = epoch.plan
    fields = {name: [] for name in ("inputs", "targets", "segment_ids", "position_ids", "loss_weights")}
    for slot in range(lo, hi):
        row = int(epoch.row_order[slot])
        inputs, targets, segments, positions, weights = [], [], [], [], []
        pieces = epoch._row_pieces[epoch._row_first[row]:epoch._row_first[row + 1]].tolist()
        for segment, p in enumerate(pieces):
            start = int(epoch.offsets[plan.piece_document[p]] + plan.piece_source_start[p])
            n = int(plan.piece_length[p])
            tokens = epoch.values[start : start + n + 1].tolist()
            inputs += tokens[:-1]
            targets += tokens[1:]
            segments += [segment] * n
            positions += list(range(n))
            weights += [1] * n
        pad = epoch.row_length - len(inputs)
        for name, values, fill in ((("inputs", inputs, 0)), ("targets", targets, 0), ("segment_ids", segments, -1),
                                   ("position_ids", positions, 0), ("loss_weights", weights, 0)):
            fields[name].append(values + [fill] * pad)
    return (np.array(fields["inputs"], np.uint32), np.array(fields["targets"], np.uint32),
            np.array(fields["segment_ids"], np.int32), np.array(fields["position_ids"], np.int32),
            np.array(fields["loss_weights"], np.uint8))


def block_mask_rows(quick: bool) -> list[dict]:
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask
    except ImportError:
        return []
    from engine.torch import block_mask, document_causal_mask_mod

    rows, length = (2, 4096) if quick else (8, 8192)
    epoch = packed_epoch(documents=4_000)
    batch = epoch.materialise(0, rows)
    padded = np.full((rows, length), -1, np.int32)
    padded[:, :ROW_LENGTH] = batch.segment_ids
    if length > ROW_LENGTH:  # longer rows: a second packed row's segments after the first
        shifted = epoch.materialise(rows, 2 * rows).segment_ids
        padded[:, ROW_LENGTH:] = np.where(shifted >= 0, shifted + 1000, -1)
    mod = document_causal_mask_mod(torch.from_numpy(padded))
    start = time.perf_counter()
    reference = create_block_mask(mod, rows, 1, length, length, device="cpu")
    peer_s = time.perf_counter() - start
    mine = block_mask(padded)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                 "q_indices", "full_q_num_blocks", "full_q_indices"):
        if not torch.equal(getattr(mine, name), getattr(reference, name)):
            raise RuntimeError(f"block_mask and create_block_mask disagree on {name}")
    engine_s = best_of(lambda: block_mask(padded), 5, warmup=True)
    return [row(f"FlexAttention BlockMask [{rows}, {length}] CPU, block 128 (equal field by field)",
                engine_s, "torch create_block_mask", peer_s, at_least=100)]


def rows(quick: bool) -> list[dict]:
    results = block_mask_rows(quick)
    epoch = packed_epoch()
    k = epoch.batch_count // 2
    reference = flattening_collator(epoch, k)
    batch = epoch.batch(k)
    for name, expected in zip(("inputs", "targets", "segment_ids", "position_ids", "loss_weights"), reference):
        if not np.array_equal(getattr(batch, name), expected):
            raise RuntimeError(f"packed batch and the flattening loop disagree on {name}")
    rounds = 5 if quick else 20
    out = tuple(np.empty((BATCH, ROW_LENGTH), a.dtype) for a in reference)
    engine_s = best_of(lambda: epoch.batch(k, out=out), rounds, warmup=True)
    peer_s = best_of(lambda: flattening_collator(epoch, k), 3 if quick else 5)
    results.append(row(f"packed batch(k), B={BATCH}, L={ROW_LENGTH}, shuffled bfd epoch", engine_s,
                       "DataCollatorWithFlattening-style Python loop", peer_s, at_least=20))

    wide = packed_epoch(batch_size=64)
    buffers = tuple(np.empty((64, ROW_LENGTH), a.dtype) for a in reference)
    nbytes = sum(b.nbytes for b in buffers)
    source, target = np.ones(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
    fill_s = best_of(lambda: wide.batch(1, out=buffers), rounds, warmup=True)
    copy_s = best_of(lambda: np.copyto(target, source), rounds, warmup=True)
    results.append(row(f"packed rows materialised, 64 x {ROW_LENGTH} ({nbytes / fill_s / 1e9:.1f} GB/s)", fill_s,
                       f"np.copyto same bytes ({nbytes / copy_s / 1e9:.1f} GB/s)", copy_s, at_least=0.5,
                       note="of memcpy bandwidth"))
    return results


if __name__ == "__main__":
    for result in rows(quick="--full" not in sys.argv):
        print(result)
