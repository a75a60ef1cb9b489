"""Causal-window kernels over a partition's (values uint32, offsets int64) buffers (the window rule of engine.windows).

Document ``d`` is ``values[offsets[d]:offsets[d+1]]``. With ``R = T + 1`` source tokens per window,
its window count is ``0 if n < R else (n - R) // S + 1`` and its windows start at ``0, S, 2S, ...``.

Descriptors come in two equivalent forms:
- explicit ``(document_index, start)``: two int64 arrays, 16 bytes per window;
- packed ``position = offsets[document_index] + start``: one int64, 8 bytes per window. A position
  is an index into ``values`` (``< len(values) <= 2^63 - 1``), so it always fits, and it maps back
  to exactly one document because only documents with at least ``T + 1 >= 2`` tokens own
  windows: ``document_index = searchsorted(offsets, position, "right") - 1``.
Epochs shuffle and gather packed positions (half the memory and half the random swaps).

Gathering copies row ``r`` as ``inputs[r] = values[p : p+T]``, ``targets[r] = values[p+1 : p+T+1]``
straight into the final row-major arrays. Loops index with uint64 so that Numba emits no
negative-index wraparound checks and the inner copy vectorises: the work is writing
``2 * rows * T`` ids, about twice ``np.copyto`` of the same output size when ``values`` is cached.
Counting and enumeration are one pass over ``offsets`` plus one write per window.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel

__all__ = [
    "first_bad_offset",
    "window_counts",
    "window_prefix_sums",
    "enumerate_descriptors",
    "enumerate_positions",
    "decode_positions",
    "gather_positions",
    "gather_descriptors",
]

_ONE = np.uint64(1)


@kernel
def first_bad_offset(offsets, value_count):
    """Index of the first offset that breaks ``0 = o[0] <= o[1] <= ... <= o[-1] = value_count``, else -1."""
    n = offsets.shape[0]
    if n == 0 or offsets[0] != 0:
        return 0
    for i in range(1, n):
        if offsets[i] < offsets[i - 1]:
            return i
    if offsets[n - 1] != value_count:
        return n - 1
    return -1


@kernel(inline="always")
def _count(length, required, stride):
    if length < required:
        return 0
    return (length - required) // stride + 1


@kernel
def window_counts(offsets, context_length, stride, counts):
    """``counts[d]`` = windows of document ``d``; ``counts`` is int64 of length ``len(offsets) - 1``."""
    required = context_length + 1
    for d in range(offsets.shape[0] - 1):
        counts[d] = _count(offsets[d + 1] - offsets[d], required, stride)


@kernel
def window_prefix_sums(offsets, context_length, stride, prefix):
    """``prefix[0] = 0``, ``prefix[d+1] = prefix[d] + count(d)``; ``prefix`` has ``len(offsets)`` entries."""
    required = context_length + 1
    prefix[0] = 0
    total = 0
    for d in range(offsets.shape[0] - 1):
        total += _count(offsets[d + 1] - offsets[d], required, stride)
        prefix[d + 1] = total


@kernel
def enumerate_descriptors(offsets, prefix, stride, document_index, start):
    """Write every window as ``(document_index, start)`` in document order, then by start."""
    for d in range(offsets.shape[0] - 1):
        s = 0
        for w in range(prefix[d], prefix[d + 1]):
            document_index[w] = d
            start[w] = s
            s += stride


@kernel
def enumerate_positions(offsets, prefix, stride, positions):
    """Write every window as its packed position ``offsets[d] + start``, in document order."""
    for d in range(offsets.shape[0] - 1):
        p = offsets[d]
        for w in range(prefix[d], prefix[d + 1]):
            positions[w] = p
            p += stride


@kernel
def decode_positions(offsets, positions, document_index, start):
    """Inverse of ``enumerate_positions`` for any list of valid positions (binary search each)."""
    last = offsets.shape[0] - 1
    for i in range(positions.shape[0]):
        p = positions[i]
        lo = 0
        hi = last
        # Invariant: offsets[lo] <= p < offsets[hi]; ends at the one non-empty document holding p.
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if offsets[mid] <= p:
                lo = mid
            else:
                hi = mid
        document_index[i] = lo
        start[i] = p - offsets[lo]


@kernel
def gather_positions(values, positions, context_length, inputs, targets):
    """Copy window ``positions[r]`` into row ``r`` of ``inputs`` and ``targets`` (``[rows, T]``, C order)."""
    rows = np.uint64(positions.shape[0])
    width = np.uint64(context_length)
    for r in range(rows):
        p = np.uint64(positions[r])
        for t in range(width):
            inputs[r, t] = values[p + t]
            targets[r, t] = values[p + t + _ONE]


@kernel
def gather_batch(values, positions, lo, hi, context_length, inputs, targets):
    """Copy windows ``positions[lo:hi]`` into rows ``0..hi-lo`` of ``inputs`` and ``targets``
    (``[rows, T]``, C order): one batch in one call. Returns 1 when a copied id is ``2^31`` or
    larger (it would not fit int32 rows), else 0; 2, copying nothing, when ``inputs`` or ``targets``
    has fewer rows or another row length. Never reads past ``positions``: rows beyond its end
    are left as they are."""
    rows = min(hi, positions.shape[0]) - lo
    if (inputs.shape[0] < rows or targets.shape[0] < rows or inputs.shape[1] != context_length
            or targets.shape[1] != context_length):
        return 2
    width = np.uint64(context_length)
    high = np.uint32(0)
    for r in range(rows):
        p = np.uint64(positions[lo + r])
        for t in range(width):
            v = values[p + t]
            high |= v
            inputs[r, t] = v
        high |= values[p + width]
        for t in range(width):
            targets[r, t] = values[p + t + _ONE]
    return 1 if high >= np.uint32(1 << 31) else 0


@kernel
def gather_weights(roles, positions, lo, hi, context_length, weights):
    """Loss weights of windows ``positions[lo:hi]``: ``weights[r, t] = roles[p + t + 1]``, the role
    flag of target ``t`` (the weight at input position ``t`` is the flag of target token ``t + 1``)."""
    rows = min(hi, positions.shape[0]) - lo
    width = np.uint64(context_length)
    for r in range(rows):
        p = np.uint64(positions[lo + r])
        for t in range(width):
            weights[r, t] = roles[p + t + _ONE]


@kernel
def gather_descriptors(values, offsets, document_index, start, context_length, inputs, targets):
    """Copy window ``(document_index[r], start[r])`` into row ``r`` of ``inputs`` and ``targets``."""
    rows = np.uint64(start.shape[0])
    width = np.uint64(context_length)
    for r in range(rows):
        p = np.uint64(offsets[document_index[r]] + start[r])
        for t in range(width):
            inputs[r, t] = values[p + t]
            targets[r, t] = values[p + t + _ONE]
