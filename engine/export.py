"""One split of a token store written in a trainer's format: Megatron's indexed dataset or one flat file.

Formats.

- ``megatron`` (``export_megatron``): ``PREFIX.bin`` / ``PREFIX.idx`` in Megatron's layout (engine.megatron),
  one sequence per document, the dtype Megatron picks for the store's vocabulary (uint16 below 65,500
  tokens, else int32): byte for byte what megatron-core's ``IndexedDatasetBuilder`` writes when given
  the same documents (``add_document(tokens, [len(tokens)])`` each, then ``finalize``).
- ``nanogpt`` (``export_flat``): one file ``PATH`` of the split's documents back to back in store
  order, uint16 when every id of the vocabulary fits (at most 65,536 tokens), else uint32.

Both write ``PATH.json`` beside (for Megatron ``PREFIX.json``): ``"format": "engine.export"``, the
export kind, dtype, documents, tokens, the tokenizer hash, vocabulary size, BOS/EOS ids, whether BOS
was dropped, the store and split, and each file's name and size. It is how a loader learns the dtype
(nanoGPT's assumes uint16) and how a later export knows these files are its own.

The document rule. Documents are written as stored. A document's BOS is its first token when that
is the store's BOS id (a store whose manifest records no BOS, ``bos_id: null``, has none to drop; a
manifest without the entry means the tokenizer's). ``bos=False``
(``--no-bos``) writes every document without its BOS; when the store's BOS is its EOS (GPT-2 style,
``<|endoftext|>`` on both sides) every document is written without its BOS too, as ``[content...,
EOS]``, so exactly one end-of-text token separates two documents, as Megatron's ``--append-eod``
and nanoGPT's ``prepare.py`` write them. The copy is one pass of the ``gather_documents`` kernel
(engine.kernels.export) per row group of the store, written as it is made while the next row
groups decode on two other threads (``DECODE_THREADS``, engine.store.stream): memory holds at most
three row groups and the sequence lengths (4 bytes per document), never the split. The tokenizer is not
loaded: the vocabulary size (which picks the dtype and bounds the ids) and the BOS/EOS ids come
from the store's manifest; a store written before its manifest recorded ``vocab_size`` loads its
tokenizer to learn it.

Writes. Every file is written under a temporary name in its target's folder, fsynced, then renamed
into place, the folder fsynced last. Megatron: the old ``.idx`` is removed first, then ``.json``,
``.bin`` and last ``.idx`` are renamed in, so a pair that Megatron can open is always complete and
an interrupted export leaves the previous pair or a ``.bin`` without ``.idx``; nanoGPT: ``.json``
then the flat file. Before anything is read, each target must be absent or a regular file written
by an export of the same kind (``PATH.json`` is an engine export marker naming it); anything else
is refused (``force=True`` replaces regular files that are not provably engine's; a folder, a link
or a device is never replaced). Bad input raises ``ConfigurationError`` (an empty split, a dtype that
cannot hold the vocabulary, a Megatron prefix spelled with ``.bin``, a target that may not be
replaced) or ``StoreError`` (an unknown split, a missing or corrupt store, an id outside the
vocabulary), each naming what and where; nothing is left behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from engine.checks import parse_json
from engine.errors import ConfigurationError, StoreError
from engine.kernels.export import gather_documents
from engine.megatron import dtype_for_vocabulary, index_bytes, megatron_paths
from engine.partition import Partition
from engine.store import TokenStore
from engine.store.layout import fsync, store_partition
from engine.store.stream import token_batches

__all__ = ["EXPORT_FORMAT", "FORMATS", "DTYPES", "ExportResult", "export", "export_megatron", "export_flat",
           "document_rule"]

EXPORT_FORMAT = "engine.export"
FORMATS = ("megatron", "nanogpt")
DTYPES = {"megatron": ("uint16", "int32"), "nanogpt": ("uint16", "uint32")}
_INT32_MAX = 2 ** 31 - 1
# Row groups decoded at once (engine.store.stream): the next two decode while one is written, so
# memory holds at most three row groups (a row group is 16,384 documents, which may be long).
DECODE_THREADS = 2


@dataclass(frozen=True)
class ExportResult:
    """What one export wrote: ``files`` (data files, then ``marker``, the JSON beside them)."""

    kind: str
    split: str
    files: tuple[Path, ...]
    marker: Path
    dtype: str
    documents: int
    tokens: int
    bos_dropped: bool

    def to_dict(self) -> dict:
        return {"format": self.kind, "split": self.split, "files": [str(f) for f in self.files],
                "marker": str(self.marker), "dtype": self.dtype, "documents": self.documents, "tokens": self.tokens,
                "bos_dropped": self.bos_dropped}


def _recorded(store: TokenStore, tokenizer, name: str) -> int | None:
    """The store's ``bos_id`` / ``eos_id`` as its manifest records them (``None``: its documents carry
    none); a manifest without the entry falls back to the tokenizer's (``tokenizer``, or the store's
    loaded now when None). None (or < 0): no such token."""
    try:
        value = getattr(store, name)
    except KeyError:
        value = getattr(store.tokenizer() if tokenizer is None else tokenizer, name, None)
    return None if value is None or int(value) < 0 else int(value)


def document_rule(store: TokenStore, tokenizer, bos: bool) -> tuple[int, bool]:
    """``(bos id or -1, drop)``: the first token of a document is dropped when ``drop`` and it is that id
    (see the module docstring). The store's manifest says its BOS/EOS ids (a recorded ``None``: the
    documents carry no BOS); a manifest without them falls back to the tokenizer's."""
    bos_id, eos_id = _recorded(store, tokenizer, "bos_id"), _recorded(store, tokenizer, "eos_id")
    if bos_id is None:
        return -1, False
    return bos_id, (not bos) or bos_id == eos_id


