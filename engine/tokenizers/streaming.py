"""Long documents encoded span by span: the encoder's scratch is bounded by a span, not by the document
(what remains is the document's text and its ids, 4 bytes per token, in one growing buffer).

A document longer than ``stream_chars`` characters (a keyword of ``encode_documents``, of the
trainers and of every function here; ``STREAM_CHARS``, 2M, by default; ``PrepareLimits.stream_chars``
in ``prepare``) is cut into spans that end where a piece of the kind's pre-tokenizer (or word split)
ends for certain, whatever text follows; each span is encoded on
its own, and the ids are exactly those of the whole document (merges never cross a piece). Each kind
says where a window of text may be cut (``Tokenizer._span``: how many characters, 0 when the window
holds no safe place yet) and encodes a span (``Tokenizer._encode_span``). Where a window holds no safe
place (one piece longer than the window), the window doubles until it holds one, up to ``piece_chars``
characters (``PIECE_CHARS``, 4M, by default; ``PrepareLimits.piece_chars``; never below
``stream_chars``). A window of ``piece_chars`` characters that still holds no safe place is cut at its
end and encoded as a span of its own: the one rule by which a span's end can change ids, and only those
of a stretch of more than ``piece_chars`` characters in which no piece ends for certain (one unbroken
piece: DNA, base64, minified code, ``"ab" * 75_000_000``). Up to that length a piece is encoded whole,
with the ids of the reference encoders; beyond it the piece is encoded as parts of ``piece_chars``
characters (its spans start at the same places whatever ``stream_chars`` is, so local and Ray runs, any
thread count and a resumed run give the same ids; a resumed run with another ``piece_chars`` starts
afresh), and the encoder's memory stays
that of a span of ``piece_chars`` characters for any piece length. A kind that knows no safe place (an
imported ``tokenizer.json`` or SentencePiece model, ``_streams_long_texts`` False) is never cut: its
documents are encoded whole.

Safe places:

- character tokenizer: anywhere;
- word split (word tokenizer, classic BPE): after any character that is not a word character (it is
  a piece of its own);
- byte-level pre-tokenizer given as a regex (none of the named ones): the last piece end before
  which no search of the matcher looked at the end of the window (``regex_final_piece_ends``) and
  whose text alone is cut into the same pieces (a lookahead may have read the character at the end):
  the pieces before it are those of the whole text; nowhere for a regex with ``^``, ``\\A``, ``\\b`` or
  ``\\B`` (a span would start a new text there), so such a document is one stretch in which no piece
  ends for certain: encoded whole up to ``piece_chars`` characters, in parts of that many beyond;
- byte-level pre-tokenizers (gpt2, cl100k, o200k): a piece end ``c`` with at least
  ``SPAN_MARGIN_BYTES`` bytes of the window after it, where the characters on both sides of ``c``
  belong to no common run of any pattern (``safe_piece_end``): a letter, number or other character
  followed by a character of another of the classes letter, number, other, whitespace, except other
  followed by ``\\r``/``\\n`` (``[\\r\\n]*`` after punctuation); marks (``\\p{M}``) and whitespace
  before ``c`` never qualify. Every scan of the patterns that starts before ``c`` then stops within
  three characters after it (contractions), so the pieces before ``c`` are those of the whole text.

Fitting cuts sooner: a training text with no safe place in ``stream_chars`` characters is counted as
parts of ``stream_chars`` characters (``fit_texts``), so fitting holds a bounded span whatever the piece
length. Below ``piece_chars`` encoding never cuts a piece (byte-level BPE merges a piece longer than
``PieceCacheLimits.long_piece_window`` bytes window by window, with the ids of the whole piece: the
rule of ``engine.kernels.bpe_merge``).

``progress(nbytes)``, if given, is called after each span with its UTF-8 size.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from engine.checks import positive_int
from engine.kernels.pretokenize import pretokenize_ends
from engine.kernels.regex_vm import (ASSERT, A_BOL, A_BOS, A_NWORDB, A_WORDB, RegexProgram,
                                     regex_final_piece_ends)
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS
from engine.tokenizers.pretokenize import utf8_bytes
from engine.tokenizers.unicode_tables import CR_LF, LETTER, LOWER, NUMBER, SPACE, UPPER, code_point_classes

__all__ = [
    "STREAM_CHARS", "PIECE_CHARS", "SPAN_MARGIN_BYTES", "check_stream_chars", "check_piece_chars", "encode_streaming",
    "encode_long", "encode_long_joined", "iter_spans",
    "training_batches", "fit_texts",
    "safe_piece_end", "byte_level_span", "byte_level_text_span", "word_split_cut", "word_split_text_span",
    "any_place_span", "WordSplitSpans",
]

# Bytes a byte-level window must hold after a cut: the longest look-ahead past a piece end is a
# contraction ('re: three characters of up to four bytes).
SPAN_MARGIN_BYTES = 16

_LETTER, _NUMBER, _OTHER, _SPACE = 1, 2, 3, 4  # categories of safe_piece_end; 0: a mark (never safe)


class _Ids:
    """A growing uint32 buffer; ``ndarray.resize`` reallocates in place where it can (large blocks
    are remapped, not copied), so the peak stays near the final size instead of twice it."""

    def __init__(self, capacity: int):
        self.array = np.empty(max(capacity, 16), dtype=np.uint32)
        self.used = 0

    def append(self, values: np.ndarray) -> None:
        need = self.used + values.shape[0]
        if need > self.array.shape[0]:
            self.array.resize(max(need, self.array.shape[0] + self.array.shape[0] // 2), refcheck=False)
        self.array[self.used:need] = values
        self.used = need

    def finish(self) -> np.ndarray:
        self.array.resize(self.used, refcheck=False)
        return self.array


def encode_streaming(tok, texts: Sequence[str], document_ids: Sequence[str] | None,
                     encode_short: Callable, progress: Callable[[int], None] | None = None,
                     stream_chars: int = STREAM_CHARS, piece_chars: int = PIECE_CHARS
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)`` of the wrapped documents: runs of short documents through
    ``encode_short(texts, ids)`` (the kind's batch kernel), each one longer than ``stream_chars``
    characters span by span (spans of at most ``piece_chars`` characters)."""
    stream_chars = check_stream_chars(stream_chars)
    piece_chars = check_piece_chars(piece_chars)
    long = [i for i, text in enumerate(texts) if len(text) > stream_chars]
    if not long:
        return encode_short(texts, document_ids)
    out = _Ids(stream_chars)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    start = 0
    for i in long + [len(texts)]:
        if start < i:
            values, short_offsets = encode_short(texts[start:i],
                                                 None if document_ids is None else document_ids[start:i])
            offsets[start + 1:i + 1] = short_offsets[1:] + out.used
            out.append(values)
        if i < len(texts):
            out.append(np.array([tok.bos_id], dtype=np.uint32))
            for ids in encode_long(tok, texts[i], None if document_ids is None else document_ids[i], progress,
                                   stream_chars, piece_chars):
                out.append(ids)
            out.append(np.array([tok.eos_id], dtype=np.uint32))
            offsets[i + 1] = out.used
        start = i + 1
    return out.finish(), offsets


