"""One split of a token store read row group by row group (the store rules of engine.store).

``token_batches(store, partition)`` yields ``(values uint32, offsets int64)`` for each row group of
the split's files, in store order: zero-copy views of the decoded group (``offsets`` index
``values`` directly and need not start at 0). At most one row group is decoded at a time, so a
reader that streams (``engine.export``) holds one group, never the split.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import StoreError
from engine.partition import Partition
from engine.store.layout import TOKENS_TYPE, store_partition
from engine.store.reader import TokenStore

__all__ = ["token_batches"]


def token_batches(store: TokenStore, partition: Partition | str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(values, offsets)`` of each row group of the split, in order (see the module docstring)."""
    part = store_partition(partition)
    for entry in store._split(part)["files"]:
        file = store.path / entry["name"]
        try:
            parquet = pq.ParquetFile(file)
            groups = parquet.num_row_groups
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise StoreError(f"{file}: cannot read ({exc}); the file is corrupt") from None
        for group in range(groups):
            try:
                column = parquet.read_row_group(group, columns=["tokens"]).column("tokens")
            except (OSError, pa.ArrowException, ValueError, KeyError) as exc:
                raise StoreError(f"{file}: row group {group}: cannot read its tokens ({exc}); the file is corrupt") from None
            if column.type != TOKENS_TYPE:
                raise StoreError(f"{file}: tokens column is {column.type}, expected {TOKENS_TYPE}")
            if column.null_count:
                raise StoreError(f"{file}: row group {group} holds null token lists; the file is corrupt")
            for chunk in column.chunks:
                if len(chunk):
                    yield chunk.values.to_numpy(zero_copy_only=True), chunk.offsets.to_numpy(zero_copy_only=True)
