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
frames' headers). A zstandard file is decompressed on a thread of its own while the caller
parses (``_ZstdReader``); memory is two buffers of decompressed bytes whatever the compression
ratio.
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
import queue
import threading
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
    """The decompressed bytes of a zstandard file, frame after frame, decompressed on a thread of
    its own (``_decompress``) while the caller parses: python-zstandard releases the GIL while it
    decompresses, so on two cores the JSON parse no longer waits for it. The thread fills one of
    ``_CHUNKS`` buffers of ``_CHUNK_BYTES`` at a time (few, large fills: each hands the GIL back
    once) and hands it over in order; ``readinto`` copies from it, so memory is those buffers
    whatever the ratio. A decompression error reaches the caller after every byte decompressed
    before the chunk it stopped in. The stream reader ends silently where a file ends inside a
    frame, so at the end the file's frames are walked (``_zstd_problem``: headers and block sizes,
    no decompression) and a truncated file raises EOFError before the end is reported."""

    def __init__(self, path: Path):
        super().__init__()
        self._path = path
        self._thread = None
        self._open()

    def _open(self) -> None:
        self._stop()
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        self._ready: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(_CHUNKS):
            self._free.put(bytearray(_CHUNK_BYTES))
        self._stopping = threading.Event()
        source = open(self._path, "rb")  # here: a file that cannot be opened fails the open, as a plain one
        self._thread = threading.Thread(target=_decompress, args=(source, self._free, self._ready, self._stopping),
                                        name="engine-zstd", daemon=True)
        self._thread.start()
        self._chunk: bytearray | None = None
        self._start = self._end = 0
        self._pos = 0
        self._ended = False
        self._checked = False

    def _stop(self) -> None:
        """End the decompressing thread (it stops before its next fill) and wait for it."""
        if self._thread is not None:
            self._stopping.set()
            self._free.put(None)
            self._thread.join()
            self._thread = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._chunk is None and not self._ended:
            chunk, size = self._ready.get()
            if isinstance(size, BaseException):
                self._ready.put((chunk, size))  # raised again on every later read
                raise size
            if size == 0:
                self._ended = True
            else:
                self._chunk, self._start, self._end = chunk, 0, size
        if self._chunk is None:  # the end of the data
            if not self._checked and len(buffer):
                problem = _zstd_problem(self._path)
                if problem is not None:
                    raise EOFError(problem)
                self._checked = True
            return 0
        n = min(len(buffer), self._end - self._start)
        memoryview(buffer).cast("B")[:n] = memoryview(self._chunk)[self._start:self._start + n]
        self._start += n
        if self._start == self._end:
            self._free.put(self._chunk)
            self._chunk = None
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
        self._stop()
        super().close()


# The decompressing thread's buffers: two, so that one fills while the caller reads the other.
_CHUNKS = 2
_CHUNK_BYTES = 4 << 20
_READ_BYTES = 1 << 20  # compressed bytes read at a time


def _decompress(source, free: queue.SimpleQueue, ready: queue.SimpleQueue, stopping: threading.Event) -> None:
    """The thread of a ``_ZstdReader``: fill each free buffer with the next decompressed bytes of
    the open file ``source`` (closed at the end) and hand it over as ``(buffer, size)``; ``size`` 0
    at the end, an exception where one is raised. ``stopping`` (with a ``None`` among the free
    buffers, to wake it) stops it before its next fill."""
    try:
        with zstandard.ZstdDecompressor().stream_reader(source, read_size=_READ_BYTES, read_across_frames=True,
                                                         closefd=True) as reader:
            while (chunk := free.get()) is not None and not stopping.is_set():
                size = reader.readinto(chunk)
                ready.put((chunk, size))
                if size == 0:
                    return
    except BaseException as exc:  # handed to the reading thread, raised where it reads
        ready.put((None, exc))
    finally:
        source.close()  # closed by the stream reader, unless making it failed


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
