"""The kernel of the compact type table (``engine.tokenizers.type_table``): interning a batch of types.

A table is a byte ``pool`` holding every distinct type once, in first-appearance order (type ``t`` is
``pool[starts[t]:starts[t + 1]]``), its ``counts`` (int64) and 64-bit ``hashes``, and an open-addressing
index ``slots`` (int64, a power of two long, ``t + 1`` or 0 for free; linear probing on the hash).
``intern_batch`` folds one batch of types (``data[offsets[i]:offsets[i + 1]]`` with ``batch_counts[i]``)
into it: a type seen before adds its count, a new one is appended. The caller makes room first (at
most half the slots used after the batch, the pool and arrays large enough for every batch type new),
so the kernel never allocates. Cost: O(batch bytes) expected.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel

__all__ = ["fnv1a", "intern_batch", "rehash"]

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@kernel
def fnv1a(data, lo, hi):
    """64-bit FNV-1a of ``data[lo:hi]`` (never 0, so that no hash reads as empty)."""
    h = _FNV_OFFSET
    for i in range(lo, hi):
        h = (h ^ np.uint64(data[i])) * _FNV_PRIME
    return h if h != np.uint64(0) else np.uint64(1)


@kernel
def _same(pool, start, end, data, lo, hi):
    if end - start != hi - lo:
        return False
    for k in range(hi - lo):
        if pool[start + k] != data[lo + k]:
            return False
    return True


@kernel
def intern_batch(data, offsets, batch_counts, slots, hashes, pool, starts, counts, used, pool_used):
    """Fold the batch into the table; returns ``(used, pool_used)`` after it (see the module docstring)."""
    mask = slots.shape[0] - 1
    for i in range(offsets.shape[0] - 1):
        lo, hi = offsets[i], offsets[i + 1]
        h = fnv1a(data, lo, hi)
        s = np.int64(h & np.uint64(mask))
        while True:
            t = slots[s] - 1
            if t < 0:
                for k in range(hi - lo):
                    pool[pool_used + k] = data[lo + k]
                starts[used] = pool_used
                pool_used += hi - lo
                starts[used + 1] = pool_used
                hashes[used] = h
                counts[used] = batch_counts[i]
                used += 1
                slots[s] = used
                break
            if hashes[t] == h and _same(pool, starts[t], starts[t + 1], data, lo, hi):
                counts[t] += batch_counts[i]
                break
            s = (s + 1) & mask
    return used, pool_used


@kernel
def rehash(slots, hashes, used):
    """Index the first ``used`` types in the empty ``slots`` (after the table grew)."""
    mask = slots.shape[0] - 1
    for t in range(used):
        s = np.int64(hashes[t] & np.uint64(mask))
        while slots[s] != 0:
            s = (s + 1) & mask
        slots[s] = t + 1
