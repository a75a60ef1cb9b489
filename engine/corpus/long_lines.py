"""JSONL lines (and files of a folder) too long to hold: the text stays in the file and is decoded
part by part when used.

``iter_jsonl(..., long_lines=True)`` (what ``prepare`` reads with) hands a line longer than
``limits.long_line_bytes`` (``ReadLimits``, ``engine.corpus.limits``) to ``read_long_line``, which
scans it in blocks of ``limits.scan_block_bytes`` without holding it:

1. the line's structure: every JSON string longer than ``limits.long_string_bytes`` is left out of a
   *skeleton* of the line (its body replaced by a marker), every flat array of numbers of 64 bytes
   or more stands as ``[0]`` (``_collapse_numbers``: token ids, embeddings), and the skeleton, which
   is small, is parsed like any line, so every rule of the reader (keys, types, made ids, repeated
   keys) holds; a string's end is found by the parity of the backslashes before a quote, so neither
   time nor memory grows with the number of escapes;
2. the text field's string, if it is such a long string, is then read once more in parts of about
   ``limits.part_bytes``, cut where no escape, UTF-8 sequence or surrogate pair is split, each part
   decoded (UTF-8, then the JSON escapes) and checked (no lone surrogate); this counts its
   characters and UTF-8 bytes.

The document's text is then a ``LongText``: its place in the file, its length, and ``parts()``,
which decodes it again part by part for whoever reads it (the span-by-span encoder and trainer
counter of ``engine.tokenizers.streaming``, ``source_digest``). A line the scan cannot take this way
(invalid UTF-8, a lone surrogate, malformed JSON, the id among the long strings, a skeleton longer
than ``limits.long_string_bytes`` * 64) is read whole as before, so its error message or policy is exactly
that of a short line (``read_long_line`` returns None). A file of a folder corpus longer than
``limits.long_line_bytes`` is the same without escapes (``read_long_file``; read whole if it is not UTF-8).
A compressed JSONL file (``engine.corpus.compressed``) is scanned the same way in its decompressed
bytes; each reading of a long text decompresses the file again up to the text's start.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from engine.corpus.compressed import open_binary
from engine.corpus.documents import _SURROGATE
from engine.corpus.limits import DEFAULT_READ_LIMITS, ReadLimits
from engine.errors import CorpusError
from engine.kernels.json_numbers import CLOSED, OPEN, number_array

__all__ = ["LongText", "read_long_line", "read_long_file", "scan_line"]

_OUTSIDE = re.compile(rb'[^"\n]*')  # outside strings: up to a quote or the line's end
# Outside strings, a flat array of numbers of at least _NUMBERS_BYTES stands as [0] in a skeleton
# (see _collapse_numbers).
_NUMBERS_BYTES = 64


class LongText:
    """The text of one long JSONL line, left in its file (see the module docstring).

    ``len()`` is its length in characters, ``utf8_bytes`` its UTF-8 size, ``parts()`` its decoded
    text in order (strings of about ``part_bytes`` bytes), ``str(text)`` all of it at once.
    """

    __slots__ = ("path", "start", "end", "chars", "utf8_bytes", "where", "escaped", "progress", "part_bytes")

    def __init__(self, path: Path, start: int, end: int, chars: int, utf8_bytes: int, where: str, *,
                 escaped: bool = True, progress: Callable[[int], None] | None = None,
                 part_bytes: int = DEFAULT_READ_LIMITS.part_bytes):
        self.path, self.start, self.end = path, start, end
        self.chars, self.utf8_bytes, self.where = chars, utf8_bytes, where
        self.escaped = escaped  # a JSON string's body; False: plain UTF-8 text (a file of a folder)
        self.progress = progress
        self.part_bytes = part_bytes

    def reporting(self, progress: Callable[[int], None]) -> "LongText":
        """The same text, calling ``progress(characters)`` after each part read."""
        return LongText(self.path, self.start, self.end, self.chars, self.utf8_bytes, self.where,
                        escaped=self.escaped, progress=progress, part_bytes=self.part_bytes)

    def __len__(self) -> int:
        return self.chars

    def __repr__(self) -> str:
        return f"LongText({self.where}, {self.chars:,} characters)"

    def __str__(self) -> str:
        return "".join(self.parts())

    def parts(self) -> Iterator[str]:
        for _, part in _decoded_parts(self.path, self.start, self.end, self.escaped, self.part_bytes):
            if part is None:
                raise CorpusError(f"{self.where}: the file changed while it was read (its text no longer decodes)")
            yield part
            if self.progress is not None:
                self.progress(len(part))

    def utf8_parts(self) -> Iterator[bytes]:
        for part in self.parts():
            yield part.encode("utf-8")


def _low_surrogate_escape(data: bytes, at: int) -> bool:
    """``data[at:]`` starts with ``\\uDC00``-``\\uDFFF`` (the second half of a pair)."""
    return data[at + 1:at + 3] in (b"ud", b"uD") and data[at + 3:at + 4] in (b"c", b"d", b"e", b"f", b"C", b"D", b"E", b"F")


def _safe_cut(data: bytes) -> int:
    """A place to cut raw string-body bytes ``data`` (0 if none): before a character's first byte, never
    inside an escape, never between the two escapes of a surrogate pair; as late as it finds one.
    ``data`` starts where an escape may start (the previous cut), so inside a run of backslashes the
    parity of the backslashes before ``c`` in ``data`` says whether ``c`` starts an escape: a text that
    is one run of escaped backslashes is cut like any other (it grew unboundedly, rescanned each read)."""
    for low in (max(0, len(data) - 64), 0):
        for c in range(len(data) - 12, low, -1):
            b = data[c]
            if b & 0xC0 == 0x80:
                continue
            if b == 0x5C:  # a backslash after an even number of backslashes starts an escape
                run = c - len(data[:c].rstrip(b"\\"))
                if run % 2 == 0 and not _low_surrogate_escape(data, c):
                    return c
            elif 0x5C not in data[max(0, c - 6):c]:  # no escape reaches past c
                return c
    return 0


def _text_cut(data: bytes) -> int:
    """A place to cut UTF-8 ``data`` before a character's first byte (0 if none)."""
    for c in range(len(data) - 1, max(0, len(data) - 4), -1):
        if data[c] & 0xC0 != 0x80:
            return c
    return 0


