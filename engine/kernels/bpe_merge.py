"""Merging a word of BPE symbols, shared by character-level and byte-level BPE (the encoders
in ``bpe_encode`` call it; ``bpe_train`` shares the hashing helpers).

A merge table (``build_pair_table``) maps a symbol pair ``(left << 32) | right`` (open
addressing) to a chain of entries in insertion order; entry ``e`` makes symbol ``made[e]`` with
priority ``priorities[e]`` (lower merges first). A word (or pre-tokenizer piece) of symbols is
merged by ``merge_word``: repeatedly the adjacent pair of lowest priority, leftmost on ties, one
occurrence at a time. Two rules for the pairs a merge creates:

- ``ordered`` (character level, the encoding rule of engine.tokenizers.bpe: "apply merge
  k = 0..N-1 in order, each left to right without overlap"): a pair created by the merge of
  priority p takes its first entry of priority > p, so a pair that a later merge makes again
  merges again at that later rank;
- not ordered (byte level, GPT-2 / tiktoken): a pair always takes its first entry.

Up to ``long_word`` symbols a linear scan of the parts is used (O(L^2), fastest for the usual
short words); longer ones keep a linked list and buckets of positions per priority (linear time
when merges make pairs of higher priority, as trained vocabularies do; a heap takes the rare
others), with identical results.

The encoders merge pieces of up to ``LONG_WORD`` symbols in their own pass (``merge_short``) and
write longer ones unmerged, recording them (``record_long``); ``merge_long_pieces`` then merges
those in place. A call without long pieces (most calls) never runs, nor compiles, the long path.

One byte-level piece longer than ``window`` symbols (``merge_long_pieces_windowed``; the encoder's
``PieceCacheLimits.long_piece_window``, 1 Mi by default: DNA,
base64, ``"ab" * 75_000_000``) is merged window by window, so its scratch is that of a window, not
of the piece (about 50 bytes a symbol): each window of ``window`` symbols is merged
alone and its tokens kept up to the last token end at or before three quarters of it (no merge of
the window crossed it; the last quarter is look-ahead); the next window starts there. Two kept
runs join only when the last token ``t1`` of one and the first ``t2`` of the next, merged from
their own bytes, give exactly ``[t1, t2]``: the first merge of the whole piece that would cross the
cut would meet the same symbols there, so then no merge crosses it and the ids are those of the
piece merged at once. Where a window holds no token end in its first three quarters, or a join
fails (a token of the vocabulary reaches back across the cut, as ``a…ac`` tokens do for a run of
``a`` before ``c``), the piece is merged at once, as before.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel

__all__ = [
    "EMPTY_KEY", "NO_PRIORITY", "LONG_WORD", "SPARSE_FIRST_BYTES", "GOLDEN", "FNV_OFFSET", "hash_span", "same_span",
    "pair_slot", "key_slot", "build_pair_table", "first_entry_table", "merge_word", "merge_short", "merge_short_first",
    "record_long", "merge_long_pieces", "merge_long_pieces_windowed",
]

EMPTY_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)
NO_PRIORITY = np.int64(1 << 62)  # above every (priority << 32) | entry: priorities stay below 2^30
# Above this many symbols a word is merged through the priority buckets; below, the scan is faster.
LONG_WORD = 64
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@kernel(inline="always")
def hash_span(buf, start, end):
    """FNV-1a of ``buf[start:end]`` (bytes or symbols), with a final mix of the high bits."""
    h = FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * FNV_PRIME
    return h ^ (h >> np.uint64(29))


@kernel(inline="always")
def same_span(a, a_start, b, b_start, length):
    """``a[a_start:a_start + length]`` equals ``b[b_start:b_start + length]``."""
    for j in range(length):
        if a[a_start + j] != b[b_start + j]:
            return False
    return True


@kernel(inline="always")
def pair_slot(key, mask):
    return np.int64(((key * GOLDEN) >> np.uint64(32)) & np.uint64(mask))


@kernel(inline="always")
def key_slot(keys, a, b):
    """``(key, slot)`` of pair (a, b) in the open-addressing table ``keys`` (size 2^k): the slot
    holding the key, or the empty slot where it would go."""
    mask = keys.shape[0] - 1
    key = (np.uint64(a) << np.uint64(32)) | np.uint64(b)
    slot = pair_slot(key, mask)
    while keys[slot] != key and keys[slot] != EMPTY_KEY:
        slot = (slot + 1) & mask
    return key, slot


@kernel(inline="always")
def _pair_row(pairs, a, b):
    """Row of pair (a, b) in ``pairs``: the row holding it, or the free row where it would go."""
    mask = pairs.shape[0] - 1
    key = (np.int64(a) << 32) | np.int64(b)
    slot = pair_slot(np.uint64(key), mask)
    while pairs[slot, 0] != key and pairs[slot, 0] != -1:
        slot = (slot + 1) & mask
    return slot


@kernel
def build_pair_table(lefts, rights):
    """Pair table over entries ``lefts[e], rights[e]`` (int64 symbols below 2^31): ``(pairs, nexts)``.

    ``pairs`` (int64, ``(2^k, 2)``) has rows ``(pair key (left << 32) | right, first entry)``,
    -1 in a free row; ``nexts[e]`` is the next entry of the same pair (-1 at the end), in
    insertion order. Key and first entry share a cache line, so a lookup costs one miss.
    """
    n = lefts.shape[0]
    size = 16
    while size < n + (n >> 1) + 2:  # at most 2/3 full: short probes, and the table stays small for the caches
        size <<= 1
    pairs = np.full((size, 2), -1, dtype=np.int64)
    last = np.full(size, -1, dtype=np.int64)
    nexts = np.full(n, -1, dtype=np.int64)
    for e in range(n):
        slot = _pair_row(pairs, lefts[e], rights[e])
        if pairs[slot, 0] >= 0:
            nexts[last[slot]] = e
        else:
            pairs[slot, 0] = (lefts[e] << 32) | rights[e]
            pairs[slot, 1] = e
        last[slot] = e
    return pairs, nexts


@kernel(inline="always")
def _entry(a, b, floor, pairs, nexts, priorities):
    """First entry of pair (a, b) with priority >= ``floor``, or -1."""
    e = pairs[_pair_row(pairs, a, b), 1]  # -1 in a free row
    while e >= 0 and priorities[e] < floor:
        e = nexts[e]
    return e


@kernel(inline="always")
def _packed(e, priorities):
    """``(priority << 32) | e`` of entry ``e``, or ``NO_PRIORITY`` for -1."""
    return (priorities[e] << 32) | e if e >= 0 else NO_PRIORITY


@kernel
def merge_short(parts, m, ordered, pairs, nexts, made, priorities, part_priority):
    """Merge ``parts[:m]`` in place by scanning (``part_priority``: scratch of ``m`` entries); returns how many remain."""
    # part_priority[i]: (priority << 32) | entry of the pair at i (NO_PRIORITY: none merges)
    for i in range(m - 1):
        part_priority[i] = _packed(_entry(parts[i], parts[i + 1], 0, pairs, nexts, priorities), priorities)
    while m > 1:
        best = 0
        best_priority = part_priority[0] >> 32
        for i in range(1, m - 1):
            if (part_priority[i] >> 32) < best_priority:
                best_priority = part_priority[i] >> 32
                best = i
        if part_priority[best] == NO_PRIORITY:
            break
        parts[best] = made[part_priority[best] & 0xFFFFFFFF]
        for i in range(best + 1, m - 1):
            parts[i] = parts[i + 1]
            part_priority[i] = part_priority[i + 1]
        m -= 1
        floor = best_priority + 1 if ordered else 0
        for i in range(max(best - 1, 0), min(best + 1, m - 1)):
            part_priority[i] = _packed(_entry(parts[i], parts[i + 1], floor, pairs, nexts, priorities), priorities)
    return m


# A first-entry table is at most a quarter full while that fits in this many bytes (a lookup that
# misses stops at the first free row sooner: two fewer probes on average), else at most half full.
SPARSE_FIRST_BYTES = 2 << 20


@kernel
def first_entry_table(pairs, made, priorities):
    """The byte-level rule's view of a pair table: int64 rows ``(pair key, (priority << 32) | made)``
    of each pair's first entry by open addressing (``pair_slot``; -1 in a free row), at most a
    quarter full up to ``SPARSE_FIRST_BYTES``, else half. One row answers a lookup
    (``merge_short_first``), where ``pairs`` needs two more loads (``priorities``, ``made``) in other
    arrays."""
    n = 0
    for slot in range(pairs.shape[0]):
        if pairs[slot, 0] >= 0 and pairs[slot, 1] >= 0:
            n += 1
    size = 16
    while size < 2 * n + 2:
        size <<= 1
    if 2 * size * 16 <= SPARSE_FIRST_BYTES:
        size <<= 1
    table = np.full((size, 2), -1, dtype=np.int64)
    mask = size - 1
    for slot in range(pairs.shape[0]):
        e = pairs[slot, 1]
        if pairs[slot, 0] >= 0 and e >= 0:
            at = pair_slot(np.uint64(pairs[slot, 0]), mask)
            while table[at, 0] != -1:
                at = (at + 1) & mask
            table[at, 0] = pairs[slot, 0]
            table[at, 1] = (priorities[e] << 32) | made[e]
    return table


@kernel(inline="always")
def _first_merge(table, a, b):
    """``(priority << 32) | made`` of pair (a, b) in a ``first_entry_table``, or ``NO_PRIORITY``."""
    mask = table.shape[0] - 1
    key = (np.int64(a) << 32) | np.int64(b)
    slot = pair_slot(np.uint64(key), mask)
    while True:
        k = table[slot, 0]
        if k == key:
            return table[slot, 1]
        if k == -1:
            return NO_PRIORITY
        slot = (slot + 1) & mask


@kernel(leaf=True)
def merge_short_first(parts, m, table, part_priority):
    """``merge_short`` under the byte-level rule (every pair takes its first entry), through a
    ``first_entry_table``: the same merges in the same order, one load per pair lookup.

    ``part_priority[i]`` holds the pair at ``i`` as ``(priority << 32) | made``. A whole value orders
    pairs as their priorities do: two pairs of one priority make the same token (a priority is a
    merge's position, or the rank of the token it makes), so the scan's ``<`` still keeps the leftmost."""
    for i in range(m - 1):
        part_priority[i] = _first_merge(table, parts[i], parts[i + 1])
    while m > 1:
        best = 0
        best_value = part_priority[0]
        for i in range(1, m - 1):
            if part_priority[i] < best_value:
                best_value = part_priority[i]
                best = i
        if best_value == NO_PRIORITY:
            break
        parts[best] = best_value & 0xFFFFFFFF
        for i in range(best + 1, m - 1):
            parts[i] = parts[i + 1]
            part_priority[i] = part_priority[i + 1]
        m -= 1
        if best > 0:
            part_priority[best - 1] = _first_merge(table, parts[best - 1], parts[best])
        if best < m - 1:
            part_priority[best] = _first_merge(table, parts[best], parts[best + 1])
    return m


@kernel
def _heap_push(heap, size, key):
    """Add ``key`` to the 4-ary min-heap ``heap[:size]`` (int64; children of i: 4i+1..4i+4); returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 2
        if heap[parent] <= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = key
    return size + 1


@kernel
def _heap_pop(heap, size):
    """Remove the smallest key (``heap[0]``, read it first) from the 4-ary heap ``heap[:size]``; returns the new size."""
    size -= 1
    key = heap[size]
    i = 0
    while True:
        first = 4 * i + 1
        if first >= size:
            break
        child = first
        for c in range(first + 1, min(first + 4, size)):
            if heap[c] < heap[child]:
                child = c
        if key <= heap[child]:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = key
    return size


@kernel
def _sort_positions(values, count):
    """Sort ``values[:count]`` (int32, >= 0) ascending in linear time: nothing if already sorted,
    insertion below 64 values, else two 16-bit radix passes."""
    sorted_already = True
    for i in range(1, count):
        if values[i] < values[i - 1]:
            sorted_already = False
            break
    if sorted_already:
        return
    if count < 64:
        for i in range(1, count):
            v = values[i]
            j = i - 1
            while j >= 0 and values[j] > v:
                values[j + 1] = values[j]
                j -= 1
            values[j + 1] = v
        return
    counts = np.empty(65537, dtype=np.int64)
    spare = np.empty(count, dtype=np.int32)
    for shift in (0, 16):
        for i in range(65537):
            counts[i] = 0
        for i in range(count):
            counts[((values[i] >> shift) & 0xFFFF) + 1] += 1
        for i in range(65536):
            counts[i + 1] += counts[i]
        for i in range(count):
            digit = (values[i] >> shift) & 0xFFFF
            spare[counts[digit]] = values[i]
            counts[digit] += 1
        for i in range(count):
            values[i] = spare[i]


@kernel
def _doubled(values):
    """A copy of ``values`` (int64) with twice the room."""
    out = np.empty(2 * values.shape[0], dtype=np.int64)
    for i in range(values.shape[0]):
        out[i] = values[i]
    return out


@kernel
def _bucket_of(bucket_priority, q):
    """Slot of priority ``q`` in the open-addressing ``bucket_priority`` (-1 free): its slot or the free one."""
    mask = bucket_priority.shape[0] - 1
    slot = np.int64((np.uint64(q) * GOLDEN) >> np.uint64(32)) & mask
    while bucket_priority[slot] != q and bucket_priority[slot] != -1:
        slot = (slot + 1) & mask
    return slot


@kernel
def _queue_pair(q, pos, current, bucket_priority, bucket_head, bucket_tail, node_pos, node_next, nodes, queue, queued,
                low, low_size):
    """Queue the pair at ``pos`` with priority ``q``: in its bucket when above ``current``, else in the
    ``low`` heap. Returns ``(nodes, queued, low_size)``."""
    if q <= current:
        return nodes, queued, _heap_push(low, low_size, (q << 32) | pos)  # low has room: see _merge_long
    slot = _bucket_of(bucket_priority, q)
    if bucket_priority[slot] == -1:
        bucket_priority[slot] = q
        bucket_head[slot] = -1
    if bucket_head[slot] < 0:
        bucket_head[slot] = nodes
        queued = _heap_push(queue, queued, q)
    else:
        node_next[bucket_tail[slot]] = nodes
    node_pos[nodes] = pos
    node_next[nodes] = -1
    bucket_tail[slot] = nodes
    return nodes + 1, queued, low_size


@kernel
def _merge_long(parts, m, ordered, pairs, nexts, made, priorities):
    """Same result as the scan, in linear time when merges make pairs of higher priority (the usual case).

    Pairs wait in buckets, one per priority (a list of positions; a small heap orders the
    priorities). The lowest bucket is taken whole, its positions sorted (``_sort_positions``) and
    merged left to right; ``entry[i]`` is the entry of the pair now starting at part ``i`` (-1:
    none), so a position acts only if its pair still has the bucket's priority. A merge that makes
    a pair of priority at or below the bucket's (rare) queues it in a binary heap of keys
    ``(priority << 32) | position``, drained in order between the bucket's positions, so the
    order of merges is exactly the scan's: lowest priority, then leftmost.
    """
    following = np.empty(m, dtype=np.int32)  # int32: a piece stays below 2^31 bytes, the arrays stay small
    preceding = np.empty(m, dtype=np.int32)
    entry = np.empty(m, dtype=np.int32)
    capacity = 3 * m  # m - 1 pairs, then at most 2 per merge
    node_pos = np.empty(capacity, dtype=np.int32)
    node_next = np.empty(capacity, dtype=np.int32)
    batch = np.empty(capacity, dtype=np.int32)
    low = np.empty(16, dtype=np.int64)  # grows when needed: rarely used
    buckets = 16
    while buckets < 2 * min(capacity, priorities.shape[0] + 1):
        buckets <<= 1
    bucket_priority = np.full(buckets, -1, dtype=np.int64)
    bucket_head = np.empty(buckets, dtype=np.int32)
    bucket_tail = np.empty(buckets, dtype=np.int32)
    queue = np.empty(buckets, dtype=np.int64)
    # np.int64, not literal 0: a literal argument would compile _queue_pair once more for it
    nodes, queued, low_size = np.int64(0), np.int64(0), np.int64(0)
    current = np.int64(-1)  # priority of the bucket being merged
    for i in range(m):
        following[i] = i + 1 if i + 1 < m else -1
        preceding[i] = i - 1
    entry[m - 1] = -1
    for i in range(m - 1):
        e = _entry(parts[i], parts[i + 1], 0, pairs, nexts, priorities)
        entry[i] = e
        if e >= 0:
            nodes, queued, low_size = _queue_pair(np.int64(priorities[e]), np.int64(i), current, bucket_priority,
                                                  bucket_head, bucket_tail, node_pos, node_next, nodes, queue, queued,
                                                  low, low_size)
    while queued > 0:
        current = queue[0]
        queued = _heap_pop(queue, queued)
        slot = _bucket_of(bucket_priority, current)
        count = 0
        node = bucket_head[slot]
        while node >= 0:
            batch[count] = node_pos[node]
            count += 1
            node = node_next[node]
        bucket_head[slot] = -1
        _sort_positions(batch, count)
        at = 0
        while at < count or low_size > 0:
            if low_size > 0 and (at >= count or low[0] < ((current << 32) | batch[at])):
                key = low[0]
                low_size = _heap_pop(low, low_size)
                priority = key >> 32
                pos = key & 0xFFFFFFFF
            else:
                priority = current
                pos = np.int64(batch[at])
                at += 1
            e = entry[pos]
            if e < 0 or priorities[e] != priority:
                continue  # stale: the pair at pos changed since it was queued
            right = following[pos]
            parts[pos] = made[e]
            parts[right] = -1
            entry[right] = -1
            after = following[right]
            following[pos] = after
            if after >= 0:
                preceding[after] = pos
            floor = priority + 1 if ordered else 0
            if low_size + 2 > low.shape[0]:
                low = _doubled(low)
            before = preceding[pos]
            if before >= 0:  # the two pairs the merge made: (before, pos) and (pos, after)
                e = _entry(parts[before], parts[pos], floor, pairs, nexts, priorities)
                entry[before] = e
                if e >= 0:
                    nodes, queued, low_size = _queue_pair(
                        np.int64(priorities[e]), np.int64(before), current, bucket_priority, bucket_head,
                        bucket_tail, node_pos, node_next, nodes, queue, queued, low, low_size)
            e = -1
            if after >= 0:
                e = _entry(parts[pos], parts[after], floor, pairs, nexts, priorities)
            entry[pos] = e
            if e >= 0:
                nodes, queued, low_size = _queue_pair(
                    np.int64(priorities[e]), np.int64(pos), current, bucket_priority, bucket_head, bucket_tail,
                    node_pos, node_next, nodes, queue, queued, low, low_size)
    kept = 0
    i = 0
    while i >= 0:
        parts[kept] = parts[i]
        kept += 1
        i = following[i]
    return kept


@kernel
def merge_word(parts, m, long_word, ordered, pairs, nexts, lefts, rights, made, priorities, part_priority):
    """Merge the symbols ``parts[:m]`` in place; returns how many remain.

    ``part_priority`` is scratch of at least ``m`` entries when ``m <= long_word``.
    """
    if m > long_word and m > 1:
        return _merge_long(parts, m, ordered, pairs, nexts, made, priorities)
    return merge_short(parts, m, ordered, pairs, nexts, made, priorities, part_priority)


@kernel
def record_long(long_pieces, count, start, length):
    """Append the row ``(start, length)`` to ``long_pieces[:count]`` (int64 rows, doubled when full);
    returns the array (the same one or a larger copy)."""
    if count == long_pieces.shape[0]:
        grown = np.empty((2 * count + 4, 2), dtype=np.int64)
        for j in range(count):
            grown[j, 0] = long_pieces[j, 0]
            grown[j, 1] = long_pieces[j, 1]
        long_pieces = grown
    long_pieces[count, 0] = start
    long_pieces[count, 1] = length
    return long_pieces


@kernel
def merge_long_pieces(out, out_offsets, long_pieces, count, first_id, ordered, pairs, nexts, made, priorities):
    """The encoders' second pass: merge the long pieces that the first wrote unmerged.

    ``out`` holds documents ``[out_offsets[d], out_offsets[d + 1])`` of ids ``symbol + first_id``;
    ``long_pieces[:count]`` are rows ``(start in out, symbols)`` in ascending order, each an unmerged
    piece of more than ``LONG_WORD`` symbols. Each is merged (``_merge_long``) and the ids after it
    move left to close the gap; ``out_offsets`` is updated. Returns the new number of ids.
    """
    return _merge_pieces(out, out_offsets, long_pieces, count, first_id, ordered, pairs, nexts, made, priorities,
                         np.zeros(0, dtype=np.int64), np.int64(0))


@kernel
def merge_long_pieces_windowed(out, out_offsets, long_pieces, count, pairs, nexts, made, priorities, symbol_lengths,
                               window):
    """``merge_long_pieces`` for byte-level BPE (symbols are token ids, not ordered), a piece longer than
    ``window`` symbols merged window by window (``_merge_windowed``: the rule in the module docstring), so its
    scratch is that of a window. ``symbol_lengths[t]``: the bytes of token ``t``."""
    return _merge_pieces(out, out_offsets, long_pieces, count, np.int64(0), False, pairs, nexts, made, priorities,
                         symbol_lengths, window)


@kernel
def _merge_pieces(out, out_offsets, long_pieces, count, first_id, ordered, pairs, nexts, made, priorities,
                  symbol_lengths, window):
    longest = 0
    for j in range(count):
        longest = max(longest, long_pieces[j, 1])
    if window > 0:
        longest = min(longest, window)
    parts = np.empty(longest, dtype=np.int64)
    saved = np.empty(count, dtype=np.int64)  # ids saved by pieces 0..j
    write = np.int64(0)
    read = np.int64(0)  # out_offsets[0] is 0
    for j in range(count):
        start = long_pieces[j, 0]
        length = long_pieces[j, 1]
        for i in range(start - read):  # the ids between two long pieces move left as one run
            out[write + i] = out[read + i]
        write += start - read
        m = np.int64(-1)
        if window > 0 and length > window:
            m = _merge_windowed(out, start, length, window, parts, pairs, nexts, made, priorities, symbol_lengths,
                                write)
        if m < 0:  # short enough, or the windows found no certain cut: the piece at once
            if length > parts.shape[0]:
                parts = np.empty(length, dtype=np.int64)
            for i in range(length):
                parts[i] = np.int64(out[start + i]) - first_id
            m = _merge_long(parts, length, ordered, pairs, nexts, made, priorities)
            for i in range(m):
                out[write + i] = parts[i] + first_id
        write += m
        read = start + length
        saved[j] = read - write
    documents = out_offsets.shape[0] - 1
    total = out_offsets[documents]
    for i in range(total - read):
        out[write + i] = out[read + i]
    j = 0
    for d in range(1, documents + 1):  # a boundary moves left by what the pieces before it saved
        while j < count and long_pieces[j, 0] < out_offsets[d]:
            j += 1
        if j > 0:
            out_offsets[d] -= saved[j - 1]
    return write + total - read


@kernel
def _merge_windowed(out, start, length, window, parts, pairs, nexts, made, priorities, symbol_lengths, write):
    """Merge the piece ``out[start:start + length]`` (byte-level symbols) window by window into
    ``out[write:]``; the number of ids, or -1 (``out`` unchanged) when a cut cannot be certified.

    Each step merges the next ``window`` symbols alone and keeps its tokens up to the last token end at or
    before three quarters of the window (the merge of those symbols alone: no merge crossed that end);
    the kept tokens of consecutive steps join when the last token ``t1`` of one and the first ``t2``
    of the next merge, from their own symbols, into exactly ``[t1, t2]``. Then no merge of the whole
    piece crosses the cut (the first merge of the whole piece that would cross it is, in the same
    local state, a merge of ``t1``'s and ``t2``'s symbols), so the ids are those of the whole piece.
    """
    kept = np.empty(max(window, 16), dtype=np.int64)  # the piece's ids, until all cuts are certified
    used = 0
    original = np.empty(window, dtype=np.int64)  # the window's symbols before its merge
    last = np.empty(64, dtype=np.int64)  # the symbols of the previous step's last kept token
    last_length = 0
    pos = 0
    while pos < length:
        n = min(window, length - pos)
        for i in range(n):
            original[i] = np.int64(out[start + pos + i])
            parts[i] = original[i]
        k = _merge_long(parts, n, False, pairs, nexts, made, priorities)
        take, cut = k, n
        if pos + n < length:
            take, cut, covered = 0, 0, 0
            for t in range(k):
                covered += symbol_lengths[parts[t]]
                if covered > n - n // 4:
                    break
                take, cut = t + 1, covered
            if take == 0:
                return -1
        if used > 0:
            first_length = symbol_lengths[parts[0]]
            pair = np.empty(last_length + first_length, dtype=np.int64)
            for i in range(last_length):
                pair[i] = last[i]
            for i in range(first_length):
                pair[last_length + i] = original[i]
            merged = _merge_long(pair, last_length + first_length, False, pairs, nexts, made, priorities)
            if merged != 2 or pair[0] != kept[used - 1] or pair[1] != parts[0]:
                return -1
        if used + take > kept.shape[0]:
            grown = np.empty(max(2 * kept.shape[0], used + take), dtype=np.int64)
            for i in range(used):
                grown[i] = kept[i]
            kept = grown
        for t in range(take):
            kept[used + t] = parts[t]
        used += take
        last_length = symbol_lengths[parts[take - 1]]
        if last_length > last.shape[0]:
            last = np.empty(last_length, dtype=np.int64)
        for i in range(last_length):
            last[i] = original[cut - last_length + i]
        pos += cut
    for i in range(used):
        out[write + i] = kept[i]
    return used
