"""CPU kernels of the trainers' formats (the rules of engine.export and engine.megatron).

- ``gather_documents``: a batch of documents copied into one flat output of the file's dtype, each
  without its first token when that token is dropped (``drop_first`` and the document starts with
  ``bos``); one pass, reading each id once and writing it once.
- ``wrapped_lengths`` / ``wrap_documents``: documents read back from a file as uint32 ids, each given
  ``bos`` at its start and ``eos`` at its end where it does not already end with it (``-1``: nothing
  added).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel


@kernel
def gather_documents(values, offsets, bos, drop_first, out, lengths):
    """Copy documents ``0 .. len(offsets) - 2`` of ``(values, offsets)`` into ``out`` (any integer
    dtype, at least as long as the ids kept), each without its first token when ``drop_first`` and
    that token equals ``bos``; ``lengths[d]`` = ids written for document ``d``. Returns
    ``(ids written, largest id written or -1)``. Each document is copied and scanned through slices
    indexed by ``range()`` (no dependence between iterations, no negative-index check), and the
    largest id is a separate reduction, so both loops vectorise."""
    documents = offsets.shape[0] - 1
    n = 0
    for d in range(documents):
        start = offsets[d]
        stop = offsets[d + 1]
        if drop_first and stop > start and np.int64(values[start]) == bos:
            start += 1
        count = stop - start
        source = values[start:stop]
        target = out[n:n + count]
        for i in range(count):  # indices from range(): no negative-index check, the loop vectorises
            target[i] = source[i]
        n += count
        lengths[d] = count
    largest = np.uint32(0)
    for d in range(documents):
        start = offsets[d]
        stop = offsets[d + 1]
        if drop_first and stop > start and np.int64(values[start]) == bos:
            start += 1
        source = values[start:stop]
        for i in range(source.shape[0]):
            largest = max(largest, source[i])
    return n, np.int64(largest) if n else np.int64(-1)


@kernel
def wrapped_lengths(values, offsets, bos, eos, out_offsets):
    """``out_offsets`` (int64, ``documents + 1``) of the documents once wrapped (see ``wrap_documents``)."""
    documents = offsets.shape[0] - 1
    out_offsets[0] = 0
    for d in range(documents):
        start = offsets[d]
        stop = offsets[d + 1]
        length = stop - start
        if bos >= 0:
            length += 1
        if eos >= 0 and (stop == start or np.int64(values[stop - 1]) != eos):
            length += 1
        out_offsets[d + 1] = out_offsets[d] + length


@kernel
def wrap_documents(values, offsets, bos, eos, out_offsets, out):
    """Write each document into ``out`` (uint32) at ``out_offsets[d]``: ``bos`` first, its ids, ``eos``
    last where it does not end with ``eos`` (``-1``: none). An empty document becomes ``[bos, eos]``
    (each when given)."""
    documents = offsets.shape[0] - 1
    for d in range(documents):
        start = offsets[d]
        stop = offsets[d + 1]
        n = out_offsets[d]
        if bos >= 0:
            out[n] = bos
            n += 1
        source = values[start:stop]
        target = out[n:n + (stop - start)]
        for i in range(source.shape[0]):  # slices and range(): the loop vectorises
            target[i] = source[i]
        n += stop - start
        if eos >= 0 and (stop == start or np.int64(values[stop - 1]) != eos):
            out[n] = eos
