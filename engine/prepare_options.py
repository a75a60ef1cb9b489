"""``PrepareOptions``: one ``prepare`` run, checked once, on construction, before anything is read.

The CLI, ``prepare(**keywords)``, the local executor (``engine.local``) and the Ray executor
(``engine.distributed``) all take it. ``PrepareLimits`` holds the sizes the run cuts its work
into (read batches, long lines left in their files, encode chunks and spans, the store's row groups
and files): they bound memory and fix the store's layout, never what it holds, and a test passes
small ones to exercise the boundaries.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.checks import positive_int
from engine.corpus import PARTITIONS, CorpusPartitions, SplitManifest, check_columns_apply, is_continuous_text
from engine.corpus.limits import LONG_LINE_BYTES, LONG_STRING_BYTES, PART_BYTES, SCAN_BLOCK_BYTES, ReadLimits
from engine.corpus.readers import CORPUS_FORMS, INVALID_UTF8_POLICIES, TEXT_COLUMN
from engine.corpus.shards import corpus_shards, is_glob
from engine.corpus.splits import parse_ratios
from engine.errors import ConfigurationError, CorpusError
from engine.parallel import resolve_threads
from engine.store_files import STORE_NAME
from engine.tokenizers.base import FitOptions, Tokenizer, Trainer, fittable_kinds, trainer_for
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS
from engine.tokenizers.loading import load_tokenizer

__all__ = [
    "PrepareOptions", "PrepareLimits", "EXECUTORS", "PREPARE_PARAMETERS", "default_corpus_paths",
    "hash_split_ratios", "check_option_names",
]

EXECUTORS = ("local", "ray")
# The unknown token of kinds that have one: prepare never stops on an unseen word.
UNKNOWN_TOKEN = "<unk>"

# Context length T when none is given: 64, and 32 for the bundled corpus, whose held-out documents
# hold 39 to 74 tokens (with the default bpe), so that every partition of the demo gives windows.
DEFAULT_CONTEXT_LENGTH = 64
BUNDLED_CONTEXT_LENGTH = 32
# ``prepare()``'s own parameters; its other keywords are PrepareOptions's fields after these.
PREPARE_PARAMETERS = ("corpus_path", "splits_path", "out_dir")


@dataclass(frozen=True)
class PrepareLimits:
    """The sizes a ``prepare`` run cuts its work into, each a positive int (checked on construction).

    ``read_batch_documents`` / ``read_batch_chars``: a read batch closes at either; ``encode_chunk_documents``
    / ``encode_chunk_chars``: an encode chunk closes at either (kernels hold ~40 bytes of scratch per
    character, so 1M characters keep one running chunk near 40 MB whatever the corpus size);
    ``store_row_group_rows`` / ``store_file_rows``: the store's row groups and files hold fixed row
    counts, so its bytes depend on the documents only (not on chunking or threads) and a resumed run
    keeps an interrupted run's finished files (resume with the limits the run began with);
    ``long_line_bytes`` / ``long_string_bytes`` / ``long_part_bytes`` / ``long_scan_block_bytes``: a
    JSONL line (or a file of a folder) longer than ``long_line_bytes`` keeps its text in the file and
    becomes a store file of its own (``ReadLimits``, ``engine.corpus.long_lines``: strings longer than
    ``long_string_bytes`` are left out of its scanned skeleton, its text is decoded
    ``long_part_bytes`` at a time, the scan reads ``long_scan_block_bytes`` at a time);
    ``stream_chars``: a document longer than this many characters is encoded (and counted for the
    fit) span by span (``engine.tokenizers.streaming``; ~40 bytes of scratch per character);
    ``piece_chars``: the longest span encoded: a stretch of a document this long in which no piece ends
    for certain (one unbroken piece) is cut there (the one limit that can change ids, of such a stretch
    only: a resumed run with another value starts afresh, saying why).
    """

    read_batch_documents: int = 1024
    read_batch_chars: int = 1 << 20
    encode_chunk_documents: int = 2048
    encode_chunk_chars: int = 1 << 20
    store_row_group_rows: int = 1024
    store_file_rows: int = 1 << 17
    long_line_bytes: int = LONG_LINE_BYTES
    long_string_bytes: int = LONG_STRING_BYTES
    long_part_bytes: int = PART_BYTES
    long_scan_block_bytes: int = SCAN_BLOCK_BYTES
    stream_chars: int = STREAM_CHARS
    piece_chars: int = PIECE_CHARS

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            object.__setattr__(self, item.name, positive_int(getattr(self, item.name), f"limits.{item.name}"))

    @property
    def read_limits(self) -> ReadLimits:
        """The corpus readers' ``ReadLimits`` of this run (the long-line sizes; the default id buffer)."""
        return ReadLimits(long_line_bytes=self.long_line_bytes, long_string_bytes=self.long_string_bytes,
                          part_bytes=self.long_part_bytes, scan_block_bytes=self.long_scan_block_bytes)


