"""Partitions and split manifests.

The split rules (cited as "the split rules of engine.corpus.splits"):

- Every document belongs to exactly one partition: ``train``, ``validation`` or ``test``.
- A split manifest is JSON ``{"train": [ids], "validation": [ids], "test": [ids]}`` and must name
  every corpus document exactly once: an unknown id, an id in two partitions, a duplicate or empty
  id, and a document the manifest forgets are ``CorpusError``s that name the id (and the file and
  line where one is known).
- A continuous text (a play, a log) is split by position, never at random: the first
  ``floor(len(text) * train_fraction)`` characters train (default fraction 0.9), the rest
  validates; nothing is sampled across that cut.
- A hash split (``SplitManifest.by_hash``: each id hashed with a fixed function into the ratios)
  serves corpora too large for a manifest.
- Only training documents may fit anything: tokenizer merges, vocabularies, statistics used for
  fitting (``prepare`` and ``engine tokenizers train`` read the train partition only; with
  ``--fit-sample``, its start: the fit sample rule of ``engine.corpus.fit_sample``).

``SplitManifest`` names every document's partition (explicit lists from JSON, or a rule hashing
ids); ``manifest.partition(corpus)`` checks it names every document exactly once and gives
``CorpusPartitions``. ``ManifestCheck`` applies the same checks to streamed documents with
O(documents) id sets, so a corpus larger than memory is checked in the same words. One continuous
text is split by position (``CorpusPartitions.from_text``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from engine.corpus.collection import Corpus
from engine.corpus.readers import Document, json_error_text
from engine.checks import JSONLimitError, check_fraction, check_partition, parse_json
from engine.errors import ConfigurationError, CorpusError
from engine.partition import PARTITIONS, Partition  # re-exported: the corpus's partitions

__all__ = [
    "Partition",
    "PARTITIONS",
    "parse_ratios",
    "as_partition",
    "hash_unit",
    "hash_partition",
    "SplitManifest",
    "ManifestCheck",
    "CorpusPartitions",
]


def parse_ratios(text: str | None) -> dict[str, float] | None:
    """``"0.8,0.1,0.1"`` -> ``{"train": 0.8, "validation": 0.1, "test": 0.1}`` (``--hash-split``'s
    form; ``SplitManifest.by_hash`` checks the ratios)."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3:
        raise ConfigurationError(f"--hash-split {text!r}: expected three ratios train,validation,test like 0.8,0.1,0.1")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ConfigurationError(f"--hash-split {text!r}: ratios must be numbers like 0.8,0.1,0.1") from None
    return dict(zip((p.value for p in PARTITIONS), values))


def as_partition(value: Partition | str) -> Partition:
    """``Partition`` from a Partition or its string value; CorpusError names the bad value."""
    return check_partition(value, CorpusError)


def _check_ratios(ratios) -> tuple[float, float, float]:
    """(train, validation, test) fractions: non-negative, finite, summing to 1 within 1e-9."""
    if not hasattr(ratios, "items"):
        raise ConfigurationError(f"split ratios must be a mapping like {{'train': 0.8, ...}}, got {type(ratios).__name__}")
    values = dict.fromkeys(PARTITIONS, 0.0)
    for key, ratio in ratios.items():
        try:
            part = Partition(key)
        except ValueError:
            raise ConfigurationError(f"split ratio key {key!r} is not a partition (expected train, validation, test)") from None
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio < 0:
            raise ConfigurationError(f"split ratio for {part.value!r} is {ratio!r}, expected a finite number >= 0")
        values[part] = float(ratio)
    total = sum(values.values())
    if abs(total - 1.0) > 1e-9:
        raise ConfigurationError(f"split ratios sum to {total!r}, expected 1 (within 1e-9): {ratios!r}")
    return values[Partition.TRAIN], values[Partition.VALIDATION], values[Partition.TEST]


def hash_unit(doc_id: str) -> float:
    """``int.from_bytes(sha256(id as UTF-8)[:8], "big") / 2**64``: a fixed, portable number in [0, 1].

    CorpusError for an id that is not valid UTF-8 (a lone surrogate): it has no hash.
    """
    try:
        raw = doc_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CorpusError(
            f"id {doc_id!r} holds a lone surrogate at character offset {exc.start}; expected an id that is valid UTF-8"
        ) from None
    return int.from_bytes(hashlib.sha256(raw).digest()[:8], "big") / 2**64


