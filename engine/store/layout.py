"""The store's layout on disk: names, format version, the Parquet schema's types, and small
helpers the writer and the reader share (the store rules of engine.store). ``EncodedDocument``
lives in engine.buffers."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa

from engine.buffers import EncodedDocument
from engine.partition import Partition
from engine.checks import check_partition
from engine.errors import StoreError
from engine.utf8 import TEXT_SLICE, utf8_length
from engine.store_files import MANIFEST_NAME, RESUME_NAME, STORE_FORMAT, STORE_NAME, TOKENIZER_NAME  # re-exported

__all__ = [
    "FORMAT", "FORMAT_VERSION", "ROLES_FORMAT_VERSION", "FORMAT_VERSIONS", "ROLES_TYPE",
    "MANIFEST_NAME", "TOKENIZER_NAME", "ROW_GROUP_SIZE", "CHUNK_DOCUMENTS", "TOKENS_TYPE",
    "EncodedDocument", "store_partition", "split_dir", "sha256_file", "fsync", "RESUME_NAME", "source_digest",
    "utf8_length",
    "STORE_NAME",
    "store_location",
    "check_store_dir",
]

FORMAT = STORE_FORMAT
FORMAT_VERSION = 1
# A store with a ``roles`` column (chat and instruction data) is format version 2: an engine that
# reads version 1 only would otherwise train on every token.
ROLES_FORMAT_VERSION = 2
FORMAT_VERSIONS = (FORMAT_VERSION, ROLES_FORMAT_VERSION)
ROW_GROUP_SIZE = 16384
CHUNK_DOCUMENTS = 4096
TOKENS_TYPE = pa.large_list(pa.uint32())
ROLES_TYPE = pa.large_list(pa.uint8())


def store_partition(value: Partition | str) -> Partition:
    """``Partition`` from a Partition or its string value; StoreError names the bad value."""
    return check_partition(value, StoreError)


def split_dir(partition: Partition) -> str:
    return f"split={partition.value}"


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def store_location(path: str | os.PathLike) -> Path:
    """``path``, or ``path/store`` when ``path`` is the output folder of ``engine prepare`` (a folder
    with no manifest of its own whose ``store`` is a store): wherever a store is opened by path."""
    path = Path(path)
    if not (path / MANIFEST_NAME).is_file() and (path / STORE_NAME / MANIFEST_NAME).is_file():
        return path / STORE_NAME
    return path


def check_store_dir(path: Path) -> None:
    """StoreError unless ``path`` is a directory: the one message for a store that is not there."""
    if not path.is_dir():
        raise StoreError(f"{path}: no token store here (directory not found)")


def source_digest(doc_id: str, text: str) -> bytes:
    """sha256 of one source document (id and text, each length-prefixed): what a store file's
    ``source_sha256`` (sha256 over its documents' digests, in row order) is made of."""
    h = hashlib.sha256()
    for part in (doc_id, text):
        h.update(utf8_length(part).to_bytes(8, "little"))
        if not isinstance(part, str):  # a LongText, read from its file part by part
            for data in part.utf8_parts():
                h.update(data)
            continue
        for i in range(0, len(part), TEXT_SLICE):
            h.update(part[i:i + TEXT_SLICE].encode("utf-8", "surrogatepass"))
    return h.digest()


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
