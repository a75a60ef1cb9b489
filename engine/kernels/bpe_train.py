"""BPE training over integer symbols, shared by character-level and byte-level BPE.

The training rule is stated in ``engine.tokenizers.bpe`` (classic) and ``engine.tokenizers.byte_bpe``.

Counting (byte level): pieces from the pre-tokenizer are hashed (FNV-1a) into an
open-addressing table of word types; a type's bytes are copied once into a pool, its count is
int64, and types are numbered in order of first appearance. Cost O(bytes). The character level
splits words with ``engine.kernels.wordsplit`` instead.

Merging (``train_merges``): the distinct words as symbol arrays (base symbol s < n has the text
``alphabet[s]``: a code point or a byte), with the offset of each symbol in the word. Pairs live
in a hash table with their weighted count, a list of the words they were formed in and, for the
"first" rule, their first occurrence (word rank, offset). A heap (``engine.kernels.heap``) holds
(-count, tie key, pair); rows go stale when counts drop and are re-pushed when popped (lazy), and
a fresh row is pushed whenever a pair gains occurrences. One merge touches only the words of its
pair, so training costs O(total changes · log pairs) rather than O(merges · corpus). A piece is
identified by its text, so a merge that rebuilds an existing piece reuses its symbol.

Tie rules: ``TIE_FIRST`` = earlier first occurrence (word rank, offset of the pair in the word);
``TIE_HF`` = smaller (left, right) symbol ids (new symbols numbered by creation).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel
from engine.kernels.bpe_encode import (EMPTY_KEY, SHORT_PIECE, find_span, hash_span, key_home, key_slot, piece_key,
                                       same_span)
from engine.kernels.heap import heap_grow, heap_pop, heap_push, new_heap

__all__ = ["TIE_FIRST", "TIE_HF", "count_pieces", "rehash_words", "train_merges"]

TIE_FIRST = 0
TIE_HF = 1


@kernel
def count_pieces(buf, ends, first_piece, piece_start, slots, word_keys, word_starts, word_pool,
                 word_counts, word_total, pool_used):
    """Count pieces ``first_piece..`` of ``buf`` (piece i ends at ``ends[i]``) into the word table.

    ``slots`` (uint64 ``(2^k, 2)``, zero = free) holds rows ``(piece_key, word)`` by open addressing
    from ``key_home``: a piece of up to ``SHORT_PIECE`` bytes is its own key, so one row read
    settles it; a longer one also compares its bytes with the word's. Stops early, before
    inserting a new type, when the type arrays or the pool are full or the table passes half load.
    Returns (next piece, its start byte, word types, pool bytes used).
    """
    mask = slots.shape[0] - 1
    limit = min(word_counts.shape[0] - 1, slots.shape[0] // 2)
    start = piece_start
    i = first_piece
    while i < ends.shape[0]:
        end = ends[i]
        length = end - start
        key = piece_key(buf, start, length)
        slot = key_home(key, mask)
        found = -1
        while slots[slot, 0] != 0:
            if slots[slot, 0] == key:
                w = np.int64(slots[slot, 1])
                if length <= SHORT_PIECE or (word_starts[w + 1] - word_starts[w] == length
                                             and same_span(word_pool, word_starts[w], buf, start, length)):
                    found = w
                    break
            slot = (slot + 1) & mask
        if found < 0:
            if word_total >= limit or pool_used + length > word_pool.shape[0]:
                return i, start, word_total, pool_used
            found = word_total
            slots[slot, 0] = key
            slots[slot, 1] = found
            word_keys[found] = key
            for j in range(length):
                word_pool[pool_used + j] = buf[start + j]
            pool_used += length
            word_starts[found + 1] = pool_used
            word_counts[found] = 0
            word_total += 1
        word_counts[found] += 1
        start = end
        i += 1
    return i, start, word_total, pool_used


@kernel
def rehash_words(slots, word_keys, word_total):
    """Re-insert every word type into an empty (zero) ``count_pieces`` table ``slots``."""
    mask = slots.shape[0] - 1
    for w in range(word_total):
        key = word_keys[w]
        slot = key_home(key, mask)
        while slots[slot, 0] != 0:
            slot = (slot + 1) & mask
        slots[slot, 0] = key
        slots[slot, 1] = w


@kernel(inline="always")
def _grow_rows(a, rows):
    out = np.empty((rows, a.shape[1]), dtype=a.dtype)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[i, j] = a[i, j]
    return out


@kernel(inline="always")
def _grow_1d(a, size):
    out = np.empty(size, dtype=a.dtype)
    for i in range(a.shape[0]):
        out[i] = a[i]
    return out


# Columns of the pair state array (one int64 row per pair).
LEFT, RIGHT, COUNT, FIRST_WORD, FIRST_OFFSET, HEAD, LAST_WORD, STAMP, GAIN, DIRTY = range(10)
PAIR_COLUMNS = 10
NO_WORD = np.int64(1 << 40)


@kernel(inline="always")
def _pair_index(a, b, table_keys, table_values, pairs, pair_total):
    """Index of pair (a, b), creating it (count 0) if new; returns (index, pair total)."""
    key, slot = key_slot(table_keys, a, b)
    if table_keys[slot] == key:
        return table_values[slot], pair_total
    table_keys[slot] = key
    table_values[slot] = pair_total
    row = pairs[pair_total]
    row[LEFT], row[RIGHT], row[COUNT] = a, b, 0
    row[FIRST_WORD], row[FIRST_OFFSET], row[HEAD] = NO_WORD, 0, -1
    row[LAST_WORD], row[STAMP], row[GAIN], row[DIRTY] = -1, -1, -1, 0
    return pair_total, pair_total + 1


@kernel
def _apply_delta(a, b, delta, word, offset, step, table_keys, table_values, pairs, pair_total,
                 occurrences, occurrence_total, touched, touched_total):
    """Add ``delta`` to pair (a, b) seen in ``word`` at ``offset``; returns updated totals."""
    p, pair_total = _pair_index(a, b, table_keys, table_values, pairs, pair_total)
    row = pairs[p]
    row[COUNT] += delta
    if row[STAMP] != step:
        row[STAMP] = step
        touched[touched_total] = p
        touched_total += 1
    if delta > 0:
        row[GAIN] = step
        if row[LAST_WORD] != word:
            row[LAST_WORD] = word
            occurrences[occurrence_total, 0] = word
            occurrences[occurrence_total, 1] = row[HEAD]
            row[HEAD] = occurrence_total
            occurrence_total += 1
        if word < row[FIRST_WORD] or (word == row[FIRST_WORD] and offset < row[FIRST_OFFSET]):
            row[FIRST_WORD], row[FIRST_OFFSET], row[DIRTY] = word, offset, 0
    elif word == row[FIRST_WORD]:
        row[DIRTY] = 1
    return pair_total, occurrence_total, touched_total


@kernel(inline="always")
def _first_occurrence(p, pairs, occurrences, symbols, offsets, word_starts, word_lengths):
    """Exact (word, offset) of the first remaining occurrence of pair ``p``."""
    a, b = pairs[p, LEFT], pairs[p, RIGHT]
    best_word, best_offset = NO_WORD, 0
    o = pairs[p, HEAD]
    while o >= 0:
        w = occurrences[o, 0]
        o = occurrences[o, 1]
        if w >= best_word:
            continue
        s = word_starts[w]
        for j in range(word_lengths[w] - 1):
            if symbols[s + j] == a and symbols[s + j + 1] == b:
                best_word, best_offset = w, np.int64(offsets[s + j])
                break
    return best_word, best_offset


@kernel(inline="always")
def _tie_key(p, pairs, tie_rule):
    if tie_rule == TIE_HF:
        return (pairs[p, LEFT] << 32) | pairs[p, RIGHT]
    return (pairs[p, FIRST_WORD] << 32) | pairs[p, FIRST_OFFSET]


@kernel(inline="always")
def _grow_pairs(pairs, table_keys, pair_total, need, touched):
    """Double the pair arrays (and rehash the pair table) until ``need`` more pairs fit."""
    rows = pairs.shape[0]
    while pair_total + need > rows:
        rows *= 2
    pairs = _grow_rows(pairs, rows)
    touched = _grow_1d(touched, rows)
    table_keys = np.full(2 * rows, EMPTY_KEY, dtype=np.uint64)
    table_values = np.empty(2 * rows, dtype=np.int64)
    for p in range(pair_total):
        key, slot = key_slot(table_keys, pairs[p, LEFT], pairs[p, RIGHT])
        table_keys[slot] = key
        table_values[slot] = p
    return pairs, table_keys, table_values, touched


@kernel
def _reserve(need, pairs, table_keys, table_values, touched, occurrences, pair_total, occurrence_total):
    """Room for ``need`` more pairs and occurrences (the most one word's merge can add)."""
    if pair_total + need > pairs.shape[0]:
        pairs, table_keys, table_values, touched = _grow_pairs(pairs, table_keys, pair_total, need, touched)
    if occurrence_total + need > occurrences.shape[0]:
        occurrences = _grow_rows(occurrences, 2 * (occurrence_total + need))
    return pairs, table_keys, table_values, touched, occurrences


@kernel
def train_merges(word_syms, word_starts, word_counts, alphabet, tie_rule, max_merges, max_new,
                 out_left, out_right, out_made, out_history):
    """Run up to ``max_merges`` merges of the distinct words (or until ``max_new`` new symbols exist).

    ``word_syms`` int64 symbols of word w at ``word_starts[w]:word_starts[w + 1]``, ``word_counts``
    int64 weights, ``alphabet`` uint32 texts of the base symbols (n of them). Merge k is
    (out_left[k], out_right[k]) -> out_made[k]: a fresh symbol n + j for the j-th new text, or the
    symbol of the same text made earlier. ``out_history[k]`` = tokens after k merges.
    Returns (merges done, new symbols); fewer merges only when no pair is left.
    """
    word_total = word_counts.shape[0]
    n_symbols = alphabet.shape[0]
    symbol_total = word_starts[word_total]
    symbols = np.empty(symbol_total, dtype=np.int32)
    offsets = np.empty(symbol_total, dtype=np.int32)
    word_lengths = np.empty(word_total, dtype=np.int64)
    word_seen = np.full(word_total, -1, dtype=np.int64)
    total_tokens = np.int64(0)
    for w in range(word_total):
        s = word_starts[w]
        word_lengths[w] = word_starts[w + 1] - s
        total_tokens += word_lengths[w] * word_counts[w]
        for j in range(word_lengths[w]):
            symbols[s + j] = word_syms[s + j]
            offsets[s + j] = j
    out_history[0] = total_tokens
    # texts of the symbols, for recognising a merge that rebuilds an existing one
    max_tokens = n_symbols + max_merges
    token_offsets = np.zeros(max_tokens + 1, dtype=np.int64)
    token_pool = np.empty(max(4096, 2 * n_symbols), dtype=np.uint32)
    slot_total = 1024
    while slot_total < 2 * max_tokens:
        slot_total <<= 1
    token_slots = np.full(slot_total, -1, dtype=np.int64)
    for t in range(n_symbols):
        token_pool[t] = alphabet[t]
        token_offsets[t + 1] = t + 1
        _, slot = find_span(token_pool, t, t + 1, hash_span(token_pool, t, t + 1), token_pool, token_offsets,
                            token_slots)
        token_slots[slot] = t
    token_total = n_symbols
    # pairs, the pair -> words lists, the heap
    table_keys = np.full(1 << 16, EMPTY_KEY, dtype=np.uint64)
    table_values = np.empty(1 << 16, dtype=np.int64)
    pairs = np.empty((1 << 15, PAIR_COLUMNS), dtype=np.int64)
    touched = np.empty(1 << 15, dtype=np.int64)
    occurrences = np.empty((1 << 16, 2), dtype=np.int64)
    # Counters start as np.int64, not as literal 0: a literal argument would make Numba compile
    # the helpers once more for it.
    pair_total, occurrence_total, touched_total = np.int64(0), np.int64(0), np.int64(0)
    heap = new_heap(np.int64(1024))
    heap_size = np.int64(0)
    # step 0 counts the pairs of every word; step k >= 1 is merge k - 1
    zero = np.int64(0)
    for w in range(word_total):
        need = 2 * word_lengths[w] + 2
        if pair_total + need > pairs.shape[0] or occurrence_total + need > occurrences.shape[0]:
            pairs, table_keys, table_values, touched, occurrences = _reserve(
                need, pairs, table_keys, table_values, touched, occurrences, pair_total, occurrence_total)
        s = word_starts[w]
        for j in range(word_lengths[w] - 1):
            pair_total, occurrence_total, _ = _apply_delta(
                np.int64(symbols[s + j]), np.int64(symbols[s + j + 1]), word_counts[w], w, j, zero,
                table_keys, table_values, pairs, pair_total, occurrences, occurrence_total, touched, zero)
    for p in range(pair_total):
        if pairs[p, COUNT] > 0:
            if heap_size == heap.shape[0]:
                heap = heap_grow(heap)
            heap_size = heap_push(heap, heap_size, -pairs[p, COUNT], _tie_key(p, pairs, tie_rule), p)
    step = np.int64(1)
    merge_total = 0
    new_tokens = 0
    while merge_total < max_merges and new_tokens < max_new and heap_size > 0:
        count, tie, p = -heap[0, 0], heap[0, 1], heap[0, 2]
        heap_size = heap_pop(heap, heap_size)
        if count != pairs[p, COUNT]:
            if pairs[p, COUNT] > 0:
                if heap_size == heap.shape[0]:
                    heap = heap_grow(heap)
                heap_size = heap_push(heap, heap_size, -pairs[p, COUNT], _tie_key(p, pairs, tie_rule), p)
            continue
        if tie_rule == TIE_FIRST and pairs[p, DIRTY] != 0:
            fw, fo = _first_occurrence(p, pairs, occurrences, symbols, offsets, word_starts, word_lengths)
            pairs[p, FIRST_WORD], pairs[p, FIRST_OFFSET], pairs[p, DIRTY] = fw, fo, 0
            fresh = _tie_key(p, pairs, tie_rule)
            if fresh != tie:
                if heap_size == heap.shape[0]:
                    heap = heap_grow(heap)
                heap_size = heap_push(heap, heap_size, -count, fresh, p)
                continue
        if count < 1:
            break
        a, b = pairs[p, LEFT], pairs[p, RIGHT]
        # the new symbol's text, or the existing symbol with the same text
        start = token_offsets[token_total]
        la = token_offsets[a + 1] - token_offsets[a]
        lb = token_offsets[b + 1] - token_offsets[b]
        if start + la + lb > token_pool.shape[0]:
            token_pool = _grow_1d(token_pool, 2 * (start + la + lb))
        for j in range(la):
            token_pool[start + j] = token_pool[token_offsets[a] + j]
        for j in range(lb):
            token_pool[start + la + j] = token_pool[token_offsets[b] + j]
        token_offsets[token_total + 1] = start + la + lb
        h = hash_span(token_pool, start, start + la + lb)
        new_token, slot = find_span(token_pool, start, start + la + lb, h, token_pool, token_offsets, token_slots)
        if new_token < 0:
            new_token = token_total
            token_slots[slot] = new_token
            token_total += 1
            new_tokens += 1
        out_left[merge_total], out_right[merge_total], out_made[merge_total] = a, b, new_token
        touched_total = np.int64(0)
        o = pairs[p, HEAD]
        while o >= 0:
            w = occurrences[o, 0]
            o = occurrences[o, 1]
            if word_seen[w] == step:
                continue
            word_seen[w] = step
            need = 2 * word_lengths[w] + 2
            if pair_total + need > pairs.shape[0] or occurrence_total + need > occurrences.shape[0]:
                pairs, table_keys, table_values, touched, occurrences = _reserve(
                    need, pairs, table_keys, table_values, touched, occurrences, pair_total, occurrence_total)
            s = word_starts[w]
            length = word_lengths[w]
            weight = word_counts[w]
            r = 0
            kept = 0
            while r < length:
                if r + 1 < length and symbols[s + r] == a and symbols[s + r + 1] == b:
                    here = np.int64(offsets[s + r])
                    if kept > 0:
                        prev = np.int64(symbols[s + kept - 1])
                        prev_offset = np.int64(offsets[s + kept - 1])
                        pair_total, occurrence_total, touched_total = _apply_delta(
                            prev, a, -weight, w, prev_offset, step, table_keys, table_values, pairs, pair_total,
                            occurrences, occurrence_total, touched, touched_total)
                        pair_total, occurrence_total, touched_total = _apply_delta(
                            prev, new_token, weight, w, prev_offset, step, table_keys, table_values, pairs,
                            pair_total, occurrences, occurrence_total, touched, touched_total)
                    if r + 2 < length:
                        following = np.int64(symbols[s + r + 2])
                        pair_total, occurrence_total, touched_total = _apply_delta(
                            b, following, -weight, w, np.int64(offsets[s + r + 1]), step, table_keys, table_values,
                            pairs, pair_total, occurrences, occurrence_total, touched, touched_total)
                        pair_total, occurrence_total, touched_total = _apply_delta(
                            new_token, following, weight, w, here, step, table_keys, table_values, pairs,
                            pair_total, occurrences, occurrence_total, touched, touched_total)
                    symbols[s + kept] = new_token
                    offsets[s + kept] = here
                    kept += 1
                    r += 2
                    total_tokens -= weight
                else:
                    symbols[s + kept] = symbols[s + r]
                    offsets[s + kept] = offsets[s + r]
                    kept += 1
                    r += 1
            word_lengths[w] = kept
        pairs[p, COUNT] = 0
        for i in range(touched_total):
            q = touched[i]
            if pairs[q, GAIN] == step and pairs[q, COUNT] > 0:
                if heap_size == heap.shape[0]:
                    heap = heap_grow(heap)
                heap_size = heap_push(heap, heap_size, -pairs[q, COUNT], _tie_key(q, pairs, tie_rule), q)
        merge_total += 1
        out_history[merge_total] = total_tokens
        step += 1
    return merge_total, new_tokens
