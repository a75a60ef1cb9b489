"""Megatron's indexed dataset (``PREFIX.bin`` / ``PREFIX.idx``): its layout, its dtype rule, and the
pair opened as read-only ``TokenBuffers``.

The layout (what megatron-core's ``IndexedDatasetBuilder`` writes and ``IndexedDataset`` reads; NeMo
and GPT-NeoX read the same files)::

    PREFIX.idx   b"MMIDIDX\\x00\\x00"             9 bytes
                 version                         u64, 1
                 dtype code                      u8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
                                                     6 float64, 7 float32, 8 uint16
                 N, the sequence count           u64
                 D, the document-index count     u64
                 lengths[N]                      int32, tokens per sequence
                 pointers[N]                     int64, byte offset of each sequence in .bin
                 document indices[D]             int64: 0, then the sequence index ending each document
    PREFIX.bin   the tokens of every sequence, in order, C order, no header

All integers are little-endian. ``dtype_for_vocabulary`` is Megatron's rule (``DType.optimal_dtype``):
uint16 when the vocabulary holds fewer than 65,500 tokens, else int32. engine writes one sequence per
document (``D = N + 1``, document indices ``0, 1, ..., N``); see engine.export.

Reading (``open_megatron``). The pair is checked before anything is mapped: the magic, the version,
the dtype code (an integer dtype), that the ``.idx`` holds exactly the arrays its counts announce (an
index with a mode byte per sequence, a multimodal one, is refused by name), that the document indices
start at 0, never fall and end at N, that the pointers are the running sum of the lengths (sequences
stored back to back, as every builder writes them) and that ``.bin`` holds exactly the tokens the
lengths add up to. A broken rule is a ``StoreError`` naming the file and the field. A document is
the sequences between two document indices, read as one run of tokens.

Ids become uint32 (what every consumer of ``TokenBuffers`` reads). int32 and uint32 tokens are
served zero-copy: a read-only memory map of ``.bin`` viewed as uint32 (ids are never negative; the
values are not scanned). Every other integer dtype (uint16 above all, Megatron's choice for small
vocabularies) is copied once into a uint32 array (4 bytes per token in memory), as is every file
opened with ``bos=`` or ``eos=``: ``bos`` is put before every document and ``eos`` after every
document that does not already end with it, so a pair written without BOS (``export --no-bos``, or
GPT-2 style) or without end-of-document tokens (``preprocess_data.py`` without ``--append-eod``)
reads back as ``[BOS, content..., EOS]``. Documents are named ``<prefix name>:<index>`` (index from
0), in file order.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from engine.buffers import TokenBuffers
from engine.checks import check_partition
from engine.errors import ConfigurationError, StoreError
from engine.kernels.export import wrap_documents, wrapped_lengths
from engine.partition import Partition

__all__ = ["MAGIC", "VERSION", "DTYPE_CODES", "dtype_for_vocabulary", "index_bytes", "open_megatron",
           "megatron_paths"]

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
               8: np.uint16}
CODE_OF = {np.dtype(t): code for code, t in DTYPE_CODES.items()}
HEADER_BYTES = len(MAGIC) + 8 + 1 + 8 + 8  # 34
_UINT16_BELOW = 65500  # Megatron's DType.optimal_dtype: uint16 for a cardinality below this


def dtype_for_vocabulary(vocab_size: int) -> np.dtype:
    """Megatron's dtype for a vocabulary of ``vocab_size`` tokens: uint16 below 65,500, else int32."""
    return np.dtype(np.uint16 if vocab_size < _UINT16_BELOW else np.int32)


def megatron_paths(prefix: str | os.PathLike) -> tuple[Path, Path]:
    """``(PREFIX.bin, PREFIX.idx)``: the suffixes are added to the prefix as it is spelled."""
    prefix = os.fspath(prefix)
    return Path(prefix + ".bin"), Path(prefix + ".idx")


