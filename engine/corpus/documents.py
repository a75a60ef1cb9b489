"""Documents, the read report and the invalid-UTF-8 policy that every corpus reader applies.

``Document`` is one ``(id, text)``; ``ReadReport`` counts what a read skipped, replaced or dropped
(nothing is lost silently); ``decode_counting`` and the policy helpers turn bytes into text under
``on_invalid_utf8`` ("error", "replace" or "skip"), counting every invalid sequence; ids made from
file and row (``made_id``) and the duplicate-id registry live here too, so each reader applies the
same rules.
"""

from __future__ import annotations

import codecs
import itertools
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from engine.corpus.unique import BUFFER_IDS, SeenIds, find_duplicate
from engine.errors import ConfigurationError, CorpusError

INVALID_UTF8_POLICIES = ("error", "replace", "skip")
TEXT_COLUMN = "text"
ID_COLUMN = "id"
MADE_ID_DIGITS = 6
_SURROGATE = re.compile("[\ud800-\udfff]")
PARQUET_BATCH_SIZE = 8192


@dataclass(frozen=True, slots=True)
class Document:
    """One source text with a stable, non-empty, unique id. ``text`` is a str, except for the long
    JSONL lines of a reader asked for ``long_lines``: a ``LongText`` left in its file."""

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

    def add(self, other: "ReadReport") -> None:
        """Count ``other``'s reading too (the report of a later shard read apart)."""
        for name in ("documents", "blank_lines", "skipped_bad_lines", "skipped_invalid_utf8", "replaced_invalid_utf8",
                     "replaced_sequences", "dropped_sequences"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.made_ids = self.made_ids or other.made_ids
        for message in other.first_problems:
            self.note(message)

    def notes(self) -> list[str]:
        """One line per thing a user should know about how the corpus was read."""
        notes = []
        if self.made_ids:
            notes.append(f'ids: made from file and row (no "{self.id_column or ID_COLUMN}" column)')
        return notes

    def summary(self) -> str:
        """``read: N documents; skipped ...; replaced ...`` with every count that is not zero."""
        parts = [f"read: {plural(self.documents, 'document')}"]
        skipped = []
        if self.skipped_bad_lines:
            skipped.append(f"{plural(self.skipped_bad_lines, 'bad line')} (--skip-bad-lines)")
        if self.skipped_invalid_utf8:
            skipped.append(f"{plural(self.skipped_invalid_utf8, 'document')} with invalid UTF-8")
        if skipped:
            parts.append("skipped " + ", ".join(skipped))
        if self.replaced_sequences:
            parts.append(f"replaced {plural(self.replaced_sequences, 'invalid UTF-8 sequence')} by U+FFFD "
                         f"in {plural(self.replaced_invalid_utf8, 'document')}")
        if self.dropped_sequences:
            parts.append(f"dropped {plural(self.dropped_sequences, 'invalid UTF-8 sequence')}")
        if self.blank_lines:
            parts.append(f"{plural(self.blank_lines, 'blank line')} passed over")
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


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``: a count and its noun (thousands separated)."""
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
    if doc_id.isascii():  # O(1), and no UTF-8 copy of a long text
        return None
    try:
        doc_id.encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        return exc


def unique_ids(records: Callable[[ReadReport], Iterator], report: ReadReport, where: str, *,
               batched: bool = False, buffer_ids: int = BUFFER_IDS) -> Iterator:
    """The documents of ``records(report)`` (``(Document, place)`` pairs, or lists of them if
    ``batched``), checked for duplicate ids in 8 bytes per id (``SeenIds``). A duplicate names both
    places: the records are read again (``records(ReadReport())``) to find them, which also tells a
    shared hash of two different ids (no error) from a duplicate. ``buffer_ids``: ``SeenIds``'s recent set."""
    seen = SeenIds(buffer_ids)

    def check(suspects: list[int]) -> None:
        again = (pair for item in records(ReadReport()) for pair in (item if batched else (item,)))
        found = find_duplicate(((doc.id, place) for doc, place in itertools.islice(again, len(seen))), suspects)
        if found is not None:
            doc_id, first, place = found
            raise CorpusError(f"{where}: duplicate id {doc_id!r} at {place} (first seen at {first}); ids must be unique")

    for item in records(report):
        pairs = item if batched else (item,)
        suspects = seen.add_many(doc.id for doc, _ in pairs)
        if suspects:
            check(suspects)
        yield [doc for doc, _ in pairs] if batched else item[0]
    suspects = seen.finish()
    if suspects:
        check(suspects)


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)
