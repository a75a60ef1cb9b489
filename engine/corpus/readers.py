"""Documents and the streaming corpus readers (SPEC §2).

Readers are generators (``iter_jsonl``, ``iter_parquet``, ``iter_parquet_batches``,
``iter_folder``) that hold one line, one record batch or one file at a time; ``open_corpus``
picks the reader by format (the one dispatch that ``Corpus.from_path`` and ``prepare`` share) and
hands out lists of documents. Every reader checks ids (present, non-empty, unique) and UTF-8 as it
goes and raises ``CorpusError`` with the file, the 1-based line (JSONL) or row (Parquet), and for
bad UTF-8 the absolute byte offset of the first bad byte in the file. Cost: one pass over the
input, plus one dict entry per id for the duplicate check. ``read_text_file`` reads one continuous
text (split it by position with ``CorpusPartitions.from_text``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from engine.errors import CorpusError

__all__ = [
    "Document",
    "ReadReport",
    "iter_jsonl",
    "iter_parquet",
    "iter_parquet_batches",
    "iter_folder",
    "read_text_file",
    "corpus_format",
    "open_corpus",
    "is_continuous_text",
    "CORPUS_FORMATS",
    "ARROW_SUFFIXES",
]

INVALID_UTF8_POLICIES = ("error", "replace", "skip")
_SURROGATE = re.compile("[\ud800-\udfff]")
PARQUET_BATCH_SIZE = 8192


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


# -- one dispatch by format -----------------------------------------------------------------------

CORPUS_FORMATS = ("jsonl", "parquet", "folder")


def is_continuous_text(path: str | os.PathLike) -> bool:
    """A ``.txt`` file is one continuous text (read whole by ``read_text_file``), not a corpus of documents."""
    path = Path(path)
    return path.is_file() and path.suffix == ".txt"


def corpus_format(path: str | os.PathLike) -> str:
    """The reader for ``path``: "jsonl" (``.jsonl``/``.json``), "parquet" (``.parquet``, Arrow IPC
    ``.arrow``/``.feather``/``.ipc``, or a directory whose non-hidden files are all ``.parquet``),
    or "folder" (any other directory, one document per text file).

    CorpusError for a path that does not exist or has another suffix (a continuous ``.txt`` file is
    no multi-document corpus: read it with ``read_text_file``).
    """
    path = Path(path)
    if path.is_dir():
        files = [p for p in path.rglob("*") if p.is_file() and not _is_hidden(p.relative_to(path))]
        return "parquet" if files and all(p.suffix == ".parquet" for p in files) else "folder"
    if not path.exists():
        raise CorpusError(f"{path}: no such corpus file or directory")
    if path.suffix in (".jsonl", ".json"):
        return "jsonl"
    if path.suffix == ".parquet" or path.suffix in ARROW_SUFFIXES:
        return "parquet"
    raise CorpusError(
        f"{path}: unknown corpus format {path.suffix or '(no suffix)'!r} "
        "(expected .jsonl, .json, .parquet, .arrow/.feather or a directory)"
    )


def _batched(documents: Iterable[Document], size: int, chars: int | None) -> Iterator[list[Document]]:
    """Lists of at most ``size`` documents and (unless one document is larger, or ``chars`` is None)
    ``chars`` characters."""
    batch: list[Document] = []
    held = 0
    for doc in documents:
        if batch and chars is not None and held + len(doc.text) > chars:
            yield batch
            batch, held = [], 0
        batch.append(doc)
        held += len(doc.text)
        if len(batch) >= size:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def open_corpus(
    path: str | os.PathLike,
    *,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    batch_documents: int = PARQUET_BATCH_SIZE,
    batch_chars: int | None = None,
    report: ReadReport | None = None,
) -> Iterator[list[Document]]:
    """The documents of a corpus at ``path``, in order, as lists of at most ``batch_documents``
    documents (and ``batch_chars`` characters unless one document is larger; None: no limit).

    The format is chosen by ``corpus_format`` (checked now, before the first batch is asked for);
    each reader takes the options that apply to it (Parquet strings are UTF-8 already; only JSONL
    has lines to skip). Parquet is read in record batches of ``batch_documents`` rows, and a batch
    never spans two record batches. Memory: one batch (or one file of a folder).
    """
    kind = corpus_format(path)
    report = report if report is not None else ReadReport()
    if kind == "parquet":
        return (
            batch
            for rows in iter_parquet_batches(path, batch_size=batch_documents, report=report)
            for batch in _batched(rows, batch_documents, batch_chars)
        )
    if kind == "jsonl":
        docs = iter_jsonl(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines, report=report)
    else:
        docs = iter_folder(path, on_invalid_utf8=on_invalid_utf8, report=report)
    return _batched(docs, batch_documents, batch_chars)