def _decoded_parts(path: Path, start: int, end: int, escaped: bool = True,
                   part_bytes: int = DEFAULT_READ_LIMITS.part_bytes) -> Iterator[tuple[int, str | None]]:
    """``(byte offset, decoded part)`` of the raw JSON string body ``[start, end)`` of ``path`` (``escaped``)
    or of its UTF-8 text, read ``part_bytes`` raw bytes at a time; the part is None (and the iteration
    ends) where it is no valid UTF-8, JSON escape or surrogate pair."""
    cutter = _safe_cut if escaped else _text_cut
    with open_binary(path) as fh:
        fh.seek(start)
        pos, carry = start, b""
        while pos < end or carry:
            data = carry + fh.read(min(part_bytes, end - pos))
            pos = fh.tell()
            cut = len(data) if pos >= end else cutter(data)
            if cut == 0:
                carry = data  # one escape run longer than a part: read on
                continue
            raw, carry = data[:cut], data[cut:]
            offset = pos - len(data)
            try:
                text = raw.decode("utf-8")
                if escaped and 0x5C in raw:
                    text, _ = json.decoder.scanstring(text + '"', 0, False)
            except (UnicodeDecodeError, ValueError):
                yield offset, None
                return
            if escaped and 0x5C in raw and _SURROGATE.search(text):
                yield offset, None
                return
            yield offset, text


def read_long_line(path: Path, fh, line_start: int, head: bytes, parse, where: str,
                   limits: ReadLimits = DEFAULT_READ_LIMITS) -> tuple[object, object, int] | None:
    """Read the line of ``path`` starting at ``line_start`` (``head``: its first bytes, already read;
    ``fh`` stands after them) without holding it: ``(id, text, end of the line)`` where ``text`` is a
    ``LongText`` if the text field is a long string, else a str; ``fh`` then stands at the line's end.
    ``parse(skeleton)`` parses the skeleton line and returns ``(id, text)`` as the reader would.
    None when the line must be read whole (see the module docstring); ``fh`` then stands anywhere.
    ``limits``: the scan's sizes (``ReadLimits``)."""
    scanned = scan_line(fh, line_start, head, limits)
    if scanned is None:
        return None
    skeleton, longs, line_end = scanned
    try:
        skeleton_text = skeleton.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Every long string (keys and other fields too) must decode, as the whole line must; checked
    # before the parse, which decides the reader's state (made ids) as reading the whole line would.
    measured = {marker: _measured(path, start, end, where, escaped=True, part_bytes=limits.part_bytes)
                for marker, (start, end) in longs.items()}
    if None in measured.values():
        return None
    try:
        doc_id, text = parse(skeleton_text)
    except CorpusError:
        return None  # read whole, so the message names the line's own columns
    if doc_id in longs:
        return None
    if text in longs:
        text = measured[text]
    fh.seek(line_end)
    return doc_id, text, line_end


def read_long_file(path: Path, size: int, where: str, limits: ReadLimits = DEFAULT_READ_LIMITS) -> LongText | None:
    """The UTF-8 text of the file ``path`` (``size`` bytes) left in it, decoded ``limits.part_bytes`` at a
    time; None if it is not valid UTF-8 (read it whole: its error or policy is a short file's)."""
    return _measured(path, 0, size, where, escaped=False, part_bytes=limits.part_bytes)


def _measured(path: Path, start: int, end: int, where: str, *, escaped: bool, part_bytes: int) -> LongText | None:
    """``[start, end)`` of ``path`` as a LongText, decoded once to check it and count it; None if it does not decode."""
    chars = utf8_bytes = 0
    for _, part in _decoded_parts(path, start, end, escaped, part_bytes):
        if part is None:
            return None
        chars += len(part)
        utf8_bytes += len(part) if part.isascii() else len(part.encode("utf-8"))
    return LongText(path, start, end, chars, utf8_bytes, where, escaped=escaped, part_bytes=part_bytes)


