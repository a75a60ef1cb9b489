"""Documents and the streaming corpus readers.

Readers are generators (``iter_jsonl`` in ``engine.corpus.jsonl``, ``iter_parquet`` and
``iter_parquet_batches`` in ``engine.corpus.arrow``, ``iter_folder``) that hold one line, one
record batch or one file at a time; ``open_corpus`` picks the reader by format (the one dispatch
that ``Corpus.from_path`` and ``prepare`` share) and hands out lists of documents. Every reader
checks ids (present, non-empty, unique) and UTF-8 as it goes and raises ``CorpusError`` with the
file, the 1-based line (JSONL) or row (Parquet), and for bad UTF-8 the absolute byte offset of the
first bad byte in the file. Cost: one pass over the input, plus one dict entry per id for the
duplicate check. ``read_text_file`` reads one continuous text (split it by position with
``CorpusPartitions.from_text``).

Shards and compression: a corpus path is one file, plain or compressed, a folder or glob of
shards, or a ``datasets`` folder (``engine.corpus.shards``, ``engine.corpus.compressed``); shards are
read in order as one corpus, under the same rules as one file (ids unique across them all).

Columns: JSONL and Parquet/Arrow read the text from ``text_column`` (default ``"text"``) and the id
from ``id_column``; a dotted name (``meta.body``) names a nested field (a JSON object's, a struct
column's) unless a field of that whole name exists. With ``id_column=None`` (the default) the id
is the ``"id"`` field when the first record has one; when it has none, every id is *made from
file and row*: ``f"{name}:{row:06d}"``, where ``name`` is the file name (for shards of a folder or
glob, the file's POSIX path relative to the folder) and ``row`` is counted the way error messages
count it: the 1-based line of a JSONL file (blank lines included; a compressed file's lines as
decompressed), the 0-based row inside a Parquet or Arrow file. So ``c.jsonl:000003`` is line 3 of
``c.jsonl`` and ``part/a.parquet:000000`` is the first row of ``part/a.parquet``;
``ReadReport.made_ids`` records it. A named ``id_column`` must exist. Ids must be valid UTF-8: a
lone surrogate (JSON ``"\\ud800"``) or a file name that is not
UTF-8 follows ``on_invalid_utf8`` like text does (the default, "error", names the file and line).

Counts: ``ReadReport`` counts every blank line, skipped line, skipped document, and every invalid
UTF-8 byte sequence (or lone surrogate) replaced by U+FFFD or dropped, so nothing is lost silently.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator

from engine.corpus.arrow import iter_parquet, iter_parquet_batches
from engine.corpus.documents import (
    ID_COLUMN, INVALID_UTF8_POLICIES, PARQUET_BATCH_SIZE, TEXT_COLUMN, Document, ReadReport,
    _apply_policy, _check_columns, _check_policy, _decode, _id_not_utf8, unique_ids,
    decode_counting, made_id,
)
from engine.corpus import long_lines as long_line_reader
from engine.corpus.jsonl import iter_jsonl, json_error_text, json_field
from engine.corpus.limits import DEFAULT_READ_LIMITS, ReadLimits
from engine.corpus.shards import (
    ARROW_SUFFIXES, CORPUS_FORMATS, CORPUS_FORMS, CorpusShards, corpus_shards, folder_files,
)
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
    "read_shards",
    "check_columns_apply",
    "decode_counting",
    "made_id",
    "is_continuous_text",
    "CORPUS_FORMATS",
    "CORPUS_FORMS",
    "json_error_text",
    "json_field",
    "ARROW_SUFFIXES",
    "INVALID_UTF8_POLICIES",
    "PARQUET_BATCH_SIZE",
    "TEXT_COLUMN",
    "ID_COLUMN",
]


def iter_folder(
    path: str | os.PathLike, *, on_invalid_utf8: str = "error", report: ReadReport | None = None,
    long_files: bool = False, exclude: Iterable[str | os.PathLike] = (), limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[Document]:
    """Every regular, non-hidden file below ``path`` (sorted by relative POSIX path) as a Document.

    id = relative POSIX path, text = the UTF-8 contents. Hidden means any path component starting
    with "."; symlinked directories are not followed. Engine's own outputs are no documents: the
    folders (and files) in ``exclude`` (``prepare`` passes its ``--out`` and ``--splits``), every token store (a
    folder holding ``_engine.json``) and every ``prepare`` output folder (one holding ``store.lock``
    or ``store/_engine.json``) are left out, so a corpus folder may hold the outputs of runs over it.
    Bad UTF-8 in a file names the file and byte
    offset; a file name that is not UTF-8 (it would be the id) names the file. Both follow
    ``on_invalid_utf8``: "error", "replace" (U+FFFD, counted) or "skip" (the file is left out, counted).
    With ``long_files``, the text of a UTF-8 file longer than ``limits.long_line_bytes`` stays in it (a
    ``LongText``). ``limits``: the reader's sizes (``ReadLimits``).
    """
    _check_policy(on_invalid_utf8)
    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"{root}: not a directory (expected a folder of text files)")
    report = report if report is not None else ReadReport()
    report.source = str(root)
    yield from unique_ids(lambda counts: _folder_records(root, folder_files(root, exclude), on_invalid_utf8, counts,
                                                         limits if long_files else None),
                          report, str(root), buffer_ids=limits.id_buffer)


def _folder_records(root: Path, relative: list[str], on_invalid_utf8: str,
                    report: ReadReport, long_files: ReadLimits | None = None) -> Iterator[tuple[Document, str]]:
    """``iter_folder``'s documents, each with its file, before the duplicate check (``long_files``: the
    limits a long file is left in its file with, None: every file read whole)."""
    for rel in relative:
        file = root / rel
        doc_id = _folder_id(rel, root, on_invalid_utf8, report)
        if doc_id is None:
            continue
        text = None
        try:
            size = file.stat().st_size if long_files else 0
            if long_files is not None and size > long_files.long_line_bytes:
                text = long_line_reader.read_long_file(file, size, str(file), long_files)
            raw = file.read_bytes() if text is None else b""
        except OSError as exc:
            raise CorpusError(f"{file}: cannot read corpus file: {exc.strerror}") from None
        before = (report.replaced_invalid_utf8, report.replaced_sequences)
        if text is None:
            text = _decode(raw, where=str(file), base_offset=0, policy=on_invalid_utf8, report=report)
        if text is None:
            continue
        if doc_id != rel and report.replaced_invalid_utf8 > before[0]:
            report.replaced_invalid_utf8 -= 1  # name and contents replaced: one document
        report.documents += 1
        yield Document(doc_id, text), repr(os.fsencode(rel)) if doc_id != rel else doc_id


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

def is_continuous_text(path: str | os.PathLike) -> bool:
    """A ``.txt`` file is one continuous text (read whole by ``read_text_file``), not a corpus of documents."""
    path = Path(path)
    return path.is_file() and path.suffix == ".txt"


def corpus_format(path: str | os.PathLike, corpus_format: str | None = None) -> str:
    """The reader for ``path`` (``engine.corpus.shards``): "jsonl" (``.jsonl``/``.json``, plain or
    compressed), "parquet", "arrow" (``.arrow``/``.feather``/``.ipc``, a ``datasets`` folder), each
    also for a folder or glob of such shards, or "folder" (a folder of text files, one document
    each). ``corpus_format`` overrides the guess.

    CorpusError for a path that does not exist (and is no glob), a suffix of no format, or a folder
    that mixes kinds (a continuous ``.txt`` file is no multi-document corpus: read it with ``read_text_file``).
    """
    return corpus_shards(path, corpus_format).kind


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


def check_columns_apply(path: str | os.PathLike, text_column: str = TEXT_COLUMN, id_column: str | None = None,
                        corpus_format: str | None = None, *, shards: CorpusShards | None = None) -> None:
    """ConfigurationError when columns other than the defaults are named for a corpus that has none
    (a folder of text files, one continuous text). ``shards``: the corpus's, when already listed."""
    _check_columns(text_column, id_column)
    if text_column == TEXT_COLUMN and id_column is None:
        return
    path = Path(path)
    continuous = corpus_format is None and is_continuous_text(path)
    if continuous or (shards or corpus_shards(path, corpus_format)).kind == "folder":
        kind = "a continuous .txt text" if continuous else "a folder of text files"
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
    long_lines: bool = False,
    exclude: Iterable[str | os.PathLike] = (),
    corpus_format: str | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[list[Document]]:
    """The documents of a corpus at ``path``, in order, as lists of at most ``batch_documents``
    documents (and ``batch_chars`` characters unless one document is larger; None: no limit).

    The format and the shards are chosen by ``engine.corpus.shards.corpus_shards`` (checked now,
    before the first batch is asked for; ``corpus_format`` overrides the guess): one file, plain or
    compressed, a folder or glob of shards read in order as one corpus, a ``datasets`` folder, or a
    folder of text files. Each reader takes the options that apply to it (Parquet strings are UTF-8
    already; JSONL has lines to skip, Parquet rows with nulls; ``text_column``/``id_column``, dotted
    for nested fields, apply to JSONL and Parquet/Arrow, and a folder of text files refuses them).
    Parquet is read in record batches of ``batch_documents`` rows, and a batch never spans two
    record batches. Memory: one batch (or one file of a folder), whatever the compression.
    ``long_lines``: a long JSONL line's (or folder file's) text stays in the file (``iter_jsonl``, ``iter_folder``).
    ``exclude``: paths a folder corpus (or a folder of shards) leaves out. ``limits``: the readers'
    sizes (``ReadLimits``: the long-line scan's, the duplicate check's).
    """
    shards = corpus_shards(path, corpus_format, exclude=exclude)
    check_columns_apply(path, text_column, id_column, corpus_format, shards=shards)  # the folder walked once
    return read_shards(shards, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                       text_column=text_column, id_column=id_column, batch_documents=batch_documents,
                       batch_chars=batch_chars, report=report, long_lines=long_lines, exclude=exclude, limits=limits)


