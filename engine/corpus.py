"""Documents, partitions, corpus readers and split manifests (SPEC §2).

(Readers and manifests are being built; the types below are the stable interface.)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Partition(str, enum.Enum):
    """The three partitions; every document belongs to exactly one."""

    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Document:
    """One source text with a stable, non-empty, unique id."""

    id: str
    text: str
