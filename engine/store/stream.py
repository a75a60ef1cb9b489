"""One split of a token store read row group by row group (the store rules of engine.store).

``token_batches(store, partition)`` yields ``(values uint32, offsets int64)`` for each row group of
the split's files, in store order: zero-copy views of the decoded group (``offsets`` index
``values`` directly and need not start at 0). With ``threads=1`` one row group is decoded at a
time; with ``threads=N`` up to ``N`` of the following row groups are decoded on ``N`` threads
(pyarrow decodes without the GIL) while the caller handles the current one, still yielded in
order, so memory holds at most ``N + 1`` row groups, never the split. Each decoding thread opens
the file itself (one reader is never shared between threads).
"""

from __future__ import annotations

import itertools
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import StoreError
from engine.partition import Partition
from engine.store.layout import TOKENS_TYPE, store_partition
from engine.store.reader import TokenStore

__all__ = ["token_batches"]

Batch = tuple[np.ndarray, np.ndarray]


def _open(file: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(file, memory_map=True)
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise StoreError(f"{file}: cannot read ({exc}); the file is corrupt") from None


def _row_groups(store: TokenStore, part: Partition) -> Iterator[tuple[Path, int]]:
    """``(file, row group)`` of every row group of the split, in store order."""
    for entry in store._split(part)["files"]:
        file = store.path / entry["name"]
        groups = _open(file).num_row_groups
        for group in range(groups):
            yield file, group


def _decode(file: Path, group: int, parquet: pq.ParquetFile | None = None) -> list[Batch]:
    """The non-empty chunks of one row group's ``tokens`` column as ``(values, offsets)``."""
    parquet = _open(file) if parquet is None else parquet
    try:
        column = parquet.read_row_group(group, columns=["tokens"], use_threads=False).column("tokens")
    except (OSError, pa.ArrowException, ValueError, KeyError) as exc:
        raise StoreError(f"{file}: row group {group}: cannot read its tokens ({exc}); the file is corrupt") from None
    if column.type != TOKENS_TYPE:
        raise StoreError(f"{file}: tokens column is {column.type}, expected {TOKENS_TYPE}")
    if column.null_count:
        raise StoreError(f"{file}: row group {group} holds null token lists; the file is corrupt")
    return [(chunk.values.to_numpy(zero_copy_only=True), chunk.offsets.to_numpy(zero_copy_only=True))
            for chunk in column.chunks if len(chunk)]


def token_batches(store: TokenStore, partition: Partition | str, *, threads: int = 1) -> Iterator[Batch]:
    """``(values, offsets)`` of each row group of the split, in order (see the module docstring)."""
    part = store_partition(partition)
    if threads <= 1:
        for entry in store._split(part)["files"]:
            file = store.path / entry["name"]
            parquet = _open(file)
            for group in range(parquet.num_row_groups):
                yield from _decode(file, group, parquet)
        return
    groups = _row_groups(store, part)
    with ThreadPoolExecutor(threads, thread_name_prefix="engine-decode") as pool:
        pending = deque(pool.submit(_decode, *where) for where in itertools.islice(groups, threads))
        try:
            while pending:
                batches = pending.popleft().result()
                pending.extend(pool.submit(_decode, *where) for where in itertools.islice(groups, 1))
                yield from batches
                del batches
        finally:
            for future in pending:
                future.cancel()

