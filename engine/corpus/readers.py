"""Documents, partitions, corpus readers and split manifests (SPEC §2).

Readers are streaming generators (``iter_jsonl``, ``iter_parquet``, ``iter_parquet_batches``,
``iter_folder``) that hold one line, one record batch or one file at a time; ``Corpus`` collects
them into an ordered, id-indexed sequence. Every reader checks ids (present, non-empty, unique) and
UTF-8 as it goes and raises ``CorpusError`` with the file, the 1-based line (JSONL) or row
(Parquet), and for bad UTF-8 the absolute byte offset of the first bad byte in the file. Cost:
one pass over the input, plus one dict entry per id for the duplicate check.

Splits: ``SplitManifest`` names every document's partition (from JSON, or by hashing ids);
``manifest.partition(corpus)`` checks it names every document exactly once and gives
``CorpusPartitions``. One continuous text is split by position (``CorpusPartitions.from_text``).
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator, Sequence, overload

from engine.errors import ConfigurationError, CorpusError

__all__ = [
    "Partition",
    "Document",
    "Corpus",
    "ReadReport",
    "iter_jsonl",
    "iter_parquet",
    "iter_parquet_batches",
    "iter_folder",
    "read_text_file",
    "SplitManifest",
    "CorpusPartitions",
    "hash_partition",
    "hash_unit",
    "as_partition",
    "PARTITIONS",
]

INVALID_UTF8_POLICIES = ("error", "replace", "skip")
_SURROGATE = re.compile("[\ud800-\udfff]")
PARQUET_BATCH_SIZE = 8192


class Partition(str, enum.Enum):
    """The three partitions; every document belongs to exactly one."""

    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Document:
    """One source text with a stable, non-empty, unique id."""

    id: str
    text: str


@dataclass(slots=True)
class ReadReport:
    """What a reader passed over: documents kept, lines skipped as malformed, bad UTF-8 handled."""

    source: str = ""
    documents: int = 0
    blank_lines: int = 0
    skipped_bad_lines: int = 0
    skipped_invalid_utf8: int = 0
    replaced_invalid_utf8: int = 0
    first_problems: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        """Keep the first few skip/replace messages so a CLI can show where they were."""
        if len(self.first_problems) < 5:
            self.first_problems.append(message)


def _check_policy(on_invalid_utf8: str) -> None:
    if on_invalid_utf8 not in INVALID_UTF8_POLICIES:
        raise CorpusError(
            f"on_invalid_utf8={on_invalid_utf8!r} is not a policy (expected one of: {', '.join(INVALID_UTF8_POLICIES)})"
        )


def _apply_policy(policy: str, message: str, report: ReadReport, replaced):
    """The invalid-UTF-8 policy for one document: raise (error), None (skip), or ``replaced()``."""
    if policy == "error":
        raise CorpusError(message) from None  # called inside the decode error's handler
    report.note(message)
    if policy == "skip":
        report.skipped_invalid_utf8 += 1
        return None
    report.replaced_invalid_utf8 += 1
    return replaced()


def _decode(raw: bytes, *, where: str, base_offset: int, policy: str, report: ReadReport) -> str | None:
    """UTF-8 text of ``raw``; None when the policy skips it. ``base_offset`` makes offsets absolute."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = base_offset + exc.start
        message = (
            f"{where}: invalid UTF-8 at byte offset {offset} (byte 0x{raw[exc.start]:02x}); "
            f"expected UTF-8 text (on_invalid_utf8='replace' or 'skip' accepts it)"
        )
        return _apply_policy(policy, message, report, lambda: raw.decode("utf-8", errors="replace"))


