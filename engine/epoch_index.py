"""The saved epoch index: a ``MiniBatchEpoch`` written as descriptors plus a manifest, and read back.

``save_epoch_index(epoch, directory, store=store)`` writes ``directory/index-<sha256[:16]>.parquet``
(named by its content) with int64 columns ``document_index`` and ``start`` in epoch order, then
``directory/manifest.json`` (seed, T, S, B, counts, store path, tokenizer hash, the index's file name
and sha256, and the sha256 of the store's own manifest ``_engine.json``, which lists every store
file's sha256, so it names the exact store). Each file is written under a temporary name
(``.NAME.tmp-<pid>``) and renamed; the manifest's rename is the one step that replaces an earlier
epoch, whose index is removed only after it: a run killed at any point leaves the earlier epoch
(manifest and the index it names) or the new one, and the temporaries of dead runs are removed by
the next run, which accepts them in ``--out``.

``load_epoch_index(directory)`` checks every manifest field and the index's sha256;
``EpochIndex.open_store()`` re-opens the store named in the manifest and refuses any store but the
one the index was built from (tokenizer hash, then the store manifest's sha256, then the document
count); ``EpochIndex.batch(k, store)`` rebuilds batch ``k``'s rows from the descriptors.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.checks import check_output_folder, read_json
from engine.errors import BatchError, StoreError
from engine.store import MANIFEST_NAME as STORE_MANIFEST_NAME
from engine.store.layout import check_store_dir
from engine.store.lock import pid_alive
from engine.store_files import file_head, manifest_start
from engine.testhook import stop_point

MANIFEST_FORMAT = "engine.batches"
MANIFEST_VERSION = 2  # 2: records store_manifest_sha256
INDEX_NAME = "index.parquet"
MANIFEST_NAME = "manifest.json"
INDEX_COLUMNS = ("document_index", "start")


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def store_manifest_digest(store_path: str | os.PathLike) -> str:
    """sha256 of a store's manifest (``_engine.json``): it lists every store file's sha256, so equal
    digests mean the same store content."""
    store_path = Path(store_path)
    path = store_path / STORE_MANIFEST_NAME
    check_store_dir(store_path)  # the words of TokenStore.open
    try:
        return _file_sha256(path)
    except FileNotFoundError:
        raise StoreError(f"{path}: not found; {store_path} is not a complete token store") from None


_INDEX_FILE = re.compile(r"index(-[0-9a-f]{16})?\.parquet")
_TEMPORARY = re.compile(r"\.(index(-[0-9a-f]{16})?\.parquet|manifest\.json)\.tmp-([0-9]{1,10})")


_PARQUET_MAGIC = b"PAR1"  # the first bytes pyarrow writes to an index file
_MANIFEST_START = manifest_start(MANIFEST_FORMAT)


def _starts_with(path: Path, marker: bytes, *, whole: bool = False) -> bool:
    """A regular file (not a link) that begins with ``marker`` (``whole``) or holds a beginning of it, or
    nothing: what a run killed after creating a temporary, or while writing it, left."""
    head = file_head(path, len(marker))
    return head is not None and head == marker[:len(head)] and (not whole or len(head) == len(marker))


def _proven_index(path: Path, match) -> bool:
    """``index-<16 hex>.parquet`` whose sha256 starts with those 16 hex (the name ``write_epoch_index``
    gives it), or the earlier layout's ``index.parquet`` holding a Parquet file of the index's columns."""
    if path.is_symlink() or not path.is_file():
        return False
    if match.group(1):
        return _file_sha256(path).startswith(match.group(1)[1:])
    import pyarrow.parquet as pq

    try:
        return tuple(pq.read_schema(path).names) == INDEX_COLUMNS
    except Exception:  # noqa: BLE001 (any file pyarrow cannot read as Parquet is not ours)
        return False


def _our_files(directory: Path) -> tuple[tuple[str, ...], tuple[Path, ...]]:
    """``(names, dead)``: the names in ``directory`` an epoch index writes and can prove it wrote (a
    manifest that begins as it writes one, index files whose content matches their name, temporaries of
    dead runs holding only what a run writes there), and those temporaries (``dead``: to remove once the
    folder is known to be ours; a live run's are not listed, and make the folder foreign). A user's file
    named like one of them is not listed, so ``check_output_folder`` refuses the folder by its name."""
    if not directory.is_dir():
        return (), ()
    names, dead = [], []
    for entry in directory.iterdir():
        temporary = _TEMPORARY.fullmatch(entry.name)
        if temporary:
            marker = _MANIFEST_START if temporary.group(1) == MANIFEST_NAME else _PARQUET_MAGIC
            if not pid_alive(int(temporary.group(3))) and _starts_with(entry, marker):
                names.append(entry.name)
                dead.append(entry)
            continue
        index = _INDEX_FILE.fullmatch(entry.name)
        if ((entry.name == MANIFEST_NAME and _starts_with(entry, _MANIFEST_START, whole=True))
                or (index and _proven_index(entry, index))):
            names.append(entry.name)
    return tuple(names), tuple(dead)


def _replace_atomically(path: Path, write) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(temporary)
        os.replace(temporary, path)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write it ({exc.strerror or exc})") from None
    finally:
        if temporary.exists():
            temporary.unlink()


def epoch_description(epoch, store, store_manifest_sha256: str | None = None) -> dict:
    """The fields an epoch manifest records about ``epoch`` (built from ``store``)."""
    order = epoch.batch_config.order
    return {
        "store": str(Path(store.path).resolve()),
        "tokenizer_hash": store.tokenizer_hash,
        "store_manifest_sha256": (store_manifest_digest(store.path) if store_manifest_sha256 is None
                                  else store_manifest_sha256),
        "split": str(getattr(epoch.partition, "value", epoch.partition)),
        "context_length": epoch.window_config.context_length,
        "stride": epoch.window_config.stride,
        "batch_size": epoch.batch_config.batch_size,
        "order": "shuffled" if order.is_shuffled else "sequential",
        "seed": order.seed,
        "window_count": epoch.window_count,
        "batch_count": epoch.batch_count,
        "shuffle_state_after": epoch.shuffle_state_after,
        "document_count": len(epoch.document_ids),
    }


def save_epoch_index(epoch, directory: str | os.PathLike, *, store, store_manifest_sha256: str | None = None) -> dict:
    """Write ``index.parquet`` then ``manifest.json`` into ``directory`` for ``epoch`` built from
    ``store`` (a ``TokenStore``); return ``{"index", "manifest", "index_sha256"}``.
    ``store_manifest_sha256`` is the store manifest digest taken before the epoch was built (read now
    when not given)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = Path(directory)
    names, dead = _our_files(directory)
    unwritten = () if os.path.lexists(directory / MANIFEST_NAME) else (MANIFEST_NAME,)  # a present one: proven
    own = tuple(dict.fromkeys(unwritten + ("index-<sha256>.parquet",) + names))
    check_output_folder(directory, own, "engine batches --out")
    for temporary in dead:  # a dead run's, now that the folder is known to be ours
        temporary.unlink(missing_ok=True)
    description = epoch_description(epoch, store, store_manifest_sha256)
    directory.mkdir(parents=True, exist_ok=True)
    document_index, start = epoch.descriptors()
    table = pa.table({"document_index": pa.array(document_index, pa.int64()), "start": pa.array(start, pa.int64())})
    staged = directory / f".{INDEX_NAME}.tmp-{os.getpid()}"
    try:
        pq.write_table(table, staged)
        digest = _file_sha256(staged)
        index_path = directory / f"index-{digest[:16]}.parquet"
        stop_point("epoch-index")
        os.replace(staged, index_path)
    finally:
        staged.unlink(missing_ok=True)
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        **description,
        "index": {"file": index_path.name, "sha256": digest, "columns": list(INDEX_COLUMNS)},
    }
    manifest_path = directory / MANIFEST_NAME
    stop_point("epoch-manifest")
    _replace_atomically(manifest_path, lambda p: p.write_text(json.dumps(manifest, indent=2) + "\n"))
    for name in _our_files(directory)[0]:  # the earlier epoch's index, now that no manifest names it
        if name not in (MANIFEST_NAME, index_path.name) and _INDEX_FILE.fullmatch(name):
            (directory / name).unlink(missing_ok=True)
    return {"index": str(index_path), "manifest": str(manifest_path), "index_sha256": digest}


