"""``ReadLimits``: the sizes the corpus readers cut their work into.

They bound the readers' memory and never change what is read: a long line scanned in parts gives
the document a whole read gives, and an id found in the sorted runs is named as one found in the
recent set. A caller passes small ones to reach those paths on small files (``prepare`` passes its
``PrepareLimits``'s).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine.checks import positive_int

__all__ = ["ReadLimits", "LONG_LINE_BYTES", "LONG_STRING_BYTES", "PART_BYTES", "SCAN_BLOCK_BYTES", "BUFFER_IDS"]

# Lines (and files of a folder) longer than this are scanned instead of read whole.
LONG_LINE_BYTES = 1 << 25
# JSON strings longer than this (raw bytes) are left in the file.
LONG_STRING_BYTES = 1 << 20
# Raw bytes of a long text decoded at a time.
PART_BYTES = 1 << 22
# Bytes the long-line scan reads at a time.
SCAN_BLOCK_BYTES = 1 << 23
# Recent id hashes held in a set before they move to the sorted runs.
BUFFER_IDS = 1 << 16


@dataclass(frozen=True)
class ReadLimits:
    """The sizes the corpus readers cut their work into, each a positive int (checked on construction).

    ``long_line_bytes``: with ``long_lines``, a JSONL line (or a file of a folder) longer than this
    is scanned and its text left in the file (``engine.corpus.long_lines``); ``long_string_bytes``:
    a JSON string longer than this is left out of the scanned line's skeleton (a skeleton longer
    than 64 times this is read whole); ``part_bytes``: a long text is decoded about this many raw
    bytes at a time; ``scan_block_bytes``: the scan reads the line this many bytes at a time;
    ``id_buffer``: the duplicate-id check keeps this many recent id hashes in a set before they
    move to its sorted runs (``engine.corpus.unique``).
    """

    long_line_bytes: int = LONG_LINE_BYTES
    long_string_bytes: int = LONG_STRING_BYTES
    part_bytes: int = PART_BYTES
    scan_block_bytes: int = SCAN_BLOCK_BYTES
    id_buffer: int = BUFFER_IDS

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            object.__setattr__(self, item.name, positive_int(getattr(self, item.name), f"limits.{item.name}"))


DEFAULT_READ_LIMITS = ReadLimits()