class _IdRegistry:
    """Remembers where each id was first seen, to name both places of a duplicate."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def add(self, doc_id: str, where: str, what: str) -> None:
        first = self._seen.get(doc_id)
        if first is not None:
            raise CorpusError(f"{where}: duplicate id {doc_id!r} at {what} (first seen at {first}); ids must be unique")
        self._seen[doc_id] = what


def iter_jsonl(
    path: str | os.PathLike,
    *,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    report: ReadReport | None = None,
) -> Iterator[Document]:
    """Stream ``{"id": str, "text": str}`` objects, one per line, as Documents.

    Blank lines are skipped. Malformed lines (bad JSON, not an object, missing or non-string or
    empty ``id``/``text``) raise ``CorpusError`` naming ``file:line``, or with ``skip_bad_lines``
    are skipped and counted in ``report``. Duplicate ids always raise (both line numbers).
    Invalid UTF-8 follows ``on_invalid_utf8``: "error" (file, line, absolute byte offset),
    "replace" (U+FFFD), or "skip" (drop the line, count it). NUL characters are ordinary text.
    """
    _check_policy(on_invalid_utf8)
    path = Path(path)
    report = report if report is not None else ReadReport()
    report.source = str(path)
    ids = _IdRegistry()
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read corpus file: {exc.strerror}") from None
    with fh:
        offset = 0
        for lineno, raw in enumerate(fh, start=1):
            line_start, offset = offset, offset + len(raw)
            if not raw.strip():
                report.blank_lines += 1
                continue
            where = f"{path}:{lineno}"
            line = _decode(raw, where=where, base_offset=line_start, policy=on_invalid_utf8, report=report)
            if line is None:
                continue
            try:
                doc_id, text = _parse_jsonl_line(line.rstrip("\r\n"), where)
                text = _fix_surrogates(text, where=where, doc_id=doc_id, policy=on_invalid_utf8, report=report)
            except CorpusError as exc:
                if not skip_bad_lines:
                    raise
                report.skipped_bad_lines += 1
                report.note(str(exc))
                continue
            if text is None:
                continue
            ids.add(doc_id, str(path), f"line {lineno}")
            report.documents += 1
            yield Document(doc_id, text)


def _no_repeated_keys(pairs: list[tuple[str, object]]) -> dict:
    """``object_pairs_hook``: a repeated key makes a line ambiguous (which "text" is meant?)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _RepeatedKey(key)
    return obj


class _RepeatedKey(ValueError):
    pass


def _parse_jsonl_line(line: str, where: str) -> tuple[str, str]:
    # strict=False lets raw control characters (NUL, tab) stand inside strings: they are ordinary text.
    try:
        obj = json.loads(line, strict=False, object_pairs_hook=_no_repeated_keys)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{where}: malformed JSON ({exc.msg} at column {exc.colno}); expected one object per line") from None
    except _RepeatedKey as exc:
        raise CorpusError(f'{where}: key "{exc.args[0]}" appears twice in one object; expected each key once') from None
    except RecursionError:
        raise CorpusError(f"{where}: JSON nested too deeply; expected one flat object per line") from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise CorpusError(f"{where}: malformed JSON ({exc}); expected one object per line") from None
    if not isinstance(obj, dict):
        raise CorpusError(f'{where}: expected a JSON object {{"id": ..., "text": ...}}, got {type(obj).__name__}')
    for key in ("id", "text"):
        if key not in obj:
            raise CorpusError(f'{where}: missing "{key}" (expected {{"id": str, "text": str}})')
        if not isinstance(obj[key], str):
            raise CorpusError(f'{where}: "{key}" must be a string, got {type(obj[key]).__name__}')
    if not obj["id"]:
        raise CorpusError(f'{where}: empty "id" (expected a non-empty string)')
    return obj["id"], obj["text"]


