"""BPE encoding: merges applied once per distinct word, then scattered to every occurrence.

A merge table maps a symbol pair to the earliest merge of that pair (``merge_next`` chains the
later merges of the same pair: a piece rebuilt by a later merge can make a pair again). Encoding
one word is "apply merge k = 0..N-1 in order, each left to right without overlap", done as:
find the smallest merge rank >= the next rank to apply among the word's adjacent pairs, apply
that merge across the word, continue after it. Merges that occur in no pair of the word cost
nothing, so a short word of L symbols costs at most O(L^2) table look-ups instead of O(N * L).
A word longer than ``LONG_WORD`` symbols (one enormous "word" without spaces) instead keeps its
symbols in a linked list and its pairs in a binary heap keyed by (rank, position): popping the
heap visits each merge's occurrences left to right, exactly as the scan does, and a merge only
looks up the two pairs it creates, so such a word costs O(L log L) and gives identical pieces.

``scatter_documents`` then writes ``[BOS, pieces of each word occurrence..., EOS]`` per document.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["build_merge_table", "encode_words", "scatter_documents", "map_symbols", "LONG_WORD"]

_GOLDEN = -7046029254386353131
# Above this many symbols a word is merged with the heap (O(L log L)); below, the scan is faster.
LONG_WORD = 128


@njit(cache=True, nogil=True)
def _slot(key, mask):
    return ((key * _GOLDEN) >> 20) & mask


@njit(cache=True, nogil=True)
def build_merge_table(merges_left, merges_right, symbol_space):
    """Open-addressing table ``pair key -> first merge rank`` and ``merge_next`` (int64[N])."""
    n = merges_left.shape[0]
    size = 16
    while size < 2 * n + 2:
        size *= 2
    mask = size - 1
    keys = np.full(size, -1, dtype=np.int64)
    ranks = np.empty(size, dtype=np.int64)
    last = np.full(size, -1, dtype=np.int64)
    merge_next = np.full(n, -1, dtype=np.int64)
    for k in range(n):
        key = merges_left[k] * symbol_space + merges_right[k]
        slot = _slot(key, mask)
        while keys[slot] >= 0 and keys[slot] != key:
            slot = (slot + 1) & mask
        if keys[slot] == key:
            merge_next[last[slot]] = k
        else:
            keys[slot] = key
            ranks[slot] = k
        last[slot] = k
    return keys, ranks, merge_next


@njit(cache=True, nogil=True)
def _rank_at_least(keys, ranks, merge_next, symbol_space, a, b, lowest):
    """Smallest merge rank >= ``lowest`` for pair (a, b), or -1."""
    mask = keys.shape[0] - 1
    key = a * symbol_space + b
    slot = _slot(key, mask)
    while True:
        k = keys[slot]
        if k == key:
            r = ranks[slot]
            while r >= 0 and r < lowest:
                r = merge_next[r]
            return r
        if k < 0:
            return -1
        slot = (slot + 1) & mask


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
def _heap_less(heap_rank, heap_pos, a, b):
    return heap_rank[a] < heap_rank[b] or (heap_rank[a] == heap_rank[b] and heap_pos[a] < heap_pos[b])


@njit(cache=True, nogil=True)
def _heap_push(heap_rank, heap_pos, size, rank, pos):
    """Add (rank, pos) to the min-heap of ``size`` entries; returns the new size."""
    i = size
    heap_rank[i] = rank
    heap_pos[i] = pos
    while i > 0:
        parent = (i - 1) >> 1
        if not _heap_less(heap_rank, heap_pos, i, parent):
            break
        heap_rank[i], heap_rank[parent] = heap_rank[parent], heap_rank[i]
        heap_pos[i], heap_pos[parent] = heap_pos[parent], heap_pos[i]
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(heap_rank, heap_pos, size):
    """Drop the minimum (read it from index 0 first); returns the new size."""
    size -= 1
    heap_rank[0] = heap_rank[size]
    heap_pos[0] = heap_pos[size]
    i = 0
    while True:
        smallest = i
        for child in (2 * i + 1, 2 * i + 2):
            if child < size and _heap_less(heap_rank, heap_pos, child, smallest):
                smallest = child
        if smallest == i:
            return size
        heap_rank[i], heap_rank[smallest] = heap_rank[smallest], heap_rank[i]
        heap_pos[i], heap_pos[smallest] = heap_pos[smallest], heap_pos[i]
        i = smallest


@njit(cache=True, nogil=True)
def _merge_long_word(work, n, keys, ranks, merge_next, merges_left, merges_right, merges_new, symbol_space,
                     sym, nxt, prv, heap_rank, heap_pos):
    """The merges of one long word in ``work[:n]`` (in place); returns its piece count.

    Heap entries (rank, position) name the pair that starts at ``position``; an entry is acted on
    only if that pair still is (left, right) of its merge (merged-away symbols are -1). New pairs
    get the smallest rank above the merge just applied, as in the scan, so ranks pop in order and,
    within one rank, positions pop left to right: the scan's non-overlapping left-to-right pass.
    """
    for i in range(n):
        sym[i] = work[i]
        nxt[i] = i + 1
        prv[i] = i - 1
    nxt[n - 1] = -1
    size = 0
    for i in range(n - 1):
        r = _rank_at_least(keys, ranks, merge_next, symbol_space, sym[i], sym[i + 1], 0)
        if r >= 0:
            size = _heap_push(heap_rank, heap_pos, size, r, i)
    while size > 0:
        r = heap_rank[0]
        p = heap_pos[0]
        size = _heap_pop(heap_rank, heap_pos, size)
        q = nxt[p]
        if sym[p] < 0 or q < 0 or sym[p] != merges_left[r] or sym[q] != merges_right[r]:
            continue  # stale: the pair at p changed since this entry was pushed
        sym[p] = merges_new[r]
        sym[q] = -1
        after = nxt[q]
        nxt[p] = after
        if after >= 0:
            prv[after] = p
        before = prv[p]
        if before >= 0:
            r2 = _rank_at_least(keys, ranks, merge_next, symbol_space, sym[before], sym[p], r + 1)
            if r2 >= 0:
                size = _heap_push(heap_rank, heap_pos, size, r2, before)
        if after >= 0:
            r2 = _rank_at_least(keys, ranks, merge_next, symbol_space, sym[p], sym[after], r + 1)
            if r2 >= 0:
                size = _heap_push(heap_rank, heap_pos, size, r2, p)
    kept = 0
    i = 0
    while i >= 0:
        work[kept] = sym[i]
        kept += 1
        i = nxt[i]
    return kept


@njit(cache=True, nogil=True)
def encode_words(word_syms, word_offsets, keys, ranks, merge_next, merges_left, merges_right, merges_new, symbol_space,
                 long_word=LONG_WORD):
    """Apply the merges to every word; returns (pieces int64 flat, piece offsets int64[d+1]).

    Words of more than ``long_word`` symbols take the heap path (same result, O(L log L)).
    """
    n_words = word_offsets.shape[0] - 1
    out = np.empty(word_syms.shape[0], dtype=np.int64)
    out_offsets = np.empty(n_words + 1, dtype=np.int64)
    out_offsets[0] = 0
    used = 0
    longest = 0
    for w in range(n_words):
        longest = max(longest, word_offsets[w + 1] - word_offsets[w])
    work = np.empty(longest, dtype=np.int64)
    big = longest if longest > long_word else 0
    sym = np.empty(big, dtype=np.int64)
    nxt = np.empty(big, dtype=np.int64)
    prv = np.empty(big, dtype=np.int64)
    heap_rank = np.empty(3 * big, dtype=np.int64)  # n - 1 pairs, then at most 2 per merge
    heap_pos = np.empty(3 * big, dtype=np.int64)
    for w in range(n_words):
        n = word_offsets[w + 1] - word_offsets[w]
        for i in range(n):
            work[i] = word_syms[word_offsets[w] + i]
        lowest = 0
        if n > long_word and n > 1:
            n = _merge_long_word(work, n, keys, ranks, merge_next, merges_left, merges_right, merges_new,
                                 symbol_space, sym, nxt, prv, heap_rank, heap_pos)
            lowest = merges_left.shape[0]  # every merge has been applied: skip the scan
        while n > 1 and lowest < merges_left.shape[0]:
            best = -1
            for i in range(n - 1):
                r = _rank_at_least(keys, ranks, merge_next, symbol_space, work[i], work[i + 1], lowest)
                if r >= 0 and (best < 0 or r < best):
                    best = r
            if best < 0:
                break
            # Merge ``best`` left to right without overlap, compacting in place.
            left = merges_left[best]
            right = merges_right[best]
            made = merges_new[best]
            kept = 0
            i = 0
            while i < n:
                if i + 1 < n and work[i] == left and work[i + 1] == right:
                    work[kept] = made
                    i += 2
                else:
                    work[kept] = work[i]
                    i += 1
                kept += 1
            n = kept
            lowest = best + 1
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
