"""What a corpus path names: one file, a folder of shards, a glob of shards, a ``datasets`` folder,
or a folder of text documents (``corpus_shards``).

- A file's kind is named by its suffixes (``file_kind``): JSONL (``.jsonl`` or ``.json``, either
  followed by a compression suffix of ``engine.corpus.compressed``: ``c.jsonl.zst``), Parquet
  (``.parquet``) or Arrow IPC (``.arrow``, ``.feather``, ``.ipc``).
- A folder's files are its regular, non-hidden files below it, sorted by relative POSIX path
  (``folder_files``: hidden means a path component starting with "."; engine's own outputs, a
  token store or a ``prepare`` output folder, and the paths in ``exclude``, which ``prepare`` gives
  its ``--out`` and ``--splits``, are left out; a folder is engine's output when its ``_engine.json``
  or ``store/_engine.json`` begins as a store writer writes it, or its ``store.lock`` holds a writer's
  pid, so a user's file that merely has one of those names leaves its folder in). When they
  are all JSONL (plain or compressed, mixed freely), all Parquet or all Arrow, the folder is a
  *sharded corpus* of that format, its shards in that order; when none is of these kinds it is a
  folder of text documents (one per file); a mix is a CorpusError naming two files of different kinds.
- A folder written by ``datasets.Dataset.save_to_disk`` (a ``state.json`` listing ``_data_files``)
  is a sharded Arrow corpus whose shards are those files, in ``state.json``'s order (reading it
  needs no ``datasets``). A ``DatasetDict`` folder (``dataset_dict.json``) is refused with the
  folders of its splits.
- A path that does not exist and holds a glob character (``*``, ``?``, ``[``) is a glob:
  ``'data/*.jsonl.zst'`` (``**`` reaches into subfolders). Its matching regular files, sorted by
  path, are shards as a folder's are (hidden files, engine's outputs and ``exclude`` left out); a
  glob that matches nothing, or only text files, is an error.
- ``corpus_format`` (``--corpus-format``: jsonl, parquet, arrow or folder) overrides the guess:
  every file of the path (one file, a folder's files, a glob's matches) is read as that format,
  whatever its suffix (the compression still follows the last suffix); ``folder`` reads a folder
  as text documents.

Each shard has a *name*: a file's own name for a single file, its POSIX path relative to the folder
(or to the glob's leading folder, the part before the first glob character) for shards. Made ids
(``engine.corpus.readers``) and messages use it, so ids stay unique across shards.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from engine.checks import parse_json
from engine.corpus.compressed import COMPRESSIONS, without_compression
from engine.errors import ConfigurationError, CorpusError
from engine.store_files import LOCK_SUFFIX, MANIFEST_NAME, STORE_NAME, holds_store_lock, holds_store_manifest

__all__ = ["CorpusShards", "corpus_shards", "file_kind", "folder_files", "is_glob", "CORPUS_FORMATS",
           "SHARD_KINDS", "CORPUS_FORMS", "ARROW_SUFFIXES", "JSONL_SUFFIXES", "DATASET_STATE"]

JSONL_SUFFIXES = (".jsonl", ".json")
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
SHARD_KINDS = ("jsonl", "parquet", "arrow")
CORPUS_FORMATS = SHARD_KINDS + ("folder",)
DATASET_STATE = "state.json"
_GLOB_CHARS = frozenset("*?[")
# Every form a corpus argument may take, in the one phrase that error messages use.
CORPUS_FORMS = ("a .jsonl/.json file (plain or .gz/.zst/.bz2/.xz), a .parquet or .arrow/.feather/.ipc file, "
                "a folder or quoted glob of such shards, a datasets save_to_disk folder, a folder of text files, "
                "or a .txt file holding one continuous text")
_KIND_WORDS = {"jsonl": "JSONL", "parquet": "Parquet", "arrow": "Arrow IPC", None: "text"}


@dataclass(frozen=True)
class CorpusShards:
    """The files of a corpus: ``kind`` (one of ``CORPUS_FORMATS``), each shard's path and name.

    ``files``/``names`` are empty for a folder of text documents (``iter_folder`` walks it);
    ``single`` is True for one file named directly."""

    path: Path
    kind: str
    files: tuple[Path, ...] = ()
    names: tuple[str, ...] = ()
    single: bool = False
    dataset: bool = False

    def pairs(self) -> list[tuple[Path, str]]:
        return list(zip(self.files, self.names))


def file_kind(path: str | os.PathLike) -> str | None:
    """``"jsonl"``, ``"parquet"``, ``"arrow"`` by the suffixes of ``path`` (see the module docstring), or None."""
    suffix = without_compression(path).suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if Path(path).suffix.lower() in COMPRESSIONS:
        return None  # a compressed Parquet, Arrow or text file is no format engine reads
    if suffix == ".parquet":
        return "parquet"
    if suffix in ARROW_SUFFIXES:
        return "arrow"
    return None


def is_glob(path: str | os.PathLike) -> bool:
    """A path that does not exist and holds a glob character."""
    text = os.fspath(path)
    return bool(_GLOB_CHARS & set(text)) and not os.path.lexists(text)


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` names (links followed), None if nothing: one system call, where
    ``os.path.realpath`` walks every component in Python (quadratic in a deep folder)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _engine_output(folder: Path, excluded: set[tuple[int, int]]) -> bool:
    """Whether a folder below a corpus folder is left out: excluded, a token store or a ``prepare`` output
    (a store manifest, or a writer's lock beside ``store``, in engine's own formats: a user's file that
    merely has one of those names leaves the folder in the corpus)."""
    return ((bool(excluded) and _identity(folder) in excluded) or holds_store_manifest(folder / MANIFEST_NAME)
            or holds_store_lock(folder / f"{STORE_NAME}{LOCK_SUFFIX}")
            or holds_store_manifest(folder / STORE_NAME / MANIFEST_NAME))


def _left_out(file: Path, root: Path, excluded: set[str]) -> bool:
    """Whether a glob's match is left out: excluded, or inside engine's own outputs below ``root``."""
    if os.path.realpath(file) in excluded:
        return True
    relative = Path(os.path.relpath(file, root))
    return any(_engine_output(root / parent, excluded) for parent in list(relative.parents)[:-1])


def folder_files(root: Path, exclude: Iterable[str | os.PathLike] = ()) -> list[str]:
    """The relative POSIX paths of a folder's files (see the module docstring), sorted."""
    excluded = {_identity(p) for p in exclude} - {None}
    relative = []
    pending = [root]  # a stack, not recursion (os.walk recurses): a folder 1,100 levels deep is read too
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                entries = list(entries)
        except OSError:  # as os.walk: a folder that cannot be listed is passed over
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            full = Path(folder) / entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if not _engine_output(full, excluded):
                    pending.append(full)
            elif full.is_file() and (not excluded or _identity(full) not in excluded):  # links to files count; FIFOs do not
                relative.append(full.relative_to(root).as_posix())
    return sorted(relative)