def _fix_surrogates(text: str, *, where: str, doc_id: str, policy: str, report: ReadReport) -> str | None:
    """A JSON ``\\ud800`` escape decodes to a lone surrogate, which no UTF-8 text can hold."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError as exc:
        message = (
            f"{where}: document {doc_id!r} holds a lone surrogate U+{ord(text[exc.start]):04X} at character "
            f"offset {exc.start}; expected text that is valid UTF-8"
        )
        return _apply_policy(policy, message, report, lambda: _SURROGATE.sub("\ufffd", text))


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CorpusError(f"{path}: no such Parquet file or directory")
    files = sorted(
        (p for p in path.rglob("*.parquet") if p.is_file() and not _is_hidden(p.relative_to(path))),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    if not files:
        raise CorpusError(f"{path}: directory holds no .parquet files")
    return files


ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")


class _ArrowIpcFile:
    """An Arrow IPC (Feather v2) file, memory-mapped, read like ``pq.ParquetFile`` in record batches."""

    def __init__(self, path: Path):
        import pyarrow as pa

        source = pa.memory_map(str(path))
        try:
            self._reader = pa.ipc.open_file(source)
        except pa.ArrowInvalid:  # the streaming IPC format has no footer
            source.seek(0)
            self._reader = pa.ipc.open_stream(source)
        self.schema_arrow = self._reader.schema

    def iter_batches(self, *, batch_size: int, columns: list[str]):
        if hasattr(self._reader, "num_record_batches"):
            batches = (self._reader.get_batch(i) for i in range(self._reader.num_record_batches))
        else:
            batches = iter(self._reader)
        for batch in batches:
            batch = batch.select(columns)
            for start in range(0, batch.num_rows, batch_size):
                yield batch.slice(start, batch_size)


def iter_parquet_batches(
    path: str | os.PathLike, *, batch_size: int = PARQUET_BATCH_SIZE, report: ReadReport | None = None
) -> Iterator[list[Document]]:
    """Stream a Parquet or Arrow IPC (.arrow/.feather) file, or every ``.parquet`` below a directory
    (sorted), as lists of Documents.

    Columns ``id`` and ``text`` must be strings; nulls, empty ids and duplicate ids raise
    ``CorpusError`` naming the file and the 0-based row inside that file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    report = report if report is not None else ReadReport()
    report.source = str(path)
    ids = _IdRegistry()
    for file in _parquet_files(path):
        try:
            pf = _ArrowIpcFile(file) if file.suffix in ARROW_SUFFIXES else pq.ParquetFile(file)
            schema = pf.schema_arrow
        except (OSError, pa.ArrowException, ValueError) as exc:  # ValueError: footer strings that are not UTF-8
            kind = "Arrow IPC" if file.suffix in ARROW_SUFFIXES else "Parquet"
            raise CorpusError(f"{file}: cannot read {kind} file: {exc}") from None
        for name in ("id", "text"):
            if schema.get_field_index(name) < 0:
                raise CorpusError(f"{file}: missing column {name!r} (found: {', '.join(schema.names)}; expected id, text)")
            if not (pa.types.is_string(schema.field(name).type) or pa.types.is_large_string(schema.field(name).type)):
                raise CorpusError(f"{file}: column {name!r} has type {schema.field(name).type}, expected string")
        row = 0
        for batch in _checked_batches(pf, file, batch_size, lambda: row):  # reads the row reached so far
            docs = []
            for doc_id, text in zip(_strings(batch, 0, file, row), _strings(batch, 1, file, row)):
                where = f"{file}: row {row}"
                if doc_id is None or text is None:
                    raise CorpusError(f"{where}: null {'id' if doc_id is None else 'text'} (expected a string)")
                if not doc_id:
                    raise CorpusError(f'{where}: empty "id" (expected a non-empty string)')
                ids.add(doc_id, str(path), f"{file.name} row {row}")
                docs.append(Document(doc_id, text))
                row += 1
            report.documents += len(docs)
            yield docs


def _strings(batch, column: int, file: Path, first_row: int) -> list:
    """A string column as Python values; bytes that are not UTF-8 name the file, row and column."""
    values = batch.column(column)
    try:
        return values.to_pylist()
    except UnicodeDecodeError:
        for i in range(len(values)):
            try:
                values[i].as_py()
            except UnicodeDecodeError as exc:
                raise CorpusError(
                    f"{file}: row {first_row + i}: column {batch.schema.names[column]!r} holds invalid UTF-8 "
                    f"(byte offset {exc.start} of the value); expected UTF-8 strings"
                ) from None
        raise


def _checked_batches(pf, file: Path, batch_size: int, next_row) -> Iterator:
    """Record batches of ``id``/``text``; a corrupt page or bad UTF-8 becomes CorpusError naming file and rows."""
    import pyarrow as pa

    batches = pf.iter_batches(batch_size=batch_size, columns=["id", "text"])
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (OSError, pa.ArrowException, ValueError) as exc:
            first = next_row()
            raise CorpusError(
                f"{file}: cannot read rows from {first} on ({type(exc).__name__}: {exc}); "
                "the Parquet file is corrupt or truncated"
            ) from None
        yield batch


