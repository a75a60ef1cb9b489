"""All cores on one machine: thread settings, an ordered thread pool, and streaming fitters.

``resolve_threads(n)``: ``n`` if given, else ``ENGINE_THREADS``, else ``os.cpu_count()``.

``StreamingFit`` fits a char, word or (character-level) BPE tokenizer from batches of training
texts without holding them: each batch is cut into distinct words by the nogil kernels on a pool
thread, and the main thread folds the batch's words into one word-type table (numbered by first
appearance, int64 counts) in batch order, so ranks and counts equal those of one pass over the
whole text. BPE merges then train locally from that table (``train_bpe_from_word_counts``), which
is O(word types), not O(tokens). Memory: the table plus a few batches.

``OrderedPool`` runs one function over a stream of chunks on ``threads`` threads and hands the
results back in submission order, with at most ``2 * threads`` chunks in flight (memory stays
bounded by the chunk size, never by the stream). The work that matters runs in ``nogil`` Numba
kernels (word split, interning, merges, scatter), so threads scale without processes or pickling.

Why the output cannot depend on the thread count: chunk boundaries are fixed by the caller before
anything is submitted, each chunk is encoded by exactly one call to ``encode_documents`` (the
same call whatever thread runs it), and results are consumed in submission order.

Thread safety of the tokenizers (checked by reading them): ``char``, ``bpe`` and ``bpe-byte``
only read their frozen tables while encoding, so several threads may encode at once. ``word``
writes ``last_unknown_count`` (and lazily its alphabet) on every call; its calls are serialised
with a lock (``encode_lock``) so that attribute stays meaningful. Any other kind is serialised too.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, Iterable, Iterator, TypeVar

import numpy as np

from engine.errors import ConfigurationError

__all__ = [
    "resolve_threads", "OrderedPool", "THREAD_SAFE_KINDS", "encode_lock", "WordTypeCounts",
    "StreamingFit", "train_bpe_from_word_counts", "TOKENIZER_KINDS",
]

THREADS_ENV = "ENGINE_THREADS"
THREAD_SAFE_KINDS = frozenset({"char", "bpe", "bpe-byte"})
TOKENIZER_KINDS = ("char", "word", "bpe")

T = TypeVar("T")
R = TypeVar("R")


def resolve_threads(threads: int | None = None) -> int:
    """Threads to use: ``threads``, else ``$ENGINE_THREADS``, else ``os.cpu_count()`` (at least 1)."""
    source = "--threads"
    if threads is None:
        env = os.environ.get(THREADS_ENV)
        if env is None or not env.strip():
            return max(os.cpu_count() or 1, 1)
        source = f"{THREADS_ENV}={env!r}"
        try:
            threads = int(env)
        except ValueError:
            raise ConfigurationError(f"{source}: expected a whole number of threads >= 1") from None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigurationError(f"{source} is {threads!r}; expected a whole number of threads >= 1")
    return threads


def encode_lock(tokenizer) -> threading.Lock | None:
    """A lock to hold around ``encode_documents`` when ``tokenizer`` is not safe to share, else None."""
    return None if getattr(tokenizer, "kind", None) in THREAD_SAFE_KINDS else threading.Lock()


class OrderedPool(Generic[T, R]):
    """``for result in pool.map(chunks)``: ``work(chunk)`` on ``threads`` threads, results in order.

    With ``threads == 1`` the work runs inline on the caller's thread (no pool at all). The first
    exception raised by ``work`` is re-raised by ``map`` when its chunk's turn comes; chunks still in
    flight are cancelled or drained before ``map`` returns.
    """

    def __init__(self, work: Callable[[T], R], threads: int, *, in_flight: int | None = None):
        self.work = work
        self.threads = resolve_threads(threads)
        self.in_flight = max(in_flight if in_flight is not None else 2 * self.threads, 1)

    def map(self, chunks: Iterator[T]) -> Iterator[R]:
        if self.threads == 1:
            for chunk in chunks:
                yield self.work(chunk)
            return
        pending: deque[Future] = deque()
        with ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="engine-encode") as pool:
            try:
                for chunk in chunks:
                    pending.append(pool.submit(self.work, chunk))
                    while len(pending) >= self.in_flight:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()


# -- streaming fitters -------------------------------------------------------------------------


class WordTypeCounts:
    """Distinct pieces of ``\\w+|[^\\w\\s]|\\s`` numbered by first appearance, with int64 counts."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.counts = np.zeros(1024, dtype=np.int64)

    @staticmethod
    def batch_words(texts: list[str]) -> tuple[list[str], np.ndarray]:
        """The distinct words of ``texts`` in order of first appearance and their counts (kernels)."""
        from engine.tokenizers.word import analyse_words

        analysis = analyse_words(texts)
        flat = analysis.word_cps.tobytes().decode("utf-32-le", "surrogatepass")
        bounds = analysis.word_offsets.tolist()
        return [flat[bounds[w]:bounds[w + 1]] for w in range(len(bounds) - 1)], analysis.counts

    def add_words(self, words: list[str], counts: np.ndarray) -> None:
        """Fold one batch (distinct words, first-appearance order) in; call batches in stream order."""
        index = self.index
        # setdefault's default is evaluated first, so a new word gets the next rank.
        ranks = np.fromiter((index.setdefault(w, len(index)) for w in words), dtype=np.int64, count=len(words))
        if len(index) > self.counts.shape[0]:
            grown = np.zeros(max(2 * self.counts.shape[0], len(index)), dtype=np.int64)
            grown[: self.counts.shape[0]] = self.counts
            self.counts = grown
        self.counts[ranks] += counts  # ranks are distinct inside one batch

    def add(self, texts: list[str]) -> None:
        self.add_words(*self.batch_words(texts))

    def words(self) -> list[str]:
        return list(self.index)

    def word_counts(self) -> np.ndarray:
        return self.counts[: len(self.index)].copy()


