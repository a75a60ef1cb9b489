"""BPE encoding: merges applied once per distinct word, then scattered to every occurrence.

A merge table maps a symbol pair to the earliest merge of that pair (``merge_next`` chains the
later merges of the same pair: a piece rebuilt by a later merge can make a pair again). Encoding
one word is "apply merge k = 0..N-1 in order, each left to right without overlap", done as:
find the smallest merge rank >= the next rank to apply among the word's adjacent pairs, apply
that merge across the word, continue after it. Merges that occur in no pair of the word cost
nothing, so a word of L symbols costs O(L^2) table look-ups instead of O(N * L).

``scatter_documents`` then writes ``[BOS, pieces of each word occurrence..., EOS]`` per document.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["build_merge_table", "encode_words", "scatter_documents", "map_symbols"]

_GOLDEN = -7046029254386353131


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
def encode_words(word_syms, word_offsets, keys, ranks, merge_next, merges_left, merges_right, merges_new, symbol_space):
    """Apply the merges to every word; returns (pieces int64 flat, piece offsets int64[d+1])."""
    n_words = word_offsets.shape[0] - 1
    out = np.empty(word_syms.shape[0], dtype=np.int64)
    out_offsets = np.empty(n_words + 1, dtype=np.int64)
    out_offsets[0] = 0
    used = 0
    longest = 0
    for w in range(n_words):
        longest = max(longest, word_offsets[w + 1] - word_offsets[w])
    work = np.empty(longest, dtype=np.int64)
    for w in range(n_words):
        n = word_offsets[w + 1] - word_offsets[w]
        for i in range(n):
            work[i] = word_syms[word_offsets[w] + i]
        lowest = 0
        while n > 1:
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
