"""Parquet and Arrow IPC corpus readers: record batches of ``id``/``text`` columns (or the columns
named), one batch in memory at a time, with the same id, UTF-8 and column rules as the other readers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from engine.corpus.documents import (
    ID_COLUMN, PARQUET_BATCH_SIZE, TEXT_COLUMN, Document, ReadReport, _check_columns, _id_not_utf8, _is_hidden,
    made_id, unique_ids,
)
from engine.errors import CorpusError

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
    id_column: str | None = None, report: ReadReport | None = None, skip_bad_rows: bool = False,
) -> Iterator[list[Document]]:
    """Stream a Parquet or Arrow IPC (.arrow/.feather) file, or every ``.parquet`` below a directory
    (sorted), as lists of Documents.

    The columns ``text_column`` and ``id_column`` must be strings; with ``id_column=None`` the id
    column is ``id``, or, when the first file has no ``id`` column, ids are made from the file name
    (relative to a directory) and the 0-based row inside that file (``a.parquet:000000``); then
    every file must lack it. Nulls, empty ids and duplicate ids raise ``CorpusError`` naming the file
    and the 0-based row inside that file; with ``skip_bad_rows`` (``--skip-bad-lines``) a row with a
    null text, a null id or an empty id is left out instead, counted as a bad line in ``report``
    (made ids keep the rows' numbers).
    """
    _check_columns(text_column, id_column)
    path = Path(path)
    report = report if report is not None else ReadReport()
    report.source = str(path)
    report.text_column, report.id_column = text_column, id_column or ID_COLUMN
    yield from unique_ids(lambda counts: _arrow_records(path, batch_size, text_column, id_column, counts,
                                                        skip_bad_rows), report, str(path), batched=True)


def _arrow_records(path: Path, batch_size: int, text_column: str, id_column: str | None,
                   report: ReadReport, skip_bad_rows: bool = False) -> Iterator[list[tuple[Document, str]]]:
    """``iter_parquet_batches``'s batches, each document with its file and row, before the duplicate check."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    id_name = id_column or ID_COLUMN
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
                problem = None
                if doc_id is None or text is None:
                    problem = f"null {'id' if doc_id is None else 'text'} (expected a string)"
                elif not doc_id:
                    problem = 'empty "id" (expected a non-empty string)'
                if problem is None:
                    docs.append((Document(doc_id, text), f"{file.name} row {row}"))
                elif skip_bad_rows:
                    report.skipped_bad_lines += 1
                    report.note(f"{file}: row {row}: {problem}")
                else:
                    raise CorpusError(f"{file}: row {row}: {problem}; --skip-bad-lines (skip_bad_lines=True) "
                                      "leaves such rows out")
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
