"""Token buffers: the one form in which consumers take encoded documents.

``TokenBuffers(values, offsets, ids, partition)`` holds the documents of one partition flat:
document ``i`` is ``values[offsets[i]:offsets[i+1]]`` with id ``ids[i]``; ``values`` is a 1-D
uint32 array, ``offsets`` a 1-D int64 array of ``documents + 1`` entries that starts at 0, never
decreases and ends at ``len(values)``; ids are unique, non-empty strings; ``roles`` is None or
one uint8 role flag per token (chat and instruction data: 1 where the model is trained to produce
the token), aligned with ``values``. Everything is checked once, when the buffers are made, so a
consumer (epochs, packing, the audit) reads them unchecked.

Two ways in: ``TokenStore.buffers(partition)`` (read-only views of the store's Arrow buffers, no
copy) and ``TokenBuffers.from_documents(docs)`` (one concatenation of a list of EncodedDocument).
``as_token_buffers(source, partition)`` is the public edge that takes every accepted form (a
TokenStore and a partition, a list of EncodedDocument, a ``(values, offsets, ids)`` triple, or
TokenBuffers) and names what is wrong the same way for each; the caller picks the error class
(``BatchError`` when building an epoch, ``PackingError`` when packing). Cost: one pass over the
ids (a set for uniqueness) and one over the offsets; documents are concatenated once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol, runtime_checkable

import numpy as np

from engine.checks import check_partition
from engine.partition import Partition
from engine.errors import ConfigurationError, EngineError

__all__ = ["EncodedDocument", "TokenBuffers", "PartitionedSource", "as_token_buffers"]


@runtime_checkable
class PartitionedSource(Protocol):
    """What holds every partition and reads one as TokenBuffers: a ``TokenStore`` (which makes
    TokenBuffers, so this module names it by what it does rather than importing it)."""

    def buffers(self, partition: Partition) -> TokenBuffers: ...

_UINT32_MAX = int(np.iinfo(np.uint32).max)


@dataclass(frozen=True, slots=True)
class EncodedDocument:
    """One encoded document ``[BOS, content..., EOS]`` (a chat document: its template's rendering);
    ``tokens`` is uint32 (often a zero-copy view); ``roles``: None, or one uint8 flag per token
    (1 = the model is trained to produce it), as long as ``tokens``."""

    id: str
    partition: Partition
    tokens: np.ndarray
    roles: np.ndarray | None = None


def _describe(array: Any) -> str:
    if isinstance(array, np.ndarray):
        return f"{array.dtype} {array.shape}"
    return type(array).__name__


def _flat_array(array: Any) -> np.ndarray:
    """An array-like as an array; a 1-D one C-contiguous, as the kernels read it (copied only if strided)."""
    array = np.asarray(array)
    return np.ascontiguousarray(array) if array.ndim == 1 else array


def _partition_or_none(value: Any, error: type[EngineError]) -> Partition | None:
    if value is None:
        return None
    return check_partition(value, error)


def _checked_ids(ids: Any, error: type[EngineError]) -> tuple[str, ...]:
    """``ids`` as a tuple of unique, non-empty strings."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise error(f"ids: expected a sequence of document ids (str), got {type(ids).__name__}")
    ids = tuple(ids)
    unique = set(ids) if not ids or set(map(type, ids)) == {str} else None
    if unique is None or "" in unique:
        index = next(i for i, doc_id in enumerate(ids) if not isinstance(doc_id, str) or not doc_id)
        raise error(f"ids[{index}] is {type(ids[index]).__name__} {ids[index]!r}; expected a non-empty string")
    if len(unique) != len(ids):
        first_seen: dict[str, int] = {}
        for index, doc_id in enumerate(ids):
            first = first_seen.setdefault(doc_id, index)
            if first != index:
                raise error(f"document id {doc_id!r} is repeated (documents {first} and {index}): "
                            f"{doc_id!r} appears more than once, but ids must be unique")
    return ids


def _check_values(values: Any, error: type[EngineError]) -> None:
    if not isinstance(values, np.ndarray) or values.ndim != 1 or values.dtype != np.uint32:
        raise error(f"values: expected 1-D uint32 token ids, got {_describe(values)}")


def _check_offsets(offsets: Any, values: np.ndarray, documents: int, error: type[EngineError]) -> None:
    if (not isinstance(offsets, np.ndarray) or offsets.ndim != 1 or offsets.dtype != np.int64
            or offsets.shape[0] != documents + 1):
        raise error(f"offsets: expected 1-D int64 of length documents + 1 = {documents + 1} (one id per document), "
                    f"got {_describe(offsets)}")
    problem = None
    if offsets[0] != 0:
        problem = f"offsets[0] = {offsets[0]}"
    elif offsets[-1] != values.shape[0]:
        problem = f"offsets[-1] = {offsets[-1]}"
    else:
        falls = np.flatnonzero(offsets[1:] < offsets[:-1])
        if falls.size:
            i = int(falls[0])
            problem = f"offsets[{i}] = {offsets[i]} > offsets[{i + 1}] = {offsets[i + 1]}"
    if problem is not None:
        raise error(f"offsets: expected to start at 0, never decrease and end at len(values) = {values.shape[0]}; "
                    f"got {problem}")


@dataclass(frozen=True, slots=True, eq=False)
class TokenBuffers:
    """The documents of one partition as flat buffers; see the module docstring for the rules.

    ``partition`` is None only for buffers made from a bare ``(values, offsets, ids)`` triple.
    Construction raises ConfigurationError naming the first broken rule.
    """

    values: np.ndarray
    offsets: np.ndarray
    ids: tuple[str, ...]
    partition: Partition | None = None
    roles: np.ndarray | None = None  # uint8 role flags aligned with values (0 or 1), or None: every token 1

    def __post_init__(self) -> None:
        self._check(ConfigurationError)

    def _check(self, error: type[EngineError]) -> None:
        _check_values(self.values, error)
        ids = _checked_ids(self.ids, error)
        _check_offsets(self.offsets, self.values, len(ids), error)
        if self.roles is not None:
            roles = self.roles
            if not isinstance(roles, np.ndarray) or roles.dtype != np.uint8 or roles.shape != self.values.shape:
                raise error(f"roles: expected 1-D uint8 flags as long as values ({self.values.shape[0]}), "
                            f"got {_describe(roles)}")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "partition", _partition_or_none(self.partition, error))

    @classmethod
    def checked(cls, values: Any, offsets: Any, ids: Any, partition: Any = None, *,
                error: type[EngineError] = ConfigurationError, roles: Any = None) -> "TokenBuffers":
        """``TokenBuffers(values, offsets, ids, partition, roles)``, raising ``error`` for a broken rule."""
        buffers = object.__new__(cls)
        for name, value in (("values", values), ("offsets", offsets), ("ids", ids), ("partition", partition),
                            ("roles", roles)):
            object.__setattr__(buffers, name, value)
        buffers._check(error)
        return buffers

    @classmethod
    def from_documents(cls, documents: Iterable[EncodedDocument], partition: Partition | str | None = None, *,
                       error: type[EngineError] = ConfigurationError) -> "TokenBuffers":
        """Concatenate EncodedDocuments of one partition (``partition``, else the first document's).

        Tokens may be any 1-D integer array with ids in 0..2**32-1; they are copied as uint32.
        """
        return _from_documents(documents, _partition_or_none(partition, error), error, skip_other_partitions=False)

    def __len__(self) -> int:
        """Number of documents."""
        return len(self.ids)

    def lengths(self) -> np.ndarray:
        """Tokens per document (int64)."""
        return np.diff(self.offsets)

    def tokens(self, index: int) -> np.ndarray:
        """Document ``index``'s tokens: a view into ``values``."""
        return self.values[self.offsets[index]:self.offsets[index + 1]]

    def __repr__(self) -> str:
        part = self.partition.value if self.partition is not None else None
        return f"TokenBuffers({len(self.ids)} documents, {self.values.shape[0]} tokens, partition={part!r})"


