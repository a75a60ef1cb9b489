"""What every tokenizer shares: specials, document wrapping, the frozen JSON file and its hash.

A tokenizer file is one JSON object::

    {"format": "engine.tokenizer", "version": 1, "kind": "char", "hash": "<sha256>", "payload": {...}}

``hash`` is the SHA-256 of the canonical JSON (sorted keys, no spaces) of ``{"kind", "payload"}``,
so two tokenizers with the same behaviour have the same hash, and a file edited by hand or cut
short is detected on load. Subclasses implement ``_encode``, ``decode``, ``tokenize``,
``_payload`` and ``_from_payload``; everything else lives here.

Which kinds exist, and what ``prepare`` needs to fit them, is ``engine.tokenizers.registry``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Sequence

import numpy as np

from engine.checks import positive_int
from engine.errors import ConfigurationError, TokenizerError
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS
from engine.tokenizers.streaming import encode_long_joined
from engine.utf8 import utf8_length
from engine.tokenizers.registry import (  # noqa: F401  (re-exported: kinds import them from here)
    DEFAULT_MERGES, KIND_MODULES, MAX_VOCAB_SIZE, TIE_BREAKS, FitOptions, Trainer, _import_kinds, _REGISTRY,
    fittable_class,
    fittable_kinds, register_tokenizer, trainer_for,
)

__all__ = [
    "Tokenizer", "tokenizer_from_json", "register_tokenizer", "FORMAT", "FORMAT_VERSION", "MAX_VOCAB_SIZE", "KIND_MODULES",
    "FitOptions", "Trainer", "fittable_kinds", "trainer_for", "UnknownInputError", "TIE_BREAKS",
]

FORMAT = "engine.tokenizer"
FORMAT_VERSION = 1
BOS_ID = 0
EOS_ID = 1
BOS_TOKEN = "<bos>"
EOS_TOKEN = "<eos>"


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Tokenizer(ABC):
    """A frozen tokenizer. Ids are uint32; ``bos_id``/``eos_id`` wrap every encoded document
    (``bos_id`` None: a tokenizer without BOS, whose documents are ``[content..., EOS]``)."""

    kind: ClassVar[str] = ""
    #: The name ``prepare --tokenizer NAME`` fits this kind under; None: it is only loaded from files.
    fit_name: ClassVar[str | None] = None
    #: The ``FitOptions`` fields its fit reads (giving another one is an error, except ``merges``
    #: and ``unknown``, which kinds without merges or an unknown token ignore).
    fit_options: ClassVar[frozenset[str]] = frozenset()
    #: Several threads may call ``encode_documents`` at once (it only reads frozen tables).
    thread_safe_encode: ClassVar[bool] = False

    bos_id: int | None = BOS_ID
    eos_id: int = EOS_ID
    #: The names of the wrapping tokens (the kinds engine fits: ``<bos>`` = 0, ``<eos>`` = 1; imported
    #: kinds set their file's).
    bos: str | None = BOS_TOKEN
    eos: str | None = EOS_TOKEN
    #: What loading decided on the user's behalf (e.g. an added ``<|endoftext|>``); reports print it.
    notes: tuple[str, ...] = ()

    # -- subclass hooks ---------------------------------------------------------------------
    @abstractmethod
    def _encode(self, text: str, document_id: str | None) -> np.ndarray:
        """Content ids of ``text`` (uint32, no specials); errors name ``document_id`` if given."""

    @abstractmethod
    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The exact text of ``ids`` (specials decode to nothing)."""

    @abstractmethod
    def tokenize(self, text: str) -> list[str]:
        """The pieces of ``text`` as strings, in order."""

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Number of ids, specials included."""

    @abstractmethod
    def _payload(self) -> dict:
        """Everything that defines behaviour, as plain JSON values."""

    @classmethod
    @abstractmethod
    def _from_payload(cls, payload: dict) -> "Tokenizer":
        """Inverse of ``_payload``; raise ``TokenizerError`` on a malformed payload."""

    @classmethod
    def trainer(cls, options: "FitOptions") -> "Trainer":
        """The ``Trainer`` that fits this kind with ``options``; raises for a kind that is only loaded."""
        raise ConfigurationError(f"tokenizer kind {cls.kind!r} is loaded from files only; it cannot be fitted")

    #: The kinds engine fits cut a text longer than ``STREAM_CHARS`` characters into spans in every
    #: encode call (``encode``, ``encode_document``, ``encode_batch``, ``encode_documents``), so each gives
    #: the ids ``prepare`` stores, with the scratch of a span; the others encode every text whole.
    _streams_long_texts = False

    def _span(self, window: str, pos: int, document_id: str | None, final: bool) -> tuple[int, object]:
        """Where a long document may be cut (``engine.tokenizers.streaming``): the kinds engine fits
        say where a piece ends for certain; this default cuts nowhere, so a kind without that rule
        (an imported ``tokenizer.json`` or SentencePiece model, whose normalizer and pre-tokenizer
        see the whole text) encodes a long document as one span, whole, with the ids of a short one."""
        return (len(window), window) if final else (0, None)

    def _encode_span(self, span, document_id: str | None, pos: int) -> tuple[np.ndarray, int]:
        """Content ids of one span from ``_span`` and its UTF-8 size (for progress)."""
        return self._encode(span, document_id), utf8_length(span)

    # -- shared behaviour -------------------------------------------------------------------
    def encode(self, text: str) -> np.ndarray:
        """Content ids of ``text`` as a uint32 array, without BOS/EOS."""
        return self._content(check_text(text, self.kind), None)

    def _content(self, text: str, document_id: str | None) -> np.ndarray:
        """Content ids of a checked text: span by span where the kind streams a long text."""
        if self._streams_long_texts and len(text) > STREAM_CHARS:
            return encode_long_joined(self, text, document_id)
        return self._encode(text, document_id)

    def encode_batch(self, texts: Sequence[str], *, threads: int = 1) -> list[np.ndarray]:
        """``[encode(t) for t in texts]`` (kinds with a batched kernel override it; ``threads`` is theirs)."""
        return [self.encode(text) for text in texts]

    def encode_document(self, text: str, document_id: str | None = None) -> np.ndarray:
        """``[BOS, content..., EOS]`` as uint32; an empty text gives ``[BOS, EOS]`` (``[content...,
        EOS]`` and ``[EOS]`` for a tokenizer without BOS, ``bos_id`` None)."""
        content = self._content(check_text(text, self.kind, document_id), document_id)
        first = 0 if self.bos_id is None else 1
        out = np.empty(content.shape[0] + first + 1, dtype=np.uint32)
        if first:
            out[0] = self.bos_id
        out[first:-1] = content
        out[-1] = self.eos_id
        return out

    def encode_documents(
        self, texts: Sequence[str], document_ids: Sequence[str] | None = None, *, progress=None,
        stream_chars: int = STREAM_CHARS, piece_chars: int = PIECE_CHARS,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode many documents at once: ``(values uint32, offsets int64)``, each one wrapped.

        ``offsets`` has ``len(texts) + 1`` entries starting at 0; document ``i`` is
        ``values[offsets[i]:offsets[i+1]]``. Subclasses may override with a kernel; the engine's
        kinds that fit (char, word, bpe, byte-bpe) encode a document longer than ``stream_chars``
        characters span by span (``engine.tokenizers.streaming``; same ids but for a stretch of more than
        ``piece_chars`` characters in which no piece ends for certain, cut there) and call
        ``progress(nbytes)`` after each span; the others encode every document whole.
        """
        positive_int(stream_chars, "stream_chars")
        positive_int(piece_chars, "piece_chars")
        texts, document_ids = check_texts(texts, document_ids, self.kind)
        parts = []
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        for i, text in enumerate(texts):
            doc_id = None if document_ids is None else document_ids[i]
            enc = self.encode_document(text, doc_id)
            parts.append(enc)
            offsets[i + 1] = offsets[i] + enc.shape[0]
        values = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint32)
        return values.astype(np.uint32, copy=False), offsets

    @property
    def hash(self) -> str:
        cached = self.__dict__.get("_hash_cache")
        if cached is None:
            cached = hashlib.sha256(canonical_json({"kind": self.kind, "payload": self._payload()})).hexdigest()
            self.__dict__["_hash_cache"] = cached
        return cached

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "hash": self.hash,
            "payload": self._payload(),
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write the tokenizer file atomically (temporary file, then rename), with the mode any new
        file gets (0o666 less the umask, as the store's files)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.__dict__.get("_file_text_cache")  # frozen: the text is made once (prepare saves it twice)
        if data is None:
            data = json.dumps(self.to_json(), ensure_ascii=False, indent=None, separators=(",", ":"))
            self.__dict__["_file_text_cache"] = data
        while True:
            tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                break
            except FileExistsError:
                continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, hash={self.hash[:12]})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and other.kind == self.kind and other.hash == self.hash

    def __hash__(self) -> int:
        return hash(self.hash)


