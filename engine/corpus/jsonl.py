"""The JSONL reader: ``{"id": ..., "text": ...}`` objects, one per line, from a plain or compressed
file or from shards (``iter_jsonl``; the rules are in its docstring and in ``engine.corpus.readers``'s).

One line is held at a time (with ``long_lines``, not even one: ``engine.corpus.long_lines``); a
compressed file is read as a stream (``engine.corpus.compressed``), its line numbers and byte
offsets those of the decompressed text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from engine.corpus import long_lines as long_line_reader
from engine.corpus.compressed import DECOMPRESSION_ERRORS, decompression_message, open_binary
from engine.corpus.documents import (
    ID_COLUMN, TEXT_COLUMN, Document, ReadReport, _apply_policy, _check_columns, _check_policy, _decode,
    _id_not_utf8, _SURROGATE, made_id, unique_ids,
)
from engine.corpus.limits import DEFAULT_READ_LIMITS, ReadLimits
from engine.corpus.shards import CorpusShards, corpus_shards, is_glob
from engine.errors import CorpusError

__all__ = ["iter_jsonl", "json_field", "json_error_text"]


def iter_jsonl(
    path: str | os.PathLike,
    *,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    text_column: str = TEXT_COLUMN,
    id_column: str | None = None,
    report: ReadReport | None = None,
    long_lines: bool = False,
    shards: CorpusShards | None = None,
    made_ids: bool | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[Document]:
    """Stream ``{"id": str, "text": str}`` objects, one per line, as Documents.

    ``path`` is a JSONL file, plain or compressed (``c.jsonl.gz``, ``.zst``, ``.bz2``, ``.xz``: read
    as a stream, ``engine.corpus.compressed``), or a folder or glob of such shards
    (``engine.corpus.shards``; ``shards``: the shards already listed), read in order as one corpus.
    The text is the ``text_column`` field, the id the ``id_column`` field (a dotted name such as
    ``meta.body`` reaches into nested objects unless the line has that key itself); with
    ``id_column=None`` the ``"id"`` field, or, when the first object has no ``"id"``, an id made from
    the file's name (its relative path among shards) and the 1-based line number (``c.jsonl:000003``)
    for every line (a later line or shard with an ``"id"`` is then malformed: all lines have one or
    none). Blank lines are skipped and counted. Malformed lines (bad JSON, not an object, missing or
    non-string or empty id/text) raise ``CorpusError`` naming ``file:line``, or with
    ``skip_bad_lines`` are skipped and counted in ``report``. Duplicate ids always raise (both
    places, across shards too). Invalid UTF-8, and lone surrogates in ids and texts, follow
    ``on_invalid_utf8``: "error" (file, line, absolute byte offset of the decompressed stream),
    "replace" (U+FFFD, each sequence counted), or "skip" (drop the line, count it). NUL characters
    are ordinary text. A compressed file that is corrupt or truncated is a ``CorpusError`` naming
    the file and the line it stopped at.
    With ``long_lines``, the text of a line longer than ``limits.long_line_bytes`` stays in the file:
    it is a ``LongText`` (``engine.corpus.long_lines``), decoded part by part by whoever reads it.
    ``limits``: the reader's sizes (``ReadLimits``: the long-line scan's, the duplicate check's).
    ``made_ids`` (with ``id_column=None``): whether ids are made, decided already (by the first of
    several shards, for a reader of a later one alone); None: decided by the first object read.
    """
    _check_policy(on_invalid_utf8)
    _check_columns(text_column, id_column)
    path = Path(path)
    if shards is None:
        shards = (corpus_shards(path, "jsonl") if path.is_dir() or is_glob(path)
                  else CorpusShards(path, "jsonl", (path,), (path.name,), single=True))
    report = report if report is not None else ReadReport()
    report.source = str(path)
    report.text_column, report.id_column = text_column, id_column or ID_COLUMN
    files = shards.pairs()

    def records(counts: ReadReport) -> Iterator[tuple[Document, str]]:
        columns = _JsonColumns(text_column, id_column, files[0][1])
        if made_ids is not None and id_column is None:
            columns.made, columns.made_at = made_ids, "the corpus's first shard"
        for file, name in files:
            columns.name, columns.shard = name, None if shards.single else name
            yield from _jsonl_records(file, on_invalid_utf8, skip_bad_lines, columns, counts,
                                      limits if long_lines else None, place="" if shards.single else f"{name} ")

    yield from unique_ids(records, report, str(path), buffer_ids=limits.id_buffer)


def _jsonl_records(path: Path, on_invalid_utf8: str, skip_bad_lines: bool, columns: "_JsonColumns",
                   report: ReadReport, long_lines: ReadLimits | None = None,
                   place: str = "") -> Iterator[tuple[Document, str]]:
    """One file's documents for ``iter_jsonl``, each with its line (``"line N"``, after ``place``), before
    the duplicate check; ``long_lines``: the limits of the long-line scan, None for none. Decompression
    errors become CorpusErrors naming the file and line."""
    try:
        fh = open_binary(path)
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read corpus file: {exc.strerror or exc}") from None
    offset = lineno = 0
    try:
        with fh:
            # Each line's bytes and str are dropped once used: a long line is held once as its text
            # while the consumer works on it, not three times; with ``long_lines`` not even once.
            longest = long_lines.long_line_bytes if long_lines else 0
            while raw := fh.readline(longest) if long_lines else fh.readline():
                lineno += 1
                line_start, offset = offset, offset + len(raw)
                where = f"{path}:{lineno}"
                if long_lines and len(raw) == longest and raw[-1] != 0x0A:
                    found = long_line_reader.read_long_line(path, fh, line_start, raw,
                                                            lambda line: columns.parse(line, where, lineno), where,
                                                            long_lines)
                    # A lone surrogate in the id (or in a text that is no long string) follows the policy: read whole.
                    if found is not None and _id_not_utf8(found[0]) is None and (
                            not isinstance(found[1], str) or _id_not_utf8(found[1]) is None):
                        doc_id, text, offset = found
                        report.documents += 1
                        report.made_ids = columns.made
                        yield Document(doc_id, text), f"{place}line {lineno}"
                        continue
                    fh.seek(line_start)  # read whole: its errors and policies are a short line's
                    raw = fh.readline()
                    offset = line_start + len(raw)
                if not raw[:64].strip() and not raw.strip():  # no copy of a long line that is not blank
                    report.blank_lines += 1
                    continue
                before = (report.replaced_invalid_utf8, report.replaced_sequences)
                line = _decode(raw, where=where, base_offset=line_start, policy=on_invalid_utf8, report=report)
                del raw
                if line is None:
                    continue
                try:
                    doc_id, text = columns.parse(line, where, lineno)  # JSON ignores the trailing \r\n
                    del line
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
                report.documents += 1
                report.made_ids = columns.made
                yield Document(doc_id, text), f"{place}line {lineno}"
    except DECOMPRESSION_ERRORS as exc:
        raise CorpusError(decompression_message(path, exc, lineno)) from None


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


_MISSING = object()


def json_field(obj: dict, name: str):
    """The field ``name`` of a JSON object: the key itself, else, for a dotted name, the path of nested
    objects (``meta.body`` is ``obj["meta"]["body"]``); ``_MISSING`` where there is none."""
    if name in obj:
        return obj[name]
    if "." not in name:
        return _MISSING
    value = obj
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


class _JsonColumns:
    """Reads the id and text of one JSONL object; decides at the first object whether ids are made.
    ``name``: the file part of made ids (set per shard); ``shard``: the shard named in messages, if any."""

    def __init__(self, text_column: str, id_column: str | None, name: str):
        self.text, self.id, self.name = text_column, id_column or ID_COLUMN, name
        self.shard: str | None = None
        self.optional_id = id_column is None
        self.made: bool | None = None  # decided by the first object read
        self.made_at = ""

    def expected(self) -> str:
        return f'{{"{self.id}": str, "{self.text}": str}}'

    def _hint(self, key: str, obj: dict) -> str:
        """What to do about a missing field: the fields the line has, and the option naming another."""
        shown = ", ".join(json.dumps(k, ensure_ascii=False) for k in list(obj)[:6]) + (", ..." if len(obj) > 6 else "")
        has = f"the line has {shown}" if obj else "the line has no fields"
        if key == self.id and self.optional_id:
            # The first line decided: it had an id, so ids are read, not made.
            return (f'{has}; {self.made_at} has an "{self.id}", so every line needs one '
                    f'(ids are made from file and line only when no line has an "{self.id}")')
        option = "--text-column NAME (text_column=" if key == self.text else "--id-column NAME (id_column="
        return f"{has}: name the {'text' if key == self.text else 'id'} field with {option} in Python)"

    def parse(self, line: str, where: str, lineno: int) -> tuple[str, str]:
        obj = _parse_jsonl_object(line, where, f'{{"{self.id}": ..., "{self.text}": ...}}')
        if self.made is None:
            self.made = self.optional_id and self.id not in obj
            self.made_at = f"line {lineno}" + (f" of {self.shard}" if self.shard else "")
        if self.made and self.id in obj:
            raise CorpusError(
                f'{where}: has "{self.id}" but {self.made_at} has none, so ids are made from file and line; '
                f'expected every line with an "{self.id}" or none'
            )
        keys = (self.text,) if self.made else (self.id, self.text)
        values = []
        for key in keys:
            value = json_field(obj, key)
            if value is _MISSING:
                raise CorpusError(f'{where}: missing "{key}" (expected {self.expected()}); {self._hint(key, obj)}')
            if not isinstance(value, str):
                raise CorpusError(f'{where}: "{key}" must be a string, got {type(value).__name__}')
            values.append(value)
        if self.made:
            return made_id(self.name, lineno), values[0]
        if not values[0]:
            raise CorpusError(f'{where}: empty "{self.id}" (expected a non-empty string)')
        return values[0], values[1]


def _parse_jsonl_object(line: str, where: str, expected: str) -> dict:
    # strict=False lets raw control characters (NUL, tab) stand inside strings: they are ordinary text.
    try:
        obj = json.loads(line, strict=False, object_pairs_hook=_no_repeated_keys)
    except json.JSONDecodeError as exc:
        exc = _error_without_newline(line) or exc  # columns as on the line itself, not past its end
        raise CorpusError(f"{where}: malformed JSON ({json_error_text(exc)}); expected one object per line") from None
    except _RepeatedKey as exc:
        raise CorpusError(f'{where}: key "{exc.args[0]}" appears twice in one object; expected each key once') from None
    except RecursionError:
        raise CorpusError(f"{where}: JSON nested too deeply; expected one flat object per line") from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise CorpusError(f"{where}: malformed JSON ({exc}); expected one object per line") from None
    if not isinstance(obj, dict):
        raise CorpusError(f"{where}: expected a JSON object {expected}, got {type(obj).__name__}")
    return obj


def json_error_text(exc: json.JSONDecodeError) -> str:
    """``"<what> at column N"`` for a JSON error; Python's message may already end in "at"
    ("Unterminated string starting at"), which is not doubled."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def _error_without_newline(line: str) -> json.JSONDecodeError | None:
    """The JSON error of ``line`` without its line ending (a line is parsed with it, to spare a copy)."""
    try:
        json.loads(line.rstrip("\r\n"), strict=False)
    except json.JSONDecodeError as exc:
        return exc
    except (ValueError, RecursionError):
        return None
    return None


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
