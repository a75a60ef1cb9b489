"""Packing and masks beside their peers.

- Packing plan: 1M document lengths (log-normal, mean ~500, clipped to 1..8192; 100k in quick
  mode) into rows of 2048 by best-fit decreasing, vs the plain-Python BFD of
  tests/naive_packing.py (bisect over capacity buckets, a heap per bucket; same pieces, same
  tie rule, so both give identical rows, checked before timing). Target: >= 20x, same fill.
- Dense mask [8, 4096, 4096] on CPU from packed rows (sequential packing of the same kind of
  documents) vs ``ndarray.fill`` on a bool array of the same size (bandwidth bound; target
  ratio >= 0.5) and vs numpy broadcasting into a preallocated output
  (``np.equal(s[:, :, None], s[:, None, :], out=m); m &= tril``; target >= 2x).

``rows(quick)`` is what ``engine bench`` prints; bench_packing.py runs the same pairs under
pytest-benchmark.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from engine.masks import attention_mask, mask_buffer
from engine.packing import pack_documents, plan_packing
from timing import best_of  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
ROW_LENGTH = 2048
MASK_SHAPE = (8, 4096)


def naive_module():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests import naive_packing

    return naive_packing


def document_lengths(count: int, seed: int = 0) -> np.ndarray:
    """Log-normal lengths with mean ~500 (sigma 1), clipped to 1..8192, int64."""
    rng = np.random.default_rng(seed)
    return np.clip(np.round(rng.lognormal(np.log(500) - 0.5, 1.0, count)), 1, 8192).astype(np.int64)


def python_bfd(lengths: np.ndarray, row_length: int = ROW_LENGTH):
    naive = naive_module()
    pieces = naive.naive_pieces(lengths.tolist(), row_length)
    placed, rows = naive.naive_bfd([p[2] for p in pieces], row_length)
    return pieces, placed, rows


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
    results = [{
        "benchmark": f"BFD plan, {count // 1000}k documents into rows of {ROW_LENGTH} "
                     f"(fill {plan.fill_efficiency:.4%}, same as peer)",
        "engine_s": engine_s, "peer": "plain-Python BFD (bisect over capacity buckets)",
        "peer_s": peer_s, "ratio": peer_s / engine_s, "target": ">= 20",
    }]

    segment_ids = mask_segments()
    rows_, length = MASK_SHAPE
    out = mask_buffer(rows_, length)  # reused every step, aligned for streaming stores
    tril = np.tril(np.ones((length, length), np.bool_))
    rounds = 3 if quick else 7
    attention_mask(segment_ids, device="cpu", out=out)
    mask_s = best_of(lambda: attention_mask(segment_ids, device="cpu", out=out), rounds)
    fill_s = best_of(lambda: out.fill(False), rounds)
    numpy_s = best_of(lambda: numpy_mask(segment_ids, out, tril), rounds)
    gigabytes = out.nbytes / 1e9
    label = f"dense mask [8, {length}, {length}] CPU ({gigabytes / mask_s:.1f} GB/s)"
    results.append({
        "benchmark": label, "engine_s": mask_s, "peer": f"ndarray.fill same bytes ({gigabytes / fill_s:.1f} GB/s)",
        "peer_s": fill_s, "ratio": fill_s / mask_s, "target": ">= 0.5 of fill bandwidth",
    })
    results.append({
        "benchmark": label, "engine_s": mask_s, "peer": "numpy broadcast into preallocated out",
        "peer_s": numpy_s, "ratio": numpy_s / mask_s, "target": ">= 2",
    })
    return results


if __name__ == "__main__":
    for row in rows(quick="--full" not in sys.argv):
        print(row)
