"""Word tokenizer: pieces of ``\\w+|[^\\w\\s]|\\s`` (``re`` semantics), one id per piece.

Vocabulary = ``<bos>``=0, ``<eos>``=1, then (if built with ``unknown=``) the unknown token at 2,
then the distinct training pieces sorted by code point sequence. Encoding splits the text with
the word-split kernel, looks each *distinct* word up once, and scatters ids with a kernel:
O(n) plus one dict look-up per distinct word.

Unknown pieces: without ``unknown`` they are a ``TokenizerError`` (naming the first character the
training text never had, or else the piece, with document id and offset). With ``unknown`` they
map to its id and are counted in ``last_unknown_count``; decoding that id yields the unknown
token's text, so decoding is byte-exact only for text without unknown pieces.

``count_word_types`` gives a batch's distinct pieces with counts (what ``WordTrainer`` and the
classic BPE trainer fit from when ``prepare`` counts batches apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from engine.errors import ConfigurationError, TokenizerError
from engine.kernels.bpe_encode import scatter_documents
from engine.kernels.wordsplit import intern_words, split_words
from engine.tokenizers.base import (
    FitOptions, Tokenizer, UnknownInputError, _iter_texts, check_encodable, check_ids, check_text, check_texts,
    register_tokenizer,
)
from engine.tokenizers.char import SPECIALS, describe_character, join_documents
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS
from engine.tokenizers.streaming import WordSplitSpans, encode_streaming, word_split_text_span

__all__ = ["WordTokenizer", "WordTrainer", "WordAnalysis", "analyse_words", "count_word_types"]


@dataclass
class WordAnalysis:
    """A text (or several, back to back) cut into pieces, with its distinct words.

    ``cps`` uint32 code points; ``bounds`` int64[D+1] document edges in ``cps``;
    ``starts``/``ends`` piece bounds; ``word_of_piece`` distinct word of each piece;
    ``first_piece``/``counts`` per distinct word (numbered by first appearance);
    ``word_cps``/``word_offsets`` the distinct words' code points, flat.
    """

    cps: np.ndarray
    bounds: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    word_of_piece: np.ndarray
    first_piece: np.ndarray
    counts: np.ndarray
    word_cps: np.ndarray
    word_offsets: np.ndarray

    def doc_piece_bounds(self) -> np.ndarray:
        """Piece index range of each document (int64[D+1])."""
        return np.searchsorted(self.starts, self.bounds, side="left").astype(np.int64)

    def word_text(self, w: int) -> str:
        return self.word_cps[self.word_offsets[w] : self.word_offsets[w + 1]].tobytes().decode(
            "utf-32-le", "surrogatepass"
        )

    def word_start(self, w: int) -> int:
        """Offset in ``cps`` of the first occurrence of distinct word ``w``."""
        return int(self.starts[self.first_piece[w]])


def analyse_words(texts: Iterable[str] | str) -> WordAnalysis:
    """Split one text or several (words never cross text edges) and find the distinct words."""
    texts = list(_iter_texts(texts))
    cps, bounds = join_documents(texts)
    starts, ends = split_words(cps, bounds)
    word_of_piece, first_piece, counts, word_cps, word_offsets = intern_words(cps, starts, ends)
    return WordAnalysis(cps, bounds, starts, ends, word_of_piece, first_piece, counts, word_cps, word_offsets)


def count_word_types(texts) -> tuple[list[str], np.ndarray]:
    """The distinct pieces of ``texts`` in order of first appearance and their int64 counts (kernels)."""
    analysis = analyse_words(texts)
    flat = analysis.word_cps.tobytes().decode("utf-32-le", "surrogatepass")
    bounds = analysis.word_offsets.tolist()
    return [flat[bounds[w]:bounds[w + 1]] for w in range(len(bounds) - 1)], analysis.counts.astype(np.int64)


@register_tokenizer
class WordTokenizer(WordSplitSpans, Tokenizer):
    """One id per word, punctuation mark or whitespace character."""

    kind = "word"
    fit_name = "word"
    fit_options = frozenset({"unknown", "max_types"})

    def __init__(self, pieces: list[str], *, unknown: str | None = None):
        if isinstance(pieces, str) or not isinstance(pieces, (list, tuple)) or not all(isinstance(p, str) for p in pieces):
            raise TokenizerError(f"word tokenizer: pieces must be a list of str, got {type(pieces).__name__}")
        check_encodable(pieces, "word tokenizer piece")
        if unknown is not None and isinstance(unknown, str):
            check_encodable([unknown], "word tokenizer unknown token")
        if list(pieces) != sorted(set(pieces)):
            raise TokenizerError("word tokenizer: pieces must be distinct and sorted by code point")
        if unknown is not None and (not isinstance(unknown, str) or not unknown or unknown in pieces):
            raise ConfigurationError(
                f"word tokenizer: unknown token {unknown!r} must be a non-empty string that is not a piece"
            )
        self.pieces = list(pieces)
        self.unknown = unknown
        self._first_piece_id = SPECIALS + (1 if unknown is not None else 0)
        self._id_of = {p: self._first_piece_id + i for i, p in enumerate(self.pieces)}
        texts = ["", ""] + ([unknown] if unknown is not None else []) + self.pieces
        self._texts = np.array(texts, dtype=object)
        self._alphabet: set[str] | None = None
        self.last_unknown_count = 0
        self._unknown_total = 0

    @classmethod
    def fit(cls, texts: Iterable[str] | str, unknown: str | None = None) -> "WordTokenizer":
        """Vocabulary = the distinct pieces of the training text(s), sorted by code point."""
        analysis = analyse_words(texts)
        if analysis.first_piece.shape[0] == 0:
            raise TokenizerError("word tokenizer: the training text is empty (expected at least one character)")
        pieces = sorted(analysis.word_text(w) for w in range(analysis.first_piece.shape[0]))
        return cls(pieces, unknown=unknown)

    @classmethod
    def trainer(cls, options: FitOptions) -> "WordTrainer":
        return WordTrainer(unknown=options.unknown)

    @property
    def unknown_id(self) -> int | None:
        return SPECIALS if self.unknown is not None else None

    @property
    def vocab_size(self) -> int:
        return self._first_piece_id + len(self.pieces)

    def _word_ids(self, analysis: WordAnalysis, texts: list[str], document_ids,
                  shift: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Id of every distinct word; unknown ones map to ``<unk>`` or raise."""
        n_words = analysis.first_piece.shape[0]
        ids = np.empty(n_words, dtype=np.uint32)
        unknown_count = 0
        for w in range(n_words):
            word = analysis.word_text(w)
            wid = self._id_of.get(word)
            if wid is None:
                if self.unknown is None:
                    self._raise_unknown(analysis, w, word, texts, document_ids, shift)
                wid = SPECIALS
                unknown_count += int(analysis.counts[w])
            ids[w] = wid
        self.last_unknown_count = unknown_count
        return ids, np.arange(n_words + 1, dtype=np.int64)

    def _raise_unknown(self, analysis, w, word, texts, document_ids, shift: int = 0):
        if self._alphabet is None:
            self._alphabet = set("".join(self.pieces))
        position = analysis.word_start(w)
        doc = int(np.searchsorted(analysis.bounds, position, side="right") - 1)
        offset = shift + position - int(analysis.bounds[doc])
        doc_id = None if document_ids is None else document_ids[doc]
        advice = 'build it with unknown="<unk>" to map unseen pieces'
        for k, ch in enumerate(word):
            if ch not in self._alphabet:
                raise UnknownInputError.build(f"character {describe_character(ch)} at offset {offset + k}", doc_id,
                                              "word", "characters of its training text", advice)
        raise UnknownInputError.build(
            f"piece {word!r} (first character {describe_character(word[0])}) at offset {offset}", doc_id, "word",
            f"one of its {len(self.pieces)} training pieces", advice)

    def _encode(self, text: str, document_id: str | None) -> np.ndarray:
        values, _ = self._encode_many([text], None if document_id is None else [document_id], wrap=False)
        return values

    def _encode_many(self, texts, document_ids, *, wrap: bool, shift: int = 0):
        texts = list(texts)
        analysis = analyse_words(texts)
        word_ids, word_id_offsets = self._word_ids(analysis, texts, document_ids, shift)
        self._unknown_total += self.last_unknown_count
        return scatter_documents(
            analysis.word_of_piece, analysis.doc_piece_bounds(), word_ids, word_id_offsets,
            self.bos_id, self.eos_id, wrap,
        )

    def encode_documents(self, texts, document_ids=None, *, progress=None, stream_chars: int = STREAM_CHARS,
                         piece_chars: int = PIECE_CHARS):
        texts, document_ids = check_texts(texts, document_ids, self.kind)
        self._unknown_total = 0
        values, offsets = encode_streaming(self, texts, document_ids,
                                           lambda part, ids: self._encode_many(part, ids, wrap=True), progress,
                                           stream_chars, piece_chars)
        self.last_unknown_count = self._unknown_total  # over the short documents and every span of the long ones
        return values, offsets

    def count_unknown(self, text: str) -> int:
        """How many pieces of ``text`` are not in the vocabulary (each would encode as ``<unk>``)."""
        analysis = analyse_words(check_text(text, self.kind))
        return int(sum(
            int(analysis.counts[w]) for w in range(analysis.first_piece.shape[0])
            if analysis.word_text(w) not in self._id_of
        ))

    def decode(self, ids) -> str:
        arr = check_ids(ids, self.vocab_size, self.kind)
        return "".join(self._texts[arr])

    def tokenize(self, text: str) -> list[str]:
        return [str(t) for t in self._texts[self.encode(text).astype(np.int64)]]  # encode's ids, long texts too

    def _payload(self) -> dict:
        return {"pieces": self.pieces, "unknown": self.unknown}

    @classmethod
    def _from_payload(cls, payload: dict) -> "WordTokenizer":
        pieces = payload["pieces"]
        if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
            raise TokenizerError("word tokenizer payload: \"pieces\" must be a list of strings")
        return cls(pieces, unknown=payload.get("unknown"))


class WordTrainer:
    """Fits ``WordTokenizer`` from batches: types are the distinct pieces (``count_word_types``)."""

    def __init__(self, unknown: str | None = None):
        self.unknown = unknown

    def count_types(self, texts) -> tuple[list[str], np.ndarray]:
        return count_word_types(texts)

    def span(self, window: str, pos: int, final: bool) -> tuple[int, str]:
        """Where a long training text may be cut (``engine.tokenizers.streaming``)."""
        return word_split_text_span(window, pos, final)

    def train_from_counts(self, types, counts) -> WordTokenizer:
        if not len(types):
            raise TokenizerError("word tokenizer: the training text is empty (expected at least one character)")
        return WordTokenizer(sorted(types), unknown=self.unknown)
