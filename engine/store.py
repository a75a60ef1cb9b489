"""The token store: Parquet dataset partitioned by split, zero-copy views (SPEC §4).

Layout of a store directory ``DIR``::

    DIR/split=train/part-00000.parquet        columns id: string, tokens: large_list<uint32>
    DIR/split=validation/part-00000.parquet   (every split directory exists, maybe a zero-row file)
    DIR/split=test/part-00000.parquet
    DIR/_tokenizer.json                       the tokenizer that encoded it (Tokenizer.save)
    DIR/_engine.json                          manifest, written last: format version, tokenizer
                                              hash/bos/eos, per split documents, tokens and files
                                              (name, rows, bytes, sha256)

Every Parquet file's schema metadata repeats ``engine.format_version``, ``engine.tokenizer_hash``,
``engine.bos_id`` and ``engine.eos_id``. A writer streams chunks into Parquet row groups (memory
bounded by one chunk) inside a temporary sibling ``.DIR.tmp-<pid>`` and renames it into place on
success, so ``DIR`` is always the old complete store or the new one; ``DIR.lock`` keeps a second
writer out. Opening costs one footer read per file (sizes and row counts against the manifest);
``verify()`` also hashes every byte. ``arrays(p)`` hands out the ``tokens`` column's flat values
(uint32) and offsets (int64) as read-only numpy views of the Arrow buffers: no copy, except one
concatenation when a split spans several row groups or files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence, overload

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.corpus import PARTITIONS, Partition
from engine.errors import StoreError

__all__ = ["EncodedDocument", "EncodedDocuments", "TokenStore", "TokenStoreWriter", "FORMAT_VERSION"]

FORMAT = "engine.token_store"
FORMAT_VERSION = 1
MANIFEST_NAME = "_engine.json"
# "_" prefix (like the manifest's): dataset readers (pyarrow.dataset, pq.read_table(DIR)) skip the
# file, so DIR reads as one Parquet dataset partitioned by split.
TOKENIZER_NAME = "_tokenizer.json"
ROW_GROUP_SIZE = 16384
CHUNK_DOCUMENTS = 4096
TOKENS_TYPE = pa.large_list(pa.uint32())


@dataclass(frozen=True, slots=True)
class EncodedDocument:
    """One encoded document ``[BOS, content..., EOS]``; ``tokens`` is uint32 (often a zero-copy view)."""

    id: str
    partition: Partition
    tokens: np.ndarray


def _partition(value: Partition | str) -> Partition:
    try:
        return Partition(value)
    except ValueError:
        raise StoreError(f"unknown partition {value!r} (expected train, validation or test)") from None


def _split_dir(partition: Partition) -> str:
    return f"split={partition.value}"


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the lock ------------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class _WriterLock:
    """``DIR.lock`` holding the writer's pid, created atomically (hard link of a complete file)."""

    def __init__(self, store_path: Path, *, wait: bool, timeout: float, poll: float = 0.05):
        self.path = store_path.with_name(store_path.name + ".lock")
        self.store_path, self.wait, self.timeout, self.poll = store_path, wait, timeout, poll

    def _holder(self) -> int | None:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else -1

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        draft = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        draft.write_text(f"{os.getpid()}\n")
        try:
            while True:
                try:
                    os.link(draft, self.path)
                    self._clear_dead_drafts(draft)
                    return
                except FileExistsError:
                    pass
                holder = self._holder()
                if holder is None:
                    continue
                if holder <= 0 or not _pid_alive(holder):
                    # Stale: its writer died. Re-read right before removing, so a fresh lock survives.
                    if self._holder() == holder:
                        self.path.unlink(missing_ok=True)
                    continue
                if not self.wait or time.monotonic() >= deadline:
                    waited = f" after waiting {self.timeout:g} s" if self.wait else ""
                    raise StoreError(
                        f"{self.path}: token store {self.store_path} is being written by process {holder} "
                        f"(lock file {self.path}){waited}; wait for it (wait=True) or, if that process "
                        "does not write this store, remove the lock file"
                    )
                time.sleep(self.poll)
        finally:
            draft.unlink(missing_ok=True)

    def _clear_dead_drafts(self, mine: Path) -> None:
        """Drafts ``.DIR.lock.<pid>`` that killed writers left behind (their pid is gone)."""
        for draft in self.path.parent.glob(f".{self.path.name}.*"):
            pid = draft.name.rsplit(".", 1)[-1]
            if draft != mine and pid.isdigit() and not _pid_alive(int(pid)):
                draft.unlink(missing_ok=True)

    def release(self) -> None:
        if self._holder() == os.getpid():
            self.path.unlink(missing_ok=True)


