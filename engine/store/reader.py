"""``TokenStore``: an opened, checked store and zero-copy views of its token buffers (the store rules of engine.store).

Opening costs one footer read per file (sizes and row counts against the manifest); ``verify()``
also hashes every byte. ``arrays(p)`` hands out the ``tokens`` column's flat values (uint32) and
offsets (int64) as read-only numpy views of the Arrow buffers: no copy, except one concatenation
when a split spans several row groups or files; ``buffers(p)`` wraps them, with the ids, as
``TokenBuffers``.

Memory maps. Parquet pages are compressed and encoded, so a Parquet file cannot be mapped as
token buffers: reading decodes it into private memory. What can be mapped is a decoded copy:
``mapped_copy(p)`` writes the split's ``(id, tokens)`` once as an uncompressed Arrow IPC file of
one record batch (in ``$ENGINE_CACHE_DIR``, default ``<tempdir>/engine-cache-<uid>``, named by a
digest of the tokenizer hash and the split files' sha256, written under a temporary name and
renamed), and ``map_copy(p, file, digest)`` serves the split from that file by memory map,
zero-copy. A pickled store (what a DataLoader worker started by spawn receives) carries its path
and, for each split it has read, the copy's path and the sha256 of the content it must hold (ids,
offsets and tokens: ``content_digest``), computed by the process that pickles it from the table it
serves; every process reading the store thus shares one copy of the token pages in the OS page
cache instead of decoding the Parquet files into its own memory. A copy is only a cache, so a wrong
one is never served: one whose digest differs (changed, even with the same sizes), that is missing,
that does not match the manifest's counts or cannot be written is skipped (the split is decoded from
Parquet as before), and an existing copy that differs from the parent's table is rewritten. The
cache folder is made mode 0700; one that another user owns, or that others may write, is not used.
Workers started by fork share the parent's decoded buffers anyway (copy-on-write pages that nobody
writes). Deleting the copies is always safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence, overload

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.buffers import TokenBuffers
from engine.partition import PARTITIONS, Partition
from engine.checks import parse_json, read_json
from engine.corpus.unique import BUFFER_IDS
from engine.errors import StoreError
from engine.store_files import STORE_NAME
from engine.store.layout import (
    CHUNK_DOCUMENTS, FORMAT, FORMAT_VERSION, FORMAT_VERSIONS, MANIFEST_NAME, ROLES_FORMAT_VERSION, ROLES_TYPE,
    ROW_GROUP_SIZE, TOKENIZER_NAME, TOKENS_TYPE,
    EncodedDocument, check_store_dir, sha256_file, split_dir, store_location, store_partition,
)
from engine.store.writer import TokenStoreWriter

__all__ = ["EncodedDocuments", "TokenStore"]


class EncodedDocuments(Sequence[EncodedDocument]):
    """Lazy documents of one split: ``[i].tokens`` is a view ``values[offsets[i]:offsets[i+1]]``."""

    def __init__(self, partition: Partition, ids: list[str], values: np.ndarray, offsets: np.ndarray,
                 roles: np.ndarray | None = None):
        self.partition, self._ids, self._values, self._offsets = partition, ids, values, offsets
        self._roles = roles

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
        roles = None if self._roles is None else self._roles[start:stop]
        return EncodedDocument(self._ids[index], self.partition, self._values[start:stop], roles)

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
        self._mapped: dict[Partition, Path] = {}  # splits served from a memory-mapped decoded copy
        self._digests: dict[Partition, str] = {}  # content_digest of each split served
        self._roles: dict[Partition, np.ndarray] = {}

    # -- writing ----------------------------------------------------------------------------
    @staticmethod
    def writer(path: str | os.PathLike, tokenizer, *, overwrite: bool = True, row_group_size: int = ROW_GROUP_SIZE,
               max_rows_per_file: int | None = None, chunk_documents: int = CHUNK_DOCUMENTS,
               wait: bool = False, timeout: float = 600.0, resume: bool = False,
               check_unique: bool = True, roles: bool = False, bos: bool = True,
               id_buffer: int = BUFFER_IDS, encoding: dict | None = None) -> TokenStoreWriter:
        """A ``TokenStoreWriter`` for ``path`` (use it in a ``with`` block).

        ``resume=True`` (needs ``max_rows_per_file``) continues the temporary store an interrupted
        writer left behind, if it used the same tokenizer: its complete files are kept,
        ``writer.resumed[partition]`` says how many documents of each partition they hold, and the
        caller writes the rest. Written the same way, the result equals a fresh run's store.
        ``check_unique=False``: the caller has checked the ids unique (``prepare`` does, reading).
        ``roles=True``: a store of chat / instruction data, one role flag per token (format version 2).
        ``bos=False`` (or a tokenizer whose ``bos_id`` is None): documents are ``[content..., EOS]``
        (the manifest's ``bos_id`` is null).
        ``id_buffer``: recent id hashes the duplicate check holds in a set (``engine.corpus.unique``).
        ``encoding``: the caller's rules that decide ids beyond the tokenizer (JSON values), recorded for a
        resumed run to compare (``writer.resumed_encoding``: an interrupted run's, None if it recorded none).
        """
        return TokenStoreWriter(path, tokenizer, overwrite=overwrite, row_group_size=row_group_size,
                                max_rows_per_file=max_rows_per_file, chunk_documents=chunk_documents,
                                wait=wait, timeout=timeout, resume=resume, check_unique=check_unique, roles=roles,
                                bos=bos, id_buffer=id_buffer, encoding=encoding)

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
        """Open and check a store: manifest, format version, each file's size, rows and metadata.
        ``path`` may also be the output folder of ``engine prepare`` (its store is ``path/store``)."""
        given = Path(path)
        path = store_location(path)
        manifest_path = path / MANIFEST_NAME
        check_store_dir(path)
        manifest = read_json(manifest_path, StoreError, missing=f"not found; {path} is not a complete token store",
                             what="manifest")
        store = cls(path, manifest)
        store._check_manifest(manifest_path)
        if path != given:
            check_output_set(given, manifest)
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
        if version > max(FORMAT_VERSIONS):
            raise StoreError(f"{where}: store format version {version} is newer than this engine reads "
                             f"({max(FORMAT_VERSIONS)}); upgrade engine to read it")
        if version not in FORMAT_VERSIONS:
            raise StoreError(f"{where}: store format version {version} is not supported (expected {FORMAT_VERSION})")
        if (m.get("roles") is True) != (version == ROLES_FORMAT_VERSION):
            raise StoreError(f'{where}: format version {version} with "roles": {json.dumps(m.get("roles"))}; '
                             f'a store with role flags is version {ROLES_FORMAT_VERSION} and says "roles": true')
        try:
            tok = m["tokenizer"]
            if not (isinstance(tok["hash"], str) and (tok["bos_id"] is None or isinstance(tok["bos_id"], int))
                    and isinstance(tok["eos_id"], int)):
                raise TypeError("tokenizer hash/bos_id/eos_id")
            size = tok.get("vocab_size")
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
                raise TypeError(f"tokenizer vocab_size {size!r} (expected a count of tokens >= 1)")
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
        # Its own consistency: a manifest whose train entry is a copy of the test file's entry would
        # otherwise serve test documents as train.
        owner: dict[str, str] = {}
        for name, split in m["splits"].items():
            for entry in split["files"]:
                folder = split_dir(Partition(name))
                if Path(entry["name"]).parts[0] != folder:
                    raise StoreError(f"{where}: split {name} lists {entry['name']!r}, a file outside its folder "
                                     f"{folder}/; the manifest is not consistent")
                if entry["name"] in owner:
                    raise StoreError(f"{where}: {entry['name']!r} is listed twice (under {owner[entry['name']]} and "
                                     f"{name}); the manifest is not consistent")
                owner[entry["name"]] = name
            rows = sum(entry["rows"] for entry in split["files"])
            if rows != split["documents"]:
                raise StoreError(f"{where}: split {name} records {split['documents']} documents, its files list "
                                 f"{rows} rows; the manifest is not consistent")

    def _check_file(self, entry: dict) -> None:
        file = self.path / entry["name"]
        if not file.is_file():
            raise StoreError(f"{file}: missing (the manifest lists it with {entry['rows']} rows)")
        size = file.stat().st_size
        if size != entry["bytes"]:
            raise StoreError(f"{file}: size is {size} bytes, the manifest expects {entry['bytes']}; "
                             "the file is truncated or changed")
        try:
            meta = pq.read_metadata(file)
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise StoreError(f"{file}: cannot read the Parquet footer ({exc}); the file is corrupt") from None
        if meta.num_rows != entry["rows"]:
            raise StoreError(f"{file}: holds {meta.num_rows} rows, the manifest expects {entry['rows']}")
        found = (meta.metadata or {}).get(b"engine.tokenizer_hash", b"").decode()
        if found != self.tokenizer_hash:
            raise StoreError(f"{file}: records tokenizer hash {found!r}, the manifest expects {self.tokenizer_hash}")

    def verify(self) -> int:
        """Check everything the manifest claims (reads every byte): each file's sha256, each split's
        document and token counts against its files, the content hash of the saved tokenizer, and
        that the split folders hold no file the manifest does not list. Returns the number of data
        files checked; StoreError names the first thing that does not hold."""
        import pyarrow.compute as pc

        from engine.tokenizers.base import canonical_json

        listed: set[Path] = set()
        for name, split in self._manifest["splits"].items():
            documents = tokens = 0
            for entry in split["files"]:
                file = self.path / entry["name"]
                listed.add(Path(entry["name"]))
                self._check_file(entry)
                found = sha256_file(file)
                if found != entry["sha256"]:
                    raise StoreError(f"{file}: sha256 is {found}, the manifest expects {entry['sha256']}; the file is corrupt")
                try:
                    parquet = pq.ParquetFile(file)
                    for group in range(parquet.num_row_groups):  # one row group in memory at a time
                        names = ["tokens", "roles"] if self.has_roles else ["tokens"]
                        rows = parquet.read_row_group(group, columns=names)
                        column = rows.column("tokens")
                        documents += len(column)
                        tokens += int(pc.sum(pc.list_value_length(column)).as_py() or 0)
                        if self.has_roles:
                            self._verify_roles(file, group, column, rows.column("roles"))
                except (OSError, pa.ArrowException, ValueError, KeyError) as exc:
                    raise StoreError(f"{file}: cannot read its tokens ({exc}); the file is corrupt") from None
            for what, claimed, found_count in (("documents", split["documents"], documents), ("tokens", split["tokens"], tokens)):
                if claimed != found_count:
                    raise StoreError(f"{self.path}: split {name}: the manifest records {claimed} {what}, "
                                     f"its files hold {found_count}")
        name = self._manifest["tokenizer"].get("file")
        tokenizer_file = self.path / (name if isinstance(name, str) and name and Path(name).name == name else TOKENIZER_NAME)
        try:
            saved = parse_json(tokenizer_file.read_text(encoding="utf-8"))
            content_hash = hashlib.sha256(canonical_json({"kind": saved["kind"], "payload": saved["payload"]})).hexdigest()
        except FileNotFoundError:
            raise StoreError(f"{tokenizer_file}: missing (the store keeps the tokenizer that encoded it)") from None
        except (OSError, ValueError, TypeError, KeyError, UnicodeError, RecursionError) as exc:
            raise StoreError(f"{tokenizer_file}: not a readable tokenizer file ({type(exc).__name__}: {exc})") from None
        if content_hash != self.tokenizer_hash:
            raise StoreError(f"{tokenizer_file}: holds a tokenizer with hash {content_hash}, the manifest expects "
                             f"{self.tokenizer_hash}")
        for folder in sorted(self.path.glob("split=*")):
            entries = sorted(folder.iterdir()) if folder.is_dir() else [folder]
            for entry in entries:
                relative = entry.relative_to(self.path)
                if relative not in listed:
                    raise StoreError(f"{entry}: not listed in the manifest; a split folder holds only the "
                                     "store's own files (readers of the folder would see it)")
        return len(listed)

    def _verify_roles(self, file: Path, group: int, tokens, roles) -> None:
        """Each row's role flags: as many as its tokens, each 0 or 1."""
        import pyarrow.compute as pc

        if roles.type != ROLES_TYPE or roles.null_count:
            raise StoreError(f"{file}: row group {group}: roles column is {roles.type} with {roles.null_count} "
                             f"null(s), expected {ROLES_TYPE} without nulls")
        lengths = pc.list_value_length(tokens).to_numpy(zero_copy_only=False)
        flags = pc.list_value_length(roles).to_numpy(zero_copy_only=False)
        wrong = np.flatnonzero(lengths != flags)
        if wrong.size:
            raise StoreError(f"{file}: row group {group}, row {int(wrong[0])}: {int(flags[wrong[0]])} role flags "
                             f"for {int(lengths[wrong[0]])} tokens; expected one per token")
        values = pc.list_flatten(roles).to_numpy(zero_copy_only=False)
        if values.size and values.max() > 1:
            raise StoreError(f"{file}: row group {group}: a role flag is {int(values.max())}; expected 0 or 1")

    def check_tokenizer(self, tokenizer) -> None:
        """StoreError unless ``tokenizer`` is the one this store was encoded with (same hash)."""
        if tokenizer.hash != self.tokenizer_hash:
            raise StoreError(
                f"{self.path}: tokenizer hash {tokenizer.hash} does not match the store's tokenizer hash "
                f"{self.tokenizer_hash}; use the tokenizer saved in the store ({TOKENIZER_NAME}) or re-encode"
            )

    def tokenizer(self):
        """The tokenizer saved in the store, checked against the manifest's hash."""
        from engine.tokenizers.loading import load_tokenizer

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
    def has_roles(self) -> bool:
        """True for a store of chat / instruction data (a ``roles`` column, format version 2)."""
        return self._manifest.get("roles") is True

    @property
    def tokenizer_hash(self) -> str:
        return self._manifest["tokenizer"]["hash"]

    @property
    def bos_id(self) -> int | None:
        """The id every document starts with, or None: documents are ``[content..., EOS]``."""
        return self._manifest["tokenizer"]["bos_id"]

    @property
    def eos_id(self) -> int:
        return self._manifest["tokenizer"]["eos_id"]

    @property
    def vocab_size(self) -> int | None:
        """The tokenizer's vocabulary size as the manifest records it, or None (a store written before
        the manifest recorded it, or by a tokenizer that does not say): then ``tokenizer().vocab_size``."""
        return self._manifest["tokenizer"].get("vocab_size")

    @property
    def partitions(self) -> tuple[Partition, ...]:
        """Partitions the store lists (a store written here lists all three, some maybe empty)."""
        return tuple(p for p in PARTITIONS if p.value in self._manifest["splits"])

    def _split(self, partition: Partition | str) -> dict:
        part = store_partition(partition)
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
        part = store_partition(partition)
        if part not in self._tables:
            tables = []
            for entry in self._split(part)["files"]:
                file = self.path / entry["name"]
                try:
                    table = pq.ParquetFile(file).read(columns=self._columns())
                except (OSError, pa.ArrowException, ValueError) as exc:
                    raise StoreError(f"{file}: cannot read ({exc}); the file is corrupt") from None
                if table.schema.field("tokens").type != TOKENS_TYPE or table.schema.field("id").type != pa.string():
                    raise StoreError(f"{file}: columns are {table.schema.types}, expected id: string, tokens: {TOKENS_TYPE}")
                if self.has_roles and table.schema.field("roles").type != ROLES_TYPE:
                    raise StoreError(f"{file}: roles column is {table.schema.field('roles').type}, expected {ROLES_TYPE}")
                if any(table.column(name).null_count for name in table.column_names):
                    raise StoreError(f"{file}: holds null ids, token lists or role lists; the file is corrupt")
                tables.append(table.replace_schema_metadata(None))
            empty = {"id": pa.array([], pa.string()), "tokens": pa.array([], TOKENS_TYPE)}
            if self.has_roles:
                empty["roles"] = pa.array([], ROLES_TYPE)
            self._tables[part] = pa.concat_tables(tables) if tables else pa.table(empty)
        return self._tables[part]

    def _columns(self) -> list[str]:
        return ["id", "tokens", "roles"] if self.has_roles else ["id", "tokens"]

    def roles(self, partition: Partition | str) -> np.ndarray | None:
        """The split's role flags (uint8, aligned with ``arrays()[0]``), or None for a store without roles."""
        part = store_partition(partition)
        if not self.has_roles:
            return None
        if part not in self._roles:
            column = self.table(part).column("roles")
            array = column.chunk(0) if column.num_chunks == 1 else (
                pa.array([], ROLES_TYPE) if column.num_chunks == 0 else column.combine_chunks())
            offsets = array.offsets.to_numpy(zero_copy_only=True)
            flags = array.values.to_numpy(zero_copy_only=True)[int(offsets[0]):int(offsets[-1])]
            _, values, token_offsets = self._views(part)
            if flags.shape != values.shape or not np.array_equal(offsets - offsets[0], token_offsets):
                raise StoreError(f"{self.path}: split {part.value}: role flags do not line up with the tokens "
                                 "(one flag per token expected); run verify()")
            self._roles[part] = flags
        return self._roles[part]

    def tokens_array(self, partition: Partition | str) -> pa.LargeListArray:
        """The ``tokens`` column as one Arrow array; ``arrays()`` views its buffers."""
        return self._views(store_partition(partition))[0]

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
        _, values, offsets = self._views(store_partition(partition))
        return values, offsets

    def buffers(self, partition: Partition | str) -> TokenBuffers:
        """The split as ``TokenBuffers``: ``values`` and ``offsets`` are the read-only views of
        ``arrays()`` (no copy), ``ids`` the split's document ids in order."""
        part = store_partition(partition)
        values, offsets = self.arrays(part)
        return TokenBuffers.checked(values, offsets, self.ids(part), part, error=StoreError, roles=self.roles(part))

    def ids(self, partition: Partition | str) -> list[str]:
        part = store_partition(partition)
        if part not in self._ids:
            self._ids[part] = self.table(part).column("id").to_pylist()
        return self._ids[part]

    def documents(self, partition: Partition | str) -> EncodedDocuments:
        part = store_partition(partition)
        values, offsets = self.arrays(part)
        return EncodedDocuments(part, self.ids(part), values, offsets, self.roles(part))

    # -- memory-mapped decoded copies ------------------------------------------------------------
    def mapped_file(self, partition: Partition | str) -> Path | None:
        """The decoded copy this split is memory-mapped from, or None (decoded from Parquet)."""
        return self._mapped.get(store_partition(partition))

    def _copy_name(self, part: Partition) -> str:
        split = self._split(part)
        digest = hashlib.sha256(json.dumps(
            [self.format_version, self.tokenizer_hash, part.value,
             [[e["name"], e["sha256"], e["rows"], e["bytes"]] for e in split["files"]]]).encode()).hexdigest()
        return f"{part.value}-{digest[:40]}.arrow"

    def mapped_copy(self, partition: Partition | str) -> Path:
        """Path of this split's decoded copy (uncompressed Arrow IPC, one record batch), written now
        unless it is there already; ``map_copy`` serves the split from it."""
        part = store_partition(partition)
        if part in self._mapped:
            return self._mapped[part]
        folder = _cache_folder()
        file = folder / self._copy_name(part)
        found = self._copy_table(part, file)
        if found is not None and content_digest(found) == self.content_digest(part):
            return file
        table = self.table(part).combine_chunks()
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=file.name + ".", suffix=".tmp", delete=False) as tmp:
                temporary = Path(tmp.name)
            try:
                with pa.OSFile(str(temporary), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table, max_chunksize=max(table.num_rows, 1))
                os.replace(temporary, file)
            finally:
                temporary.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"{file}: cannot write the decoded copy of split {part.value} ({exc}); set "
                             "ENGINE_CACHE_DIR to a writable directory with room for it") from None
        return file

    def _copy_table(self, part: Partition, file: Path) -> pa.Table | None:
        """The copy at ``file`` as a memory-mapped table if it holds this split (counts, columns,
        one chunk), else None."""
        try:
            table = pa.ipc.open_file(pa.memory_map(str(file), "r")).read_all()
        except (OSError, pa.ArrowException, ValueError):
            return None
        split = self._split(part)
        if (table.schema.names != self._columns() or table.schema.field("tokens").type != TOKENS_TYPE
                or table.num_rows != split["documents"] or table.column("tokens").num_chunks > 1
                or table.column("tokens").null_count or table.column("id").null_count):
            return None
        tokens = table.column("tokens")
        if tokens.num_chunks:
            offsets = tokens.chunk(0).offsets
            if int(offsets[-1].as_py()) - int(offsets[0].as_py()) != split["tokens"]:
                return None
        elif split["tokens"]:
            return None
        return table

    def content_digest(self, partition: Partition | str) -> str:
        """sha256 of the split's content as served (``content_digest`` of its table), computed once."""
        part = store_partition(partition)
        if part not in self._digests:
            self._digests[part] = content_digest(self.table(part))
        return self._digests[part]

    def map_copy(self, partition: Partition | str, file: str | os.PathLike, digest: str) -> bool:
        """Serve this split from the decoded copy at ``file`` by memory map (zero-copy) if it holds
        the split and its content hashes to ``digest`` (``content_digest``); False (and nothing
        changes) when it is missing, does not match or was changed."""
        part = store_partition(partition)
        if part in self._tables:
            return part in self._mapped
        table = self._copy_table(part, Path(file))
        if table is None or content_digest(table) != digest:
            return False
        self._digests[part] = digest
        self._tables[part] = table
        self._mapped[part] = Path(file)
        return True

    # -- pickling ---------------------------------------------------------------------------
    def __reduce__(self):
        """Pickle as the store's absolute path and the decoded copies of the splits read so far
        (written now if need be, see the module docstring): the copy reopens and re-checks the
        store from disk and memory-maps those splits, so a process started by spawn (a
        DataLoader worker) receives bytes, not token buffers, and shares the token pages."""
        mapped = {}
        for part in list(self._tables):
            try:
                mapped[part.value] = (os.fspath(self.mapped_copy(part)), self.content_digest(part))
            except StoreError:  # no room for a copy: the copy decodes this split from Parquet itself
                continue
        return (_reopen, (os.fspath(Path(self.path).absolute()), mapped))

    def __repr__(self) -> str:
        counts = ", ".join(f"{p.value}={self.num_documents(p)}" for p in self.partitions)
        return f"TokenStore({str(self.path)!r}, {counts}, tokenizer={self.tokenizer_hash[:12]})"