def _assign(u: float, ratios: tuple[float, float, float]) -> Partition:
    cumulative = 0.0
    for part, ratio in zip(PARTITIONS, ratios):
        cumulative += ratio
        if u < cumulative:
            return part
    # u at or past a cumulative sum that rounding left just short of 1: the last non-empty range.
    return next(p for p, r in zip(reversed(PARTITIONS), reversed(ratios)) if r > 0)


def hash_partition(doc_id: str, ratios) -> Partition:
    """The partition ``SplitManifest.by_hash(ratios)`` gives ``doc_id`` (see its docstring for the rule)."""
    return _assign(hash_unit(doc_id), _check_ratios(ratios))


def _json_lines(raw: str | None, value: str) -> list[int]:
    """Best effort: 1-based lines where the JSON string ``value`` occurs as an array item (not a key)."""
    if raw is None:
        return []
    literals = {json.dumps(value, ensure_ascii=False), json.dumps(value)}
    starts = sorted({m.start() for lit in literals for m in re.finditer(re.escape(lit) + r"(?!\s*:)", raw)})
    return [raw.count("\n", 0, start) + 1 for start in starts]


def _forgotten_where(corpus_source: str | None, forgotten: list[str]) -> str:
    """`` (corpus FILE, line N)``: where the first forgotten document is, as far as known.

    Only JSONL has lines; the file is scanned once, on this error path only.
    """
    if not corpus_source:
        return ""
    path = Path(corpus_source)
    if path.suffix not in (".jsonl", ".json") or not path.is_file():
        return f" (corpus {path})"
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                obj = json.loads(raw, strict=False)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("id") == forgotten[0]:
                return f" (corpus {path}, line {lineno})"
    return f" (corpus {path})"


def _at_lines(lines: list[int]) -> str:
    if not lines:
        return ""
    if len(lines) == 1:
        return f" (line {lines[0]})"
    return f" (lines {lines[0]} and {lines[1]})"


