"""Plain-loop twins of the packing and mask kernels: slow, obvious, the reference for tests and benches."""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort

import numpy as np


def naive_pieces(lengths, row_length):
    """[(document, source_start, length)] in document order; documents of < 2 tokens give none."""
    pieces = []
    for d, n in enumerate(lengths):
        start = 0
        while start < n - 1:
            pieces.append((d, start, min(row_length, n - 1 - start)))
            start += row_length
    return pieces


def naive_bfd(piece_lengths, row_length):
    """Best-fit decreasing with bisect over capacity buckets: (row, column, segment) per piece, rows.

    Pieces longest first, ties in piece order; the smallest remaining capacity that fits, lowest
    row index among equal capacities (a heap per capacity bucket); a new row when none fits.
    """
    order = sorted(range(len(piece_lengths)), key=lambda p: (-piece_lengths[p], p))
    buckets: dict[int, list[int]] = {}
    capacities: list[int] = []  # sorted, non-empty buckets only
    row_segments: list[int] = []
    placed = [None] * len(piece_lengths)
    for p in order:
        need = piece_lengths[p]
        k = bisect_left(capacities, need)
        if k == len(capacities):
            row = len(row_segments)
            row_segments.append(0)
            capacity = row_length
        else:
            capacity = capacities[k]
            row = heapq.heappop(buckets[capacity])
            if not buckets[capacity]:
                del buckets[capacity]
                del capacities[k]
        placed[p] = (row, row_length - capacity, row_segments[row])
        row_segments[row] += 1
        remaining = capacity - need
        if remaining > 0:
            if remaining not in buckets:
                buckets[remaining] = []
                insort(capacities, remaining)
            heapq.heappush(buckets[remaining], row)
    return placed, len(row_segments)


def naive_next_fit(piece_lengths, row_length):
    placed = []
    rows, used, segments = 0, row_length, 0
    for need in piece_lengths:
        if used + need > row_length:
            rows, used, segments = rows + 1, 0, 0
        placed.append((rows - 1, used, segments))
        used += need
        segments += 1
    return placed, rows


def naive_pack(documents, row_length, strategy="bfd", roles=None):
    """Rows from token lists: dict of inputs, targets, segment_ids, position_ids, loss_weights (lists)."""
    pieces = naive_pieces([len(d) for d in documents], row_length)
    lengths = [p[2] for p in pieces]
    placed, rows = (naive_bfd if strategy == "bfd" else naive_next_fit)(lengths, row_length)
    out = {
        "inputs": [[0] * row_length for _ in range(rows)],
        "targets": [[0] * row_length for _ in range(rows)],
        "segment_ids": [[-1] * row_length for _ in range(rows)],
        "position_ids": [[0] * row_length for _ in range(rows)],
        "loss_weights": [[0] * row_length for _ in range(rows)],
    }
    for (d, start, n), (row, column, segment) in zip(pieces, placed):
        for t in range(n):
            out["inputs"][row][column + t] = int(documents[d][start + t])
            out["targets"][row][column + t] = int(documents[d][start + t + 1])
            out["segment_ids"][row][column + t] = segment
            out["position_ids"][row][column + t] = t
            out["loss_weights"][row][column + t] = 1 if roles is None else int(roles[d][start + t + 1])
    return out, pieces, placed


def allowed(seg_row, i, j):
    """The attention rule for one (query, key) pair of one row."""
    if seg_row[i] < 0:
        return i == j
    return j <= i and seg_row[j] == seg_row[i]


def naive_dense_mask(segment_ids):
    rows, length = len(segment_ids), len(segment_ids[0]) if len(segment_ids) else 0
    mask = np.zeros((rows, length, length), dtype=bool)
    for b in range(rows):
        for i in range(length):
            for j in range(length):
                mask[b, i, j] = allowed(segment_ids[b], i, j)
    return mask


def naive_additive_mask(segment_ids):
    dense = naive_dense_mask(segment_ids)
    additive = np.full(dense.shape, -np.inf, dtype=np.float32)
    additive[dense] = 0.0
    return additive


def naive_position_ids(segment_ids):
    out = np.zeros(np.shape(segment_ids), dtype=np.int32)
    for b, row in enumerate(segment_ids):
        start = 0
        for i in range(len(row)):
            if i > 0 and row[i] != row[i - 1]:
                start = i
            out[b, i] = 0 if row[i] < 0 else i - start
    return out


def naive_varlen(segment_ids):
    """(cu_seqlens list, max_seqlen): every maximal run of equal ids per row is a sequence."""
    starts = []
    length = len(segment_ids[0]) if len(segment_ids) else 0
    for b, row in enumerate(segment_ids):
        for i in range(len(row)):
            if i == 0 or row[i] != row[i - 1]:
                starts.append(b * length + i)
    bounds = starts + [len(segment_ids) * length]
    longest = max((bounds[k + 1] - bounds[k] for k in range(len(bounds) - 1)), default=0)
    return bounds, longest


def reference_attention(values, additive_mask, segment_ids):
    """Softmax attention with uniform scores over allowed keys; padding outputs zeroed. [B, L]."""
    values = np.asarray(values, dtype=np.float64)
    scores = np.zeros(additive_mask.shape) + additive_mask
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    out = np.einsum("bij,bj->bi", weights, values)
    out[np.asarray(segment_ids) < 0] = 0.0
    return out