def default_corpus_paths() -> tuple[Path, Path]:
    """The bundled corpus and manifest: ``data/`` of the checkout, else ``./data``."""
    here = Path(__file__).resolve().parent.parent / "data"
    base = here if (here / "corpus.jsonl").exists() else Path("data")
    return base / "corpus.jsonl", base / "splits.json"


def _is_hf_json(path: Path) -> bool:
    """True for a Hugging Face tokenizer.json or a tekken.json: files whose special tokens any may wrap."""
    from engine.checks import parse_json
    from engine.tokenizers.hf_pipeline import is_hf_file

    try:
        obj = parse_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):  # JSONLimitError is a ValueError
        return False
    return is_hf_file(obj)


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
    parameters = list(PREPARE_PARAMETERS)
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
    None: the kind's default; ``pattern`` also names a tiktoken file's pre-tokenizer). ``fit_sample``:
    fit on at most this many UTF-8 bytes of the train partition (an int, or ``"64MB"``, ``"1GiB"``; stored
    as the int; the fit sample rule of ``engine.corpus.fit_sample``; ``report["fit_sample"]`` says what
    the sample held); None: the whole train partition. ``max_types``: fit on that many of the most
    frequent types (word, byte-bpe; the type cap rule of ``engine.tokenizers.type_table``;
    ``report["max_types"]`` says how many were dropped).
    ``text_column``/``id_column`` name the columns of a JSONL or Parquet/Arrow corpus (dotted for a
    nested field; without an id column, ids are made from file and row; ``report["read"]`` says so).
    ``corpus_format`` (jsonl, parquet, arrow, folder) overrides the format guessed from the corpus
    path (``engine.corpus.shards``; None: guess). ``threads``
    None: ``$ENGINE_THREADS`` or all cores (Ray: the cluster's CPUs). ``executor``: ``local`` or
    ``ray`` (``ray_address`` to join a cluster). ``resume`` keeps an interrupted local run's files.
    ``hash_split``: a mapping, three numbers (train, validation, test) or ``"R,R,R"``; stored as the
    mapping (``hash_split_ratios``). ``limits``: the sizes the run cuts its work into (``PrepareLimits``).
    ``format``: ``text``, ``messages`` or ``prompt-completion`` (None: detected from the first
    record's fields, ``engine.chat.records``), with ``messages_column`` / ``prompt_column`` /
    ``completion_column``; chat data takes a tokenizer file or a model folder (``tokenizer`` =
    DIR holding tokenizer.json and tokenizer_config.json), ``chat_template`` (a .jinja file or a
    tokenizer_config.json; default the folder's), ``train_on`` (assistant, last-assistant, all) and
    ``bos`` / ``eos`` (token strings, ``bos="none"``: no BOS; default what tokenizer_config.json says).
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
    fit_sample: int | str | None = None
    max_types: int | None = None
    context_length: int | None = None
    stride: int = 1
    train_fraction: float = 0.9
    hash_split: Mapping[str, float] | Sequence[float] | str | None = None
    on_invalid_utf8: str = "error"
    skip_bad_lines: bool = False
    text_column: str = TEXT_COLUMN
    id_column: str | None = None
    corpus_format: str | None = None
    threads: int | None = None
    resume: bool = False
    quiet: bool = False
    executor: str = "local"
    ray_address: str | None = None
    limits: PrepareLimits = PrepareLimits()
    format: str | None = None
    messages_column: str = "messages"
    prompt_column: str = "prompt"
    completion_column: str = "completion"
    chat_template: str | None = None
    train_on: str = "assistant"
    bos: str | None = None
    eos: str | None = None
    continuous: bool = field(init=False, default=False)
    fit: FitOptions | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.limits, PrepareLimits):
            raise ConfigurationError(f"limits is {type(self.limits).__name__}; expected a PrepareLimits")
        from engine.windows import CausalWindowConfig  # Numba loads on first use, not with the CLI

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
        fit = FitOptions(self.merges, self.vocab_size, self.pattern, self.tie_break, UNKNOWN_TOKEN, self.fit_sample,
                         self.max_types)
        self._set("fit_sample", fit.fit_sample)
        if self.tokenizer in fittable_kinds():
            self._set("fit", fit)
            trainer_for(self.tokenizer, fit)  # the kind's own checks (e.g. a vocabulary too small), now
        elif not Path(self.tokenizer).exists():
            raise ConfigurationError(f"--tokenizer {self.tokenizer!r}: expected one of "
                                     f"{', '.join(fittable_kinds())} or an existing tokenizer file")
        else:
            for option in ("vocab_size", "tie_break", "fit_sample", "max_types"):
                if getattr(fit, option) is not None:
                    raise ConfigurationError(f"--{option.replace('_', '-')} applies when prepare fits a tokenizer "
                                             f"(--tokenizer {', '.join(fittable_kinds())}), not to a tokenizer file")
        self._resolve_corpus()
        self._resolve_format()

    def _resolve_format(self) -> None:
        from engine.chat.encode import TRAIN_ON
        from engine.chat.records import FORMATS, detect_format

        if self.format is not None and self.format not in FORMATS:
            raise ConfigurationError(f"--format {self.format!r} is unknown (expected one of: {', '.join(FORMATS)})")
        if self.train_on not in TRAIN_ON:
            raise ConfigurationError(f"--train-on {self.train_on!r} is unknown (expected one of: {', '.join(TRAIN_ON)})")
        fmt = self.format
        if fmt is None:
            fmt = "text" if self.continuous else detect_format(
                self.corpus, messages_column=self.messages_column, prompt_column=self.prompt_column,
                completion_column=self.completion_column, limits=self.limits.read_limits)
            self._set("format", fmt)
        if fmt == "text":
            if (self.bos is not None or self.eos is not None) and self.fit is not None:
                raise ConfigurationError("--bos and --eos apply to a tokenizer file (--tokenizer FILE or DIR); a "
                                         "fitted tokenizer wraps documents with its own <bos>/<eos>")
            if self.chat_template is not None or self.train_on != "assistant":
                raise ConfigurationError("--chat-template and --train-on apply to chat data (--format messages or "
                                         "prompt-completion)")
            return
        if self.continuous:
            raise ConfigurationError(f"{self.corpus}: a continuous text holds no {fmt} records")
        if self.skip_bad_lines or self.on_invalid_utf8 != "error" or self.text_column != TEXT_COLUMN:
            raise ConfigurationError(f"--skip-bad-lines, --on-invalid-utf8 and --text-column apply to --format text; "
                                     f"--format {fmt} stops at the first bad record, naming it")
        if self.fit is not None:
            raise ConfigurationError(f"--format {fmt}: chat data is encoded with a model's tokenizer; pass --tokenizer "
                                     "DIR (a folder with tokenizer.json and tokenizer_config.json) or FILE")
        if self.executor != "local" or self.resume:
            raise ConfigurationError(f"--format {fmt} runs on --executor local, without --resume")
        if self.chat_template is not None and not Path(self.chat_template).exists():
            raise ConfigurationError(f"--chat-template {self.chat_template}: file not found (expected FILE.jinja "
                                     "or tokenizer_config.json)")

    @property
    def tokenizer_file(self) -> Path:
        """The tokenizer file (``tokenizer.json`` of a model folder)."""
        path = Path(self.tokenizer)
        return path / "tokenizer.json" if path.is_dir() else path

    @property
    def tokenizer_config(self) -> Path | None:
        """The model folder's (or the tokenizer file's sibling) tokenizer_config.json, if there is one."""
        config = self.tokenizer_file.with_name("tokenizer_config.json")
        return config if config.is_file() else None

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
        if not corpus.exists() and not is_glob(corpus):
            raise CorpusError(f"{corpus}: corpus not found (expected {CORPUS_FORMS})")
        check_columns_apply(corpus, self.text_column, self.id_column, self.corpus_format)
        continuous = self.corpus_format is None and is_continuous_text(corpus)
        self._set("continuous", continuous)
        if not continuous:
            corpus_shards(corpus, self.corpus_format, exclude=self.excluded_paths)  # a mix of kinds fails now
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

    @property
    def excluded_paths(self) -> tuple[Path, ...]:
        """What a folder corpus leaves out: the run's ``--out`` and its ``--splits`` manifest."""
        return (self.out_dir,) + ((self.splits,) if self.splits is not None else ())

    @property
    def store_path(self) -> Path:
        return self.out_dir / STORE_NAME

    def manifest(self) -> SplitManifest:
        """The split of a multi-document corpus (read from ``splits``, or the hash rule)."""
        return SplitManifest.from_json(self.splits) if self.splits is not None else SplitManifest.by_hash(self.hash_split)

    def trainer(self) -> Trainer:
        """The fit's ``Trainer`` (only when ``fit`` is set)."""
        return trainer_for(self.tokenizer, self.fit)

    def wrapper_names(self) -> tuple[str | None, str | None]:
        """The special tokens that wrap each document, by name, before any tokenizer is read: ``bos`` /
        ``eos`` as given, else what the tokenizer_config.json beside the tokenizer names (its
        ``bos_token: null`` or ``add_bos_token: false`` is no BOS), else ``""`` (the tokenizer's own).
        BOS None: ``--bos none``."""
        config = None
        if self.tokenizer_config is not None:
            from engine.chat.template import read_tokenizer_config

            config = read_tokenizer_config(self.tokenizer_config)
        names = []
        for name, given in (("bos", self.bos), ("eos", self.eos)):
            if given is None and name == "bos" and config is not None and config.get("add_bos_token") is False:
                given = "none"
            elif given is None and config is not None and f"{name}_token" in config:
                value = config[f"{name}_token"]
                given = value.get("content") if isinstance(value, dict) else value
                given = "none" if given is None else given
            names.append("" if given is None else given)
        if names[1] == "none":
            raise ConfigurationError("--eos none: every document ends with an EOS token; name one (e.g. --eos "
                                     "'<|endoftext|>') or leave --eos out for the tokenizer's own")
        return (None if names[0] == "none" else names[0]), names[1]

    @property
    def without_bos(self) -> bool:
        """True when documents are ``[content..., EOS]`` by the options (``--bos none``, or a
        tokenizer_config.json with ``bos_token: null`` or ``add_bos_token: false``); a tokenizer without
        BOS (``bos_id`` None) gives them so itself."""
        return self.fit is None and self.wrapper_names()[0] is None

    def load_tokenizer(self) -> Tokenizer:
        """The tokenizer file's tokenizer (only when ``fit`` is None), wrapping documents with the
        tokens ``wrapper_names`` names (a Hugging Face tokenizer.json takes any of its special tokens;
        other files keep their own)."""
        from engine.tokenizers.hf_pipeline import load_hf_file

        source = Path(self.tokenizer) if Path(self.tokenizer).is_dir() else self.tokenizer_file  # a folder: its config too
        tok = load_tokenizer(source, pattern=self.pattern)
        bos, eos = self.wrapper_names()
        bos = bos or ""
        if not bos and not eos:
            return self._with_eos(tok)
        wanted_bos, wanted_eos = bos or tok.bos, eos or tok.eos
        if (wanted_bos, wanted_eos) == (tok.bos, tok.eos):
            return self._with_eos(tok)
        if not _is_hf_json(self.tokenizer_file):
            raise ConfigurationError(f"--bos/--eos {wanted_bos!r}/{wanted_eos!r}: {self.tokenizer_file} fixes its "
                                     f"wrappers ({tok.bos!r}/{tok.eos!r}); only a Hugging Face tokenizer.json or a "
                                     "tekken.json takes others (--bos none works with any file)")
        notes = tok.notes
        tok = load_hf_file(source, bos=wanted_bos, eos=wanted_eos)
        tok.notes = notes
        return self._with_eos(tok)

    def _with_eos(self, tok: Tokenizer) -> Tokenizer:
        """``tok``, refused when it has no EOS: every stored document ends with one."""
        if tok.eos_id is None:
            hint = ("name one of its special tokens with --eos TOKEN" if _is_hf_json(self.tokenizer_file) else
                    "a SentencePiece model names it as eos_piece / eos_id when it is trained")
            raise ConfigurationError(f"--tokenizer {self.tokenizer}: the tokenizer has no EOS token, and every stored "
                                     f"document ends with one ({hint})")
        return tok
