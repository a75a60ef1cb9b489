"""Which folders a store writer may replace: only provably engine token stores (``check_replaceable``)."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from engine.checks import parse_json
from engine.partition import PARTITIONS
from engine.errors import StoreError
from engine.store.layout import FORMAT, FORMAT_VERSION, FORMAT_VERSIONS, MANIFEST_NAME, TOKENIZER_NAME, split_dir

__all__ = ["check_replaceable", "own_temporaries"]

_TEMPORARY = re.compile(r"\.(?P<store>.+)\.(?P<kind>tmp|old)-(?P<pid>[0-9]{1,10})")
_TOP_FILE = re.compile(r"(_tokenizer\.json|_engine\.json|_resume\.json|\._resume\.json\.tmp"
                       r"|\._tokenizer\.json\.[0-9a-f]{12}\.tmp|\.long-[0-9]{1,20}\.u32)")
_SPLIT_FILE = re.compile(r"part-[0-9]{5,}\.parquet")


def _manifest_files(manifest) -> set[str] | str:
    """The file names a store manifest lists, or why it is not an engine store manifest."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return f'no "format": "{FORMAT}"'
    if manifest.get("format_version") not in FORMAT_VERSIONS or isinstance(manifest.get("format_version"), bool):
        return f"format_version {manifest.get('format_version')!r}, expected {FORMAT_VERSION}"
    tokenizer, splits = manifest.get("tokenizer"), manifest.get("splits")
    if not isinstance(tokenizer, dict) or not isinstance(tokenizer.get("hash"), str):
        return "no tokenizer hash"
    if not isinstance(splits, dict) or set(splits) != {p.value for p in PARTITIONS}:
        return "its splits are not train, validation and test"
    names: set[str] = set()
    for part in PARTITIONS:
        files = splits[part.value].get("files") if isinstance(splits[part.value], dict) else None
        if not isinstance(files, list):
            return f"split {part.value} lists no files"
        for entry in files:
            name = entry.get("name") if isinstance(entry, dict) else None
            prefix = f"{split_dir(part)}/"
            if not isinstance(name, str) or not name.startswith(prefix + "part-") or "/" in name[len(prefix):]:
                return f"split {part.value} lists a file named {name!r}"
            names.add(name)
    return names


def _holds_only_store_files(folder: Path) -> bool:
    """True when ``folder`` holds nothing but what a store writer puts in its temporary: the split
    folders with ``part-NNNNN.parquet`` files, ``_tokenizer.json``, ``_engine.json``, ``_resume.json``,
    their own temporaries and the ids of a long document being encoded (``.long-N.u32``); no links."""
    splits = {split_dir(p) for p in PARTITIONS}
    for item in folder.iterdir():
        if item.is_symlink():
            return False
        if item.is_dir():
            if item.name not in splits or not all(_SPLIT_FILE.fullmatch(f.name) and f.is_file() and not f.is_symlink()
                                                  for f in item.iterdir()):
                return False
        elif not _TOP_FILE.fullmatch(item.name):
            return False
    return True


def own_temporaries(store_path: Path, alive) -> tuple[list[Path], list[Path]]:
    """``(temporaries, foreign)`` beside the store at ``store_path``: ``.DIR.tmp-<pid>`` (being written)
    and ``.DIR.old-<pid>`` (moved aside) folders of dead pids (``alive(pid)`` False) that hold only
    store files are provably a store writer's; any other entry named ``.DIR.tmp-*`` / ``.DIR.old-*``
    is foreign (a user's ``.store.tmp-backup`` or ``.store.old-2023``), never removed."""
    ours, foreign = [], []
    for prefix in (f".{store_path.name}.tmp-", f".{store_path.name}.old-"):
        for entry in sorted(store_path.parent.glob(glob.escape(prefix) + "*")):
            match = _TEMPORARY.fullmatch(entry.name)
            if (match and match["store"] == store_path.name and not entry.is_symlink() and entry.is_dir()
                    and not alive(int(match["pid"])) and _holds_only_store_files(entry)):
                ours.append(entry)
            elif not (match and match["store"] == store_path.name and alive(int(match["pid"]))):
                foreign.append(entry)
    return ours, foreign


def check_replaceable(path: str | os.PathLike) -> None:
    """StoreError unless ``path`` is absent, an empty folder, or provably an engine token store: a
    valid ``_engine.json`` and nothing but the files it lists, ``_tokenizer.json`` and split folders."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_dir():
        raise StoreError(f"{path}: exists and is not a token store (no {MANIFEST_NAME}); refusing to replace it")
    if not any(path.iterdir()):
        return
    manifest_file = path / MANIFEST_NAME
    if manifest_file.is_symlink() or not manifest_file.is_file():
        raise StoreError(f"{path}: exists and is not a token store (no {MANIFEST_NAME}); refusing to replace it")
    try:
        listed = _manifest_files(parse_json(manifest_file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        listed = f"unreadable JSON ({type(exc).__name__})"
    if isinstance(listed, str):
        raise StoreError(f"{manifest_file}: not a valid engine store manifest ({listed}); refusing to replace {path}")
    folders = {split_dir(p) for p in PARTITIONS}
    for item in sorted(path.rglob("*")):
        name = item.relative_to(path).as_posix()
        if name in folders and item.is_dir() and not item.is_symlink():
            continue
        if (name in listed or name in (MANIFEST_NAME, TOKENIZER_NAME)) and item.is_file() and not item.is_symlink():
            continue
        raise StoreError(f"{item}: not part of the token store at {path} (its {MANIFEST_NAME} does not list it); "
                         f"refusing to replace {path}")