def iter_parquet(
    path: str | os.PathLike, *, batch_size: int = PARQUET_BATCH_SIZE, report: ReadReport | None = None
) -> Iterator[Document]:
    """Documents of ``iter_parquet_batches``, one at a time."""
    for batch in iter_parquet_batches(path, batch_size=batch_size, report=report):
        yield from batch


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def iter_folder(
    path: str | os.PathLike, *, on_invalid_utf8: str = "error", report: ReadReport | None = None
) -> Iterator[Document]:
    """Every regular, non-hidden file below ``path`` (sorted by relative POSIX path) as a Document.

    id = relative POSIX path, text = the UTF-8 contents. Hidden means any path component starting
    with "."; symlinked directories are not followed. Bad UTF-8 names the file and byte offset.
    """
    _check_policy(on_invalid_utf8)
    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"{root}: not a directory (expected a folder of text files)")
    report = report if report is not None else ReadReport()
    report.source = str(root)
    relative = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            full = Path(dirpath) / name
            if not name.startswith(".") and full.is_file():
                relative.append(full.relative_to(root).as_posix())
    for rel in sorted(relative):
        file = root / rel
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise CorpusError(f"{file}: cannot read corpus file: {exc.strerror}") from None
        text = _decode(raw, where=str(file), base_offset=0, policy=on_invalid_utf8, report=report)
        if text is not None:
            report.documents += 1
            yield Document(rel, text)


def read_text_file(path: str | os.PathLike, *, on_invalid_utf8: str = "error") -> str:
    """The UTF-8 text of one continuous file (a play, a log); split it with ``CorpusPartitions.from_text``."""
    _check_policy(on_invalid_utf8)
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read text file: {exc.strerror}") from None
    text = _decode(raw, where=str(path), base_offset=0, policy=on_invalid_utf8, report=ReadReport())
    return "" if text is None else text


class Corpus(Sequence[Document]):
    """An ordered sequence of Documents with unique, non-empty ids; ``report`` tells what the reader skipped."""

    def __init__(self, documents: Iterable[Document], *, source: str | None = None, report: ReadReport | None = None):
        self._documents: list[Document] = list(documents)
        self._index: dict[str, int] = {}
        for i, doc in enumerate(self._documents):
            if not isinstance(doc, Document):
                raise CorpusError(f"corpus item {i} is {type(doc).__name__}, expected Document")
            if not isinstance(doc.id, str) or not doc.id:
                raise CorpusError(f"corpus document {i}: empty or non-string id {doc.id!r}")
            first = self._index.setdefault(doc.id, i)
            if first != i:
                raise CorpusError(f"duplicate id {doc.id!r} at documents {first} and {i}; ids must be unique")
        self.source = source
        self.report = report if report is not None else ReadReport(source=source or "", documents=len(self._documents))

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike, *, on_invalid_utf8: str = "error", skip_bad_lines: bool = False) -> "Corpus":
        report = ReadReport()
        docs = list(iter_jsonl(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines, report=report))
        return cls(docs, source=str(path), report=report)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike, *, batch_size: int = PARQUET_BATCH_SIZE) -> "Corpus":
        report = ReadReport()
        return cls(iter_parquet(path, batch_size=batch_size, report=report), source=str(path), report=report)

    @classmethod
    def from_folder(cls, path: str | os.PathLike, *, on_invalid_utf8: str = "error") -> "Corpus":
        report = ReadReport()
        return cls(iter_folder(path, on_invalid_utf8=on_invalid_utf8, report=report), source=str(path), report=report)

    @classmethod
    def from_path(cls, path: str | os.PathLike, *, on_invalid_utf8: str = "error", skip_bad_lines: bool = False,
                  batch_size: int = PARQUET_BATCH_SIZE) -> "Corpus":
        """Dispatch on the path: ``.jsonl``/``.json`` lines, ``.parquet``, or a directory.

        A directory whose non-hidden files are all ``.parquet`` is read as a Parquet dataset; any
        other directory as a folder of text files. Each reader takes the options that apply to it
        (Parquet strings are UTF-8 already; only JSONL has lines to skip).
        """
        path = Path(path)
        if path.is_dir():
            files = [p for p in path.rglob("*") if p.is_file() and not _is_hidden(p.relative_to(path))]
            if files and all(p.suffix == ".parquet" for p in files):
                return cls.from_parquet(path, batch_size=batch_size)
            return cls.from_folder(path, on_invalid_utf8=on_invalid_utf8)
        if not path.exists():
            raise CorpusError(f"{path}: no such corpus file or directory")
        if path.suffix in (".jsonl", ".json"):
            return cls.from_jsonl(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines)
        if path.suffix == ".parquet" or path.suffix in ARROW_SUFFIXES:
            return cls.from_parquet(path, batch_size=batch_size)
        raise CorpusError(
            f"{path}: unknown corpus format {path.suffix or '(no suffix)'!r} "
            "(expected .jsonl, .json, .parquet, .arrow/.feather or a directory)"
        )

    def __len__(self) -> int:
        return len(self._documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self._documents)

    @overload
    def __getitem__(self, index: int) -> Document: ...
    @overload
    def __getitem__(self, index: slice) -> "Corpus": ...
    def __getitem__(self, index):
        if isinstance(index, slice):
            return Corpus(self._documents[index], source=self.source)
        return self._documents[index]

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._index
        index = self._index.get(item.id) if isinstance(item, Document) else None
        return index is not None and self._documents[index] == item

    def ids(self) -> list[str]:
        return [doc.id for doc in self._documents]

    def index_of(self, doc_id: str) -> int:
        """Position of the document with ``doc_id``; CorpusError if the corpus lacks it."""
        try:
            return self._index[doc_id]
        except KeyError:
            raise CorpusError(f"{self.source or 'corpus'}: no document with id {doc_id!r}") from None

    def get(self, doc_id: str) -> Document:
        return self._documents[self.index_of(doc_id)]

    def __repr__(self) -> str:
        return f"Corpus({len(self)} documents, source={self.source!r})"

