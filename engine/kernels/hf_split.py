"""Pre-tokenizer steps of a Hugging Face ``tokenizer.json`` pipeline, over UTF-8 bytes.

The text of one segment is one uint8 buffer; its pieces are contiguous and described by their end
offsets ``ends`` (int64, piece ``i`` is ``[ends[i-1], ends[i])``, the first starts at 0, none is
empty). Each step maps ``(buf, ends)`` to new pieces. Steps that remove text return ``(starts,
ends)`` of the kept pieces, and ``compact`` gathers them into a new contiguous buffer.

A split first lists the *spans* of a piece: alternating unmatched text and matches, in order
(Hugging Face's ``find_matches``: a character pattern makes every matching character a match of its
own; a regex or a literal gives its non-overlapping matches, empty ones included). The behaviour
then folds the spans (``fold_spans``):

- ``ISOLATED``: every span is a piece; ``REMOVED``: the matches are dropped;
- ``MERGED_PREVIOUS``: a match joins the span before it when that one is no match;
- ``MERGED_NEXT``: a match joins the span after it when that one is no match;
- ``CONTIGUOUS``: consecutive spans of the same kind (match or not) join.

``invert`` swaps match and unmatched before folding. Empty pieces are dropped at the end.

Characters are classified by a uint8 flag table per code point (``flags``); after a ``ByteLevel``
step every byte stands for one character of GPT-2's byte alphabet, and ``byte_flags`` (256 entries)
classifies those characters instead (``mapped``).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel
from engine.kernels.regex_vm import find_piece_matches

__all__ = [
    "ISOLATED", "REMOVED", "MERGED_PREVIOUS", "MERGED_NEXT", "CONTIGUOUS", "fold_spans", "split_classes",
    "split_words", "split_matches", "find_literal", "regex_matches", "byte_chars_utf8", "edit_pieces", "compact",
    "spaces_replaced",
]

ISOLATED, REMOVED, MERGED_PREVIOUS, MERGED_NEXT, CONTIGUOUS = 0, 1, 2, 3, 4


@kernel(inline="always")
def _char_at(buf, i, end):
    """``(code point, length)`` of the UTF-8 character at ``buf[i]`` (valid UTF-8)."""
    b = np.int64(buf[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F), 3
    return (((b & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12) | ((np.int64(buf[i + 2]) & 0x3F) << 6)
            | (np.int64(buf[i + 3]) & 0x3F)), 4


@kernel
def fold_spans(span_starts, span_ends, span_match, count, behavior, invert, out_starts, out_ends, at):
    """Fold the spans ``[:count]`` of one piece by ``behavior`` into ``out_starts/out_ends[at:]``;
    returns the new ``at``. Empty results are kept here (``split_*`` drop them)."""
    first = at
    previous = False
    i = 0
    while i < count:
        s, e = span_starts[i], span_ends[i]
        match = span_match[i] != invert
        if behavior == ISOLATED:
            out_starts[at], out_ends[at] = s, e
            at += 1
        elif behavior == REMOVED:
            if not match:
                out_starts[at], out_ends[at] = s, e
                at += 1
        elif behavior == MERGED_PREVIOUS:
            if match and not previous and at > first:
                out_ends[at - 1] = e
            else:
                out_starts[at], out_ends[at] = s, e
                at += 1
        elif behavior == MERGED_NEXT:
            if match and i + 1 < count and (span_match[i + 1] == invert):  # the next span is no match
                out_starts[at], out_ends[at] = s, span_ends[i + 1]
                at += 1
                i += 2
                previous = False
                continue
            out_starts[at], out_ends[at] = s, e
            at += 1
        else:  # CONTIGUOUS
            if match == previous and at > first:
                out_ends[at - 1] = e
            else:
                out_starts[at], out_ends[at] = s, e
                at += 1
        previous = match
        i += 1
    return at


@kernel(inline="always")
def _drop_empty(out_starts, out_ends, count):
    kept = 0
    for i in range(count):
        if out_ends[i] > out_starts[i]:
            out_starts[kept], out_ends[kept] = out_starts[i], out_ends[i]
            kept += 1
    return kept


@kernel
def split_classes(buf, ends, flags, byte_flags, mapped, mask, target, behavior, invert):
    """Split every piece on its characters that match: ``flags[c] & mask`` (``byte_flags[b] & mask``
    per byte when ``mapped``) or ``c == target`` (-1: none). Returns ``(starts, ends, count)``."""
    n = ends.shape[0]
    total = buf.shape[0]
    span_starts = np.empty(2 * total + 2, dtype=np.int64)
    span_ends = np.empty(2 * total + 2, dtype=np.int64)
    span_match = np.empty(2 * total + 2, dtype=np.bool_)
    out_starts = np.empty(2 * total + 2, dtype=np.int64)
    out_ends = np.empty(2 * total + 2, dtype=np.int64)
    at = np.int64(0)
    start = np.int64(0)
    for p in range(n):
        end = ends[p]
        count = 0
        last = start
        i = start
        while i < end:
            if mapped:
                hit = (byte_flags[buf[i]] & mask) != 0
                width = 1
            else:
                c, width = _char_at(buf, i, end)
                hit = (flags[c] & mask) != 0 or c == target
            if hit:
                if last < i:
                    span_starts[count], span_ends[count], span_match[count] = last, i, False
                    count += 1
                span_starts[count], span_ends[count], span_match[count] = i, i + width, True
                count += 1
                last = i + width
            i += width
        if last < end:
            span_starts[count], span_ends[count], span_match[count] = last, end, False
            count += 1
        at = fold_spans(span_starts, span_ends, span_match, count, behavior, invert, out_starts, out_ends, at)
        start = end
    return out_starts, out_ends, _drop_empty(out_starts, out_ends, at)


@kernel
def split_words(buf, ends, flags, byte_flags, mapped, word, space):
    """The ``Whitespace`` pre-tokenizer (``\\w+|[^\\w\\s]+``, the rest removed): runs of word
    characters (``flags & word``) and runs of other non-space characters (not ``flags & space``).
    Returns ``(starts, ends, count)``."""
    n = ends.shape[0]
    out_starts = np.empty(buf.shape[0] + 1, dtype=np.int64)
    out_ends = np.empty(buf.shape[0] + 1, dtype=np.int64)
    at = 0
    start = np.int64(0)
    for p in range(n):
        end = ends[p]
        i = start
        kind = 0  # of the run in progress: 0 none, 1 word, 2 other
        while i < end:
            if mapped:
                f = byte_flags[buf[i]]
                width = 1
            else:
                c, width = _char_at(buf, i, end)
                f = flags[c]
            k = 1 if (f & word) != 0 else (0 if (f & space) != 0 else 2)
            if k != kind:
                if kind != 0:
                    out_ends[at - 1] = i
                if k != 0:
                    out_starts[at] = i
                    at += 1
                kind = k
            i += width
        if kind != 0:
            out_ends[at - 1] = end
        start = end
    return out_starts, out_ends, at


@kernel
def split_matches(ends, match_starts, match_ends, match_piece, m, behavior, invert):
    """Split every piece by its matches (``match_piece[j]``: the piece of match ``j``; matches of a
    piece in order, absolute offsets). Returns ``(starts, ends, count)``."""
    n = ends.shape[0]
    size = 2 * m + n + 2
    span_starts = np.empty(size, dtype=np.int64)
    span_ends = np.empty(size, dtype=np.int64)
    span_match = np.empty(size, dtype=np.bool_)
    out_starts = np.empty(size, dtype=np.int64)
    out_ends = np.empty(size, dtype=np.int64)
    at = np.int64(0)
    j = 0
    start = np.int64(0)
    for p in range(n):
        end = ends[p]
        count = 0
        last = start
        while j < m and match_piece[j] == p:
            s, e = match_starts[j], match_ends[j]
            if last != s:
                span_starts[count], span_ends[count], span_match[count] = last, s, False
                count += 1
            span_starts[count], span_ends[count], span_match[count] = s, e, True
            count += 1
            last = e
            j += 1
        if last != end:
            span_starts[count], span_ends[count], span_match[count] = last, end, False
            count += 1
        at = fold_spans(span_starts, span_ends, span_match, count, behavior, invert, out_starts, out_ends, at)
        start = end
    return out_starts, out_ends, _drop_empty(out_starts, out_ends, at)


@kernel
def find_literal(buf, ends, pattern):
    """Non-overlapping occurrences of ``pattern`` (non-empty bytes) in every piece, leftmost first:
    ``(starts, ends, pieces, count)``."""
    n = ends.shape[0]
    k = pattern.shape[0]
    out_s = np.empty(buf.shape[0] // max(k, 1) + 1, dtype=np.int64)
    out_e = np.empty_like(out_s)
    out_p = np.empty_like(out_s)
    count = 0
    start = np.int64(0)
    for p in range(n):
        end = ends[p]
        i = start
        while i + k <= end:
            same = True
            for t in range(k):
                if buf[i + t] != pattern[t]:
                    same = False
                    break
            if same:
                out_s[count], out_e[count], out_p[count] = i, i + k, p
                count += 1
                i += k
            else:
                i += 1
        start = end
    return out_s, out_e, out_p, count


@kernel
def regex_matches(buf, ends, program):
    """The matches of a compiled regex in every piece, each piece its own text (anchors and lookahead
    stop at its ends), as Oniguruma's iterator gives them (``Split``), all pieces in one pass
    (``engine.kernels.regex_vm.find_piece_matches``): ``(starts, ends, pieces, count)``."""
    rows = 2 * buf.shape[0] + 2 * ends.shape[0] + 2
    out = np.empty((rows, 2), dtype=np.int64)
    pieces = np.empty(rows, dtype=np.int64)
    count = find_piece_matches(buf, 0, ends, program, out, pieces, True)
    return out[:count, 0].copy(), out[:count, 1].copy(), pieces[:count], count


@kernel
def byte_chars_utf8(buf, ends, mapped_cps):
    """After a ``ByteLevel`` step each byte stands for the character ``mapped_cps[byte]`` of GPT-2's
    byte alphabet: ``(text, text_ends, back)``, the UTF-8 of those characters (one or two bytes each),
    the pieces' ends in it, and for each character start in ``text`` (and its end) the offset in
    ``buf`` of its byte, so that a span found in ``text`` is ``back[start], back[end]`` in ``buf``."""
    size = 0
    for i in range(buf.shape[0]):
        size += 1 if mapped_cps[buf[i]] < 0x80 else 2
    text = np.empty(size, dtype=np.uint8)
    back = np.zeros(size + 1, dtype=np.int64)
    at = 0
    for i in range(buf.shape[0]):
        c = mapped_cps[buf[i]]
        back[at] = i
        if c < 0x80:
            text[at] = c
            at += 1
        else:
            text[at] = 0xC0 | (c >> 6)
            text[at + 1] = 0x80 | (c & 0x3F)
            at += 2
    back[size] = buf.shape[0]
    text_ends = np.empty(ends.shape[0], dtype=np.int64)
    i = 0
    at = 0
    for p in range(ends.shape[0]):
        while i < ends[p]:
            at += 1 if mapped_cps[buf[i]] < 0x80 else 2
            i += 1
        text_ends[p] = at
    return text, text_ends, back


@kernel
def edit_pieces(buf, ends, prefix, prefix_flags, replace_space, replacement):
    """A new buffer where piece ``p`` gets ``prefix`` before it when ``prefix_flags[p]``, and, with
    ``replace_space``, every byte 0x20 becomes ``replacement``. Returns ``(new buffer, new ends)``."""
    n = ends.shape[0]
    spaces = 0
    if replace_space:
        for i in range(buf.shape[0]):
            if buf[i] == 0x20:
                spaces += 1
    prefixed = 0
    for p in range(n):
        if prefix_flags[p]:
            prefixed += 1
    out = np.empty(buf.shape[0] + spaces * (replacement.shape[0] - 1) + prefixed * prefix.shape[0], dtype=np.uint8)
    out_ends = np.empty(n, dtype=np.int64)
    at = 0
    start = 0
    for p in range(n):
        if prefix_flags[p]:
            for t in range(prefix.shape[0]):
                out[at] = prefix[t]
                at += 1
        for i in range(start, ends[p]):
            if replace_space and buf[i] == 0x20:
                for t in range(replacement.shape[0]):
                    out[at] = replacement[t]
                    at += 1
            else:
                out[at] = buf[i]
                at += 1
        out_ends[p] = at
        start = ends[p]
    return out, out_ends


@kernel
def compact(buf, starts, ends, count):
    """The pieces ``[starts[i], ends[i])`` for ``i < count`` gathered into one buffer: ``(buffer, ends)``."""
    total = 0
    for i in range(count):
        total += ends[i] - starts[i]
    out = np.empty(total, dtype=np.uint8)
    out_ends = np.empty(count, dtype=np.int64)
    at = 0
    for i in range(count):
        for j in range(starts[i], ends[i]):
            out[at] = buf[j]
            at += 1
        out_ends[i] = at
    return out, out_ends


@kernel
def spaces_replaced(buf, length, replacement, prefix):
    """The ``length`` code points of the UTF-8 ``buf`` (valid, as Python encodes a str) with every
    space (U+0020) as ``replacement``, after ``prefix`` (a code point; -1: none): a Metaspace step that
    does not split, or Llama 2's ``Prepend`` + ``Replace`` normalizers, on a whole part's code points
    (``hf_steps.whole_code_points``). Decoded here, the text is read once and written once, where
    its UTF-32 first would write it twice."""
    lead = 1 if prefix >= 0 else 0
    out = np.empty(length + lead, dtype=np.uint32)
    if lead:
        out[0] = prefix
    at = lead
    i = 0
    n = buf.shape[0]
    while i < n:
        b = np.uint32(buf[i])
        if b < 0x80:
            out[at] = replacement if b == 0x20 else b
            i += 1
        elif b < 0xE0:
            out[at] = ((b & 0x1F) << 6) | (np.uint32(buf[i + 1]) & 0x3F)
            i += 2
        elif b < 0xF0:
            out[at] = ((b & 0x0F) << 12) | ((np.uint32(buf[i + 1]) & 0x3F) << 6) | (np.uint32(buf[i + 2]) & 0x3F)
            i += 3
        else:
            out[at] = (((b & 0x07) << 18) | ((np.uint32(buf[i + 1]) & 0x3F) << 12)
                       | ((np.uint32(buf[i + 2]) & 0x3F) << 6) | (np.uint32(buf[i + 3]) & 0x3F))
            i += 4
        at += 1
    return out
