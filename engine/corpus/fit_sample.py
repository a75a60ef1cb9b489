"""The fit sample: the part of the train partition a fit reads when it is bounded (``--fit-sample BYTES``).

The rule (cited as "the fit sample rule of engine.corpus.fit_sample"):

- The sample of ``BYTES`` is the start of the train partition's text, ``BYTES`` UTF-8 bytes of it at
  most: the training documents in partition order (the order the corpus is read in: shards in sorted
  order, rows and lines in file order; a continuous text's train part) are taken whole while the
  bytes taken stay ``<= BYTES``; the first document that would pass ``BYTES`` is cut to its longest
  prefix of whole characters (code points; a lone surrogate counts three bytes, as in the store)
  whose bytes fit in what is left, and no document after it is taken. A document of 0 bytes left
  after the cut is not taken (so the sample never ends in an empty text).
- Only training documents are read into the sample; validation and test documents neither enter
  it nor use up any of ``BYTES`` (the split rules of ``engine.corpus.splits``).
- The sample depends on the documents and ``BYTES`` only: read batches, encode chunks and thread
  counts never move the cut, so a fit on the sample equals the fit on a corpus whose train
  partition is the sample written out (the documents taken, the last one cut).
- ``BYTES`` is a whole number ``1..MAX_FIT_SAMPLE_BYTES`` (2^48, 256 TiB; ``engine.checks.byte_count``:
  a number of bytes, or with a unit such as ``64MB`` or ``1GiB``).

``FitSample(limit)`` applies the rule to documents given one at a time in partition order (``take``);
``summary()`` is what ``report.json`` records as ``fit_sample``. A text left in its file (a long JSONL
line, ``engine.corpus.long_lines.LongText``) is cut as it is read (``CutText``), never read whole: the one
that crosses ``BYTES`` is read once up to the cut to measure its prefix, then again by whoever counts it.
"""

from __future__ import annotations

from typing import Iterator

from engine.checks import MAX_FIT_SAMPLE_BYTES
from engine.corpus.documents import plural
from engine.utf8 import utf8_length

__all__ = ["MAX_FIT_SAMPLE_BYTES", "FitSample", "CutText", "utf8_prefix", "describe_fit_sample"]


def utf8_prefix(text: str, nbytes: int) -> str:
    """The longest prefix of whole characters of ``text`` whose UTF-8 bytes are ``<= nbytes``."""
    if text.isascii():
        return text[:nbytes]
    data = text.encode("utf-8", "surrogatepass")
    if nbytes >= len(data):
        return text
    end = max(nbytes, 0)
    while end > 0 and data[end] & 0xC0 == 0x80:  # inside a character: back to its first byte
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass")


class CutText:
    """The first ``nbytes`` UTF-8 bytes (whole characters) of a text read part by part (``parts()``)."""

    __slots__ = ("text", "utf8_bytes")

    def __init__(self, text, nbytes: int):
        self.text, self.utf8_bytes = text, nbytes

    def parts(self) -> Iterator[str]:
        left = self.utf8_bytes
        for part in self.text.parts():
            size = utf8_length(part)
            if size > left:
                part = utf8_prefix(part, left)
                if part:
                    yield part
                return
            left -= size
            yield part

    def reporting(self, progress) -> "CutText":
        """The same prefix, its text calling ``progress(characters)`` after each part read."""
        return CutText(self.text.reporting(progress), self.utf8_bytes)

    def __repr__(self) -> str:
        return f"CutText({self.text!r}, first {self.utf8_bytes:,} bytes)"

    def __str__(self) -> str:
        return "".join(self.parts())


class FitSample:
    """The fit sample rule (the module docstring) over training documents given in partition order.

    ``take(doc_id, text)``: the part of ``text`` in the sample (the text itself, a prefix of it, or None
    once the sample is full). The counts of what was taken: ``documents``, ``bytes``, ``cut_document``
    (the id of the document cut, None if none was), ``left_out`` (training documents with text that
    were not taken, whole or in part).
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.documents = 0
        self.bytes = 0
        self.cut_document: str | None = None
        self.left_out = 0
        self.full = False

    def take(self, doc_id: str, text):
        """``text`` (a str or a text read part by part), or its prefix in the sample, or None."""
        if self.full:
            if len(text):
                self.left_out += 1
            return None
        size = utf8_length(text)
        left = self.limit - self.bytes
        if size <= left:
            self.documents += 1
            self.bytes += size
            self.full = self.bytes == self.limit
            return text
        self.full = True
        self.left_out += 1  # the rest of this document
        cut = utf8_prefix(text, left) if isinstance(text, str) else None
        nbytes = utf8_length(cut) if cut is not None else self._part_prefix_bytes(text, left)
        if nbytes == 0:
            return None
        self.documents += 1
        self.bytes += nbytes
        self.cut_document = doc_id
        return cut if cut is not None else CutText(text, nbytes)

    @staticmethod
    def _part_prefix_bytes(text, left: int) -> int:
        """Bytes of the prefix of whole characters of a part-by-part text that fits in ``left`` bytes."""
        taken = 0
        for part in text.parts():
            size = utf8_length(part)
            if taken + size > left:
                return taken + utf8_length(utf8_prefix(part, left - taken))
            taken += size
        return taken

    def summary(self) -> dict:
        """What ``report.json`` records: the bound, what the sample holds, and whether it is the whole
        train partition (``left_out`` 0)."""
        return {"limit_bytes": self.limit, "bytes": self.bytes, "documents": self.documents,
                "cut_document": self.cut_document, "left_out_documents": self.left_out,
                "whole_train_partition": self.left_out == 0}


def describe_fit_sample(sample: dict) -> str:
    """The summary line of a ``FitSample.summary()``: ``fit sample: 2,000 of at most 2,000 bytes, ...``."""
    line = (f"fit sample: {sample['bytes']:,} of at most {sample['limit_bytes']:,} bytes, "
            f"{plural(sample['documents'], 'training document')}")
    if sample["cut_document"] is not None:
        line += f" (the last, {sample['cut_document']}, cut)"
    if sample["whole_train_partition"]:
        return line + ": the whole train partition"
    return line + f"; {plural(sample['left_out_documents'], 'training document')} left out, whole or in part"
