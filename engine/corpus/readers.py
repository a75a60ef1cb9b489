"""Documents and the streaming corpus readers (SPEC §2).

Readers are generators (``iter_jsonl``, ``iter_parquet``, ``iter_parquet_batches``,
``iter_folder``) that hold one line, one record batch or one file at a time; ``open_corpus``
picks the reader by format (the one dispatch that ``Corpus.from_path`` and ``prepare`` share) and
hands out lists of documents. Every reader checks ids (present, non-empty, unique) and UTF-8 as it
goes and raises ``CorpusError`` with the file, the 1-based line (JSONL) or row (Parquet), and for
bad UTF-8 the absolute byte offset of the first bad byte in the file. Cost: one pass over the
input, plus one dict entry per id for the duplicate check. ``read_text_file`` reads one continuous
text (split it by position with ``CorpusPartitions.from_text``).

Columns: JSONL and Parquet/Arrow read the text from ``text_column`` (default ``"text"``) and the id
from ``id_column``. With ``id_column=None`` (the default) the id is the ``"id"`` field when the
first record has one; when it has none, every id is *made from file and row*:
``f"{name}:{row:06d}"``, where ``name`` is the file name (for a directory of Parquet files, the
file's POSIX path relative to the directory) and ``row`` is counted the way error messages count
it: the 1-based line of a JSONL file (blank lines included), the 0-based row inside a Parquet or
Arrow file. So ``c.jsonl:000003`` is line 3 of ``c.jsonl`` and ``part/a.parquet:000000`` is the
first row of ``part/a.parquet``; ``ReadReport.made_ids`` records it. A named ``id_column`` must
exist. Ids must be valid UTF-8: a lone surrogate (JSON ``"\\ud800"``) or a file name that is not
UTF-8 follows ``on_invalid_utf8`` like text does (the default, "error", names the file and line).

Counts: ``ReadReport`` counts every blank line, skipped line, skipped document, and every invalid
UTF-8 byte sequence (or lone surrogate) replaced by U+FFFD or dropped, so nothing is lost silently.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from engine.errors import ConfigurationError, CorpusError

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
    "check_columns_apply",
    "decode_counting",
    "made_id",
    "is_continuous_text",
    "CORPUS_FORMATS",
    "ARROW_SUFFIXES",
]

INVALID_UTF8_POLICIES = ("error", "replace", "skip")
TEXT_COLUMN = "text"
ID_COLUMN = "id"
MADE_ID_DIGITS = 6
_SURROGATE = re.compile("[\ud800-\udfff]")
PARQUET_BATCH_SIZE = 8192


@dataclass(frozen=True, slots=True)
class Document:
    """One source text with a stable, non-empty, unique id."""

    id: str
    text: str


@dataclass(slots=True)
class ReadReport:
    """What a reader passed over, counted: nothing a reader drops or changes goes uncounted.

    ``skipped_invalid_utf8``: documents (JSONL lines, files) dropped by ``on_invalid_utf8="skip"``;
    ``replaced_invalid_utf8``: documents in which ``"replace"`` changed something;
    ``replaced_sequences`` / ``dropped_sequences``: invalid UTF-8 byte sequences (each as Python's
    decoder delimits them, one U+FFFD each) and lone surrogates replaced by U+FFFD / dropped (a
    continuous text under ``"skip"`` loses only these); ``made_ids``: ids were made from file and
    row because the records have no ``id_column``.
    """

    source: str = ""
    documents: int = 0
    blank_lines: int = 0
    skipped_bad_lines: int = 0
    skipped_invalid_utf8: int = 0
    replaced_invalid_utf8: int = 0
    replaced_sequences: int = 0
    dropped_sequences: int = 0
    text_column: str | None = None
    id_column: str | None = None
    made_ids: bool = False
    first_problems: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        """Keep the first few skip/replace messages so a CLI can show where they were."""
        if len(self.first_problems) < 5:
            self.first_problems.append(message)

    @property
    def dropped_or_changed(self) -> bool:
        """True when anything was skipped, replaced or dropped."""
        return any((self.skipped_bad_lines, self.skipped_invalid_utf8, self.replaced_invalid_utf8,
                    self.replaced_sequences, self.dropped_sequences))

    def notes(self) -> list[str]:
        """One line per thing a user should know about how the corpus was read."""
        notes = []
        if self.made_ids:
            notes.append(f'ids: made from file and row (no "{self.id_column or ID_COLUMN}" column)')
        return notes

    def summary(self) -> str:
        """``read: N documents; skipped ...; replaced ...`` with every count that is not zero."""
        parts = [f"read: {_plural(self.documents, 'document')}"]
        skipped = []
        if self.skipped_bad_lines:
            skipped.append(f"{_plural(self.skipped_bad_lines, 'bad line')} (--skip-bad-lines)")
        if self.skipped_invalid_utf8:
            skipped.append(f"{_plural(self.skipped_invalid_utf8, 'document')} with invalid UTF-8")
        if skipped:
            parts.append("skipped " + ", ".join(skipped))
        if self.replaced_sequences:
            parts.append(f"replaced {_plural(self.replaced_sequences, 'invalid UTF-8 sequence')} by U+FFFD "
                         f"in {_plural(self.replaced_invalid_utf8, 'document')}")
        if self.dropped_sequences:
            parts.append(f"dropped {_plural(self.dropped_sequences, 'invalid UTF-8 sequence')}")
        if self.blank_lines:
            parts.append(f"{_plural(self.blank_lines, 'blank line')} passed over")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        """The counts, columns and notes, as ``report.json`` keeps them."""
        return {
            "documents": self.documents,
            "blank_lines": self.blank_lines,
            "skipped_bad_lines": self.skipped_bad_lines,
            "skipped_invalid_utf8_documents": self.skipped_invalid_utf8,
            "replaced_invalid_utf8_documents": self.replaced_invalid_utf8,
            "replaced_invalid_utf8_sequences": self.replaced_sequences,
            "dropped_invalid_utf8_sequences": self.dropped_sequences,
            "text_column": self.text_column,
            "id_column": None if self.made_ids else self.id_column,
            "ids_made_from_file_and_row": self.made_ids,
            "first_problems": list(self.first_problems),
            "notes": self.notes(),
            "summary": self.summary(),
        }


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# Decoding that counts what it replaces or drops: one handler call per invalid byte sequence (the
# decoder delimits them exactly as errors="replace" does). The count is per thread.
_decode_errors = threading.local()


def _counting_handler(replacement: str):
    def handler(exc: UnicodeDecodeError):
        _decode_errors.count += 1
        return replacement, exc.end

    return handler


codecs.register_error("engine-count-replace", _counting_handler("\ufffd"))
codecs.register_error("engine-count-drop", _counting_handler(""))


def decode_counting(raw: bytes, *, drop: bool) -> tuple[str, int]:
    """``raw`` decoded as UTF-8 with each invalid byte sequence replaced by U+FFFD (or dropped), and
    how many there were. The text equals ``raw.decode("utf-8", errors="replace")`` when not dropping."""
    _decode_errors.count = 0
    text = codecs.decode(raw, "utf-8", "engine-count-drop" if drop else "engine-count-replace")
    return text, _decode_errors.count


def _check_policy(on_invalid_utf8: str) -> None:
    if on_invalid_utf8 not in INVALID_UTF8_POLICIES:
        raise CorpusError(
            f"on_invalid_utf8={on_invalid_utf8!r} is not a policy (expected one of: {', '.join(INVALID_UTF8_POLICIES)})"
        )


def _apply_policy(policy: str, message: str, report: ReadReport, replaced):
    """The invalid-UTF-8 policy for one document: raise (error), None (skip), or ``replaced()``.

    ``replaced()`` returns the fixed value and how many sequences it replaced (counted here).
    """
    if policy == "error":
        raise CorpusError(message) from None  # called inside the decode error's handler
    report.note(message)
    if policy == "skip":
        report.skipped_invalid_utf8 += 1
        return None
    value, count = replaced()
    report.replaced_invalid_utf8 += 1
    report.replaced_sequences += count
    return value


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
        return _apply_policy(policy, message, report, lambda: decode_counting(raw, drop=False))


def _check_columns(text_column: str, id_column: str | None) -> None:
    for option, name in (("text_column", text_column), ("id_column", id_column)):
        if name is None and option == "id_column":
            continue
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{option}={name!r}: expected a non-empty column name")
    if text_column == id_column:
        raise ConfigurationError(f"text_column and id_column are both {text_column!r}; expected two different columns")


def made_id(name: str, row: int) -> str:
    """The id of a record without one: ``f"{name}:{row:06d}"`` (see the module docstring for ``row``)."""
    return f"{name}:{row:0{MADE_ID_DIGITS}d}"


def _id_not_utf8(doc_id: str) -> UnicodeEncodeError | None:
    try:
        doc_id.encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        return exc


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
    text_column: str = TEXT_COLUMN,
    id_column: str | None = None,
    report: ReadReport | None = None,
) -> Iterator[Document]:
    """Stream ``{"id": str, "text": str}`` objects, one per line, as Documents.

    The text is the ``text_column`` field, the id the ``id_column`` field; with ``id_column=None``
    the ``"id"`` field, or, when the first object has no ``"id"``, an id made from the file name and
    the 1-based line number (``c.jsonl:000003``) for every line (a later line with an ``"id"`` is then
    malformed: all lines have one or none). Blank lines are skipped and counted. Malformed lines (bad
    JSON, not an object, missing or non-string or empty id/text) raise ``CorpusError`` naming
    ``file:line``, or with ``skip_bad_lines`` are skipped and counted in ``report``. Duplicate ids
    always raise (both line numbers). Invalid UTF-8, and lone surrogates in ids and texts, follow
    ``on_invalid_utf8``: "error" (file, line, absolute byte offset), "replace" (U+FFFD, each
    sequence counted), or "skip" (drop the line, count it). NUL characters are ordinary text.
    """
    _check_policy(on_invalid_utf8)
    _check_columns(text_column, id_column)
    path = Path(path)
    report = report if report is not None else ReadReport()
    report.source = str(path)
    report.text_column, report.id_column = text_column, id_column or ID_COLUMN
    ids = _IdRegistry()
    columns = _JsonColumns(text_column, id_column, path.name)
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
            before = (report.replaced_invalid_utf8, report.replaced_sequences)
            line = _decode(raw, where=where, base_offset=line_start, policy=on_invalid_utf8, report=report)
            if line is None:
                continue
            try:
                doc_id, text = columns.parse(line.rstrip("\r\n"), where, lineno)
                fixed = _fix_surrogates(doc_id, text, where=where, policy=on_invalid_utf8, report=report)
            except CorpusError as exc:
                if not skip_bad_lines:
                    raise
                report.replaced_invalid_utf8, report.replaced_sequences = before  # a skipped line changes nothing
                report.skipped_bad_lines += 1
                report.note(str(exc))
                continue
            if fixed is None:
                continue
            doc_id, text = fixed
            ids.add(doc_id, str(path), f"line {lineno}")
            report.documents += 1
            report.made_ids = columns.made
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


class _JsonColumns:
    """Reads the id and text of one JSONL object; decides at the first object whether ids are made."""

    def __init__(self, text_column: str, id_column: str | None, name: str):
        self.text, self.id, self.name = text_column, id_column or ID_COLUMN, name
        self.optional_id = id_column is None
        self.made: bool | None = None  # decided by the first object read
        self.made_at = 0

    def expected(self) -> str:
        return f'{{"{self.id}": str, "{self.text}": str}}'

    def parse(self, line: str, where: str, lineno: int) -> tuple[str, str]:
        obj = _parse_jsonl_object(line, where, f'{{"{self.id}": ..., "{self.text}": ...}}')
        if self.made is None:
            self.made = self.optional_id and self.id not in obj
            self.made_at = lineno
        if self.made and self.id in obj:
            raise CorpusError(
                f'{where}: has "{self.id}" but line {self.made_at} has none, so ids are made from file and line; '
                f'expected every line with an "{self.id}" or none'
            )
        keys = (self.text,) if self.made else (self.id, self.text)
        for key in keys:
            if key not in obj:
                raise CorpusError(f'{where}: missing "{key}" (expected {self.expected()})')
            if not isinstance(obj[key], str):
                raise CorpusError(f'{where}: "{key}" must be a string, got {type(obj[key]).__name__}')
        if self.made:
            return made_id(self.name, lineno), obj[self.text]
        if not obj[self.id]:
            raise CorpusError(f'{where}: empty "{self.id}" (expected a non-empty string)')
        return obj[self.id], obj[self.text]


def _parse_jsonl_object(line: str, where: str, expected: str) -> dict:
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
        raise CorpusError(f"{where}: expected a JSON object {expected}, got {type(obj).__name__}")
    return obj


def _fix_surrogates(doc_id: str, text: str, *, where: str, policy: str,
                    report: ReadReport) -> tuple[str, str] | None:
    """A JSON ``\\ud800`` escape decodes to a lone surrogate, which no UTF-8 text can hold: in the id
    or the text, it follows the policy (error, skip the document, or replace each by U+FFFD)."""
    for what, value in (("id", doc_id), ("text", text)):
        exc = _id_not_utf8(value)
        if exc is None:
            continue
        char = f"U+{ord(value[exc.start]):04X}"
        message = (
            f"{where}: the id {doc_id!r} holds a lone surrogate {char} at character offset {exc.start}; "
            "expected an id that is valid UTF-8 (on_invalid_utf8='replace' or 'skip' accepts it)"
            if what == "id" else
            f"{where}: document {doc_id!r} holds a lone surrogate {char} at character "
            f"offset {exc.start}; expected text that is valid UTF-8 (on_invalid_utf8='replace' or 'skip' accepts it)"
        )

        def replaced():
            new_id, n_id = _SURROGATE.subn("\ufffd", doc_id)
            new_text, n_text = _SURROGATE.subn("\ufffd", text)
            return (new_id, new_text), n_id + n_text

        return _apply_policy(policy, message, report, replaced)
    return doc_id, text


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
    path: str | os.PathLike, *, batch_size: int = PARQUET_BATCH_SIZE, text_column: str = TEXT_COLUMN,
    id_column: str | None = None, report: ReadReport | None = None,
) -> Iterator[list[Document]]:
    """Stream a Parquet or Arrow IPC (.arrow/.feather) file, or every ``.parquet`` below a directory
    (sorted), as lists of Documents.

    The columns ``text_column`` and ``id_column`` must be strings; with ``id_column=None`` the id
    column is ``id``, or, when the first file has no ``id`` column, ids are made from the file name
    (relative to a directory) and the 0-based row inside that file (``a.parquet:000000``); then
    every file must lack it. Nulls, empty ids and duplicate ids raise ``CorpusError`` naming the file
    and the 0-based row inside that file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    _check_columns(text_column, id_column)
    path = Path(path)
    report = report if report is not None else ReadReport()
    report.source = str(path)
    report.text_column, report.id_column = text_column, id_column or ID_COLUMN
    id_name = id_column or ID_COLUMN
    ids = _IdRegistry()
    made: bool | None = None  # decided by the first file
    files = _parquet_files(path)
    for file in files:
        _check_file_name(file, path)
        try:
            pf = _ArrowIpcFile(file) if file.suffix in ARROW_SUFFIXES else pq.ParquetFile(file)
            schema = pf.schema_arrow
        except (OSError, pa.ArrowException, ValueError) as exc:  # ValueError: footer strings that are not UTF-8
            kind = "Arrow IPC" if file.suffix in ARROW_SUFFIXES else "Parquet"
            raise CorpusError(f"{file}: cannot read {kind} file: {exc}") from None
        has_id = schema.get_field_index(id_name) >= 0
        if made is None:
            made = id_column is None and not has_id
        elif made and has_id:
            raise CorpusError(
                f"{file}: has an {id_name!r} column but {files[0]} has none, so ids are made from file and row; "
                f"expected every file with an {id_name!r} column or none"
            )
        columns = [text_column] if made else [id_name, text_column]
        for name in columns:
            if schema.get_field_index(name) < 0:
                raise CorpusError(
                    f"{file}: missing column {name!r} (found: {', '.join(schema.names)}; expected {', '.join(columns)})"
                )
            if not (pa.types.is_string(schema.field(name).type) or pa.types.is_large_string(schema.field(name).type)):
                raise CorpusError(f"{file}: column {name!r} has type {schema.field(name).type}, expected string")
        name = _made_id_name(file, path) if made else ""
        row = 0
        for batch in _checked_batches(pf, file, batch_size, columns, lambda: row):  # reads the row reached so far
            texts = _strings(batch, len(columns) - 1, file, row)
            doc_ids = [made_id(name, row + i) for i in range(len(texts))] if made else _strings(batch, 0, file, row)
            docs = []
            for doc_id, text in zip(doc_ids, texts):
                where = f"{file}: row {row}"
                if doc_id is None or text is None:
                    raise CorpusError(f"{where}: null {'id' if doc_id is None else 'text'} (expected a string)")
                if not doc_id:
                    raise CorpusError(f'{where}: empty "id" (expected a non-empty string)')
                ids.add(doc_id, str(path), f"{file.name} row {row}")
                docs.append(Document(doc_id, text))
                row += 1
            report.documents += len(docs)
            report.made_ids = made
            yield docs