def _vocabulary(store: TokenStore):
    """``(vocabulary size, tokenizer or None)``: the size the manifest records, the tokenizer not loaded;
    a store whose manifest does not record it (written before it did) loads its tokenizer to learn it."""
    if store.vocab_size is not None:
        return int(store.vocab_size), None
    tokenizer = store.tokenizer()
    return int(tokenizer.vocab_size), tokenizer


def _open(store) -> TokenStore:
    return store if isinstance(store, TokenStore) else TokenStore.open(store)


def _dtype(kind: str, vocab_size: int, dtype: str | None) -> np.dtype:
    choices = DTYPES[kind]
    if dtype is None:
        chosen = dtype_for_vocabulary(vocab_size) if kind == "megatron" else np.dtype(
            np.uint16 if vocab_size <= 1 << 16 else np.uint32)
    elif dtype in choices:
        chosen = np.dtype(dtype)
    else:
        raise ConfigurationError(f"dtype {dtype!r}: expected one of {', '.join(choices)} for {kind} (or none: "
                                 "chosen from the vocabulary)")
    if vocab_size - 1 > np.iinfo(chosen).max:
        raise ConfigurationError(f"the store's vocabulary holds {vocab_size:,} tokens (ids up to {vocab_size - 1:,}); "
                                 f"{chosen} holds ids up to {np.iinfo(chosen).max:,} (choose {choices[-1]})")
    return chosen


