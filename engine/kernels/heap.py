"""The binary min-heap used by BPE training and encoding.

A heap is an int64 array of rows ``(key0, key1, payload)`` ordered by ``(key0, key1)``,
smallest first; ``size`` rows are in use. Training keeps ``(-count, tie key, pair)`` (most
frequent pair first, then the smaller tie key); encoding keeps ``(priority, position, entry)``
(lowest merge priority first, then leftmost). Push and pop cost O(log size).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel

__all__ = ["new_heap", "heap_grow", "heap_push", "heap_pop"]


@kernel
def new_heap(capacity):
    """An empty heap with room for ``capacity`` rows."""
    return np.empty((max(capacity, 16), 3), dtype=np.int64)


@kernel
def heap_grow(heap):
    """A copy of a full ``heap`` with twice the room (call when ``size == heap.shape[0]``)."""
    grown = np.empty((2 * heap.shape[0], 3), dtype=np.int64)
    for i in range(heap.shape[0]):
        for c in range(3):
            grown[i, c] = heap[i, c]
    return grown


@kernel(inline="always")
def _less(heap, a, b):
    return heap[a, 0] < heap[b, 0] or (heap[a, 0] == heap[b, 0] and heap[a, 1] < heap[b, 1])


@kernel(inline="always")
def _swap(heap, a, b):
    for c in range(3):
        t = heap[a, c]
        heap[a, c] = heap[b, c]
        heap[b, c] = t


@kernel
def heap_push(heap, size, key0, key1, payload):
    """Add a row (``heap`` must have room: see ``heap_grow``); returns the new size."""
    i = size
    heap[i, 0] = key0
    heap[i, 1] = key1
    heap[i, 2] = payload
    while i > 0:
        parent = (i - 1) >> 1
        if not _less(heap, i, parent):
            break
        _swap(heap, i, parent)
        i = parent
    return size + 1


@kernel
def heap_pop(heap, size):
    """Remove the smallest row (read it from ``heap[0]`` first); returns the new size."""
    size -= 1
    for c in range(3):
        heap[0, c] = heap[size, c]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            return size
        if child + 1 < size and _less(heap, child + 1, child):
            child += 1
        if not _less(heap, child, i):
            return size
        _swap(heap, child, i)
        i = child
