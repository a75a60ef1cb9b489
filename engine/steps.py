"""The steps both executors of ``prepare`` run (``engine.local`` on threads, ``engine.distributed``
on Ray); this module imports neither executor.

- ``iter_corpus_batches``: the corpus a batch at a time (``open_corpus`` with the run's read limits);
- ``Chunker``: each partition's documents cut into encode chunks, the one rule that makes both
  executors' row groups (and file bytes) the same;
- ``window_counts`` / ``chunk_tally``: what one encoded chunk adds to its partition's report row
  (``engine.outputs.PartitionTally``);
- ``open_store_writer``: the store writer with the run's row-group and file sizes;
- ``drops_bos`` / ``without_bos_ids``: whether each encoded document loses its BOS (``--bos none``
  with a tokenizer that writes one), and the encoded chunk without them;
- ``capped_table`` / ``fit_from_table``: the folded type table (its most frequent types, with
  ``--max-types``) and the tokenizer fitted from it;
- ``run_checked``: an executor run after ``--out`` is checked, an interrupt during a kernel made a
  ``KeyboardInterrupt``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from engine.corpus import PARTITIONS, Document, Partition, ReadLimits, ReadReport, open_corpus
from engine.corpus.readers import TEXT_COLUMN
from engine.errors import CorpusError, is_interrupt
from engine.outputs import PartitionTally, PrepareResult, check_out_dir
from engine.prepare_options import PrepareLimits, PrepareOptions
from engine.progress import Progress
from engine.store import TokenStore
from engine.tokenizers.base import Tokenizer, Trainer
from engine.tokenizers.type_table import cap_types, train_on_table

_DEFAULT_LIMITS = PrepareLimits()

__all__ = [
    "iter_corpus_batches", "Chunker", "window_counts", "chunk_tally", "PartitionTally", "open_store_writer",
    "drops_bos", "without_bos_ids", "capped_table", "fit_from_table", "run_checked",
]


class Chunker:
    """Each partition's documents cut into encode chunks, in order: a chunk closes at
    ``limits.encode_chunk_documents`` documents or ``limits.encode_chunk_chars`` characters. The one
    rule of both executors, so their row groups (and file bytes) are the same."""

    def __init__(self, limits: PrepareLimits = _DEFAULT_LIMITS) -> None:
        self.documents, self.max_chars = limits.encode_chunk_documents, limits.encode_chunk_chars
        self.pending: dict[Partition, list] = {p: [] for p in PARTITIONS}
        self.chars = dict.fromkeys(PARTITIONS, 0)

    def add(self, part: Partition, item: Any, chars: int) -> list | None:
        """Queue ``item`` (``chars`` characters long); the closed chunk, if this one closed it."""
        self.pending[part].append(item)
        self.chars[part] += chars
        if len(self.pending[part]) >= self.documents or self.chars[part] >= self.max_chars:
            return self._take(part)
        return None

    def take(self, part: Partition) -> list:
        """The partition's documents queued so far (perhaps none), as a chunk closed now."""
        return self._take(part)

    def rest(self) -> Iterator[tuple[Partition, list]]:
        """The last, partial chunk of each partition that has one."""
        for part in PARTITIONS:
            if self.pending[part]:
                yield part, self._take(part)

    def _take(self, part: Partition) -> list:
        chunk, self.pending[part], self.chars[part] = self.pending[part], [], 0
        return chunk


def window_counts(offsets: np.ndarray, context_length: int, stride: int) -> dict[str, int]:
    """Complete windows, incomplete tails, tail tokens and short documents (fewer than T + 1 tokens, so
    no complete window) over documents given by ``offsets`` (the window rule of engine.windows)."""
    from engine.windows import CausalWindowConfig, document_window_counts  # Numba loads on first use

    config = CausalWindowConfig(context_length, stride)
    lengths = np.diff(offsets)
    counts = document_window_counts(offsets, config)
    # The first candidate start that cannot fill a window is count * S; a tail exists iff it is inside.
    tail_starts = counts * np.int64(config.kernel_stride)
    has_tail = tail_starts < lengths
    return {
        "windows": int(counts.sum()),
        "incomplete_tails": int(has_tail.sum()),
        "tail_tokens": int((lengths - tail_starts)[has_tail].sum()),
        "short_documents": int((counts == 0).sum()),
    }