def _marker_problem(marker: Path, kind: str, names: list[str]) -> str | None:
    """None when ``marker`` is an engine export marker of ``kind`` naming ``names``, else why not."""
    if not marker.exists():
        return f"no {marker.name} beside it"
    try:
        data = parse_json(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{marker.name} is not readable JSON ({type(exc).__name__})"
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        return f'{marker.name} has no "format": "{EXPORT_FORMAT}"'
    if data.get("export") != kind:
        return f"{marker.name} describes a {data.get('export')!r} export, not {kind}"
    files = data.get("files")
    listed = [f.get("name") for f in files if isinstance(f, dict)] if isinstance(files, list) else []
    if listed != names:
        return f"{marker.name} lists {listed}, not {names}"
    return None


def _check_targets(files: list[Path], marker: Path, kind: str, force: bool) -> None:
    """ConfigurationError unless every target may be written (see the module docstring)."""
    targets = [*files, marker]
    for path in targets:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise ConfigurationError(f"{path}: exists and is not a regular file; export never replaces it "
                                     "(choose another --out)")
    if path.parent.exists() and not path.parent.is_dir():
        raise ConfigurationError(f"{path.parent}: --out's folder is not a folder")
    existing = [p for p in targets if p.exists()]
    if not existing or force:
        return
    why = _marker_problem(marker, kind, [f.name for f in files])
    if why is not None:
        raise ConfigurationError(f"{existing[0]}: exists and was not written by engine export ({why}); refusing to "
                                 "replace it (move it, choose another --out, or pass --force)")


class _Temporaries:
    """Temporary siblings of the targets, removed unless renamed into place."""

    def __init__(self) -> None:
        self.paths: dict[Path, Path] = {}

    def new(self, target: Path) -> Path:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".export-tmp")
        os.close(fd)
        self.paths[target] = Path(name)
        return self.paths[target]

    def commit(self, target: Path) -> None:
        os.replace(self.paths.pop(target), target)

    def drop(self) -> None:
        for tmp in self.paths.values():
            tmp.unlink(missing_ok=True)
        self.paths.clear()


def _write_tokens(store: TokenStore, part: Partition, batches: Iterator, out, dtype: np.dtype, bos_id: int,
                  drop: bool, vocab_size: int, lengths: np.ndarray) -> int:
    """Stream the split's documents into the open file ``out``; fills ``lengths``; returns tokens written."""
    buffer = np.empty(0, dtype=dtype)
    limit = min(int(np.iinfo(dtype).max), vocab_size - 1)
    documents = written = 0
    for values, offsets in batches:
        count = offsets.shape[0] - 1
        if documents + count > lengths.shape[0]:
            raise StoreError(f"{store.path}: split {part.value} holds more documents than its manifest's "
                             f"{lengths.shape[0]}; the store is corrupt")
        longest = int(np.max(offsets[1:] - offsets[:-1])) if count else 0
        if longest > _INT32_MAX:
            raise ConfigurationError(f"{store.path}: split {part.value} holds a document of {longest:,} tokens; "
                                     f"a Megatron length holds at most {_INT32_MAX:,}")
        size = int(offsets[-1] - offsets[0])
        if buffer.shape[0] < size:
            buffer = np.empty(size, dtype=dtype)
        n, largest = gather_documents(values, offsets, bos_id, drop, buffer, lengths[documents:documents + count])
        if largest > limit:
            where = documents + int(np.argmax([values[offsets[i]:offsets[i + 1]].max(initial=0) > limit
                                               for i in range(count)]))
            raise StoreError(f"{store.path}: split {part.value}, document {where}: holds id {largest}, outside the "
                             f"tokenizer's vocabulary of {vocab_size:,}; the store is corrupt")
        out.write(memoryview(buffer[:n]).cast("B"))
        documents += count
        written += n
    if documents != lengths.shape[0]:
        raise StoreError(f"{store.path}: split {part.value} holds {documents} documents, its manifest "
                         f"{lengths.shape[0]}; the store is corrupt")
    return written