def iter_spans(text, span: Callable, *, cut_pieces: bool = False, stream_chars: int = STREAM_CHARS,
               piece_chars: int | None = PIECE_CHARS) -> Iterator[tuple[int, object]]:
    """``(character offset, span)`` of ``text`` cut by ``span(window, pos, final) -> (characters, span)``
    in windows of ``stream_chars`` characters; a window with no safe place doubles, up to
    ``max(piece_chars, stream_chars)`` characters, and a window of that size with none is cut at its end
    (``span(window, pos, True)``: the whole window; the module docstring). ``piece_chars=None``: the
    window grows until it holds a safe place or the rest of the text (a kind that cuts nowhere).
    ``text``: a str, or a text read part by part (``LongText``: its ``parts()``), cut the same way.
    ``cut_pieces`` (fitting only, the spans are text): a window of ``stream_chars`` characters with no
    safe place is cut at its end instead of growing."""
    stream_chars = check_stream_chars(stream_chars)
    if cut_pieces:
        longest = stream_chars
    elif piece_chars is None:
        longest = 1 << 62  # never reached: the window meets the text's end first
    else:
        longest = max(check_piece_chars(piece_chars), stream_chars)
    if not isinstance(text, str):
        yield from _iter_part_spans(text.parts(), span, longest, stream_chars)
        return
    pos, size = 0, stream_chars
    while pos < len(text):
        end = min(len(text), pos + size)
        window = text[pos:end]
        cut, piece = span(window, pos, end == len(text))
        if cut <= 0 and size >= longest:  # no safe place in the longest span: cut at its end
            cut, piece = span(window, pos, True)
        if cut <= 0:
            size = min(2 * size, longest)  # no safe place in the window yet: one piece is longer than it
            continue
        yield pos, piece
        pos, size = pos + cut, stream_chars


def _iter_part_spans(parts: Iterator[str], span: Callable, longest: int,
                     stream_chars: int) -> Iterator[tuple[int, object]]:
    """``iter_spans`` of the text made of ``parts``: the same windows, holding about one window of it."""
    held, pos, size, more = "", 0, stream_chars, True
    while True:
        while more and len(held) < size:
            part = next(parts, None)
            more = part is not None
            held += part or ""
        if not held:
            return
        end = min(len(held), size)
        cut, piece = span(held[:end], pos, not more and end == len(held))
        if cut <= 0 and size >= longest:
            cut, piece = span(held[:end], pos, True)
        if cut <= 0:
            size = min(2 * size, longest)
            continue
        yield pos, piece
        held, pos, size = held[cut:], pos + cut, stream_chars


