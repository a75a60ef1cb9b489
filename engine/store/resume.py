"""Resuming an interrupted store writer (``TokenStoreWriter(resume=True)``), and suspending one.

An interrupted writer (``suspend``, on KeyboardInterrupt) leaves its temporary directory with its
finished files and ``_resume.json`` (per finished file: rows and the sha256 over its documents'
``source_digest``; and the writer's ``encoding``, the caller's rules that decide ids beyond the
tokenizer, which a resumed run compares). A later writer of the same path and tokenizer (``_resumable``) takes the newest
such directory over and keeps each split's leading run of complete files
(``_restore_finished_files``); the caller proves they are its corpus's (``resumed_sources``) or
drops them (``start_fresh``). ``ResumableWriter`` is the part of ``TokenStoreWriter`` that does this.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.checks import parse_json
from engine.partition import PARTITIONS, Partition
from engine.corpus.unique import SeenIds
from engine.errors import StoreError
from engine.store.layout import RESUME_NAME, TOKENIZER_NAME, split_dir, store_partition

__all__ = ["ResumableWriter"]


class ResumableWriter:
    """What ``TokenStoreWriter`` does to resume and to suspend (see the module docstring)."""

    def resumed_lengths(self, partition: Partition | str) -> np.ndarray:
        """Token counts (int64) of the documents of ``partition`` kept from an interrupted run."""
        return self._outputs[store_partition(partition)].resumed_lengths

    def resumed_sources(self, partition: Partition | str) -> list[str | None]:
        """Per file kept from an interrupted run, in order: the sha256 over its documents'
        ``source_digest`` (None where the interrupted writer was not given them)."""
        return list(self._outputs[store_partition(partition)].sources)

    def start_fresh(self) -> None:
        """Drop every file kept from an interrupted run (before anything new is written)."""
        self._check_active()
        for part, out in self._outputs.items():
            if out.writer is not None or out.pending_rows or (out.documents != self.resumed[part]):
                raise StoreError(f"{self.path}: start_fresh() must come before any document is written")
            for name, _ in out.files:
                (self.tmp / name).unlink()
            self._outputs[part] = type(out)(part)
            self.resumed[part] = 0
        self._seen = SeenIds(self.id_buffer)
        self._save_resume_state()

    def _resumable(self, leftover: Path) -> bool:
        """A leftover temporary store can be continued iff it was started with this same tokenizer."""
        from engine.tokenizers.loading import load_tokenizer
        from engine.errors import TokenizerError

        try:
            return load_tokenizer(leftover / TOKENIZER_NAME).hash == self.tokenizer.hash
        except TokenizerError:
            return False

    def _restore_finished_files(self) -> None:
        """Keep each split's leading run of complete files (footer readable, ``max_rows_per_file`` rows
        or fewer only if last); delete the rest. Restores counts and ids so writing continues after them."""
        try:
            state = parse_json((self.tmp / RESUME_NAME).read_text(encoding="utf-8"))
            recorded = state["files"]
            if not isinstance(recorded, dict):
                recorded = {}
            encoding = state.get("encoding")
            self.resumed_encoding = encoding if isinstance(encoding, dict) else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            recorded = {}
        for part in PARTITIONS:
            out = self._outputs[part]
            directory = self.tmp / split_dir(part)
            directory.mkdir(exist_ok=True)
            names = sorted(f.name for f in directory.glob("part-*.parquet"))
            keep = True
            for index, name in enumerate(names):
                file = directory / name
                if keep and name == f"part-{index:05d}.parquet":
                    try:  # the footer first: a file of one long document is never read to be dropped
                        full = (pq.read_metadata(file).num_rows == self.max_rows_per_file
                                and pq.read_schema(file).equals(self.schema, check_metadata=False))
                        table = pq.read_table(file) if full else None
                    except (pa.ArrowException, OSError):
                        table = None
                    if table is not None:  # a full file of this schema (its footer said so)
                        ids = table.column("id").to_pylist()
                        self._check_unique(part, ids, ids)
                        out.files.append((f"{split_dir(part)}/{name}", table.num_rows))
                        entry = recorded.get(f"{split_dir(part)}/{name}")
                        digest = entry.get("source_sha256") if isinstance(entry, dict) else None
                        rows_ok = isinstance(entry, dict) and entry.get("rows") == table.num_rows
                        out.sources.append(digest if isinstance(digest, str) and rows_ok else None)
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

    def _save_resume_state(self) -> None:
        """``_resume.json`` in the temporary directory: every finished file's rows and source digest."""
        files = {name: {"rows": rows, "source_sha256": digest}
                 for out in self._outputs.values() for (name, rows), digest in zip(out.files, out.sources)}
        tmp = self.tmp / f".{RESUME_NAME}.tmp"
        tmp.write_text(json.dumps({"files": files, "encoding": self.encoding}, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.tmp / RESUME_NAME)

    def suspend(self) -> None:
        """Interrupted: keep the finished files (and ``_resume.json``) in the temporary directory for a
        later ``resume=True`` writer; drop the file being written; ``path`` keeps what it held before."""
        self._end(self._keep_finished)

    def _keep_finished(self) -> None:
        self._close_open_files(drop=True)  # a cut file is no use to a later run
        self._save_resume_state()
