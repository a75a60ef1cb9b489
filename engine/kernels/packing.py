"""CPU kernels for packing documents into rows of ``L`` input/target positions (the packing rules of engine.packing).

Pieces: a document of ``n`` source tokens has ``n - 1`` transitions; it is cut into pieces of
at most ``L`` transitions, piece ``k`` starting at source token ``k * L`` (so consecutive pieces
share one source token and every transition lands in exactly one piece). ``n < 2`` gives none.

Best-fit decreasing (``best_fit_decreasing``), ``O(P log R)`` amortised for ``P`` pieces, ``R`` rows:
1. order pieces by length, longest first, ties in piece order (a stable counting sort, ``O(P + L)``);
2. rows with the same remaining capacity ``c`` sit in bucket ``c``, a skew heap keyed by row
   index; a two-level bitset over ``c = 0..L`` marks the non-empty buckets;
3. each piece goes to the row of the smallest remaining capacity that fits (first non-empty
   bucket ``>= length``: one masked word, then the summary word, lowest set bit by de Bruijn
   multiplication, ``O(1 + L / 4096)``), lowest row index among equals (the
   heap's minimum); when none fits a new row opens. Its column is ``L - capacity``, its segment
   id the number of pieces the row already holds.

Next-fit (``next_fit``), ``O(P)``: pieces in document order; a piece that does not fit the last
row opens a new one. ``fill_rows`` then copies the tokens of a range of pieces (each piece owns
its span of its row, so ranges may run on threads and the output does not depend on their count).

Kernels allocate nothing: the caller passes every work array, so a first run compiles no
allocation routines (compile time is what a first run of ``pack_documents`` mostly costs).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel


@kernel
def cut_pieces(offsets, row_length, piece_document, piece_source_start, piece_length):
    """Fill the piece table in document order: document, first source offset, length (positions)."""
    p = 0
    for d in range(offsets.shape[0] - 1):
        transitions = offsets[d + 1] - offsets[d] - 1
        start = 0
        while start < transitions:
            piece_document[p] = d
            piece_source_start[p] = start
            piece_length[p] = min(row_length, transitions - start)
            start += row_length
            p += 1


@kernel
def _heap_merge(left, right, a, b):
    """Merge two skew heaps (roots a, b; -1 = empty) keyed by node index; returns the new root."""
    if a < 0:
        return b
    if b < 0:
        return a
    if b < a:
        a, b = b, a
    root = a
    node = a
    other = np.int32(b)
    while True:
        below = right[node]
        right[node] = left[node]
        if below < 0:
            left[node] = other
            return root
        if other < below:
            below, other = other, below
        left[node] = below
        node = below


_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.array(
    [0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43, 22,
     45, 39, 33, 30, 24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23,
     11, 46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6],
    dtype=np.int64,
)


@kernel
def _lowest_bit(word):
    """Index of the lowest set bit of a non-zero uint64 (de Bruijn multiplication)."""
    isolated = word & (~word + np.uint64(1))
    return _DEBRUIJN_INDEX[(isolated * _DEBRUIJN) >> np.uint64(58)]


@kernel
def _bits_set(bits, summary, leaf, on):
    """Mark (on) or clear bucket ``leaf`` in a two-level bitset (summary bit = word non-empty)."""
    word = leaf >> 6
    bit = np.uint64(1) << np.uint64(leaf & 63)
    if on:
        bits[word] |= bit
        summary[word >> 6] |= np.uint64(1) << np.uint64(word & 63)
    else:
        bits[word] &= ~bit
        if bits[word] == 0:
            summary[word >> 6] &= ~(np.uint64(1) << np.uint64(word & 63))


@kernel
def _bits_first_at_least(bits, summary, leaf):
    """Smallest marked bucket ``>= leaf``, or -1. ``O(1 + buckets / 4096)``."""
    word = leaf >> 6
    masked = bits[word] & (np.uint64(0xFFFFFFFFFFFFFFFF) << np.uint64(leaf & 63))
    if masked:
        return (word << 6) + _lowest_bit(masked)
    word += 1
    group = word >> 6
    if group >= summary.shape[0]:
        return -1
    masked_group = summary[group] & (np.uint64(0xFFFFFFFFFFFFFFFF) << np.uint64(word & 63)) if (word & 63) else summary[group]
    while not masked_group:
        group += 1
        if group >= summary.shape[0]:
            return -1
        masked_group = summary[group]
    word = (group << 6) + _lowest_bit(masked_group)
    return (word << 6) + _lowest_bit(bits[word])


@kernel
def best_fit_decreasing(piece_length, row_length, piece_row, piece_column, piece_segment, first, cursor, order,
                        bits, summary, bucket_root, left, right, row_segments):
    """Place pieces by best-fit decreasing (module docstring); returns the number of rows.

    The arguments after ``piece_segment`` are fresh work arrays (``engine.packing._bfd_scratch``):
    int64 ``first``, ``cursor`` [L + 2] (``first`` zeroed) and ``order`` [P]; uint64 bitsets ``bits``
    [L / 64 + 1] and ``summary`` [L / 4096 + 1] (zeroed); int32 ``bucket_root`` [L + 1] (all -1),
    ``left``, ``right`` and ``row_segments`` [P] (``row_segments`` zeroed).
    """
    pieces = piece_length.shape[0]
    # Stable counting sort, longest first: pieces of length n sit at first[L - n] .. first[L - n + 1].
    for p in range(pieces):
        first[row_length - piece_length[p] + 1] += 1
    for c in range(1, row_length + 2):
        first[c] += first[c - 1]
    for c in range(row_length + 2):
        cursor[c] = first[c]
    for p in range(pieces):
        slot = row_length - piece_length[p]
        order[cursor[slot]] = p
        cursor[slot] += 1

    rows = 0
    # Typed flags rather than literal True/False, which would compile _bits_set once for each.
    on, off = pieces >= 0, pieces < 0
    for slot in range(row_length):
        need = row_length - slot
        for k in range(first[slot], first[slot + 1]):
            p = order[k]
            capacity = _bits_first_at_least(bits, summary, need)
            if capacity < 0:
                row = rows
                rows += 1
                capacity = row_length
            else:
                row = bucket_root[capacity]
                bucket_root[capacity] = _heap_merge(left, right, left[row], right[row])
                if bucket_root[capacity] < 0:
                    _bits_set(bits, summary, capacity, off)
            piece_row[p] = row
            piece_column[p] = row_length - capacity
            piece_segment[p] = row_segments[row]
            row_segments[row] += 1
            remaining = capacity - need
            if remaining > 0:
                left[row] = -1
                right[row] = -1
                if bucket_root[remaining] < 0:
                    _bits_set(bits, summary, remaining, on)
                bucket_root[remaining] = _heap_merge(left, right, bucket_root[remaining], np.int32(row))
    return rows


@kernel
def next_fit(piece_length, row_length, piece_row, piece_column, piece_segment):
    """Place pieces in order; a piece that does not fit the last row opens a new one. Returns rows."""
    rows = 0
    used = row_length
    segments = 0
    for p in range(piece_length.shape[0]):
        if used + piece_length[p] > row_length:
            rows += 1
            used = 0
            segments = 0
        piece_row[p] = rows - 1
        piece_column[p] = used
        piece_segment[p] = segments
        used += piece_length[p]
        segments += 1
    return rows


@kernel
def row_index(piece_row, piece_segment, rows, row_first, row_pieces):
    """CSR of pieces by row: ``row_pieces[row_first[r]:row_first[r + 1]]`` are row ``r``'s pieces
    in segment order (left to right)."""
    for r in range(rows + 1):
        row_first[r] = 0
    for p in range(piece_row.shape[0]):
        row_first[piece_row[p] + 1] += 1
    for r in range(rows):
        row_first[r + 1] += row_first[r]
    for p in range(piece_row.shape[0]):
        row_pieces[row_first[piece_row[p]] + piece_segment[p]] = p


@kernel
def fill_rows(
    values, offsets, roles, has_roles, piece_document, piece_source_start, piece_length,
    piece_row, piece_column, piece_segment, inputs, targets, segment_ids, position_ids, loss_weights,
    first_piece, stop_piece,
):
    """Copy pieces ``first_piece..stop_piece - 1`` into their row spans; padding must be pre-filled
    by the caller. Each piece owns its span, so callers may run disjoint piece ranges on threads.

    inputs[r, c + t] = z[a + t], targets[r, c + t] = z[a + t + 1], position t, weight = role of
    the target token (1 when ``has_roles`` is false), for the piece's source span ``z[a : a + n + 1]``.
    """
    for p in range(first_piece, stop_piece):
        source = offsets[piece_document[p]] + piece_source_start[p]
        row = piece_row[p]
        column = piece_column[p]
        segment = piece_segment[p]
        for t in range(piece_length[p]):
            inputs[row, column + t] = values[source + t]
            targets[row, column + t] = values[source + t + 1]
            segment_ids[row, column + t] = segment
            position_ids[row, column + t] = t
            loss_weights[row, column + t] = roles[source + t + 1] if has_roles else 1
