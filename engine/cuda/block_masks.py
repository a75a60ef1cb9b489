"""numba-cuda kernels for FlexAttention block tables (SPEC §8), imported lazily.

They mirror ``engine.kernels.block_masks`` step for step and give identical tables:

- ``block_summaries_kernel``: one thread per (row, block), grid-stride; smallest and largest real
  id of the block and its one id when the block is complete and uniform. ``O(Q)`` per thread.
- ``block_tables_kernel``: one thread per (row, query block), grid-stride; classifies key blocks
  ``0..qb`` from the summaries (comparing ids only for rows whose ids are not monotone), writes the
  partial and full indices ascending, then the remaining block indices ascending. ``O(nk)`` per
  thread for monotone rows.

``KERNELS`` lists each kernel with its launch signature so the tests compile them to PTX.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, types

THREADS = 64
MAX_GRID = 65535
INT32_MAX = np.iinfo(np.int32).max


def _block_summaries(segment_ids, block_size, block_min, block_max, block_uniform):
    rows, length = segment_ids.shape
    blocks = block_min.shape[1]
    for task in range(cuda.grid(1), rows * blocks, cuda.gridsize(1)):
        b = task // blocks
        blk = task - b * blocks
        lo = blk * block_size
        hi = min(lo + block_size, length)
        smallest = INT32_MAX
        largest = -1
        first = segment_ids[b, lo]
        uniform = first >= 0 and hi - lo == block_size
        for i in range(lo, hi):
            s = segment_ids[b, i]
            if s != first:
                uniform = False
            if s >= 0:
                smallest = min(smallest, s)
                largest = max(largest, s)
        block_min[b, blk] = smallest
        block_max[b, blk] = largest
        block_uniform[b, blk] = first if uniform else -1


def _block_tables(segment_ids, block_size, block_min, block_max, block_uniform,
                  kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices):
    # One function without device-function calls, so it compiles to PTX without a GPU present.
    rows, length = segment_ids.shape
    q_blocks = kv_indices.shape[2]
    k_blocks = kv_indices.shape[3]
    for task in range(cuda.grid(1), rows * q_blocks, cuda.gridsize(1)):
        b = task // q_blocks
        qb = task - b * q_blocks
        partial = 0
        full = 0
        qmax = block_max[b, qb]
        qmin = block_min[b, qb]
        q_lo = qb * block_size
        q_hi = min(q_lo + block_size, length)
        for kb in range(min(qb, k_blocks - 1) + 1):
            # 0 = absent, 1 = partial, 2 = full (engine.kernels.block_masks.classify)
            kind = 0
            if kb == qb:
                kind = 2 if block_size == 1 else 1
            else:
                kmax = block_max[b, kb]
                kmin = block_min[b, kb]
                if kmax < 0 or qmax < 0 or kmax < qmin or qmax < kmin:
                    kind = 0
                elif block_uniform[b, kb] >= 0 and block_uniform[b, kb] == block_uniform[b, qb]:
                    kind = 2
                elif kmax == qmin or kmin == qmax:
                    kind = 1
                else:
                    k_lo = kb * block_size
                    for j in range(k_lo, k_lo + block_size):
                        s = segment_ids[b, j]
                        if s < 0 or (j > k_lo and s == segment_ids[b, j - 1]):
                            continue
                        for i in range(q_lo, q_hi):
                            if segment_ids[b, i] == s:
                                kind = 1
                                break
                        if kind == 1:
                            break
            if kind == 1:
                kv_indices[b, 0, qb, partial] = kb
                partial += 1
            elif kind == 2:
                full_kv_indices[b, 0, qb, full] = kb
                full += 1
        kv_num_blocks[b, 0, qb] = partial
        full_kv_num_blocks[b, 0, qb] = full
        # After the chosen blocks (ascending), every other block index ascending.
        a = 0
        w = partial
        f = 0
        wf = full
        for kb in range(k_blocks):
            if a < partial and kv_indices[b, 0, qb, a] == kb:
                a += 1
            else:
                kv_indices[b, 0, qb, w] = kb
                w += 1
            if f < full and full_kv_indices[b, 0, qb, f] == kb:
                f += 1
            else:
                full_kv_indices[b, 0, qb, wf] = kb
                wf += 1


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


def launch_block_tables(segment_ids, block_size: int, threads: int = THREADS, max_grid: int = MAX_GRID):
    """The four tables (device int32 arrays) for device ``segment_ids`` ``[B, L]``: ``threads`` per
    block, at most ``max_grid`` blocks (the simulator tests use 1 and 2 so grid-stride loops repeat)."""
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
    grid = min(grid, max_grid)
    size = np.int64(block_size)
    block_summaries_kernel[grid, per_block](segment_ids, size, block_min, block_max, block_uniform)
    block_tables_kernel[grid, per_block](segment_ids, size, block_min, block_max, block_uniform, *tables)
    return tables

