"""Chat and instruction records read from JSONL, Parquet or Arrow IPC, checked field by field.

Formats (``--format``), detected from the first record's fields when not given, as TRL does:
``messages`` when it has the messages column (default ``"messages"``); ``prompt-completion`` when it
has both the prompt and completion columns; else ``text`` (the plain-document path of ``prepare``).

- ``messages``: a non-empty list of ``{"role", "content"}`` objects; ``role`` one of ``system``,
  ``user``, ``assistant``, ``tool`` (others only with ``extra_roles``), ``content`` a string; other
  keys (``tool_calls``, ``name``...) are passed to the template as they are.
- ``prompt-completion``: two strings, or two such message lists (conversational prompt/completion,
  the completion holding the assistant turns).

Every record has an id: the ``id_column`` (default the ``"id"`` field when the first record has
one) or one made from file and row like the text readers (``c.jsonl:000003`` = line 3). Every
error names the file and line (JSONL, 1-based) or row (Parquet/Arrow, 0-based), the field, what was
found and what was expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from engine.corpus.documents import made_id
from engine.corpus.arrow import table_file
from engine.corpus.compressed import decompression_message, open_binary
from engine.corpus.limits import DEFAULT_READ_LIMITS, ReadLimits
from engine.corpus.long_lines import scan_line
from engine.corpus.readers import corpus_format
from engine.corpus.shards import corpus_shards
from engine.errors import CorpusError

__all__ = ["FORMATS", "ROLES", "ChatRecord", "detect_format", "iter_records", "check_messages"]

FORMATS = ("text", "messages", "prompt-completion")
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ChatRecord:
    id: str
    where: str  # "file:line" or "file: row N"
    messages: list | None = None  # messages format, or a conversational prompt + completion joined
    prompt: Any = None  # prompt-completion: str, or a message list
    completion: Any = None


def _rows(path: Path, *, errors: str = "strict") -> Iterator[tuple[str, int, dict]]:
    """(where, row number for made ids, record) of every record, in order: the shards of any corpus form
    ``engine.corpus.shards`` reads (a file, plain or compressed; a folder or glob of shards; a datasets
    folder). ``errors``: how invalid UTF-8 in a JSONL line is decoded ("strict": a CorpusError naming it)."""
    shards = corpus_shards(path)
    if shards.kind == "folder":
        raise CorpusError(f"{path}: chat data is read from JSONL, Parquet or Arrow files, not a folder of texts")
    for file, name in shards.pairs():
        if shards.kind == "jsonl":
            try:
                with open_binary(file) as fh:
                    for lineno, raw in enumerate(fh, 1):
                        where = f"{file}:{lineno}"
                        try:
                            line = raw.decode("utf-8", errors=errors)
                        except UnicodeDecodeError as exc:
                            raise CorpusError(f"{where}: invalid UTF-8 at byte {exc.start} of the line; chat records "
                                              "must be UTF-8") from None
                        if not line.strip():
                            continue
                        try:
                            obj = json.loads(line)
                        except json.JSONDecodeError as exc:
                            raise CorpusError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
                        except RecursionError:
                            raise CorpusError(f"{where}: JSON nested too deeply") from None
                        if not isinstance(obj, dict):
                            raise CorpusError(f"{where}: expected a JSON object, got {type(obj).__name__}")
                        yield where, lineno, obj, name
            except (OSError, EOFError, ValueError) as exc:
                if isinstance(exc, CorpusError):
                    raise
                raise CorpusError(decompression_message(file, exc)) from None
        else:
            import pyarrow as pa

            try:
                table = table_file(file, arrow=shards.kind == "arrow")
                batches = table.iter_batches(batch_size=1024, columns=table.schema_arrow.names)
                row = 0
                for batch in batches:
                    for obj in batch.to_pylist():
                        yield f"{file}: row {row}", row, obj, name
                        row += 1
            except (OSError, pa.ArrowException) as exc:
                raise CorpusError(f"{file}: cannot read ({exc})") from None


def detect_format(path: str | Path, *, messages_column: str = "messages", prompt_column: str = "prompt",
                  completion_column: str = "completion", limits: ReadLimits = DEFAULT_READ_LIMITS) -> str:
    """The format of a corpus from its first record's fields (``text`` for a folder or a .txt file, and
    for a first record that does not parse: the reader of that format then says why); ``limits``: the
    sizes a long first line is scanned with."""
    path = Path(path)
    try:
        if corpus_format(path) == "folder":
            return "text"
        keys = _first_keys(path, limits)
    except CorpusError:
        return "text"
    if keys is None:
        return "text"
    if messages_column in keys:
        return "messages"
    if prompt_column in keys and completion_column in keys:
        return "prompt-completion"
    return "text"


def _first_keys(path: Path, limits: ReadLimits) -> set | None:
    """The field names of the first record: a Parquet or Arrow shard's columns; the keys of the first
    non-blank JSONL line, parsed as the text reader parses it (raw control characters are text). A
    line longer than ``limits.long_line_bytes`` is read as that reader reads it, by its skeleton
    (``engine.corpus.long_lines``), never whole. None when it is no JSON object."""
    shards = corpus_shards(path)
    for file, _ in shards.pairs():
        if shards.kind != "jsonl":
            return set(table_file(file, arrow=shards.kind == "arrow").schema_arrow.names)
        try:
            with open_binary(file) as fh:
                start = 0
                while True:
                    head = fh.readline(limits.long_line_bytes)
                    if not head:
                        break
                    line = head
                    if len(head) == limits.long_line_bytes and not head.endswith(b"\n"):
                        scanned = scan_line(fh, start, head, limits)
                        if scanned is None:
                            return None
                        line = scanned[0]
                    start += len(head)
                    text = line.decode("utf-8", errors="replace")
                    if not text.strip():
                        continue
                    try:
                        obj = json.loads(text, strict=False)
                    except (ValueError, RecursionError):
                        return None
                    return set(obj) if isinstance(obj, dict) else None
        except (OSError, EOFError, ValueError) as exc:
            raise CorpusError(decompression_message(file, exc)) from None
    return None


def check_messages(value: Any, where: str, field: str, *, extra_roles: tuple[str, ...] = ()) -> list[dict]:
    """``value`` as a checked message list; CorpusError naming the message and field otherwise."""
    if isinstance(value, str):
        try:
            value = json.loads(value)  # a column of JSON strings
        except json.JSONDecodeError:
            raise CorpusError(f'{where}: field "{field}" is a string that is not a JSON list of messages; '
                              'expected a list of {"role", "content"} objects') from None
    if not isinstance(value, list):
        raise CorpusError(f'{where}: field "{field}" is {type(value).__name__}, expected a list of '
                          '{"role", "content"} messages')
    if not value:
        raise CorpusError(f'{where}: field "{field}" is an empty conversation; expected at least one message')
    allowed = ROLES + tuple(extra_roles)
    messages = []
    for i, message in enumerate(value):
        at = f'{where}: field "{field}" message {i}'
        if not isinstance(message, dict):
            raise CorpusError(f'{at} is {type(message).__name__}, expected a {{"role", "content"}} object')
        for key in ("role", "content"):
            if message.get(key) is None and not (key == "content" and message.get("tool_calls")):
                raise CorpusError(f'{at} has no "{key}"; every message needs a "role" and a "content"')
        role = message["role"]
        if role not in allowed:
            raise CorpusError(f'{at}: unknown role {role!r}; expected one of {", ".join(allowed)}')
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise CorpusError(f'{at}: "content" is {type(content).__name__}, expected a string')
        messages.append({k: v for k, v in message.items() if v is not None})
    return messages


def iter_records(path: str | Path, fmt: str, *, messages_column: str = "messages", prompt_column: str = "prompt",
                 completion_column: str = "completion", id_column: str | None = None,
                 extra_roles: tuple[str, ...] = ()) -> Iterator[ChatRecord]:
    """The checked records of ``path`` in ``fmt`` (``messages`` or ``prompt-completion``), in order."""
    if fmt not in ("messages", "prompt-completion"):
        raise CorpusError(f"--format {fmt!r}: chat records are messages or prompt-completion")
    path = Path(path)
    id_key = id_column or "id"
    made: bool | None = None
    conversational: tuple[bool, str] | None = None  # prompt-completion: message lists or texts, decided first
    for where, row, obj, name in _rows(path):
        if made is None:
            made = id_column is None and "id" not in obj
        if made:
            doc_id = made_id(name, row)
        else:
            doc_id = obj.get(id_key)
            if not isinstance(doc_id, str) or not doc_id:
                raise CorpusError(f'{where}: field "{id_key}" is {doc_id!r}; expected a non-empty string id '
                                  "(every record needs one when the first has one)")
        if fmt == "messages":
            if messages_column not in obj:
                raise CorpusError(f'{where}: no field "{messages_column}"; expected a list of messages '
                                  "(--messages-column names another field)")
            yield ChatRecord(doc_id, where, check_messages(obj[messages_column], where, messages_column,
                                                           extra_roles=extra_roles))
            continue
        for column, option in ((prompt_column, "--prompt-column"), (completion_column, "--completion-column")):
            if column not in obj:
                raise CorpusError(f'{where}: no field "{column}"; expected a prompt and a completion ({option} '
                                  "names another field)")
        prompt, completion = obj[prompt_column], obj[completion_column]
        lists = not isinstance(prompt, str)
        if conversational is None:
            conversational = (lists, where)
        elif conversational[0] != lists:
            raise CorpusError(f'{where}: field "{prompt_column}" is {type(prompt).__name__}, but {conversational[1]} '
                              f"holds {'message lists' if conversational[0] else 'texts'}; a corpus holds one kind of "
                              "prompt/completion")
        if isinstance(prompt, str) and isinstance(completion, str):
            yield ChatRecord(doc_id, where, None, prompt, completion)
            continue
        if isinstance(prompt, str) or isinstance(completion, str):
            raise CorpusError(f'{where}: fields "{prompt_column}" and "{completion_column}" are '
                              f"{type(prompt).__name__} and {type(completion).__name__}; expected two strings or "
                              "two message lists")
        p = check_messages(prompt, where, prompt_column, extra_roles=extra_roles)
        c = check_messages(completion, where, completion_column, extra_roles=extra_roles)
        yield ChatRecord(doc_id, where, p + c, p, c)
