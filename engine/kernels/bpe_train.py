"""Classic BPE training over distinct words with incremental pair counts (SPEC §3).

Input: the distinct words as a flat array of symbol ids with word offsets, words numbered by
their first appearance (rank), and their frequencies. Each word is a linked list of pieces over
its character positions, so a piece keeps the character offset of its start for ever.

Per pair the kernel keeps: weighted count, the list of words that contain it (in rank order),
and its first occurrence (word rank, character offset). A merge ``(x, y) -> z`` visits only the
words on its list and updates just the pairs around each occurrence. Old pairs only ever lose
occurrences and every new pair contains ``z``, so each pair's word list stays in rank order and
its first occurrence only moves forward: when a merge destroys it, the next one is found by
walking that pair's list from where it last stood (amortised over the whole run).

A binary max-heap with lazy deletion holds ``(count, key1, key2, pair)``; an entry is current
only while it equals the pair's state. Tie rules: ``first`` -> key = (first word rank, offset),
smallest wins (SPEC); ``hf`` -> key = (left id, right id), smallest wins (Hugging Face order).

Cost: O(L) to build, then per merge O(touched occurrences x log heap); no recounting.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["train_bpe_kernel", "TIE_FIRST", "TIE_HF"]

TIE_FIRST = 0
TIE_HF = 1

# Columns of the per-pair table.
(_LEFT, _RIGHT, _COUNT, _RANK, _OFFSET, _HEAD, _TAIL, _FIRST_ENTRY, _LAST_WORD, _STAMP, _DIRTY, _SORTED) = range(12)
_PAIR_COLUMNS = 12
# Fibonacci hashing multiplier (2**64 / golden ratio) as a signed int64: products wrap.
_GOLDEN = -7046029254386353131


@njit(cache=True, nogil=True)
def _grow_rows(table, need):
    if need <= table.shape[0]:
        return table
    cap = table.shape[0] * 2
    while cap < need:
        cap *= 2
    out = np.empty((cap, table.shape[1]), dtype=table.dtype)
    out[: table.shape[0]] = table
    return out


@njit(cache=True, nogil=True)
def _table_find(keys, vals, key):
    mask = keys.shape[0] - 1
    slot = ((key * _GOLDEN) >> 20) & mask
    while True:
        k = keys[slot]
        if k == key:
            return vals[slot]
        if k < 0:
            return -1
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def _table_insert(keys, vals, key, val):
    mask = keys.shape[0] - 1
    slot = ((key * _GOLDEN) >> 20) & mask
    while keys[slot] >= 0:
        slot = (slot + 1) & mask
    keys[slot] = key
    vals[slot] = val


@njit(cache=True, nogil=True)
def _table_reserve(keys, vals, n_items):
    """Double the table (rehashing) once it would be more than half full."""
    if 2 * n_items <= keys.shape[0]:
        return keys, vals
    new_keys = np.full(2 * keys.shape[0], -1, dtype=np.int64)
    new_vals = np.empty(2 * keys.shape[0], dtype=np.int64)
    for s in range(keys.shape[0]):
        if keys[s] >= 0:
            _table_insert(new_keys, new_vals, keys[s], vals[s])
    return new_keys, new_vals


@njit(cache=True, nogil=True)
def _better(heap, a, b):
    """Heap row ``a`` outranks row ``b``: larger count, then smaller key1, then smaller key2."""
    if heap[a, 0] != heap[b, 0]:
        return heap[a, 0] > heap[b, 0]
    if heap[a, 1] != heap[b, 1]:
        return heap[a, 1] < heap[b, 1]
    return heap[a, 2] < heap[b, 2]


@njit(cache=True, nogil=True)
def _heap_swap(heap, a, b):
    for c in range(4):
        t = heap[a, c]
        heap[a, c] = heap[b, c]
        heap[b, c] = t


@njit(cache=True, nogil=True)
def _heap_push(heap, size, count, key1, key2, pair):
    heap = _grow_rows(heap, size + 1)
    heap[size, 0] = count
    heap[size, 1] = key1
    heap[size, 2] = key2
    heap[size, 3] = pair
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if _better(heap, i, parent):
            _heap_swap(heap, i, parent)
            i = parent
        else:
            break
    return heap


@njit(cache=True, nogil=True)
def _heap_pop(heap, size):
    """Remove the top row; returns the new size."""
    size -= 1
    if size > 0:
        for c in range(4):
            heap[0, c] = heap[size, c]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= size:
                break
            best = left
            if left + 1 < size and _better(heap, left + 1, left):
                best = left + 1
            if _better(heap, best, i):
                _heap_swap(heap, best, i)
                i = best
            else:
                break
    return size



@njit(cache=True, nogil=True)
def _first_in_word(sym, nxt, base, left, right):
    """Character offset of the first (left, right) pair in the word starting at ``base``, or -1."""
    i = base
    while i >= 0:
        j = nxt[i]
        if j < 0:
            return -1
        if sym[i] == left and sym[j] == right:
            return i - base
        i = j
    return -1


@njit(cache=True, nogil=True)
def _locate_first(pairs, entries, sym, nxt, word_offsets, q):
    """Set pair ``q``'s first occurrence to the smallest (rank, offset) still present."""
    left = pairs[q, _LEFT]
    right = pairs[q, _RIGHT]
    if pairs[q, _SORTED] != 0:
        # Words on the list are in rank order and nothing before FIRST_ENTRY holds the pair.
        e = pairs[q, _FIRST_ENTRY]
        while e >= 0:
            w = entries[e, 0]
            off = _first_in_word(sym, nxt, word_offsets[w], left, right)
            if off >= 0:
                pairs[q, _RANK] = w
                pairs[q, _OFFSET] = off
                pairs[q, _FIRST_ENTRY] = e
                return
            e = entries[e, 1]
        return
    best_rank = -1
    best_offset = -1
    e = pairs[q, _HEAD]
    while e >= 0:
        w = entries[e, 0]
        if best_rank < 0 or w <= best_rank:
            off = _first_in_word(sym, nxt, word_offsets[w], left, right)
            if off >= 0 and (best_rank < 0 or w < best_rank or off < best_offset):
                best_rank = w
                best_offset = off
        e = entries[e, 1]
    pairs[q, _RANK] = best_rank
    pairs[q, _OFFSET] = best_offset


