"""Character tokenizer: vocabulary = specials, then the sorted distinct training characters.

Encoding is one table look-up per code point (a Numba kernel over the UTF-32 view of the text);
decoding gathers code points and decodes them as UTF-32. Both are O(n). A character the
training text lacked is an ``UnknownInputError`` naming it, its document and its offset.
``CharTrainer`` fits it from the distinct characters of batches counted apart (``prepare``).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from engine.errors import TokenizerError
from engine.kernels.bpe_encode import map_symbols
from engine.kernels.wordsplit import code_points
from engine.tokenizers.base import (
    FitOptions,
    Tokenizer,
    UnknownInputError,
    _iter_texts,
    check_encodable,
    check_ids,
    check_text,
    check_texts,
    register_tokenizer,
)
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS
from engine.tokenizers.streaming import any_place_span, encode_streaming

__all__ = ["CharTokenizer", "CharTrainer", "unknown_character_error", "symbol_table", "check_alphabet"]

SPECIALS = 2


def describe_character(ch: str) -> str:
    return f"{ch!r} (U+{ord(ch):04X})"


def unknown_character_error(
    text: str, offset: int, document_id: str | None, kind: str, vocabulary: str, shift: int = 0
) -> UnknownInputError:
    """The error for a character ``kind`` cannot encode: what, which document, which offset
    (``text[offset]``, at ``shift + offset`` in its document)."""
    return UnknownInputError.build(f"character {describe_character(text[offset])} at offset {shift + offset}",
                                   document_id, kind, f"one of its {vocabulary}", "refit on text that contains it")


def symbol_table(alphabet_cps: np.ndarray, first_id: int) -> np.ndarray:
    """int64 table code point -> ``first_id + index in alphabet`` (-1 for characters not in it)."""
    size = int(alphabet_cps.max()) + 1 if alphabet_cps.size else 0
    table = np.full(size, -1, dtype=np.int64)
    table[alphabet_cps] = np.arange(first_id, first_id + alphabet_cps.shape[0], dtype=np.int64)
    return table


def check_alphabet(alphabet, kind: str) -> str:
    """A non-empty str of distinct characters sorted by code point, valid as UTF-8; else TokenizerError."""
    if not isinstance(alphabet, str):
        raise TokenizerError(f"{kind} tokenizer: alphabet is {type(alphabet).__name__}, expected a str")
    if not alphabet:
        raise TokenizerError(f"{kind} tokenizer: the alphabet is empty (expected at least one character)")
    if "".join(sorted(set(alphabet))) != alphabet:
        raise TokenizerError(f"{kind} tokenizer: alphabet must be distinct characters sorted by code point")
    check_encodable([alphabet], f"{kind} tokenizer alphabet")
    return alphabet


def join_documents(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Code points of all texts back to back and the document bounds (int64[D+1])."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    return code_points("".join(texts)), bounds


def raise_unknown_in_documents(texts, document_ids, bounds, position, kind, vocabulary, shift: int = 0):
    """Turn a position in the joined text into the error of its document (``shift``: the offset of a
    span of a long document in it)."""
    doc = int(np.searchsorted(bounds, position, side="right") - 1)
    doc_id = None if document_ids is None else document_ids[doc]
    raise unknown_character_error(texts[doc], int(position - bounds[doc]), doc_id, kind, vocabulary, shift)


@register_tokenizer
class CharTokenizer(Tokenizer):
    """One id per character: ``<bos>``=0, ``<eos>``=1, then characters sorted by code point."""

    kind = "char"
    fit_name = "char"
    thread_safe_encode = True
    _streams_long_texts = True

    def __init__(self, alphabet: str):
        self.alphabet = check_alphabet(alphabet, self.kind)
        self._cps = code_points(alphabet)
        self._table = symbol_table(self._cps, SPECIALS)

    @classmethod
    def fit(cls, texts: Iterable[str] | str) -> "CharTokenizer":
        """Vocabulary from the training text(s): every distinct character, sorted by code point."""
        seen: set[str] = set()
        for text in _iter_texts(texts):
            seen.update(text)
        if not seen:
            raise TokenizerError("char tokenizer: the training text is empty (expected at least one character)")
        return cls("".join(sorted(seen)))

    @classmethod
    def trainer(cls, options: FitOptions) -> "CharTrainer":
        return CharTrainer()

    @property
    def vocab_size(self) -> int:
        return SPECIALS + len(self.alphabet)

    def _encode(self, text: str, document_id: str | None) -> np.ndarray:
        ids, first_unknown = map_symbols(code_points(text), self._table)
        if first_unknown >= 0:
            raise unknown_character_error(text, first_unknown, document_id, self.kind, "training characters")
        return ids.astype(np.uint32)

    def encode_documents(self, texts, document_ids=None, *, progress=None, stream_chars: int = STREAM_CHARS,
                         piece_chars: int = PIECE_CHARS):
        texts, document_ids = check_texts(texts, document_ids, self.kind)
        return encode_streaming(self, texts, document_ids, self._encode_wrapped, progress, stream_chars, piece_chars)

    def _span(self, window: str, pos: int, document_id: str | None, final: bool):
        return len(window), window  # every character is a token: any place is safe

    def _encode_span(self, span: str, document_id: str | None, pos: int) -> tuple[np.ndarray, int]:
        ids, first_unknown = map_symbols(code_points(span), self._table)
        if first_unknown >= 0:
            raise unknown_character_error(span, first_unknown, document_id, self.kind, "training characters", pos)
        return ids.astype(np.uint32), len(span.encode("utf-8", "surrogatepass"))

    def _encode_wrapped(self, texts, document_ids):
        cps, bounds = join_documents(texts)
        ids, first_unknown = map_symbols(cps, self._table)
        if first_unknown >= 0:
            raise_unknown_in_documents(texts, document_ids, bounds, first_unknown, self.kind, "training characters")
        n_docs = len(texts)
        offsets = bounds + 2 * np.arange(n_docs + 1, dtype=np.int64)
        values = np.empty(offsets[-1], dtype=np.uint32)
        values[offsets[:-1]] = self.bos_id
        values[offsets[1:] - 1] = self.eos_id
        doc_of_char = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(bounds))
        values[np.arange(cps.shape[0], dtype=np.int64) + 2 * doc_of_char + 1] = ids
        return values, offsets

    def decode(self, ids) -> str:
        arr = check_ids(ids, self.vocab_size, self.kind)
        content = arr[arr >= SPECIALS] - SPECIALS
        return self._cps[content].tobytes().decode("utf-32-le", "surrogatepass")

    def tokenize(self, text: str) -> list[str]:
        self._encode(check_text(text, self.kind), None)
        return list(text)

    def _payload(self) -> dict:
        return {"alphabet": self.alphabet}

    @classmethod
    def _from_payload(cls, payload: dict) -> "CharTokenizer":
        alphabet = payload["alphabet"]
        if not isinstance(alphabet, str):
            raise TokenizerError("char tokenizer payload: \"alphabet\" must be a string")
        return cls(alphabet)


class CharTrainer:
    """Fits ``CharTokenizer`` from batches: types are the distinct characters, counts their occurrences."""

    span = staticmethod(any_place_span)  # a long training text may be cut anywhere

    def count_types(self, texts) -> tuple[list[str], np.ndarray]:
        distinct, counts = np.unique(code_points("".join(texts)), return_counts=True)
        return list(distinct.tobytes().decode("utf-32-le", "surrogatepass")), counts.astype(np.int64)

    def train_from_counts(self, types, counts) -> CharTokenizer:
        if not len(types):
            raise TokenizerError("char tokenizer: the training text is empty (expected at least one character)")
        return CharTokenizer("".join(sorted(types)))
