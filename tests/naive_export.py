"""Plain-loop twins of the trainers' format kernels (engine.kernels.export): slow, obvious, the reference."""

from __future__ import annotations

import numpy as np


def naive_gather(values, offsets, bos, drop_first, dtype):
    """(flat ids in ``dtype``, lengths int32, largest id or -1): each document, without its first token
    when ``drop_first`` and that token is ``bos``."""
    out, lengths = [], []
    for d in range(len(offsets) - 1):
        doc = [int(v) for v in values[offsets[d]:offsets[d + 1]]]
        if drop_first and doc and doc[0] == bos:
            doc = doc[1:]
        out.extend(doc)
        lengths.append(len(doc))
    return np.array(out, dtype=dtype), np.array(lengths, dtype=np.int32), max(out, default=-1)


def naive_wrap(values, offsets, bos, eos):
    """(values uint32, offsets int64): ``bos`` before every document, ``eos`` after every document
    that does not end with it (-1: none)."""
    out, ends = [], [0]
    for d in range(len(offsets) - 1):
        doc = [int(v) for v in values[offsets[d]:offsets[d + 1]]]
        if bos >= 0:
            doc = [bos] + doc
        if eos >= 0 and (not doc[1 if bos >= 0 else 0:] or doc[-1] != eos):
            doc = doc + [eos]
        out.extend(doc)
        ends.append(len(out))
    return np.array(out, dtype=np.uint32), np.array(ends, dtype=np.int64)
