"""BPE encoding over integer symbols, shared by character-level and byte-level BPE.

A merge table (``build_pair_table``) maps a symbol pair ``(left << 32) | right`` (open
addressing) to a chain of entries in insertion order; entry ``e`` makes symbol ``made[e]`` with
priority ``priorities[e]`` (lower merges first). A word (or pre-tokenizer piece) of symbols is
merged by ``merge_word``: repeatedly the adjacent pair of lowest priority, leftmost on ties, one
occurrence at a time. Two rules for the pairs a merge creates:

- ``ordered`` (character level, SPEC §3: "apply merge k = 0..N-1 in order, each left to right
  without overlap"): a pair created by the merge of priority p takes its first entry of priority
  > p, so a pair that a later merge makes again merges again at that later rank;
- not ordered (byte level, GPT-2 / tiktoken): a pair always takes its first entry.

Up to ``long_word`` symbols a linear scan of the parts is used (O(L^2), fastest for the usual
short words); longer ones keep a linked list and a heap of (priority, position, entry) (O(L log L)),
with identical results.

Drivers: ``encode_words`` merges each distinct word of the character-level word split once, and
``scatter_documents`` writes ``[BOS, pieces of each word occurrence..., EOS]`` per document;
``encode_bytes`` pre-tokenizes UTF-8 bytes, looks each piece up in a per-call cache (FNV-1a
hash, compared in place in the input) and merges it on a miss.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels.heap import heap_pop, heap_push, new_heap
from engine.kernels.pretokenize import piece_end

__all__ = [
    "EMPTY_KEY", "LONG_WORD", "hash_span", "same_span", "key_slot", "find_span", "build_pair_table", "merge_word",
    "encode_words", "scatter_documents", "map_symbols", "build_token_map", "encode_bytes",
]

EMPTY_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)
NO_PRIORITY = np.int64(1 << 62)
# Above this many symbols a word is merged with the heap (O(L log L)); below, the scan is faster.
LONG_WORD = 64
MAX_CACHED_PIECE = 256
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, inline="always")
def hash_span(buf, start, end):
    """FNV-1a of ``buf[start:end]`` (bytes or symbols), with a final mix of the high bits."""
    h = FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * FNV_PRIME
    return h ^ (h >> np.uint64(29))


@njit(cache=True, nogil=True, inline="always")
def same_span(a, a_start, b, b_start, length):
    """``a[a_start:a_start + length]`` equals ``b[b_start:b_start + length]``."""
    for j in range(length):
        if a[a_start + j] != b[b_start + j]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def pair_slot(key, mask):
    return np.int64(((key * GOLDEN) >> np.uint64(32)) & np.uint64(mask))


@njit(cache=True, nogil=True, inline="always")
def key_slot(keys, a, b):
    """``(key, slot)`` of pair (a, b) in the open-addressing table ``keys`` (size 2^k): the slot
    holding the key, or the empty slot where it would go."""
    mask = keys.shape[0] - 1
    key = (np.uint64(a) << np.uint64(32)) | np.uint64(b)
    slot = pair_slot(key, mask)
    while keys[slot] != key and keys[slot] != EMPTY_KEY:
        slot = (slot + 1) & mask
    return key, slot


@njit(cache=True, nogil=True)
def build_pair_table(lefts, rights):
    """Pair table over entries ``lefts[e], rights[e]`` (int64): ``(keys, heads, nexts)``.

    ``keys`` (uint64, size 2^k) hold the pairs, ``heads[slot]`` their first entry and
    ``nexts[e]`` the next entry of the same pair (-1 at the end), in insertion order.
    """
    n = lefts.shape[0]
    size = 16
    while size < 2 * n + 2:
        size <<= 1
    keys = np.full(size, EMPTY_KEY, dtype=np.uint64)
    heads = np.full(size, -1, dtype=np.int64)
    last = np.full(size, -1, dtype=np.int64)
    nexts = np.full(n, -1, dtype=np.int64)
    for e in range(n):
        key, slot = key_slot(keys, lefts[e], rights[e])
        if keys[slot] == key:
            nexts[last[slot]] = e
        else:
            keys[slot] = key
            heads[slot] = e
        last[slot] = e
    return keys, heads, nexts


@njit(cache=True, nogil=True, inline="always")
def _entry(a, b, floor, keys, heads, nexts, priorities):
    """First entry of pair (a, b) with priority >= ``floor``, or -1."""
    _, slot = key_slot(keys, a, b)
    e = heads[slot]  # -1 in an empty slot
    while e >= 0 and priorities[e] < floor:
        e = nexts[e]
    return e


@njit(cache=True, nogil=True, inline="always")
def _merge_short(parts, m, ordered, keys, heads, nexts, made, priorities, part_priority):
    for i in range(m - 1):
        e = _entry(parts[i], parts[i + 1], 0, keys, heads, nexts, priorities)
        part_priority[i] = priorities[e] if e >= 0 else NO_PRIORITY
    while m > 1:
        best = 0
        best_priority = part_priority[0]
        for i in range(1, m - 1):
            if part_priority[i] < best_priority:
                best_priority = part_priority[i]
                best = i
        if best_priority == NO_PRIORITY:
            break
        # The pair's entry of this priority (the first one at or above it, under either rule).
        parts[best] = made[_entry(parts[best], parts[best + 1], best_priority, keys, heads, nexts, priorities)]
        for i in range(best + 1, m - 1):
            parts[i] = parts[i + 1]
            part_priority[i] = part_priority[i + 1]
        m -= 1
        floor = best_priority + 1 if ordered else 0
        for i in range(max(best - 1, 0), min(best + 1, m - 1)):
            e = _entry(parts[i], parts[i + 1], floor, keys, heads, nexts, priorities)
            part_priority[i] = priorities[e] if e >= 0 else NO_PRIORITY
    return m


@njit(cache=True, nogil=True)
def _merge_long(parts, m, ordered, keys, heads, nexts, lefts, rights, made, priorities):
    """Same result as the scan in O(L log L); an entry acts only if its pair is still at its position."""
    following = np.empty(m, dtype=np.int64)
    preceding = np.empty(m, dtype=np.int64)
    heap = new_heap(3 * m)  # m - 1 pairs, then at most 2 per merge
    size = np.int64(0)  # not a literal 0, which would compile heap_push and heap_pop once more
    for i in range(m):
        following[i] = i + 1 if i + 1 < m else -1
        preceding[i] = i - 1
    for i in range(m - 1):
        e = _entry(parts[i], parts[i + 1], 0, keys, heads, nexts, priorities)
        if e >= 0:
            size = heap_push(heap, size, priorities[e], i, e)
    if size == 0:
        return m  # no pair merges: the parts stay as they are
    while size > 0:
        priority, pos, e = heap[0, 0], heap[0, 1], heap[0, 2]
        size = heap_pop(heap, size)
        right = following[pos]
        if parts[pos] < 0 or right < 0 or parts[pos] != lefts[e] or parts[right] != rights[e]:
            continue  # stale: the pair at pos changed since this row was pushed
        parts[pos] = made[e]
        parts[right] = -1
        after = following[right]
        following[pos] = after
        if after >= 0:
            preceding[after] = pos
        floor = priority + 1 if ordered else 0
        for i, j in ((preceding[pos], pos), (pos, after)):  # the two pairs the merge made
            if i < 0 or j < 0:
                continue
            e = _entry(parts[i], parts[j], floor, keys, heads, nexts, priorities)
            if e >= 0:
                size = heap_push(heap, size, priorities[e], i, e)
    kept = 0
    i = 0
    while i >= 0:
        parts[kept] = parts[i]
        kept += 1
        i = following[i]
    return kept


@njit(cache=True, nogil=True, inline="always")
def merge_word(parts, m, long_word, ordered, keys, heads, nexts, lefts, rights, made, priorities, part_priority):
    """Merge the symbols ``parts[:m]`` in place; returns how many remain.

    ``part_priority`` is scratch of at least ``m`` entries when ``m <= long_word``.
    """
    if m > long_word and m > 1:
        return _merge_long(parts, m, ordered, keys, heads, nexts, lefts, rights, made, priorities)
    return _merge_short(parts, m, ordered, keys, heads, nexts, made, priorities, part_priority)


@njit(cache=True, nogil=True)
def map_symbols(cps, char_table):
    """Symbol of each code point via ``char_table`` (int64, -1 = unknown); returns (symbols, first unknown or -1)."""
    out = np.empty(cps.shape[0], dtype=np.int64)
    first_unknown = -1
    limit = char_table.shape[0]
    for i in range(cps.shape[0]):
        c = cps[i]
        s = char_table[c] if c < limit else -1
        if s < 0 and first_unknown < 0:
            first_unknown = i
        out[i] = s
    return out, first_unknown


@njit(cache=True, nogil=True)
def encode_words(word_syms, word_offsets, keys, heads, nexts, lefts, rights, made, priorities, long_word=LONG_WORD):
    """Merge every word in merge order (the ``ordered`` rule); returns (pieces int64 flat, piece offsets int64[d+1])."""
    n_words = word_offsets.shape[0] - 1
    out = np.empty(word_syms.shape[0], dtype=np.int64)
    out_offsets = np.empty(n_words + 1, dtype=np.int64)
    out_offsets[0] = 0
    longest = 0
    for w in range(n_words):
        longest = max(longest, word_offsets[w + 1] - word_offsets[w])
    work = np.empty(longest, dtype=np.int64)
    part_priority = np.empty(min(longest, long_word) + 1, dtype=np.int64)
    used = 0
    for w in range(n_words):
        n = word_offsets[w + 1] - word_offsets[w]
        for i in range(n):
            work[i] = word_syms[word_offsets[w] + i]
        n = merge_word(work, n, long_word, True, keys, heads, nexts, lefts, rights, made, priorities,
                       part_priority)
        for i in range(n):
            out[used + i] = work[i]
        used += n
        out_offsets[w + 1] = used
    return out[:used], out_offsets


@njit(cache=True, nogil=True)
def scatter_documents(word_of_piece, doc_piece_bounds, word_ids, word_id_offsets, bos, eos, wrap):
    """Ids of every document: each piece occurrence expands to its word's ids.

    ``doc_piece_bounds`` int64[D+1] are piece index ranges per document; with ``wrap`` each
    document is ``[bos, ..., eos]``. Returns (values uint32, offsets int64[D+1]).
    """
    n_docs = doc_piece_bounds.shape[0] - 1
    offsets = np.empty(n_docs + 1, dtype=np.int64)
    offsets[0] = 0
    extra = 2 if wrap else 0
    for d in range(n_docs):
        size = extra
        for p in range(doc_piece_bounds[d], doc_piece_bounds[d + 1]):
            w = word_of_piece[p]
            size += word_id_offsets[w + 1] - word_id_offsets[w]
        offsets[d + 1] = offsets[d] + size
    values = np.empty(offsets[n_docs], dtype=np.uint32)
    for d in range(n_docs):
        at = offsets[d]
        if wrap:
            values[at] = bos
            at += 1
        for p in range(doc_piece_bounds[d], doc_piece_bounds[d + 1]):
            w = word_of_piece[p]
            for k in range(word_id_offsets[w], word_id_offsets[w + 1]):
                values[at] = word_ids[k]
                at += 1
        if wrap:
            values[at] = eos
    return values, offsets


@njit(cache=True, nogil=True)
def build_token_map(pool, offsets, slots):
    """Map token ``t`` (bytes ``pool[offsets[t]:offsets[t+1]]``) into ``slots`` (size 2^k, -1 filled)."""
    mask = slots.shape[0] - 1
    for t in range(offsets.shape[0] - 1):
        if offsets[t + 1] == offsets[t]:
            continue
        slot = np.int64(hash_span(pool, offsets[t], offsets[t + 1]) & np.uint64(mask))
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = t


@njit(cache=True, nogil=True)
def find_span(buf, start, end, h, pool, offsets, slots):
    """``(t, slot)``: the entry ``t`` of ``slots`` whose span ``pool[offsets[t]:offsets[t+1]]``
    equals ``buf[start:end]`` (hash ``h``), or ``(-1, the free slot where it would go)``."""
    mask = slots.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    length = end - start
    while slots[slot] >= 0:
        t = slots[slot]
        if offsets[t + 1] - offsets[t] == length and same_span(pool, offsets[t], buf, start, length):
            return t, slot
        slot = (slot + 1) & mask
    return -1, slot


@njit(cache=True, nogil=True, inline="always")
def _merge_piece(buf, pos, length, byte_ids, keys, heads, nexts, lefts, rights, made, priorities, parts, part_priority,
                 out, out_pos):
    """Merge the bytes ``buf[pos:pos + length]`` (byte-level rule) in ``parts``; write the ids at ``out[out_pos:]``."""
    for i in range(length):
        parts[i] = byte_ids[buf[pos + i]]
    m = merge_word(parts, length, LONG_WORD, False, keys, heads, nexts, lefts, rights, made, priorities, part_priority)
    for i in range(m):
        out[out_pos + i] = parts[i]
    return out_pos + m


@njit(cache=True, nogil=True)
def encode_bytes(
    buf, document_offsets, classes, pattern, byte_ids, keys, heads, nexts, lefts, rights, made, priorities,
    whole_piece_first, token_pool, token_offsets, token_slots, bos, eos, wrap, out, out_offsets,
):
    """Encode every document of ``buf`` into ``out`` (uint32); ``out_offsets[d]`` = start of document d.

    Byte b starts as symbol ``byte_ids[b]``; pieces merge by the byte-level (not ordered) rule, and
    with ``whole_piece_first`` a piece that is itself a token is that token (tiktoken). ``out``
    needs ``len(buf) + 2 * documents`` entries; with ``wrap`` each document is ``[bos, ids..., eos]``.
    Returns the number of ids written.
    """
    n = buf.shape[0]
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
    short_parts = np.empty(LONG_WORD, dtype=np.int64)
    part_priority = np.empty(LONG_WORD, dtype=np.int64)
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
            h = hash_span(buf, pos, end)
            if cacheable:
                slot = np.int64(h & np.uint64(cache_mask))
                found = False
                while cache_start[slot] >= 0:
                    if (cache_hash[slot] == h and cache_length[slot] == length
                            and same_span(buf, cache_start[slot], buf, pos, length)):
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
                token, _ = find_span(buf, pos, end, h, token_pool, token_offsets, token_slots)
            if token >= 0:
                out[out_pos] = token
                out_pos += 1
            elif length <= LONG_WORD:
                out_pos = _merge_piece(buf, pos, length, byte_ids, keys, heads, nexts, lefts, rights, made, priorities,
                                       short_parts, part_priority, out, out_pos)
            else:
                out_pos = _merge_piece(buf, pos, length, byte_ids, keys, heads, nexts, lefts, rights, made, priorities,
                                       np.empty(length, dtype=np.int64), part_priority, out, out_pos)
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
