"""CPU kernels for packed epochs (the rule of engine.packed): the ``bos_crop`` plan, the row index, and rows
materialised batch by batch.

``bos_crop_plan``: every row starts at a document start and no document continues into another
row. Documents (those with at least one transition) enter a buffer of ``buffer_size`` in document
order; for each row, while it has room, the buffered document with the most transitions that
still fit goes in whole (ties: earliest document); when none fits, the document with the fewest
transitions (ties: earliest) fills the rest of the row and its remaining transitions are cropped.
Each document taken is replaced by the next one. The buffer is kept sorted by (transitions,
document), so a choice is one binary search and an ``O(buffer)`` shift. Cost ``O(D * buffer)``
worst case, small in practice.

``fill_rows``: for each selected plan row, each piece (left to right) copies its source span
as contiguous runs (inputs ``z[a:a+n]``, targets ``z[a+1:a+n+1]``), writes its segment id, its
positions ``0..n-1`` and its loss weights; the tail is padding (ids 0, segment -1, position 0,
weight 0). Every output byte is written once, by slice copies and fills the compiler vectorises;
measured at memcpy speed for a cached ``[8, 4096]`` batch.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel
from engine.kernels.packing import row_index  # noqa: F401  (the CSR of pieces by row, shared)


@kernel
def bos_crop_plan(offsets, row_length, buffer_size, piece_document, piece_length, piece_row, piece_column,
                  piece_segment):
    """Plan ``bos_crop`` rows (module docstring). Returns ``(pieces, rows, cropped transitions)``.

    Piece arrays need room for one piece per document; every piece starts at source token 0.
    """
    documents = offsets.shape[0] - 1
    buffer_length = np.empty(buffer_size, np.int64)
    buffer_document = np.empty(buffer_size, np.int64)
    count = 0
    next_document = 0
    pieces = 0
    rows = 0
    cropped = 0
    remaining = 0  # room left in the current row; 0 opens a new row
    segment = 0
    while True:
        while count < buffer_size and next_document < documents:
            transitions = offsets[next_document + 1] - offsets[next_document] - 1
            if transitions >= 1:
                # Insert after every entry of fewer or equal transitions: equal lengths stay in document order.
                slot = np.searchsorted(buffer_length[:count], transitions, side="right")
                for k in range(count, slot, -1):
                    buffer_length[k] = buffer_length[k - 1]
                    buffer_document[k] = buffer_document[k - 1]
                buffer_length[slot] = transitions
                buffer_document[slot] = next_document
                count += 1
            next_document += 1
        if count == 0:
            break
        if remaining == 0:
            rows += 1
            remaining = row_length
            segment = 0
        fits = np.searchsorted(buffer_length[:count], remaining, side="right")
        if fits > 0:
            chosen = np.searchsorted(buffer_length[:count], buffer_length[fits - 1], side="left")
            placed = buffer_length[chosen]
        else:
            chosen = 0
            placed = remaining
            cropped += buffer_length[0] - remaining
        piece_document[pieces] = buffer_document[chosen]
        piece_length[pieces] = placed
        piece_row[pieces] = rows - 1
        piece_column[pieces] = row_length - remaining
        piece_segment[pieces] = segment
        pieces += 1
        segment += 1
        remaining -= placed
        for k in range(chosen, count - 1):
            buffer_length[k] = buffer_length[k + 1]
            buffer_document[k] = buffer_document[k + 1]
        count -= 1
    return pieces, rows, cropped


@kernel
def segment_count(selected, row_first):
    total = 0
    for k in range(selected.shape[0]):
        total += row_first[selected[k] + 1] - row_first[selected[k]]
    return total


@kernel
def selected_segments(selected, row_first, row_pieces, segment_piece, segment_row):
    """The pieces of the selected rows, row by row, and the batch row each sits in."""
    s = 0
    for k in range(selected.shape[0]):
        r = selected[k]
        for q in range(row_first[r], row_first[r + 1]):
            segment_piece[s] = row_pieces[q]
            segment_row[s] = k
            s += 1


@kernel
def fill_rows(values, offsets, roles, has_roles, selected, row_first, row_pieces, piece_document,
              piece_source_start, piece_length, piece_column, inputs, targets, segment_ids, position_ids,
              loss_weights):
    """Materialise plan rows ``selected`` into row ``k`` of the five ``[>= len(selected), L]`` outputs.

    Whole spans at a time: copies loop over two 1-D views, fills are slice assignments; both
    vectorise (about 5x indexing the 2-D outputs element by element).
    """
    for k in range(selected.shape[0]):
        r = selected[k]
        cursor = 0
        segment = 0
        for q in range(row_first[r], row_first[r + 1]):
            p = row_pieces[q]
            column = piece_column[p]
            if column > cursor:  # a gap before the piece is padding
                _pad(inputs, targets, segment_ids, position_ids, loss_weights, k, cursor, column)
            n = piece_length[p]
            end = column + n
            source = offsets[piece_document[p]] + piece_source_start[p]
            # Copies as loops over two 1-D views (vectorised, 2.5x a slice assignment); fills as slices.
            span = values[source : source + n + 1]
            row_inputs = inputs[k, column:end]
            row_targets = targets[k, column:end]
            for t in range(n):
                row_inputs[t] = span[t]
            for t in range(n):
                row_targets[t] = span[t + 1]
            segment_ids[k, column:end] = segment
            positions = position_ids[k, column:end]
            for t in range(n):
                positions[t] = t
            if has_roles:
                flags = roles[source + 1 : source + n + 1]
                weights = loss_weights[k, column:end]
                for t in range(n):
                    weights[t] = flags[t]
            else:
                loss_weights[k, column:end] = 1
            cursor = end
            segment += 1
        _pad(inputs, targets, segment_ids, position_ids, loss_weights, k, cursor, inputs.shape[1])


@kernel(inline="always")
def _pad(inputs, targets, segment_ids, position_ids, loss_weights, k, lo, hi):
    inputs[k, lo:hi] = 0
    targets[k, lo:hi] = 0
    segment_ids[k, lo:hi] = -1
    position_ids[k, lo:hi] = 0
    loss_weights[k, lo:hi] = 0