class UnknownInputError(TokenizerError):
    """Text a tokenizer cannot encode: a character (or piece) its vocabulary lacks.

    ``what`` says what and where (``"character 'd' (U+0064) at offset 2"``), ``document_id`` whose,
    ``expected`` what the vocabulary holds and ``advice`` how to fix it. ``in_partition(name)`` is
    the same error as ``prepare`` reports it: the document's partition named and, for held-out
    text, byte-level BPE suggested instead of refitting (fitting on held-out text would leak it).
    """

    def __init__(self, message: str, *, what: str = "", document_id: str | None = None, kind: str = "",
                 expected: str = "", advice: str = ""):
        super().__init__(message)
        self.what, self.document_id, self.kind, self.expected, self.advice = what, document_id, kind, expected, advice

    @classmethod
    def build(cls, what: str, document_id: str | None, kind: str, expected: str, advice: str) -> "UnknownInputError":
        of = f" of document {document_id!r}" if document_id is not None else ""
        message = f"{what}{of} is not in the {kind} tokenizer's vocabulary (expected {expected}; {advice})"
        return cls(message, what=what, document_id=document_id, kind=kind, expected=expected, advice=advice)

    def in_partition(self, partition: str) -> "UnknownInputError":
        """This error with the document's partition named, and advice that never refits on held-out text."""
        if not self.what:
            return self
        of = f" of document {self.document_id!r}" if self.document_id is not None else ""
        where = f"{self.what}{of} ({partition} partition) is not in the {self.kind} tokenizer's vocabulary"
        if partition == "train":
            message = f"{where} (expected {self.expected}; {self.advice}, or use --tokenizer byte-bpe)"
        else:
            message = (f"{where} (expected {self.expected}); held-out text must not be fitted on, so instead of "
                       "refitting use --tokenizer byte-bpe, which encodes any text")
        return type(self)(message, what=self.what, document_id=self.document_id, kind=self.kind,
                          expected=self.expected, advice=self.advice)