def read_shards(
    shards: CorpusShards,
    *,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    text_column: str = TEXT_COLUMN,
    id_column: str | None = None,
    batch_documents: int = PARQUET_BATCH_SIZE,
    batch_chars: int | None = None,
    report: ReadReport | None = None,
    long_lines: bool = False,
    exclude: Iterable[str | os.PathLike] = (),
    made_ids: bool | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[list[Document]]:
    """``open_corpus`` of shards already listed (``corpus_shards``): the whole corpus, or some of its
    shards (``made_ids``: whether ids are made, as the corpus's first shard decided)."""
    _check_policy(on_invalid_utf8)
    report = report if report is not None else ReadReport()
    path = shards.path
    if shards.kind in ("parquet", "arrow"):
        return (
            batch
            for rows in iter_parquet_batches(path, batch_size=batch_documents, text_column=text_column,
                                             id_column=id_column, report=report, skip_bad_rows=skip_bad_lines,
                                             shards=shards, made_ids=made_ids, limits=limits)
            for batch in _batched(rows, batch_documents, batch_chars)
        )
    if shards.kind == "jsonl":
        docs = iter_jsonl(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                          text_column=text_column, id_column=id_column, report=report, long_lines=long_lines,
                          shards=shards, made_ids=made_ids, limits=limits)
    else:
        docs = iter_folder(path, on_invalid_utf8=on_invalid_utf8, report=report, long_files=long_lines, exclude=exclude,
                           limits=limits)
    return _batched(docs, batch_documents, batch_chars)
