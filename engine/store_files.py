"""The names of a token store's files and of ``engine prepare``'s output folder.

A leaf module (it imports nothing of engine): the corpus readers recognise a store or a ``prepare``
output inside a folder corpus by these names without importing the store, which imports the corpus.
``engine.store.layout`` re-exports them with the store's format.
"""

from __future__ import annotations

import os
import re

__all__ = ["MANIFEST_NAME", "TOKENIZER_NAME", "RESUME_NAME", "STORE_NAME", "LOCK_SUFFIX", "STORE_FORMAT", "LOCK_TEXT",
           "manifest_start", "file_head", "lock_pid", "holds_store_manifest", "holds_store_lock"]

# The ``format`` of a store manifest, its first field (the writer puts it first, indented by 2).
STORE_FORMAT = "engine.token_store"


def manifest_start(file_format: str) -> bytes:
    """The first bytes of a manifest engine writes (``json.dumps(..., indent=2)``, ``format`` first)."""
    return b'{\n  "format": "' + file_format.encode() + b'"'


_MANIFEST_START = manifest_start(STORE_FORMAT)
# The whole content of a writer's lock file: its pid (and a newline).
LOCK_TEXT = re.compile(r"[0-9]{1,10}\n?")

# "_" prefix (like the tokenizer's): dataset readers (pyarrow.dataset, pq.read_table(DIR)) skip the
# file, so DIR reads as one Parquet dataset partitioned by split.
MANIFEST_NAME = "_engine.json"
TOKENIZER_NAME = "_tokenizer.json"
# Only inside a writer's temporary directory: per finished file, the digest of the source documents
# it was encoded from, so that a resumed run can prove the file belongs to its corpus.
RESUME_NAME = "_resume.json"
# ``engine prepare --out OUT`` writes its store to OUT/store (beside OUT/store.lock while it writes).
STORE_NAME = "store"
# ``DIR.lock`` beside a store ``DIR`` while a writer holds it.
LOCK_SUFFIX = ".lock"


def file_head(path: os.PathLike, size: int) -> bytes | None:
    """The first ``size`` bytes of a regular file (not a link), or None: how engine tells a file it wrote
    by what it begins with."""
    try:
        if os.path.islink(path) or not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return None


def holds_store_manifest(path: os.PathLike) -> bool:
    """Whether ``path`` is a regular file that begins as a store writer writes its manifest."""
    return file_head(path, len(_MANIFEST_START)) == _MANIFEST_START


def lock_pid(text: str) -> int | None:
    """The pid a lock file's whole ``text`` holds in the lock's format (a positive pid, one line), else None."""
    return int(text) if LOCK_TEXT.fullmatch(text) and int(text) > 0 else None


def holds_store_lock(path: os.PathLike) -> bool:
    """Whether ``path`` is a regular file in a writer lock's format."""
    head = file_head(path, 16)
    return head is not None and lock_pid(head.decode("ascii", "replace")) is not None
