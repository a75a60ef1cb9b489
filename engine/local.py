"""The local executor of ``prepare``: two streaming passes on threads (``engine.pipeline``'s docstring).

It runs the steps it shares with the Ray executor from ``engine.steps`` and never imports
``engine.pipeline``, the dispatcher that imports it.

``run_local(options)``: pass 1 reads the corpus batch by batch and counts the train partition's
types on ``threads`` threads (long texts span by span; with ``fit_sample``, only the fit sample's texts,
``engine.corpus.fit_sample``, while the whole corpus is still read for the manifest's checks), the
tokenizer is fitted from the table;
pass 2 reads again, cuts each partition into chunks (``_chunks``: ``steps.Chunker``), encodes them
on threads (``_Encoder`` in an ``OrderedPool``, results in order, each an ``_EncodedChunk``) and
writes them through the store writer, tallying windows per chunk; ``tokenizer.json`` and
``report.json`` are staged before the store commits and renamed after it (``StagedOutputs``).
With ``resume``, the finished files of an interrupted run are kept once ``_resumed_mismatch``
proves they were encoded from this corpus.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from engine.corpus import PARTITIONS, CorpusPartitions, Document, ManifestCheck, Partition, ReadReport, read_text_file
from engine.corpus.documents import plural
from engine.corpus.fit_sample import FitSample
from engine.errors import CorpusError
from engine.outputs import PartitionTally, PrepareResult, StagedOutputs
from engine.parallel import OrderedPool, encode_lock, resolve_threads
from engine.tokenizers.type_table import count_types
from engine.prepare_options import PrepareLimits, PrepareOptions
from engine.progress import Progress
from engine.steps import (Chunker, capped_table, chunk_tally, drops_bos, fit_from_table, iter_corpus_batches,
                          open_store_writer, window_counts, without_bos_ids)
from engine.store.layout import source_digest
from engine.utf8 import utf8_length
from engine.testhook import stop_point
from engine.tokenizers.base import Tokenizer, UnknownInputError
from engine.tokenizers.streaming import encode_long, training_batches

__all__ = ["run_local"]


class _Source:
    """The documents of a run, batch by batch, each with its partition (and the manifest's check)."""

    def __init__(self, options: PrepareOptions):
        self.options = options
        self.check: ManifestCheck | None = None
        self.reads = [ReadReport()]  # what each pass read; the report keeps the last (every pass reads it all)
        if options.continuous:
            text = read_text_file(options.corpus, on_invalid_utf8=options.on_invalid_utf8, report=self.reads[0])
            parts = CorpusPartitions.from_text(text, options.train_fraction, name=options.corpus.stem)
            self.documents = [doc for part in PARTITIONS for doc in parts.documents(part)]
            self.assign = {doc.id: part for part in PARTITIONS for doc in parts.documents(part)}.__getitem__
        else:
            self.manifest = options.manifest()
            self.check = ManifestCheck(self.manifest, str(options.corpus))
            self.assign = self.check.partition_of

    def batches(self) -> Iterator[list[Document]]:
        if self.options.continuous:
            return iter([self.documents])
        self.reads.append(ReadReport())
        options = self.options
        return iter_corpus_batches(options.corpus, on_invalid_utf8=options.on_invalid_utf8,
                                   skip_bad_lines=options.skip_bad_lines, text_column=options.text_column,
                                   id_column=options.id_column, report=self.reads[-1], long_lines=True,
                                   read_limits=options.limits.read_limits,
                                   batch_documents=options.limits.read_batch_documents,
                                   batch_chars=options.limits.read_batch_chars, exclude=options.excluded_paths,
                                   corpus_format=options.corpus_format)

    def checked(self) -> None:
        """After a full pass: the manifest's rules hold; later passes need no second check."""
        if self.check is not None:
            self.check.finish()
            self.check = None
            self.assign = self.manifest.partition_of


def run_local(options: PrepareOptions) -> PrepareResult:
    """The local executor: two streaming passes on ``threads`` threads (see the module docstring)."""
    started = time.perf_counter()
    threads = resolve_threads(options.threads)
    source = _Source(options)
    total_documents = None
    sample = capped = None
    if options.fit is not None:
        trainer = options.trainer()
        seen = 0
        sample = FitSample(options.fit_sample) if options.fit_sample is not None else None

        def train_texts() -> Iterator[list[str]]:
            nonlocal seen
            with Progress(f"pass 1: reading, counting train for {options.tokenizer}", quiet=options.quiet) as bar:
                for batch in source.batches():
                    texts, held = [], 0
                    for d in batch:
                        train = source.assign(d.id) is Partition.TRAIN
                        text = d.text
                        if train and sample is not None:  # the fit sample rule: a prefix of the train text
                            text = sample.take(d.id, text)
                            train = text is not None
                        if train:  # a long text left in its file counts its parts as they are read
                            texts.append(text if isinstance(text, str) else text.reporting(
                                lambda n: bar.update(0, n)))
                        if not train or isinstance(text, str):
                            held += len(d.text)
                    seen += len(batch)
                    bar.update(len(batch), held)
                    stop_point("read")
                    yield texts

        table = count_types(trainer, training_batches(trainer, train_texts(), options.limits.stream_chars), threads)
        source.checked()  # the manifest first: a wrong manifest is named, not an empty training text
        table, capped = capped_table(options, table)
        tok = fit_from_table(options, trainer, table)
        stop_point("fitted")
        total_documents = seen
    else:
        tok = options.load_tokenizer()
    fitted = time.perf_counter()
    tallies = {p: PartitionTally() for p in PARTITIONS}

    def before_commit(resume: dict | None) -> None:
        # tokenizer.json and report.json are staged before the store is renamed into place, and
        # renamed after it: a failure on the way leaves --out as it was.
        seconds = {"fit": fitted - started, "encode": time.perf_counter() - fitted}
        fitted_on = {"fit_sample": None if sample is None else sample.summary(), "max_types": capped}
        outputs.stage(tok, tallies, seconds=seconds, read=source.reads[-1], resume=resume,
                      extra={key: value for key, value in fitted_on.items() if value is not None})

    with StagedOutputs(options, threads=threads) as outputs:
        _encode_and_write(tok, source, tallies, options, threads, total_documents, before_commit)
    stop_point("stored")
    return outputs.result


def _resumed_mismatch(writer, source: _Source) -> str | None:
    """Why the files kept from an interrupted run are not this corpus's, or were encoded by other rules
    (another ``piece_chars``; the writer's ``encoding``), None: they are this run's.

    Reads the corpus up to the kept documents of every partition and compares, file by file, the
    sha256 over its documents' ``source_digest`` (ids and text) with what the interrupted run recorded.
    """
    recorded = writer.resumed_encoding
    if recorded is not None and recorded != writer.encoding:
        said = lambda rules: ", ".join(f"{k}={v}" for k, v in sorted(rules.items()))  # noqa: E731
        return (f"the interrupted run encoded with {said(recorded)}, this one with {said(writer.encoding)} (a long "
                "stretch with no break would be cut elsewhere)")
    rows = writer.max_rows_per_file
    kept = {p: writer.resumed_sources(p) for p in PARTITIONS}
    wanted = {p: len(kept[p]) * rows for p in PARTITIONS}
    for part in PARTITIONS:
        if None in kept[part]:
            index = kept[part].index(None)
            return (f"{part.value} file part-{index:05d}.parquet has no record of the documents it was encoded from")
    seen = dict.fromkeys(PARTITIONS, 0)
    digests: dict[Partition, list[str]] = {p: [] for p in PARTITIONS}
    hashers = {p: hashlib.sha256() for p in PARTITIONS}
    if source.options.continuous:
        assign = source.assign
    else:
        def assign(doc_id: str) -> Partition | None:
            try:
                return source.manifest.partition_of(doc_id)
            except CorpusError:
                return None
    for batch in source.batches():
        for doc in batch:
            part = assign(doc.id)
            if part is None or seen[part] >= wanted[part]:
                continue
            hashers[part].update(source_digest(doc.id, doc.text))
            seen[part] += 1
            if seen[part] % rows == 0:
                digests[part].append(hashers[part].hexdigest())
                hashers[part] = hashlib.sha256()
        if all(seen[p] >= wanted[p] for p in PARTITIONS):
            break
    for part in PARTITIONS:
        for index, expected in enumerate(kept[part]):
            if index >= len(digests[part]):
                return (f"the corpus has {seen[part]:,} {part.value} document(s), fewer than the "
                        f"{wanted[part]:,} kept from the interrupted run")
            if digests[part][index] != expected:
                return (f"{part.value} file part-{index:05d}.parquet was encoded from other documents "
                        "(their ids or text differ from this corpus)")
    return None


@dataclass(frozen=True)
class _IdsFile:
    """The ids of one long document, in a file (uint32, BOS first, EOS last)."""

    path: Path
    count: int


@dataclass(frozen=True)
class _EncodedChunk:
    """One chunk of a partition, encoded: what the writer writes and the report counts.

    ``values``/``offsets``: the chunk's token ids (uint32) and int64 offsets, or ``ids_file`` for one
    long document whose ids went to a file; ``sources``: each document's ``source_digest``;
    ``tally``: what the chunk adds to its partition's report row; ``unshown_bytes``: UTF-8 bytes
    of its text the progress bar has not counted yet (a long text counts its spans as they go).
    """

    partition: Partition
    ids: list[str]
    offsets: np.ndarray
    tally: dict[str, int]
    sources: list[bytes]
    unshown_bytes: int
    values: np.ndarray | None = None
    ids_file: _IdsFile | None = None


class _ByteProgress:
    """The pass-2 bar, updated from any encoding thread (a long document reports span by span)."""

    def __init__(self, bar: Progress):
        self.bar, self.lock = bar, threading.Lock()

    def __call__(self, items: int, nbytes: int) -> None:
        with self.lock:
            self.bar.update(items, nbytes)


class _Encoder:
    """Encodes one chunk on a pool thread (``encode_lock``: kinds whose encode is not thread-safe
    take turns); a chunk of one ``LongText`` has its ids written to a file in the writer's temporary
    directory, span by span, so no long document is held whole in memory."""

    def __init__(self, tok: Tokenizer, options: PrepareOptions, tmp: Path, progress: _ByteProgress):
        self.tok, self.options, self.tmp, self.progress = tok, options, tmp, progress
        self.lock = encode_lock(tok)
        self.long_files = itertools.count()
        # no BOS: asked (--bos none: each document's BOS is dropped) or the tokenizer has none (a
        # SentencePiece model without <s>: its documents come as [content..., EOS] already)
        self.no_bos = options.without_bos or tok.bos_id is None
        self.without_bos = drops_bos(options, tok)

    def _locked(self):
        return self.lock if self.lock is not None else contextlib.nullcontext()

    def __call__(self, item: tuple[Partition, list[Document]]) -> _EncodedChunk:
        part, docs = item
        try:
            if not isinstance(docs[0].text, str):
                return self._long_text(part, docs[0])
            return self._documents(part, docs)
        except UnknownInputError as exc:
            raise exc.in_partition(part.value) from None

    def _documents(self, part: Partition, docs: list[Document]) -> _EncodedChunk:
        ids = [d.id for d in docs]
        texts = [d.text for d in docs]
        streamed = 0

        def span_done(nbytes: int) -> None:
            nonlocal streamed
            streamed += nbytes
            self.progress(0, nbytes)

        with self._locked():
            values, offsets = self.tok.encode_documents(texts, ids, progress=span_done,
                                                        stream_chars=self.options.limits.stream_chars,
                                                        piece_chars=self.options.limits.piece_chars)
        if self.without_bos:  # [content..., EOS]: each document's first id (its BOS) removed
            values, offsets = without_bos_ids(values, offsets)
        return _EncodedChunk(part, ids, offsets, chunk_tally(offsets, sum(len(t) for t in texts), self.options),
                             [source_digest(d.id, d.text) for d in docs],
                             sum(utf8_length(t) for t in texts) - streamed, values=values)

    def _long_text(self, part: Partition, doc: Document) -> _EncodedChunk:
        """A document left in its file: its ids go to a file beside the store's, span by span."""
        path = self.tmp / f".long-{next(self.long_files)}.u32"
        count = 0
        eos = np.array([] if self.tok.eos_id is None else [self.tok.eos_id], dtype=np.uint32)
        bos = [] if self.no_bos else [np.array([self.tok.bos_id], dtype=np.uint32)]
        with self._locked(), open(path, "wb") as fh:
            spans = encode_long(self.tok, doc.text, doc.id, lambda n: self.progress(0, n),
                                self.options.limits.stream_chars, self.options.limits.piece_chars)
            for ids in itertools.chain(bos, spans, [eos]):
                fh.write(ids.astype(np.uint32, copy=False).tobytes())
                count += int(ids.shape[0])
        offsets = np.array([0, count], dtype=np.int64)
        return _EncodedChunk(part, [doc.id], offsets, chunk_tally(offsets, len(doc.text), self.options),
                             [source_digest(doc.id, doc.text)], 0, ids_file=_IdsFile(path, count))


def _chunks(source: _Source, tallies: dict[Partition, PartitionTally], skip: dict[Partition, int],
            limits: PrepareLimits) -> Iterator[tuple[Partition, list[Document]]]:
    """Each partition's documents in encode chunks (``Chunker``); a ``LongText`` is a chunk of its own.
    The first ``skip[p]`` documents of each partition are in the store already (resume): they are
    counted (documents and characters) and left out."""
    chunker = Chunker(limits)
    for batch in source.batches():
        for doc in batch:
            part = source.assign(doc.id)
            if part is None:
                continue  # forgotten by the manifest: named by ``source.checked``
            if skip[part]:
                skip[part] -= 1
                tallies[part].add({"documents": 1, "characters": len(doc.text)})
                continue
            if not isinstance(doc.text, str):  # a LongText: a chunk and a store file of its own
                chunk = chunker.take(part)
                if chunk:
                    yield part, chunk
                yield part, [doc]
                continue
            chunk = chunker.add(part, doc, len(doc.text))
            if chunk is not None:
                yield part, chunk
    yield from chunker.rest()


def _resume(writer, source: _Source, options: PrepareOptions) -> dict | None:
    """With ``resume``: keep the interrupted run's files if they are this corpus's, else start afresh;
    says which on stderr and returns the report's ``resume`` entry (None without ``resume``)."""
    if not options.resume:
        return None
    why = _resumed_mismatch(writer, source) if any(writer.resumed.values()) else None
    if why is not None:
        writer.start_fresh()
        resume = {"kept": None, "started_afresh": why}
        message = f"resume: starting afresh: {why}"
    else:
        resume = {"kept": {p.value: {"files": len(writer.resumed_sources(p)), "documents": writer.resumed[p]}
                           for p in PARTITIONS}}
        message = "resume: kept " + ", ".join(
            f"{plural(len(writer.resumed_sources(p)), 'file')} ({plural(writer.resumed[p], 'document')}) "
            f"of {p.value}" for p in PARTITIONS)
    if (why is not None or any(writer.resumed.values())) and not options.quiet:
        print(message, file=sys.stderr, flush=True)
    return resume


def _count_kept(writer, tallies: dict[Partition, PartitionTally], options: PrepareOptions,
                bar: Progress) -> dict[Partition, int]:
    """The documents of each partition already in the store (resume): their tokens and windows, from
    the kept files, go to the tallies; returns how many ``_chunks`` skips per partition."""
    skip = dict.fromkeys(PARTITIONS, 0)
    for part in PARTITIONS:
        lengths = writer.resumed_lengths(part)
        if lengths.size:
            skip[part] = int(lengths.size)
            offsets = np.zeros(lengths.size + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            tallies[part].add({"tokens": int(offsets[-1]),
                               **window_counts(offsets, options.context_length, options.stride)})
            bar.update(int(lengths.size))
    return skip


def _encode_and_write(tok: Tokenizer, source: _Source, tallies: dict[Partition, PartitionTally],
                      options: PrepareOptions, threads: int, total: int | None, before_commit=None) -> dict | None:
    """Pass 2: chunks of each partition (``_chunks``) -> encode on ``threads`` threads (``_Encoder``)
    -> row groups, in order; returns the report's ``resume`` entry.

    With ``resume``, the first ``writer.resumed[p]`` documents of each partition are already in
    the store: they are counted (characters here, tokens and windows from the kept files) and skipped.
    """
    # The readers check every id of the corpus (a continuous text's are made unique): the writer need not.
    with open_store_writer(options, tok, check_unique=False) as writer:
        for stale in writer.tmp.glob(".long-*.u32"):  # an interrupted run's ids of a long document
            stale.unlink()
        resume = _resume(writer, source, options)
        with Progress(f"pass 2: encoding on {plural(threads, 'thread')}", total=total, quiet=options.quiet) as bar:
            progress = _ByteProgress(bar)
            skip = _count_kept(writer, tallies, options, bar)
            encoder = _Encoder(tok, options, writer.tmp, progress)
            for chunk in OrderedPool(encoder, threads).map(_chunks(source, tallies, skip, options.limits)):
                if chunk.ids_file is not None:
                    writer.write_long_document(chunk.partition, chunk.ids[0], chunk.ids_file.path,
                                               chunk.ids_file.count, source=chunk.sources[0])
                    chunk.ids_file.path.unlink()
                else:
                    writer.write_chunk(chunk.partition, chunk.ids, chunk.values, chunk.offsets, sources=chunk.sources)
                tallies[chunk.partition].add(chunk.tally)
                progress(len(chunk.ids), chunk.unshown_bytes)
                stop_point("chunk")
            source.checked()  # a tokenizer file: one pass, so the manifest is checked before the commit
        if before_commit is not None:
            before_commit(resume)
    return resume
