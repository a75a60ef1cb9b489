"""All cores on one machine: thread settings and an ordered thread pool.

``resolve_threads(n)``: ``n`` if given, else ``ENGINE_THREADS``, else ``os.cpu_count()``.

``OrderedPool`` runs one function over a stream of chunks on ``threads`` threads and hands the
results back in submission order, with at most ``2 * threads`` chunks in flight (memory stays
bounded by the chunk size, never by the stream). The work that matters runs in ``nogil`` Numba
kernels (word split, pre-tokenizer, interning, merges, scatter), so threads scale without
processes or pickling.

Pass 1 of a fit (type counting on these threads) is ``engine.tokenizers.type_table``.

Why the output cannot depend on the thread count: chunk boundaries are fixed by the caller before
anything is submitted, each chunk is encoded by exactly one call to ``encode_documents`` (the
same call whatever thread runs it), and results are consumed in submission order.

Thread safety is declared by each tokenizer class (``thread_safe_encode``): ``char``, ``bpe`` and
``bpe-byte`` only read frozen tables while encoding; ``word`` writes ``last_unknown_count`` (and
lazily its alphabet), so its calls are serialised with a lock (``encode_lock``).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, Iterator, TypeVar

from engine.errors import ConfigurationError

__all__ = ["resolve_threads", "OrderedPool", "encode_lock"]

THREADS_ENV = "ENGINE_THREADS"

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
    return None if getattr(type(tokenizer), "thread_safe_encode", False) else threading.Lock()


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