def naive_block_tables(segment_ids, block_size):
    """The four block tables of engine.block_masks from the dense rule, as torch's ``create_block_mask`` lays
    them out: per (row, query block) the partial (full) key blocks ascending, then the rest ascending.
    Pairs past the row's end count as not allowed."""
    segment_ids = [list(row) for row in segment_ids]
    rows = len(segment_ids)
    length = len(segment_ids[0]) if rows else 0
    blocks = -(-length // block_size)
    counts = {kind: np.zeros((rows, 1, blocks), np.int32) for kind in ("partial", "full")}
    indices = {kind: np.zeros((rows, 1, blocks, blocks), np.int32) for kind in ("partial", "full")}
    for b in range(rows):
        for qb in range(blocks):
            kinds = []
            for kb in range(blocks):
                allowed_pairs = 0
                for i in range(qb * block_size, (qb + 1) * block_size):
                    for j in range(kb * block_size, (kb + 1) * block_size):
                        if i < length and j < length and allowed(segment_ids[b], i, j):
                            allowed_pairs += 1
                kinds.append("full" if allowed_pairs == block_size * block_size
                             else "partial" if allowed_pairs else "absent")
            for kind in ("partial", "full"):
                chosen = [kb for kb in range(blocks) if kinds[kb] == kind]
                rest = [kb for kb in range(blocks) if kinds[kb] != kind]
                counts[kind][b, 0, qb] = len(chosen)
                indices[kind][b, 0, qb] = chosen + rest
    return counts["partial"], indices["partial"], counts["full"], indices["full"]


def naive_epoch_seed(seed, epoch):
    """The seed rule of engine.batches: epoch 0 uses the seed, epoch e >= 1 SplitMix64's mix of seed + e * gamma."""
    if epoch == 0:
        return seed
    mask = (1 << 64) - 1
    z = (seed + epoch * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def naive_bos_crop(lengths, row_length, buffer_size):
    """bos_crop plan with a plain list buffer: [(document, length, row, column, segment)], rows, cropped.

    Documents with a transition enter the buffer in order; each row takes, while it has room, the
    buffered document with the most transitions that fit (ties: earliest document); when none
    fits, the one with the fewest (ties: earliest) fills the row and the rest of it is cropped.
    """
    stream = [(n - 1, d) for d, n in enumerate(lengths) if n >= 2]
    buffer, pieces, rows, cropped = [], [], 0, 0
    remaining, segment = 0, 0
    while stream or buffer:
        while stream and len(buffer) < buffer_size:
            buffer.append(stream.pop(0))
        if remaining == 0:
            rows, remaining, segment = rows + 1, row_length, 0
        fitting = [entry for entry in buffer if entry[0] <= remaining]
        if fitting:
            best = max(entry[0] for entry in fitting)
            chosen = min((entry for entry in fitting if entry[0] == best), key=lambda entry: entry[1])
            placed = chosen[0]
        else:
            chosen = min(buffer)
            placed = remaining
            cropped += chosen[0] - remaining
        buffer.remove(chosen)
        pieces.append((chosen[1], placed, rows - 1, row_length - remaining, segment))
        segment += 1
        remaining -= placed
    return pieces, rows, cropped


def naive_rows_from_pieces(documents, row_length, pieces, rows, roles=None):
    """Rows from [(document, source_start, length, row, column, segment)] (as naive_pack writes them)."""
    out = {
        "inputs": [[0] * row_length for _ in range(rows)],
        "targets": [[0] * row_length for _ in range(rows)],
        "segment_ids": [[-1] * row_length for _ in range(rows)],
        "position_ids": [[0] * row_length for _ in range(rows)],
        "loss_weights": [[0] * row_length for _ in range(rows)],
    }
    for d, start, n, row, column, segment in pieces:
        for t in range(n):
            out["inputs"][row][column + t] = int(documents[d][start + t])
            out["targets"][row][column + t] = int(documents[d][start + t + 1])
            out["segment_ids"][row][column + t] = segment
            out["position_ids"][row][column + t] = t
            out["loss_weights"][row][column + t] = 1 if roles is None else int(roles[d][start + t + 1])
    return out


def naive_mixture_sources(weights, count):
    """The mixture rule of engine.mixing with plain floats: for each sample the source of the largest deficit
    ``w_i * (n + 1) - taken_i`` (weights normalised), ties to the smaller index."""
    total = sum(float(w) for w in weights)
    normalised = [float(w) / total for w in weights]
    taken = [0] * len(weights)
    chosen = []
    for n in range(count):
        deficits = [w * float(n + 1) - float(t) for w, t in zip(normalised, taken)]
        best = max(range(len(weights)), key=lambda i: (deficits[i], -i))
        taken[best] += 1
        chosen.append(best)
    return chosen


def naive_transposed_tables(counts, indices):
    """Query-side tables from kv-side ones: per (row, key block) the query blocks listing it
    ascending, then the other query blocks ascending."""
    rows, _, q_blocks, k_blocks = indices.shape
    q_counts = np.zeros((rows, 1, k_blocks), np.int32)
    q_indices = np.zeros((rows, 1, k_blocks, q_blocks), np.int32)
    for b in range(rows):
        for kb in range(k_blocks):
            listing = [qb for qb in range(q_blocks) if kb in indices[b, 0, qb, : counts[b, 0, qb]].tolist()]
            q_counts[b, 0, kb] = len(listing)
            q_indices[b, 0, kb] = listing + [qb for qb in range(q_blocks) if qb not in listing]
    return q_counts, q_indices