# -- splits --------------------------------------------------------------------------------------

PARTITIONS = (Partition.TRAIN, Partition.VALIDATION, Partition.TEST)


def as_partition(value: Partition | str) -> Partition:
    """``Partition`` from a Partition or its string value; CorpusError names the bad value."""
    try:
        return Partition(value)
    except ValueError:
        raise CorpusError(f"unknown partition {value!r} (expected train, validation or test)") from None


def _check_ratios(ratios) -> tuple[float, float, float]:
    """(train, validation, test) fractions: non-negative, finite, summing to 1 within 1e-9."""
    if not hasattr(ratios, "items"):
        raise ConfigurationError(f"split ratios must be a mapping like {{'train': 0.8, ...}}, got {type(ratios).__name__}")
    values = dict.fromkeys(PARTITIONS, 0.0)
    for key, ratio in ratios.items():
        try:
            part = Partition(key)
        except ValueError:
            raise ConfigurationError(f"split ratio key {key!r} is not a partition (expected train, validation, test)") from None
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio < 0:
            raise ConfigurationError(f"split ratio for {part.value!r} is {ratio!r}, expected a finite number >= 0")
        values[part] = float(ratio)
    total = sum(values.values())
    if abs(total - 1.0) > 1e-9:
        raise ConfigurationError(f"split ratios sum to {total!r}, expected 1 (within 1e-9): {ratios!r}")
    return values[Partition.TRAIN], values[Partition.VALIDATION], values[Partition.TEST]


def hash_unit(doc_id: str) -> float:
    """``int.from_bytes(sha256(id as UTF-8)[:8], "big") / 2**64``: a fixed, portable number in [0, 1]."""
    return int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") / 2**64


def _assign(u: float, ratios: tuple[float, float, float]) -> Partition:
    cumulative = 0.0
    for part, ratio in zip(PARTITIONS, ratios):
        cumulative += ratio
        if u < cumulative:
            return part
    # u at or past a cumulative sum that rounding left just short of 1: the last non-empty range.
    return next(p for p, r in zip(reversed(PARTITIONS), reversed(ratios)) if r > 0)