def _export(kind: str, store, split: Partition | str, out: str | os.PathLike, *, bos: bool, dtype: str | None,
            force: bool) -> ExportResult:
    if kind not in FORMATS:
        raise ConfigurationError(f"format {kind!r}: expected one of {', '.join(FORMATS)}")
    part = store_partition(split)
    out_text = os.fspath(out)
    if kind == "megatron":
        if out_text.endswith((".bin", ".idx")):
            raise ConfigurationError(f"--out {out_text}: a Megatron dataset is named by its prefix (give "
                                     f"{out_text[:-4]} for {out_text[:-4]}.bin and {out_text[:-4]}.idx)")
        files, marker = list(megatron_paths(out_text)), Path(out_text + ".json")
    else:
        if out_text.endswith(".json"):
            raise ConfigurationError(f"--out {out_text}: the flat file cannot be a .json (its description is "
                                     "written beside it as PATH.json)")
        files, marker = [Path(out_text)], Path(out_text + ".json")
    _check_targets(files, marker, kind, force)
    store = _open(store)
    documents = store.num_documents(part)
    if not documents:
        raise ConfigurationError(f"{store.path}: split {part.value} holds no documents; nothing to export")
    vocab_size, tokenizer = _vocabulary(store)
    chosen = _dtype(kind, vocab_size, dtype)
    bos_id, drop = document_rule(store, tokenizer, bos)
    files[0].parent.mkdir(parents=True, exist_ok=True)
    _check_targets(files, marker, kind, force)
    with closing(token_batches(store, part, threads=DECODE_THREADS)) as batches:
        return _write_files(kind, store, part, batches, files, marker, chosen, bos_id, drop, vocab_size,
                            documents, tokenizer, force)


def _write_files(kind, store, part, batches, files, marker, chosen, bos_id, drop, vocab_size, documents, tokenizer,
                 force) -> ExportResult:
    temporaries = _Temporaries()
    try:
        lengths = np.empty(documents, dtype=np.int32)
        data = temporaries.new(files[0])
        with open(data, "wb") as fh:
            tokens = _write_tokens(store, part, batches, fh, chosen, bos_id, drop, vocab_size, lengths)
            fh.flush()
            os.fsync(fh.fileno())
        if kind == "megatron":
            index = temporaries.new(files[1])
            index.write_bytes(index_bytes(lengths, chosen))
            fsync(index)
        description = {
            "format": EXPORT_FORMAT, "export": kind, "dtype": chosen.name, "documents": documents, "tokens": tokens,
            "tokenizer_hash": store.tokenizer_hash, "vocab_size": vocab_size,
            "bos_id": None if bos_id < 0 else bos_id, "eos_id": _recorded(store, tokenizer, "eos_id"), "bos_dropped": drop,
            "store": str(Path(store.path).absolute()), "split": part.value,
            "files": [{"name": f.name, "bytes": temporaries.paths[f].stat().st_size} for f in files],
        }
        described = temporaries.new(marker)
        described.write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
        fsync(described)
        _check_targets(files, marker, kind, force)
        if kind == "megatron":
            files[1].unlink(missing_ok=True)  # no complete-looking pair while the .bin changes
        for target in (marker, *files):
            temporaries.commit(target)
        fsync(files[0].parent)
    finally:
        temporaries.drop()
    return ExportResult(kind, part.value, tuple(files), marker, chosen.name, documents, tokens, drop)


def export_megatron(store, split: Partition | str, prefix: str | os.PathLike, *, bos: bool = True,
                    dtype: str | None = None, force: bool = False) -> ExportResult:
    """Write split ``split`` of ``store`` (a TokenStore or its path) as ``PREFIX.bin`` / ``PREFIX.idx``
    (and ``PREFIX.json``); ``bos=False`` drops every document's BOS; ``dtype`` ("uint16" or "int32")
    overrides Megatron's choice. See the module docstring for the rules."""
    return _export("megatron", store, split, prefix, bos=bos, dtype=dtype, force=force)


def export_flat(store, split: Partition | str, path: str | os.PathLike, *, bos: bool = True,
                dtype: str | None = None, force: bool = False) -> ExportResult:
    """Write split ``split`` of ``store`` as one flat file ``path`` (nanoGPT's ``train.bin``) and
    ``path.json``; ``dtype`` ("uint16" or "uint32") overrides the choice. See the module docstring."""
    return _export("nanogpt", store, split, path, bos=bos, dtype=dtype, force=force)


def export(store, split: Partition | str, out: str | os.PathLike, *, format: str, bos: bool = True,
           dtype: str | None = None, force: bool = False) -> ExportResult:
    """``export_megatron`` (``format="megatron"``) or ``export_flat`` (``format="nanogpt"``)."""
    return _export(format, store, split, out, bos=bos, dtype=dtype, force=force)
