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
from engine.kernels.pretokenize import ascii_table, scan_pieces

__all__ = [
    "EMPTY_KEY", "LONG_WORD", "hash_span", "same_span", "key_slot", "find_span", "build_pair_table", "merge_word",
    "encode_words", "scatter_documents", "map_symbols", "piece_key", "build_piece_table",
    "self_merging_tokens", "encode_bytes",
]

EMPTY_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)
NO_PRIORITY = np.int64(1 << 62)
# Above this many symbols a word is merged with the heap (O(L log L)); below, the scan is faster.
LONG_WORD = 64
MAX_CACHED_PIECE = 256
# Pieces of up to this many bytes are their own key (see piece_key).
SHORT_PIECE = 7
# Pieces cut ahead per scan in encode_bytes (their ends stay in the L1/L2 cache).
PIECE_BLOCK = 1024
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
    size = 0
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
def _word_at(buf, i, count):
    """``count`` (at most 8) bytes from ``buf[i]`` as a little-endian uint64; eight fixed loads when they
    all lie inside ``buf`` (no branches on the count), else a loop."""
    if i + 8 <= buf.shape[0]:
        word = (np.uint64(buf[i]) | (np.uint64(buf[i + 1]) << np.uint64(8))
                | (np.uint64(buf[i + 2]) << np.uint64(16)) | (np.uint64(buf[i + 3]) << np.uint64(24))
                | (np.uint64(buf[i + 4]) << np.uint64(32)) | (np.uint64(buf[i + 5]) << np.uint64(40))
                | (np.uint64(buf[i + 6]) << np.uint64(48)) | (np.uint64(buf[i + 7]) << np.uint64(56)))
        if count >= 8:
            return word
        return word & ((np.uint64(1) << np.uint64(8 * count)) - np.uint64(1))
    word = np.uint64(0)
    for j in range(count):
        word |= np.uint64(buf[i + j]) << np.uint64(8 * j)
    return word


@njit(cache=True, nogil=True, inline="always")
def piece_key(buf, start, length):
    """64-bit key of ``buf[start:start + length]`` (``length >= 1``), never 0.

    Up to ``SHORT_PIECE`` bytes the key is the bytes themselves with the length in the top byte,
    so equal keys mean equal pieces. Longer pieces hash 8 bytes at a time, with
    ``min(length, 255)`` in the top byte; equal keys then still need a comparison of the bytes.
    """
    if length <= SHORT_PIECE:
        return _word_at(buf, start, length) | (np.uint64(length) << np.uint64(56))
    h = FNV_OFFSET
    i = 0
    while i < length:
        h = (h ^ _word_at(buf, start + i, min(8, length - i))) * GOLDEN
        h ^= h >> np.uint64(29)
        i += 8
    return (h >> np.uint64(8)) | (np.uint64(min(length, 255)) << np.uint64(56))


@njit(cache=True, nogil=True, inline="always")
def key_home(key, mask):
    return np.int64((key * GOLDEN) >> np.uint64(40)) & mask


@njit(cache=True, nogil=True)
def build_piece_table(pool, offsets, wanted, table):
    """Put token ``t`` (bytes ``pool[offsets[t]:offsets[t+1]]``) for every ``wanted[t]`` into ``table``
    (uint64 ``(2^k, 2)``, zero filled): open addressing by ``piece_key`` of the bytes, row ``(key, t)``."""
    mask = table.shape[0] - 1
    for t in range(offsets.shape[0] - 1):
        if not wanted[t]:
            continue
        key = piece_key(pool, offsets[t], offsets[t + 1] - offsets[t])
        slot = key_home(key, mask)
        while table[slot, 0] != 0:
            slot = (slot + 1) & mask
        table[slot, 0] = key
        table[slot, 1] = t


@njit(cache=True, nogil=True, inline="always")
def find_piece(buf, start, length, key, table, pool, offsets):
    """Token of the piece ``buf[start:start + length]`` (key ``key``) in a ``build_piece_table`` table, or -1."""
    mask = table.shape[0] - 1
    slot = key_home(key, mask)
    while True:
        k = table[slot, 0]
        if k == key:
            t = np.int64(table[slot, 1])
            if length <= SHORT_PIECE or (offsets[t + 1] - offsets[t] == length
                                         and same_span(pool, offsets[t], buf, start, length)):
                return t
        elif k == 0:
            return -1
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def self_merging_tokens(pool, offsets, byte_ids, keys, heads, nexts, lefts, rights, made, priorities):
    """bool per token: its bytes (two or more) merge, by the byte-level rule, into exactly that token.

    A piece equal to such a token encodes as that token, so the encoder may look it up directly.
    """
    n = offsets.shape[0] - 1
    wanted = np.zeros(n, dtype=np.bool_)
    longest = 1
    for t in range(n):
        longest = max(longest, offsets[t + 1] - offsets[t])
    parts = np.empty(longest, dtype=np.int64)
    part_priority = np.empty(LONG_WORD, dtype=np.int64)
    for t in range(n):
        length = offsets[t + 1] - offsets[t]
        if length < 2:
            continue
        for i in range(length):
            parts[i] = byte_ids[pool[offsets[t] + i]]
        m = merge_word(parts, length, LONG_WORD, False, keys, heads, nexts, lefts, rights, made, priorities,
                       part_priority)
        wanted[t] = m == 1 and parts[0] == t
    return wanted