def hash_partition(doc_id: str, ratios) -> Partition:
    """The partition ``SplitManifest.by_hash(ratios)`` gives ``doc_id`` (see its docstring for the rule)."""
    return _assign(hash_unit(doc_id), _check_ratios(ratios))


def _json_lines(raw: str | None, value: str) -> list[int]:
    """Best effort: 1-based lines where the JSON string ``value`` occurs as an array item (not a key)."""
    if raw is None:
        return []
    literals = {json.dumps(value, ensure_ascii=False), json.dumps(value)}
    starts = sorted({m.start() for lit in literals for m in re.finditer(re.escape(lit) + r"(?!\s*:)", raw)})
    return [raw.count("\n", 0, start) + 1 for start in starts]


def _forgotten_where(corpus_source: str | None, forgotten: list[str]) -> str:
    """`` (corpus FILE, line N)``: where the first forgotten document is, as far as known.

    Only JSONL has lines; the file is scanned once, on this error path only.
    """
    if not corpus_source:
        return ""
    path = Path(corpus_source)
    if path.suffix not in (".jsonl", ".json") or not path.is_file():
        return f" (corpus {path})"
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                obj = json.loads(raw, strict=False)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("id") == forgotten[0]:
                return f" (corpus {path}, line {lineno})"
    return f" (corpus {path})"


def _at_lines(lines: list[int]) -> str:
    if not lines:
        return ""
    if len(lines) == 1:
        return f" (line {lines[0]})"
    return f" (lines {lines[0]} and {lines[1]})"


