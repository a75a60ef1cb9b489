"""Compressed corpus files, read as streams: gzip, zstandard, bzip2 and xz.

The compression of a file is named by its last suffix (``COMPRESSIONS``: ``.gz``, ``.zst`` or
``.zstd``, ``.bz2``, ``.xz``); ``open_binary`` opens any corpus file as a binary stream of its
*decompressed* bytes (a plain file as itself) with ``read``, ``readline``, ``tell`` and ``seek``,
so the JSONL reader and the long-line scanner (``engine.corpus.long_lines``) read a compressed file
exactly as a plain one, one buffer at a time: nothing is decompressed whole. Offsets (``tell``,
``seek``, the byte offsets error messages name) count decompressed bytes. Seeking forward reads on;
seeking back reopens the file and reads to the offset, which only a line too long to hold does.

zstandard files may hold several frames one after another (as ``zstd`` and ``cat`` make them); a
file that ends inside a frame is truncated. A corrupt or truncated file raises one of
``DECOMPRESSION_ERRORS`` while it is read; ``decompression_message`` says which file, after which
line, and what was expected.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zlib
from pathlib import Path

import zstandard

__all__ = ["COMPRESSIONS", "DECOMPRESSION_ERRORS", "compression_of", "open_binary", "decompression_message",
           "without_compression"]

COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bzip2", ".xz": "xz"}
# What the decompressors raise on bad input: truncated (EOFError), corrupt (gzip's BadGzipFile and
# bzip2's "Invalid data stream" are OSErrors; zlib.error; LZMAError; ZstdError).
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError, zstandard.ZstdError)

_BUFFER_BYTES = 1 << 20
_ZSTD_READ_BYTES = 1 << 17


def compression_of(path: str | os.PathLike) -> str | None:
    """``"gzip"``, ``"zstd"``, ``"bzip2"``, ``"xz"`` by the last suffix of ``path``, or None (a plain file)."""
    return COMPRESSIONS.get(Path(path).suffix.lower())


def without_compression(path: str | os.PathLike) -> Path:
    """``path`` without its compression suffix (``c.jsonl.gz`` -> ``c.jsonl``); ``path`` if it has none."""
    path = Path(path)
    return path.with_suffix("") if compression_of(path) else path


def open_binary(path: str | os.PathLike):
    """``path`` opened for reading its (decompressed) bytes; OSError if it cannot be opened."""
    kind = compression_of(path)
    if kind is None:
        return open(path, "rb")
    if kind == "gzip":
        return gzip.open(path, "rb")
    if kind == "bzip2":
        return bz2.open(path, "rb")
    if kind == "xz":
        return lzma.open(path, "rb")
    return io.BufferedReader(_ZstdReader(Path(path)), _BUFFER_BYTES)


def decompression_message(path: str | os.PathLike, exc: BaseException, lines_read: int | None = None) -> str:
    """The CorpusError text for ``exc`` raised while ``path`` was read (``lines_read``: whole lines before it)."""
    kind = compression_of(path)
    where = f"{path}:{lines_read + 1}" if lines_read is not None else str(path)
    detail = str(exc) or type(exc).__name__
    if kind is None:
        return f"{where}: cannot read corpus file: {getattr(exc, 'strerror', None) or detail}"
    after = f" after line {lines_read}" if lines_read else ""
    return (f"{where}: cannot decompress the {kind} file{after} ({type(exc).__name__}: {detail}); "
            f"the file is corrupt or truncated (expected a complete {kind} stream)")


class _ZstdReader(io.RawIOBase):
    """The decompressed bytes of a zstandard file, frame after frame; a file ending inside a frame
    raises EOFError (the stream readers of ``zstandard`` end silently there)."""

    def __init__(self, path: Path):
        super().__init__()
        self._path = path
        self._fh = None
        self._open()

    def _open(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self._fh = open(self._path, "rb")
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame = self._decompressor.decompressobj()
        self._in_frame = False  # bytes given to the current frame that did not end it
        self._pending = memoryview(b"")
        self._pos = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _fill(self) -> None:
        while not self._pending and not self._done:
            data = self._fh.read(_ZSTD_READ_BYTES)
            if not data:
                self._done = True
                if self._in_frame:
                    raise EOFError("Compressed file ended before the end-of-frame marker was reached")
                return
            out = []
            while data:
                out.append(self._frame.decompress(data))
                self._in_frame = True
                if not self._frame.eof:
                    break
                data = self._frame.unused_data
                self._frame = self._decompressor.decompressobj()
                self._in_frame = False
            self._pending = memoryview(out[0] if len(out) == 1 else b"".join(out))

    def readinto(self, buffer) -> int:
        self._fill()
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self._pos += n
        return n

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a zstandard stream seeks from its start or its position only")
        if offset < self._pos:
            self._open()
        while self._pos < offset:
            self._fill()
            if not self._pending:
                break
            n = min(offset - self._pos, len(self._pending))
            self._pending = self._pending[n:]
            self._pos += n
        return self._pos

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        super().close()
