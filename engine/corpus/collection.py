"""``Corpus``: the documents of a corpus in memory, in order, indexed by id."""

from __future__ import annotations

import os
from typing import Iterable, Iterator, Sequence, overload

from engine.corpus.readers import (
    PARQUET_BATCH_SIZE, TEXT_COLUMN, Document, ReadReport, iter_folder, iter_jsonl, iter_parquet, open_corpus,
)
from engine.errors import CorpusError

__all__ = ["Corpus"]


class Corpus(Sequence[Document]):
    """An ordered sequence of Documents with unique, non-empty ids; ``report`` tells what the reader skipped."""

    def __init__(self, documents: Iterable[Document], *, source: str | None = None, report: ReadReport | None = None):
        self._documents: list[Document] = list(documents)
        for i, doc in enumerate(self._documents):
            if not isinstance(doc, Document):
                raise CorpusError(f"corpus item {i} is {type(doc).__name__}, expected Document")
        self._index = self.check_ids([doc.id for doc in self._documents])
        self.source = source
        self.report = report if report is not None else ReadReport(source=source or "", documents=len(self._documents))

    @staticmethod
    def check_ids(ids: list) -> dict[str, int]:
        """``{id: position}`` of ``ids``; CorpusError for an empty, non-string, non-UTF-8 or repeated id."""
        index: dict[str, int] = {}
        for i, doc_id in enumerate(ids):
            if not isinstance(doc_id, str) or not doc_id:
                raise CorpusError(f"corpus document {i}: empty or non-string id {doc_id!r}")
            if not doc_id.isascii():
                try:
                    doc_id.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise CorpusError(
                        f"corpus document {i}: id {doc_id!r} holds a lone surrogate at character offset {exc.start}; "
                        "expected an id that is valid UTF-8"
                    ) from None
            first = index.setdefault(doc_id, i)
            if first != i:
                raise CorpusError(f"duplicate id {doc_id!r} at documents {first} and {i}; ids must be unique")
        return index

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike, *, on_invalid_utf8: str = "error", skip_bad_lines: bool = False,
                   text_column: str = TEXT_COLUMN, id_column: str | None = None) -> "Corpus":
        report = ReadReport()
        docs = list(iter_jsonl(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                               text_column=text_column, id_column=id_column, report=report))
        return cls(docs, source=str(path), report=report)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike, *, batch_size: int = PARQUET_BATCH_SIZE,
                     text_column: str = TEXT_COLUMN, id_column: str | None = None) -> "Corpus":
        report = ReadReport()
        return cls(iter_parquet(path, batch_size=batch_size, text_column=text_column, id_column=id_column,
                                report=report), source=str(path), report=report)

    @classmethod
    def from_folder(cls, path: str | os.PathLike, *, on_invalid_utf8: str = "error") -> "Corpus":
        report = ReadReport()
        return cls(iter_folder(path, on_invalid_utf8=on_invalid_utf8, report=report), source=str(path), report=report)

    @classmethod
    def from_path(cls, path: str | os.PathLike, *, on_invalid_utf8: str = "error", skip_bad_lines: bool = False,
                  text_column: str = TEXT_COLUMN, id_column: str | None = None,
                  batch_size: int = PARQUET_BATCH_SIZE, exclude: Iterable[str | os.PathLike] = (),
                  corpus_format: str | None = None) -> "Corpus":
        """Every document ``open_corpus(path)`` reads: ``.jsonl``/``.json`` lines (plain or compressed),
        ``.parquet`` or Arrow IPC, a folder or glob of such shards, a ``datasets`` save_to_disk folder,
        or any other directory (a folder of text files); ``corpus_format`` overrides the guess.

        Each reader takes the options that apply to it (Parquet strings are UTF-8 already; only JSONL
        has lines to skip; ``text_column``/``id_column`` name the columns of JSONL and Parquet/Arrow,
        and without an id column ids are made from file and row, see ``engine.corpus.readers``);
        ``batch_size`` is the Parquet record batch; ``exclude``: paths a folder corpus leaves out.
        ``report`` counts what was skipped or replaced.
        """
        report = ReadReport()
        batches = open_corpus(path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines,
                              text_column=text_column, id_column=id_column, batch_documents=batch_size, report=report,
                              exclude=exclude, corpus_format=corpus_format)
        return cls((doc for batch in batches for doc in batch), source=str(path), report=report)

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