def _check_format(corpus_format: str | None) -> None:
    if corpus_format is not None and corpus_format not in CORPUS_FORMATS:
        raise ConfigurationError(f"--corpus-format {corpus_format!r} is unknown (expected one of: "
                                 f"{', '.join(CORPUS_FORMATS)})")


def _kind_suffix(path: Path) -> str:
    """The suffixes that name a file's kind: ``.jsonl.zst``, ``.parquet``."""
    return "".join(path.suffixes[-2:] if path.suffix.lower() in COMPRESSIONS else path.suffixes[-1:])


def _one_kind(where: str, files: list[tuple[Path, str]], what: str) -> str | None:
    """The one kind of ``files``; CorpusError naming two files of different kinds."""
    kinds = [file_kind(f) for f, _ in files]
    first = kinds[0]
    for (file, _), kind in zip(files, kinds):
        if kind != first:
            hint = ""
            if what == "the folder":  # a glob of the shards passes over the other files (a README)
                shard = files[0][0] if first is not None else file
                hint = f"; a quoted glob such as '{Path(where) / '**' / ('*' + _kind_suffix(shard))}' reads only the shards"
            raise CorpusError(
                f"{where}: {what} mixes {_KIND_WORDS[first]} and {_KIND_WORDS[kind]} files ({files[0][0]} and {file}); "
                "expected all JSONL (plain or compressed), all Parquet, all Arrow, or only text documents "
                f"(--corpus-format FORMAT reads every file as one format{hint})")
    return first


