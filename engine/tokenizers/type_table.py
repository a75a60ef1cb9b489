"""Pass 1 of a fit: the distinct types of the training text with their counts, in compact arrays.

``count_types(trainer, batches, threads)`` counts each batch of training texts with the kind's
``Trainer.count_types`` on a pool thread (``engine.parallel.OrderedPool``) and folds the batches into
one ``TypeCounts`` table in batch order, so types are numbered by first appearance and the counts
equal those of one pass over the whole text: ``trainer.train_from_counts(table.types(),
table.counts())`` (or ``trainer.train_from_table(table)``, which reads the arrays directly) gives the
tokenizer ``train`` gives on it. The Ray executor folds its workers' tables into the same table.

Memory: the table holds every type's bytes once (UTF-8 for text types) plus 40 bytes per type: an
int64 start, an int64 count, a uint64 hash and at most two int64 index slots (the index is kept at
most half full). A table of Python objects (a dict of str or bytes) costs about 280 bytes per type,
which is what decides the peak when a corpus has millions of distinct words (1M tiny documents of
random letters). Cost: O(types' bytes) per batch, never O(tokens).

The type cap (``--max-types N``, ``TypeCounts.most_frequent``): the fit reads the ``N`` most frequent
types of the whole table, by count (highest first), ties by first appearance; the kept types keep
their counts and their order of first appearance, the rest are dropped. Counts are those of the whole
stream, so the kept types are the same for any thread count and any batching. The cap bounds what
the fit builds from the table (BPE's pair tables, a word vocabulary), not the table itself.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from engine.kernels.type_table import intern_batch, rehash
from engine.parallel import OrderedPool, resolve_threads

__all__ = ["TypeCounts", "count_types", "cap_types", "describe_max_types", "train_on_table"]

BYTES_PER_TYPE = 40  # beyond the type's own bytes: start, count, hash, two index slots


class TypeCounts:
    """Distinct types (all ``str`` or all ``bytes``) numbered by first appearance, with int64 counts.

    ``add(types, counts)`` folds one batch (its distinct types in first-appearance order); call it
    for the batches in stream order and the numbering is that of one pass over the whole stream.
    ``types()`` rebuilds the Python objects (for ``train_from_counts``); ``pool``/``starts``/``counts()``
    are the arrays themselves.
    """

    def __init__(self) -> None:
        self.text: bool | None = None  # str types (stored as UTF-8), bytes types, or not known yet
        self._slots = np.zeros(1 << 12, dtype=np.int64)
        self._hashes = np.empty(1 << 11, dtype=np.uint64)
        self._starts = np.zeros((1 << 11) + 1, dtype=np.int64)
        self._counts = np.empty(1 << 11, dtype=np.int64)
        self._pool = np.empty(1 << 16, dtype=np.uint8)
        self._used = 0
        self._pool_used = 0

    def add(self, types: list, counts) -> None:
        if not len(types):
            return
        text = isinstance(types[0], str)
        if self.text is None:
            self.text = text
        elif self.text != text:
            raise TypeError("TypeCounts holds types of one kind: all str or all bytes")
        encoded = [t.encode("utf-8", "surrogatepass") for t in types] if text else types
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter((len(t) for t in encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        self._make_room(len(encoded), data.shape[0])
        self._used, self._pool_used = intern_batch(
            data, offsets, np.ascontiguousarray(counts, dtype=np.int64), self._slots, self._hashes, self._pool,
            self._starts, self._counts, self._used, self._pool_used)

    def _make_room(self, new_types: int, new_bytes: int) -> None:
        """Room for every type of a batch to be new: arrays, pool, and an index at most half full."""
        need = self._used + new_types
        if need > self._counts.shape[0]:
            size = max(2 * self._counts.shape[0], need)
            self._hashes = _grown(self._hashes, size)
            self._counts = _grown(self._counts, size)
            self._starts = _grown(self._starts, size + 1)
        if 2 * need > self._slots.shape[0]:
            slots = 1 << max(int(2 * need - 1).bit_length(), 12)
            self._slots = np.zeros(slots, dtype=np.int64)
            rehash(self._slots, self._hashes, self._used)
        if self._pool_used + new_bytes > self._pool.shape[0]:
            self._pool = _grown(self._pool, max(2 * self._pool.shape[0], self._pool_used + new_bytes))

    @property
    def pool(self) -> np.ndarray:
        """The types' bytes, type ``t`` at ``pool[starts[t]:starts[t + 1]]`` (a view)."""
        return self._pool[: self._pool_used]

    @property
    def starts(self) -> np.ndarray:
        """int64, ``len(self) + 1`` entries (a view)."""
        return self._starts[: self._used + 1]

    def types(self) -> list:
        data = self.pool.tobytes()
        bounds = self.starts.tolist()
        if self.text:
            return [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(bounds, bounds[1:])]
        return [data[a:b] for a, b in zip(bounds, bounds[1:])]

    def counts(self) -> np.ndarray:
        return self._counts[: self._used].copy()

    def most_frequent(self, limit: int) -> "TypeCounts":
        """The table of the ``limit`` most frequent types (the type cap rule, ``--max-types``): types by
        count, highest first, ties by first appearance (the earlier kept); the kept types keep their
        counts and their order of first appearance (renumbered 0..limit-1), the others are dropped.
        ``self`` when it holds at most ``limit`` types."""
        if self._used <= limit:
            return self
        counts = self._counts[: self._used]
        kept = np.lexsort((np.arange(self._used), -counts))[:limit]
        kept.sort()  # first-appearance order
        starts = self.starts
        lengths = starts[kept + 1] - starts[kept]
        out = TypeCounts()
        out.text = self.text
        out._starts = np.zeros(limit + 1, dtype=np.int64)
        np.cumsum(lengths, out=out._starts[1:])
        total = int(out._starts[-1])
        # byte j of the new pool is byte (start of its type) + (j - new start of its type) of the old one
        out._pool = self._pool[np.repeat(starts[kept] - out._starts[:-1], lengths) + np.arange(total)]
        out._counts = counts[kept].copy()
        out._hashes = self._hashes[kept].copy()
        out._slots = np.zeros(1 << max(int(2 * limit - 1).bit_length(), 12), dtype=np.int64)
        rehash(out._slots, out._hashes, limit)
        out._used, out._pool_used = limit, total
        return out

    def nbytes(self) -> int:
        """Bytes the table's arrays hold now (allocated, not only used)."""
        return sum(a.nbytes for a in (self._slots, self._hashes, self._starts, self._counts, self._pool))

    def __len__(self) -> int:
        return self._used


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    grown = np.empty(size, dtype=array.dtype)
    grown[: array.shape[0]] = array
    return grown


