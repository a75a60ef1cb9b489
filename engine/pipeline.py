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
   each as Parquet row groups in document order, and counts windows and tails (the window rule
   of engine.windows) from each chunk's offsets (``chunk_tally``). The store appears atomically.
   With a tokenizer file there is nothing to fit, so one pass does it all and the manifest is
   checked before the store is committed.

The local executor lives in ``engine.local``, the report and ``--out`` handling in
``engine.outputs``, the Ray executor in ``engine.distributed``.

Peak memory: a few chunks per thread plus the type table and 16 bytes per document (id hashes of
the reader's and the store writer's uniqueness checks; an explicit manifest also holds its ids); never the corpus. A document
longer than a span (``engine.tokenizers.streaming``) is encoded span by span and written as one row;
the text of a JSONL line longer than ``LONG_LINE_BYTES`` stays in its file (``engine.corpus.long_lines``),
its ids go to a file and it becomes a store file of its own, written page by page (``engine.store.long_rows``). One continuous ``.txt`` file is one document per partition and is read whole.
Output is byte-identical for every thread count: chunk boundaries depend on the documents only.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from engine.corpus import (
    PARTITIONS, CorpusPartitions, Document, Partition, ReadReport, SplitManifest, check_columns_apply,
    is_continuous_text, open_corpus,
)
from engine.corpus.readers import CORPUS_FORMS, INVALID_UTF8_POLICIES, TEXT_COLUMN
from engine.corpus.splits import parse_ratios
from engine.errors import ConfigurationError, CorpusError, is_interrupt
from engine.outputs import PrepareResult, StagedOutputs, check_out_dir, finish_report  # re-exported, see __all__
from engine.parallel import resolve_threads
from engine.progress import Progress
from engine.store import TokenStore
from engine.store.layout import STORE_NAME
from engine.tokenizers.base import FitOptions, Tokenizer, Trainer, fittable_kinds, load_tokenizer, trainer_for