def encode_long(tok, text: str, document_id: str | None, progress: Callable[[int], None] | None = None,
                stream_chars: int = STREAM_CHARS, piece_chars: int = PIECE_CHARS) -> Iterator[np.ndarray]:
    """Content ids (uint32 arrays, in order) of ``text``, encoded span by span (windows of ``stream_chars``,
    spans of at most ``max(piece_chars, stream_chars)`` characters). A kind that knows no safe place
    (``_streams_long_texts`` False: a ``tokenizer.json`` or SentencePiece model) gets one span, the whole
    text, whatever ``piece_chars`` is."""
    if not getattr(tok, "_streams_long_texts", False):
        piece_chars = None
    for pos, span in iter_spans(text, lambda window, at, final: tok._span(window, at, document_id, final),
                                stream_chars=stream_chars, piece_chars=piece_chars):
        ids, nbytes = tok._encode_span(span, document_id, pos)
        yield ids
        if progress is not None:
            progress(nbytes)


def encode_long_joined(tok, text: str, document_id: str | None) -> np.ndarray:
    """``encode_long``'s ids as one uint32 array, each span's ids copied as they come (a kind's span ids
    may be a view of a buffer the size of its span: keeping them all would hold every span's buffer)."""
    out = _Ids(STREAM_CHARS)
    for ids in encode_long(tok, text, document_id):
        out.append(ids)
    return out.finish()


def training_batches(trainer, batches: Iterable[list[str]], stream_chars: int = STREAM_CHARS) -> Iterator[list[str]]:
    """``batches`` of training texts with every text longer than ``stream_chars`` characters cut into
    spans (``trainer.span``), in order, so a trainer counts types of a long document without holding
    its tables for the whole of it. The types and counts are those of the texts (spans end where
    pieces end), but for a piece longer than ``stream_chars`` characters, counted in parts (the
    module docstring)."""
    stream_chars = check_stream_chars(stream_chars)
    for batch in batches:
        short: list[str] = []
        for text in batch:
            if len(text) <= stream_chars and isinstance(text, str):
                short.append(text)
                continue
            if short:
                yield short
                short = []
            for _, span in iter_spans(text, trainer.span, cut_pieces=True, stream_chars=stream_chars):
                yield [span]
        if short:
            yield short


def fit_texts(trainer, texts: Iterable[str], stream_chars: int = STREAM_CHARS) -> Iterator[str]:
    """``texts`` one by one, each longer than ``stream_chars`` characters as its spans (``training_batches``'s
    rule, pieces longer than that counted in parts): what a trainer's ``train(texts)`` counts."""
    stream_chars = check_stream_chars(stream_chars)
    for text in texts:
        if isinstance(text, str) and len(text) <= stream_chars:
            yield text
        else:
            for _, span in iter_spans(text, trainer.span, cut_pieces=True, stream_chars=stream_chars):
                yield span


def check_stream_chars(stream_chars) -> int:
    """``stream_chars`` as a positive int, else a ConfigurationError naming it."""
    return positive_int(stream_chars, "stream_chars")


def check_piece_chars(piece_chars) -> int:
    """``piece_chars`` as a positive int, else a ConfigurationError naming it."""
    return positive_int(piece_chars, "piece_chars")


def byte_level_span(window: str, pos: int, document_id: str | None, final: bool, pattern: int
                    ) -> tuple[int, np.ndarray | None]:
    """(characters of ``window`` to encode on their own, their UTF-8 bytes) under a byte-level pattern."""
    data = np.frombuffer(utf8_bytes(window, document_id, shift=pos), dtype=np.uint8)
    if final:
        return len(window), data
    if isinstance(pattern, RegexProgram):
        return _regex_span(data, pattern)
    limit = data.shape[0] - SPAN_MARGIN_BYTES
    if limit <= 0:
        return 0, None
    ends = np.empty(data.shape[0], dtype=np.int64)
    count = pretokenize_ends(data, np.array([0, data.shape[0]], dtype=np.int64), code_point_classes(), pattern, ends)
    cut = safe_piece_end(data, ends[:count], limit)
    return int(np.count_nonzero((data[:cut] & 0xC0) != 0x80)), data[:cut]


# Final piece ends a regex window tries, from its last back, before it counts as holding no safe place.
_REGEX_CUT_TRIES = 4