def count_types(trainer, batches: Iterable[list[str]], threads: int | None = None) -> TypeCounts:
    """Pass 1 of a fit: ``trainer.count_types`` on each batch on ``threads`` threads, folded in order."""
    table = TypeCounts()
    for types, counts in OrderedPool(trainer.count_types, resolve_threads(threads)).map(iter(batches)):
        table.add(types, counts)
    return table


def cap_types(table: TypeCounts, limit: int | None) -> tuple[TypeCounts, dict | None]:
    """``(table, report)``: with a ``limit`` (``--max-types N``), the table of its N most frequent types
    (``TypeCounts.most_frequent``'s rule) and what ``report.json`` records as ``max_types``; else
    ``(table, None)``."""
    if limit is None:
        return table, None
    capped = table.most_frequent(limit)
    return capped, {"limit": limit, "types": len(table), "kept": len(capped), "dropped": len(table) - len(capped)}


def describe_max_types(report: dict) -> str:
    """The summary line of a ``cap_types`` report."""
    return (f"max types: kept {report['kept']:,} of {report['types']:,} types (at most {report['limit']:,}; "
            f"{report['dropped']:,} dropped)")


def train_on_table(trainer, table: TypeCounts):
    """The tokenizer ``trainer`` fits on ``table``: from its arrays where the trainer reads them
    (``train_from_table``), else from the types and counts as objects."""
    train_from_table = getattr(trainer, "train_from_table", None)
    return train_from_table(table) if train_from_table is not None else trainer.train_from_counts(
        table.types(), table.counts())