class SplitManifest:
    """Assigns every document of a corpus to exactly one partition.

    Either explicit lists of ids (``SplitManifest(train=[...], validation=[...], test=[...])`` or
    ``from_json``) or a hash rule (``by_hash``). Lists are checked on construction: ids are
    non-empty strings, none repeated inside a list, none in two partitions.
    """

    def __init__(self, train: Iterable[str] = (), validation: Iterable[str] = (), test: Iterable[str] = (),
                 *, source: str | None = None, _raw: str | None = None):
        self.source = source
        self.ratios: tuple[float, float, float] | None = None
        self._lists = {Partition.TRAIN: list(train), Partition.VALIDATION: list(validation), Partition.TEST: list(test)}
        self._where: dict[str, Partition] = {}
        src = source or "split manifest"
        for part, ids in self._lists.items():
            for i, doc_id in enumerate(ids):
                if not isinstance(doc_id, str):
                    raise CorpusError(f'{src}: "{part.value}"[{i}] must be a string id, got {type(doc_id).__name__} {doc_id!r}')
                if not doc_id:
                    raise CorpusError(
                        f'{src}: "{part.value}"[{i}] is an empty id{_at_lines(_json_lines(_raw, doc_id)[:1])} '
                        "(expected a non-empty string)"
                    )
                other = self._where.get(doc_id)
                if other is None:
                    self._where[doc_id] = part
                elif other is part:
                    raise CorpusError(
                        f'{src}: id {doc_id!r} appears twice in "{part.value}"{_at_lines(_json_lines(_raw, doc_id))}; '
                        "list each id once"
                    )
                else:
                    raise CorpusError(
                        f'{src}: id {doc_id!r} is in both "{other.value}" and "{part.value}"'
                        f"{_at_lines(_json_lines(_raw, doc_id))}; every document belongs to exactly one partition"
                    )
        self._raw = _raw

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "SplitManifest":
        """Read ``{"train": [ids], "validation": [ids], "test": [ids]}``; a missing key is an empty list."""
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CorpusError(f"{path}: cannot read split manifest: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{path}: invalid UTF-8 at byte offset {exc.start}; expected a UTF-8 JSON file") from None
        repeated: list[str] = []

        def no_repeated_keys(pairs):
            keys = [k for k, _ in pairs]
            repeated.extend(k for i, k in enumerate(keys) if k in keys[:i])
            return dict(pairs)

        try:
            obj = json.loads(raw, object_pairs_hook=no_repeated_keys)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise CorpusError(f'{path}: expected a JSON object {{"train": [...], "validation": [...], "test": [...]}}')
        if repeated:
            raise CorpusError(
                f'{path}: key "{repeated[0]}" appears more than once; expected each of train, validation, '
                "test at most once (a repeated key would silently drop the first list)"
            )
        unknown = sorted(set(obj) - {p.value for p in PARTITIONS})
        if unknown:
            raise CorpusError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))} (expected train, validation, test)")
        for key, ids in obj.items():
            if not isinstance(ids, list):
                raise CorpusError(f'{path}: "{key}" must be a list of ids, got {type(ids).__name__}')
        return cls(obj.get("train", ()), obj.get("validation", ()), obj.get("test", ()), source=str(path), _raw=raw)

    @classmethod
    def by_hash(cls, ratios) -> "SplitManifest":
        """A rule instead of lists, for corpora too large to list.

        Rule: ``u = int.from_bytes(hashlib.sha256(id.encode("utf-8")).digest()[:8], "big") / 2**64``;
        with cumulative ratios ``c1 = train`` and ``c2 = train + validation`` the id goes to train if
        ``u < c1``, else validation if ``u < c2``, else test. (A ``u`` that rounding leaves at or past
        the last cumulative sum goes to the last partition with a positive ratio.) ``ratios`` maps
        partitions to non-negative fractions summing to 1 within 1e-9; missing keys are 0.
        """
        manifest = cls()
        manifest.ratios = _check_ratios(ratios)
        return manifest

    @property
    def is_hash_split(self) -> bool:
        return self.ratios is not None

    def partition_of(self, doc_id: str) -> Partition:
        if self.ratios is not None:
            return _assign(hash_unit(doc_id), self.ratios)
        try:
            return self._where[doc_id]
        except KeyError:
            raise CorpusError(f"{self.source or 'split manifest'}: id {doc_id!r} is in no partition") from None

    def assign(self, ids: Iterable[str]) -> "SplitManifest":
        """Explicit lists for ``ids`` (in their order), each placed by ``partition_of``."""
        lists: dict[Partition, list[str]] = {p: [] for p in PARTITIONS}
        for doc_id in ids:
            lists[self.partition_of(doc_id)].append(doc_id)
        return SplitManifest(lists[Partition.TRAIN], lists[Partition.VALIDATION], lists[Partition.TEST])

    def ids(self, partition: Partition | str) -> list[str]:
        if self.ratios is not None:
            raise ConfigurationError("a hash split lists no ids; call manifest.assign(ids) first")
        return list(self._lists[as_partition(partition)])

    def to_dict(self) -> dict[str, list[str]]:
        return {p.value: self.ids(p) for p in PARTITIONS}

    def to_json(self, path: str | os.PathLike) -> Path:
        """Write the manifest as JSON (one id per line), atomically."""
        path = Path(path)
        body = ",\n".join(
            f"  {json.dumps(key)}: [" + ",".join(f"\n    {json.dumps(i, ensure_ascii=False)}" for i in ids)
            + ("\n  ]" if ids else "]")
            for key, ids in self.to_dict().items()
        )
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text("{\n" + body + "\n}\n", encoding="utf-8")
        os.replace(tmp, path)
        return path

    save = to_json

    def partition(self, corpus: Sequence[Document]) -> "CorpusPartitions":
        """The corpus documents of each partition, in corpus order; the manifest must name each exactly once."""
        corpus = corpus if isinstance(corpus, Corpus) else Corpus(corpus)
        src = self.source or "split manifest"
        if self.ratios is None:
            for part, ids in self._lists.items():
                for doc_id in ids:
                    if doc_id not in corpus:
                        raise CorpusError(
                            f'{src}: id {doc_id!r} in "{part.value}"{_at_lines(_json_lines(self._raw, doc_id)[:1])} '
                            f"is not in the corpus{' ' + corpus.source if corpus.source else ''}; "
                            "a manifest may only name corpus documents"
                        )
            forgotten = [doc.id for doc in corpus if doc.id not in self._where]
            if forgotten:
                shown = ", ".join(map(repr, forgotten[:5])) + (", ..." if len(forgotten) > 5 else "")
                raise CorpusError(
                    f"{src}: {len(forgotten)} corpus document(s) in no partition: {shown}"
                    f"{_forgotten_where(corpus.source, forgotten)}; the manifest must name every document"
                )
        groups: dict[Partition, list[Document]] = {p: [] for p in PARTITIONS}
        for doc in corpus:
            groups[self.partition_of(doc.id)].append(doc)
        return CorpusPartitions(groups)

    def counts(self) -> dict[Partition, int]:
        return {p: len(self.ids(p)) for p in PARTITIONS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitManifest) and (self.ratios, self._lists) == (other.ratios, other._lists)

    def __repr__(self) -> str:
        if self.ratios is not None:
            return f"SplitManifest.by_hash(train={self.ratios[0]}, validation={self.ratios[1]}, test={self.ratios[2]})"
        return "SplitManifest(" + ", ".join(f"{p.value}={len(v)} ids" for p, v in self._lists.items()) + ")"


