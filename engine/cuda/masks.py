"""numba-cuda kernels for attention masks, position ids and cu_seqlens, imported lazily.

They follow the attention rule of ``engine.masks``.

Each kernel mirrors a CPU kernel in ``engine.kernels.masks`` and gives identical output:

- ``mask_kernel``: the dense (bool) and additive (float32) masks, one kernel compiled per output
  type (``KERNELS`` names the two ``dense_mask_kernel`` and ``additive_mask_kernel``); a 2-D
  grid-stride loop, x over key columns (coalesced writes along a mask row), y over the ``B * L``
  query rows. Every element applies the
  rule directly (``j <= i``, same id, both real; a padding query keeps only ``j == i``), so no
  per-row preparation is needed and any segment layout gives the CPU kernel's answer.
  Cost: ``B L^2`` bytes (x4 for additive) written once; ids are read through the cache.
- ``position_ids_kernel``, ``run_count_kernel``, ``run_boundaries_kernel``: one thread per row
  (grid-stride over rows), a serial scan of ``L`` ids each; ``O(B L)``, tiny next to the masks.
  cu_seqlens is built in two launches: runs per row, an exclusive sum of those ``B`` counts on
  the host, then every row writes its run starts at its offset and ``atomic.max`` keeps the
  longest run.

Every ``launch_*`` takes ``threads=`` and ``max_blocks=``; the simulator tests pass grids smaller
than the work so every grid-stride loop runs more than once. Outputs stay on the device;
``engine.masks`` copies to the host only when asked (``to_host``).
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
MAX_BLOCKS_X = 32  # of the 2-D mask grid; each block then walks the key columns in strides
MAX_BLOCKS_Y = 65535
MAX_GRID = 2**31 - 1  # the x-dimension limit of a 1-D grid


def _mask(segment_ids, out, allowed_value, blocked_value):
    rows, length = segment_ids.shape
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
            out[b, i, j] = allowed_value if allowed else blocked_value


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
    "dense_mask_kernel": (_mask, (_SEG, types.boolean[:, :, ::1], types.boolean, types.boolean)),
    "additive_mask_kernel": (_mask, (_SEG, types.float32[:, :, ::1], types.float32, types.float32)),
    "position_ids_kernel": (_position_ids, (_SEG, types.int32[:, ::1])),
    "run_count_kernel": (_run_count, (_SEG, types.int64[::1])),
    "run_boundaries_kernel": (
        _run_boundaries,
        (_SEG, types.int64[::1], types.int32[::1], types.int32[::1]),
    ),
}

# One kernel for both masks, compiled once per output type: (allowed, blocked) = (True, False) or (0, -inf).
mask_kernel = cuda.jit(_mask)
MASK_VALUES = {"dense": (True, False), "additive": (np.float32(0.0), np.float32(-math.inf))}
position_ids_kernel = cuda.jit(_position_ids)
run_count_kernel = cuda.jit(_run_count)
run_boundaries_kernel = cuda.jit(_run_boundaries)


def _grid(tasks: int, threads: int, max_blocks: int) -> int:
    """Blocks for ``tasks`` grid-stride tasks at ``threads`` per block, at least 1, at most ``max_blocks``."""
    return max(1, min(math.ceil(tasks / threads), max_blocks))


def launch_mask(kind: str, segment_ids, out, *, threads: tuple[int, int] = (THREADS_X, THREADS_Y),
                max_blocks: tuple[int, int] = (MAX_BLOCKS_X, MAX_BLOCKS_Y)) -> None:
    """Fill device array ``out`` with the dense (bool) or additive (float32) mask of ``segment_ids``:
    ``threads`` (x over key columns, y over query rows) per block, at most ``max_blocks`` blocks
    (the simulator tests pass small ones so both grid-stride loops repeat)."""
    rows, length = segment_ids.shape
    blocks = (_grid(length, threads[0], max_blocks[0]), _grid(rows * length, threads[1], max_blocks[1]))
    mask_kernel[blocks, threads](segment_ids, out, *MASK_VALUES[kind])


def launch_position_ids(segment_ids, out, *, threads: int = THREADS_ROWS, max_blocks: int = MAX_GRID) -> None:
    """Position ids of device ``segment_ids`` into device ``out``; one thread per row, grid-stride."""
    blocks = _grid(segment_ids.shape[0], threads, max_blocks)
    position_ids_kernel[blocks, threads](segment_ids, out)


def launch_cu_seqlens(segment_ids, *, threads: int = THREADS_ROWS, max_blocks: int = MAX_GRID):
    """``(cu_seqlens device int32 [runs + 1], max_seqlen int)`` for device ``segment_ids``."""
    rows = segment_ids.shape[0]
    blocks = _grid(rows, threads, max_blocks)
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