class SplitManifest:
    """Assigns every document of a corpus to exactly one partition.

    Either explicit lists of ids (``SplitManifest(train=[...], validation=[...], test=[...])`` or
    ``from_json``) or a hash rule (``by_hash``). Lists are checked on construction: ids are
    non-empty strings, none repeated inside a list, none in two partitions.
    """

    def __init__(self, train: Iterable[str] = (), validation: Iterable[str] = (), test: Iterable[str] = (),
                 *, source: str | None = None, _raw: str | None = None):
        self.source = source
        self.ratios: tuple[float, float, float] | None = None
        self._lists = {Partition.TRAIN: list(train), Partition.VALIDATION: list(validation), Partition.TEST: list(test)}
        self._where: dict[str, Partition] = {}
        src = source or "split manifest"
        for part, ids in self._lists.items():
            for i, doc_id in enumerate(ids):
                if not isinstance(doc_id, str):
                    raise CorpusError(f'{src}: "{part.value}"[{i}] must be a string id, got {type(doc_id).__name__} {doc_id!r}')
                if not doc_id:
                    raise CorpusError(
                        f'{src}: "{part.value}"[{i}] is an empty id{_at_lines(_json_lines(_raw, doc_id)[:1])} '
                        "(expected a non-empty string)"
                    )
                other = self._where.get(doc_id)
                if other is None:
                    self._where[doc_id] = part
                elif other is part:
                    raise CorpusError(
                        f'{src}: id {doc_id!r} appears twice in "{part.value}"{_at_lines(_json_lines(_raw, doc_id))}; '
                        "list each id once"
                    )
                else:
                    raise CorpusError(
                        f'{src}: id {doc_id!r} is in both "{other.value}" and "{part.value}"'
                        f"{_at_lines(_json_lines(_raw, doc_id))}; every document belongs to exactly one partition"
                    )
        self._raw = _raw

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "SplitManifest":
        """Read ``{"train": [ids], "validation": [ids], "test": [ids]}``; a missing key is an empty list."""
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CorpusError(f"{path}: cannot read split manifest: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{path}: invalid UTF-8 at byte offset {exc.start}; expected a UTF-8 JSON file") from None
        repeated: list[str] = []

        def no_repeated_keys(pairs):
            keys = [k for k, _ in pairs]
            repeated.extend(k for i, k in enumerate(keys) if k in keys[:i])
            return dict(pairs)

        try:
            obj = parse_json(raw, object_pairs_hook=no_repeated_keys)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{exc.lineno}: malformed JSON ({json_error_text(exc)})") from None
        except JSONLimitError as exc:
            raise CorpusError(f"{path}: JSON past engine's limits: {exc}") from None
        if not isinstance(obj, dict):
            raise CorpusError(f'{path}: expected a JSON object {{"train": [...], "validation": [...], "test": [...]}}')
        if repeated:
            raise CorpusError(
                f'{path}: key "{repeated[0]}" appears more than once; expected each of train, validation, '
                "test at most once (a repeated key would silently drop the first list)"
            )
        unknown = sorted(set(obj) - {p.value for p in PARTITIONS})
        if unknown:
            raise CorpusError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))} (expected train, validation, test)")
        for key, ids in obj.items():
            if not isinstance(ids, list):
                raise CorpusError(f'{path}: "{key}" must be a list of ids, got {type(ids).__name__}')
        return cls(obj.get("train", ()), obj.get("validation", ()), obj.get("test", ()), source=str(path), _raw=raw)

    @classmethod
    def by_hash(cls, ratios) -> "SplitManifest":
        """A rule instead of lists, for corpora too large to list.

        Rule: ``u = int.from_bytes(hashlib.sha256(id.encode("utf-8")).digest()[:8], "big") / 2**64``;
        with cumulative ratios ``c1 = train`` and ``c2 = train + validation`` the id goes to train if
        ``u < c1``, else validation if ``u < c2``, else test. (A ``u`` that rounding leaves at or past
        the last cumulative sum goes to the last partition with a positive ratio.) ``ratios`` maps
        partitions to non-negative fractions summing to 1 within 1e-9; missing keys are 0.
        """
        manifest = cls()
        manifest.ratios = _check_ratios(ratios)
        return manifest

    @property
    def is_hash_split(self) -> bool:
        return self.ratios is not None

    def partition_of(self, doc_id: str) -> Partition:
        if self.ratios is not None:
            return _assign(hash_unit(doc_id), self.ratios)
        try:
            return self._where[doc_id]
        except KeyError:
            raise CorpusError(f"{self.source or 'split manifest'}: id {doc_id!r} is in no partition") from None

    def assign(self, ids: Iterable[str]) -> "SplitManifest":
        """Explicit lists for ``ids`` (in their order), each placed by ``partition_of``."""
        lists: dict[Partition, list[str]] = {p: [] for p in PARTITIONS}
        for doc_id in ids:
            lists[self.partition_of(doc_id)].append(doc_id)
        return SplitManifest(lists[Partition.TRAIN], lists[Partition.VALIDATION], lists[Partition.TEST])

    def ids(self, partition: Partition | str) -> list[str]:
        if self.ratios is not None:
            raise ConfigurationError("a hash split lists no ids; call manifest.assign(ids) first")
        return list(self._lists[as_partition(partition)])

    def to_dict(self) -> dict[str, list[str]]:
        return {p.value: self.ids(p) for p in PARTITIONS}

    def to_json(self, path: str | os.PathLike) -> Path:
        """Write the manifest as JSON (one id per line), atomically."""
        path = Path(path)
        body = ",\n".join(
            f"  {json.dumps(key)}: [" + ",".join(f"\n    {json.dumps(i, ensure_ascii=False)}" for i in ids)
            + ("\n  ]" if ids else "]")
            for key, ids in self.to_dict().items()
        )
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text("{\n" + body + "\n}\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:  # a full disk, say: nothing half-written is left, and the file is named
            tmp.unlink(missing_ok=True)
            raise CorpusError(f"{path}: cannot write the split manifest ({exc.strerror or exc})") from None
        return path

    def partition(self, corpus: Sequence[Document]) -> "CorpusPartitions":
        """The corpus documents of each partition, in corpus order; the manifest must name each exactly once."""
        corpus = corpus if isinstance(corpus, Corpus) else Corpus(corpus)
        check = ManifestCheck(self, corpus.source)
        groups: dict[Partition, list[Document]] = {p: [] for p in PARTITIONS}
        for doc in corpus:
            part = check.partition_of(doc.id)
            if part is not None:
                groups[part].append(doc)
        check.finish()
        return CorpusPartitions(groups)

    def counts(self) -> dict[Partition, int]:
        return {p: len(self.ids(p)) for p in PARTITIONS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitManifest) and (self.ratios, self._lists) == (other.ratios, other._lists)

    def __repr__(self) -> str:
        if self.ratios is not None:
            return f"SplitManifest.by_hash(train={self.ratios[0]}, validation={self.ratios[1]}, test={self.ratios[2]})"
        return "SplitManifest(" + ", ".join(f"{p.value}={len(v)} ids" for p, v in self._lists.items()) + ")"


class ManifestCheck:
    """Partitions of streamed documents, and the manifest's rules checked with O(documents) sets.

    ``partition_of(id)`` never raises for a forgotten id: it remembers it (``None`` is returned),
    so ``finish()`` can name the ids the manifest lists but the corpus lacks first, then the
    forgotten ones (``SplitManifest.partition`` checks a corpus in memory the same way).
    """

    def __init__(self, manifest: SplitManifest, source: str | None = None):
        self.manifest = manifest
        self.source = source
        self.seen: set[str] = set()
        self.forgotten: list[str] = []

    def partition_of(self, doc_id: str) -> Partition | None:
        if self.manifest.is_hash_split:
            return self.manifest.partition_of(doc_id)
        self.seen.add(doc_id)
        try:
            return self.manifest.partition_of(doc_id)
        except CorpusError:
            self.forgotten.append(doc_id)
            return None

    def finish(self) -> None:
        if self.manifest.is_hash_split:
            return
        src = self.manifest.source or "split manifest"
        for part in PARTITIONS:
            for doc_id in self.manifest.ids(part):
                if doc_id not in self.seen:
                    lines = _at_lines(_json_lines(self.manifest._raw, doc_id)[:1])
                    raise CorpusError(
                        f'{src}: id {doc_id!r} in "{part.value}"{lines} is not in the corpus'
                        f"{' ' + self.source if self.source else ''}; a manifest may only name corpus documents"
                    )
        if self.forgotten:
            shown = ", ".join(map(repr, self.forgotten[:5])) + (", ..." if len(self.forgotten) > 5 else "")
            raise CorpusError(
                f"{src}: {len(self.forgotten)} corpus document(s) in no partition: {shown}"
                f"{_forgotten_where(self.source, self.forgotten)}; the manifest must name every document"
            )


class CorpusPartitions:
    """Documents grouped by partition (all three always present, possibly empty); ids unique across all."""

    def __init__(self, groups: dict[Partition, list[Document]]):
        self._groups = {p: list(groups.get(p, ())) for p in PARTITIONS}

    @classmethod
    def from_mapping(cls, mapping) -> "CorpusPartitions":
        """From ``{Partition or "train"...: [Document, ...]}``; checks partitions and id uniqueness."""
        groups: dict[Partition, list[Document]] = {p: [] for p in PARTITIONS}
        seen: dict[str, Partition] = {}
        for key, docs in mapping.items():
            part = as_partition(key)
            for doc in docs:
                n_before = len(seen)
                if not isinstance(doc, Document) or not isinstance(doc.id, str) or not doc.id:
                    raise CorpusError(f'partition "{part.value}": expected Documents with non-empty ids, got {doc!r:.80}')
                other = seen.setdefault(doc.id, part)
                if other is not part or len(seen) == n_before:
                    raise CorpusError(f'id {doc.id!r} appears twice (in "{other.value}" and "{part.value}"); ids must be unique')
                groups[part].append(doc)
        return cls(groups)

    @classmethod
    def from_text(cls, text: str, train_fraction: float = 0.9, *, name: str = "text") -> "CorpusPartitions":
        """Split one continuous text by position: ``cut = floor(len(text) * train_fraction)`` characters.

        The product is exact, with ``train_fraction`` read as the decimal it is written as (``0.29``
        of 100 characters is 29, where float arithmetic would give 28.999... and cut at 28).

        Train holds one document ``f"{name}:train"`` = ``text[:cut]``; validation one document
        ``f"{name}:validation"`` = ``text[cut:]``; test is empty. Nothing is sampled across the cut.
        """
        check_fraction(train_fraction, "train_fraction")
        if not name:
            raise ConfigurationError("name is empty; expected a non-empty prefix for the document ids")
        cut = math.floor(len(text) * Fraction(repr(float(train_fraction))))
        return cls({
            Partition.TRAIN: [Document(f"{name}:train", text[:cut])],
            Partition.VALIDATION: [Document(f"{name}:validation", text[cut:])],
        })

    def documents(self, partition: Partition | str) -> list[Document]:
        return list(self._groups[as_partition(partition)])

    __getitem__ = documents

    def ids(self, partition: Partition | str) -> list[str]:
        return [doc.id for doc in self._groups[as_partition(partition)]]

    def counts(self) -> dict[Partition, int]:
        return {p: len(docs) for p, docs in self._groups.items()}

    def __iter__(self) -> Iterator[tuple[Partition, list[Document]]]:
        return iter([(p, list(docs)) for p, docs in self._groups.items()])

    def manifest(self) -> SplitManifest:
        return SplitManifest(*(self.ids(p) for p in PARTITIONS))

    def __repr__(self) -> str:
        return "CorpusPartitions(" + ", ".join(f"{p.value}={n}" for p, n in self.counts().items()) + ")"
