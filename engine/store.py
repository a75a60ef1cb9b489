"""The token store: Parquet dataset partitioned by split, zero-copy views (SPEC §4).

(Being built; ``EncodedDocument`` is the stable interface.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.corpus import Partition


@dataclass(frozen=True, slots=True)
class EncodedDocument:
    """One encoded document ``[BOS, content..., EOS]``; ``tokens`` is uint32 (often a zero-copy view)."""

    id: str
    partition: Partition
    tokens: np.ndarray