def _made_id_name(file: Path, root: Path) -> str:
    """The file part of made ids: the file name, or its POSIX path below a directory."""
    return file.name if root == file else file.relative_to(root).as_posix()


def _check_file_name(file: Path, root: Path) -> None:
    """Parquet and Arrow files are opened by name, and made ids hold it: it must be UTF-8."""
    name = _made_id_name(file, root)
    if _id_not_utf8(str(file)) is not None:
        raise CorpusError(
            f"{root}: the file name {os.fsencode(name)!r} is not UTF-8 (Parquet and Arrow files are opened, "
            "and ids made, by name); expected UTF-8 file names: rename the file"
        )


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


def _checked_batches(pf, file: Path, batch_size: int, columns: list[str], next_row) -> Iterator:
    """Record batches of ``columns``; a corrupt page or bad UTF-8 becomes CorpusError naming file and rows."""
    import pyarrow as pa

    batches = pf.iter_batches(batch_size=batch_size, columns=columns)
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
    path: str | os.PathLike, *, batch_size: int = PARQUET_BATCH_SIZE, text_column: str = TEXT_COLUMN,
    id_column: str | None = None, report: ReadReport | None = None,
) -> Iterator[Document]:
    """Documents of ``iter_parquet_batches``, one at a time."""
    for batch in iter_parquet_batches(path, batch_size=batch_size, text_column=text_column, id_column=id_column,
                                      report=report):
        yield from batch


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def iter_folder(
    path: str | os.PathLike, *, on_invalid_utf8: str = "error", report: ReadReport | None = None
) -> Iterator[Document]:
    """Every regular, non-hidden file below ``path`` (sorted by relative POSIX path) as a Document.

    id = relative POSIX path, text = the UTF-8 contents. Hidden means any path component starting
    with "."; symlinked directories are not followed. Bad UTF-8 in a file names the file and byte
    offset; a file name that is not UTF-8 (it would be the id) names the file. Both follow
    ``on_invalid_utf8``: "error", "replace" (U+FFFD, counted) or "skip" (the file is left out, counted).
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
    ids = _IdRegistry()
    for rel in sorted(relative):
        file = root / rel
        doc_id = _folder_id(rel, root, on_invalid_utf8, report)
        if doc_id is None:
            continue
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise CorpusError(f"{file}: cannot read corpus file: {exc.strerror}") from None
        before = (report.replaced_invalid_utf8, report.replaced_sequences)
        text = _decode(raw, where=str(file), base_offset=0, policy=on_invalid_utf8, report=report)
        if text is None:
            continue
        if doc_id != rel and report.replaced_invalid_utf8 > before[0]:
            report.replaced_invalid_utf8 -= 1  # name and contents replaced: one document
        ids.add(doc_id, str(root), repr(os.fsencode(rel)) if doc_id != rel else doc_id)
        report.documents += 1
        yield Document(doc_id, text)


def _folder_id(rel: str, root: Path, policy: str, report: ReadReport) -> str | None:
    """The id of a file: its relative path, which must be UTF-8 (os.walk keeps other bytes as surrogates)."""
    if _id_not_utf8(rel) is None:
        return rel
    raw = os.fsencode(rel)
    message = (
        f"{root}: the file name {raw!r} is not UTF-8, and a file's id is its relative path; "
        "expected UTF-8 file names (on_invalid_utf8='replace' or 'skip' accepts it)"
    )
    return _apply_policy(policy, message, report, lambda: decode_counting(raw, drop=False))


def read_text_file(path: str | os.PathLike, *, on_invalid_utf8: str = "error", report: ReadReport | None = None) -> str:
    """The UTF-8 text of one continuous file (a play, a log); split it with ``CorpusPartitions.from_text``.

    Invalid UTF-8 follows ``on_invalid_utf8``: "error" names the byte offset; "replace" puts one
    U+FFFD per invalid byte sequence; "skip" drops only the invalid byte sequences (the rest of the
    text stays). ``report`` counts them (``replaced_sequences`` / ``dropped_sequences``).
    """
    _check_policy(on_invalid_utf8)
    path = Path(path)
    report = report if report is not None else ReadReport()
    report.source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read text file: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = (
            f"{path}: invalid UTF-8 at byte offset {exc.start} (byte 0x{raw[exc.start]:02x}); "
            f"expected UTF-8 text (on_invalid_utf8='replace' or 'skip' accepts it)"
        )
        if on_invalid_utf8 == "error":
            raise CorpusError(message) from None
        report.note(message)
        text, count = decode_counting(raw, drop=on_invalid_utf8 == "skip")
        if on_invalid_utf8 == "skip":
            report.dropped_sequences += count
        else:
            report.replaced_invalid_utf8 += 1
            report.replaced_sequences += count
    report.documents += 1
    return text


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


def check_columns_apply(path: str | os.PathLike, text_column: str = TEXT_COLUMN, id_column: str | None = None) -> None:
    """ConfigurationError when columns other than the defaults are named for a corpus that has none
    (a folder of text files, one continuous text)."""
    _check_columns(text_column, id_column)
    if text_column == TEXT_COLUMN and id_column is None:
        return
    path = Path(path)
    if is_continuous_text(path) or corpus_format(path) == "folder":
        kind = "a continuous .txt text" if is_continuous_text(path) else "a folder of text files"
        raise ConfigurationError(
            f"{path}: text_column/id_column apply to JSONL, Parquet and Arrow corpora, not {kind} "
            "(a file's text is its contents, its id its relative path)"
        )


def open_corpus(
    path: str | os.PathLike,
    *,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    text_column: str = TEXT_COLUMN,
    id_column: str | None = None,
    batch_documents: int = PARQUET_BATCH_SIZE,
    batch_chars: int | None = None,
    report: ReadReport | None = None,
) -> Iterator[list[Document]]:
    """The documents of a corpus at ``path``, in order, as lists of at most ``batch_documents``
    documents (and ``batch_chars`` characters unless one document is larger; None: no limit).

    The format is chosen by ``corpus_format`` (checked now, before the first batch is asked for);
    each reader takes the options that apply to it (Parquet strings are UTF-8 already; only JSONL
    has lines to skip; ``text_column``/``id_column`` apply to JSONL and Parquet/Arrow, and a folder
    of text files refuses them). Parquet is read in record batches of ``batch_documents`` rows, and a
    batch never spans two record batches. Memory: one batch (or one file of a folder).
    """
    kind = corpus_format(path)
    check_columns_apply(path, text_column, id_column)
    _check_policy(on_invalid_utf8)
    report = report if report is not None else ReadReport()
    if kind == "parquet":
        return (
            batch
            for rows in iter_parquet_batches(path, batch_size=batch_documents, text_column=text_column,
                                             id_column=id_column, report=report)
            for batch in _batched(rows, batch_documents, batch_chars)
        )
    if kind == "jsonl":
        docs = iter_jsonl(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                          text_column=text_column, id_column=id_column, report=report)
    else:
        docs = iter_folder(path, on_invalid_utf8=on_invalid_utf8, report=report)
    return _batched(docs, batch_documents, batch_chars)