@njit(cache=True, nogil=True)
def _new_pair(pairs, n_pairs, left, right):
    pairs = _grow_rows(pairs, n_pairs + 1)
    pairs[n_pairs, _LEFT] = left
    pairs[n_pairs, _RIGHT] = right
    pairs[n_pairs, _COUNT] = 0
    pairs[n_pairs, _RANK] = -1
    pairs[n_pairs, _OFFSET] = -1
    pairs[n_pairs, _HEAD] = -1
    pairs[n_pairs, _TAIL] = -1
    pairs[n_pairs, _FIRST_ENTRY] = -1
    pairs[n_pairs, _LAST_WORD] = -1
    pairs[n_pairs, _STAMP] = -1
    pairs[n_pairs, _DIRTY] = 0
    pairs[n_pairs, _SORTED] = 1
    return pairs


@njit(cache=True, nogil=True)
def _add_occurrence(pairs, entries, n_entries, q, w, off, f):
    """Count one occurrence of pair ``q`` at (word ``w``, offset ``off``) of weight ``f``."""
    before = pairs[q, _COUNT]
    pairs[q, _COUNT] = before + f
    if pairs[q, _LAST_WORD] != w:
        entries = _grow_rows(entries, n_entries + 1)
        entries[n_entries, 0] = w
        entries[n_entries, 1] = -1
        if pairs[q, _HEAD] < 0:
            pairs[q, _HEAD] = n_entries
        else:
            if entries[pairs[q, _TAIL], 0] > w:
                pairs[q, _SORTED] = 0
            entries[pairs[q, _TAIL], 1] = n_entries
        pairs[q, _TAIL] = n_entries
        pairs[q, _LAST_WORD] = w
        n_entries += 1
    rank = pairs[q, _RANK]
    if before <= 0 or w < rank or (w == rank and off < pairs[q, _OFFSET]):
        pairs[q, _RANK] = w
        pairs[q, _OFFSET] = off
        pairs[q, _FIRST_ENTRY] = pairs[q, _TAIL]
    return entries, n_entries


@njit(cache=True, nogil=True)
def _touch(pairs, touched, n_touched, q, stamp):
    if pairs[q, _STAMP] == stamp:
        return touched, n_touched
    pairs[q, _STAMP] = stamp
    if n_touched == touched.shape[0]:
        grown = np.empty(2 * n_touched, dtype=np.int64)
        grown[:n_touched] = touched
        touched = grown
    touched[n_touched] = q
    return touched, n_touched + 1


@njit(cache=True, nogil=True)
def _hash_cps(buf, start, length):
    h = np.uint64(14695981039346656037)
    for i in range(start, start + length):
        h = (h ^ np.uint64(buf[i])) * np.uint64(1099511628211)
    return h


