"""numba-cuda kernels for attention masks, position ids and cu_seqlens (SPEC §8), imported lazily.

Each kernel mirrors a CPU kernel in ``engine.kernels.masks`` and gives identical output:

- ``dense_mask_kernel`` / ``additive_mask_kernel``: a 2-D grid-stride loop, x over key columns
  (coalesced writes along a mask row), y over the ``B * L`` query rows. Every element applies the
  rule directly (``j <= i``, same id, both real; a padding query keeps only ``j == i``), so no
  per-row preparation is needed and any segment layout gives the CPU kernel's answer.
  Cost: ``B L^2`` bytes (x4 for additive) written once; ids are read through the cache.
- ``position_ids_kernel``, ``run_count_kernel``, ``run_boundaries_kernel``: one thread per row
  (grid-stride over rows), a serial scan of ``L`` ids each; ``O(B L)``, tiny next to the masks.
  cu_seqlens is built in two launches: runs per row, an exclusive sum of those ``B`` counts on
  the host, then every row writes its run starts at its offset and ``atomic.max`` keeps the
  longest run.

Outputs stay on the device; ``engine.masks`` copies to the host only when asked (``to_host``).
``KERNELS`` lists every kernel's Python function with the signatures it is launched with, so
the tests can compile each one to PTX for a real architecture without a GPU.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, types

THREADS_X = 128
THREADS_Y = 2
THREADS_ROWS = 64
MAX_BLOCKS_Y = 65535


def _dense_mask(segment_ids, out):
    rows, length = segment_ids.shape
    start_x, start_y = cuda.grid(2)
    stride_x, stride_y = cuda.gridsize(2)
    for q in range(start_y, rows * length, stride_y):
        b = q // length
        i = q - b * length
        own = segment_ids[b, i]
        for j in range(start_x, length, stride_x):
            if own < 0:
                out[b, i, j] = j == i
            else:
                out[b, i, j] = j <= i and segment_ids[b, j] == own


def _additive_mask(segment_ids, out):
    rows, length = segment_ids.shape
    blocked = np.float32(-math.inf)
    allowed_value = np.float32(0.0)
    start_x, start_y = cuda.grid(2)
    stride_x, stride_y = cuda.gridsize(2)
    for q in range(start_y, rows * length, stride_y):
        b = q // length
        i = q - b * length
        own = segment_ids[b, i]
        for j in range(start_x, length, stride_x):
            if own < 0:
                allowed = j == i
            else:
                allowed = j <= i and segment_ids[b, j] == own
            out[b, i, j] = allowed_value if allowed else blocked


def _position_ids(segment_ids, out):
    rows, length = segment_ids.shape
    for b in range(cuda.grid(1), rows, cuda.gridsize(1)):
        start = 0
        for i in range(length):
            if i > 0 and segment_ids[b, i] != segment_ids[b, i - 1]:
                start = i
            out[b, i] = 0 if segment_ids[b, i] < 0 else i - start


def _run_count(segment_ids, counts):
    rows, length = segment_ids.shape
    for b in range(cuda.grid(1), rows, cuda.gridsize(1)):
        runs = 0
        for i in range(length):
            if i == 0 or segment_ids[b, i] != segment_ids[b, i - 1]:
                runs += 1
        counts[b] = runs


def _run_boundaries(segment_ids, row_offsets, cu_seqlens, longest):
    rows, length = segment_ids.shape
    for b in range(cuda.grid(1), rows, cuda.gridsize(1)):
        k = row_offsets[b]
        previous = -1
        for i in range(length):
            if i == 0 or segment_ids[b, i] != segment_ids[b, i - 1]:
                if previous >= 0:
                    cuda.atomic.max(longest, 0, np.int32(i - previous))
                cu_seqlens[k] = b * length + i
                k += 1
                previous = i
        if previous >= 0:  # an empty row (L = 0) has no run
            cuda.atomic.max(longest, 0, np.int32(length - previous))
        if b == rows - 1:
            cu_seqlens[k] = rows * length


_SEG = types.int32[:, ::1]
KERNELS = {
    "dense_mask_kernel": (_dense_mask, (_SEG, types.boolean[:, :, ::1])),
    "additive_mask_kernel": (_additive_mask, (_SEG, types.float32[:, :, ::1])),
    "position_ids_kernel": (_position_ids, (_SEG, types.int32[:, ::1])),
    "run_count_kernel": (_run_count, (_SEG, types.int64[::1])),
    "run_boundaries_kernel": (
        _run_boundaries,
        (_SEG, types.int64[::1], types.int32[::1], types.int32[::1]),
    ),
}

dense_mask_kernel = cuda.jit(_dense_mask)
additive_mask_kernel = cuda.jit(_additive_mask)
position_ids_kernel = cuda.jit(_position_ids)
run_count_kernel = cuda.jit(_run_count)
run_boundaries_kernel = cuda.jit(_run_boundaries)


def _grid_2d(rows: int, length: int) -> tuple[tuple[int, int], tuple[int, int]]:
    blocks_x = max(1, min(math.ceil(length / THREADS_X), 32))
    blocks_y = max(1, min(math.ceil(rows / THREADS_Y), MAX_BLOCKS_Y))
    return (blocks_x, blocks_y), (THREADS_X, THREADS_Y)


def _grid_rows(rows: int) -> tuple[int, int]:
    return max(1, math.ceil(rows / THREADS_ROWS)), THREADS_ROWS


def launch_mask(kind: str, segment_ids, out) -> None:
    """Fill device array ``out`` with the dense (bool) or additive (float32) mask of ``segment_ids``."""
    rows, length = segment_ids.shape
    blocks, threads = _grid_2d(rows * length, length)
    kernel = dense_mask_kernel if kind == "dense" else additive_mask_kernel
    kernel[blocks, threads](segment_ids, out)


def launch_position_ids(segment_ids, out) -> None:
    blocks, threads = _grid_rows(segment_ids.shape[0])
    position_ids_kernel[blocks, threads](segment_ids, out)


def launch_cu_seqlens(segment_ids):
    """``(cu_seqlens device int32 [runs + 1], max_seqlen int)`` for device ``segment_ids``."""
    rows = segment_ids.shape[0]
    blocks, threads = _grid_rows(rows)
    counts = cuda.device_array(rows, dtype=np.int64)
    run_count_kernel[blocks, threads](segment_ids, counts)
    host_counts = counts.copy_to_host()
    row_offsets = np.zeros(rows, dtype=np.int64)
    np.cumsum(host_counts[:-1], out=row_offsets[1:])
    if rows == 0:  # no row writes the closing entry: cu_seqlens is [0]
        return cuda.to_device(np.zeros(1, dtype=np.int32)), 0
    cu_seqlens = cuda.device_array(int(host_counts.sum()) + 1, dtype=np.int32)
    longest = cuda.to_device(np.zeros(1, dtype=np.int32))
    run_boundaries_kernel[blocks, threads](segment_ids, cuda.to_device(row_offsets), cu_seqlens, longest)
    return cu_seqlens, int(longest.copy_to_host()[0])
