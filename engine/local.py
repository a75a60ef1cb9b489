"""The local executor of ``prepare``: two streaming passes on threads (``engine.pipeline``'s docstring).

``run_local(options)``: pass 1 reads the corpus batch by batch and counts the train partition's
types on ``threads`` threads (long texts span by span), the tokenizer is fitted from the table;
pass 2 reads again, cuts each partition into chunks (``pipeline.Chunker``), encodes them on
threads (``OrderedPool``, results in order) and writes them through the store writer, tallying
windows per chunk; ``tokenizer.json`` and ``report.json`` are staged before the store commits and
renamed after it (``StagedOutputs``). With ``resume``, the finished files of an interrupted run are
kept once ``_resumed_mismatch`` proves they were encoded from this corpus.
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

from engine import pipeline
from engine.corpus import PARTITIONS, CorpusPartitions, Document, ManifestCheck, Partition, ReadReport, read_text_file
from engine.corpus.documents import plural
from engine.errors import CorpusError
from engine.outputs import PrepareResult, StagedOutputs
from engine.parallel import OrderedPool, count_types, encode_lock, resolve_threads
from engine.progress import Progress
from engine.store.layout import source_digest, utf8_length
from engine.testhook import stop_point
from engine.tokenizers.base import Tokenizer, UnknownInputError
from engine.tokenizers.streaming import encode_long, training_batches

__all__ = ["run_local"]


class _Source:
    """The documents of a run, batch by batch, each with its partition (and the manifest's check)."""

    def __init__(self, options: pipeline.PrepareOptions):
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
        return pipeline.iter_corpus_batches(self.options.corpus, on_invalid_utf8=self.options.on_invalid_utf8,
                                   skip_bad_lines=self.options.skip_bad_lines, text_column=self.options.text_column,
                                   id_column=self.options.id_column, report=self.reads[-1], long_lines=True,
                                   exclude=(self.options.out_dir,))

    def checked(self) -> None:
        """After a full pass: the manifest's rules hold; later passes need no second check."""
        if self.check is not None:
            self.check.finish()
            self.check = None
            self.assign = self.manifest.partition_of


def run_local(options: pipeline.PrepareOptions) -> PrepareResult:
    """The local executor: two streaming passes on ``threads`` threads (see the module docstring)."""
    started = time.perf_counter()
    threads = resolve_threads(options.threads)
    source = _Source(options)
    total_documents = None
    if options.fit is not None:
        trainer = options.trainer()
        seen = 0

        def train_texts() -> Iterator[list[str]]:
            nonlocal seen
            with Progress(f"pass 1: reading, counting train for {options.tokenizer}", quiet=options.quiet) as bar:
                for batch in source.batches():
                    texts, held = [], 0
                    for d in batch:
                        train = source.assign(d.id) is Partition.TRAIN
                        if train:  # a long text left in its file counts its parts as they are read
                            texts.append(d.text if isinstance(d.text, str) else d.text.reporting(
                                lambda n: bar.update(0, n)))
                        if not train or isinstance(d.text, str):
                            held += len(d.text)
                    seen += len(batch)
                    bar.update(len(batch), held)
                    stop_point("read")
                    yield texts

        table = count_types(trainer, training_batches(trainer, train_texts()), threads)
        source.checked()  # the manifest first: a wrong manifest is named, not an empty training text
        tok = pipeline.fit_from_table(options, trainer, table)
        stop_point("fitted")
        total_documents = seen
    else:
        tok = options.load_tokenizer()
    fitted = time.perf_counter()
    tallies = {p: pipeline.PartitionTally() for p in PARTITIONS}

    def before_commit(resume: dict | None) -> None:
        # tokenizer.json and report.json are staged before the store is renamed into place, and
        # renamed after it: a failure on the way leaves --out as it was.
        seconds = {"fit": fitted - started, "encode": time.perf_counter() - fitted}
        outputs.stage(tok, tallies, seconds=seconds, read=source.reads[-1], resume=resume)

    with StagedOutputs(options, threads=threads) as outputs:
        _encode_and_write(tok, source, tallies, options, threads, total_documents, before_commit)
    stop_point("stored")
    return outputs.result


def _resumed_mismatch(writer, source: _Source) -> str | None:
    """Why the files kept from an interrupted run are not this corpus's (None: they are).

    Reads the corpus up to the kept documents of every partition and compares, file by file, the
    sha256 over its documents' ``source_digest`` (ids and text) with what the interrupted run recorded.
    """
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


def _encode_and_write(tok: Tokenizer, source: _Source, tallies: dict[Partition, pipeline.PartitionTally],
                      options: pipeline.PrepareOptions, threads: int, total: int | None, before_commit=None) -> dict | None:
    """Pass 2: chunks of each partition -> encode on ``threads`` threads -> row groups, in order.

    With ``resume``, the first ``writer.resumed[p]`` documents of each partition are already in
    the store: they are counted (characters here, tokens and windows from the kept files) and skipped.
    """
    lock = encode_lock(tok)
    skip = dict.fromkeys(PARTITIONS, 0)

    def chunks() -> Iterator[tuple[Partition, list[Document]]]:
        chunker = pipeline.Chunker()
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

    def encode(item: tuple[Partition, list[Document]]):
        if not isinstance(item[1][0].text, str):
            return encode_long_text(item)
        return encode_only(item) + ([source_digest(d.id, d.text) for d in item[1]],)

    def encode_long_text(item: tuple[Partition, list[Document]]):
        """A document left in its file: its ids go to a file beside the store's, span by span."""
        part, (doc,) = item
        ids_file = writer.tmp / f".long-{next(long_files)}.u32"
        count = 0
        try:
            with lock if lock is not None else contextlib.nullcontext(), open(ids_file, "wb") as fh:
                for ids in itertools.chain([np.array([tok.bos_id], dtype=np.uint32)],
                                           encode_long(tok, doc.text, doc.id, lambda n: count_bytes(0, n)),
                                           [np.array([tok.eos_id], dtype=np.uint32)]):
                    fh.write(ids.astype(np.uint32, copy=False).tobytes())
                    count += int(ids.shape[0])
        except UnknownInputError as exc:
            raise exc.in_partition(part.value) from None
        offsets = np.array([0, count], dtype=np.int64)
        tally = pipeline.chunk_tally(offsets, len(doc.text), options)
        return part, [doc.id], _IdsFile(ids_file, count), offsets, tally, 0, [source_digest(doc.id, doc.text)]

    bars: list[Progress] = []
    bar_lock = threading.Lock()

    def count_bytes(items: int, nbytes: int) -> None:  # from any thread: a long document shows progress per span
        with bar_lock:
            bars[0].update(items, nbytes)

    def encode_only(item: tuple[Partition, list[Document]]):
        part, docs = item
        ids = [d.id for d in docs]
        texts = [d.text for d in docs]
        streamed = [0]

        def span_done(nbytes: int) -> None:
            streamed[0] += nbytes
            count_bytes(0, nbytes)

        try:
            with lock if lock is not None else contextlib.nullcontext():
                values, offsets = tok.encode_documents(texts, ids, progress=span_done)
        except UnknownInputError as exc:
            raise exc.in_partition(part.value) from None
        tally = pipeline.chunk_tally(offsets, sum(len(t) for t in texts), options)
        return part, ids, values, offsets, tally, sum(utf8_length(t) for t in texts) - streamed[0]

    resume = None
    long_files = itertools.count()
    # The readers check every id of the corpus (a continuous text's are made unique): the writer need not.
    with pipeline.open_store_writer(options.store_path, tok, resume=options.resume, check_unique=False) as writer:
        for stale in writer.tmp.glob(".long-*.u32"):  # an interrupted run's ids of a long document
            stale.unlink()
        if options.resume:
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
        with Progress(f"pass 2: encoding on {plural(threads, 'thread')}", total=total, quiet=options.quiet) as bar:
            bars.append(bar)
            for part in PARTITIONS:
                lengths = writer.resumed_lengths(part)
                if lengths.size:
                    skip[part] = int(lengths.size)
                    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
                    np.cumsum(lengths, out=offsets[1:])
                    tallies[part].add({"tokens": int(offsets[-1]),
                                       **pipeline.window_counts(offsets, options.context_length, options.stride)})
                    bar.update(int(lengths.size))
            for part, ids, values, offsets, tally, nbytes, sources in OrderedPool(encode, threads).map(chunks()):
                if isinstance(values, _IdsFile):
                    writer.write_long_document(part, ids[0], values.path, values.count, source=sources[0])
                    values.path.unlink()
                else:
                    writer.write_chunk(part, ids, values, offsets, sources=sources)
                tallies[part].add(tally)
                count_bytes(len(ids), nbytes)
                stop_point("chunk")
            source.checked()  # a tokenizer file: one pass, so the manifest is checked before the commit
        if before_commit is not None:
            before_commit(resume)
    return resume