def is_engine_tokenizer_file(path: str | os.PathLike) -> bool:
    """True when ``path`` is a complete, valid engine tokenizer file (what ``Tokenizer.save`` writes)."""
    from engine.checks import parse_json

    try:
        tokenizer_from_json(parse_json(Path(path).read_text(encoding="utf-8")), str(path))
    except (OSError, UnicodeDecodeError, ValueError, TokenizerError):
        return False
    return True


def tokenizer_from_json(obj: Any, source: str = "<memory>") -> Tokenizer:
    """Rebuild a tokenizer from the parsed JSON of its file, checking format, version and hash."""
    _import_kinds()  # registered before dispatching on "kind"
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise TokenizerError(f"{source}: not an engine tokenizer file (expected \"format\": \"{FORMAT}\")")
    version = obj.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise TokenizerError(f"{source}: missing or non-integer \"version\" (expected {FORMAT_VERSION})")
    if version > FORMAT_VERSION:
        raise TokenizerError(
            f"{source}: tokenizer file format version {version} is newer than this engine supports "
            f"({FORMAT_VERSION}); upgrade engine to read it"
        )
    if version != FORMAT_VERSION:
        raise TokenizerError(
            f"{source}: tokenizer file format version {version} is not supported (expected {FORMAT_VERSION})"
        )
    kind = obj.get("kind")
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise TokenizerError(f"{source}: unknown tokenizer kind {kind!r} (expected one of: {known})")
    payload = obj.get("payload")
    if not isinstance(payload, dict):
        raise TokenizerError(f"{source}: missing \"payload\" object")
    try:
        expected = hashlib.sha256(canonical_json({"kind": kind, "payload": payload})).hexdigest()
    except UnicodeEncodeError as exc:
        raise TokenizerError(
            f"{source}: tokenizer file holds a lone surrogate (U+{ord(exc.object[exc.start]):04X}) in its payload; "
            "expected text that is valid UTF-8"
        ) from None
    recorded = obj.get("hash")
    if recorded != expected:
        raise TokenizerError(
            f"{source}: tokenizer file is corrupt: recorded hash {recorded!r} does not match its content "
            f"(content hashes to {expected})"
        )
    try:
        tok = cls._from_payload(payload)
    except TokenizerError as exc:
        raise TokenizerError(f"{source}: malformed {kind} tokenizer payload: {exc}") from None
    except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError, RecursionError) as exc:
        # The hash matched, so the file is as written; it was written by something else (or by hand).
        raise TokenizerError(
            f"{source}: malformed {kind} tokenizer payload ({type(exc).__name__}: {exc}); "
            "expected a file written by Tokenizer.save"
        ) from None
    return tok


