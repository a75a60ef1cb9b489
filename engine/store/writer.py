"""``TokenStoreWriter``: streams encoded documents into a new store, atomically and resumably (engine.store).

Chunks go into Parquet row groups (memory bounded by one chunk) inside a temporary sibling
``.DIR.tmp-<pid>``, which is renamed into place on success, so ``DIR`` is always the old complete
store or the new one; ``DIR.lock`` keeps a second writer out. Row groups and files hold fixed row
counts, so the bytes depend only on the documents; with ``resume=True`` a writer keeps the
complete files an interrupted writer of the same tokenizer left behind. Given each document's
``source_digest`` (``write_chunk(..., sources=...)``), the temporary directory's ``_resume.json``
records per finished file the sha256 of its source documents, so a resumed run can prove the kept
files belong to its corpus (``resumed_sources``) or drop them (``start_fresh``). An interrupt
(KeyboardInterrupt) keeps the finished files for ``resume``; any other exception removes them.
Resuming and suspending live in ``engine.store.resume``, what may be replaced in
``engine.store.ownership``. Ids are checked unique in 8 bytes per id (``engine.corpus.unique``); a
duplicate is named by reading the written ids back (the finished files, and the ids of each split's
open file, which the writer keeps: with ``max_rows_per_file`` at most that many per split).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.partition import PARTITIONS, Partition
from engine.corpus.unique import BUFFER_IDS, SeenIds, find_duplicate
from engine.errors import StoreError, is_interrupt
from engine.store.layout import (
    CHUNK_DOCUMENTS, FORMAT, FORMAT_VERSION, MANIFEST_NAME, RESUME_NAME, ROLES_FORMAT_VERSION, ROLES_TYPE,
    ROW_GROUP_SIZE, TOKENIZER_NAME, TOKENS_TYPE,
    EncodedDocument, fsync, sha256_file, split_dir, store_partition,
)
from engine.store.lock import WriterLock, pid_alive
from engine.store.long_rows import write_long_row
from engine.store.ownership import check_replaceable, own_temporaries
from engine.store.resume import ResumableWriter
from engine.testhook import stop_point

__all__ = ["TokenStoreWriter", "check_replaceable"]


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
        self.sources: list[str | None] = []  # per finished file: sha256 of its source documents, None if unknown
        self.hasher: "hashlib._Hash | None" = None  # the current file's, None once a chunk came without sources
        self.file_ids: list[pa.Array] = []  # ids in the current file (it cannot be read back while open)

    def current_name(self) -> str:
        return f"{split_dir(self.partition)}/part-{len(self.files):05d}.parquet"


class TokenStoreWriter(ResumableWriter):
    """Context manager that streams encoded documents into a new store at ``path``.

    ``write_chunk`` / ``write_documents`` append rows to Parquet row groups as they come. On a
    clean exit the store appears at ``path`` in one rename; on an exception nothing changes.
    """

    def __init__(self, path: str | os.PathLike, tokenizer, *, overwrite: bool = True,
                 row_group_size: int = ROW_GROUP_SIZE, max_rows_per_file: int | None = None,
                 chunk_documents: int = CHUNK_DOCUMENTS, wait: bool = False, timeout: float = 600.0,
                 resume: bool = False, check_unique: bool = True, roles: bool = False, bos: bool = True,
                 id_buffer: int = BUFFER_IDS, encoding: dict | None = None):
        self.path = Path(path).absolute()
        # The caller's rules that decide ids beyond the tokenizer (prepare's piece_chars), kept in
        # _resume.json: a resumed run compares them (``resumed_encoding``) before it keeps a file.
        self.encoding = dict(encoding or {})
        self.resumed_encoding: dict | None = None
        # roles=True: a chat / instruction store (version 2): every chunk carries one flag per token,
        # and documents need not start with BOS nor end with EOS (a template decides what they hold).
        self.roles = bool(roles)
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
        # bos=False, or a tokenizer without BOS (bos_id None, e.g. Qwen's): documents are
        # [content..., EOS]; the manifest's bos_id is then null.
        self.bos_id = int(tokenizer.bos_id) if bos and tokenizer.bos_id is not None else None
        self.eos_id = int(tokenizer.eos_id)
        fields = [pa.field("id", pa.string()), pa.field("tokens", TOKENS_TYPE)]
        if self.roles:
            fields.append(pa.field("roles", ROLES_TYPE))
        self.format_version = ROLES_FORMAT_VERSION if self.roles else FORMAT_VERSION
        self.schema = pa.schema(
            fields,
            metadata={
                "engine.format_version": str(self.format_version),
                "engine.tokenizer_hash": tokenizer.hash,
                "engine.bos_id": "none" if self.bos_id is None else str(self.bos_id),
                "engine.eos_id": str(self.eos_id),
            },
        )
        self.tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._lock = WriterLock(self.path, wait=wait, timeout=timeout)
        self._outputs = {p: _SplitOutput(p) for p in PARTITIONS}
        self.id_buffer = id_buffer
        self._seen = SeenIds(id_buffer)  # 8 bytes per id written; duplicates are named by reading the ids back
        # False: the caller checked the ids unique already (prepare's corpus readers check every id).
        self.check_unique = bool(check_unique)
        self._active = False
        if resume and max_rows_per_file is None:
            raise StoreError(
                f"{self.path}: resume=True needs max_rows_per_file, so that finished files are complete "
                "Parquet files a later run can keep"
            )
        self.resume = bool(resume)
        # Documents per partition kept from an interrupted run (resume=True); 0 when starting afresh.
        self.resumed: dict[Partition, int] = {p: 0 for p in PARTITIONS}

    def __enter__(self) -> "TokenStoreWriter":
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
        elif is_interrupt(exc) and self.max_rows_per_file is not None and self._active:
            self.suspend()
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
                check_replaceable(self.path)
            # We hold the lock, so leftovers of this path's earlier writers are dead: resume from
            # the newest one if asked (and it was written with the same tokenizer), clear the rest;
            # only what is provably a writer's temporary is touched, anything else of that name is refused.
            ours, foreign = own_temporaries(self.path, pid_alive)
            if foreign:
                raise StoreError(f"{foreign[0]}: named like a temporary of the token store {self.path} but not "
                                 "provably one (a dead writer's, holding only store files); move it away")
            leftovers = sorted((d for d in ours if ".tmp-" in d.name), key=lambda d: d.stat().st_mtime)
            if self.resume and leftovers and self._resumable(leftovers[-1]):
                os.rename(leftovers.pop(), self.tmp)
            for stale in leftovers + [d for d in ours if ".old-" in d.name]:
                shutil.rmtree(stale, ignore_errors=True)
            if self.tmp.is_dir():
                self._restore_finished_files()
                self._save_resume_state()
            else:
                self.tmp.mkdir()
                for p in PARTITIONS:
                    (self.tmp / split_dir(p)).mkdir()
                self.tokenizer.save(self.tmp / TOKENIZER_NAME)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self._lock.release()
            raise
        self._active = True

    def _check_active(self) -> None:
        if not self._active:
            raise StoreError(f"{self.path}: writer is not open (use it as `with TokenStore.writer(...) as w:`)")

    def write_chunk(self, partition: Partition | str, ids: Sequence[str], values: np.ndarray, offsets: np.ndarray,
                    *, sources: Sequence[bytes] | None = None, roles: np.ndarray | None = None) -> None:
        """Append ``len(ids)`` documents: document ``i`` is ``values[offsets[i]:offsets[i+1]]``.

        ``values`` uint32 1-D; ``offsets`` int64, ``len(ids) + 1`` entries, starting at 0, never
        decreasing, ending at ``len(values)``; every document starts with BOS and ends with EOS;
        ids are non-empty strings, unique in the whole store. Checked before anything is written.
        ``sources``: each document's ``source_digest`` (32 bytes), recorded per file for ``resume``.
        ``roles``: with ``roles=True`` (only then), uint8 flags 0/1 aligned with ``values``; such
        documents need at least one token and no BOS/EOS.
        """
        self._check_active()
        part = store_partition(partition)
        if sources is not None:
            sources = list(sources)
            if len(sources) != len(ids) or not all(isinstance(d, bytes) and len(d) == 32 for d in sources):
                raise StoreError(f"{part.value} chunk: sources must be one 32-byte source_digest per id "
                                 f"({len(ids)}), got {len(sources)} item(s)")
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
        self._check_roles(part, ids, values, offsets, roles)
        self._check_unique(part, ids, ids)
        columns = [pa.array(ids, type=pa.string()), pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))]
        if self.roles:
            columns.append(pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(roles, type=pa.uint8())))
        table = pa.Table.from_arrays(columns, schema=self.schema)
        out = self._outputs[part]
        self._append(out, table, sources)
        out.documents += len(ids)
        out.tokens += int(values.shape[0])

    def write_long_document(self, partition: Partition | str, doc_id: str, ids_file: str | os.PathLike, count: int,
                            *, source: bytes | None = None) -> None:
        """Append one document whose ``count`` token ids (uint32, BOS first, EOS last) are in the file
        ``ids_file``, in a store file of its own written page by page (``engine.store.long_rows``), so
        memory stays one page whatever its length. The split's current file ends before it (fewer rows);
        the next document starts a new one. ``source``: its ``source_digest``, as in ``write_chunk``."""
        self._check_active()
        part = store_partition(partition)
        if self.roles:
            raise StoreError(f"{part.value} document {doc_id!r}: a store with roles takes documents by write_chunk")
        if not isinstance(doc_id, str) or not doc_id:
            raise StoreError(f"{part.value} document: id {doc_id!r} is not a non-empty string")
        ends = np.memmap(ids_file, dtype=np.uint32, mode="r") if count >= 1 else np.empty(0, dtype=np.uint32)
        low = 2 if self.bos_id is not None else 1
        if (count < low or ends.shape[0] != count or (self.bos_id is not None and ends[0] != self.bos_id)
                or ends[-1] != self.eos_id):
            raise StoreError(f"{part.value} document {doc_id!r}: {ids_file} must hold {count:,} >= {low} ids "
                             f"from BOS ({self.bos_id}) to EOS ({self.eos_id})")
        del ends
        self._check_unique(part, [doc_id], [doc_id])
        out = self._outputs[part]
        if out.writer is not None:
            self._finish_file(out)
        name = out.current_name()
        write_long_row(self.tmp / name, self.schema, doc_id, ids_file, count)
        stop_point("file")
        out.files.append((name, 1))
        out.sources.append(hashlib.sha256(source).hexdigest() if source is not None else None)
        out.documents += 1
        out.tokens += count
        if self.max_rows_per_file is not None:
            self._save_resume_state()

    def _check_roles(self, part: Partition, ids: list, values: np.ndarray, offsets: np.ndarray, roles) -> None:
        if not self.roles:
            if roles is not None:
                raise StoreError(f"{part.value} chunk: roles given to a store written without them "
                                 "(open the writer with roles=True)")
            return
        if not isinstance(roles, np.ndarray) or roles.dtype != np.uint8 or roles.shape != values.shape:
            got = f"{roles.dtype} array of shape {roles.shape}" if isinstance(roles, np.ndarray) else type(roles).__name__
            raise StoreError(f"{part.value} chunk: roles must be uint8 flags aligned with the tokens "
                             f"({values.shape[0]}), got {got}")
        bad = np.flatnonzero(roles > 1)
        if bad.size:
            d = int(np.searchsorted(offsets, bad[0], side="right") - 1)
            raise StoreError(f"{part.value} document {ids[d]!r}: role flag {roles[bad[0]]} at token "
                             f"{int(bad[0] - offsets[d])}; expected 0 or 1")

    def _check_unique(self, part: Partition, ids: list[str], chunk: Sequence[str]) -> None:
        """Add ``ids`` (of ``part``) to the store's ids; StoreError naming a duplicate and its two splits.
        ``chunk``: the ids being written, not in any file yet (the store's own files hold the rest)."""
        if not self.check_unique:
            return
        suspects = self._seen.add_many(ids)
        if suspects:
            self._raise_duplicate(suspects, [(doc_id, part) for doc_id in chunk])

    def _raise_duplicate(self, suspects: list[int], chunk: list[tuple[str, Partition]]) -> None:
        """Read back the ids written (files, the open files' ids, then ``chunk``) to name the duplicate;
        nothing if the suspects were ids that only share a hash."""
        def written():
            for part, out in self._outputs.items():
                for name, _ in out.files:
                    yield from ((doc_id, part) for doc_id in pq.read_table(self.tmp / name, columns=["id"])
                                .column("id").to_pylist())
                for array in out.file_ids:
                    yield from ((doc_id, part) for doc_id in array.to_pylist())
            yield from chunk

        found = find_duplicate(written(), suspects)
        if found is not None:
            dup, first, again = found
            raise StoreError(f"duplicate document id {dup!r} (in {first.value} and {again.value}); "
                             "ids must be unique in a store")

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
                f"{part.value} chunk: offsets run from {offsets[0]} to {offsets[-1]}, "
                f"expected 0 to {values.shape[0]} (len(values))"
            )
        lengths = np.diff(offsets)
        bad = np.flatnonzero(lengths < (1 if self.roles or self.bos_id is None else 2))
        if bad.size:
            i = int(bad[0])
            what = (
                f"offsets decrease (offsets[{i}] = {offsets[i]} > offsets[{i + 1}] = {offsets[i + 1]}; "
                f"offsets must rise from 0 to {values.shape[0]} = len(values))"
                if lengths[i] < 0 else f"it has {lengths[i]} token(s)"
            )
            raise StoreError(f"{part.value} document {ids[i]!r}: {what}; expected "
                             + ("at least one token" if self.roles else "[content..., EOS] (>= 1 token)"
                                if self.bos_id is None else "[BOS, content..., EOS] (>= 2 tokens)"))
        outside = np.flatnonzero((offsets < 0) | (offsets > values.shape[0]))
        if outside.size:  # only reachable when differences wrapped around int64
            i = int(outside[0])
            raise StoreError(
                f"{part.value} chunk: offsets[{i}] = {offsets[i]} is outside the values buffer; "
                f"expected 0 <= offset <= {values.shape[0]} (len(values))"
            )
        if self.roles:
            return
        ends = [("end with EOS", offsets[1:] - 1, self.eos_id)]
        for name, positions, expected in ([] if self.bos_id is None else [("start with BOS", offsets[:-1], self.bos_id)]) + ends:
            wrong = np.flatnonzero(values[positions] != expected)
            if wrong.size:
                i = int(wrong[0])
                raise StoreError(
                    f"{part.value} document {ids[i]!r} does not {name} id {expected}: found {values[positions[i]]}"
                )


    def _append(self, out: _SplitOutput, table: pa.Table, sources: list[bytes] | None = None) -> None:
        """Add rows to the split's current file; row groups hold exactly ``row_group_size`` rows
        (the last of a file fewer), whatever the chunk sizes, so the bytes depend only on the rows."""
        start = 0
        while start < table.num_rows or out.writer is None:
            if out.writer is None:
                out.writer = pq.ParquetWriter(self.tmp / out.current_name(), self.schema)
                out.hasher = hashlib.sha256()
            room = table.num_rows - start
            if self.max_rows_per_file is not None:
                room = min(room, self.max_rows_per_file - out.rows_in_file)
            piece = table.slice(start, room)
            if self.check_unique:
                out.file_ids.append(piece.column("id"))
            if sources is None:
                out.hasher = None
            elif out.hasher is not None:
                out.hasher.update(b"".join(sources[start:start + piece.num_rows]))
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
        stop_point("file")
        out.files.append((out.current_name(), out.rows_in_file))
        out.sources.append(out.hasher.hexdigest() if out.hasher is not None else None)
        out.writer, out.rows_in_file, out.hasher, out.file_ids = None, 0, None, []
        if self.max_rows_per_file is not None:
            self._save_resume_state()

    def write_documents(self, partition: Partition | str, documents: Iterable[EncodedDocument]) -> int:
        """Append encoded documents in chunks of ``chunk_documents``; returns how many were written."""
        self._check_active()
        part = store_partition(partition)
        ids: list[str] = []
        tokens: list[np.ndarray] = []
        flags: list = []
        written = 0
        if isinstance(documents, (str, bytes)) or not hasattr(documents, "__iter__"):
            raise StoreError(f"{part.value}: documents is {type(documents).__name__}, expected an iterable of EncodedDocument")
        for index, doc in enumerate(documents):
            if not isinstance(doc, EncodedDocument):
                raise StoreError(f"{part.value} document {index}: got {type(doc).__name__}, expected EncodedDocument")
            if store_partition(doc.partition) is not part:
                raise StoreError(f"document {doc.id!r} belongs to {Partition(doc.partition).value} "
                                 f"but is written to {part.value}")
            if not isinstance(doc.tokens, np.ndarray) or doc.tokens.dtype != np.uint32 or doc.tokens.ndim != 1:
                got = getattr(doc.tokens, "dtype", type(doc.tokens).__name__)
                raise StoreError(f"{part.value} document {doc.id!r}: tokens must be a 1-D uint32 array, got {got}")
            if self.roles != (doc.roles is not None):
                raise StoreError(f"{part.value} document {doc.id!r}: " + (
                    "has no roles, but this store holds one role flag per token" if self.roles else
                    "has roles; open the writer with roles=True to store them"))
            ids.append(doc.id)
            tokens.append(doc.tokens)
            flags.append(doc.roles)
            if len(ids) >= self.chunk_documents:
                written += self._flush(part, ids, tokens, flags)
        return written + self._flush(part, ids, tokens, flags)

    def _flush(self, part: Partition, ids: list[str], tokens: list[np.ndarray], flags: list) -> int:
        if not ids:
            return 0
        offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum([t.shape[0] for t in tokens], out=offsets[1:])
        roles = None
        if self.roles:
            for doc_id, t, f in zip(ids, tokens, flags):
                if np.shape(f) != t.shape:
                    raise StoreError(f"{part.value} document {doc_id!r}: {np.size(f)} role flags for "
                                     f"{t.shape[0]} tokens; expected one per token")
            roles = np.concatenate([np.asarray(f) for f in flags]).astype(np.uint8)
        self.write_chunk(part, ids, np.concatenate(tokens), offsets, roles=roles)
        n = len(ids)
        ids.clear()
        tokens.clear()
        flags.clear()
        return n

    def close(self) -> Path:
        """Finish every file, write the manifest last, and rename the store into place."""
        self._check_active()
        self._end(self._commit)
        return self.path

    def _end(self, work) -> None:
        """Run ``work`` (commit or suspend); on any failure drop everything (``abort``); then release."""
        try:
            work()
        except BaseException:
            self.abort()
            raise
        self._active = False
        self._lock.release()

    def _commit(self) -> None:
        """Finish the files, write the manifest, swap the store into place."""
        suspects = self._seen.finish()
        if suspects:
            self._raise_duplicate(suspects, [])
        splits = {}
        for part, out in self._outputs.items():
            if out.writer is not None or not out.files:
                if out.writer is None:  # an empty split still gets its zero-row file
                    out.writer = pq.ParquetWriter(self.tmp / out.current_name(), self.schema)
                self._finish_file(out)
            files = []
            for name, rows in out.files:
                file = self.tmp / name
                fsync(file)
                files.append({"name": name, "rows": rows, "bytes": file.stat().st_size, "sha256": sha256_file(file)})
            splits[part.value] = {"documents": out.documents, "tokens": out.tokens, "files": files}
        manifest = {
            "format": FORMAT,
            "format_version": self.format_version,
            **({"roles": True} if self.roles else {}),
            "tokenizer": {"kind": self.tokenizer.kind, "hash": self.tokenizer.hash,
                          "bos_id": self.bos_id, "eos_id": self.eos_id, "file": TOKENIZER_NAME,
                          **self._vocabulary()},
            "splits": splits,
        }
        (self.tmp / RESUME_NAME).unlink(missing_ok=True)
        (self.tmp / f".{RESUME_NAME}.tmp").unlink(missing_ok=True)
        (self.tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        for directory in [self.tmp / split_dir(p) for p in PARTITIONS] + [self.tmp]:
            fsync(directory)
        stop_point("manifest")
        self._swap_in()

    def _vocabulary(self) -> dict:
        """``{"vocab_size": N}`` when the tokenizer says its size (a reader then need not load it to
        learn it: export picks its dtype from it), else nothing."""
        size = getattr(self.tokenizer, "vocab_size", None)
        if isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size > 0:
            return {"vocab_size": int(size)}
        return {}

    def _swap_in(self) -> None:
        if self.path.exists():
            old = self.path.with_name(f".{self.path.name}.old-{os.getpid()}")
            os.rename(self.path, old)
            stop_point("swap")
            try:
                os.rename(self.tmp, self.path)
            except BaseException:
                os.rename(old, self.path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self.tmp, self.path)
        fsync(self.path.parent)

    def _close_open_files(self, *, drop: bool) -> None:
        """Close every file being written (already failing: errors closing it are moot); ``drop``
        removes them (the temporary directory's finished files stay)."""
        for out in self._outputs.values():
            if out.writer is not None:
                try:
                    out.writer.close()
                except Exception:
                    pass
                if drop:
                    (self.tmp / out.current_name()).unlink(missing_ok=True)
                out.writer = None

    def abort(self) -> None:
        """Drop everything written so far; ``path`` keeps what it held before."""
        self._close_open_files(drop=False)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self._active:
            self._active = False
            self._lock.release()
