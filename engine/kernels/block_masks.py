"""CPU kernels for FlexAttention block masks from segment ids (the block rule of engine.block_masks).

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

from engine.kernels import kernel

INT32_MAX = np.iinfo(np.int32).max


@kernel(inline="always")
def block_summary(segment_ids, b, blk, block_size, block_min, block_max, block_uniform):
    """Block ``blk`` of row ``b``: its smallest real id (INT32_MAX if none), largest (-1 if none),
    and the one id of a complete block holding one real id only (else -1). ``O(Q)``.

    Self-contained (it calls no other kernel) and inlined into its callers, so
    ``engine.cuda.block_masks`` runs this very function inside its CUDA kernel (inlined there too,
    so the kernels still compile to PTX without a GPU present)."""
    length = segment_ids.shape[1]
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


@kernel(inline="always")
def block_table_row(segment_ids, b, qb, block_size, block_min, block_max, block_uniform,
                    kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices):
    """Query block ``qb`` of row ``b``: classify key blocks ``0..qb`` (0 = absent, 1 = partial,
    2 = full, by the rule in the module docstring), write the counts, the partial and full indices
    ascending, then every other block index ascending. ``O(nk)`` for monotone rows.

    Self-contained like ``block_summary``: the CUDA kernel runs it as a device function."""
    length = segment_ids.shape[1]
    k_blocks = kv_indices.shape[3]
    partial = 0
    full = 0
    qmax = block_max[b, qb]
    qmin = block_min[b, qb]
    q_lo = qb * block_size
    q_hi = min(q_lo + block_size, length)
    for kb in range(min(qb, k_blocks - 1) + 1):
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
                k_lo = kb * block_size  # kb < qb: the whole key block lies inside the row
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


@kernel
def block_summaries(segment_ids, block_size, block_min, block_max, block_uniform):
    """``block_summary`` of every (row, block). Outputs int32 ``[B, nb]``."""
    blocks = block_min.shape[1]
    for task in range(segment_ids.shape[0] * blocks):
        block_summary(segment_ids, task // blocks, task % blocks, block_size, block_min, block_max, block_uniform)


@kernel
def block_tables(segment_ids, block_size, block_min, block_max, block_uniform,
                 kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices):
    """Fill the four tables: counts int32 ``[B, 1, nq]``, indices int32 ``[B, 1, nq, nk]``."""
    q_blocks = kv_indices.shape[2]
    for task in range(segment_ids.shape[0] * q_blocks):
        block_table_row(segment_ids, task // q_blocks, task % q_blocks, block_size, block_min, block_max,
                        block_uniform, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices)


@kernel
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
