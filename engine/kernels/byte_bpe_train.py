"""Byte-level BPE training kernels: count word types, then merge incrementally.

Counting: pieces (from the pre-tokenizer) are hashed (FNV-1a) into an open-addressing table of
word types; a type's bytes are copied once into a pool, its count is int64, and types are
numbered in order of first appearance. Cost O(bytes).

Merging: every word type is an int32 array of symbols (token ids) with the byte offset of each
symbol. Pairs live in a hash table with their weighted count, a list of the words they were
formed in (pair -> words index) and, for the "first" rule, their first occurrence
(word rank, byte offset). A max-heap holds (count, tie key, pair); entries go stale when counts
drop and are re-pushed when popped (lazy), and a fresh entry is pushed whenever a pair gains
occurrences. One merge touches only the words of its pair, so training costs
O(total changes · log pairs) rather than O(merges · corpus).

Tie rules: ``HF`` = smaller (order[left], order[right]) where order is Hugging Face's id order;
``FIRST`` = earlier first occurrence (word rank, byte offset inside the word).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels.byte_bpe_encode import EMPTY_KEY, hash_bytes, pair_slot

TIE_FIRST = 0
TIE_HF = 1


@njit(cache=True, nogil=True)
def count_pieces(buf, ends, first_piece, piece_start, slots, word_hashes, word_starts, word_pool,
                 word_counts, word_total, pool_used):
    """Count pieces ``first_piece..`` of ``buf`` (piece i ends at ``ends[i]``) into the word table.

    Stops early, before inserting a new type, when the type arrays or the pool are full or the
    table passes half load. Returns (next piece, its start byte, word types, pool bytes used).
    """
    mask = slots.shape[0] - 1
    limit = min(word_counts.shape[0] - 1, slots.shape[0] // 2)
    start = piece_start
    i = first_piece
    while i < ends.shape[0]:
        end = ends[i]
        h = hash_bytes(buf, start, end)
        slot = np.int64(h & np.uint64(mask))
        length = end - start
        found = -1
        while slots[slot] >= 0:
            w = slots[slot]
            if word_hashes[w] == h and word_starts[w + 1] - word_starts[w] == length:
                base = word_starts[w]
                same = True
                for j in range(length):
                    if word_pool[base + j] != buf[start + j]:
                        same = False
                        break
                if same:
                    found = w
                    break
            slot = (slot + 1) & mask
        if found < 0:
            if word_total >= limit or pool_used + length > word_pool.shape[0]:
                return i, start, word_total, pool_used
            found = word_total
            slots[slot] = found
            word_hashes[found] = h
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


@njit(cache=True, nogil=True)
def rehash_words(slots, word_hashes, word_total):
    """Re-insert every word type into an empty (all -1) table ``slots`` of size 2^k."""
    mask = slots.shape[0] - 1
    for w in range(word_total):
        slot = np.int64(word_hashes[w] & np.uint64(mask))
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = w


@njit(cache=True, nogil=True)
def grow_rows(a, rows):
    out = np.empty((rows, a.shape[1]), dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, nogil=True)
def grow_1d(a, size):
    out = np.empty(size, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, nogil=True, inline="always")
def heap_better(c1, t1, c2, t2):
    return c1 > c2 or (c1 == c2 and t1 < t2)


@njit(cache=True, nogil=True)
def heap_push(h_count, h_tie, h_pair, size, count, tie, pair):
    """Push onto the max-heap (count desc, tie asc); arrays must have room."""
    i = size
    h_count[i], h_tie[i], h_pair[i] = count, tie, pair
    while i > 0:
        parent = (i - 1) >> 1
        if not heap_better(h_count[i], h_tie[i], h_count[parent], h_tie[parent]):
            break
        h_count[i], h_count[parent] = h_count[parent], h_count[i]
        h_tie[i], h_tie[parent] = h_tie[parent], h_tie[i]
        h_pair[i], h_pair[parent] = h_pair[parent], h_pair[i]
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def heap_pop(h_count, h_tie, h_pair, size):
    count, tie, pair = h_count[0], h_tie[0], h_pair[0]
    size -= 1
    h_count[0], h_tie[0], h_pair[0] = h_count[size], h_tie[size], h_pair[size]
    i = 0
    while True:
        best = i
        for child in (2 * i + 1, 2 * i + 2):
            if child < size and heap_better(h_count[child], h_tie[child], h_count[best], h_tie[best]):
                best = child
        if best == i:
            break
        h_count[i], h_count[best] = h_count[best], h_count[i]
        h_tie[i], h_tie[best] = h_tie[best], h_tie[i]
        h_pair[i], h_pair[best] = h_pair[best], h_pair[i]
        i = best
    return count, tie, pair, size



# Columns of the pair state array (one int64 row per pair).
LEFT, RIGHT, COUNT, FIRST_WORD, FIRST_OFFSET, HEAD, LAST_WORD, STAMP, GAIN, DIRTY = range(10)
PAIR_COLUMNS = 10
NO_WORD = np.int64(1 << 40)


@njit(cache=True, nogil=True)
def pair_index(a, b, table_keys, table_values, pairs, pair_total):
    """Index of pair (a, b), creating it (count 0) if new; returns (index, pair total)."""
    mask = table_keys.shape[0] - 1
    key = (np.uint64(a) << np.uint64(32)) | np.uint64(b)
    slot = pair_slot(key, mask)
    while True:
        k = table_keys[slot]
        if k == key:
            return table_values[slot], pair_total
        if k == EMPTY_KEY:
            break
        slot = (slot + 1) & mask
    table_keys[slot] = key
    table_values[slot] = pair_total
    row = pairs[pair_total]
    row[LEFT], row[RIGHT], row[COUNT] = a, b, 0
    row[FIRST_WORD], row[FIRST_OFFSET], row[HEAD] = NO_WORD, 0, -1
    row[LAST_WORD], row[STAMP], row[GAIN], row[DIRTY] = -1, -1, -1, 0
    return pair_total, pair_total + 1


@njit(cache=True, nogil=True)
def apply_delta(a, b, delta, word, offset, step, table_keys, table_values, pairs, pair_total,
                occurrences, occurrence_total, touched, touched_total):
    """Add ``delta`` to pair (a, b) seen in ``word`` at byte ``offset``; returns updated totals."""
    p, pair_total = pair_index(a, b, table_keys, table_values, pairs, pair_total)
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


@njit(cache=True, nogil=True)
def first_occurrence(p, pairs, occurrences, symbols, offsets, word_starts, word_lengths):
    """Exact (word, byte offset) of the first remaining occurrence of pair ``p``."""
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


@njit(cache=True, nogil=True, inline="always")
def tie_key(p, pairs, order, tie_rule):
    if tie_rule == TIE_HF:
        return (order[pairs[p, LEFT]] << 32) | order[pairs[p, RIGHT]]
    return (pairs[p, FIRST_WORD] << 32) | pairs[p, FIRST_OFFSET]


@njit(cache=True, nogil=True)
def find_token(pool, start, end, h, token_offsets, token_slots):
    mask = token_slots.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    length = end - start
    while token_slots[slot] >= 0:
        t = token_slots[slot]
        if token_offsets[t + 1] - token_offsets[t] == length:
            same = True
            for j in range(length):
                if pool[token_offsets[t] + j] != pool[start + j]:
                    same = False
                    break
            if same:
                return t, slot
        slot = (slot + 1) & mask
    return -1, slot


@njit(cache=True, nogil=True)
def train_merges(word_starts, word_pool, word_counts, word_total, byte_order, tie_rule, max_merges,
                 max_new_tokens, out_left, out_right, out_token, out_history):
    """Run up to ``max_merges`` merges (or until ``max_new_tokens`` new tokens exist).

    Internal ids: byte b = b, new token k = 256 + k. ``byte_order[b]`` ranks bytes for the HF
    tie rule. Writes merge k as (out_left[k], out_right[k]) -> out_token[k] and the corpus token
    count after it in out_history[k]. Returns the number of merges.
    """
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
            symbols[s + j] = word_pool[s + j]
            offsets[s + j] = j
    # tokens: bytes, for recognising a merge that rebuilds an existing token
    max_tokens = 256 + max_merges
    token_offsets = np.zeros(max_tokens + 1, dtype=np.int64)
    token_pool = np.empty(4096, dtype=np.uint8)
    slot_total = 1024
    while slot_total < 2 * max_tokens:
        slot_total <<= 1
    token_slots = np.full(slot_total, -1, dtype=np.int64)
    order = np.empty(max_tokens, dtype=np.int64)
    for t in range(256):
        token_pool[t] = t
        token_offsets[t + 1] = t + 1
        order[t] = byte_order[t]
        _, slot = find_token(token_pool, t, t + 1, hash_bytes(token_pool, t, t + 1), token_offsets, token_slots)
        token_slots[slot] = t
    token_total = 256
    # pairs, the pair -> words lists, the heap
    table_keys = np.full(1 << 16, EMPTY_KEY, dtype=np.uint64)
    table_values = np.empty(1 << 16, dtype=np.int64)
    pairs = np.empty((1 << 15, PAIR_COLUMNS), dtype=np.int64)
    touched = np.empty(1 << 15, dtype=np.int64)
    occurrences = np.empty((1 << 16, 2), dtype=np.int64)
    pair_total, occurrence_total, touched_total = 0, 0, 0
    step = 0  # step 0 counts the pairs of every word; step k >= 1 is merge k - 1
    heap_count = np.empty(1024, dtype=np.int64)
    heap_tie = np.empty(1024, dtype=np.int64)
    heap_pair = np.empty(1024, dtype=np.int64)
    heap_size = 0
    merge_total = 0
    new_tokens = 0
    w_next = 0
    while True:
        # words to process: all of them at step 0, else those of the merged pair
        if step == 0:
            if w_next >= word_total:
                step = 1
                touched_total = 0
                for p in range(pair_total):
                    if pairs[p, COUNT] > 0:
                        if heap_size + 1 >= heap_count.shape[0]:
                            heap_count = grow_1d(heap_count, 2 * heap_count.shape[0])
                            heap_tie = grow_1d(heap_tie, 2 * heap_tie.shape[0])
                            heap_pair = grow_1d(heap_pair, 2 * heap_pair.shape[0])
                        heap_size = heap_push(heap_count, heap_tie, heap_pair, heap_size, pairs[p, COUNT],
                                              tie_key(p, pairs, order, tie_rule), p)
                continue
            w = w_next
            w_next += 1
            need = 2 * word_lengths[w] + 2
            if pair_total + need > pairs.shape[0]:
                pairs, table_keys, table_values, touched = _grow_pairs(pairs, table_keys, pair_total, need, touched)
            if occurrence_total + need > occurrences.shape[0]:
                occurrences = grow_rows(occurrences, 2 * (occurrence_total + need))
            s = word_starts[w]
            for j in range(word_lengths[w] - 1):
                pair_total, occurrence_total, touched_total = apply_delta(
                    symbols[s + j], symbols[s + j + 1], word_counts[w], w, j, 0, table_keys, table_values,
                    pairs, pair_total, occurrences, occurrence_total, touched, 0)
            continue
        if merge_total >= max_merges or new_tokens >= max_new_tokens or heap_size == 0:
            break
        count, tie, p, heap_size = heap_pop(heap_count, heap_tie, heap_pair, heap_size)
        if count != pairs[p, COUNT]:
            if pairs[p, COUNT] > 0:
                heap_size = heap_push(heap_count, heap_tie, heap_pair, heap_size, pairs[p, COUNT],
                                      tie_key(p, pairs, order, tie_rule), p)
            continue
        if tie_rule == TIE_FIRST and pairs[p, DIRTY] != 0:
            fw, fo = first_occurrence(p, pairs, occurrences, symbols, offsets, word_starts, word_lengths)
            pairs[p, FIRST_WORD], pairs[p, FIRST_OFFSET], pairs[p, DIRTY] = fw, fo, 0
            fresh = tie_key(p, pairs, order, tie_rule)
            if fresh != tie:
                heap_size = heap_push(heap_count, heap_tie, heap_pair, heap_size, count, fresh, p)
                continue
        if count < 1:
            break
        a, b = pairs[p, LEFT], pairs[p, RIGHT]
        # the new token's bytes, or the existing token with the same bytes
        start = token_offsets[token_total]
        la = token_offsets[a + 1] - token_offsets[a]
        lb = token_offsets[b + 1] - token_offsets[b]
        if start + la + lb > token_pool.shape[0]:
            token_pool = grow_1d(token_pool, 2 * (start + la + lb))
        token_pool[start:start + la] = token_pool[token_offsets[a]:token_offsets[a] + la]
        token_pool[start + la:start + la + lb] = token_pool[token_offsets[b]:token_offsets[b] + lb]
        token_offsets[token_total + 1] = start + la + lb
        h = hash_bytes(token_pool, start, start + la + lb)
        new_token, slot = find_token(token_pool, start, start + la + lb, h, token_offsets, token_slots)
        if new_token < 0:
            new_token = token_total
            token_slots[slot] = new_token
            order[new_token] = 256 + new_tokens
            token_total += 1
            new_tokens += 1
        out_left[merge_total], out_right[merge_total], out_token[merge_total] = a, b, new_token
        touched_total = 0
        o = pairs[p, HEAD]
        while o >= 0:
            w = occurrences[o, 0]
            o = occurrences[o, 1]
            if word_seen[w] == step:
                continue
            word_seen[w] = step
            need = 2 * word_lengths[w] + 2
            if pair_total + need > pairs.shape[0]:
                pairs, table_keys, table_values, touched = _grow_pairs(pairs, table_keys, pair_total, need, touched)
            if occurrence_total + need > occurrences.shape[0]:
                occurrences = grow_rows(occurrences, 2 * (occurrence_total + need))
            s = word_starts[w]
            length = word_lengths[w]
            weight = word_counts[w]
            r = 0
            kept = 0
            while r < length:
                if r + 1 < length and symbols[s + r] == a and symbols[s + r + 1] == b:
                    here = np.int64(offsets[s + r])
                    if kept > 0:
                        prev = symbols[s + kept - 1]
                        prev_offset = np.int64(offsets[s + kept - 1])
                        pair_total, occurrence_total, touched_total = apply_delta(
                            prev, a, -weight, w, prev_offset, step, table_keys, table_values, pairs, pair_total,
                            occurrences, occurrence_total, touched, touched_total)
                        pair_total, occurrence_total, touched_total = apply_delta(
                            prev, new_token, weight, w, prev_offset, step, table_keys, table_values, pairs,
                            pair_total, occurrences, occurrence_total, touched, touched_total)
                    if r + 2 < length:
                        following = symbols[s + r + 2]
                        pair_total, occurrence_total, touched_total = apply_delta(
                            b, following, -weight, w, np.int64(offsets[s + r + 1]), step, table_keys, table_values,
                            pairs, pair_total, occurrences, occurrence_total, touched, touched_total)
                        pair_total, occurrence_total, touched_total = apply_delta(
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
                if heap_size + 1 >= heap_count.shape[0]:
                    heap_count = grow_1d(heap_count, 2 * heap_count.shape[0])
                    heap_tie = grow_1d(heap_tie, 2 * heap_tie.shape[0])
                    heap_pair = grow_1d(heap_pair, 2 * heap_pair.shape[0])
                heap_size = heap_push(heap_count, heap_tie, heap_pair, heap_size, pairs[q, COUNT],
                                      tie_key(q, pairs, order, tie_rule), q)
        out_history[merge_total] = total_tokens
        merge_total += 1
        step += 1
    return merge_total


@njit(cache=True, nogil=True)
def _grow_pairs(pairs, table_keys, pair_total, need, touched):
    """Double the pair arrays (and rehash the pair table) until ``need`` more pairs fit."""
    rows = pairs.shape[0]
    while pair_total + need > rows:
        rows *= 2
    pairs = grow_rows(pairs, rows)
    touched = grow_1d(touched, rows)
    table_keys = np.full(2 * rows, EMPTY_KEY, dtype=np.uint64)
    table_values = np.empty(2 * rows, dtype=np.int64)
    mask = 2 * rows - 1
    for p in range(pair_total):
        key = (np.uint64(pairs[p, LEFT]) << np.uint64(32)) | np.uint64(pairs[p, RIGHT])
        slot = pair_slot(key, mask)
        while table_keys[slot] != EMPTY_KEY:
            slot = (slot + 1) & mask
        table_keys[slot] = key
        table_values[slot] = p
    return pairs, table_keys, table_values, touched