def train_bpe_from_word_counts(words: list[str], counts: np.ndarray, merges: int):
    """Character-level BPE from distinct words (first-appearance order) and their counts.

    Feeds the trainer's own kernel entry (``engine.tokenizers.bpe.train_on_words``) with the table
    ``BpeTrainer(merges).train(text)`` builds from the text itself, so the result is the same
    tokenizer (same merges, history and hash).
    """
    from engine.errors import TokenizerError
    from engine.kernels.bpe_train import TIE_FIRST
    from engine.kernels.wordsplit import code_points
    from engine.tokenizers.bpe import BpeTokenizer, train_on_words
    from engine.tokenizers.word import WordAnalysis

    word_cps = code_points("".join(words))
    if word_cps.shape[0] == 0:
        raise TokenizerError("BPE trainer: the training text is empty (expected at least one character)")
    word_offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words)), out=word_offsets[1:])
    empty = np.zeros(0, dtype=np.int64)
    analysis = WordAnalysis(
        cps=word_cps, bounds=np.array([0, word_cps.shape[0]], dtype=np.int64), starts=word_offsets[:-1],
        ends=word_offsets[1:], word_of_piece=empty, first_piece=np.arange(len(words), dtype=np.int64),
        counts=np.ascontiguousarray(counts, dtype=np.int64), word_cps=word_cps, word_offsets=word_offsets,
    )
    alphabet_cps = np.unique(word_cps)
    merge_list, history = train_on_words(analysis, alphabet_cps, int(merges), TIE_FIRST)
    alphabet = alphabet_cps.tobytes().decode("utf-32-le", "surrogatepass")
    return BpeTokenizer(alphabet, merge_list, history)


class StreamingFit:
    """Fit ``kind`` (char, word, bpe) from an iterable of batches of training texts, in one pass."""

    def __init__(self, kind: str, *, merges: int = 200, threads: int | None = None):
        if kind not in TOKENIZER_KINDS:
            raise ConfigurationError(f"tokenizer kind {kind!r} is unknown (expected one of: {', '.join(TOKENIZER_KINDS)})")
        self.kind, self.merges, self.threads = kind, merges, resolve_threads(threads)

    def fit_batches(self, batches: Iterable[list[str]], *, quiet: bool = True):
        from engine.kernels.wordsplit import code_points
        from engine.progress import Progress
        from engine.tokenizers.char import CharTokenizer
        from engine.tokenizers.word import WordTokenizer

        if self.kind == "char":
            seen = np.zeros(0, dtype=np.uint32)
            work = lambda texts: np.unique(code_points("".join(texts)))  # noqa: E731
            for distinct in OrderedPool(work, self.threads).map(iter(batches)):
                seen = np.union1d(seen, distinct)
            return CharTokenizer.fit(seen.tobytes().decode("utf-32-le", "surrogatepass"))
        table = WordTypeCounts()
        for words, counts in OrderedPool(WordTypeCounts.batch_words, self.threads).map(iter(batches)):
            table.add_words(words, counts)
        if self.kind == "word":
            if not table.index:
                return WordTokenizer.fit([], unknown="<unk>")  # raises: nothing to fit
            return WordTokenizer(sorted(table.index), unknown="<unk>")
        with Progress(f"training {self.merges} BPE merges on {len(table.index):,} word types", unit="merges",
                      quiet=quiet) as bar:
            tok = train_bpe_from_word_counts(table.words(), table.word_counts(), self.merges)
            bar.update(len(tok.merges))
        return tok
