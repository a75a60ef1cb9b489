"""Pre-tokenizer scanners: split UTF-8 bytes exactly as the GPT-2 / cl100k / o200k regexes do.

Each pattern is an ordered alternation; at a piece start the scanners try the alternatives in
the regex's order and return where the first matching one ends, reproducing greedy, possessive
and backtracking behaviour by hand:

- ``\\s+(?!\\S)`` on a whitespace run ``[pos, e)``: the whole run at end of input, otherwise the
  run minus its last character when that leaves at least one character (else ``\\s+`` takes it).
- ``\\s*[\\r\\n]`` (cl100k): the run up to and including its last ``\\r``/``\\n``.
- ``[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+`` (cl100k): the possessive optional character is taken
  whenever it is in the class, so the alternative fails if no letter follows it.
- o200k's ``[^\\r\\n\\p{L}\\p{N}]?U*L+C?`` then ``[^\\r\\n\\p{L}\\p{N}]?U+L*C?`` (U, L: the
  upper and lower case classes, which share ``\\p{Lm}\\p{Lo}\\p{M}``; C: the contractions): the
  optional character is not possessive, so each alternative is tried with it, then without it.
  Greedy ``U*`` backtracks to the last character of the upper run that is also lower (see
  ``cased_word``). ``\\s*[\\r\\n]+`` ends where ``\\s*[\\r\\n]`` does, after the last
  ``\\r``/``\\n`` of the run.

``scan_document`` is the entry the encoder and trainer call for any pattern: the scanners above for
the named patterns, or the compiled-regex matcher (``engine.kernels.regex_vm``) for a
``RegexProgram`` (each is its own Numba type, so the named patterns' kernels stay as they were).

Input is valid UTF-8 (from ``str.encode``); classes come from ``unicode_tables`` (uint8 flags per
code point). Cost: one pass over the bytes, O(1) per byte plus one lookahead per whitespace run.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba.extending import overload

from engine.kernels import kernel
from engine.kernels.regex_vm import RegexProgram, regex_piece_ends

# A pattern reaches the kernels as an instance of its own (empty) class, so its Numba type names it:
# each pattern compiles its own scanner, and a kernel never compiles the scanners of the others.
Gpt2Pattern = namedtuple("Gpt2Pattern", ())
Cl100kPattern = namedtuple("Cl100kPattern", ())
O200kPattern = namedtuple("O200kPattern", ())
GPT2 = Gpt2Pattern()
CL100K = Cl100kPattern()
O200K = O200kPattern()


def _for_pattern(pattern, gpt2, cl100k, o200k):
    """The function for the pattern of Numba type ``pattern`` (an overload's choice when it compiles)."""
    kinds = {Gpt2Pattern: gpt2, Cl100kPattern: cl100k, O200kPattern: o200k}
    chosen = kinds.get(getattr(pattern, "instance_class", None))
    if getattr(pattern, "instance_class", None) not in kinds:
        raise TypeError(f"expected a pre-tokenizer pattern (GPT2, CL100K or O200K), got {pattern}")
    return chosen

LETTER = 1
NUMBER = 2
SPACE = 4
CR_LF = 8
ASCII_SPACE = 16
UPPER = 32
LOWER = 64
LETTER_NUMBER_SPACE = 7
LETTER_NUMBER_CR_LF = 11
UPPER_LOWER = 96
NON_ASCII = 128  # in ascii_table only: a byte >= 0x80
SPACE_NON_ASCII = 132
OTHER = 0  # run_end's want for a run of characters that are not letters, numbers or whitespace
LETTER_NUMBER_CR_LF_NON_ASCII = 139


@kernel(inline="always")
def code_point_at(buf, i):
    """(code point, byte width) of the UTF-8 character starting at ``buf[i]``."""
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), 2
    if b0 < 0xF0:
        return ((b0 & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F), 3
    return (
        ((b0 & 0x07) << 18)
        | ((np.int64(buf[i + 1]) & 0x3F) << 12)
        | ((np.int64(buf[i + 2]) & 0x3F) << 6)
        | (np.int64(buf[i + 3]) & 0x3F)
    ), 4


@kernel(inline="always")
def class_at(buf, i, classes):
    """(class flags, byte width) of the character at ``buf[i]``."""
    b0 = buf[i]
    if b0 < 0x80:
        return np.int64(classes[b0]), 1
    cp, width = code_point_at(buf, i)
    return np.int64(classes[cp]), width


@kernel(inline="always")
def in_run(flags, want):
    """A character of class ``flags`` continues a run of ``want`` (``OTHER``: of characters that are
    not letters, numbers or whitespace; else of characters with one of the ``want`` flags)."""
    if want == OTHER:
        return (flags & LETTER_NUMBER_SPACE) == 0
    return (flags & want) != 0


@kernel(inline="always")
def run_end(buf, i, end, classes, want):
    """First position >= i in [i, end) whose character does not continue the run (``in_run``)."""
    while i < end:
        flags, width = class_at(buf, i, classes)
        if not in_run(flags, want):
            break
        i += width
    return i


@kernel(inline="always")
def whitespace_piece_end(buf, pos, end, classes, cl100k):
    """End of ``\\s*[\\r\\n]`` (cl100k only), else ``\\s+(?!\\S)``, else ``\\s+`` at ``pos``."""
    i = pos
    last_start = pos
    last_newline_end = -1
    while i < end:
        flags, width = class_at(buf, i, classes)
        if (flags & SPACE) == 0:
            break
        if flags & CR_LF:
            last_newline_end = i + width
        last_start = i
        i += width
    if cl100k and last_newline_end >= 0:
        return last_newline_end
    if i == end or last_start == pos:
        return i
    return last_start


@kernel(inline="always")
def lower_ascii(b):
    if 65 <= b <= 90:
        return b + 32
    return b


@kernel
def gpt2_piece_end(buf, pos, end, classes):
    """End of the GPT-2 piece starting at ``pos`` (``pos < end``)."""
    b0 = buf[pos]
    if b0 == 39 and pos + 1 < end:  # 's 't 'm 'd 're 've 'll (lower case only)
        b1 = buf[pos + 1]
        if b1 == 115 or b1 == 116 or b1 == 109 or b1 == 100:
            return pos + 2
        if pos + 2 < end:
            b2 = buf[pos + 2]
            if (b1 == 114 and b2 == 101) or (b1 == 118 and b2 == 101) or (b1 == 108 and b2 == 108):
                return pos + 3
    flags, width = class_at(buf, pos, classes)
    start = pos
    if (flags & ASCII_SPACE) and pos + 1 < end:
        flags, width = class_at(buf, pos + 1, classes)
        start = pos + 1
        if (flags & SPACE) != 0:  # " " before whitespace: no optional-space alternative applies
            return whitespace_piece_end(buf, pos, end, classes, False)
    if flags & LETTER:
        return run_end(buf, start + width, end, classes, LETTER)
    if flags & NUMBER:
        return run_end(buf, start + width, end, classes, NUMBER)
    if (flags & SPACE) == 0:
        return run_end(buf, start + width, end, classes, OTHER)
    return whitespace_piece_end(buf, pos, end, classes, False)


@kernel(inline="always")
def tail_piece_end(buf, pos, flags, width, end, classes, slash):
    """The alternatives cl100k and o200k share after their words, at ``pos`` (class ``flags``, ``width`` bytes):
    ``\\p{N}{1,3}``, then `` ?[^\\s\\p{L}\\p{N}]+`` with its trailing ``[\\r\\n]*`` (``[\\r\\n/]*`` with
    ``slash``, o200k), then the whitespace alternatives."""
    if flags & NUMBER:
        i = pos + width
        for _ in range(2):
            if i >= end:
                break
            next_flags, next_width = class_at(buf, i, classes)
            if (next_flags & NUMBER) == 0:
                break
            i += next_width
        return i
    start = -1
    if (flags & LETTER_NUMBER_SPACE) == 0:
        start = pos + width
    elif (flags & ASCII_SPACE) and pos + 1 < end:
        next_flags, next_width = class_at(buf, pos + 1, classes)
        if (next_flags & LETTER_NUMBER_SPACE) == 0:
            start = pos + 1 + next_width
    if start >= 0:
        i = run_end(buf, start, end, classes, OTHER)
        while i < end and (buf[i] == 13 or buf[i] == 10 or (slash and buf[i] == 47)):
            i += 1
        return i
    return whitespace_piece_end(buf, pos, end, classes, True)


@kernel
def cl100k_piece_end(buf, pos, end, classes):
    """End of the cl100k piece starting at ``pos`` (``pos < end``)."""
    contraction = contraction_end(buf, pos, end)  # '(?i:[sdmt]|ll|ve|re)
    if contraction > pos:
        return contraction
    flags, width = class_at(buf, pos, classes)
    # [^\r\n\p{L}\p{N}]?+\p{L}+
    if flags & LETTER:
        return run_end(buf, pos + width, end, classes, LETTER)
    if (flags & LETTER_NUMBER_CR_LF) == 0 and pos + width < end:
        next_flags, next_width = class_at(buf, pos + width, classes)
        if next_flags & LETTER:
            return run_end(buf, pos + width + next_width, end, classes, LETTER)
    return tail_piece_end(buf, pos, flags, width, end, classes, False)


@kernel(inline="always")
def cased_word(buf, s, end, classes):
    """(end of ``U*L+`` at ``s`` or -1, end of the upper run at ``s``) for the o200k case classes.

    Greedy ``U*`` takes the upper run ``[s, u)``; ``L+`` then runs on from ``u`` if ``u`` is lower,
    else ``U*`` backtracks to the run's last character that is also lower, and ``L+`` takes just it.
    """
    i = s
    last_lower_end = -1
    while i < end:
        flags, width = class_at(buf, i, classes)
        if (flags & UPPER) == 0:
            if flags & LOWER:
                return run_end(buf, i + width, end, classes, LOWER), i
            break
        i += width
        if flags & LOWER:
            last_lower_end = i
    return last_lower_end, i


@kernel(inline="always")
def contraction_end(buf, i, end):
    """End of ``(?i:'s|'t|'re|'ve|'m|'ll|'d)?`` at ``i``."""
    if i + 1 < end and buf[i] == 39:
        b1 = lower_ascii(buf[i + 1])
        if b1 == 115 or b1 == 116 or b1 == 109 or b1 == 100:
            return i + 2
        if buf[i + 1] == 0xC5 and i + 2 < end and buf[i + 2] == 0xBF:  # U+017F folds to "s"
            return i + 3
        if i + 2 < end:
            b2 = lower_ascii(buf[i + 2])
            if (b1 == 114 and b2 == 101) or (b1 == 118 and b2 == 101) or (b1 == 108 and b2 == 108):
                return i + 3
    return i


@kernel
def o200k_piece_end(buf, pos, end, classes):
    """End of the o200k piece starting at ``pos`` (``pos < end``)."""
    flags, width = class_at(buf, pos, classes)
    if flags & UPPER_LOWER:  # a letter or a mark: no optional character (unless a mark)
        if (flags & LETTER) == 0 and pos + width < end:  # a mark is in [^\r\n\p{L}\p{N}]
            word_end, _ = cased_word(buf, pos + width, end, classes)
            if word_end >= 0:
                return contraction_end(buf, word_end, end)
        word_end, upper_end = cased_word(buf, pos, end, classes)
        if word_end >= 0:  # always for a lower character or a mark
            return contraction_end(buf, word_end, end)
        return contraction_end(buf, upper_end, end)  # U+L*C? on an upper run with nothing lower after it
    # [^\r\n\p{L}\p{N}]? then a cased word
    if (flags & LETTER_NUMBER_CR_LF) == 0 and pos + width < end:
        word_end, upper_end = cased_word(buf, pos + width, end, classes)
        if word_end >= 0:
            return contraction_end(buf, word_end, end)
        if upper_end > pos + width:
            return contraction_end(buf, upper_end, end)
    return tail_piece_end(buf, pos, flags, width, end, classes, True)


def piece_end(buf, pos, end, classes, pattern):
    """End of the piece at ``pos`` (``pos < end``) under ``pattern``: the full scanners (kernels only)."""
    raise TypeError("piece_end runs inside Numba kernels only (an overload picks the pattern's scanner)")


@overload(piece_end)
def _piece_end(buf, pos, end, classes, pattern):
    scanner = _for_pattern(pattern, gpt2_piece_end, cl100k_piece_end, o200k_piece_end)

    def impl(buf, pos, end, classes, pattern):
        return scanner(buf, pos, end, classes)
    return impl


@kernel(inline="always")
def ascii_table(classes):
    """The flags of the 128 ASCII bytes, and ``NON_ASCII`` for the bytes 0x80..0xFF (uint8[256])."""
    table = np.empty(256, dtype=np.uint8)
    for b in range(128):
        table[b] = classes[b]
    for b in range(128, 256):
        table[b] = NON_ASCII
    return table


@kernel(inline="always")
def ascii_run_end(buf, i, end, table, want):
    """End of the run (``in_run``) of ASCII bytes from ``i``; -1 if it stops at a byte >= 0x80."""
    while i < end:
        flags = table[buf[i]]
        if flags & NON_ASCII:
            return -1
        if not in_run(flags, want):
            return i
        i += 1
    return i


@kernel(inline="always")
def gpt2_ascii_piece_end(buf, pos, end, table):
    """GPT-2's common ASCII pieces: `` ?`` before a word, number or punctuation run, and whitespace runs."""
    b0 = buf[pos]
    flags = table[b0]
    start = pos
    if (flags & ASCII_SPACE) and pos + 1 < end:  # " ?" before a word, number or punctuation
        start = pos + 1
        flags = table[buf[start]]
    if flags & LETTER:
        return ascii_run_end(buf, start + 1, end, table, LETTER)
    if flags & NUMBER:
        return ascii_run_end(buf, start + 1, end, table, NUMBER)
    if (flags & SPACE_NON_ASCII) == 0:
        if b0 == 39:  # an apostrophe at pos may start a contraction
            return -1
        return ascii_run_end(buf, start + 1, end, table, OTHER)
    if (flags & NON_ASCII) == 0:  # \s+(?!\S) or \s+ on an ASCII whitespace run from pos
        i = ascii_run_end(buf, pos + 1, end, table, SPACE)
        if i < 0 or i == end or i == pos + 1:
            return i
        return i - 1
    return -1


@kernel(inline="always")
def cl100k_ascii_piece_end(buf, pos, end, table):
    """cl100k's common ASCII pieces: words with their optional leading character."""
    b0 = buf[pos]
    flags = table[b0]
    if flags & LETTER:
        return ascii_run_end(buf, pos + 1, end, table, LETTER)
    if (flags & LETTER_NUMBER_CR_LF_NON_ASCII) == 0 and b0 != 39 and pos + 1 < end and (table[buf[pos + 1]] & LETTER):
        return ascii_run_end(buf, pos + 2, end, table, LETTER)
    return -1


@kernel(inline="always")
def no_ascii_piece_end(buf, pos, end, table):
    return -1


def ascii_piece_end(buf, pos, end, table, pattern):
    """End of the piece at ``pos`` when it is one of the common ASCII pieces of ``pattern``, else -1
    (kernels only).

    A piece that meets a byte >= 0x80, an apostrophe at ``pos`` (a contraction) or any other case
    gives -1: ``piece_end`` then scans it. No calls, so the loop over pieces stays tight; ``table``
    is ``ascii_table(classes)``. o200k has no fast path.
    """
    raise TypeError("ascii_piece_end runs inside Numba kernels only (an overload picks the pattern's fast path)")


@overload(ascii_piece_end, inline="always")
def _ascii_piece_end(buf, pos, end, table, pattern):
    fast = _for_pattern(pattern, gpt2_ascii_piece_end, cl100k_ascii_piece_end, no_ascii_piece_end)

    def impl(buf, pos, end, table, pattern):
        return fast(buf, pos, end, table)
    return impl


@kernel
def scan_pieces(buf, pos, end, classes, table, pattern, out_ends, at, limit):
    """Write the ends of the pieces from ``pos`` into ``out_ends[at:]`` until ``end`` or ``limit`` entries;
    returns the new ``at``. The inner loop takes the ASCII pieces without calls."""
    while pos < end and at < limit:
        while True:
            e = ascii_piece_end(buf, pos, end, table, pattern)
            if e < 0:
                break
            out_ends[at] = e
            at += 1
            pos = e
            if pos >= end or at >= limit:
                return at
        e = piece_end(buf, pos, end, classes, pattern)
        out_ends[at] = e
        at += 1
        pos = e
    return at


def scan_document(buf, start, pos, end, classes, table, pattern, out_ends, at, limit):
    """``scan_pieces`` within the document ``buf[start:end]`` from the piece end ``pos``, for any pattern:
    a compiled regex (a ``regex_vm.RegexProgram``) runs ``regex_vm.regex_piece_ends``, the named
    patterns their scanners (kernels only)."""
    raise TypeError("scan_document runs inside Numba kernels only (an overload picks the pattern's scanner)")


@overload(scan_document, inline="always")
def _scan_document(buf, start, pos, end, classes, table, pattern, out_ends, at, limit):
    if getattr(pattern, "instance_class", None) is RegexProgram:
        def regex_impl(buf, start, pos, end, classes, table, pattern, out_ends, at, limit):
            return regex_piece_ends(buf, start, end, pos, pattern, out_ends, at, limit)
        return regex_impl
    _for_pattern(pattern, None, None, None)

    def impl(buf, start, pos, end, classes, table, pattern, out_ends, at, limit):
        return scan_pieces(buf, pos, end, classes, table, pattern, out_ends, at, limit)
    return impl


@kernel
def pretokenize_ends(buf, document_offsets, classes, pattern, out_ends):
    """Write the end byte offset of every piece of every document into ``out_ends``.

    ``document_offsets`` (int64, documents + 1) cut ``buf`` into documents; pieces never cross
    a document boundary, so piece ``i`` spans ``[out_ends[i-1], out_ends[i])`` (0 for ``i = 0``).
    ``out_ends`` needs ``len(buf)`` entries. Returns the number of pieces.
    """
    table = ascii_table(classes)
    count = np.int64(0)
    for d in range(document_offsets.shape[0] - 1):
        count = scan_document(buf, document_offsets[d], document_offsets[d], document_offsets[d + 1], classes, table,
                              pattern, out_ends, count, out_ends.shape[0])
    return count