def _body_end(data: bytes, i: int) -> int:
    """Where the string body starting at ``data[i]`` (``i``: not inside an escape) stops in ``data``:
    its closing quote, a newline (the line is malformed), or where ``data`` ends: its end, or the
    last byte when that is a backslash that starts an escape (the next block holds the rest). A
    quote closes the string when an even run of backslashes stands before it (a character an escape
    takes is a backslash, a letter or a hex digit, never a quote). Searches with ``bytes.find``:
    time and memory do not grow with the number of escapes."""
    n = len(data)
    while True:
        quote = data.find(b'"', i)
        newline = data.find(b"\n", i, n if quote < 0 else quote)
        if newline >= 0:
            return newline  # a newline before the closing quote
        if quote < 0:
            return n - (n - _run_start(data, i, n)) % 2
        if (quote - _run_start(data, i, quote)) % 2 == 0:
            return quote
        i = quote + 1


def _run_start(data: bytes, low: int, end: int) -> int:
    """The first of the backslashes that end ``data[low:end]`` (one C scan per window doubling)."""
    width = 64
    while True:
        start = max(low, end - width)
        window = data[start:end]
        kept = len(window.rstrip(b"\\"))
        if kept > 0 or start == low:
            return start + kept
        width *= 4


def scan_line(fh, line_start: int, head: bytes,
              limits: ReadLimits = DEFAULT_READ_LIMITS) -> tuple[bytes, dict[str, tuple[int, int]], int] | None:
    """The skeleton of the line (long string bodies replaced by markers), each marker's body
    ``[start, end)`` in the file, and the offset after the line; None where the line is malformed
    or its skeleton too long."""
    data, base, i = head, line_start, 0
    skeleton = bytearray()
    outside, settled = bytearray(), 0  # the skeleton's tail since the last string; its part checked for numbers
    longs: dict[str, tuple[int, int]] = {}
    long_string, limit = limits.long_string_bytes, limits.long_string_bytes * 64

    def more() -> bool:
        nonlocal data, base, i
        block = fh.read(limits.scan_block_bytes)
        data, base, i = data[i:] + block, base + i, 0
        return bool(block)

    while True:
        m = _OUTSIDE.match(data, i)
        outside += data[i:m.end()]
        i = m.end()
        if len(outside) - settled > long_string:
            settled = _collapse_numbers(outside, settled)
            if len(skeleton) + len(outside) > limit:
                return None
        if i == len(data):
            if more():
                continue
            _collapse_numbers(outside, settled)
            return bytes(skeleton + outside), longs, base + i  # the last line, without a newline
        _collapse_numbers(outside, settled)
        if data[i] == 0x0A:
            return bytes(skeleton + outside), longs, base + i + 1
        skeleton += outside
        outside, settled = bytearray(), 0
        skeleton += b'"'
        i += 1
        body_start, body = base + i, bytearray()
        while True:
            e = _body_end(data, i)
            if body is not None:
                body += data[i:e]
                if len(body) > long_string:
                    body = None
            i = e
            if i == len(data) or data[i] == 0x5C:  # an escape cut by the block's end: read on
                if not more():
                    return None  # the file ends inside a string
                continue
            if data[i] != 0x22:
                return None  # a newline inside a string
            if body is None:
                marker = f"\x00engine-long-string-{secrets.token_hex(16)}"
                longs[marker] = (body_start, base + i)
                skeleton += marker.encode("ascii")
            else:
                skeleton += body
            skeleton += b'"'
            i += 1
            break
        if len(skeleton) > limit:
            return None


def _collapse_numbers(outside: bytearray, settled: int) -> int:
    """Write each flat array of numbers in ``outside`` (skeleton bytes outside strings) from ``settled``
    on as ``[0]``, and one still open at its end as ``[0,`` and what follows its last comma; returns
    where the next call starts (the ``[`` of an array still open, else the end).

    An array is taken when it is at least ``_NUMBERS_BYTES`` long and its elements are JSON numbers
    of at most 40 characters (``engine.kernels.json_numbers``): such a line parses exactly when it
    does with the array written ``[0]``, and the reader never uses the array's values (a text or an id
    is a string, so an array there is an error either way, and the line is then read whole). A line
    whose bulk is such an array (token ids, embeddings) keeps a small skeleton; any other content stays."""
    pos = settled
    while True:
        start = outside.find(b"[", pos)
        if start < 0:
            return len(outside)
        buf = np.frombuffer(outside, dtype=np.uint8)
        status, at = number_array(buf, start + 1, len(outside))
        del buf  # the bytearray is resized below
        if status == OPEN:
            if at - start >= _NUMBERS_BYTES:
                outside[start:at] = b"[0,"
            return start
        if status == CLOSED and at - start >= _NUMBERS_BYTES:
            outside[start:at + 1] = b"[0]"
            pos = start + 3
        else:
            pos = max(at, start + 1)
