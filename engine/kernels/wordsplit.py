"""The word regex ``\\w+|[^\\w\\s]|\\s`` as a kernel over code points, and word interning.

Text enters as code points (``code_points(text)``: a zero-copy UTF-32 view, one uint32 per
Python character). A class table of all 0x110000 code points (1.1 MB, ``WORD``/``SPACE``/``OTHER``)
is built once, lazily, by running Python's own ``re`` over every code point, so ``\\w`` and ``\\s``
mean exactly what they mean in ``re`` for ``str``. Splitting is then one pass: a maximal run of
word characters is one piece, every other character is a piece of its own. Cost O(n).

``intern_words`` finds the distinct pieces (a direct table for one-character pieces, an
open-addressing hash table over code point sequences for the rest: hash, then full compare),
numbering them by first appearance and copying each once, so every later stage
(BPE training, memoised encoding) works once per distinct word. Cost O(n) expected.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel

__all__ = [
    "OTHER",
    "WORD",
    "SPACE",
    "char_classes",
    "code_points",
    "split_words",
    "intern_words",
]


OTHER = 0
WORD = 1
SPACE = 2
UNICODE_SIZE = 0x110000

_CLASS_TABLE: np.ndarray | None = None


def char_classes() -> np.ndarray:
    """uint8[0x110000]: the ``re`` class of every code point (built on first use, then cached)."""
    global _CLASS_TABLE
    if _CLASS_TABLE is None:
        import re

        every = "".join(map(chr, range(UNICODE_SIZE)))
        table = np.zeros(UNICODE_SIZE, dtype=np.uint8)
        # Runs of \w (and of \s) are long, so a few thousand matches cover all of Unicode.
        for match in re.finditer(r"\w+", every):
            table[match.start() : match.end()] = WORD
        for match in re.finditer(r"\s+", every):
            table[match.start() : match.end()] = SPACE
        _CLASS_TABLE = table
    return _CLASS_TABLE


def code_points(text: str) -> np.ndarray:
    """One uint32 per character of ``text`` (lone surrogates kept as their own code points)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


@kernel(inline="always")
def word_end(cps, i, stop, classes):
    """End of the piece of ``\\w+|[^\\w\\s]|\\s`` that starts at ``i`` (before ``stop``): a run of
    word characters (class 1) or one other character."""
    j = i + 1
    if classes[cps[i]] == 1:
        while j < stop and classes[cps[j]] == 1:
            j += 1
    return j


@kernel
def _split_kernel(cps, doc_bounds, classes, starts, ends):
    """Fill piece boundaries; pieces never cross ``doc_bounds``. Returns the piece count."""
    count = 0
    for d in range(doc_bounds.shape[0] - 1):
        i = doc_bounds[d]
        stop = doc_bounds[d + 1]
        while i < stop:
            j = word_end(cps, i, stop, classes)
            starts[count] = i
            ends[count] = j
            count += 1
            i = j
    return count


