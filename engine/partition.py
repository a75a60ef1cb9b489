"""``Partition``: train, validation or test, the basic type every layer names.

A leaf module (it imports nothing of engine), so checks, corpus readers, the store and every batch
source can name a partition without importing each other. ``engine.corpus`` and
``engine.corpus.splits`` re-export both names.
"""

from __future__ import annotations

import enum

__all__ = ["Partition", "PARTITIONS"]


class Partition(str, enum.Enum):
    """The three partitions; every document belongs to exactly one."""

    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"

    def __str__(self) -> str:
        return self.value


PARTITIONS = (Partition.TRAIN, Partition.VALIDATION, Partition.TEST)
