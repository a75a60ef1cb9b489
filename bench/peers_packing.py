"""Packing and masks beside their peers.

- Packing plan: 1M document lengths (log-normal, mean ~500, clipped to 1..8192; 100k in quick
  mode) into rows of 2048 by best-fit decreasing, vs the plain-Python BFD of
  bench/plain_python.py (bisect over capacity buckets, a heap per bucket; same pieces, same
  tie rule, so both give identical rows, checked before timing). Target: >= 20x, same fill.
- Dense mask [8, 4096, 4096] on CPU from packed rows (sequential packing of the same kind of
  documents) vs ``ndarray.fill`` on a bool array of the same size (bandwidth bound; target
  ratio >= 0.5) and vs numpy broadcasting into a preallocated output
  (``np.equal(s[:, :, None], s[:, None, :], out=m); m &= tril``, padding rows set to attend to
  themselves only; the same mask as engine's, checked before timing; target >= 2x).

``rows(quick)`` is what ``engine bench`` prints; bench_packing.py runs the same pairs under
pytest-benchmark.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from engine.masks import attention_mask, mask_buffer
from engine.packing import pack_documents, plan_packing
from plain_python import plan_bfd
from timing import best_of, row


ROW_LENGTH = 2048
MASK_SHAPE = (8, 4096)


def document_lengths(count: int, seed: int = 0) -> np.ndarray:
    """Log-normal lengths with mean ~500 (sigma 1), clipped to 1..8192, int64."""
    rng = np.random.default_rng(seed)
    return np.clip(np.round(rng.lognormal(np.log(500) - 0.5, 1.0, count)), 1, 8192).astype(np.int64)


def python_bfd(lengths: np.ndarray, row_length: int = ROW_LENGTH):
    return plan_bfd(lengths.tolist(), row_length)


def mask_segments(seed: int = 0) -> np.ndarray:
    """segment_ids [8, 4096] of packed rows: log-normal documents, next-fit, padding at row ends."""
    rows, length = MASK_SHAPE
    lengths = document_lengths(200, seed)
    offsets = np.zeros(lengths.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.zeros(int(offsets[-1]), np.uint32)
    packed = pack_documents((values, offsets, [str(i) for i in range(lengths.shape[0])]), length, "sequential")
    return np.ascontiguousarray(packed.segment_ids[:rows])


def numpy_mask(segment_ids: np.ndarray, out: np.ndarray, tril: np.ndarray) -> None:
    np.equal(segment_ids[:, :, None], segment_ids[:, None, :], out=out)
    out &= tril
    batch, query = np.nonzero(segment_ids < 0)  # padding attends to itself only
    out[batch, query, :] = False
    out[batch, query, query] = True


def rows(quick: bool) -> list[dict]:
    count = 100_000 if quick else 1_000_000
    lengths = document_lengths(count)
    plan = plan_packing(lengths, ROW_LENGTH)
    peer_start = time.perf_counter()
    pieces, placed, reference_rows = python_bfd(lengths)
    peer_s = time.perf_counter() - peer_start
    if reference_rows != plan.rows or placed != list(
        zip(plan.piece_row.tolist(), plan.piece_column.tolist(), plan.piece_segment.tolist())
    ):
        raise RuntimeError("engine BFD and the plain-Python BFD disagree")
    engine_s = best_of(lambda: plan_packing(lengths, ROW_LENGTH), 3 if quick else 5)
    results = [row(f"BFD plan, {count // 1000}k documents into rows of {ROW_LENGTH} "
                   f"(fill {plan.fill_efficiency:.4%}, same as peer)",
                   engine_s, "plain-Python BFD (bisect over capacity buckets)", peer_s, at_least=20)]

    segment_ids = mask_segments()
    rows_, length = MASK_SHAPE
    out = mask_buffer(rows_, length)  # reused every step, aligned for streaming stores
    tril = np.tril(np.ones((length, length), np.bool_))
    rounds = 3 if quick else 7
    numpy_mask(segment_ids, out, tril)
    expected = out.copy()
    attention_mask(segment_ids, device="cpu", out=out)
    if not np.array_equal(out, expected):
        raise RuntimeError("engine's dense mask and the numpy mask differ")
    mask_s = best_of(lambda: attention_mask(segment_ids, device="cpu", out=out), rounds)
    fill_s = best_of(lambda: out.fill(False), rounds)
    numpy_s = best_of(lambda: numpy_mask(segment_ids, out, tril), rounds)
    gigabytes = out.nbytes / 1e9
    label = f"dense mask [8, {length}, {length}] CPU ({gigabytes / mask_s:.1f} GB/s)"
    results.append(row(label, mask_s, f"ndarray.fill same bytes ({gigabytes / fill_s:.1f} GB/s)", fill_s,
                       at_least=0.5, note="of fill bandwidth"))
    results.append(row(label, mask_s, "numpy broadcast into preallocated out", numpy_s, at_least=2))
    return results


if __name__ == "__main__":
    for r in rows(quick="--full" not in sys.argv):
        print(r)