def index_bytes(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.idx`` of one sequence per document with these ``lengths`` (int32) in ``dtype``: the bytes
    megatron-core's builder writes for ``add_document(tokens, [len(tokens)])`` per document."""
    lengths = np.ascontiguousarray(lengths, dtype="<i4")
    n = lengths.shape[0]
    pointers = np.zeros(n, dtype="<i8")
    if n > 1:
        np.cumsum(lengths[:-1], dtype=np.int64, out=pointers[1:])
        pointers *= np.dtype(dtype).itemsize
    documents = np.arange(n + 1, dtype="<i8")
    header = MAGIC + struct.pack("<QBQQ", VERSION, CODE_OF[np.dtype(dtype)], n, n + 1)
    return b"".join((header, lengths.tobytes(), pointers.tobytes(), documents.tobytes()))


def _read_index(idx: Path) -> tuple[np.dtype, np.ndarray, np.ndarray]:
    """``(dtype, lengths int64, document indices int64)`` of a checked ``.idx``."""
    try:
        with open(idx, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise StoreError(f"{idx}: not found (a Megatron dataset is PREFIX.bin and PREFIX.idx)") from None
    except IsADirectoryError:
        raise StoreError(f"{idx}: is a directory, expected a Megatron index file") from None
    if len(data) < HEADER_BYTES:
        raise StoreError(f"{idx}: header: {len(data)} bytes, a Megatron index starts with {HEADER_BYTES}")
    if data[:len(MAGIC)] != MAGIC:
        raise StoreError(f"{idx}: magic: {data[:len(MAGIC)]!r}, expected {MAGIC!r} (not a Megatron index)")
    version, code, n, d = struct.unpack_from("<QBQQ", data, len(MAGIC))
    if version != VERSION:
        raise StoreError(f"{idx}: version: {version}, expected {VERSION}")
    if code not in DTYPE_CODES:
        raise StoreError(f"{idx}: dtype code: {code}, expected one of {sorted(DTYPE_CODES)}")
    dtype = np.dtype(DTYPE_CODES[code])
    if dtype.kind == "f":
        raise StoreError(f"{idx}: dtype code {code} ({dtype}) holds no token ids (expected an integer dtype)")
    expected = HEADER_BYTES + 4 * n + 8 * n + 8 * d
    if len(data) == expected + n and n:
        raise StoreError(f"{idx}: holds a mode byte per sequence (a multimodal index), which is not supported")
    if len(data) != expected:
        raise StoreError(f"{idx}: size: {len(data)} bytes, expected {expected} for sequence count {n} and "
                         f"document-index count {d}")
    lengths = np.frombuffer(data, "<i4", n, HEADER_BYTES).astype(np.int64)
    pointers = np.frombuffer(data, "<i8", n, HEADER_BYTES + 4 * n)
    documents = np.frombuffer(data, "<i8", d, HEADER_BYTES + 12 * n).astype(np.int64)
    if n and lengths.min() < 0:
        i = int(np.argmax(lengths < 0))
        raise StoreError(f"{idx}: lengths[{i}] = {lengths[i]}, expected a count of tokens (>= 0)")
    running = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(lengths[:-1], out=running[1:])
    bad = np.flatnonzero(pointers != running * dtype.itemsize)
    if bad.size:
        i = int(bad[0])
        raise StoreError(f"{idx}: pointers[{i}] = {pointers[i]}, expected {running[i] * dtype.itemsize} (sequences "
                         "back to back: the running sum of lengths times the token size)")
    if d == 0 or documents[0] != 0 or documents[-1] != n:
        raise StoreError(f"{idx}: document indices: expected 0 first and the sequence count {n} last, got "
                         f"{documents[:1].tolist()} ... {documents[-1:].tolist()} ({d} entries)")
    falls = np.flatnonzero(documents[1:] < documents[:-1])
    if falls.size:
        i = int(falls[0])
        raise StoreError(f"{idx}: document indices[{i}] = {documents[i]} > [{i + 1}] = {documents[i + 1]}; "
                         "expected them never to decrease")
    return dtype, lengths, documents


def open_megatron(prefix: str | os.PathLike, *, partition: Partition | str = Partition.TRAIN,
                  bos: int | None = None, eos: int | None = None) -> TokenBuffers:
    """The documents of the Megatron pair ``PREFIX.bin`` / ``PREFIX.idx`` as read-only ``TokenBuffers``
    labelled ``partition`` (see the module docstring: checks, zero-copy or copy, ``bos`` / ``eos``).

    Example: ``engine.open_megatron("data/train_text_document", bos=50256)`` for GPT-2 data written
    with ``--append-eod``, then ``engine.MiniBatchEpoch.build(buffers, "train", ...)``.
    """
    part = check_partition(partition, ConfigurationError)
    for name, value in (("bos", bos), ("eos", eos)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                  or not 0 <= int(value) < 2 ** 32):
            raise ConfigurationError(f"{name}={value!r}: expected a token id in 0..2^32-1 or None")
    bin_path, idx_path = megatron_paths(prefix)
    dtype, lengths, documents = _read_index(idx_path)
    tokens = int(lengths.sum())
    try:
        size = bin_path.stat().st_size
    except FileNotFoundError:
        raise StoreError(f"{bin_path}: not found (its index {idx_path.name} is there)") from None
    if not bin_path.is_file():
        raise StoreError(f"{bin_path}: not a regular file, expected the tokens of {idx_path.name}")
    if size != tokens * dtype.itemsize:
        raise StoreError(f"{bin_path}: size: {size} bytes, expected {tokens * dtype.itemsize} "
                         f"({tokens} {dtype} tokens, the sum of the lengths in {idx_path.name})")
    ends = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=ends[1:])
    offsets = np.ascontiguousarray(ends[documents])
    if tokens:
        raw = np.memmap(bin_path, dtype=dtype.newbyteorder("<"), mode="r", shape=(tokens,)).view(np.ndarray)
    else:
        raw = np.empty(0, dtype=dtype)
    if dtype.kind == "i" and dtype.itemsize != 4:  # int8, int16, int64: checked (int32 is served unscanned)
        if tokens and int(raw.min()) < 0:
            i = int(np.argmax(raw < 0))
            raise StoreError(f"{bin_path}: token {i} is {int(raw[i])}, expected a token id (>= 0)")
        if dtype.itemsize > 4 and tokens and int(raw.max()) >= 2 ** 32:
            i = int(np.argmax(raw >= 2 ** 32))
            raise StoreError(f"{bin_path}: token {i} is {int(raw[i])}, expected a token id below 2^32")
    if bos is not None or eos is not None:
        wrapped = np.empty_like(offsets)
        b, e = (-1 if x is None else int(x) for x in (bos, eos))
        wrapped_lengths(raw, offsets, b, e, wrapped)
        values = np.empty(int(wrapped[-1]), dtype=np.uint32)
        wrap_documents(raw, offsets, b, e, wrapped, values)
        values.flags.writeable = False
        offsets = wrapped
    elif dtype.itemsize == 4:
        values = raw.view(np.uint32)  # int32: the same bits, ids are never negative
    else:
        values = raw.astype(np.uint32)
        values.flags.writeable = False
    offsets.flags.writeable = False
    name = Path(os.fspath(prefix)).name
    ids = [f"{name}:{i}" for i in range(offsets.shape[0] - 1)]
    return TokenBuffers.checked(values, offsets, ids, part, error=StoreError)