# -- writing -------------------------------------------------------------------------------------


class _SplitOutput:
    """Files of one split being written: current ParquetWriter, rows per finished file."""

    def __init__(self, partition: Partition):
        self.partition = partition
        self.files: list[tuple[str, int]] = []
        self.writer: pq.ParquetWriter | None = None
        self.rows_in_file = 0
        self.documents = 0
        self.tokens = 0
        self.pending: list[pa.Table] = []  # rows not yet written as a full row group
        self.pending_rows = 0
        self.resumed_lengths = np.empty(0, dtype=np.int64)  # token counts of documents kept on resume

    def current_name(self) -> str:
        return f"{_split_dir(self.partition)}/part-{len(self.files):05d}.parquet"


class TokenStoreWriter:
    """Context manager that streams encoded documents into a new store at ``path``.

    ``write_chunk`` / ``write_documents`` append rows to Parquet row groups as they come. On a
    clean exit the store appears at ``path`` in one rename; on an exception nothing changes.
    """

    def __init__(self, path: str | os.PathLike, tokenizer, *, overwrite: bool = True,
                 row_group_size: int = ROW_GROUP_SIZE, max_rows_per_file: int | None = None,
                 chunk_documents: int = CHUNK_DOCUMENTS, wait: bool = False, timeout: float = 600.0,
                 resume: bool = False):
        self.path = Path(path).absolute()
        if not all(hasattr(tokenizer, name) for name in ("bos_id", "eos_id", "hash", "save")):
            raise StoreError(f"{self.path}: tokenizer is {type(tokenizer).__name__}, expected an engine Tokenizer")
        self.tokenizer = tokenizer
        self.overwrite = overwrite
        for name, value in (("row_group_size", row_group_size), ("chunk_documents", chunk_documents),
                            ("max_rows_per_file", max_rows_per_file)):
            if value is None and name == "max_rows_per_file":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise StoreError(f"{name}={value!r}: row_group_size, chunk_documents and max_rows_per_file must be >= 1")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise StoreError(f"timeout={timeout!r}: expected a number of seconds >= 0")
        self.row_group_size = int(row_group_size)
        self.max_rows_per_file = max_rows_per_file
        self.chunk_documents = int(chunk_documents)
        self.bos_id, self.eos_id = int(tokenizer.bos_id), int(tokenizer.eos_id)
        self.schema = pa.schema(
            [pa.field("id", pa.string()), pa.field("tokens", TOKENS_TYPE)],
            metadata={
                "engine.format_version": str(FORMAT_VERSION),
                "engine.tokenizer_hash": tokenizer.hash,
                "engine.bos_id": str(self.bos_id),
                "engine.eos_id": str(self.eos_id),
            },
        )
        self.tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._lock = _WriterLock(self.path, wait=wait, timeout=timeout)
        self._outputs = {p: _SplitOutput(p) for p in PARTITIONS}
        self._ids: dict[str, Partition] = {}
        self._active = False
        if resume and max_rows_per_file is None:
            raise StoreError(
                f"{self.path}: resume=True needs max_rows_per_file, so that finished files are complete "
                "Parquet files a later run can keep"
            )
        self.resume = bool(resume)
        # Documents per partition kept from an interrupted run (resume=True); 0 when starting afresh.
        self.resumed: dict[Partition, int] = {p: 0 for p in PARTITIONS}

    def resumed_lengths(self, partition: Partition | str) -> np.ndarray:
        """Token counts (int64) of the documents of ``partition`` kept from an interrupted run."""
        return self._outputs[_partition(partition)].resumed_lengths

    def __enter__(self) -> "TokenStoreWriter":
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def open(self) -> None:
        """Take the lock, check what ``path`` holds now, start the temporary directory."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            if self.path.exists():
                if not self.overwrite:
                    raise StoreError(f"{self.path}: already exists (pass overwrite=True to replace it)")
                if self.path.is_file() or (any(self.path.iterdir()) and not (self.path / MANIFEST_NAME).is_file()):
                    raise StoreError(
                        f"{self.path}: exists and is not a token store (no {MANIFEST_NAME}); refusing to replace it"
                    )
            # We hold the lock, so leftovers of this path's earlier writers are dead: resume from
            # the newest one if asked (and it was written with the same tokenizer), clear the rest.
            leftovers = sorted(self.path.parent.glob(f".{self.path.name}.tmp-*"), key=lambda d: d.stat().st_mtime)
            if self.resume and leftovers and self._resumable(leftovers[-1]):
                os.rename(leftovers.pop(), self.tmp)
            for stale in leftovers:
                shutil.rmtree(stale, ignore_errors=True)
            for stale in self.path.parent.glob(f".{self.path.name}.old-*"):
                shutil.rmtree(stale, ignore_errors=True)
            if self.tmp.is_dir():
                self._restore_finished_files()
            else:
                self.tmp.mkdir()
                for p in PARTITIONS:
                    (self.tmp / _split_dir(p)).mkdir()
                self.tokenizer.save(self.tmp / TOKENIZER_NAME)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self._lock.release()
            raise
        self._active = True

    def _resumable(self, leftover: Path) -> bool:
        """A leftover temporary store can be continued iff it was started with this same tokenizer."""
        from engine.tokenizers.base import load_tokenizer
        from engine.errors import TokenizerError

        try:
            return load_tokenizer(leftover / TOKENIZER_NAME).hash == self.tokenizer.hash
        except TokenizerError:
            return False

    def _restore_finished_files(self) -> None:
        """Keep each split's leading run of complete files (footer readable, ``max_rows_per_file`` rows
        or fewer only if last); delete the rest. Restores counts and ids so writing continues after them."""
        for part in PARTITIONS:
            out = self._outputs[part]
            directory = self.tmp / _split_dir(part)
            directory.mkdir(exist_ok=True)
            names = sorted(f.name for f in directory.glob("part-*.parquet"))
            keep = True
            for index, name in enumerate(names):
                file = directory / name
                if keep and name == f"part-{index:05d}.parquet":
                    try:
                        table = pq.read_table(file)
                    except (pa.ArrowException, OSError):
                        table = None
                    if (table is not None and table.schema.equals(self.schema, check_metadata=False)
                            and table.num_rows == self.max_rows_per_file):
                        ids = table.column("id").to_pylist()
                        self._ids.update(dict.fromkeys(ids, part))
                        out.files.append((f"{_split_dir(part)}/{name}", table.num_rows))
                        out.documents += table.num_rows
                        tokens = table.column("tokens").combine_chunks()
                        out.tokens += int(len(tokens.values))
                        out.resumed_lengths = np.concatenate(
                            [out.resumed_lengths, np.diff(tokens.offsets.to_numpy()).astype(np.int64)])
                        continue
                keep = False
                file.unlink()
            for partial in directory.glob("*"):
                if partial.name not in {n.rsplit("/", 1)[-1] for n, _ in out.files}:
                    partial.unlink()
            self.resumed[part] = out.documents

    def _check_active(self) -> None:
        if not self._active:
            raise StoreError(f"{self.path}: writer is not open (use it as `with TokenStore.writer(...) as w:`)")

    def write_chunk(self, partition: Partition | str, ids: Sequence[str], values: np.ndarray, offsets: np.ndarray) -> None:
        """Append ``len(ids)`` documents: document ``i`` is ``values[offsets[i]:offsets[i+1]]``.

        ``values`` uint32 1-D; ``offsets`` int64, ``len(ids) + 1`` entries, starting at 0, never
        decreasing, ending at ``len(values)``; every document starts with BOS and ends with EOS;
        ids are non-empty strings, unique in the whole store. Checked before anything is written.
        """
        self._check_active()
        part = _partition(partition)
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise StoreError(f"{part.value} chunk: ids is {type(ids).__name__}, expected a list of str")
        ids = list(ids)
        for i, doc_id in enumerate(ids):
            if not isinstance(doc_id, str) or not doc_id:
                raise StoreError(f"{part.value} document {i}: id {doc_id!r} is not a non-empty string")
            if not doc_id.isascii():
                try:
                    doc_id.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise StoreError(
                        f"{part.value} document {i}: id {doc_id!r} holds a lone surrogate at character offset "
                        f"{exc.start}; expected a valid UTF-8 string"
                    ) from None
        self._check_arrays(part, ids, values, offsets)
        fresh = dict.fromkeys(ids, part)
        clash = next((d for d in ids if d in self._ids), None) if len(fresh) == len(ids) else None
        if len(fresh) != len(ids) or clash is not None:
            dup = clash if clash is not None else next(d for i, d in enumerate(ids) if ids.index(d) != i)
            where = self._ids.get(dup, part).value
            raise StoreError(f"duplicate document id {dup!r} (in {where} and {part.value}); ids must be unique in a store")
        self._ids.update(fresh)
        table = pa.Table.from_arrays(
            [pa.array(ids, type=pa.string()), pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))],
            schema=self.schema,
        )
        out = self._outputs[part]
        self._append(out, table)
        out.documents += len(ids)
        out.tokens += int(values.shape[0])

    def _check_arrays(self, part: Partition, ids: list, values, offsets) -> None:
        if not isinstance(values, np.ndarray) or values.dtype != np.uint32 or values.ndim != 1:
            got = f"{values.dtype} array of shape {values.shape}" if isinstance(values, np.ndarray) else type(values).__name__
            raise StoreError(f"{part.value} chunk: tokens must be a 1-D uint32 array, got {got}")
        if not isinstance(offsets, np.ndarray) or offsets.dtype != np.int64 or offsets.ndim != 1:
            got = f"{offsets.dtype} array of shape {offsets.shape}" if isinstance(offsets, np.ndarray) else type(offsets).__name__
            raise StoreError(f"{part.value} chunk: offsets must be a 1-D int64 array, got {got}")
        if offsets.shape[0] != len(ids) + 1:
            raise StoreError(f"{part.value} chunk: {offsets.shape[0]} offsets for {len(ids)} ids, expected {len(ids) + 1}")
        if offsets[0] != 0 or offsets[-1] != values.shape[0]:
            raise StoreError(
                f"{part.value} chunk: offsets run from {offsets[0]} to {offsets[-1]}, expected 0 to {values.shape[0]} (len(values))"
            )
        lengths = np.diff(offsets)
        bad = np.flatnonzero(lengths < 2)
        if bad.size:
            i = int(bad[0])
            what = (
                f"offsets decrease (offsets[{i}] = {offsets[i]} > offsets[{i + 1}] = {offsets[i + 1]}; "
                f"offsets must rise from 0 to {values.shape[0]} = len(values))"
                if lengths[i] < 0 else f"it has {lengths[i]} token(s)"
            )
            raise StoreError(f"{part.value} document {ids[i]!r}: {what}; expected [BOS, content..., EOS] (>= 2 tokens)")
        outside = np.flatnonzero((offsets < 0) | (offsets > values.shape[0]))
        if outside.size:  # only reachable when differences wrapped around int64
            i = int(outside[0])
            raise StoreError(
                f"{part.value} chunk: offsets[{i}] = {offsets[i]} is outside the values buffer; "
                f"expected 0 <= offset <= {values.shape[0]} (len(values))"
            )
        for name, positions, expected in (("start with BOS", offsets[:-1], self.bos_id), ("end with EOS", offsets[1:] - 1, self.eos_id)):
            wrong = np.flatnonzero(values[positions] != expected)
            if wrong.size:
                i = int(wrong[0])
                raise StoreError(
                    f"{part.value} document {ids[i]!r} does not {name} id {expected}: found {values[positions[i]]}"
                )


    def _append(self, out: _SplitOutput, table: pa.Table) -> None:
        """Add rows to the split's current file; row groups hold exactly ``row_group_size`` rows
        (the last of a file fewer), whatever the chunk sizes, so the bytes depend only on the rows."""
        start = 0
        while start < table.num_rows or out.writer is None:
            if out.writer is None:
                out.writer = pq.ParquetWriter(self.tmp / out.current_name(), self.schema)
            room = table.num_rows - start
            if self.max_rows_per_file is not None:
                room = min(room, self.max_rows_per_file - out.rows_in_file)
            piece = table.slice(start, room)
            if piece.num_rows:
                out.pending.append(piece)
                out.pending_rows += piece.num_rows
                if out.pending_rows >= self.row_group_size:
                    self._write_row_groups(out, final=False)
            out.rows_in_file += piece.num_rows
            start += piece.num_rows
            if self.max_rows_per_file is not None and out.rows_in_file >= self.max_rows_per_file:
                self._finish_file(out)
            if start >= table.num_rows:
                break

    def _write_row_groups(self, out: _SplitOutput, *, final: bool) -> None:
        """Write the buffered rows as full row groups; with ``final`` also the short remainder."""
        rows = pa.concat_tables(out.pending) if out.pending else None
        out.pending, out.pending_rows = [], 0
        if rows is None:
            return
        full = rows.num_rows - rows.num_rows % self.row_group_size
        if full:
            out.writer.write_table(rows.slice(0, full), row_group_size=self.row_group_size)
        rest = rows.slice(full)
        if rest.num_rows and final:
            out.writer.write_table(rest, row_group_size=self.row_group_size)
        elif rest.num_rows:
            out.pending, out.pending_rows = [rest], rest.num_rows

    def _finish_file(self, out: _SplitOutput) -> None:
        self._write_row_groups(out, final=True)
        out.writer.close()
        out.files.append((out.current_name(), out.rows_in_file))
        out.writer, out.rows_in_file = None, 0

    def write_documents(self, partition: Partition | str, documents: Iterable[EncodedDocument]) -> int:
        """Append encoded documents in chunks of ``chunk_documents``; returns how many were written."""
        self._check_active()
        part = _partition(partition)
        ids: list[str] = []
        tokens: list[np.ndarray] = []
        written = 0
        if isinstance(documents, (str, bytes)) or not hasattr(documents, "__iter__"):
            raise StoreError(f"{part.value}: documents is {type(documents).__name__}, expected an iterable of EncodedDocument")
        for index, doc in enumerate(documents):
            if not isinstance(doc, EncodedDocument):
                raise StoreError(f"{part.value} document {index}: got {type(doc).__name__}, expected EncodedDocument")
            if _partition(doc.partition) is not part:
                raise StoreError(f"document {doc.id!r} belongs to {Partition(doc.partition).value} but is written to {part.value}")
            if not isinstance(doc.tokens, np.ndarray) or doc.tokens.dtype != np.uint32 or doc.tokens.ndim != 1:
                got = getattr(doc.tokens, "dtype", type(doc.tokens).__name__)
                raise StoreError(f"{part.value} document {doc.id!r}: tokens must be a 1-D uint32 array, got {got}")
            ids.append(doc.id)
            tokens.append(doc.tokens)
            if len(ids) >= self.chunk_documents:
                written += self._flush(part, ids, tokens)
        return written + self._flush(part, ids, tokens)

    def _flush(self, part: Partition, ids: list[str], tokens: list[np.ndarray]) -> int:
        if not ids:
            return 0
        offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum([t.shape[0] for t in tokens], out=offsets[1:])
        self.write_chunk(part, ids, np.concatenate(tokens), offsets)
        n = len(ids)
        ids.clear()
        tokens.clear()
        return n

    def close(self) -> Path:
        """Finish every file, write the manifest last, and rename the store into place."""
        self._check_active()
        try:
            splits = {}
            for part, out in self._outputs.items():
                if out.writer is not None or not out.files:
                    if out.writer is None:  # an empty split still gets its zero-row file
                        out.writer = pq.ParquetWriter(self.tmp / out.current_name(), self.schema)
                    self._finish_file(out)
                files = []
                for name, rows in out.files:
                    file = self.tmp / name
                    _fsync(file)
                    files.append({"name": name, "rows": rows, "bytes": file.stat().st_size, "sha256": _sha256(file)})
                splits[part.value] = {"documents": out.documents, "tokens": out.tokens, "files": files}
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "tokenizer": {"kind": self.tokenizer.kind, "hash": self.tokenizer.hash,
                              "bos_id": self.bos_id, "eos_id": self.eos_id, "file": TOKENIZER_NAME},
                "splits": splits,
            }
            (self.tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
            for directory in [self.tmp / _split_dir(p) for p in PARTITIONS] + [self.tmp]:
                _fsync(directory)
            self._swap_in()
        except BaseException:
            self.abort()
            raise
        self._active = False
        self._lock.release()
        return self.path

    def _swap_in(self) -> None:
        if self.path.exists():
            old = self.path.with_name(f".{self.path.name}.old-{os.getpid()}")
            os.rename(self.path, old)
            try:
                os.rename(self.tmp, self.path)
            except BaseException:
                os.rename(old, self.path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self.tmp, self.path)
        _fsync(self.path.parent)

    def abort(self) -> None:
        """Drop everything written so far; ``path`` keeps what it held before."""
        for out in self._outputs.values():
            if out.writer is not None:
                try:
                    out.writer.close()
                except Exception:  # already failing: the temporary directory goes anyway
                    pass
                out.writer = None
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self._active:
            self._active = False
            self._lock.release()


# -- reading -------------------------------------------------------------------------------------


class EncodedDocuments(Sequence[EncodedDocument]):
    """Lazy documents of one split: ``[i].tokens`` is a view ``values[offsets[i]:offsets[i+1]]``."""

    def __init__(self, partition: Partition, ids: list[str], values: np.ndarray, offsets: np.ndarray):
        self.partition, self._ids, self._values, self._offsets = partition, ids, values, offsets

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> EncodedDocument: ...
    @overload
    def __getitem__(self, index: slice) -> list[EncodedDocument]: ...
    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self._ids)
        if not -n <= index < n:
            raise IndexError(f"document index {index} out of range for {n} {self.partition.value} documents")
        index %= n
        start, stop = self._offsets[index], self._offsets[index + 1]
        return EncodedDocument(self._ids[index], self.partition, self._values[start:stop])

    def __iter__(self) -> Iterator[EncodedDocument]:
        return (self[i] for i in range(len(self)))


class TokenStore:
    """An opened, checked token store. Build one with ``TokenStore.open`` or ``TokenStore.write``."""

    def __init__(self, path: Path, manifest: dict):
        self.path = path
        self._manifest = manifest
        self._tables: dict[Partition, pa.Table] = {}
        self._arrays: dict[Partition, tuple[pa.LargeListArray, np.ndarray, np.ndarray]] = {}
        self._ids: dict[Partition, list[str]] = {}

    # -- writing ----------------------------------------------------------------------------
    @staticmethod
    def writer(path: str | os.PathLike, tokenizer, *, overwrite: bool = True, row_group_size: int = ROW_GROUP_SIZE,
               max_rows_per_file: int | None = None, chunk_documents: int = CHUNK_DOCUMENTS,
               wait: bool = False, timeout: float = 600.0, resume: bool = False) -> TokenStoreWriter:
        """A ``TokenStoreWriter`` for ``path`` (use it in a ``with`` block).

        ``resume=True`` (needs ``max_rows_per_file``) continues the temporary store an interrupted
        writer left behind, if it used the same tokenizer: its complete files are kept,
        ``writer.resumed[partition]`` says how many documents of each partition they hold, and the
        caller writes the rest. Written the same way, the result equals a fresh run's store.
        """
        return TokenStoreWriter(path, tokenizer, overwrite=overwrite, row_group_size=row_group_size,
                                max_rows_per_file=max_rows_per_file, chunk_documents=chunk_documents,
                                wait=wait, timeout=timeout, resume=resume)

    @classmethod
    def write(cls, path: str | os.PathLike, encoded_partitions: Mapping[Partition | str, Iterable[EncodedDocument]],
              tokenizer, **writer_options) -> "TokenStore":
        """Write ``{partition: encoded documents}`` as a store at ``path`` and open it."""
        if not hasattr(encoded_partitions, "items"):
            raise StoreError(
                f"{path}: encoded_partitions is {type(encoded_partitions).__name__}, expected a mapping "
                "{partition: [EncodedDocument, ...]}"
            )
        with cls.writer(path, tokenizer, **writer_options) as w:
            for partition, documents in encoded_partitions.items():
                w.write_documents(partition, documents)
        return cls.open(path, tokenizer=tokenizer)

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike, *, tokenizer=None) -> "TokenStore":
        """Open and check a store: manifest, format version, each file's size, rows and metadata."""
        path = Path(path)
        manifest_path = path / MANIFEST_NAME
        if not path.is_dir():
            raise StoreError(f"{path}: no token store here (directory not found)")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StoreError(f"{manifest_path}: not found; {path} is not a complete token store") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreError(f"{manifest_path}: manifest is not valid JSON ({exc})") from None
        store = cls(path, manifest)
        store._check_manifest(manifest_path)
        for split in manifest["splits"].values():
            for entry in split["files"]:
                store._check_file(entry)
        if tokenizer is not None:
            store.check_tokenizer(tokenizer)
        return store

    def _check_manifest(self, where: Path) -> None:
        m = self._manifest
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise StoreError(f'{where}: not a token store manifest (expected "format": "{FORMAT}")')
        version = m.get("format_version")
        if not isinstance(version, int):
            raise StoreError(f'{where}: missing or non-integer "format_version" (expected {FORMAT_VERSION})')
        if version > FORMAT_VERSION:
            raise StoreError(f"{where}: store format version {version} is newer than this engine reads "
                             f"({FORMAT_VERSION}); upgrade engine to read it")
        if version != FORMAT_VERSION:
            raise StoreError(f"{where}: store format version {version} is not supported (expected {FORMAT_VERSION})")
        try:
            tok = m["tokenizer"]
            if not (isinstance(tok["hash"], str) and isinstance(tok["bos_id"], int) and isinstance(tok["eos_id"], int)):
                raise TypeError("tokenizer hash/bos_id/eos_id")
            for name, split in m["splits"].items():
                Partition(name)
                if not (isinstance(split["documents"], int) and isinstance(split["tokens"], int)):
                    raise TypeError(f"splits.{name} counts")
                for entry in split["files"]:
                    if not (isinstance(entry["name"], str) and isinstance(entry["rows"], int)
                            and isinstance(entry["bytes"], int) and isinstance(entry["sha256"], str)):
                        raise TypeError(f"splits.{name}.files entry")
                    parts = Path(entry["name"]).parts
                    if not parts or Path(entry["name"]).is_absolute() or ".." in parts:
                        raise ValueError(f"file name {entry['name']!r} leaves the store directory")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreError(f"{where}: manifest is malformed ({type(exc).__name__}: {exc})") from None

    def _check_file(self, entry: dict) -> None:
        file = self.path / entry["name"]
        if not file.is_file():
            raise StoreError(f"{file}: missing (the manifest lists it with {entry['rows']} rows)")
        size = file.stat().st_size
        if size != entry["bytes"]:
            raise StoreError(f"{file}: size is {size} bytes, the manifest expects {entry['bytes']}; the file is truncated or changed")
        try:
            meta = pq.read_metadata(file)
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise StoreError(f"{file}: cannot read the Parquet footer ({exc}); the file is corrupt") from None
        if meta.num_rows != entry["rows"]:
            raise StoreError(f"{file}: holds {meta.num_rows} rows, the manifest expects {entry['rows']}")
        found = (meta.metadata or {}).get(b"engine.tokenizer_hash", b"").decode()
        if found != self.tokenizer_hash:
            raise StoreError(f"{file}: records tokenizer hash {found!r}, the manifest expects {self.tokenizer_hash}")

    def verify(self) -> None:
        """Hash every file and compare with the manifest's sha256 (reads every byte)."""
        for split in self._manifest["splits"].values():
            for entry in split["files"]:
                file = self.path / entry["name"]
                self._check_file(entry)
                found = _sha256(file)
                if found != entry["sha256"]:
                    raise StoreError(f"{file}: sha256 is {found}, the manifest expects {entry['sha256']}; the file is corrupt")

    def check_tokenizer(self, tokenizer) -> None:
        """StoreError unless ``tokenizer`` is the one this store was encoded with (same hash)."""
        if tokenizer.hash != self.tokenizer_hash:
            raise StoreError(
                f"{self.path}: tokenizer hash {tokenizer.hash} does not match the store's tokenizer hash "
                f"{self.tokenizer_hash}; use the tokenizer saved in the store ({TOKENIZER_NAME}) or re-encode"
            )

    def tokenizer(self):
        """The tokenizer saved in the store, checked against the manifest's hash."""
        from engine.tokenizers.base import load_tokenizer

        name = self._manifest["tokenizer"].get("file")  # stores of an earlier layout name "tokenizer.json"
        name = name if isinstance(name, str) and name and Path(name).name == name else TOKENIZER_NAME
        tok = load_tokenizer(self.path / name)
        self.check_tokenizer(tok)
        return tok

    # -- facts from the manifest ------------------------------------------------------------
    @property
    def format_version(self) -> int:
        return self._manifest["format_version"]

    @property
    def tokenizer_hash(self) -> str:
        return self._manifest["tokenizer"]["hash"]

    @property
    def bos_id(self) -> int:
        return self._manifest["tokenizer"]["bos_id"]

    @property
    def eos_id(self) -> int:
        return self._manifest["tokenizer"]["eos_id"]

    @property
    def partitions(self) -> tuple[Partition, ...]:
        """Partitions the store lists (a store written here lists all three, some maybe empty)."""
        return tuple(p for p in PARTITIONS if p.value in self._manifest["splits"])

    def _split(self, partition: Partition | str) -> dict:
        part = _partition(partition)
        split = self._manifest["splits"].get(part.value)
        if split is None:
            raise StoreError(f"{self.path}: store has no {part.value} partition (it has: "
                             f"{', '.join(p.value for p in self.partitions) or 'none'})")
        return split

    def num_documents(self, partition: Partition | str) -> int:
        return self._split(partition)["documents"]

    def num_tokens(self, partition: Partition | str) -> int:
        return self._split(partition)["tokens"]

    # -- data -------------------------------------------------------------------------------
    def table(self, partition: Partition | str) -> pa.Table:
        """The split's rows (``id``, ``tokens``) from all of its files, read once and cached."""
        part = _partition(partition)
        if part not in self._tables:
            tables = []
            for entry in self._split(part)["files"]:
                file = self.path / entry["name"]
                try:
                    table = pq.ParquetFile(file).read(columns=["id", "tokens"])
                except (OSError, pa.ArrowException, ValueError) as exc:
                    raise StoreError(f"{file}: cannot read ({exc}); the file is corrupt") from None
                if table.schema.field("tokens").type != TOKENS_TYPE or table.schema.field("id").type != pa.string():
                    raise StoreError(f"{file}: columns are {table.schema.types}, expected id: string, tokens: {TOKENS_TYPE}")
                if table.column("tokens").null_count or table.column("id").null_count:
                    raise StoreError(f"{file}: holds null ids or token lists; the file is corrupt")
                tables.append(table.replace_schema_metadata(None))
            self._tables[part] = pa.concat_tables(tables) if tables else pa.table(
                {"id": pa.array([], pa.string()), "tokens": pa.array([], TOKENS_TYPE)})
        return self._tables[part]

    def tokens_array(self, partition: Partition | str) -> pa.LargeListArray:
        """The ``tokens`` column as one Arrow array; ``arrays()`` views its buffers."""
        return self._views(_partition(partition))[0]

    def _views(self, part: Partition) -> tuple[pa.LargeListArray, np.ndarray, np.ndarray]:
        if part not in self._arrays:
            column = self.table(part).column("tokens")
            if column.num_chunks == 1:
                array = column.chunk(0)
            elif column.num_chunks == 0:
                array = pa.array([], TOKENS_TYPE)
            else:
                array = column.combine_chunks()
            offsets = array.offsets.to_numpy(zero_copy_only=True)
            values = array.values.to_numpy(zero_copy_only=True)
            first, last = int(offsets[0]), int(offsets[-1])
            values = values[first:last]  # a view: a sliced array's offsets need not start at 0
            if first:
                offsets = offsets - first  # rebasing copies only offsets (documents + 1 entries)
            self._arrays[part] = (array, values, offsets)
        return self._arrays[part]

    def arrays(self, partition: Partition | str) -> tuple[np.ndarray, np.ndarray]:
        """``(values uint32, offsets int64)`` of one split, read-only views of Arrow memory.

        Document ``i`` is ``values[offsets[i]:offsets[i+1]]``; ``offsets[0] == 0``.
        """
        _, values, offsets = self._views(_partition(partition))
        return values, offsets

    def ids(self, partition: Partition | str) -> list[str]:
        part = _partition(partition)
        if part not in self._ids:
            self._ids[part] = self.table(part).column("id").to_pylist()
        return self._ids[part]

    def documents(self, partition: Partition | str) -> EncodedDocuments:
        part = _partition(partition)
        values, offsets = self.arrays(part)
        return EncodedDocuments(part, self.ids(part), values, offsets)

    # -- pickling ---------------------------------------------------------------------------
    def __reduce__(self):
        """Pickle as the store's absolute path: the copy reopens and re-checks the store from disk,
        so a process started by spawn (a DataLoader worker) receives bytes, not token buffers."""
        return (TokenStore.open, (os.fspath(Path(self.path).absolute()),))

    def __repr__(self) -> str:
        counts = ", ".join(f"{p.value}={self.num_documents(p)}" for p in self.partitions)
        return f"TokenStore({str(self.path)!r}, {counts}, tokenizer={self.tokenizer_hash[:12]})"