def _dataset_shards(root: Path) -> CorpusShards | None:
    """A ``Dataset.save_to_disk`` folder's Arrow files in ``state.json`` order (None if ``root`` is none)."""
    if (root / "dataset_dict.json").is_file():
        splits = sorted(p.parent.name for p in root.glob(f"*/{DATASET_STATE}"))
        raise CorpusError(f"{root}: a DatasetDict folder (dataset_dict.json) holds one dataset per split "
                          f"({', '.join(splits) or 'none found'}); expected one dataset: name the folder of one split, "
                          f"e.g. {root / (splits[0] if splits else 'train')}")
    state_path = root / DATASET_STATE
    if not state_path.is_file():
        return None
    try:
        state = parse_json(state_path.read_text(encoding="utf-8"))
        names = [entry["filename"] for entry in state["_data_files"]]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None  # a state.json of something else: the folder is read by its files
    if not names or not all(isinstance(n, str) and n for n in names):
        raise CorpusError(f"{state_path}: lists no Arrow files in \"_data_files\" (expected a datasets save_to_disk "
                          "folder with at least one data file)")
    files = []
    for name in names:
        file = root / name
        if not file.is_file():
            raise CorpusError(f"{state_path}: lists {name!r}, which is not in {root} (expected every data file "
                              "of a datasets save_to_disk folder)")
        files.append(file)
    return CorpusShards(root, "arrow", tuple(files), tuple(names), dataset=True)


def _glob_root(pattern: str) -> Path:
    """The leading folder of a glob: its components before the first one holding a glob character."""
    parts = Path(pattern).parts
    lead = []
    for part in parts[:-1]:
        if _GLOB_CHARS & set(part):
            break
        lead.append(part)
    return Path(*lead) if lead else Path(".")


def corpus_shards(path: str | os.PathLike, corpus_format: str | None = None, *,
                  exclude: Iterable[str | os.PathLike] = ()) -> CorpusShards:
    """What ``path`` names (see the module docstring); CorpusError where it names nothing readable."""
    _check_format(corpus_format)
    text = os.fspath(path)
    path = Path(path)
    if is_glob(text):
        if corpus_format == "folder":
            raise ConfigurationError(f"{text}: --corpus-format folder names a folder of text files, not a glob")
        root = _glob_root(text)
        excluded = {os.path.realpath(p) for p in exclude}
        matches = sorted(m for m in glob.glob(text, recursive=True)
                         if Path(m).is_file() and not _left_out(Path(m), root, excluded))
        if not matches:
            raise CorpusError(f"{text}: the glob matches no file (expected {CORPUS_FORMS}; quote a glob so that "
                              "the shell does not expand it)")
        pairs = [(Path(m), Path(os.path.relpath(m, root)).as_posix()) for m in matches]
        kind = corpus_format or _one_kind(text, pairs, "the glob")
        if kind is None:
            raise CorpusError(f"{text}: the glob matches text files ({pairs[0][0]}); expected JSONL, Parquet or Arrow "
                              "shards (--corpus-format jsonl|parquet|arrow reads them as one)")
        return CorpusShards(path, kind, tuple(p for p, _ in pairs), tuple(n for _, n in pairs))
    if path.is_dir():
        if corpus_format == "folder":
            return CorpusShards(path, "folder")
        dataset = _dataset_shards(path)
        if dataset is not None:
            if corpus_format not in (None, "arrow"):
                raise ConfigurationError(f"{path}: a datasets save_to_disk folder holds Arrow files, not "
                                         f"--corpus-format {corpus_format}")
            return dataset
        relative = folder_files(path, exclude)
        pairs = [(path / rel, rel) for rel in relative]
        kind = corpus_format or (_one_kind(str(path), pairs, "the folder") if pairs else None)
        if kind is None:
            return CorpusShards(path, "folder")
        return CorpusShards(path, kind, tuple(p for p, _ in pairs), tuple(n for _, n in pairs))
    if not path.exists():
        raise CorpusError(f"{path}: no such corpus file or directory (expected {CORPUS_FORMS})")
    if not path.is_file():  # checked before any lock is taken: a FIFO would hang the second pass
        raise CorpusError(f"{path}: is not a regular file (a FIFO, socket or device); a corpus is read more than "
                          "once (counting, fitting, encoding), so it must be a regular file or a folder of them")
    if corpus_format == "folder":
        raise ConfigurationError(f"{path}: --corpus-format folder names a folder of text files, not a file")
    kind = corpus_format or file_kind(path)
    if kind is None:
        if path.suffix == ".txt":
            raise CorpusError(
                f"{path}: unknown corpus format '.txt' for a corpus of documents: a .txt file is one continuous "
                "text (read it with read_text_file and split it with CorpusPartitions.from_text)"
            )
        suffix = "".join(path.suffixes[-2:]) if path.suffix.lower() in COMPRESSIONS else path.suffix
        raise CorpusError(f"{path}: unknown corpus format {suffix or '(no suffix)'!r} (expected {CORPUS_FORMS}; "
                          "--corpus-format FORMAT names it)")
    return CorpusShards(path, kind, (path,), (path.name,), single=True)