def _document_tokens(document: EncodedDocument, index: int, error: type[EngineError]) -> np.ndarray:
    tokens = np.asarray(document.tokens)
    if tokens.ndim == 1 and tokens.dtype == np.uint32:
        return tokens
    where = f"document {document.id!r} (documents[{index}])"
    if tokens.ndim != 1:
        raise error(f"{where}: tokens must be 1-D, got shape {tokens.shape}")
    if tokens.size == 0:
        return np.empty(0, dtype=np.uint32)
    if tokens.dtype.kind not in "iu" or tokens.min() < 0 or tokens.max() > _UINT32_MAX:
        raise error(f"{where}: tokens must be token ids in 0..2^32-1, got {tokens.dtype} values")
    return tokens.astype(np.uint32)


def _from_documents(documents: Iterable[Any], partition: Partition | None, error: type[EngineError], *,
                    skip_other_partitions: bool) -> TokenBuffers:
    ids: list[str] = []
    arrays: list[np.ndarray] = []
    flags: list[np.ndarray | None] = []
    first: tuple[str, int] | None = None  # (id, index) of the document that fixed the partition
    for index, document in enumerate(documents):
        if not isinstance(document, EncodedDocument):
            raise error(f"documents[{index}] is {type(document).__name__}; expected an EncodedDocument")
        doc_id = document.id
        if not isinstance(doc_id, str) or not doc_id:
            raise error(f"documents[{index}] has an empty id; every document needs a non-empty id"
                        if doc_id == "" else
                        f"documents[{index}] has id {doc_id!r} ({type(doc_id).__name__}); expected a non-empty string")
        try:
            doc_partition = Partition(document.partition)
        except ValueError:
            raise error(f"document {doc_id!r} (documents[{index}]) has unknown partition {document.partition!r} "
                        "(expected train, validation or test)") from None
        if partition is None:
            partition, first = doc_partition, (doc_id, index)
        elif doc_partition is not partition:
            if skip_other_partitions:
                continue
            fixed_by = (f"documents[{first[1]}] {first[0]!r} belongs to '{partition.value}'" if first is not None
                        else f"the buffers are read for '{partition.value}' only")
            raise error(f"document {doc_id!r} (documents[{index}]) belongs to partition '{doc_partition.value}', "
                        f"but {fixed_by}: token buffers hold one partition")
        arrays.append(_document_tokens(document, index, error))
        flags.append(document.roles)
        ids.append(doc_id)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([a.shape[0] for a in arrays], out=offsets[1:])
    values = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.uint32)
    roles = None
    if flags and all(f is not None for f in flags):  # roles only when every document has them
        for index, (f, a) in enumerate(zip(flags, arrays)):
            if np.shape(f) != a.shape:
                raise error(f"document {ids[index]!r}: {np.size(f)} role flags for {a.shape[0]} tokens; "
                            "expected one flag per token")
        roles = np.concatenate([np.asarray(f) for f in flags]).astype(np.uint8)
    return TokenBuffers.checked(values, offsets, ids, partition, error=error, roles=roles)


