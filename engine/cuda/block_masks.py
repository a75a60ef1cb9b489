"""numba-cuda kernels for FlexAttention block tables (the block rule of engine.block_masks), imported lazily.

Each thread runs the same per-task function as the CPU kernel in ``engine.kernels.block_masks``
(its ``py_func``, inlined into the CUDA kernel), so both give identical tables:

- ``block_summaries_kernel``: grid-stride over (row, block), ``block_summary`` for each: smallest
  and largest real id of the block and its one id when the block is complete and uniform.
  ``O(Q)`` per task.
- ``block_tables_kernel``: grid-stride over (row, query block), ``block_table_row`` for each:
  classifies key blocks ``0..qb`` from the summaries (comparing ids only for rows whose ids are
  not monotone), writes the partial and full indices ascending, then the remaining block indices
  ascending. ``O(nk)`` per task for monotone rows.

``KERNELS`` lists each kernel with its launch signature so the tests compile them to PTX.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, types

from engine.kernels import block_masks as cpu_kernels

THREADS = 64
MAX_GRID = 65535


# The per-task bodies are the CPU kernels' own functions, inlined into the CUDA kernels (inlining at
# the IR level needs no device to compile for, so KERNELS still compile to PTX without a GPU).
_block_summary = cuda.jit(device=True, inline="always")(cpu_kernels.block_summary.py_func)
_block_table_row = cuda.jit(device=True, inline="always")(cpu_kernels.block_table_row.py_func)


def _block_summaries(segment_ids, block_size, block_min, block_max, block_uniform):
    blocks = block_min.shape[1]
    for task in range(cuda.grid(1), segment_ids.shape[0] * blocks, cuda.gridsize(1)):
        _block_summary(segment_ids, task // blocks, task % blocks, block_size, block_min, block_max, block_uniform)


def _block_tables(segment_ids, block_size, block_min, block_max, block_uniform,
                  kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices):
    q_blocks = kv_indices.shape[2]
    for task in range(cuda.grid(1), segment_ids.shape[0] * q_blocks, cuda.gridsize(1)):
        _block_table_row(segment_ids, task // q_blocks, task % q_blocks, block_size, block_min, block_max,
                         block_uniform, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices)


_SEG = types.int32[:, ::1]
_TABLE2 = types.int32[:, ::1]
_COUNTS = types.int32[:, :, ::1]
_INDICES = types.int32[:, :, :, ::1]
KERNELS = {
    "block_summaries_kernel": (_block_summaries, (_SEG, types.int64, _TABLE2, _TABLE2, _TABLE2)),
    "block_tables_kernel": (
        _block_tables,
        (_SEG, types.int64, _TABLE2, _TABLE2, _TABLE2, _COUNTS, _INDICES, _COUNTS, _INDICES),
    ),
}

block_summaries_kernel = cuda.jit(_block_summaries)
block_tables_kernel = cuda.jit(_block_tables)


def _grid(tasks: int, threads: int) -> tuple[int, int]:
    return max(1, math.ceil(tasks / threads)), threads


def launch_block_tables(segment_ids, block_size: int, *, threads: int = THREADS, max_blocks: int = MAX_GRID):
    """The four tables (device int32 arrays) for device ``segment_ids`` ``[B, L]``: ``threads`` per
    block, at most ``max_blocks`` blocks (the simulator tests use 1 and 2 so grid-stride loops repeat)."""
    rows, length = segment_ids.shape
    blocks = -(-length // block_size)
    tables = (
        cuda.device_array((rows, 1, blocks), np.int32),
        cuda.device_array((rows, 1, blocks, blocks), np.int32),
        cuda.device_array((rows, 1, blocks), np.int32),
        cuda.device_array((rows, 1, blocks, blocks), np.int32),
    )
    if rows == 0 or blocks == 0:
        return tables
    block_min = cuda.device_array((rows, blocks), np.int32)
    block_max = cuda.device_array((rows, blocks), np.int32)
    block_uniform = cuda.device_array((rows, blocks), np.int32)
    grid, per_block = _grid(rows * blocks, threads)
    grid = min(grid, max_blocks)
    size = np.int64(block_size)
    block_summaries_kernel[grid, per_block](segment_ids, size, block_min, block_max, block_uniform)
    block_tables_kernel[grid, per_block](segment_ids, size, block_min, block_max, block_uniform, *tables)
    return tables