def _count(manifest: dict, key: str, path: Path, low: int) -> int:
    value = manifest.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StoreError(f'{path}: "{key}" is {type(value).__name__} {value!r:.40}, expected an integer >= {low}')
    if value < low:
        raise StoreError(f'{path}: "{key}" is {value}, expected an integer >= {low}')
    return value


def check_manifest(manifest: dict, path: Path) -> None:
    """StoreError naming the first field of an epoch manifest that is missing, mistyped or inconsistent."""
    from engine.partition import PARTITIONS

    for key, expected in (("store", "a path string"), ("tokenizer_hash", "a hash string")):
        value = manifest.get(key)
        if not isinstance(value, str) or not value:
            raise StoreError(f'{path}: "{key}" is {type(value).__name__} {value!r:.40}, expected {expected}')
    digest = manifest.get("store_manifest_sha256")
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise StoreError(f'{path}: "store_manifest_sha256" is {type(digest).__name__} {digest!r:.70}, '
                         "expected a sha256 hex string")
    names = [p.value for p in PARTITIONS]
    if manifest.get("split") not in names:
        raise StoreError(f'{path}: "split" is {manifest.get("split")!r:.40}, expected one of {", ".join(names)}')
    for key, low in (("context_length", 1), ("stride", 1), ("batch_size", 1), ("window_count", 0),
                     ("batch_count", 0), ("document_count", 0)):
        _count(manifest, key, path, low)
    if "seed" not in manifest:
        raise StoreError(f'{path}: "seed" is missing (expected an integer, or null for a sequential epoch)')
    seed = manifest["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise StoreError(f'{path}: "seed" is {type(seed).__name__} {seed!r:.40}, expected an integer or null')
    windows, size = manifest["window_count"], manifest["batch_size"]
    expected = -(-windows // size)
    if manifest["batch_count"] != expected:
        raise StoreError(f'{path}: "batch_count" is {manifest["batch_count"]}, but {windows} windows in batches '
                         f"of {size} make {expected}")
    index = manifest.get("index")
    if not isinstance(index, dict):
        raise StoreError(f'{path}: "index" is missing or not an object {{"file", "sha256"}}')
    file = index.get("file")
    if not isinstance(file, str) or not file or Path(file).name != file or file in (".", ".."):
        raise StoreError(f'{path}: "index.file" is {file!r:.60}, expected a file name in the epoch directory')
    if not isinstance(index.get("sha256"), str):
        raise StoreError(f'{path}: "index.sha256" is {index.get("sha256")!r:.70}, expected a sha256 hex string')


def read_manifest(directory: str | os.PathLike) -> dict:
    """The checked manifest of the epoch index in ``directory`` (StoreError when it is not one)."""
    directory = Path(directory)
    path = directory / MANIFEST_NAME
    manifest = read_json(path, StoreError, missing=f"not found; write one with `engine batches STORE ... --out {directory}`")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise StoreError(f'{path}: not a batches manifest (expected "format": "{MANIFEST_FORMAT}")')
    version = manifest.get("version")
    if version != MANIFEST_VERSION:
        earlier = version == 1
        hint = " (it does not name the exact store; rebuild it with `engine batches STORE ... --out`)" if earlier else ""
        raise StoreError(f"{path}: manifest version {version!r:.40}, expected {MANIFEST_VERSION}{hint}")
    check_manifest(manifest, path)
    return manifest


@dataclass(frozen=True)
class EpochIndex:
    """A saved epoch index whose manifest and index sha256 were checked (``load_epoch_index``)."""

    directory: Path
    manifest: dict

    @property
    def index_path(self) -> Path:
        return self.directory / self.manifest["index"]["file"]

    @property
    def batch_count(self) -> int:
        return self.manifest["batch_count"]

    def check_batch(self, k) -> None:
        """BatchError unless ``k`` names a batch of this epoch."""
        count = self.batch_count
        if isinstance(k, bool) or not 0 <= k < count:
            valid = f"0..{count - 1}" if count else "none: the epoch is empty"
            raise BatchError(f"batch {k} is out of range: this epoch has {count} batches (valid: {valid})")

    def open_store(self):
        """The store named in the manifest, refused unless it is the exact store the index was built from."""
        from engine.store import TokenStore

        manifest = self.manifest
        store = TokenStore.open(manifest["store"])
        if store.tokenizer_hash != manifest["tokenizer_hash"]:
            raise StoreError(f"{manifest['store']}: tokenizer hash {store.tokenizer_hash} differs from "
                             f"{manifest['tokenizer_hash']} recorded in {self.directory / MANIFEST_NAME}; "
                             "the store was rewritten")
        found = store_manifest_digest(manifest["store"])
        if found != manifest["store_manifest_sha256"]:
            raise StoreError(f"{manifest['store']}: the store's manifest hashes to {found}, but the epoch index "
                             f"{self.directory / MANIFEST_NAME} was built from the store whose manifest hashes to "
                             f"{manifest['store_manifest_sha256']}; the store was rewritten: build the epoch again")
        split = manifest["split"]
        count = len(store.ids(split))
        if count != manifest["document_count"]:
            raise StoreError(f"{manifest['store']} split={split}: {count} documents, but the manifest recorded "
                             f"{manifest['document_count']}")
        return store

    def descriptors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(document_index, start)`` of every window in epoch order."""
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(self.index_path, columns=list(INDEX_COLUMNS))
        except (OSError, ValueError, KeyError) as exc:
            raise StoreError(f"{self.index_path}: cannot read the descriptor index ({exc})") from None
        if table.num_rows != self.manifest["window_count"]:
            raise StoreError(f"{self.index_path}: holds {table.num_rows} descriptors, the manifest records "
                             f"{self.manifest['window_count']} windows")
        return table.column("document_index").to_numpy(), table.column("start").to_numpy()

    def batch(self, k: int, store) -> dict:
        """Batch ``k`` rebuilt from the descriptors over ``store`` (from ``open_store``): its shape and
        rows (partition, document index and id, start, input and target ids)."""
        from engine.windows import gather_windows

        self.check_batch(k)
        manifest = self.manifest
        document_index, start = self.descriptors()
        size, count = manifest["batch_size"], manifest["batch_count"]
        lo, hi = k * size, min((k + 1) * size, document_index.shape[0])
        document_index, start = document_index[lo:hi], start[lo:hi]
        split, T = manifest["split"], manifest["context_length"]
        values, offsets = store.arrays(split)
        ids = store.ids(split)
        inputs, targets = gather_windows(values, offsets, document_index, start, T)
        rows = [
            {"row": r, "partition": split, "document_index": int(d), "document_id": ids[d], "start": int(s),
             "input": inputs[r].tolist(), "target": targets[r].tolist()}
            for r, (d, s) in enumerate(zip(document_index.tolist(), start.tolist()))
        ]
        return {"batch": k, "batch_count": count, "shape": [hi - lo, T], "token_count": (hi - lo) * T,
                "store": manifest["store"], "split": split, "seed": manifest["seed"], "rows": rows}


def load_epoch_index(directory: str | os.PathLike) -> EpochIndex:
    """The epoch index saved in ``directory``: its manifest checked field by field and the index file's
    sha256 compared with the one the manifest recorded (StoreError on any difference)."""
    directory = Path(directory)
    index = EpochIndex(directory, read_manifest(directory))
    index_path = index.index_path
    if not index_path.exists():
        raise StoreError(f"{index_path}: descriptor index not found")
    digest = _file_sha256(index_path)
    if digest != index.manifest["index"]["sha256"]:
        raise StoreError(f"{index_path}: sha256 {digest} differs from the manifest's "
                         f"{index.manifest['index']['sha256']}; the index was changed after it was written")
    return index