def chunk_tally(offsets: np.ndarray, characters: int, options: PrepareOptions) -> dict[str, int]:
    """What one encoded chunk adds to its partition's report row."""
    tally = window_counts(offsets, options.context_length, options.stride)
    tally.update(documents=int(offsets.shape[0] - 1), characters=int(characters), tokens=int(offsets[-1]))
    return tally


def drops_bos(options: PrepareOptions, tok: Tokenizer) -> bool:
    """True when the options ask for no BOS (``--bos none``, ``bos_token: null``) and ``tok`` writes one."""
    return options.without_bos and tok.bos_id is not None


def without_bos_ids(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)`` of encoded documents without each one's first id (its BOS)."""
    keep = np.ones(values.shape[0], bool)
    keep[offsets[:-1]] = False
    return values[keep], offsets - np.arange(offsets.shape[0], dtype=np.int64)


def open_store_writer(options: PrepareOptions, tok: Tokenizer, *, check_unique: bool = True):
    """The store writer both executors use, at ``options.store_path``: the row-group and file sizes of
    ``options.limits``, ``options.resume`` (``check_unique=False`` where the corpus readers already
    checked every id)."""
    limits = options.limits
    return TokenStore.writer(options.store_path, tok, row_group_size=limits.store_row_group_rows,
                             max_rows_per_file=limits.store_file_rows, resume=options.resume,
                             check_unique=check_unique, bos=not (options.without_bos or tok.bos_id is None),
                             encoding={"piece_chars": limits.piece_chars})


def capped_table(options: PrepareOptions, table):
    """``(table, report)``: ``cap_types`` with the run's ``--max-types`` (``engine.tokenizers.type_table``)."""
    return cap_types(table, options.fit.max_types if options.fit is not None else None)


def fit_from_table(options: PrepareOptions, trainer: Trainer, table) -> Tokenizer:
    """Step 2 of both executors: the tokenizer from the folded type table."""
    if not len(table):
        raise CorpusError(f"{options.corpus}: the train partition holds no text; nothing to fit the tokenizer on "
                          "(every document is in validation or test, or empty)")
    with Progress(f"fitting {options.tokenizer}", unit="types", quiet=options.quiet) as bar:
        tok = train_on_table(trainer, table)
        bar.update(len(table))
    return tok


def iter_corpus_batches(path: str | os.PathLike, *, on_invalid_utf8: str = "error", skip_bad_lines: bool = False,
                        batch_documents: int | None = None, batch_chars: int | None = None,
                        report: ReadReport | None = None, text_column: str = TEXT_COLUMN, id_column: str | None = None,
                        long_lines: bool = False, exclude: Iterable[str | os.PathLike] = (),
                        corpus_format: str | None = None,
                        read_limits: ReadLimits | None = None) -> Iterator[list[Document]]:
    """Documents of a JSONL file, a Parquet file or dataset, or a folder, a batch at a time, in order.

    ``open_corpus`` (the dispatch and checks of ``Corpus.from_path``) with the pipeline's batch
    bounds: at most ``batch_documents`` documents and ``batch_chars`` characters a batch (None:
    ``PrepareLimits``'s defaults).
    ``exclude``: paths a folder corpus leaves out (the run's ``--out``); ``corpus_format``: the
    format, if not guessed from the path (``--corpus-format``); ``read_limits``: the readers' sizes
    (``PrepareLimits.read_limits``; None: ``PrepareLimits``'s defaults).
    """
    yield from open_corpus(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                           batch_documents=batch_documents or _DEFAULT_LIMITS.read_batch_documents,
                           batch_chars=batch_chars or _DEFAULT_LIMITS.read_batch_chars,
                           report=report, text_column=text_column, id_column=id_column, long_lines=long_lines,
                           exclude=exclude, corpus_format=corpus_format,
                           limits=read_limits or _DEFAULT_LIMITS.read_limits)


def run_checked(executor: Callable[[PrepareOptions], PrepareResult], options: PrepareOptions) -> PrepareResult:
    """``executor(options)`` once ``--out`` is checked (``check_out_dir``: only engine's own files there
    are replaced). An interrupt is a ``KeyboardInterrupt``, also one that arrives during a kernel
    (``is_interrupt``)."""
    check_out_dir(options)
    try:
        return executor(options)
    except SystemError as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from exc
        raise