__all__ = [
    "prepare", "run", "PrepareOptions", "PrepareResult", "EXECUTORS", "default_corpus_paths", "iter_corpus_batches",
    "window_counts", "chunk_tally", "Chunker", "finish_report", "PartitionTally", "open_store_writer", "StagedOutputs",
    "run_local", "hash_split_ratios", "check_option_names",
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


# Context length T when none is given: 64, and 32 for the bundled corpus, whose held-out documents
# hold 39 to 74 tokens (with the default bpe), so that every partition of the demo gives windows.
DEFAULT_CONTEXT_LENGTH = 64
BUNDLED_CONTEXT_LENGTH = 32


def default_corpus_paths() -> tuple[Path, Path]:
    """The bundled corpus and manifest: ``data/`` of the checkout, else ``./data``."""
    here = Path(__file__).resolve().parent.parent / "data"
    base = here if (here / "corpus.jsonl").exists() else Path("data")
    return base / "corpus.jsonl", base / "splits.json"


# -- options -----------------------------------------------------------------------------------

HASH_SPLIT_FORMS = ('hash_split takes a mapping {"train": r, "validation": r, "test": r}, a sequence of three numbers '
                    '(train, validation, test) or a string "R,R,R" like "0.8,0.1,0.1" (--hash-split R,R,R)')
# Names people reach for that ``prepare()`` spells otherwise (its parameters, the CLI's flags).
OPTION_ALIASES = {"splits": "splits_path", "out": "out_dir", "corpus": "corpus_path", "context": "context_length"}


def hash_split_ratios(value: Any) -> dict:
    """``hash_split`` in any accepted form -> the ratio mapping ``SplitManifest.by_hash`` takes.

    A mapping (kept as given: missing partitions are 0), a sequence of three numbers (train,
    validation, test) or the CLI's ``"R,R,R"`` string (parsed by the ``--hash-split`` parser).
    The ratios themselves are checked by ``SplitManifest.by_hash`` only; every error is a
    ``ConfigurationError`` that names the accepted forms.
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()  # numbers as Python floats; a 0-d array becomes a number (refused below)
    if isinstance(value, str):
        try:
            ratios = parse_ratios(value)
        except ConfigurationError as exc:
            raise ConfigurationError(f"hash_split={value!r}: not three comma-separated numbers; "
                                     f"{HASH_SPLIT_FORMS}") from exc
    elif isinstance(value, Mapping):
        ratios = dict(value)
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        if len(value) != 3:
            raise ConfigurationError(f"hash_split={value!r}: {len(value)} value(s), expected 3; {HASH_SPLIT_FORMS}")
        ratios = dict(zip((p.value for p in PARTITIONS), value))
    else:
        raise ConfigurationError(f"hash_split={value!r} ({type(value).__name__}): not one of the accepted forms; "
                                 f"{HASH_SPLIT_FORMS}")
    try:
        SplitManifest.by_hash(ratios)  # the ratio checks: non-negative, finite, summing to 1
    except ConfigurationError as exc:
        raise ConfigurationError(f"hash_split / --hash-split: {exc}; {HASH_SPLIT_FORMS}") from None
    return ratios


def check_option_names(options: Mapping[str, Any]) -> None:
    """ConfigurationError for a keyword ``prepare()`` does not take, with the names it may have meant.

    The names are ``prepare``'s own parameters plus the ``PrepareOptions`` fields after the ones
    those parameters fill (``corpus_path`` -> ``corpus``, ...); ``OPTION_ALIASES`` adds explicit hints.
    """
    parameters = [name for name, p in inspect.signature(prepare).parameters.items() if p.kind != p.VAR_KEYWORD]
    fields = [f.name for f in dataclasses.fields(PrepareOptions) if f.init]
    keywords = fields[len(parameters):]  # the fields prepare() passes on as **options
    valid = parameters + keywords
    problems = []
    for name in options:
        if name in keywords:
            continue
        alias = OPTION_ALIASES.get(name)
        close = [alias] if alias in valid else difflib.get_close_matches(name, valid, n=3)
        if close:
            quoted = [repr(c) for c in close]
            hint = f"did you mean {quoted[0] if len(quoted) == 1 else ', '.join(quoted[:-1]) + ' or ' + quoted[-1]}?"
        else:
            hint = f"expected one of: {', '.join(valid)}"
        problems.append(f"unknown option {name!r} ({hint})")
    if problems:
        raise ConfigurationError("; ".join(problems))


@dataclass(frozen=True)
class PrepareOptions:
    """One ``prepare`` run, checked on construction (messages use the CLI's spellings; those about
    the split name ``prepare()``'s keywords too).

    ``corpus`` None: the bundled ``data/corpus.jsonl`` with ``data/splits.json``. ``context_length``
    None: ``DEFAULT_CONTEXT_LENGTH`` (64), or ``BUNDLED_CONTEXT_LENGTH`` (32) for the bundled corpus. ``tokenizer``: a
    kind ``prepare`` fits (``fittable_kinds()``: char, word, bpe, byte-bpe) or a tokenizer file.
    ``merges``, ``vocab_size``, ``pattern``, ``tie_break``: what the fit reads (``FitOptions``;
    None: the kind's default; ``pattern`` also names a tiktoken file's pre-tokenizer).
    ``text_column``/``id_column`` name the columns of a JSONL or Parquet/Arrow corpus (without an
    id column, ids are made from file and row; ``report["read"]`` says so). ``threads``
    None: ``$ENGINE_THREADS`` or all cores (Ray: the cluster's CPUs). ``executor``: ``local`` or
    ``ray`` (``ray_address`` to join a cluster). ``resume`` keeps an interrupted local run's files.
    ``hash_split``: a mapping, three numbers (train, validation, test) or ``"R,R,R"``; stored as the
    mapping (``hash_split_ratios``).
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
    context_length: int | None = None
    stride: int = 1
    train_fraction: float = 0.9
    hash_split: Mapping[str, float] | Sequence[float] | str | None = None
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

        if self.context_length is None:
            self._set("context_length", BUNDLED_CONTEXT_LENGTH if self.corpus is None else DEFAULT_CONTEXT_LENGTH)
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
            raise CorpusError(f"{corpus}: corpus not found (expected {CORPUS_FORMS})")
        check_columns_apply(corpus, self.text_column, self.id_column)
        continuous = is_continuous_text(corpus)
        self._set("continuous", continuous)
        if continuous:
            if splits is not None or self.hash_split is not None:
                raise ConfigurationError(
                    f"{corpus}: a continuous text is split by position (--train-fraction / train_fraction); "
                    "--splits / splits_path and --hash-split / hash_split apply to multi-document corpora only")
            CorpusPartitions.from_text("", self.train_fraction)  # checks the fraction
            return
        if splits is not None and self.hash_split is not None:
            raise ConfigurationError("pass either --splits FILE / splits_path=FILE or --hash-split R,R,R / "
                                     "hash_split=RATIOS, not both")
        if splits is None and self.hash_split is None:
            raise ConfigurationError(
                f"{corpus}: a multi-document corpus needs a split: pass --splits FILE / splits_path=FILE (a manifest "
                '{"train": [...], "validation": [...], "test": [...]}) or --hash-split 0.8,0.1,0.1 / '
                "hash_split=(0.8, 0.1, 0.1)")
        if self.hash_split is not None:
            self._set("hash_split", hash_split_ratios(self.hash_split))  # checks the form and the ratios
        if self.executor == "ray" and (self.on_invalid_utf8 != "error" or self.skip_bad_lines):
            raise ConfigurationError("--on-invalid-utf8 and --skip-bad-lines apply to --executor local only")
        if self.executor == "ray" and (self.text_column != TEXT_COLUMN or self.id_column is not None):
            raise ConfigurationError("--text-column and --id-column apply to --executor local only")

    @property
    def store_path(self) -> Path:
        return self.out_dir / STORE_NAME

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


class PartitionTally:
    """What the report says about one partition (``KEYS``, each an int), summed chunk by chunk."""

    KEYS = ("documents", "characters", "tokens", "windows", "incomplete_tails", "tail_tokens", "short_documents")

    def __init__(self) -> None:
        self.__dict__.update(dict.fromkeys(self.KEYS, 0))

    def __repr__(self) -> str:
        return f"PartitionTally({', '.join(f'{k}={v}' for k, v in vars(self).items())})"

    def add(self, other: dict[str, int]) -> None:
        for key, value in other.items():
            setattr(self, key, getattr(self, key) + value)


def open_store_writer(path: Path, tok: Tokenizer, *, resume: bool = False, check_unique: bool = True):
    """The store writer both executors use: fixed row-group and file sizes (``check_unique=False``
    where the corpus readers already checked every id)."""
    return TokenStore.writer(path, tok, row_group_size=STORE_ROW_GROUP_ROWS, max_rows_per_file=STORE_FILE_ROWS,
                             resume=resume, check_unique=check_unique)


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
                        text_column: str = TEXT_COLUMN, id_column: str | None = None, long_lines: bool = False,
                        exclude: Iterable[str | os.PathLike] = ()) -> Iterator[list[Document]]:
    """Documents of a JSONL file, a Parquet file or dataset, or a folder, a batch at a time, in order.

    ``open_corpus`` (the dispatch and checks of ``Corpus.from_path``) with the pipeline's batch
    bounds: at most ``batch_documents`` documents and ``READ_BATCH_CHARS`` characters a batch.
    ``exclude``: paths a folder corpus leaves out (the run's ``--out``).
    """
    yield from open_corpus(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                           batch_documents=batch_documents or READ_BATCH_DOCUMENTS, batch_chars=READ_BATCH_CHARS,
                           report=report, text_column=text_column, id_column=id_column, long_lines=long_lines,
                           exclude=exclude)


def prepare(corpus_path: str | os.PathLike | None = None, splits_path: str | os.PathLike | None = None,
            out_dir: str | os.PathLike = "out", **options: Any) -> PrepareResult:
    """Run the main job and return where everything went plus the report (also in ``report.json``).

    The keywords are ``PrepareOptions``'s fields (``tokenizer``, ``merges``, ``vocab_size``,
    ``pattern``, ``tie_break``, ``context_length``, ``stride``, ``train_fraction``, ``hash_split``,
    ``on_invalid_utf8``, ``skip_bad_lines``, ``threads``, ``resume``, ``quiet``, ``executor``,
    ``ray_address``); any other name is a ConfigurationError naming the option it may mean
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
    """Run ``options`` on its executor (a continuous text is one document per partition: local).
    ``--out`` is checked first (``check_out_dir``): only engine's own files there are replaced.
    An interrupt is a ``KeyboardInterrupt``, also one that arrives during a kernel (``is_interrupt``)."""
    check_out_dir(options)
    try:
        if options.executor == "ray" and not options.continuous:
            from engine.distributed import run_on_ray

            return run_on_ray(options)
        return run_local(options)
    except SystemError as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from exc
        raise


def run_local(options: PrepareOptions) -> PrepareResult:
    """The local executor (``engine.local.run_local``): two streaming passes on threads."""
    from engine.local import run_local as local

    return local(options)
