"""Id uniqueness in fixed memory: 8 bytes per id, whatever the ids' length.

``SeenIds`` keeps a 64-bit hash of every id added: recent ones in a set of at most ``buffer_ids``
entries (``ReadLimits.id_buffer`` of the readers, 65,536 by default), the rest in sorted int64 runs
(O(log n) runs; a run merges into the larger one before it once it holds an eighth of it, growing
that one in place, linearly), so memory is 8 bytes per id (about 9 while the largest runs merge).
A hash that is seen again is only a suspect: two ids may share a hash. ``add`` reports suspects of
the recent set at once; those of the older runs surface when the set is flushed (``add`` or
``finish``). The owner then re-reads its own ids (``find_duplicate``) to name the
duplicate exactly, or to learn it was a collision of two different ids, which is no error.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from engine.checks import positive_int
from engine.corpus.limits import BUFFER_IDS

__all__ = ["SeenIds", "find_duplicate", "id_hash", "BUFFER_IDS"]

# A run merges into the one before it once it holds 1/MERGE_RATIO of it: the merge's buffer (the
# smaller run) stays a small share of the set, and there are O(log n) runs.
MERGE_RATIO = 8


def id_hash(doc_id: str) -> int:
    """The 64-bit hash ``SeenIds`` keeps (Python's, fixed for the life of the process)."""
    return hash(doc_id)


class SeenIds:
    """The hashes of the ids added so far (see the module docstring); ``buffer_ids``: how many recent
    hashes the set holds before they move to the sorted runs."""

    def __init__(self, buffer_ids: int = BUFFER_IDS) -> None:
        self.buffer_ids = positive_int(buffer_ids, "buffer_ids")
        self.recent: set[int] = set()
        self.runs: list[np.ndarray] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, doc_id: str) -> list[int]:
        """Add one id; the hashes now seen twice (suspects), usually none."""
        h = id_hash(doc_id)
        self.count += 1
        if h in self.recent:
            return [h]
        self.recent.add(h)
        return self.flush() if len(self.recent) >= self.buffer_ids else []

    def add_many(self, doc_ids: Iterable[str]) -> list[int]:
        """Add ids at once (checked against each other and everything before); the suspects."""
        suspects = []
        for doc_id in doc_ids:
            h = id_hash(doc_id)
            self.count += 1
            if h in self.recent:
                suspects.append(h)
            self.recent.add(h)
        if len(self.recent) >= self.buffer_ids:
            suspects += self.flush()
        return suspects

    def flush(self) -> list[int]:
        """Move the recent hashes into the sorted runs; the ones the runs already held."""
        if not self.recent:
            return []
        new = np.fromiter(self.recent, dtype=np.int64, count=len(self.recent))
        new.sort()
        self.recent = set()
        suspects: list[int] = []
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, new), run.shape[0] - 1)
            suspects += new[run[at] == new].tolist()
        self.runs.append(new)
        while len(self.runs) > 1 and self.runs[-2].shape[0] <= MERGE_RATIO * self.runs[-1].shape[0]:
            last = self.runs.pop()
            merged = self.runs[-1]
            size = merged.shape[0]
            # Grown in place (a large block is remapped, not copied), then merged by the stable sort
            # (timsort: two sorted runs, linear, a buffer of the smaller one): no second copy of the set.
            merged.resize(size + last.shape[0], refcheck=False)
            merged[size:] = last
            del last
            merged.sort(kind="stable")
        return suspects

    def finish(self) -> list[int]:
        """The suspects not reported yet (call once every id is added)."""
        return self.flush()


def find_duplicate(records: Iterator[tuple[str, str]], suspects: Iterable[int]) -> tuple[str, str, str] | None:
    """Among ``(id, where)`` records in order, the first id seen twice whose hash is a suspect:
    ``(id, where first, where again)``; None when the suspects were only collisions."""
    wanted = set(suspects)
    first: dict[str, str] = {}
    for doc_id, where in records:
        if id_hash(doc_id) not in wanted:
            continue
        if doc_id in first:
            return doc_id, first[doc_id], where
        first[doc_id] = where
    return None