@njit(cache=True, nogil=True)
def _find_piece(piece_slots, piece_start, piece_len, buf, start, length):
    """Slot of the piece with these code points: holds its symbol, or -1 if the piece is new."""
    mask = np.uint64(piece_slots.shape[0] - 1)
    slot = _hash_cps(buf, start, length) & mask
    while True:
        s = piece_slots[slot]
        if s < 0:
            return slot
        if piece_len[s] == length:
            same = True
            for k in range(length):
                if buf[piece_start[s] + k] != buf[start + k]:
                    same = False
                    break
            if same:
                return slot
        slot = (slot + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def _heap_push_pair(heap, heap_size, pairs, q, tie_mode):
    if tie_mode == 0:
        return _heap_push(heap, heap_size, pairs[q, _COUNT], pairs[q, _RANK], pairs[q, _OFFSET], q)
    return _heap_push(heap, heap_size, pairs[q, _COUNT], pairs[q, _LEFT], pairs[q, _RIGHT], q)


@njit(cache=True, nogil=True)
def train_bpe_kernel(
    word_syms, word_offsets, freqs, alphabet, n_merges, tie_mode, max_new, merges_left, merges_right, merges_new, history
):
    """Run up to ``n_merges`` merges of the distinct words.

    ``word_syms`` int64 symbol ids (index into ``alphabet``, uint32 code points), ``word_offsets``
    int64[d+1], ``freqs`` int64[d]. A piece is identified by its text: merge k makes symbol
    ``merges_new[k]``, a fresh id ``len(alphabet) + j`` for the j-th new piece, or the id of the
    same text made by an earlier merge. ``history[k]`` = tokens after k merges. With
    ``max_new >= 0`` training also stops once that many new pieces exist.
    Returns ``(merges done, new pieces)``; fewer merges only when no pair is left.
    """
    length = word_syms.shape[0]
    n_words = freqs.shape[0]
    n_symbols = alphabet.shape[0]
    symbol_space = n_symbols + n_merges
    sym = word_syms.copy()
    nxt = np.empty(length, dtype=np.int64)
    prv = np.empty(length, dtype=np.int64)
    total = 0
    for w in range(n_words):
        s = word_offsets[w]
        e = word_offsets[w + 1]
        total += freqs[w] * (e - s)
        for i in range(s, e):
            nxt[i] = i + 1 if i + 1 < e else -1
            prv[i] = i - 1 if i > s else -1
    history[0] = total

    # Text of every symbol, for recognising a merge that rebuilds an existing piece.
    piece_start = np.empty(symbol_space, dtype=np.int64)
    piece_len = np.empty(symbol_space, dtype=np.int64)
    piece_buf = np.empty(max(64, 2 * n_symbols), dtype=np.uint32)
    piece_used = 0
    slot_count = 16
    while slot_count < 2 * symbol_space:
        slot_count *= 2
    piece_slots = np.full(slot_count, -1, dtype=np.int64)
    for s in range(n_symbols):
        piece_buf[piece_used] = alphabet[s]
        piece_start[s] = piece_used
        piece_len[s] = 1
        piece_used += 1
        piece_slots[_find_piece(piece_slots, piece_start, piece_len, piece_buf, s, 1)] = s
    n_new = 0

    # Start small and grow: distinct pairs are far fewer than characters, and pages never
    # touched cost nothing.
    pairs = np.empty((1024, _PAIR_COLUMNS), dtype=np.int64)
    entries = np.empty((max(64, length), 2), dtype=np.int64)  # (word, next entry)
    table_size = 4096
    keys = np.full(table_size, -1, dtype=np.int64)
    vals = np.empty(table_size, dtype=np.int64)
    n_pairs = 0
    n_entries = 0
    touched = np.empty(1024, dtype=np.int64)
    stamp = 0

    for w in range(n_words):
        base = word_offsets[w]
        for i in range(base, word_offsets[w + 1] - 1):
            key = sym[i] * symbol_space + sym[i + 1]
            q = _table_find(keys, vals, key)
            if q < 0:
                q = n_pairs
                pairs = _new_pair(pairs, n_pairs, sym[i], sym[i + 1])
                n_pairs += 1
                keys, vals = _table_reserve(keys, vals, n_pairs)
                _table_insert(keys, vals, key, q)
            entries, n_entries = _add_occurrence(pairs, entries, n_entries, q, w, i - base, freqs[w])

    heap = np.empty((max(64, 2 * n_pairs), 4), dtype=np.int64)
    heap_size = 0
    for q in range(n_pairs):
        heap = _heap_push_pair(heap, heap_size, pairs, q, tie_mode)
        heap_size += 1

    done = 0
    for k in range(n_merges):
        if max_new >= 0 and n_new >= max_new:
            break
        best = -1
        while heap_size > 0:
            q = heap[0, 3]
            current = heap[0, 0] == pairs[q, _COUNT] and pairs[q, _COUNT] > 0
            if current and tie_mode == 0:
                current = heap[0, 1] == pairs[q, _RANK] and heap[0, 2] == pairs[q, _OFFSET]
            heap_size = _heap_pop(heap, heap_size)
            if current:
                best = q
                break
        if best < 0:
            break
        x = pairs[best, _LEFT]
        y = pairs[best, _RIGHT]
        # The merged piece's text: a known piece keeps its symbol, a new one gets the next id.
        joined = piece_len[x] + piece_len[y]
        if piece_used + joined > piece_buf.shape[0]:
            grown_buf = np.empty(2 * (piece_used + joined), dtype=np.uint32)
            grown_buf[:piece_used] = piece_buf[:piece_used]
            piece_buf = grown_buf
        piece_buf[piece_used : piece_used + piece_len[x]] = piece_buf[piece_start[x] : piece_start[x] + piece_len[x]]
        piece_buf[piece_used + piece_len[x] : piece_used + joined] = piece_buf[
            piece_start[y] : piece_start[y] + piece_len[y]
        ]
        slot = _find_piece(piece_slots, piece_start, piece_len, piece_buf, piece_used, joined)
        if piece_slots[slot] >= 0:
            z = piece_slots[slot]
        else:
            z = n_symbols + n_new
            n_new += 1
            piece_start[z] = piece_used
            piece_len[z] = joined
            piece_used += joined
            piece_slots[slot] = z
        merges_left[k] = x
        merges_right[k] = y
        merges_new[k] = z
        stamp += 1
        n_touched = 0

        e = pairs[best, _HEAD]
        while e >= 0:
            w = entries[e, 0]
            f = freqs[w]
            base = word_offsets[w]
            i = base
            while i >= 0:
                j = nxt[i]
                if j < 0:
                    break
                if sym[i] != x or sym[j] != y:
                    i = j
                    continue
                h = prv[i]
                after = nxt[j]
                # Destroyed: (x, y) at i, (left neighbour, x) at h, (y, right neighbour) at j.
                for side in range(3):
                    if side == 0:
                        q = best
                        off = i - base
                    elif side == 1:
                        if h < 0:
                            continue
                        q = _table_find(keys, vals, sym[h] * symbol_space + x)
                        off = h - base
                    else:
                        if after < 0:
                            continue
                        q = _table_find(keys, vals, y * symbol_space + sym[after])
                        off = j - base
                    pairs[q, _COUNT] -= f
                    if pairs[q, _RANK] == w and pairs[q, _OFFSET] == off:
                        pairs[q, _DIRTY] = 1
                    touched, n_touched = _touch(pairs, touched, n_touched, q, stamp)
                sym[i] = z
                nxt[i] = after
                if after >= 0:
                    prv[after] = i
                total -= f
                # Created: (left neighbour, z) at h, (z, right neighbour) at i.
                for side in range(2):
                    if side == 0:
                        if h < 0:
                            continue
                        a = sym[h]
                        b = z
                        off = h - base
                    else:
                        if after < 0:
                            continue
                        a = z
                        b = sym[after]
                        off = i - base
                    key = a * symbol_space + b
                    q = _table_find(keys, vals, key)
                    if q < 0:
                        q = n_pairs
                        pairs = _new_pair(pairs, n_pairs, a, b)
                        n_pairs += 1
                        keys, vals = _table_reserve(keys, vals, n_pairs)
                        _table_insert(keys, vals, key, q)
                    entries, n_entries = _add_occurrence(pairs, entries, n_entries, q, w, off, f)
                    touched, n_touched = _touch(pairs, touched, n_touched, q, stamp)
                i = after
            e = entries[e, 1]

        for t in range(n_touched):
            q = touched[t]
            if pairs[q, _COUNT] <= 0:
                pairs[q, _DIRTY] = 0
                continue
            if tie_mode == 0 and pairs[q, _DIRTY] != 0:
                _locate_first(pairs, entries, sym, nxt, word_offsets, q)
            pairs[q, _DIRTY] = 0
            heap = _heap_push_pair(heap, heap_size, pairs, q, tie_mode)
            heap_size += 1
        history[k + 1] = total
        done = k + 1
    return done, n_new
