"""CPU kernels for FlexAttention block masks from segment ids (SPEC §8).

Rule (as ``engine.kernels.masks``): query ``i`` may attend key ``j`` iff ``j <= i``, same id and
both real (``seg >= 0``); a padding query attends only itself. With block size ``Q`` over both
queries and keys, the block pair ``(qb, kb)`` is *full* when every pair in it is allowed (pairs
past the row's end count as not allowed, as torch pads the mask with False), *partial* when some
but not all are, absent otherwise.

Algorithm: ``block_summaries`` records per block the smallest and largest real id and, when the
block is complete and holds one real id only, that id (``O(B L)``). ``block_tables`` then
classifies every pair with ``kb <= qb`` (a key block after the query block holds no allowed pair):
the diagonal block always holds ``(i, i)`` and is full only for ``Q = 1``; below it, disjoint id
ranges mean absent, two equal uniform ids mean full, touching ranges (``max_k == min_q`` or
``min_k == max_q``) mean partial. Rows whose real run ids rise or fall monotonically (what a
packer writes) are decided by these tests alone; any other row falls back to comparing ids of
the two blocks. Each (row, query block) writes its index row as torch orders it (the stable
descending argsort of the block flags): the partial (or full) key blocks ascending, then every
other key block ascending. Cost ``O(B L + B nq nk)`` for monotone rows, on one thread: the
work is a few microseconds per row, less than waking a thread pool.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INT32_MAX = np.iinfo(np.int32).max


@njit(cache=True, nogil=True)
def block_summaries(segment_ids, block_size, block_min, block_max, block_uniform):
    """Per (row, block): smallest real id (INT32_MAX if none), largest (-1 if none), and the one
    id of a complete block holding one real id only (else -1). Outputs int32 ``[B, nb]``."""
    rows, length = segment_ids.shape
    blocks = block_min.shape[1]
    for task in range(rows * blocks):
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
                if s < smallest:
                    smallest = s
                if s > largest:
                    largest = s
        block_min[b, blk] = smallest
        block_max[b, blk] = largest
        block_uniform[b, blk] = first if uniform else -1


@njit(cache=True, nogil=True)
def classify(segment_ids, b, qb, kb, block_size, block_min, block_max, block_uniform):
    """0 = absent, 1 = partial, 2 = full for block pair (qb, kb) of row b."""
    if kb > qb:
        return 0
    if kb == qb:
        return 2 if block_size == 1 else 1
    kmax = block_max[b, kb]
    qmax = block_max[b, qb]
    if kmax < 0 or qmax < 0:
        return 0
    kmin = block_min[b, kb]
    qmin = block_min[b, qb]
    if kmax < qmin or qmax < kmin:
        return 0
    if block_uniform[b, kb] >= 0 and block_uniform[b, kb] == block_uniform[b, qb]:
        return 2
    if kmax == qmin or kmin == qmax:
        return 1
    length = segment_ids.shape[1]
    q_lo = qb * block_size
    q_hi = min(q_lo + block_size, length)
    k_lo = kb * block_size
    for j in range(k_lo, k_lo + block_size):  # kb < qb: the whole key block lies inside the row
        s = segment_ids[b, j]
        if s < 0 or (j > k_lo and s == segment_ids[b, j - 1]):
            continue
        for i in range(q_lo, q_hi):
            if segment_ids[b, i] == s:
                return 1
    return 0


@njit(cache=True, nogil=True)
def block_tables(segment_ids, block_size, block_min, block_max, block_uniform,
                 kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices):
    """Fill the four tables: counts int32 ``[B, 1, nq]``, indices int32 ``[B, 1, nq, nk]``."""
    rows = segment_ids.shape[0]
    q_blocks = kv_indices.shape[2]
    k_blocks = kv_indices.shape[3]
    for task in range(rows * q_blocks):
        b = task // q_blocks
        qb = task - b * q_blocks
        partial_row = kv_indices[b, 0, qb]
        full_row = full_kv_indices[b, 0, qb]
        partial = 0
        full = 0
        last = min(qb, k_blocks - 1)
        for kb in range(last + 1):
            kind = classify(segment_ids, b, qb, kb, block_size, block_min, block_max, block_uniform)
            if kind == 1:
                partial_row[partial] = kb
                partial += 1
            elif kind == 2:
                full_row[full] = kb
                full += 1
        kv_num_blocks[b, 0, qb] = partial
        full_kv_num_blocks[b, 0, qb] = full
        _fill_rest(partial_row, partial, k_blocks)
        _fill_rest(full_row, full, k_blocks)


@njit(cache=True, nogil=True)
def _fill_rest(row, used, k_blocks):
    """After ``row[:used]`` (ascending), write every other block index ascending."""
    a = 0
    w = used
    for kb in range(k_blocks):
        if a < used and row[a] == kb:
            a += 1
        else:
            row[w] = kb
            w += 1


@njit(cache=True, nogil=True)
def transpose_tables(num_blocks, indices, q_num_blocks, q_indices):
    """The query-side tables ``BlockMask`` also holds: for each (row, key block), the count and the
    query blocks listing it ascending, then every other query block ascending (as torch's
    ``_transpose_ordered`` gives them). In: ``[B, 1, nq]``, ``[B, 1, nq, nk]``; out:
    ``[B, 1, nk]``, ``[B, 1, nk, nq]``. ``O(B nq nk)``."""
    rows = indices.shape[0]
    q_blocks = indices.shape[2]
    k_blocks = indices.shape[3]
    for b in range(rows):
        flags = np.zeros((k_blocks, q_blocks), np.uint8)
        for qb in range(q_blocks):
            for a in range(num_blocks[b, 0, qb]):
                flags[indices[b, 0, qb, a], qb] = 1
        for kb in range(k_blocks):
            column = q_indices[b, 0, kb]
            used = 0
            for qb in range(q_blocks):
                if flags[kb, qb]:
                    column[used] = qb
                    used += 1
            q_num_blocks[b, 0, kb] = used
            w = used
            for qb in range(q_blocks):
                if not flags[kb, qb]:
                    column[w] = qb
                    w += 1