class CorpusPartitions:
    """Documents grouped by partition (all three always present, possibly empty); ids unique across all."""

    def __init__(self, groups: dict[Partition, list[Document]]):
        self._groups = {p: list(groups.get(p, ())) for p in PARTITIONS}

    @classmethod
    def from_mapping(cls, mapping) -> "CorpusPartitions":
        """From ``{Partition or "train"...: [Document, ...]}``; checks partitions and id uniqueness."""
        groups: dict[Partition, list[Document]] = {p: [] for p in PARTITIONS}
        seen: dict[str, Partition] = {}
        for key, docs in mapping.items():
            part = as_partition(key)
            for doc in docs:
                n_before = len(seen)
                if not isinstance(doc, Document) or not isinstance(doc.id, str) or not doc.id:
                    raise CorpusError(f'partition "{part.value}": expected Documents with non-empty ids, got {doc!r:.80}')
                other = seen.setdefault(doc.id, part)
                if other is not part or len(seen) == n_before:
                    raise CorpusError(f'id {doc.id!r} appears twice (in "{other.value}" and "{part.value}"); ids must be unique')
                groups[part].append(doc)
        return cls(groups)

    @classmethod
    def from_text(cls, text: str, train_fraction: float = 0.9, *, name: str = "text") -> "CorpusPartitions":
        """Split one continuous text by position: ``cut = floor(len(text) * train_fraction)`` characters.

        The product is exact, with ``train_fraction`` read as the decimal it is written as (``0.29``
        of 100 characters is 29, where float arithmetic would give 28.999... and cut at 28).

        Train holds one document ``f"{name}:train"`` = ``text[:cut]``; validation one document
        ``f"{name}:validation"`` = ``text[cut:]``; test is empty. Nothing is sampled across the cut.
        """
        if isinstance(train_fraction, bool) or not isinstance(train_fraction, (int, float)) or not 0 < train_fraction <= 1:
            raise ConfigurationError(f"train_fraction is {train_fraction!r}, expected a number with 0 < train_fraction <= 1")
        if not name:
            raise ConfigurationError("name is empty; expected a non-empty prefix for the document ids")
        cut = math.floor(len(text) * Fraction(repr(float(train_fraction))))
        return cls({
            Partition.TRAIN: [Document(f"{name}:train", text[:cut])],
            Partition.VALIDATION: [Document(f"{name}:validation", text[cut:])],
        })

    def documents(self, partition: Partition | str) -> list[Document]:
        return list(self._groups[as_partition(partition)])

    __getitem__ = documents

    def ids(self, partition: Partition | str) -> list[str]:
        return [doc.id for doc in self._groups[as_partition(partition)]]

    def counts(self) -> dict[Partition, int]:
        return {p: len(docs) for p, docs in self._groups.items()}

    def __iter__(self) -> Iterator[tuple[Partition, list[Document]]]:
        return iter([(p, list(docs)) for p, docs in self._groups.items()])

    def manifest(self) -> SplitManifest:
        return SplitManifest(*(self.ids(p) for p in PARTITIONS))

    def __repr__(self) -> str:
        return "CorpusPartitions(" + ", ".join(f"{p.value}={n}" for p, n in self.counts().items()) + ")"
