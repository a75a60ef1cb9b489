"""``prepare()``: corpus -> tokenizer (fitted on train only) -> token store -> window counts.

The main job behind ``engine prepare``, streaming, so a corpus larger than memory fits:

1. pass 1 streams the corpus in batches (JSONL and Parquet in chunks, folders file by file),
   assigns each document its partition (``manifest.partition_of(id)``) and feeds only TRAIN
   texts to the fitter: characters (char), distinct words with counts (word, bpe). The manifest
   is checked at the end of the pass (unknown ids, forgotten documents; the readers catch
   duplicates) with O(documents) id sets, before any merge is trained;
2. the tokenizer is fitted (BPE merges train locally from the word-type table), or loaded;
3. pass 2 streams every document again, groups each partition's documents into chunks (at most
   ``ENCODE_CHUNK_DOCUMENTS`` documents or ``ENCODE_CHUNK_CHARS`` characters), encodes chunks on
   ``threads`` threads (``engine.parallel``), writes each as Parquet row groups in document order,
   and counts windows and tails (SPEC §5) from each chunk's offsets. The store appears atomically.
   With a tokenizer file there is nothing to fit, so one pass does it all and the manifest is
   checked before the store is committed.

Peak memory: a few chunks per thread plus the word-type table and O(documents) id sets; never the
corpus. One continuous ``.txt`` file is one document per partition and is read whole.
Output is byte-identical for every thread count: chunk boundaries depend on the documents only.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from engine.corpus import (
    PARTITIONS, CorpusPartitions, Document, ManifestCheck, Partition, ReadReport, SplitManifest, is_continuous_text,
    open_corpus, read_text_file,
)
from engine.corpus import check_columns_apply
from engine.errors import ConfigurationError, CorpusError
from engine.parallel import TOKENIZER_KINDS, OrderedPool, StreamingFit, encode_lock, resolve_threads
from engine.progress import Progress
from engine.store import TokenStore
from engine.tokenizers.base import Tokenizer, load_tokenizer

__all__ = [
    "prepare", "PrepareResult", "default_corpus_paths", "iter_corpus_batches", "window_counts",
    "resolve_inputs", "finish_report", "PartitionTally",
]

ENCODE_CHUNK_DOCUMENTS = 2048
# Kernels hold ~40 bytes of scratch per character (code points, piece bounds, word tables), so 1M
# characters keep one running chunk near 40 MB whatever the corpus size.
ENCODE_CHUNK_CHARS = 1 << 20
# Store layout: row groups and files of fixed row counts, so the bytes depend only on the documents
# (not on chunking or threads) and a resumed run can keep an interrupted run's finished files.
STORE_ROW_GROUP_ROWS = 1024
STORE_FILE_ROWS = 1 << 17
READ_BATCH_DOCUMENTS = 1024
READ_BATCH_CHARS = 1 << 20


@dataclass(frozen=True)
class PrepareResult:
    out_dir: Path
    store_path: Path
    tokenizer_path: Path
    report_path: Path
    report: dict


def default_corpus_paths() -> tuple[Path, Path]:
    """The bundled corpus and manifest: ``data/`` of the checkout, else ``./data``."""
    here = Path(__file__).resolve().parent.parent / "data"
    base = here if (here / "corpus.jsonl").exists() else Path("data")
    return base / "corpus.jsonl", base / "splits.json"


# -- reading -----------------------------------------------------------------------------------


def iter_corpus_batches(path: str | os.PathLike, *, on_invalid_utf8: str = "error", skip_bad_lines: bool = False,
                        batch_documents: int | None = None, report: ReadReport | None = None,
                        text_column: str = "text", id_column: str | None = None,
                        ) -> Iterator[list[Document]]:
    """Documents of a JSONL file, a Parquet file or dataset, or a folder, a batch at a time, in order.

    ``open_corpus`` (the dispatch and checks of ``Corpus.from_path``) with the pipeline's batch
    bounds: at most ``batch_documents`` documents and ``READ_BATCH_CHARS`` characters a batch.
    """
    yield from open_corpus(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                           batch_documents=batch_documents or READ_BATCH_DOCUMENTS, batch_chars=READ_BATCH_CHARS,
                           report=report, text_column=text_column, id_column=id_column)


# -- windows -----------------------------------------------------------------------------------


def window_counts(offsets: np.ndarray, context_length: int, stride: int) -> dict[str, int]:
    """Complete windows, incomplete tails, tail tokens and short documents (fewer than T + 1 tokens, so
    no complete window) over documents given by ``offsets`` (SPEC §5)."""
    from engine.windows import CausalWindowConfig, document_window_counts

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


@dataclass
class PartitionTally:
    """What the report says about one partition, summed chunk by chunk."""

    documents: int = 0
    characters: int = 0
    tokens: int = 0
    windows: int = 0
    incomplete_tails: int = 0
    tail_tokens: int = 0
    short_documents: int = 0

    def add(self, other: dict[str, int]) -> None:
        for key, value in other.items():
            setattr(self, key, getattr(self, key) + value)


@dataclass
class _Chunks:
    """Per-partition pending documents, cut into encode chunks by documents and characters."""

    pending: dict[Partition, list[Document]] = field(default_factory=lambda: {p: [] for p in PARTITIONS})
    chars: dict[Partition, int] = field(default_factory=lambda: dict.fromkeys(PARTITIONS, 0))

    def add(self, part: Partition, doc: Document) -> list[Document] | None:
        self.pending[part].append(doc)
        self.chars[part] += len(doc.text)
        if len(self.pending[part]) >= ENCODE_CHUNK_DOCUMENTS or self.chars[part] >= ENCODE_CHUNK_CHARS:
            return self.take(part)
        return None

    def take(self, part: Partition) -> list[Document]:
        chunk, self.pending[part], self.chars[part] = self.pending[part], [], 0
        return chunk


# -- the job -----------------------------------------------------------------------------------


def resolve_inputs(corpus_path, splits_path, *, hash_split, tokenizer: str, merges: int, context_length: int,
                   stride: int) -> tuple[Path, Path | None, bool]:
    """Check the options before any work: ``(corpus path, manifest path or None, is continuous text)``."""
    from engine.windows import CausalWindowConfig

    CausalWindowConfig(context_length, stride)
    if merges < 0:
        raise ConfigurationError(f"--merges must be >= 0, got {merges}")
    if tokenizer not in TOKENIZER_KINDS and not Path(tokenizer).exists():
        raise ConfigurationError(
            f"--tokenizer {tokenizer!r}: expected one of {', '.join(TOKENIZER_KINDS)} or an existing tokenizer file"
        )
    if corpus_path is None:
        corpus_path, default_splits = default_corpus_paths()
        if splits_path is None and hash_split is None:
            splits_path = default_splits
    corpus_path = Path(corpus_path)
    if not corpus_path.exists():
        raise CorpusError(f"{corpus_path}: corpus not found (expected a .jsonl, .parquet, .txt file or a folder)")
    continuous = is_continuous_text(corpus_path)
    if continuous and (splits_path is not None or hash_split is not None):
        raise ConfigurationError(
            f"{corpus_path}: a continuous text is split by position (--train-fraction); "
            "--splits and --hash-split apply to multi-document corpora only"
        )
    if not continuous and splits_path is not None and hash_split is not None:
        raise ConfigurationError("pass either --splits FILE or --hash-split RATIOS, not both")
    if not continuous and splits_path is None and hash_split is None:
        raise ConfigurationError(
            f"{corpus_path}: a multi-document corpus needs a split: pass --splits FILE (a manifest "
            '{"train": [...], "validation": [...], "test": [...]}) or --hash-split 0.8,0.1,0.1'
        )
    return corpus_path, (Path(splits_path) if splits_path is not None else None), continuous


def window_warnings(tallies: dict[Partition, PartitionTally], context_length: int) -> list[str]:
    """One line per partition whose documents give no complete window, or hold short documents."""
    warnings = []
    for part in PARTITIONS:
        tally = tallies[part]
        if tally.documents and not tally.windows:
            warnings.append(f"{part.value}: no complete window: all {tally.documents:,} document(s) are shorter than "
                            f"T + 1 = {context_length + 1:,} tokens (use a smaller --context)")
        elif tally.short_documents:
            warnings.append(f"{part.value}: {tally.short_documents:,} of {tally.documents:,} document(s) are shorter "
                            f"than T + 1 = {context_length + 1:,} tokens and give no complete window")
    return warnings


def finish_report(out_dir: Path, corpus_path: Path, splits_path: Path | None, tok: Tokenizer,
                  tallies: dict[Partition, PartitionTally], *, context_length: int, stride: int, threads: int,
                  seconds: dict[str, float] | None = None, read: ReadReport | None = None) -> PrepareResult:
    """Save the tokenizer beside the store and write ``report.json`` (atomically).

    ``read`` (what the corpus reader counted: skipped lines and documents, replaced or dropped
    invalid UTF-8, made ids) goes to ``report["read"]``; ``report["warnings"]`` names partitions
    without complete windows and short documents.
    """
    out_dir = Path(out_dir)
    store_path, tokenizer_path, report_path = out_dir / "store", out_dir / "tokenizer.json", out_dir / "report.json"
    tok.save(tokenizer_path)
    report: dict[str, Any] = {
        "corpus": str(corpus_path),
        "splits": str(splits_path) if splits_path is not None else None,
        "store": str(store_path),
        "tokenizer": {"kind": tok.kind, "path": str(tokenizer_path), "hash": tok.hash, "vocab_size": tok.vocab_size,
                      "bos_id": tok.bos_id, "eos_id": tok.eos_id, "notes": list(tok.notes)},
        "context_length": context_length,
        "stride": stride,
        "threads": threads,
        "partitions": {p.value: vars(tallies[p]).copy() for p in PARTITIONS},
        "read": read.to_dict() if read is not None else None,
        "warnings": window_warnings(tallies, context_length),
        "seconds": {k: round(v, 3) for k, v in (seconds or {}).items()},
    }
    tmp = report_path.with_name(f".{report_path.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, report_path)
    return PrepareResult(out_dir, store_path, tokenizer_path, report_path, report)


def _fit(tokenizer: str, merges: int, batches: Iterator[list[Document]], assign, threads: int, *,
         quiet: bool) -> tuple[Tokenizer, int]:
    """Pass 1: stream every document through ``assign`` (partitions, manifest), fit on TRAIN."""
    fit = StreamingFit(tokenizer, merges=merges, threads=threads)
    seen = [0]

    def train_texts():
        with Progress(f"pass 1: reading, fitting {tokenizer} on train", quiet=quiet) as bar:
            for batch in batches:
                texts = [d.text for d in batch if assign(d.id) is Partition.TRAIN]
                bar.update(len(batch), sum(len(d.text) for d in batch))
                seen[0] += len(batch)
                yield texts

    return fit.fit_batches(train_texts(), quiet=quiet), seen[0]


def prepare(
    corpus_path: str | os.PathLike | None = None,
    splits_path: str | os.PathLike | None = None,
    out_dir: str | os.PathLike = "out",
    *,
    tokenizer: str = "bpe",
    merges: int = 200,
    context_length: int = 64,
    stride: int = 1,
    train_fraction: float = 0.9,
    hash_split: dict[str, float] | None = None,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    text_column: str = "text",
    id_column: str | None = None,
    threads: int | None = None,
    resume: bool = False,
    quiet: bool = False,
) -> PrepareResult:
    """Run the main job and return where everything went plus the report (also in ``report.json``).

    ``resume=True`` continues an interrupted run over the same ``out_dir``: the tokenizer is fitted
    again (deterministic, so the same), the finished files of the interrupted store are kept, and
    only the documents after them are encoded; the store equals a fresh run's, byte for byte.
    ``text_column``/``id_column`` name the columns of a JSONL or Parquet/Arrow corpus (without an
    id column, ids are made from file and row; ``report["read"]`` says so).
    """
    started = time.perf_counter()
    threads = resolve_threads(threads)
    corpus_path, splits_path, continuous = resolve_inputs(
        corpus_path, splits_path, hash_split=hash_split, tokenizer=tokenizer, merges=merges,
        context_length=context_length, stride=stride)

    check_columns_apply(corpus_path, text_column, id_column)
    reads = [ReadReport()]  # what the last pass read (every pass reads the whole corpus)

    if continuous:
        # One document per partition: the text is read whole (the issue allows it), then streamed as batches.
        parts = CorpusPartitions.from_text(read_text_file(corpus_path, on_invalid_utf8=on_invalid_utf8, report=reads[0]),
                                           train_fraction, name=corpus_path.stem)
        where = {doc.id: part for part in PARTITIONS for doc in parts.documents(part)}
        check = None

        def batches() -> Iterator[list[Document]]:
            return iter([[doc for part in PARTITIONS for doc in parts.documents(part)]])

        assign = where.__getitem__  # noqa: E731
    else:
        manifest = SplitManifest.from_json(splits_path) if splits_path is not None else SplitManifest.by_hash(hash_split)
        check = ManifestCheck(manifest, str(corpus_path))

        def batches() -> Iterator[list[Document]]:
            reads.append(ReadReport())
            return iter_corpus_batches(corpus_path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                                       text_column=text_column, id_column=id_column, report=reads[-1])

        assign = check.partition_of

    if tokenizer in TOKENIZER_KINDS:
        tok, total_documents = _fit(tokenizer, merges, batches(), assign, threads, quiet=quiet)
        if check is not None:
            check.finish()
            check.seen.clear()  # pass 2 needs no second check: the same documents come again
            assign = manifest.partition_of
    else:
        tok, total_documents = load_tokenizer(tokenizer), None
    fitted = time.perf_counter()

    tallies = {p: PartitionTally() for p in PARTITIONS}
    _encode_and_write(tok, batches(), assign, Path(out_dir) / "store", tallies, context_length, stride, threads, total_documents,
                      before_commit=None if check is None or tokenizer in TOKENIZER_KINDS else check.finish,
                      resume=resume, quiet=quiet)

    seconds = {"fit": fitted - started, "encode": time.perf_counter() - fitted}
    return finish_report(out_dir, corpus_path, splits_path, tok, tallies, context_length=context_length, stride=stride,
                         threads=threads, seconds=seconds, read=reads[-1])


def _encode_and_write(tok: Tokenizer, batches: Iterator[list[Document]], assign, store_path: Path,
                      tallies: dict[Partition, PartitionTally], context_length: int, stride: int, threads: int,
                      total: int | None, *, before_commit, resume: bool = False, quiet: bool) -> None:
    """Pass 2: chunks of each partition -> encode on ``threads`` threads -> row groups, in order.

    With ``resume``, the first ``writer.resumed[p]`` documents of each partition are already in
    the store: they are counted (characters here, tokens and windows from the kept files) and skipped.
    """
    lock = encode_lock(tok)
    skip = dict.fromkeys(PARTITIONS, 0)

    def chunks() -> Iterator[tuple[Partition, list[Document]]]:
        pending = _Chunks()
        for batch in batches:
            for doc in batch:
                part = assign(doc.id)
                if part is None:
                    continue  # forgotten by the manifest: named by ``before_commit``
                if skip[part]:
                    skip[part] -= 1
                    tallies[part].add({"documents": 1, "characters": len(doc.text)})
                    continue
                chunk = pending.add(part, doc)
                if chunk is not None:
                    yield part, chunk
        for part in PARTITIONS:
            if pending.pending[part]:
                yield part, pending.take(part)

    def encode(item: tuple[Partition, list[Document]]):
        part, docs = item
        ids = [d.id for d in docs]
        texts = [d.text for d in docs]
        if lock is None:
            values, offsets = tok.encode_documents(texts, ids)
        else:
            with lock:
                values, offsets = tok.encode_documents(texts, ids)
        tally = window_counts(offsets, context_length, stride)
        tally.update(documents=len(docs), characters=sum(len(t) for t in texts), tokens=int(offsets[-1]))
        return part, ids, values, offsets, tally, sum(len(t.encode("utf-8")) for t in texts)

    with TokenStore.writer(store_path, tok, row_group_size=STORE_ROW_GROUP_ROWS, max_rows_per_file=STORE_FILE_ROWS,
                           resume=resume) as writer, Progress(f"pass 2: encoding on {threads} threads",
                                                              total=total, quiet=quiet) as bar:
        for part in PARTITIONS:
            lengths = writer.resumed_lengths(part)
            if lengths.size:
                skip[part] = int(lengths.size)
                offsets = np.zeros(lengths.size + 1, dtype=np.int64)
                np.cumsum(lengths, out=offsets[1:])
                tallies[part].add({"tokens": int(offsets[-1]), **window_counts(offsets, context_length, stride)})
                bar.update(int(lengths.size))
        for part, ids, values, offsets, tally, nbytes in OrderedPool(encode, threads).map(chunks()):
            writer.write_chunk(part, ids, values, offsets)
            tallies[part].add(tally)
            bar.update(len(ids), nbytes)
        if before_commit is not None:
            before_commit()
