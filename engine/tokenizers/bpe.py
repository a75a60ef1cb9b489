"""Classic character-level BPE: the trainer, the tokenizer, and ``fit_tokenizer``.

The training rule (``tie_break="first"``, the default):

1. split the training text into words with the word regex ``\\w+|[^\\w\\s]|\\s`` (``engine.tokenizers.word``);
   count each distinct word;
2. start every word as its sequence of characters;
3. count every adjacent pair of pieces across all words, weighted by word frequency;
4. take the most frequent pair; on a tie, the pair that occurs first, ordering occurrences by
   (rank of the word's first appearance in the training text, offset inside the word);
5. replace its non-overlapping occurrences, scanning each word left to right, by one new piece;
6. repeat 3–5 for the requested number of merges, stopping early only when no pair is left;
   record the merges in order and the total token count after every merge (``history``).

``tie_break="hf"`` breaks step 4's ties in Hugging Face ``tokenizers``' order instead. Encoding
applies the merges in training order to each word, memoised per distinct word. Vocabulary =
``<bos>``, ``<eos>``, the training characters (by code point), then one piece per merge; a piece
is identified by its text, so a merge that rebuilds an existing piece (``'a'+'bc'`` after
``'ab'+'c'``) reuses its id.

Training runs the incremental-count kernel (``engine.kernels.bpe_train``, shared with byte-level
BPE) on the distinct words, numbered by first appearance. Encoding applies merge k = 0..N-1 in
order to each distinct word (left to right, no overlap), once per distinct word per call: one
kernel (``encode_word_documents``, the ``ordered`` rule) splits the words, merges a word on its
first occurrence and copies its ids on the later ones.
Training 200 merges on 1 MB of text takes tens of milliseconds; 5,000 well under a second.
``BpeTrainer.train_from_counts`` trains from a word-type table counted elsewhere (``prepare``
counts batches on threads or machines), with the result ``train`` gives on the texts themselves.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from engine.errors import ConfigurationError, TokenizerError
from engine.kernels.bpe_encode import build_pair_table, encode_word_documents
from engine.kernels.bpe_merge import merge_long_pieces
from engine.kernels.bpe_train import TIE_FIRST, TIE_HF, train_merges
from engine.kernels.wordsplit import char_classes, code_points
from engine.tokenizers.base import (
    MAX_VOCAB_SIZE,
    FitOptions,
    _iter_texts,
    Tokenizer,
    check_encodable,
    check_ids,
    check_texts,
    register_tokenizer,
    trainer_for,
)
from engine.tokenizers.char import (
    SPECIALS,
    check_alphabet,
    join_documents,
    raise_unknown_in_documents,
    symbol_table,
)
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS, TrainLimits, WordCacheLimits
from engine.tokenizers.streaming import WordSplitSpans, encode_streaming, fit_texts, word_split_text_span
from engine.tokenizers.word import WordAnalysis, analyse_words, count_word_types

__all__ = ["BpeTrainer", "BpeTokenizer", "fit_tokenizer"]

_TIE_MODES = {"first": TIE_FIRST, "hf": TIE_HF}
LEVELS = ("char", "byte")  # character-level (classic) or byte-level BPE


class BpeTrainer:
    """Trains a BPE tokenizer: ``BpeTrainer(200).train(text)``.

    ``level="char"``: give exactly one of ``merges`` (number of merges) or ``vocab_size`` (ids
    including the specials; training stops once that many ids exist). ``level="byte"`` hands
    everything over to the byte-level trainer (which also accepts both, plus ``pattern``).
    ``limits``: how ``train(texts)`` cuts long texts (``TrainLimits``: ``stream_chars``).
    """

    def __init__(
        self,
        merges: int | None = None,
        *,
        level: str = "char",
        vocab_size: int | None = None,
        pattern: str = "gpt2",
        tie_break: str = "first",
        limits: TrainLimits = TrainLimits(),
    ):
        if not isinstance(limits, TrainLimits):
            raise ConfigurationError(f"BPE trainer: limits is {type(limits).__name__}; expected a TrainLimits")
        if level not in LEVELS:
            raise ConfigurationError(f"BPE level {level!r} is unknown (expected one of: {', '.join(LEVELS)})")
        if tie_break not in _TIE_MODES:
            raise ConfigurationError(
                f"BPE tie_break {tie_break!r} is unknown (expected one of: {', '.join(_TIE_MODES)})"
            )
        if merges is None and vocab_size is None:
            raise ConfigurationError("BPE trainer: give merges=N or vocab_size=V")
        if level == "char" and merges is not None and vocab_size is not None:
            # The byte-level trainer takes both (merges caps, vocab_size stops); the classic one takes one.
            raise ConfigurationError("character-level BPE trainer: give merges=N or vocab_size=V, not both")
        for name, value in (("merges", merges), ("vocab_size", vocab_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0):
                raise ConfigurationError(f"BPE trainer: {name} must be a non-negative integer, got {value!r}")
            if value is not None and value > MAX_VOCAB_SIZE:
                raise ConfigurationError(f"BPE trainer: {name}={value} is more than a vocabulary holds "
                                         f"(at most {MAX_VOCAB_SIZE} ids)")
        self.merges = None if merges is None else int(merges)
        self.vocab_size = None if vocab_size is None else int(vocab_size)
        self.level = level
        self.pattern = pattern
        self.tie_break = tie_break
        self.limits = limits

    def _byte_level(self):
        from engine.tokenizers.byte_bpe import ByteBpeTrainer

        return ByteBpeTrainer(merges=self.merges, vocab_size=self.vocab_size, pattern=self.pattern,
                              tie_break=self.tie_break, limits=self.limits)

    def train(self, texts: Iterable[str] | str) -> "BpeTokenizer":
        if self.level == "byte":
            return self._byte_level().train(texts)
        return self._train_words(analyse_words(list(fit_texts(self, _iter_texts(texts), self.limits.stream_chars))))

    def span(self, window: str, pos: int, final: bool) -> tuple[int, str]:
        """Where a long training text may be cut (``engine.tokenizers.streaming``)."""
        if self.level == "byte":
            return self._byte_level().span(window, pos, final)
        return word_split_text_span(window, pos, final)

    def count_types(self, texts: Sequence[str]) -> tuple[list, np.ndarray]:
        """Distinct words of a batch (first appearance) with int64 counts; see ``train_from_counts``."""
        if self.level == "byte":
            return self._byte_level().count_types(texts)
        return count_word_types(texts)

    def train_from_table(self, table) -> "BpeTokenizer":
        """``train_from_counts`` on a ``TypeCounts`` (byte level: from its arrays, no object per type)."""
        if self.level == "byte":
            return self._byte_level().train_from_table(table)
        return self.train_from_counts(table.types(), table.counts())

    def train_from_counts(self, words: Sequence, counts) -> "BpeTokenizer":
        """Train on distinct words (numbered by first appearance in the training text) and their counts:
        the tokenizer ``train`` gives on that text (same merges, history and hash)."""
        if self.level == "byte":
            return self._byte_level().train_from_counts(words, counts)
        words = list(words)
        word_cps = code_points("".join(words))
        word_offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words)), out=word_offsets[1:])
        empty = np.zeros(0, dtype=np.int64)
        return self._train_words(WordAnalysis(
            cps=word_cps, bounds=np.array([0, word_cps.shape[0]], dtype=np.int64), starts=word_offsets[:-1],
            ends=word_offsets[1:], word_of_piece=empty, first_piece=np.arange(len(words), dtype=np.int64),
            counts=np.ascontiguousarray(counts, dtype=np.int64), word_cps=word_cps, word_offsets=word_offsets,
        ))

    def _train_words(self, analysis: WordAnalysis) -> "BpeTokenizer":
        if analysis.word_cps.shape[0] == 0:
            raise TokenizerError("BPE trainer: the training text is empty (expected at least one character)")
        alphabet_cps = np.unique(analysis.word_cps)
        if self.vocab_size is not None:
            floor = SPECIALS + alphabet_cps.shape[0]
            if self.vocab_size < floor:
                raise ConfigurationError(
                    f"BPE trainer: vocab_size {self.vocab_size} is below specials + training characters ({floor})"
                )
            max_new = self.vocab_size - floor
            # Each merge shortens some word, so no run has more merges than characters minus words.
            limit = int(analysis.word_cps.shape[0] - analysis.first_piece.shape[0])
            n_merges = min(limit, 2 * max_new + 1024)
        else:
            max_new = -1
            # as above: the arrays are sized by the data, whatever merges asked for
            n_merges = min(self.merges, int(analysis.word_cps.shape[0] - analysis.first_piece.shape[0]))
        merges, history = train_on_words(analysis, alphabet_cps, n_merges, _TIE_MODES[self.tie_break], max_new)
        alphabet = alphabet_cps.tobytes().decode("utf-32-le", "surrogatepass")
        return BpeTokenizer(alphabet, merges, history)


def train_on_words(
    analysis: WordAnalysis, alphabet_cps: np.ndarray, n_merges: int, tie_mode: int, max_new: int = -1
) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
    """Run the kernel on the distinct words; merges as piece texts and the token history."""
    word_syms = np.searchsorted(alphabet_cps, analysis.word_cps).astype(np.int64)
    left = np.empty(n_merges, dtype=np.int64)
    right = np.empty(n_merges, dtype=np.int64)
    made = np.empty(n_merges, dtype=np.int64)
    history = np.empty(n_merges + 1, dtype=np.int64)
    done, _ = train_merges(
        word_syms, analysis.word_offsets, np.ascontiguousarray(analysis.counts, dtype=np.int64),
        alphabet_cps.astype(np.uint32), tie_mode, n_merges, n_merges if max_new < 0 else max_new,
        left, right, made, history,
    )
    pieces = [chr(c) for c in alphabet_cps.tolist()]
    merges = []
    for k in range(done):
        a, b, z = pieces[left[k]], pieces[right[k]], int(made[k])
        if z == len(pieces):
            pieces.append(a + b)
        merges.append((a, b))
    return merges, [(k, int(history[k])) for k in range(done + 1)]


@register_tokenizer
class BpeTokenizer(WordSplitSpans, Tokenizer):
    """Character-level BPE: ``merges`` (left, right) in training order, ``history`` (k, tokens);
    ``cache``: the size of the per-call cache of merged words (``WordCacheLimits``; not saved)."""

    kind = "bpe"
    fit_name = "bpe"
    fit_options = frozenset({"merges", "vocab_size", "tie_break"})
    thread_safe_encode = True

    def __init__(self, alphabet: str, merges: Sequence[tuple[str, str]], history: Sequence[tuple[int, int]] = (), *,
                 cache: WordCacheLimits = WordCacheLimits()):
        if not isinstance(cache, WordCacheLimits):
            raise ConfigurationError(f"bpe tokenizer: cache is {type(cache).__name__}; expected a WordCacheLimits")
        self.cache = cache
        self.alphabet = check_alphabet(alphabet, self.kind)
        self.merges = _check_merges(merges)
        self.history = _check_history(history)
        pieces = list(alphabet)
        symbol_of = {p: i for i, p in enumerate(pieces)}
        n = len(self.merges)
        left = np.empty(n, dtype=np.int64)
        right = np.empty(n, dtype=np.int64)
        made = np.empty(n, dtype=np.int64)
        for k, (a, b) in enumerate(self.merges):
            if a not in symbol_of or b not in symbol_of:
                missing = a if a not in symbol_of else b
                raise TokenizerError(
                    f"bpe tokenizer: merge {k} ({a!r}, {b!r}) uses piece {missing!r} that no earlier merge "
                    f"or training character makes"
                )
            joined = a + b
            if joined not in symbol_of:
                symbol_of[joined] = len(pieces)
                pieces.append(joined)
            left[k], right[k], made[k] = symbol_of[a], symbol_of[b], symbol_of[joined]
        self.pieces = pieces
        self._left, self._right, self._made = left, right, made
        self._priorities = np.arange(n, dtype=np.int64)
        self._merge_table = build_pair_table(left, right)
        self._alphabet_cps = code_points(alphabet)
        self._char_table = symbol_table(self._alphabet_cps, 0)
        self._texts = np.array(["", ""] + pieces, dtype=object)

    @classmethod
    def trainer(cls, options: FitOptions) -> BpeTrainer:
        return BpeTrainer(options.merges_or_default(), vocab_size=options.vocab_size,
                          tie_break=options.tie_break or "first")

    @property
    def vocab_size(self) -> int:
        return SPECIALS + len(self.pieces)

    def _encode_many(self, texts, document_ids, *, wrap: bool, shift: int = 0):
        """One kernel call: split, merge each distinct word once per call, write the ids."""
        texts = texts if isinstance(texts, list) else list(texts)
        cps, bounds = join_documents(texts)
        out = np.empty(cps.shape[0] + 2 * len(texts), dtype=np.uint32)
        offsets = np.empty(len(texts) + 1, dtype=np.int64)
        count, unknown, long_pieces, long_count = encode_word_documents(
            cps, bounds, char_classes(), self._char_table, *self._merge_table, self._made, self._priorities,
            self.cache.slots, SPECIALS, self.bos_id, self.eos_id, wrap, out, offsets)
        if unknown >= 0:
            raise_unknown_in_documents(texts, document_ids, bounds, unknown, self.kind, "training characters", shift)
        if long_count:  # words of more than LONG_WORD characters, written unmerged
            count = merge_long_pieces(out, offsets, long_pieces, long_count, SPECIALS, True, *self._merge_table,
                                      self._made, self._priorities)
        return out[:count], offsets

    def _encode(self, text: str, document_id: str | None) -> np.ndarray:
        values, _ = self._encode_many([text], None if document_id is None else [document_id], wrap=False)
        return values

    def encode_documents(self, texts, document_ids=None, *, progress=None, stream_chars: int = STREAM_CHARS,
                         piece_chars: int = PIECE_CHARS):
        texts, document_ids = check_texts(texts, document_ids, self.kind)
        return encode_streaming(self, texts, document_ids, lambda part, ids: self._encode_many(part, ids, wrap=True),
                                progress, stream_chars, piece_chars)

    def decode(self, ids) -> str:
        return "".join(self._texts[check_ids(ids, self.vocab_size, self.kind)])

    def tokenize(self, text: str) -> list[str]:
        return [str(t) for t in self._texts[self.encode(text).astype(np.int64)]]  # encode's ids, long texts too

    def _payload(self) -> dict:
        return {
            "alphabet": self.alphabet,
            "merges": [[a, b] for a, b in self.merges],
            "history": [[k, t] for k, t in self.history],
        }

    @classmethod
    def _from_payload(cls, payload: dict) -> "BpeTokenizer":
        alphabet = payload["alphabet"]
        merges = payload["merges"]
        if not isinstance(alphabet, str) or not isinstance(merges, list):
            raise TokenizerError("bpe tokenizer payload: expected \"alphabet\" string and \"merges\" list")
        for m in merges:
            if not (isinstance(m, list) and len(m) == 2 and all(isinstance(p, str) and p for p in m)):
                raise TokenizerError(f"bpe tokenizer payload: merge {m!r} is not a pair of non-empty strings")
        history = payload.get("history", [])
        if not isinstance(history, list) or not all(
                isinstance(h, list) and len(h) == 2 and all(type(x) is int and x >= 0 for x in h) for h in history):
            raise TokenizerError('bpe tokenizer payload: "history" must be a list of [merges, tokens] integer pairs')
        return cls(alphabet, [tuple(m) for m in merges], [tuple(h) for h in history])


def _listed(value, name: str, expected: str, *, refuse_strings: bool) -> list:
    """``value`` as a list; else TokenizerError naming ``name`` and what was expected."""
    if not (refuse_strings and isinstance(value, (str, bytes))):
        try:
            return list(value)
        except TypeError:
            pass
    raise TokenizerError(f"bpe tokenizer: {name} is {type(value).__name__}, expected {expected}")


def _check_merges(merges) -> list[tuple[str, str]]:
    """Merges as (left, right) pairs of non-empty, UTF-8-valid strings; else TokenizerError naming the merge."""
    items = _listed(merges, "merges", "a list of (left, right) pairs", refuse_strings=True)
    out = []
    for k, merge in enumerate(items):
        if not (isinstance(merge, (list, tuple)) and len(merge) == 2 and all(isinstance(p, str) and p for p in merge)):
            raise TokenizerError(f"bpe tokenizer: merge {k} is {merge!r:.60}, expected a pair of non-empty strings")
        check_encodable(merge, f"bpe tokenizer merge {k}")
        out.append((merge[0], merge[1]))
    return out


def _check_history(history) -> list[tuple[int, int]]:
    """History as (merges done, tokens) pairs of non-negative integers; else TokenizerError naming the entry."""
    items = _listed(history, "history", "a list of (k, tokens) pairs", refuse_strings=False)
    out = []
    for i, entry in enumerate(items):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2
                and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in entry)):
            raise TokenizerError(f"bpe tokenizer: history entry {i} is {entry!r:.60}, expected a pair of integers >= 0")
        out.append((int(entry[0]), int(entry[1])))
    return out


def fit_tokenizer(kind: str, texts: Iterable[str] | str, *, merges: int = 200, unknown: str | None = None) -> Tokenizer:
    """Fit a ``char``, ``word`` or ``bpe`` (character level) tokenizer, or any kind ``prepare`` fits,
    on training text(s)."""
    trainer = trainer_for(kind, FitOptions(merges=merges, unknown=unknown))
    return trainer.train_from_counts(*trainer.count_types(list(_iter_texts(texts))))