def as_token_buffers(source: Any, partition: Partition | str | None = None, *,
                     error: type[EngineError] = ConfigurationError, kind_error: type[EngineError] | None = None,
                     skip_other_partitions: bool = False) -> TokenBuffers:
    """TokenBuffers from any accepted ``source``, for ``partition`` (None: the source's own).

    - ``TokenBuffers``: returned as they are (labelled with ``partition`` if they had none);
    - a ``TokenStore`` (any ``PartitionedSource``): ``source.buffers(partition)``, zero-copy;
      ``partition`` is required;
    - a ``(values, offsets, ids)`` triple: checked, not copied (array-likes become arrays);
    - any other iterable: EncodedDocuments, concatenated once (``TokenBuffers.from_documents``).

    Every document must belong to ``partition`` (or, without one, to the first document's), unless
    ``skip_other_partitions`` leaves the others out. A broken rule raises ``error``; a source of
    none of these kinds raises ``kind_error`` (default: ``error``); a TokenStore without a
    partition raises ConfigurationError.
    """
    part = _partition_or_none(partition, error)
    if isinstance(source, TokenBuffers):
        if part is None or source.partition is part:
            return source
        if source.partition is None:
            return TokenBuffers.checked(source.values, source.offsets, source.ids, part, error=error,
                                        roles=source.roles)
        if skip_other_partitions:
            return TokenBuffers.checked(np.empty(0, np.uint32), np.zeros(1, np.int64), (), part, error=error)
        raise error(f"token buffers of partition '{source.partition.value}' given where '{part.value}' is read")
    if isinstance(source, PartitionedSource):
        if part is None:
            raise ConfigurationError("a TokenStore holds three partitions; name the one to read (train, validation or test)")
        return source.buffers(part)
    if isinstance(source, tuple) and len(source) == 3 and not any(isinstance(d, EncodedDocument) for d in source):
        values, offsets, ids = source
        return TokenBuffers.checked(_flat_array(values), _flat_array(offsets), ids, part, error=error)
    if isinstance(source, (str, bytes)) or not isinstance(source, Iterable):
        raise (kind_error or error)(
            f"documents is {type(source).__name__}; expected a list of EncodedDocument: token buffers are read from "
            "TokenBuffers, a (values, offsets, ids) triple, a TokenStore or a list of EncodedDocument"
        )
    return _from_documents(source, part, error, skip_other_partitions=skip_other_partitions)