def split_words(cps: np.ndarray, doc_bounds: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Piece boundaries ``(starts, ends)`` (int64, code point offsets) of ``\\w+|[^\\w\\s]|\\s``.

    ``doc_bounds`` (int64, ascending, first 0, last ``len(cps)``) marks text edges that a word
    may not cross; by default the whole array is one text.
    """
    cps = np.ascontiguousarray(cps, dtype=np.uint32)
    if doc_bounds is None:
        doc_bounds = np.array([0, cps.shape[0]], dtype=np.int64)
    starts = np.empty(cps.shape[0], dtype=np.int64)
    ends = np.empty(cps.shape[0], dtype=np.int64)
    n = _split_kernel(cps, np.ascontiguousarray(doc_bounds, dtype=np.int64), char_classes(), starts, ends)
    # Views, not copies: the unused tail of the allocation is never touched, so never paged in.
    return starts[:n], ends[:n]


@kernel
def _hash_piece(cps, start, end):
    h = np.uint64(14695981039346656037)
    for i in range(start, end):
        h = (h ^ np.uint64(cps[i])) * np.uint64(1099511628211)
    return h


@kernel
def _intern_kernel(cps, starts, ends, word_of_piece, first_piece, counts, word_offsets):
    """Number distinct pieces by first appearance; returns (distinct count, their code points).

    Each new word's code points are copied to a compact buffer as it is found, so the
    comparisons that confirm a hash hit read cache-resident memory, not the whole text.
    """
    n = starts.shape[0]
    # One-character pieces of the Basic Multilingual Plane (spaces, punctuation: most of a
    # text's pieces) are looked up directly by code point.
    single = np.full(0x10000, -1, dtype=np.int64)
    # The hash table is sized by distinct words (grown on demand) so it stays in cache.
    size = 1024
    mask = np.uint64(size - 1)
    slots = np.full(size, -1, dtype=np.int64)  # distinct word id or -1
    slot_hash = np.zeros(size, dtype=np.uint64)
    buf = np.empty(4096, dtype=np.uint32)
    used = 0
    distinct = 0
    word_offsets[0] = 0
    for p in range(n):
        s = starts[p]
        e = ends[p]
        length = e - s
        w = -1
        if length == 1 and cps[s] < 0x10000:
            w = single[cps[s]]
            if w < 0:
                single[cps[s]] = distinct
        else:
            h = _hash_piece(cps, s, e)
            slot = h & mask
            while True:
                t = slots[slot]
                if t < 0:
                    slots[slot] = distinct
                    slot_hash[slot] = h
                    break
                if slot_hash[slot] == h and word_offsets[t + 1] - word_offsets[t] == length:
                    base = word_offsets[t]
                    same = True
                    for k in range(length):
                        if buf[base + k] != cps[s + k]:
                            same = False
                            break
                    if same:
                        w = t
                        break
                slot = (slot + np.uint64(1)) & mask
        if w >= 0:
            counts[w] += 1
            word_of_piece[p] = w
            continue
        # A new distinct word.
        if used + length > buf.shape[0]:
            grown = np.empty(2 * (used + length), dtype=np.uint32)
            for k in range(used):
                grown[k] = buf[k]
            buf = grown
        for k in range(length):
            buf[used + k] = cps[s + k]
        used += length
        first_piece[distinct] = p
        counts[distinct] = 1
        word_of_piece[p] = distinct
        distinct += 1
        word_offsets[distinct] = used
        if 2 * distinct > size:
            old_slots = slots
            old_hash = slot_hash
            size *= 2
            mask = np.uint64(size - 1)
            slots = np.full(size, -1, dtype=np.int64)
            slot_hash = np.zeros(size, dtype=np.uint64)
            for t in range(old_slots.shape[0]):
                if old_slots[t] >= 0:
                    slot = old_hash[t] & mask
                    while slots[slot] >= 0:
                        slot = (slot + np.uint64(1)) & mask
                    slots[slot] = old_slots[t]
                    slot_hash[slot] = old_hash[t]
    return distinct, buf[:used]


def intern_words(cps: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Distinct pieces in order of first appearance.

    Returns ``(word_of_piece int64[n], first_piece int64[d], counts int64[d], word_cps uint32,
    word_offsets int64[d+1])``: piece ``p`` is distinct word ``word_of_piece[p]``; word ``w``
    first appears as piece ``first_piece[w]``, occurs ``counts[w]`` times, and its code points
    are ``word_cps[word_offsets[w]:word_offsets[w+1]]``.
    """
    n = starts.shape[0]
    word_of_piece = np.empty(n, dtype=np.int64)
    first_piece = np.empty(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    word_offsets = np.empty(n + 1, dtype=np.int64)
    d, word_cps = _intern_kernel(
        np.ascontiguousarray(cps, dtype=np.uint32), starts, ends, word_of_piece, first_piece, counts, word_offsets
    )
    return word_of_piece, first_piece[:d], counts[:d], word_cps, word_offsets[: d + 1]