def _reopen(path: str, mapped: dict[str, tuple[str, str]]) -> TokenStore:
    store = TokenStore.open(path)
    for partition, (file, digest) in mapped.items():
        store.map_copy(partition, file, digest)
    return store


def check_output_folder(out_dir: Path) -> None:
    """``check_output_set`` for the ``prepare`` output folder ``out_dir`` (its store's manifest read
    here; a malformed one is left to ``TokenStore.open`` to name)."""
    manifest = read_json(out_dir / STORE_NAME / MANIFEST_NAME, StoreError, missing="missing", what="manifest")
    try:
        manifest["tokenizer"]["hash"], {name: split["documents"] for name, split in manifest["splits"].items()}
    except (KeyError, TypeError, AttributeError):
        return
    check_output_set(out_dir, manifest)


def check_output_set(out_dir: Path, manifest: dict) -> None:
    """StoreError unless the ``prepare`` output folder ``out_dir`` is one run's: its ``report.json``
    and ``tokenizer.json`` (when present) name the tokenizer hash of ``store/``'s manifest, and the
    report its document counts. ``prepare`` renames the store, then ``tokenizer.json``, then
    ``report.json``: a run killed between those renames is told apart from a complete one here, by the
    report alone when there is one (renamed last, it vouches for the tokenizer file, which would be
    costly to parse on every open when it is large)."""
    expected = manifest["tokenizer"]["hash"]
    report_file, tokenizer_file = out_dir / "report.json", out_dir / "tokenizer.json"
    interrupted = ("a run of `engine prepare` that replaced this output was interrupted between its renames; "
                   "run it again to complete it")
    if report_file.is_file():
        report = read_json(report_file, StoreError, missing="missing", what="report")
        try:
            recorded = report["tokenizer"]["hash"]
            counts = {name: report["partitions"][name]["documents"] for name in manifest["splits"]}
        except (KeyError, TypeError):
            raise StoreError(f"{report_file}: not an engine report (no tokenizer hash and document counts)") from None
        if recorded != expected or any(counts[name] != split["documents"]
                                       for name, split in manifest["splits"].items()):
            raise StoreError(f"{report_file}: describes another run than {out_dir / STORE_NAME} (tokenizer "
                             f"{str(recorded)[:12]}, the store's {expected[:12]}): {interrupted}")
    elif tokenizer_file.is_file():  # renamed before the report: a report that agrees vouches for it (no parse)
        saved = read_json(tokenizer_file, StoreError, missing="missing", what="tokenizer file")
        if isinstance(saved, dict) and saved.get("format") == "engine.tokenizer" and saved.get("hash") != expected:
            raise StoreError(f"{tokenizer_file}: is not the tokenizer of {out_dir / STORE_NAME} (hash "
                             f"{str(saved.get('hash'))[:12]}, the store's {expected[:12]}): {interrupted}")


