"""Which folders a store writer may replace: only provably engine token stores (``check_replaceable``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from engine.partition import PARTITIONS
from engine.errors import StoreError
from engine.store.layout import FORMAT, FORMAT_VERSION, FORMAT_VERSIONS, MANIFEST_NAME, TOKENIZER_NAME, split_dir

__all__ = ["check_replaceable"]


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
        listed = _manifest_files(json.loads(manifest_file.read_text(encoding="utf-8")))
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