def _regex_span(data: np.ndarray, program) -> tuple[int, np.ndarray | None]:
    """A compiled regex: cut at the last final piece end (``regex_vm.regex_final_piece_ends``) whose text
    alone is cut into the same pieces (a search before a final end read nothing past the window, but may
    have read the character at the end itself: a lookahead); none (0) for a program with an anchor that
    looks behind a position (``^``, ``\\A``, ``\\b``, ``\\B``), or where no such end is found."""
    looks_back = (program.code[:, 0] == ASSERT) & np.isin(program.code[:, 1], [A_BOL, A_BOS, A_WORDB, A_NWORDB])
    if looks_back.any():
        return 0, None
    ends = np.empty(data.shape[0], dtype=np.int64)
    count, final = regex_final_piece_ends(data, data.shape[0], program, ends)
    alone = np.empty(data.shape[0], dtype=np.int64)
    for k in range(final, max(final - _REGEX_CUT_TRIES, 0), -1):
        cut = int(ends[k - 1])
        pieces, _ = regex_final_piece_ends(data, cut, program, alone)  # the prefix as a text of its own
        if pieces == k and np.array_equal(alone[:k], ends[:k]):
            return int(np.count_nonzero((data[:cut] & 0xC0) != 0x80)), data[:cut]
    return 0, None


def byte_level_text_span(window: str, pos: int, final: bool, pattern: int) -> tuple[int, str]:
    """``byte_level_span`` as text (for trainers)."""
    cut, _ = byte_level_span(window, pos, None, final, pattern)
    return cut, window[:cut]


def word_split_cut(window: str, final: bool) -> int:
    """Characters of ``window`` to encode on their own under the word split: up to and including its
    last non-word character (all of it if ``final``); 0 if it has none."""
    if final:
        return len(window)
    from engine.kernels.wordsplit import WORD, char_classes, code_points

    other = np.flatnonzero(char_classes()[code_points(window)] != WORD)
    return int(other[-1]) + 1 if other.size else 0


def word_split_text_span(window: str, pos: int, final: bool) -> tuple[int, str]:
    """``word_split_cut`` as (characters, span) (for trainers)."""
    cut = word_split_cut(window, final)
    return cut, window[:cut]


def any_place_span(window: str, pos: int, final: bool) -> tuple[int, str]:
    """A character tokenizer's span: the whole window."""
    return len(window), window


class WordSplitSpans:
    """``_span``/``_encode_span`` of the kinds that encode pieces of the word split (``_encode_many``)."""

    _streams_long_texts = True

    def _span(self, window: str, pos: int, document_id: str | None, final: bool) -> tuple[int, str]:
        return word_split_text_span(window, pos, final)

    def _encode_span(self, span: str, document_id: str | None, pos: int) -> tuple[np.ndarray, int]:
        values, _ = self._encode_many([span], None if document_id is None else [document_id], wrap=False, shift=pos)
        return values, len(span.encode("utf-8", "surrogatepass"))


def _categories(cps: np.ndarray) -> np.ndarray:
    flags = code_point_classes()[cps]
    cat = np.full(cps.shape[0], _OTHER, dtype=np.int8)
    cat[(flags & (UPPER | LOWER)) != 0] = 0  # marks (letters are set below)
    cat[(flags & SPACE) != 0] = _SPACE
    cat[(flags & NUMBER) != 0] = _NUMBER
    cat[(flags & LETTER) != 0] = _LETTER
    return cat


def _code_points_at(padded: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Code points of the UTF-8 characters starting at ``starts`` (``padded``: the bytes plus 3 zeros)."""
    b0, b1, b2, b3 = (padded[starts + k].astype(np.int64) for k in range(4))
    two = ((b0 & 0x1F) << 6) | (b1 & 0x3F)
    three = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
    four = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
    return np.where(b0 < 0x80, b0, np.where(b0 < 0xE0, two, np.where(b0 < 0xF0, three, four)))


def safe_piece_end(data: np.ndarray, ends: np.ndarray, limit: int) -> int:
    """The last piece end ``c <= limit`` of UTF-8 ``data`` (piece ends ``ends``) at which a byte-level
    window may be cut (see the module docstring); 0 if there is none."""
    cand = ends[(ends > 0) & (ends <= limit) & (ends < data.shape[0])]
    if not cand.size:
        return 0
    padded = np.concatenate([data, np.zeros(3, dtype=np.uint8)])
    before = cand - 1
    for _ in range(3):  # back to the first byte of the character before the cut
        before = np.where((padded[before] & 0xC0) == 0x80, before - 1, before)
    before_cp, at_cp = _code_points_at(padded, before), _code_points_at(padded, cand)
    x, y = _categories(before_cp), _categories(at_cp)
    newline = (code_point_classes()[at_cp] & CR_LF) != 0
    ok = (x != 0) & (x != _SPACE) & (y != 0) & (x != y) & ~((x == _OTHER) & newline)
    good = np.flatnonzero(ok)
    return int(cand[good[-1]]) if good.size else 0