def content_digest(table: pa.Table) -> str:
    """sha256 of a split's ``id`` and ``tokens`` columns as served: every id (UTF-8, each followed by
    its length), the document lengths and the token values (little-endian uint32), so two tables
    that serve different documents never share a digest. Costs one pass over the tokens (~1 GB/s)."""
    h = hashlib.sha256()
    ids = table.column("id").combine_chunks() if table.num_rows else pa.array([], pa.string())
    for doc_id in ids.to_pylist():
        encoded = doc_id.encode("utf-8")
        h.update(encoded)
        h.update(len(encoded).to_bytes(8, "little"))
    tokens = table.column("tokens").combine_chunks() if table.num_rows else None
    if tokens is not None and len(tokens):
        offsets = np.asarray(tokens.offsets, dtype=np.int64)
        h.update(np.diff(offsets).astype("<i8").tobytes())
        h.update(np.ascontiguousarray(np.asarray(tokens.values, dtype=np.uint32)[offsets[0]:offsets[-1]]).astype("<u4",
                                                                                                       copy=False))
    return h.hexdigest()


def _cache_folder() -> Path:
    """``$ENGINE_CACHE_DIR`` (default ``<tempdir>/engine-cache-<uid>``), made mode 0700; StoreError if
    it is not a folder this user owns that only this user may write (its copies would not be ours)."""
    folder = Path(os.environ.get("ENGINE_CACHE_DIR") or Path(tempfile.gettempdir()) / f"engine-cache-{os.getuid()}")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise StoreError(f"{folder}: cannot make the cache folder for decoded copies ({exc.strerror}); set "
                         "ENGINE_CACHE_DIR to a writable directory") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise StoreError(f"{folder}: the cache folder for decoded copies is not a directory of this user's that only "
                         "this user may write; not using it (set ENGINE_CACHE_DIR to one)")
    return folder
