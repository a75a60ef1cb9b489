"""CPU kernels for attention masks, position ids and variable-length boundaries (SPEC §8).

Rule: query ``i`` may attend key ``j`` iff ``j <= i``, ``seg[i] == seg[j]`` and both are real
(``seg >= 0``); a padding query (``seg == -1``) gets itself as its one fallback key.

Algorithm: ``segment_runs`` makes one pass per row that records where each position's run of
equal ids starts and whether the row is *contiguous* (no real id reappears after another run;
packed rows always are). For a contiguous row the allowed keys of query ``i`` are exactly the
run ``[start(i), i]``. The mask is first filled with "blocked" in one loop (compiled to a
memset-like store: ``ndarray.fill`` bandwidth), then only the allowed spans are written:
cost ``B L^2`` bytes filled plus the allowed entries (``sum n(n+1)/2`` per segment of ``n``),
``O(B L)`` reads. A row that is not contiguous takes the general path (compare ``seg[j]`` for
every ``j <= i``), so the rule above holds for every input. Both passes run on one thread:
they are bound by memory bandwidth and measured no faster split over threads (and slower on a
busy machine). Loops index with unsigned integers so they vectorise.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def segment_runs(segment_ids, run_start, row_contiguous):
    """Per position, the start of its run of equal ids; per row, 1 iff no real id repeats a run.

    segment_ids int32 [B, L]; run_start int32 [B, L] (out); row_contiguous uint8 [B] (out).
    """
    rows, length = segment_ids.shape
    for b in range(rows):
        seg = segment_ids[b]
        starts = run_start[b]
        real_run_ids = np.empty(length, dtype=np.int32)
        runs = 0
        current = 0
        for i in range(length):
            if i == 0 or seg[i] != seg[i - 1]:
                current = i
                if seg[i] >= 0:
                    real_run_ids[runs] = seg[i]
                    runs += 1
            starts[i] = current
        ordered = np.sort(real_run_ids[:runs])
        contiguous = 1
        for k in range(1, runs):
            if ordered[k] == ordered[k - 1]:
                contiguous = 0
                break
        row_contiguous[b] = contiguous


@njit(cache=True, nogil=True)
def _fill(flat, value):
    """flat[:] = value as one loop, which compiles to a single memset-like store (fill bandwidth)."""
    for j in range(np.uint64(0), np.uint64(flat.shape[0])):
        flat[j] = value


@njit(cache=True, nogil=True)
def _allow(segment_ids, run_start, row_contiguous, flat, allowed):
    """Write the allowed keys of every query over a mask already filled with 'blocked'."""
    rows, length = segment_ids.shape
    for q in range(rows * length):
        b = q // length
        i = q - b * length
        base = np.uint64(q * length)
        own = segment_ids[b, i]
        if own < 0:
            flat[base + np.uint64(i)] = allowed
        elif row_contiguous[b]:
            for j in range(base + np.uint64(run_start[b, i]), base + np.uint64(i + 1)):
                flat[j] = allowed
        else:
            for j in range(i + 1):
                if segment_ids[b, j] == own:
                    flat[base + np.uint64(j)] = allowed


@njit(cache=True, nogil=True)
def dense_mask(segment_ids, run_start, row_contiguous, out):
    """Boolean mask ``out[b, i, j]`` (True = may attend); out bool [B, L, L], C-contiguous.

    Two passes: one bulk fill with False (one memset-like loop, as fast as
    ``ndarray.fill``), then only the True spans: for query ``i`` of a contiguous row the keys
    ``run_start(i) .. i``; for a padding query only ``i`` itself.
    """
    flat = out.reshape(-1)
    _fill(flat, False)
    _allow(segment_ids, run_start, row_contiguous, flat, True)


@njit(cache=True, nogil=True)
def additive_mask(segment_ids, run_start, row_contiguous, out):
    """Additive float mask: 0 where allowed, -inf where blocked; out float32 [B, L, L], C-contiguous."""
    flat = out.reshape(-1)
    _fill(flat, np.float32(-np.inf))
    _allow(segment_ids, run_start, row_contiguous, flat, np.float32(0.0))


@njit(cache=True, nogil=True)
def position_ids(segment_ids, out):
    """Position inside its run of equal ids (restarts at 0 per run); padding positions get 0."""
    rows, length = segment_ids.shape
    for b in range(rows):
        seg = segment_ids[b]
        start = 0
        for i in range(length):
            if i > 0 and seg[i] != seg[i - 1]:
                start = i
            out[b, i] = 0 if seg[i] < 0 else i - start


@njit(cache=True, nogil=True)
def run_count(segment_ids):
    """Number of maximal runs of equal ids over all rows (a padding run counts as one)."""
    rows, length = segment_ids.shape
    runs = 0
    for b in range(rows):
        for i in range(length):
            if i == 0 or segment_ids[b, i] != segment_ids[b, i - 1]:
                runs += 1
    return runs


@njit(cache=True, nogil=True)
def run_boundaries(segment_ids, cu_seqlens):
    """Flattened run starts (``b * L + i``) then ``B * L``; returns the longest run. cu int32."""
    rows, length = segment_ids.shape
    k = 0
    longest = 0
    for b in range(rows):
        for i in range(length):
            if i == 0 or segment_ids[b, i] != segment_ids[b, i - 1]:
                if k > 0:
                    longest = max(longest, b * length + i - cu_seqlens[k - 1])
                cu_seqlens[k] = b * length + i
                k += 1
    total = rows * length
    if k > 0:
        longest = max(longest, total - cu_seqlens[k - 1])
    cu_seqlens[k] = total
    return longest
