"""``prepare()``: corpus -> tokenizer (fitted on train only) -> token store -> window counts.

The main job behind ``engine prepare``. ``PrepareOptions`` describes one run and is checked once,
on construction, before anything is read; the CLI, ``prepare(**keywords)``, the local executor
(here) and the Ray executor (``engine.distributed``) all take it. The local executor streams, so a
corpus larger than memory fits:

1. pass 1 streams the corpus in batches (JSONL and Parquet in chunks, folders file by file),
   assigns each document its partition (``manifest.partition_of(id)``) and hands only TRAIN
   texts to the kind's ``Trainer.count_types`` on ``threads`` threads, folding the batches into
   one type table (``engine.parallel.count_types``): distinct characters, words or byte-level
   pre-tokenizer pieces with counts, whatever the kind declares. The manifest is checked at the
   end of the pass (unknown ids, forgotten documents; the readers catch duplicates) with
   O(documents) id sets, before anything is fitted;
2. the tokenizer is fitted from the table (``trainer.train_from_counts``: O(types)), or loaded;
3. pass 2 streams every document again, cuts each partition's documents into chunks
   (``Chunker``: at most ``ENCODE_CHUNK_DOCUMENTS`` documents or ``ENCODE_CHUNK_CHARS``
   characters), encodes chunks on ``threads`` threads (``engine.parallel.OrderedPool``), writes
   each as Parquet row groups in document order, and counts windows and tails (SPEC §5) from each
   chunk's offsets (``chunk_tally``). The store appears atomically. With a tokenizer file there is
   nothing to fit, so one pass does it all and the manifest is checked before the store is committed.

Peak memory: a few chunks per thread plus the type table and O(documents) id sets; never the
corpus. One continuous ``.txt`` file is one document per partition and is read whole.
Output is byte-identical for every thread count: chunk boundaries depend on the documents only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from engine.corpus import (
    PARTITIONS, CorpusPartitions, Document, ManifestCheck, Partition, ReadReport, SplitManifest, is_continuous_text,
    open_corpus, read_text_file,
)
from engine.corpus import check_columns_apply
from engine.corpus.readers import INVALID_UTF8_POLICIES, TEXT_COLUMN
from engine.errors import ConfigurationError, CorpusError, TokenizerError
from engine.parallel import OrderedPool, count_types, encode_lock, resolve_threads
from engine.progress import Progress
from engine.testhook import stop_point
from engine.store import TokenStore
from engine.store.lock import pid_alive
from engine.store.layout import source_digest, utf8_length
from engine.store.writer import check_replaceable
from engine.tokenizers.streaming import training_batches
from engine.tokenizers.base import (
    FitOptions, Tokenizer, Trainer, UnknownInputError, fittable_kinds, load_tokenizer, tokenizer_from_json, trainer_for,
)

__all__ = [
    "prepare", "run", "PrepareOptions", "PrepareResult", "EXECUTORS", "default_corpus_paths", "iter_corpus_batches",
    "window_counts", "chunk_tally", "Chunker", "finish_report", "PartitionTally", "open_store_writer", "StagedOutputs",
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
EXECUTORS = ("local", "ray")
# The unknown token of kinds that have one: prepare never stops on an unseen word.
UNKNOWN_TOKEN = "<unk>"
# report.json's first key; reports written before it existed are recognised by REPORT_KEYS.
REPORT_FORMAT = "engine.report"
REPORT_KEYS = ("corpus", "splits", "store", "tokenizer", "context_length", "stride", "threads", "partitions")


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


# -- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrepareOptions:
    """One ``prepare`` run, checked on construction (messages use the CLI's spellings).

    ``corpus`` None: the bundled ``data/corpus.jsonl`` with ``data/splits.json``. ``tokenizer``: a
    kind ``prepare`` fits (``fittable_kinds()``: char, word, bpe, byte-bpe) or a tokenizer file.
    ``merges``, ``vocab_size``, ``pattern``, ``tie_break``: what the fit reads (``FitOptions``;
    None: the kind's default; ``pattern`` also names a tiktoken file's pre-tokenizer).
    ``text_column``/``id_column`` name the columns of a JSONL or Parquet/Arrow corpus (without an
    id column, ids are made from file and row; ``report["read"]`` says so). ``threads``
    None: ``$ENGINE_THREADS`` or all cores (Ray: the cluster's CPUs). ``executor``: ``local`` or
    ``ray`` (``ray_address`` to join a cluster). ``resume`` keeps an interrupted local run's files.
    Derived: ``continuous`` (one ``.txt`` file, split by position) and ``fit`` (None for a file).
    """

    corpus: Path | None = None
    splits: Path | None = None
    out_dir: Path = Path("out")
    tokenizer: str = "bpe"
    merges: int | None = None
    vocab_size: int | None = None
    pattern: str | None = None
    tie_break: str | None = None
    context_length: int = 64
    stride: int = 1
    train_fraction: float = 0.9
    hash_split: Mapping[str, float] | None = None
    on_invalid_utf8: str = "error"
    skip_bad_lines: bool = False
    text_column: str = TEXT_COLUMN
    id_column: str | None = None
    threads: int | None = None
    resume: bool = False
    quiet: bool = False
    executor: str = "local"
    ray_address: str | None = None
    continuous: bool = field(init=False, default=False)
    fit: FitOptions | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        from engine.windows import CausalWindowConfig

        CausalWindowConfig(self.context_length, self.stride)
        if self.threads is not None:
            resolve_threads(self.threads)
        if self.on_invalid_utf8 not in INVALID_UTF8_POLICIES:
            raise ConfigurationError(f"--on-invalid-utf8 {self.on_invalid_utf8!r} is unknown "
                                     f"(expected one of: {', '.join(INVALID_UTF8_POLICIES)})")
        if self.executor not in EXECUTORS:
            raise ConfigurationError(f"--executor {self.executor!r} is unknown (expected one of: {', '.join(EXECUTORS)})")
        if self.executor != "ray" and self.ray_address is not None:
            raise ConfigurationError("--ray-address applies to --executor ray only")
        if self.executor == "ray" and self.resume:
            raise ConfigurationError("--resume applies to --executor local only")
        fit = FitOptions(self.merges, self.vocab_size, self.pattern, self.tie_break, UNKNOWN_TOKEN)
        if self.tokenizer in fittable_kinds():
            self._set("fit", fit)
            trainer_for(self.tokenizer, fit)  # the kind's own checks (e.g. a vocabulary too small), now
        elif not Path(self.tokenizer).exists():
            raise ConfigurationError(f"--tokenizer {self.tokenizer!r}: expected one of "
                                     f"{', '.join(fittable_kinds())} or an existing tokenizer file")
        else:
            for option in ("vocab_size", "tie_break"):
                if getattr(fit, option) is not None:
                    raise ConfigurationError(f"--{option.replace('_', '-')} applies when prepare fits a tokenizer "
                                             f"(--tokenizer {', '.join(fittable_kinds())}), not to a tokenizer file")
        self._resolve_corpus()

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # resolving fields on construction; frozen afterwards

    def _resolve_corpus(self) -> None:
        corpus, splits = self.corpus, self.splits
        if corpus is None:
            corpus, default_splits = default_corpus_paths()
            if splits is None and self.hash_split is None:
                splits = default_splits
        corpus = Path(corpus)
        self._set("corpus", corpus)
        self._set("splits", Path(splits) if splits is not None else None)
        self._set("out_dir", Path(self.out_dir))
        if not corpus.exists():
            raise CorpusError(f"{corpus}: corpus not found (expected a .jsonl, .parquet, .txt file or a folder)")
        check_columns_apply(corpus, self.text_column, self.id_column)
        continuous = is_continuous_text(corpus)
        self._set("continuous", continuous)
        if continuous:
            if splits is not None or self.hash_split is not None:
                raise ConfigurationError(
                    f"{corpus}: a continuous text is split by position (--train-fraction); "
                    "--splits and --hash-split apply to multi-document corpora only")
            CorpusPartitions.from_text("", self.train_fraction)  # checks the fraction
            return
        if splits is not None and self.hash_split is not None:
            raise ConfigurationError("pass either --splits FILE or --hash-split RATIOS, not both")
        if splits is None and self.hash_split is None:
            raise ConfigurationError(
                f"{corpus}: a multi-document corpus needs a split: pass --splits FILE (a manifest "
                '{"train": [...], "validation": [...], "test": [...]}) or --hash-split 0.8,0.1,0.1')
        if self.hash_split is not None:
            self._set("hash_split", dict(self.hash_split))
            SplitManifest.by_hash(self.hash_split)  # checks the ratios
        if self.executor == "ray" and (self.on_invalid_utf8 != "error" or self.skip_bad_lines):
            raise ConfigurationError("--on-invalid-utf8 and --skip-bad-lines apply to --executor local only")
        if self.executor == "ray" and (self.text_column != TEXT_COLUMN or self.id_column is not None):
            raise ConfigurationError("--text-column and --id-column apply to --executor local only")

    @property
    def store_path(self) -> Path:
        return self.out_dir / "store"

    def manifest(self) -> SplitManifest:
        """The split of a multi-document corpus (read from ``splits``, or the hash rule)."""
        return SplitManifest.from_json(self.splits) if self.splits is not None else SplitManifest.by_hash(self.hash_split)

    def trainer(self) -> Trainer:
        """The fit's ``Trainer`` (only when ``fit`` is set)."""
        return trainer_for(self.tokenizer, self.fit)

    def load_tokenizer(self) -> Tokenizer:
        """The tokenizer file's tokenizer (only when ``fit`` is None)."""
        return load_tokenizer(self.tokenizer, pattern=self.pattern)


# -- chunks and tallies (both executors) ---------------------------------------------------------


class Chunker:
    """Each partition's documents cut into encode chunks, in order: a chunk closes at
    ``ENCODE_CHUNK_DOCUMENTS`` documents or ``ENCODE_CHUNK_CHARS`` characters. The one rule of
    both executors, so their row groups (and file bytes) are the same."""

    def __init__(self) -> None:
        self.pending: dict[Partition, list] = {p: [] for p in PARTITIONS}
        self.chars = dict.fromkeys(PARTITIONS, 0)

    def add(self, part: Partition, item: Any, chars: int) -> list | None:
        """Queue ``item`` (``chars`` characters long); the closed chunk, if this one closed it."""
        self.pending[part].append(item)
        self.chars[part] += chars
        if len(self.pending[part]) >= ENCODE_CHUNK_DOCUMENTS or self.chars[part] >= ENCODE_CHUNK_CHARS:
            return self._take(part)
        return None

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


def chunk_tally(offsets: np.ndarray, characters: int, options: PrepareOptions) -> dict[str, int]:
    """What one encoded chunk adds to its partition's report row."""
    tally = window_counts(offsets, options.context_length, options.stride)
    tally.update(documents=int(offsets.shape[0] - 1), characters=int(characters), tokens=int(offsets[-1]))
    return tally


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


def open_store_writer(path: Path, tok: Tokenizer, *, resume: bool = False):
    """The store writer both executors use: fixed row-group and file sizes."""
    return TokenStore.writer(path, tok, row_group_size=STORE_ROW_GROUP_ROWS, max_rows_per_file=STORE_FILE_ROWS,
                             resume=resume)


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


def _is_engine_report(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    if "format" in obj:
        return obj["format"] == REPORT_FORMAT
    partitions, tokenizer = obj.get("partitions"), obj.get("tokenizer")
    return (all(key in obj for key in REPORT_KEYS) and isinstance(partitions, dict)
            and set(partitions) == {p.value for p in PARTITIONS} and isinstance(tokenizer, dict)
            and isinstance(tokenizer.get("hash"), str))


def check_out_dir(options: PrepareOptions) -> None:
    """Before anything is read: ``--out`` holds nothing engine did not write where outputs go.

    ``tokenizer.json`` must be an engine tokenizer file (format and content hash), ``report.json``
    an engine report, ``store`` an engine token store (``check_replaceable``); else the error names
    the file. Leftover staged outputs of dead runs are removed."""
    out = options.out_dir
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"{out}: --out exists and is not a folder")
    tokenizer_path, report_path = out / "tokenizer.json", out / "report.json"
    if tokenizer_path.exists() or tokenizer_path.is_symlink():
        try:
            if tokenizer_path.is_symlink():
                raise OSError("a symbolic link")
            tokenizer_from_json(json.loads(tokenizer_path.read_text(encoding="utf-8")), str(tokenizer_path))
        except (OSError, ValueError, TokenizerError) as exc:
            raise ConfigurationError(f"{tokenizer_path}: exists and is not an engine tokenizer file "
                                     f"({type(exc).__name__}); refusing to overwrite it (move it or choose another --out)"
                                     ) from None
    if report_path.exists() or report_path.is_symlink():
        try:
            ours = not report_path.is_symlink() and _is_engine_report(json.loads(report_path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            ours = False
        if not ours:
            raise ConfigurationError(f"{report_path}: exists and is not an engine report; refusing to overwrite it "
                                     "(move it or choose another --out)")
    check_replaceable(options.store_path)
    if out.is_dir():
        remove_dead_staged(out)


# Staged outputs of a run with pid P: ``.NAME.staged-P`` and, killed inside ``Tokenizer.save``, its
# temporary ``..tokenizer.json.staged-P.<random>.tmp``.
STAGED_PREFIXES = (".tokenizer.json.staged-", ".report.json.staged-", "..tokenizer.json.staged-")


def remove_dead_staged(out: Path) -> None:
    """Remove the staged outputs in ``out`` of runs that are dead (a live run's stay)."""
    for stale in out.iterdir():
        prefix = next((p for p in STAGED_PREFIXES if stale.name.startswith(p)), None)
        if prefix is None:
            continue
        pid = stale.name[len(prefix):].split(".", 1)[0]
        if not (pid.isdigit() and pid_alive(int(pid))) and stale.is_file():
            stale.unlink(missing_ok=True)


def stage_outputs(options: PrepareOptions, tok: Tokenizer, tallies: dict[Partition, PartitionTally], *,
                  threads: int, seconds: dict[str, float] | None = None, read: ReadReport | None = None,
                  resume: dict | None = None) -> tuple[PrepareResult, list[tuple[Path, Path]]]:
    """Write ``tokenizer.json`` and ``report.json`` to hidden temporaries in ``--out`` (see
    ``finish_report``); returns the result and the (temporary, final) pairs ``commit_outputs`` renames."""
    out_dir = options.out_dir
    tokenizer_path, report_path = out_dir / "tokenizer.json", out_dir / "report.json"
    staged_tokenizer = out_dir / f".tokenizer.json.staged-{os.getpid()}"
    staged_report = out_dir / f".report.json.staged-{os.getpid()}"
    staged = [(staged_tokenizer, tokenizer_path), (staged_report, report_path)]
    try:
        tok.save(staged_tokenizer)
        report = _report(options, tok, tallies, tokenizer_path, threads=threads, seconds=seconds, read=read,
                         resume=resume)
        staged_report.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except BaseException:
        drop_staged(staged)
        raise
    return PrepareResult(out_dir, options.store_path, tokenizer_path, report_path, report), staged


def commit_outputs(staged: list[tuple[Path, Path]]) -> None:
    for tmp, final in staged:
        os.replace(tmp, final)


def drop_staged(staged: list[tuple[Path, Path]]) -> None:
    for tmp, _ in staged:
        tmp.unlink(missing_ok=True)


class StagedOutputs:
    """``tokenizer.json`` and ``report.json`` of one run, staged while the store is still being
    written (``stage``, called before the store is renamed into place) and renamed into ``--out``
    when the ``with`` block ends without an error; on any error (or an interrupt) they are removed,
    so a failed run of either executor changes nothing in ``--out``."""

    def __init__(self, options: PrepareOptions, *, threads: int):
        self.options, self.threads = options, threads
        self.result: PrepareResult | None = None
        self.files: list[tuple[Path, Path]] = []

    def stage(self, tok: Tokenizer, tallies: dict[Partition, PartitionTally], **report: Any) -> None:
        """Write both outputs to hidden temporaries (``report``: ``seconds``, ``read``, ``resume``)."""
        self.result, files = stage_outputs(self.options, tok, tallies, threads=self.threads, **report)
        self.files.extend(files)

    def __enter__(self) -> "StagedOutputs":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                commit_outputs(self.files)
        except BaseException:
            drop_staged(self.files)
            raise
        if exc_type is not None:
            drop_staged(self.files)
        return False


def finish_report(options: PrepareOptions, tok: Tokenizer, tallies: dict[Partition, PartitionTally], *,
                  threads: int, seconds: dict[str, float] | None = None, read: ReadReport | None = None,
                  resume: dict | None = None) -> PrepareResult:
    """Save the tokenizer beside the store and write ``report.json`` (staged, then renamed).

    ``read`` (what the corpus reader counted: skipped lines and documents, replaced or dropped
    invalid UTF-8, made ids) goes to ``report["read"]``; ``report["warnings"]`` names partitions
    without complete windows and short documents.
    """
    with StagedOutputs(options, threads=threads) as outputs:
        outputs.stage(tok, tallies, seconds=seconds, read=read, resume=resume)
    return outputs.result


def _report(options: PrepareOptions, tok: Tokenizer, tallies: dict[Partition, PartitionTally], tokenizer_path: Path,
            *, threads: int, seconds: dict[str, float] | None, read: ReadReport | None, resume: dict | None) -> dict:
    report: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "corpus": str(options.corpus),
        "splits": str(options.splits) if options.splits is not None else None,
        "store": str(options.store_path),
        "tokenizer": {"kind": tok.kind, "path": str(tokenizer_path), "hash": tok.hash, "vocab_size": tok.vocab_size,
                      "bos_id": tok.bos_id, "eos_id": tok.eos_id, "notes": list(tok.notes)},
        "context_length": options.context_length,
        "stride": options.stride,
        "threads": threads,
        "partitions": {p.value: vars(tallies[p]).copy() for p in PARTITIONS},
        "read": read.to_dict() if read is not None else None,
        "warnings": window_warnings(tallies, options.context_length),
        "seconds": {k: round(v, 3) for k, v in (seconds or {}).items()},
    }
    if resume is not None:
        report["resume"] = resume
    return report


def fit_from_table(options: PrepareOptions, trainer: Trainer, table) -> Tokenizer:
    """Step 2 of both executors: the tokenizer from the folded type table."""
    if not len(table):
        raise CorpusError(f"{options.corpus}: the train partition holds no text; nothing to fit the tokenizer on "
                          "(every document is in validation or test, or empty)")
    with Progress(f"fitting {options.tokenizer}", unit="types", quiet=options.quiet) as bar:
        tok = trainer.train_from_counts(table.types(), table.counts())
        bar.update(len(table))
    return tok


# -- the job -----------------------------------------------------------------------------------


def iter_corpus_batches(path: str | os.PathLike, *, on_invalid_utf8: str = "error", skip_bad_lines: bool = False,
                        batch_documents: int | None = None, report: ReadReport | None = None,
                        text_column: str = TEXT_COLUMN, id_column: str | None = None,
                        ) -> Iterator[list[Document]]:
    """Documents of a JSONL file, a Parquet file or dataset, or a folder, a batch at a time, in order.

    ``open_corpus`` (the dispatch and checks of ``Corpus.from_path``) with the pipeline's batch
    bounds: at most ``batch_documents`` documents and ``READ_BATCH_CHARS`` characters a batch.
    """
    yield from open_corpus(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                           batch_documents=batch_documents or READ_BATCH_DOCUMENTS, batch_chars=READ_BATCH_CHARS,
                           report=report, text_column=text_column, id_column=id_column)


def prepare(corpus_path: str | os.PathLike | None = None, splits_path: str | os.PathLike | None = None,
            out_dir: str | os.PathLike = "out", **options: Any) -> PrepareResult:
    """Run the main job and return where everything went plus the report (also in ``report.json``).

    The keywords are ``PrepareOptions``'s fields (``tokenizer``, ``merges``, ``vocab_size``,
    ``pattern``, ``tie_break``, ``context_length``, ``stride``, ``train_fraction``, ``hash_split``,
    ``on_invalid_utf8``, ``skip_bad_lines``, ``threads``, ``resume``, ``quiet``, ``executor``,
    ``ray_address``). BPE kinds train 200 merges when given neither ``merges`` nor ``vocab_size``.
    ``resume=True`` continues an interrupted run over the same ``out_dir``: the tokenizer is
    fitted again (deterministic, so the same), the finished files of the interrupted store are
    kept, and only the documents after them are encoded; the store equals a fresh run's, byte for byte.
    """
    return run(PrepareOptions(corpus_path, splits_path, out_dir, **options))


def run(options: PrepareOptions) -> PrepareResult:
    """Run ``options`` on its executor (a continuous text is one document per partition: local).
    ``--out`` is checked first (``check_out_dir``): only engine's own files there are replaced."""
    check_out_dir(options)
    if options.executor == "ray" and not options.continuous:
        from engine.distributed import run_on_ray

        return run_on_ray(options)
    return run_local(options)


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
        return iter_corpus_batches(self.options.corpus, on_invalid_utf8=self.options.on_invalid_utf8,
                                   skip_bad_lines=self.options.skip_bad_lines, text_column=self.options.text_column,
                                   id_column=self.options.id_column, report=self.reads[-1])

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
    if options.fit is not None:
        trainer = options.trainer()
        seen = 0

        def train_texts() -> Iterator[list[str]]:
            nonlocal seen
            with Progress(f"pass 1: reading, counting train for {options.tokenizer}", quiet=options.quiet) as bar:
                for batch in source.batches():
                    texts = [d.text for d in batch if source.assign(d.id) is Partition.TRAIN]
                    seen += len(batch)
                    bar.update(len(batch), sum(len(d.text) for d in batch))
                    stop_point("read")
                    yield texts

        table = count_types(trainer, training_batches(trainer, train_texts()), threads)
        source.checked()  # the manifest first: a wrong manifest is named, not an empty training text
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


def _encode_and_write(tok: Tokenizer, source: _Source, tallies: dict[Partition, PartitionTally],
                      options: PrepareOptions, threads: int, total: int | None, before_commit=None) -> dict | None:
    """Pass 2: chunks of each partition -> encode on ``threads`` threads -> row groups, in order.

    With ``resume``, the first ``writer.resumed[p]`` documents of each partition are already in
    the store: they are counted (characters here, tokens and windows from the kept files) and skipped.
    """
    lock = encode_lock(tok)
    skip = dict.fromkeys(PARTITIONS, 0)

    def chunks() -> Iterator[tuple[Partition, list[Document]]]:
        chunker = Chunker()
        for batch in source.batches():
            for doc in batch:
                part = source.assign(doc.id)
                if part is None:
                    continue  # forgotten by the manifest: named by ``source.checked``
                if skip[part]:
                    skip[part] -= 1
                    tallies[part].add({"documents": 1, "characters": len(doc.text)})
                    continue
                chunk = chunker.add(part, doc, len(doc.text))
                if chunk is not None:
                    yield part, chunk
        yield from chunker.rest()

    def encode(item: tuple[Partition, list[Document]]):
        return encode_only(item) + ([source_digest(d.id, d.text) for d in item[1]],)

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
        tally = chunk_tally(offsets, sum(len(t) for t in texts), options)
        return part, ids, values, offsets, tally, sum(utf8_length(t) for t in texts) - streamed[0]

    resume = None
    with open_store_writer(options.store_path, tok, resume=options.resume) as writer:
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
                    f"{len(writer.resumed_sources(p)):,} files ({writer.resumed[p]:,} documents) of {p.value}"
                    for p in PARTITIONS)
            if (why is not None or any(writer.resumed.values())) and not options.quiet:
                print(message, file=sys.stderr, flush=True)
        with Progress(f"pass 2: encoding on {threads} threads", total=total, quiet=options.quiet) as bar:
            bars.append(bar)
            for part in PARTITIONS:
                lengths = writer.resumed_lengths(part)
                if lengths.size:
                    skip[part] = int(lengths.size)
                    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
                    np.cumsum(lengths, out=offsets[1:])
                    tallies[part].add({"tokens": int(offsets[-1]),
                                       **window_counts(offsets, options.context_length, options.stride)})
                    bar.update(int(lengths.size))
            for part, ids, values, offsets, tally, nbytes, sources in OrderedPool(encode, threads).map(chunks()):
                writer.write_chunk(part, ids, values, offsets, sources=sources)
                tallies[part].add(tally)
                count_bytes(len(ids), nbytes)
                stop_point("chunk")
            source.checked()  # a tokenizer file: one pass, so the manifest is checked before the commit
        if before_commit is not None:
            before_commit(resume)
    return resume
