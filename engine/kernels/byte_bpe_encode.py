"""Byte-level BPE encoding: pre-tokenize, look up each piece in a cache, merge on a miss.

Tables (all numpy, built once per tokenizer):

- pair table: open addressing on ``(left_id << 32) | right_id`` -> (merged id, priority). The
  priority is the merge's position in merge order; lower merges first, leftmost on ties.
- token map: token bytes -> id (only for "whole piece first" tokenizers, as tiktoken does).

Per call, a piece cache maps piece bytes (hashed with FNV-1a, compared in place in the input)
to the ids it encoded to, so each distinct piece is merged once per call. A miss merges with a
linear scan of the parts (O(L^2), fastest for the usual short pieces) or, for pieces longer than
``LONG_PIECE``, with a min-heap of (priority, position) over a linked list of parts
(O(L log L)). Cost per byte on a hit: the pre-tokenizer step, a hash step and one compare.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels.pretokenize import piece_end

EMPTY_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)
NO_PRIORITY = np.int64(1 << 62)
LONG_PIECE = 64
MAX_CACHED_PIECE = 256
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, inline="always")
def hash_bytes(buf, start, end):
    h = FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * FNV_PRIME
    return h ^ (h >> np.uint64(29))


@njit(cache=True, nogil=True, inline="always")
def pair_slot(key, mask):
    return np.int64(((key * GOLDEN) >> np.uint64(32)) & np.uint64(mask))


@njit(cache=True, nogil=True)
def build_pair_table(lefts, rights, merged, priorities, keys, values, value_priorities):
    """Insert pairs (first insertion wins for a repeated pair) into empty tables of size 2^k."""
    mask = keys.shape[0] - 1
    for i in range(lefts.shape[0]):
        key = (np.uint64(lefts[i]) << np.uint64(32)) | np.uint64(rights[i])
        slot = pair_slot(key, mask)
        while keys[slot] != EMPTY_KEY and keys[slot] != key:
            slot = (slot + 1) & mask
        if keys[slot] == EMPTY_KEY:
            keys[slot] = key
            values[slot] = merged[i]
            value_priorities[slot] = priorities[i]


@njit(cache=True, nogil=True, inline="always")
def pair_lookup(left, right, keys, mask):
    """Slot of pair (left, right) in the pair table, or -1."""
    key = (np.uint64(left) << np.uint64(32)) | np.uint64(right)
    slot = pair_slot(key, mask)
    while True:
        k = keys[slot]
        if k == key:
            return slot
        if k == EMPTY_KEY:
            return -1
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def build_token_map(pool, offsets, slots):
    """Map token ``t`` (bytes ``pool[offsets[t]:offsets[t+1]]``) into ``slots`` (size 2^k, -1 filled)."""
    mask = slots.shape[0] - 1
    for t in range(offsets.shape[0] - 1):
        if offsets[t + 1] == offsets[t]:
            continue
        slot = np.int64(hash_bytes(pool, offsets[t], offsets[t + 1]) & np.uint64(mask))
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = t


@njit(cache=True, nogil=True)
def token_map_find(buf, start, end, h, pool, offsets, slots):
    """Id of the token whose bytes equal ``buf[start:end]`` (hash ``h``), or -1."""
    mask = slots.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    length = end - start
    while slots[slot] >= 0:
        t = slots[slot]
        if offsets[t + 1] - offsets[t] == length:
            same = True
            base = offsets[t]
            for j in range(length):
                if pool[base + j] != buf[start + j]:
                    same = False
                    break
            if same:
                return t
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def merge_short(buf, start, end, byte_ids, keys, values, priorities, mask, parts, part_priorities, out, out_pos):
    """Lowest-priority-first merging by linear scans; writes the ids at ``out[out_pos:]``."""
    m = end - start
    for i in range(m):
        parts[i] = byte_ids[buf[start + i]]
    for i in range(m - 1):
        slot = pair_lookup(parts[i], parts[i + 1], keys, mask)
        part_priorities[i] = priorities[slot] if slot >= 0 else NO_PRIORITY
    while m > 1:
        best = 0
        best_priority = part_priorities[0]
        for i in range(1, m - 1):
            if part_priorities[i] < best_priority:
                best_priority = part_priorities[i]
                best = i
        if best_priority == NO_PRIORITY:
            break
        parts[best] = values[pair_lookup(parts[best], parts[best + 1], keys, mask)]
        for i in range(best + 1, m - 1):
            parts[i] = parts[i + 1]
            part_priorities[i] = part_priorities[i + 1]
        m -= 1
        if best > 0:
            slot = pair_lookup(parts[best - 1], parts[best], keys, mask)
            part_priorities[best - 1] = priorities[slot] if slot >= 0 else NO_PRIORITY
        if best < m - 1:
            slot = pair_lookup(parts[best], parts[best + 1], keys, mask)
            part_priorities[best] = priorities[slot] if slot >= 0 else NO_PRIORITY
    for i in range(m):
        out[out_pos + i] = parts[i]
    return out_pos + m


@njit(cache=True, nogil=True, inline="always")
def heap_push(heap, size, item):
    i = size
    heap[i] = item
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return size + 1


@njit(cache=True, nogil=True, inline="always")
def heap_pop(heap, size):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[i] <= heap[child]:
            break
        heap[child], heap[i] = heap[i], heap[child]
        i = child
    return top, size


@njit(cache=True, nogil=True)
def merge_long(buf, start, end, byte_ids, keys, values, priorities, mask, out, out_pos):
    """Same result as ``merge_short`` in O(L log L): heap of (priority << 32 | position)."""
    m = end - start
    parts = np.empty(m, dtype=np.int64)
    following = np.empty(m, dtype=np.int64)
    preceding = np.empty(m, dtype=np.int64)
    heap = np.empty(3 * m, dtype=np.int64)
    size = 0
    for i in range(m):
        parts[i] = byte_ids[buf[start + i]]
        following[i] = i + 1 if i + 1 < m else -1
        preceding[i] = i - 1
    for i in range(m - 1):
        slot = pair_lookup(parts[i], parts[i + 1], keys, mask)
        if slot >= 0:
            size = heap_push(heap, size, (priorities[slot] << 32) | i)
    while size > 0:
        item, size = heap_pop(heap, size)
        pos = item & 0xFFFFFFFF
        priority = item >> 32
        right = following[pos]
        if parts[pos] < 0 or right < 0:
            continue
        slot = pair_lookup(parts[pos], parts[right], keys, mask)
        if slot < 0 or priorities[slot] != priority:
            continue
        parts[pos] = values[slot]
        parts[right] = -1
        following[pos] = following[right]
        if following[pos] >= 0:
            preceding[following[pos]] = pos
        left = preceding[pos]
        if left >= 0:
            slot = pair_lookup(parts[left], parts[pos], keys, mask)
            if slot >= 0:
                size = heap_push(heap, size, (priorities[slot] << 32) | left)
        if following[pos] >= 0:
            slot = pair_lookup(parts[pos], parts[following[pos]], keys, mask)
            if slot >= 0:
                size = heap_push(heap, size, (priorities[slot] << 32) | pos)
    i = 0
    while i >= 0:
        out[out_pos] = parts[i]
        out_pos += 1
        i = following[i]
    return out_pos


@njit(cache=True, nogil=True)
def encode_kernel(
    buf, document_offsets, classes, pattern, byte_ids, keys, values, priorities,
    whole_piece_first, token_pool, token_offsets, token_slots, bos, eos, wrap, out, out_offsets,
):
    """Encode every document of ``buf`` into ``out`` (uint32); ``out_offsets[d]`` = start of document d.

    ``out`` needs ``len(buf) + 2 * documents`` entries. With ``wrap`` each document is written as
    ``[bos, ids..., eos]``. Returns the number of ids written.
    """
    n = buf.shape[0]
    mask = keys.shape[0] - 1
    cache_size = 1024
    while cache_size < min(n // 32, 1 << 20):  # distinct pieces are far fewer than bytes / 32
        cache_size <<= 1
    cache_mask = cache_size - 1
    cache_limit = (cache_size * 3) // 4
    cache_start = np.full(cache_size, -1, dtype=np.int64)
    cache_length = np.zeros(cache_size, dtype=np.int64)
    cache_hash = np.zeros(cache_size, dtype=np.uint64)
    cache_value_start = np.zeros(cache_size, dtype=np.int64)
    cache_value_count = np.zeros(cache_size, dtype=np.int64)
    cache_used = 0
    parts = np.empty(LONG_PIECE, dtype=np.int64)
    part_priorities = np.empty(LONG_PIECE, dtype=np.int64)
    out_pos = 0
    for d in range(document_offsets.shape[0] - 1):
        out_offsets[d] = out_pos
        if wrap:
            out[out_pos] = bos
            out_pos += 1
        pos = document_offsets[d]
        end_of_document = document_offsets[d + 1]
        while pos < end_of_document:
            end = piece_end(buf, pos, end_of_document, classes, pattern)
            length = end - pos
            if length == 1:
                out[out_pos] = byte_ids[buf[pos]]
                out_pos += 1
                pos = end
                continue
            cacheable = length <= MAX_CACHED_PIECE
            slot = -1
            h = hash_bytes(buf, pos, end)
            if cacheable:
                slot = np.int64(h & np.uint64(cache_mask))
                found = False
                while cache_start[slot] >= 0:
                    if cache_hash[slot] == h and cache_length[slot] == length:
                        other = cache_start[slot]
                        same = True
                        for j in range(length):
                            if buf[other + j] != buf[pos + j]:
                                same = False
                                break
                        if same:
                            found = True
                            break
                    slot = (slot + 1) & cache_mask
                if found:
                    # the ids of an earlier occurrence are already in ``out``
                    first = cache_value_start[slot]
                    count = cache_value_count[slot]
                    for j in range(count):
                        out[out_pos + j] = out[first + j]
                    out_pos += count
                    pos = end
                    continue
            start_out = out_pos
            token = -1
            if whole_piece_first:
                token = token_map_find(buf, pos, end, h, token_pool, token_offsets, token_slots)
            if token >= 0:
                out[out_pos] = token
                out_pos += 1
            elif length <= LONG_PIECE:
                out_pos = merge_short(buf, pos, end, byte_ids, keys, values, priorities, mask, parts,
                                      part_priorities, out, out_pos)
            else:
                out_pos = merge_long(buf, pos, end, byte_ids, keys, values, priorities, mask, out, out_pos)
            if cacheable and cache_used < cache_limit:
                cache_start[slot] = pos
                cache_length[slot] = length
                cache_hash[slot] = h
                cache_value_start[slot] = start_out
                cache_value_count[slot] = out_pos - start_out
                cache_used += 1
            pos = end
        if wrap:
            out[out_pos] = eos
            out_pos += 1
    out_offsets[document_offsets.shape[0] - 1] = out_pos
    return out_pos