@njit(cache=True, nogil=True)
def _encode_miss(buf, pos, length, key, slot, byte_ids, keys, heads, nexts, lefts, rights, made, priorities, parts,
                 part_priority, out, out_pos, cache, cache_used):
    """Merge a piece found in neither table, write its ids at ``out[out_pos:]`` and remember them in the cache
    (at ``slot``, the free slot its probe ended on) when it is short enough; returns ``(out_pos, cache_used)``."""
    if length > LONG_WORD:
        parts = np.empty(length, dtype=np.int64)
    for i in range(length):
        parts[i] = byte_ids[buf[pos + i]]
    m = merge_word(parts, length, LONG_WORD, False, keys, heads, nexts, lefts, rights, made, priorities, part_priority)
    for i in range(m):
        out[out_pos + i] = parts[i]
    if length <= MAX_CACHED_PIECE:
        cache_size = cache.shape[0]
        if cache_used >= (cache_size * 3) // 4:  # evict everything: the cache stays bounded and linear
            for j in range(cache_size):
                cache[j, 0] = 0
            cache_used = 0
            slot = key_home(key, cache_size - 1)
        cache[slot, 0] = key
        cache[slot, 1] = pos
        cache[slot, 2] = out_pos
        cache[slot, 3] = m
        cache_used += 1
    return out_pos + m, cache_used


@njit(cache=True, nogil=True)
def encode_bytes(
    buf, document_offsets, classes, pattern, byte_ids, keys, heads, nexts, lefts, rights, made, priorities,
    token_table, token_pool, token_offsets, cache_limit, bos, eos, wrap, out, out_offsets,
):
    """Encode every document of ``buf`` into ``out`` (uint32); ``out_offsets[d]`` = start of document d.

    Byte b starts as symbol ``byte_ids[b]``; pieces merge by the byte-level (not ordered) rule. A
    piece found in ``token_table`` (``build_piece_table``) is
    that token; any other piece of up to ``MAX_CACHED_PIECE`` bytes is merged once per call and
    its ids are remembered in a cache of at most ``cache_limit`` slots (a power of two; emptied
    when three quarters full), which points at the ids of the piece's first occurrence in ``out``.
    ``out`` needs ``len(buf) + 2 * documents`` entries; with ``wrap`` each document is
    ``[bos, ids..., eos]``. Returns the number of ids written.

    Pieces are cut ``PIECE_BLOCK`` at a time (``scan_pieces``), then looked up in a loop without
    calls; only a piece to merge leaves it.
    """
    n = buf.shape[0]
    table = ascii_table(classes)
    cache_size = 64
    while cache_size < cache_limit and cache_size < n // 64:  # distinct pieces are far fewer than bytes / 64
        cache_size <<= 1
    cache_mask = cache_size - 1
    # rows (key, piece start in buf, start of its ids in out, number of ids); key 0 = free
    cache = np.zeros((cache_size, 4), dtype=np.uint64)
    cache_used = 0
    parts = np.empty(LONG_WORD, dtype=np.int64)
    part_priority = np.empty(LONG_WORD, dtype=np.int64)
    ends = np.empty(PIECE_BLOCK, dtype=np.int64)
    out_pos = 0
    for d in range(document_offsets.shape[0] - 1):
        out_offsets[d] = out_pos
        if wrap:
            out[out_pos] = bos
            out_pos += 1
        pos = document_offsets[d]
        end_of_document = document_offsets[d + 1]
        while pos < end_of_document:
            count = scan_pieces(buf, pos, end_of_document, classes, table, pattern, ends, 0, PIECE_BLOCK)
            k = 0
            while k < count:
                slot = 0
                key = np.uint64(0)
                while k < count:  # no calls in this loop: it handles the pieces found in the tables
                    end = ends[k]
                    length = end - pos
                    if length == 1:
                        out[out_pos] = byte_ids[buf[pos]]
                        out_pos += 1
                        pos = end
                        k += 1
                        continue
                    key = piece_key(buf, pos, length)
                    token = find_piece(buf, pos, length, key, token_table, token_pool, token_offsets)
                    if token >= 0:
                        out[out_pos] = token
                        out_pos += 1
                        pos = end
                        k += 1
                        continue
                    slot = key_home(key, cache_mask)
                    if length > MAX_CACHED_PIECE:
                        break
                    while cache[slot, 0] != 0:
                        if cache[slot, 0] == key and (length <= SHORT_PIECE
                                                      or same_span(buf, np.int64(cache[slot, 1]), buf, pos, length)):
                            break
                        slot = (slot + 1) & cache_mask
                    if cache[slot, 0] == 0:
                        break
                    first = np.int64(cache[slot, 2])  # the ids of an earlier occurrence are already in ``out``
                    count_ids = np.int64(cache[slot, 3])
                    for j in range(count_ids):
                        out[out_pos + j] = out[first + j]
                    out_pos += count_ids
                    pos = end
                    k += 1
                if k < count:  # piece k is in neither table
                    end = ends[k]
                    out_pos, cache_used = _encode_miss(
                        buf, pos, end - pos, key, slot, byte_ids, keys, heads, nexts, lefts, rights, made, priorities,
                        parts, part_priority, out, out_pos, cache, cache_used)
                    pos = end
                    k += 1
        if wrap:
            out[out_pos] = eos
            out_pos += 1
    out_offsets[document_offsets.shape[0] - 1] = out_pos
    return out_pos