def _iter_texts(texts: Iterable[str] | str) -> Iterator[str]:
    """Accept one string or an iterable of strings; TokenizerError names the first item that is not a str."""
    if isinstance(texts, str):
        yield texts
        return
    try:
        items = iter(texts)
    except TypeError:
        raise TokenizerError(f"training texts: expected a str or an iterable of str, got {type(texts).__name__}") from None
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise TokenizerError(f"training text {index}: expected a str, got {type(text).__name__}")
        yield text


def check_text(text: Any, kind: str, document_id: str | None = None) -> str:
    """``text`` itself, or a TokenizerError naming its type (and document) when it is not a ``str``."""
    if not isinstance(text, str):
        where = f" of document {document_id!r}" if document_id is not None else ""
        hint = " (decode bytes as UTF-8 first)" if isinstance(text, (bytes, bytearray)) else ""
        raise TokenizerError(f"{kind} encode: text{where} is {type(text).__name__}, expected str{hint}")
    return text


def check_ids(ids: Sequence[int] | np.ndarray, vocab_size: int, kind: str) -> np.ndarray:
    """Ids as int64, or a TokenizerError naming the first id outside ``[0, vocab_size)`` and its position.

    Compares before converting, so a uint64 id >= 2**63 or a Python int beyond 64 bits is reported
    as itself instead of wrapping around to some other (possibly valid) id.
    """
    try:
        arr = np.asarray(ids)
    except (ValueError, TypeError) as exc:
        raise TokenizerError(f"{kind} decode: expected a 1-d sequence of integer ids ({exc})") from None
    if arr.ndim != 1:
        raise TokenizerError(f"{kind} decode: expected a 1-d sequence of ids, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype == object:  # Python ints too large for int64/uint64, or mixed objects
        for i, value in enumerate(arr.tolist()):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TokenizerError(f"{kind} decode: id at position {i} is {type(value).__name__} {value!r}, "
                                     "expected an integer")
            if not 0 <= value < vocab_size:
                raise _outside(kind, int(value), i, vocab_size)
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise TokenizerError(f"{kind} decode: expected integer ids, got dtype {arr.dtype}")
    bad = arr >= vocab_size if arr.dtype.kind == "u" else (arr < 0) | (arr >= vocab_size)
    first = np.flatnonzero(bad)
    if first.size:
        i = int(first[0])
        raise _outside(kind, int(arr[i]), i, vocab_size)
    return arr.astype(np.int64, copy=False)


def check_file_id(value: Any, what: str) -> int:
    """``value`` as an int, or a TokenizerError unless it is an integer in ``[0, MAX_VOCAB_SIZE)``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TokenizerError(f"{what}: id {value!r:.40} is {type(value).__name__}, expected an integer")
    if not 0 <= value < MAX_VOCAB_SIZE:
        raise TokenizerError(
            f"{what}: id {value} is outside 0..{MAX_VOCAB_SIZE - 1} "
            f"(ids are uint32 and a vocabulary holds at most {MAX_VOCAB_SIZE} ids)"
        )
    return int(value)


def check_special_ids(specials: Any, what: str = "special token") -> dict[str, int]:
    """``{name: id}`` of special tokens: non-empty names, ids checked by ``check_file_id``, no id twice."""
    if not isinstance(specials, dict):
        raise TokenizerError(f"{what}s: expected an object {{name: id}}, got {type(specials).__name__}")
    out: dict[str, int] = {}
    owner: dict[int, str] = {}
    for name, value in specials.items():
        if not isinstance(name, str) or not name:
            raise TokenizerError(f"{what} {name!r}: expected a non-empty string name")
        i = check_file_id(value, f"{what} {name!r}")
        if i in owner:
            raise TokenizerError(f"{what}s {owner[i]!r} and {name!r} share id {i} (expected distinct ids)")
        owner[i] = name
        out[name] = i
    return out


def _outside(kind: str, value: int, position: int, vocab_size: int) -> TokenizerError:
    return TokenizerError(
        f"{kind} decode: id {value} at position {position} is outside the vocabulary (expected 0..{vocab_size - 1})"
    )


def check_texts(texts: Any, document_ids: Any, kind: str) -> tuple[Sequence[str], Sequence[str] | None]:
    """Validate a batch for ``encode_documents``: a sequence of str (not one str), ids of the same length."""
    if isinstance(texts, (str, bytes)) or not (hasattr(texts, "__len__") and hasattr(texts, "__getitem__")):
        raise TokenizerError(
            f"{kind} encode_documents: texts is {type(texts).__name__}, expected a list (sequence) of str"
        )
    if document_ids is not None:
        if isinstance(document_ids, (str, bytes)) or not (
            hasattr(document_ids, "__len__") and hasattr(document_ids, "__getitem__")
        ):
            raise TokenizerError(
                f"{kind} encode_documents: document_ids is {type(document_ids).__name__}, expected a list of str"
            )
        if len(document_ids) != len(texts):
            raise TokenizerError(
                f"{kind} encode_documents: {len(document_ids)} document ids for {len(texts)} texts; expected one id per text"
            )
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            name = f"document {document_ids[index]!r}" if document_ids is not None else f"text {index}"
            raise TokenizerError(f"{kind} encode_documents: {name} is {type(text).__name__}, expected str")
    return texts, document_ids


def check_encodable(strings: Iterable[str], what: str) -> None:
    """TokenizerError unless every string is valid UTF-8 text (no lone surrogates): files must hold it."""
    for s in strings:
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise TokenizerError(
                f"{what}: {s[:40]!r} holds a lone surrogate U+{ord(s[exc.start]):04X} at character offset "
                f"{exc.start}; expected text that is valid UTF-8"
            ) from None
