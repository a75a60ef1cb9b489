"""``prepare()``: corpus -> tokenizer (fitted on train only) -> token store -> window counts.

The main job behind ``engine prepare``, and the dispatch to its executors. ``PrepareOptions``
(``engine.prepare_options``) describes one run and is checked once, on construction, before anything
is read; the CLI, ``prepare(**keywords)``, the local executor (``engine.local``) and the Ray executor
(``engine.distributed``) all take it. The steps both executors share are ``engine.steps``; neither
imports this module. The local executor streams, so a corpus larger than memory fits:

1. pass 1 streams the corpus in batches (JSONL and Parquet in chunks, folders file by file),
   assigns each document its partition (``manifest.partition_of(id)``) and hands only TRAIN
   texts to the kind's ``Trainer.count_types`` on ``threads`` threads, folding the batches into
   one type table (``engine.tokenizers.type_table.count_types``): distinct characters, words or byte-level
   pre-tokenizer pieces with counts, whatever the kind declares. The manifest is checked at the
   end of the pass (unknown ids, forgotten documents; the readers catch duplicates) with
   O(documents) id sets, before anything is fitted;
2. the tokenizer is fitted from the table (``trainer.train_from_counts``: O(types)), or loaded;
3. pass 2 streams every document again, cuts each partition's documents into chunks
   (``Chunker``: at most ``limits.encode_chunk_documents`` documents or
   ``limits.encode_chunk_chars`` characters, ``PrepareLimits``), encodes chunks on ``threads``
   threads (``engine.parallel.OrderedPool``), writes each as Parquet row groups in document order,
   and counts windows and tails (the window rule of engine.windows) from each chunk's offsets
   (``chunk_tally``). The store appears atomically. With a tokenizer file there is nothing to fit, so one pass does it all and
   the manifest is checked before the store is committed.

Chat and instruction data (``format`` ``messages`` or ``prompt-completion``) run on
``engine.chat_local``: records rendered by their chat template into a store with role flags.
The local executor lives in ``engine.local``, the Ray executor in ``engine.distributed``, the
steps both run in ``engine.steps``, the report and ``--out`` handling in ``engine.outputs``. The
names of those modules stay importable from here.

Peak memory: a few chunks per thread plus the type table and 16 bytes per document (id hashes of
the reader's and the store writer's uniqueness checks; an explicit manifest also holds its ids);
never the corpus. A document longer than a span (``engine.tokenizers.streaming``) is encoded span
by span and written as one row; the text of a JSONL line longer than ``limits.long_line_bytes`` stays in
its file (``engine.corpus.long_lines``), its ids go to a file and it becomes a store file of its
own, written page by page (``engine.store.long_rows``). One continuous ``.txt`` file is one
document per partition and is read whole.
Output is byte-identical for every thread count: chunk boundaries depend on the documents only.
"""

from __future__ import annotations

import os
from typing import Any

# Re-exported, see __all__: the names callers have imported from here.
from engine.outputs import PartitionTally, PrepareResult, StagedOutputs, check_out_dir, finish_report  # noqa: F401
from engine.prepare_options import (  # noqa: F401
    EXECUTORS, OPTION_ALIASES, PrepareLimits, PrepareOptions, check_option_names, default_corpus_paths,
    hash_split_ratios,
)
from engine.steps import (  # noqa: F401
    Chunker, chunk_tally, fit_from_table, iter_corpus_batches, open_store_writer, run_checked, window_counts,
)

__all__ = [
    "prepare", "run", "PrepareOptions", "PrepareLimits", "PrepareResult", "EXECUTORS", "default_corpus_paths",
    "iter_corpus_batches", "window_counts", "chunk_tally", "Chunker", "finish_report", "PartitionTally",
    "open_store_writer", "StagedOutputs", "run_local", "hash_split_ratios", "check_option_names",
]


def prepare(corpus_path: str | os.PathLike | None = None, splits_path: str | os.PathLike | None = None,
            out_dir: str | os.PathLike = "out", **options: Any) -> PrepareResult:
    """Run the main job and return where everything went plus the report (also in ``report.json``).

    The keywords are ``PrepareOptions``'s fields (``tokenizer``, ``merges``, ``vocab_size``,
    ``pattern``, ``tie_break``, ``fit_sample``, ``max_types``, ``context_length``, ``stride``,
    ``train_fraction``, ``hash_split``, ``on_invalid_utf8``, ``skip_bad_lines``, ``threads``, ``resume``, ``quiet``, ``executor``,
    ``ray_address``, ``limits``); any other name is a ConfigurationError naming the option it may mean
    (``check_option_names``). ``hash_split`` is ``{"train": 0.8, "validation": 0.1, "test": 0.1}``,
    ``(0.8, 0.1, 0.1)`` or ``"0.8,0.1,0.1"``. BPE kinds train 200 merges when given neither
    ``merges`` nor ``vocab_size``.
    ``resume=True`` continues an interrupted run over the same ``out_dir``: the tokenizer is
    fitted again (deterministic, so the same), the finished files of the interrupted store are
    kept, and only the documents after them are encoded; the store equals a fresh run's, byte for byte.
    """
    check_option_names(options)
    return run(PrepareOptions(corpus_path, splits_path, out_dir, **options))


def run(options: PrepareOptions) -> PrepareResult:
    """Run ``options`` on its executor (a continuous text is one document per partition: local),
    through ``run_checked``: ``--out`` is checked first, an interrupt during a kernel is a
    ``KeyboardInterrupt``."""
    if options.format in ("messages", "prompt-completion"):
        from engine.chat_local import run_chat  # chat and instruction data: templates, role flags

        return run_checked(run_chat, options)
    if options.executor == "ray" and not options.continuous:
        from engine.distributed import run_on_ray  # Ray loads only when asked for

        return run_checked(run_on_ray, options)
    return run_checked(run_local, options)


def run_local(options: PrepareOptions) -> PrepareResult:
    """The local executor (``engine.local.run_local``): two streaming passes on threads."""
    from engine.local import run_local as local

    return local(options)
