"""Compressed corpus files, read as streams: gzip, zstandard, bzip2 and xz.

The compression of a file is named by its last suffix (``COMPRESSIONS``: ``.gz``, ``.zst`` or
``.zstd``, ``.bz2``, ``.xz``); ``open_binary`` opens any corpus file as a binary stream of its
*decompressed* bytes (a plain file as itself) with ``read``, ``readline``, ``tell`` and ``seek``,
so the JSONL reader and the long-line scanner (``engine.corpus.long_lines``) read a compressed file
exactly as a plain one, one buffer at a time: nothing is decompressed whole. Offsets (``tell``,
``seek``, the byte offsets error messages name) count decompressed bytes. Seeking forward reads on;
seeking back reopens the file and reads to the offset, which only a line too long to hold does.

zstandard files may hold several frames one after another (as ``zstd`` and ``cat`` make them), and
skippable frames; a file that ends inside a frame is truncated (checked at its end by walking the
frames' headers). Memory is one buffer of decompressed bytes whatever the compression ratio.
A corrupt or truncated file raises one of
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
    """The decompressed bytes of a zstandard file, frame after frame (``zstandard``'s stream reader,
    which decompresses into the caller's buffer, so memory is one buffer whatever the ratio). That
    reader ends silently where a file ends inside a frame, so at the end the file's frames are
    walked (``_zstd_problem``: headers and block sizes, no decompression) and a truncated file
    raises EOFError before the end is reported."""

    def __init__(self, path: Path):
        super().__init__()
        self._path = path
        self._reader = None
        self._open()

    def _open(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._reader = zstandard.ZstdDecompressor().stream_reader(open(self._path, "rb"), read_across_frames=True,
                                                                   closefd=True)
        self._pos = 0
        self._checked = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._reader.readinto(buffer)
        if n == 0 and not self._checked and len(buffer):
            problem = _zstd_problem(self._path)
            if problem is not None:
                raise EOFError(problem)
            self._checked = True
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
        scratch = bytearray(min(max(offset - self._pos, 1), _BUFFER_BYTES))
        while self._pos < offset:
            view = memoryview(scratch)[:min(len(scratch), offset - self._pos)]
            if not self.readinto(view):
                break
        return self._pos

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        super().close()


_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE = range(0x184D2A50, 0x184D2A60)


def _zstd_problem(path: Path) -> str | None:
    """None when ``path`` is whole zstandard frames (and skippable frames) end to end, else what is wrong:
    each frame's header, then each block's 3-byte header and size, then its checksum, as the format lays
    them out (a walk over the headers, the blocks themselves are not read)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size

        def take(n: int) -> bytes:
            data = fh.read(n)
            if len(data) < n:
                raise EOFError
            return data

        def skip(n: int) -> None:
            if fh.seek(n, io.SEEK_CUR) > size:
                raise EOFError

        try:
            while head := fh.read(4):
                if len(head) < 4:
                    raise EOFError
                magic = int.from_bytes(head, "little")
                if magic in _SKIPPABLE:
                    skip(int.from_bytes(take(4), "little"))
                    continue
                if magic != _ZSTD_MAGIC:
                    return f"unknown frame magic 0x{magic:08x} at the end of the data read"
                descriptor = take(1)[0]
                single = descriptor >> 5 & 1
                skip((0 if single else 1) + (0, 1, 2, 4)[descriptor & 3] + (single, 2, 4, 8)[descriptor >> 6])
                while True:
                    block = int.from_bytes(take(3), "little")
                    if block >> 1 & 3 == 3:
                        return "a block of the reserved type"
                    skip(1 if block >> 1 & 3 == 1 else block >> 3)
                    if block & 1:
                        break
                if descriptor >> 2 & 1:
                    skip(4)  # the content checksum
        except EOFError:
            return "Compressed file ended before the end-of-frame marker was reached"
    return None
