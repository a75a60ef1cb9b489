"""Parquet and Arrow IPC corpus readers: record batches of ``id``/``text`` columns (or the columns
named), one batch in memory at a time, with the same id, UTF-8 and column rules as the other readers.

A column name with dots (``meta.body``) that is no column of the file names a field of a struct
column (``meta``'s field ``body``, any depth); a null struct is a null value. Shards (a folder or
glob of Parquet or Arrow files, a ``datasets`` save_to_disk folder: ``engine.corpus.shards``) are
read in order as one corpus.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from engine.corpus.documents import (
    ID_COLUMN, PARQUET_BATCH_SIZE, TEXT_COLUMN, Document, ReadReport, _check_columns, _id_not_utf8, made_id,
    unique_ids,
)
from engine.corpus.limits import DEFAULT_READ_LIMITS, ReadLimits
from engine.corpus.shards import ARROW_SUFFIXES, DATASET_STATE, CorpusShards, corpus_shards, file_kind, folder_files
from engine.errors import CorpusError


def _table_shards(path: Path) -> CorpusShards:
    """One Parquet or Arrow file (by its suffix), a ``datasets`` folder, every ``.parquet`` file below
    any other folder (``folder_files`` order; its other files are passed over), or a glob's shards."""
    if path.is_file():
        kind = "arrow" if path.suffix in ARROW_SUFFIXES else "parquet"
        return CorpusShards(path, kind, (path,), (path.name,), single=True)
    if path.is_dir() and not (path / DATASET_STATE).is_file():
        relative = [rel for rel in folder_files(path) if file_kind(rel) == "parquet"]
        if not relative:
            raise CorpusError(f"{path}: directory holds no .parquet files")
        return CorpusShards(path, "parquet", tuple(path / rel for rel in relative), tuple(relative))
    shards = corpus_shards(path)
    if shards.kind not in ("parquet", "arrow"):
        raise CorpusError(f"{path}: holds no Parquet or Arrow files (expected Parquet or Arrow shards)")
    return shards


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


def table_file(file: Path, *, arrow: bool):
    """``file`` opened for record batches (``iter_batches(batch_size=, columns=)``, ``schema_arrow``):
    an Arrow IPC file or stream (memory-mapped) when ``arrow``, else a Parquet file."""
    import pyarrow.parquet as pq

    return _ArrowIpcFile(file) if arrow else pq.ParquetFile(file)


def iter_parquet_batches(
    path: str | os.PathLike, *, batch_size: int = PARQUET_BATCH_SIZE, text_column: str = TEXT_COLUMN,
    id_column: str | None = None, report: ReadReport | None = None, skip_bad_rows: bool = False,
    shards: CorpusShards | None = None, made_ids: bool | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[list[Document]]:
    """Stream a Parquet or Arrow IPC (.arrow/.feather) file, or the shards of a folder or glob of them
    (``shards``: already listed), as lists of Documents.

    The columns ``text_column`` and ``id_column`` must be strings; with ``id_column=None`` the id
    column is ``id``, or, when the first file has no ``id`` column, ids are made from the file name
    (relative to a directory) and the 0-based row inside that file (``a.parquet:000000``); then
    every file must lack it. Nulls, empty ids and duplicate ids raise ``CorpusError`` naming the file
    and the 0-based row inside that file; with ``skip_bad_rows`` (``--skip-bad-lines``) a row with a
    null text, a null id or an empty id is left out instead, counted as a bad line in ``report``
    (made ids keep the rows' numbers). ``made_ids``: whether ids are made, decided already (by the
    first of several shards, for a reader of a later one alone); None: decided by the first file.
    ``limits``: the duplicate check's ``id_buffer`` (``ReadLimits``).
    """
    _check_columns(text_column, id_column)
    path = Path(path)
    report = report if report is not None else ReadReport()
    report.source = str(path)
    report.text_column, report.id_column = text_column, id_column or ID_COLUMN
    shards = shards if shards is not None else _table_shards(path)
    yield from unique_ids(lambda counts: _arrow_records(shards, batch_size, text_column, id_column, counts,
                                                        skip_bad_rows, made_ids), report, str(path), batched=True,
                          buffer_ids=limits.id_buffer)


def _arrow_records(shards: CorpusShards, batch_size: int, text_column: str, id_column: str | None,
                   report: ReadReport, skip_bad_rows: bool = False,
                   made_ids: bool | None = None) -> Iterator[list[tuple[Document, str]]]:
    """``iter_parquet_batches``'s batches, each document with its file and row, before the duplicate check."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    id_name = id_column or ID_COLUMN
    made = made_ids if id_column is None else None  # None: decided by the first file
    first = shards.files[0] if made is None else "the corpus's first shard"
    for file, name in zip(shards.files, shards.names):
        _check_file_name(file, name, shards.path)
        arrow = shards.kind == "arrow"
        try:
            pf = _ArrowIpcFile(file) if arrow else pq.ParquetFile(file)
            schema = pf.schema_arrow
        except (OSError, pa.ArrowException, ValueError) as exc:  # ValueError: footer strings that are not UTF-8
            kind = "Arrow IPC" if arrow else "Parquet"
            raise CorpusError(f"{file}: cannot read {kind} file: {exc}") from None
        has_id = schema.get_field_index(id_name) >= 0
        if made is None:
            made = id_column is None and not has_id
        elif made and has_id:
            raise CorpusError(
                f"{file}: has an {id_name!r} column but {first} has none, so ids are made from file and row; "
                f"expected every file with an {id_name!r} column or none"
            )
        columns = [text_column] if made else [id_name, text_column]
        paths = [_column_path(schema, column, columns, file) for column in columns]
        top = list(dict.fromkeys(p[0] for p in paths))  # the file's columns to read
        row = 0
        for batch in _checked_batches(pf, file, batch_size, top, lambda: row):  # reads the row reached so far
            batch = _leaves(batch, paths, columns)
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
                    docs.append((Document(doc_id, text), f"{name} row {row}"))
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


def _column_path(schema, column: str, columns: list[str], file: Path) -> tuple[str, ...]:
    """The path of ``column`` in ``schema``: the column itself, or a struct column and its fields
    (``meta.body``); CorpusError if there is none or the value is no string."""
    import pyarrow as pa

    if schema.get_field_index(column) >= 0:
        path, kind = (column,), schema.field(column).type
    else:
        parts, kind, path = column.split("."), None, ()
        if len(parts) > 1 and schema.get_field_index(parts[0]) >= 0:
            kind, path = schema.field(parts[0]).type, (parts[0],)
            for part in parts[1:]:
                if not pa.types.is_struct(kind) or kind.get_field_index(part) < 0:
                    kind = None
                    break
                kind, path = kind.field(part).type, path + (part,)
        if kind is None:
            raise CorpusError(
                f"{file}: missing column {column!r} (found: {', '.join(schema.names)}; expected {', '.join(columns)}"
                + ("; a dotted name names a field of a struct column)" if "." in column else ")")
            )
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise CorpusError(f"{file}: column {column!r} has type {kind}, expected string")
    return path


def _leaves(batch, paths: list[tuple[str, ...]], columns: list[str]):
    """``batch`` (the file's top-level columns) as one column per path, named ``columns``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = []
    for path in paths:
        values = batch.column(path[0])
        if len(path) > 1:
            values = pc.struct_field(values, list(path[1:]))
        arrays.append(values)
    return pa.RecordBatch.from_arrays(arrays, names=columns)


def _check_file_name(file: Path, name: str, root: Path) -> None:
    """Parquet and Arrow files are opened by name, and made ids hold it: it must be UTF-8."""
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
