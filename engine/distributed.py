"""The prepare steps on Ray Data, for corpora spread over a cluster (extra ``engine[distributed]``).

``run_on_ray(options)`` takes the ``PrepareOptions`` the local executor takes, fits with the same
``Trainer`` and cuts chunks with the same ``Chunker``; only where each step runs differs:

- on the cluster: reading (``read_corpus``: one read task per shard, each running engine's own
  reader over its file, so every corpus form and reading option of the local executor holds: plain
  or compressed JSONL, Parquet, Arrow, folders and globs of shards, ``datasets`` folders, folders of
  text files, ``--text-column``/``--id-column`` with nested fields, ids made from file and row,
  ``--skip-bad-lines``, ``--on-invalid-utf8``; whether ids are made is decided by the corpus's
  first document, as locally, and the counts of every shard's read come back to the driver in
  shard order for ``report["read"]``; shard paths must be readable where the tasks run), split assignment
  (``assign_splits``: the manifest is shipped once), type counting per batch (``count_types``:
  the kind's ``Trainer.count_types`` in an actor, whatever the kind counts: characters, words,
  byte-level pieces) and encoding (``encode``: a callable class, so each actor rebuilds the
  tokenizer from its JSON and loads the compiled kernels once, then maps Arrow batches
  ``id``/``text``/``split`` to ``id``/``tokens``/``split``);
- on the driver: folding the per-batch type tables in batch order into one ``TypeCounts`` and
  fitting from it (``trainer.train_from_counts``, O(types)), the manifest checks (O(documents) id
  sets; an explicit manifest is checked against the corpus ids before anything is fitted), and
  writing the store (``write_store``): batches arrive in dataset order (``preserve_order``), each
  partition's documents are cut by the shared ``engine.steps.Chunker`` and handed to
  ``TokenStoreWriter.write_chunk``, so the store is the local store, byte for byte.

The driver holds one block at a time plus the type table: O(documents + types), never
O(tokens). Everything that is O(tokens) (reading, splitting, counting, encoding) runs on the cluster,
but for a fit on a fit sample (``--fit-sample BYTES``, ``sample_types``): the sample is the start of
the train partition in corpus order, so the driver takes it from the train blocks as they arrive and
counts it itself, block by block (at most ``BYTES`` of text in all), as the local executor does; the
train blocks after the sample still reach the driver, which reads only their documents' emptiness.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.corpus import PARTITIONS, ManifestCheck, Partition, ReadReport, SplitManifest, check_columns_apply
from engine.corpus.readers import TEXT_COLUMN, read_shards
from engine.corpus.shards import CorpusShards, corpus_shards
from engine.errors import ConfigurationError, CorpusError, EngineError
from engine.local import run_local
from engine.outputs import PartitionTally, PrepareResult, StagedOutputs
from engine.corpus.fit_sample import FitSample
from engine.tokenizers.streaming import training_batches
from engine.tokenizers.type_table import TypeCounts, count_types as count_local_types
from engine.prepare_options import PrepareOptions, check_option_names
from engine.progress import Progress
from engine.steps import (Chunker, capped_table, chunk_tally, drops_bos, fit_from_table, open_store_writer, run_checked,
                          without_bos_ids)
from engine.tokenizers.base import Tokenizer, Trainer, UnknownInputError
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS

__all__ = [
    "require_ray", "read_corpus", "assign_splits", "count_types", "sample_types", "encode", "write_store", "run_on_ray",
    "prepare_on_ray",
]

INSTALL_HINT = "pip install 'engine[distributed]'"
MAP_BATCH_ROWS = 512


def require_ray():
    """The ``ray`` module, or a ConfigurationError that says how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ConfigurationError(f"the Ray executor needs Ray Data, which is not installed: {INSTALL_HINT}") from None
    return ray


def _concurrency(concurrency: int | None) -> int:
    """Most actors per step: ``concurrency``, else the cluster's CPUs."""
    ray = require_ray()
    if concurrency is not None:
        return max(int(concurrency), 1)
    return max(int(ray.cluster_resources().get("CPU", 1)), 1)


def _actor_pool(concurrency: int | None):
    # An autoscaling pool (1..n): a fixed pool of n actors on n CPUs would starve the read tasks
    # that feed it, and the step would wait forever.
    return require_ray().data.ActorPoolStrategy(min_size=1, max_size=_concurrency(concurrency))


@contextlib.contextmanager
def _ordered():
    """Datasets run inside keep their row order (what the driver relies on), and a worker's
    EngineError reaches the driver as itself rather than as Ray's generic UDF failure."""
    ctx = require_ray().data.DataContext.get_current()
    before = ctx.execution_options.preserve_order, ctx.raise_original_map_exception
    ctx.execution_options.preserve_order = True
    ctx.raise_original_map_exception = True
    try:
        yield
    finally:
        ctx.execution_options.preserve_order, ctx.raise_original_map_exception = before


@contextlib.contextmanager
def _blocks(dataset) -> Iterator[Any]:
    """``dataset``'s Arrow blocks in order; on any exception the execution (and its actors) stops now,
    not when the iterator is garbage-collected, so a later run finds its CPUs free."""
    iterator = dataset.iter_batches(batch_format="pyarrow", batch_size=None)
    try:
        yield iterator
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def _unwrapped(exc: BaseException) -> BaseException:
    """The EngineError a worker raised, out of Ray's wrappers (RayTaskError, UserCodeException)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, EngineError) and type(exc).__module__.startswith("engine"):
            return exc
        cause = getattr(exc, "cause", None)
        if isinstance(cause, EngineError):
            return cause
        exc = cause if isinstance(cause, BaseException) else exc.__cause__
    return None


# -- reading and splits -------------------------------------------------------------------------


_READ_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])


class _ReadCounts:
    """A Ray actor: each shard's ``ReadReport`` of the latest pass, by shard index."""

    def __init__(self):
        self.reports: dict[int, ReadReport] = {}

    def put(self, index: int, report: ReadReport) -> None:
        self.reports[index] = report

    def merged(self, source: str) -> ReadReport:
        report = ReadReport(source=source)
        for index in sorted(self.reports):
            shard = self.reports[index]
            report.add(shard)
            report.text_column, report.id_column = shard.text_column, shard.id_column
        return report


def _read_counts():
    """A ``_ReadCounts`` actor; it holds no CPU, so it never starves the steps of a small cluster."""
    return require_ray().remote(num_cpus=0)(_ReadCounts).remote()


def _units(shards: CorpusShards) -> list[CorpusShards]:
    """The read tasks' shards: one file each (a folder of text files is one task)."""
    if shards.kind == "folder":
        return [shards]
    return [CorpusShards(shards.path, shards.kind, (file,), (name,), single=shards.single)
            for file, name in zip(shards.files, shards.names)]


def _made_ids(units: list[CorpusShards], reading: dict) -> bool | None:
    """Whether ids are made, as the corpus's first document decides (None: no shard holds one)."""
    if reading["id_column"] is not None or units[0].kind == "folder":
        return None
    for unit in units:
        report = ReadReport()
        for _ in read_shards(unit, report=report, batch_documents=1, **reading):
            return report.made_ids
    return None


def _read_shard(batch: pa.Table, units: list[CorpusShards], reading: dict, made_ids: bool | None,
                counts) -> Iterator[pa.Table]:
    """The documents of the shards ``batch`` names, as ``id``/``text`` tables; their counts go to ``counts``."""
    for index in batch.column("shard").to_pylist():
        report = ReadReport()
        for docs in read_shards(units[index], report=report, made_ids=made_ids, batch_documents=MAP_BATCH_ROWS,
                                **reading):
            yield pa.table([pa.array([d.id for d in docs], pa.string()), pa.array([d.text for d in docs], pa.string())],
                           schema=_READ_SCHEMA)
        require_ray().get(counts.put.remote(index, report))


def read_corpus(path: str | os.PathLike, *, text_column: str = TEXT_COLUMN, id_column: str | None = None,
                on_invalid_utf8: str = "error", skip_bad_lines: bool = False, corpus_format: str | None = None,
                exclude=(), counts=None):
    """A Dataset with ``id`` and ``text`` (strings) from any corpus the local executor reads, one read
    task per shard (see the module docstring). ``counts``: a ``_ReadCounts`` actor for the reports."""
    ray = require_ray()
    shards = corpus_shards(path, corpus_format, exclude=exclude)
    check_columns_apply(path, text_column, id_column, corpus_format)
    reading = dict(text_column=text_column, id_column=id_column, on_invalid_utf8=on_invalid_utf8,
                   skip_bad_lines=skip_bad_lines, exclude=tuple(exclude))
    units = _units(shards)
    if counts is None:
        counts = _read_counts()
    tasks = ray.data.from_items([{"shard": i} for i in range(len(units))], override_num_blocks=len(units))
    return tasks.map_batches(_read_shard, fn_kwargs={"units": units, "reading": reading,
                                                     "made_ids": _made_ids(units, reading), "counts": counts},
                             batch_format="pyarrow", batch_size=1)


def _assign(batch: pa.Table, manifest: SplitManifest) -> pa.Table:
    splits = []
    for doc_id in batch.column("id").to_pylist():
        try:
            splits.append(manifest.partition_of(doc_id).value)
        except CorpusError:
            splits.append("")  # forgotten by the manifest; the driver names it
    return batch.append_column("split", pa.array(splits, pa.string()))


def assign_splits(dataset, manifest: SplitManifest):
    """Add a ``split`` column (``""`` for an id the manifest forgets) on the cluster."""
    return dataset.map_batches(_assign, fn_kwargs={"manifest": manifest}, batch_format="pyarrow",
                               batch_size=MAP_BATCH_ROWS)


def _only_train(batch: pa.Table) -> pa.Table:
    return batch.filter(pc.equal(batch.column("split"), Partition.TRAIN.value))


# -- fitting ------------------------------------------------------------------------------------


class _CountTypes:
    """Per batch: the trainer's distinct types in first-appearance order with counts.

    Types travel as UTF-8 (``str`` types, flagged ``text``) or raw bytes, so one Arrow schema
    serves every kind."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer

    def __call__(self, batch: pa.Table) -> pa.Table:
        types, counts = self.trainer.count_types(batch.column("text").to_pylist())
        text = [isinstance(t, str) for t in types]
        raw = [t.encode("utf-8", "surrogatepass") if is_text else bytes(t) for t, is_text in zip(types, text)]
        return pa.table({"type": pa.array(raw, pa.binary()), "text": pa.array(text, pa.bool_()),
                         "count": pa.array(np.asarray(counts, dtype=np.int64), pa.int64())})


def count_types(dataset, trainer: Trainer, *, concurrency: int | None = None) -> TypeCounts:
    """The types of ``dataset``'s ``text`` with counts, numbered by first appearance in dataset order:
    ``trainer.count_types`` maps on the cluster, the driver folds (as ``engine.tokenizers.type_table.count_types``)."""
    table = TypeCounts()
    with _ordered():
        mapped = dataset.map_batches(_CountTypes, fn_constructor_kwargs={"trainer": trainer},
                                     batch_format="pyarrow", batch_size=MAP_BATCH_ROWS,
                                     compute=_actor_pool(concurrency))
        with _blocks(mapped) as blocks:
            for batch in blocks:
                raw = batch.column("type").to_pylist()
                types = [t.decode("utf-8", "surrogatepass") if is_text else t
                         for t, is_text in zip(raw, batch.column("text").to_pylist())]
                table.add(types, batch.column("count").to_numpy())
    return table


def sample_types(dataset, trainer: Trainer, sample: FitSample, *, stream_chars: int = STREAM_CHARS,
                 threads: int | None = None) -> TypeCounts:
    """The types of the fit sample of ``dataset`` (train documents, in corpus order): the fit sample
    rule of ``engine.corpus.fit_sample`` needs that order, so the driver takes the sample from the
    blocks as they arrive and counts it block by block, as the local executor counts its batches.
    Past the bound the blocks still arrive, but their texts are not taken into Python: only each
    document's emptiness is read, for ``left_out``."""
    def batches() -> Iterator[list[str]]:
        with _blocks(dataset.select_columns(["id", "text"])) as blocks:
            for batch in blocks:
                if sample.full:
                    sample.left_out += int(pc.sum(pc.greater(pc.utf8_length(batch.column("text")), 0)).as_py() or 0)
                    continue
                texts = []
                for doc_id, text in zip(batch.column("id").to_pylist(), batch.column("text").to_pylist()):
                    taken = sample.take(doc_id, text)
                    if taken is not None:
                        texts.append(taken)
                yield texts

    return count_local_types(trainer, training_batches(trainer, batches(), stream_chars), threads)


def _check_ids(docs, check: ManifestCheck) -> None:
    """An explicit manifest against the corpus ids, before anything is fitted (ids only reach the driver)."""
    with _blocks(docs.select_columns(["id"])) as blocks:
        for batch in blocks:
            for doc_id in batch.column("id").to_pylist():
                check.partition_of(doc_id)
    check.finish()


# -- encoding and the store ---------------------------------------------------------------------


class _EncodeBatch:
    """Callable class: one tokenizer per actor, rebuilt from its JSON; kernels load once."""

    def __init__(self, tokenizer_json: dict, stream_chars: int, piece_chars: int, drop_bos: bool = False):
        from engine.tokenizers.base import tokenizer_from_json

        self.tokenizer = tokenizer_from_json(tokenizer_json, "tokenizer sent to a Ray actor")
        self.stream_chars, self.piece_chars = stream_chars, piece_chars
        self.drop_bos = drop_bos  # --bos none: each document's BOS removed, as the local executor does
        self.tokenizer.encode_documents([""], ["warm-up"])

    def __call__(self, batch: pa.Table) -> pa.Table:
        ids = batch.column("id").to_pylist()
        texts = batch.column("text").to_pylist()
        # A document the manifest forgets (split "") is not encoded: the driver names it instead.
        splits = batch.column("split").to_pylist()
        keep = [i for i, split in enumerate(splits) if split]
        try:
            values, kept_offsets = self.tokenizer.encode_documents([texts[i] for i in keep], [ids[i] for i in keep],
                                                                   stream_chars=self.stream_chars,
                                                                   piece_chars=self.piece_chars)
        except UnknownInputError as exc:
            if exc.document_id not in ids:
                raise
            raise exc.in_partition(splits[ids.index(exc.document_id)]) from None
        if self.drop_bos:
            values, kept_offsets = without_bos_ids(values, kept_offsets)
        lengths = np.zeros(len(ids), dtype=np.int64)
        lengths[keep] = np.diff(kept_offsets)
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tokens = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values, pa.uint32()))
        chars = pc.utf8_length(batch.column("text")).cast(pa.int64())
        return pa.table({"id": batch.column("id"), "tokens": tokens, "split": batch.column("split"), "chars": chars})


def encode(dataset, tokenizer: Tokenizer, *, concurrency: int | None = None, stream_chars: int = STREAM_CHARS,
           piece_chars: int = PIECE_CHARS, drop_bos: bool = False):
    """Map ``id``/``text``/``split`` to ``id``/``tokens`` (large_list<uint32>)/``split`` (+ ``chars``);
    a document longer than ``stream_chars`` characters is encoded span by span (spans of at most
    ``piece_chars`` characters); ``drop_bos``: documents without their BOS, ``[content..., EOS]``."""
    return dataset.map_batches(_EncodeBatch, fn_constructor_kwargs={"tokenizer_json": tokenizer.to_json(),
                                                                   "stream_chars": stream_chars,
                                                                   "piece_chars": piece_chars,
                                                                   "drop_bos": drop_bos},
                               batch_format="pyarrow", batch_size=MAP_BATCH_ROWS, compute=_actor_pool(concurrency))


def write_store(encoded, options: PrepareOptions, tokenizer: Tokenizer, *, check=None,
                before_commit=None) -> dict:
    """Write the store from an encoded Dataset on the driver, in dataset order; returns per-partition tallies.

    ``check`` (a ``ManifestCheck``) sees every id and runs before the store is committed;
    ``before_commit(tallies)`` runs after it, before the store is renamed into place.
    """
    tallies = {p: PartitionTally() for p in PARTITIONS}
    chunker = Chunker(options.limits)

    def write(writer, part, rows):
        ids = [r[0] for r in rows]
        lengths = np.fromiter((r[1].shape[0] for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.concatenate([r[1] for r in rows]) if rows else np.empty(0, np.uint32)
        writer.write_chunk(part, ids, values, offsets)
        tallies[part].add(chunk_tally(offsets, sum(r[2] for r in rows), options))

    with _ordered(), open_store_writer(options, tokenizer) as writer, \
            Progress("writing the store from Ray", quiet=options.quiet) as bar:
        with _blocks(encoded) as blocks:
            for batch in blocks:
                column = batch.column("tokens").combine_chunks() if batch.num_rows else None
                if column is None:
                    continue
                offsets = column.offsets.to_numpy()
                values = column.values.to_numpy()
                for i, (doc_id, split, n_chars) in enumerate(zip(batch.column("id").to_pylist(),
                                                                 batch.column("split").to_pylist(),
                                                                 batch.column("chars").to_pylist())):
                    part = check.partition_of(doc_id) if check is not None else Partition(split)
                    if part is None:
                        continue
                    chunk = chunker.add(part, (doc_id, values[offsets[i]:offsets[i + 1]], n_chars), n_chars)
                    if chunk is not None:
                        write(writer, part, chunk)
                bar.update(batch.num_rows)
        for part, chunk in chunker.rest():
            write(writer, part, chunk)
        if check is not None:
            check.finish()
        if before_commit is not None:
            before_commit(tallies)
    return tallies


def _run(options: PrepareOptions, concurrency: int, outputs: StagedOutputs) -> None:
    """The Ray steps of ``run_on_ray``: fit (or load), encode, write; ``outputs`` staged before the store commits."""
    manifest = options.manifest()
    check = ManifestCheck(manifest, str(options.corpus))
    counts = _read_counts()
    with _ordered():
        docs = assign_splits(read_corpus(options.corpus, text_column=options.text_column, id_column=options.id_column,
                                         on_invalid_utf8=options.on_invalid_utf8, skip_bad_lines=options.skip_bad_lines,
                                         corpus_format=options.corpus_format, exclude=options.excluded_paths,
                                         counts=counts), manifest)
        if options.fit is not None:
            trainer = options.trainer()
            if not manifest.is_hash_split:
                _check_ids(docs, check)
            check = None  # checked above (a hash split has nothing to check): pass 2 trusts the split column
            train = docs.map_batches(_only_train, batch_format="pyarrow")
            sample = None if options.fit_sample is None else FitSample(options.fit_sample)
            with Progress(f"counting train for {options.tokenizer} (Ray)", unit="steps", quiet=options.quiet):
                if sample is None:
                    table = count_types(train, trainer, concurrency=concurrency)
                else:
                    table = sample_types(train, trainer, sample, stream_chars=options.limits.stream_chars,
                                         threads=options.threads)
            table, capped = capped_table(options, table)
            tok = fit_from_table(options, trainer, table)
        else:
            tok, capped, sample = options.load_tokenizer(), None, None
        fitted_on = {"fit_sample": None if sample is None else sample.summary(), "max_types": capped}
        write_store(encode(docs, tok, concurrency=concurrency, stream_chars=options.limits.stream_chars,
                           piece_chars=options.limits.piece_chars, drop_bos=drops_bos(options, tok)), options, tok,
                    check=check,
                    before_commit=lambda tallies: outputs.stage(
                        tok, tallies, read=require_ray().get(counts.merged.remote(str(options.corpus))),
                        extra={key: value for key, value in fitted_on.items() if value is not None} or None))


def run_on_ray(options: PrepareOptions) -> PrepareResult:
    """``options`` with reading, counting and encoding on Ray Data; the local executor's outputs.

    Joins the cluster at ``options.ray_address`` (``"auto"``: the one ``ray start`` runs here), or
    starts a local Ray instance (shut down again at the end). ``options.threads`` caps the actors
    per step (default: the cluster's CPUs). A continuous ``.txt`` file runs locally.
    """
    if options.continuous:
        return run_local(options)
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=options.ray_address, include_dashboard=False, logging_level="ERROR",
                 log_to_driver=False, configure_logging=False)
    failure = None
    outputs = None
    try:
        concurrency = _concurrency(options.threads)
        # tokenizer.json and report.json are staged before the store is renamed into place and renamed
        # after it, as the local executor does: a run that fails anywhere leaves --out as it was.
        with StagedOutputs(options, threads=concurrency) as outputs:
            _run(options, concurrency, outputs)
    except Exception as exc:
        inner = _unwrapped(exc)
        if inner is None or inner is exc:
            raise
        # Ray appends its retry advice to the message; engine messages are one line. Raised below,
        # outside this block, so no traceback keeps the failed run's actors (and CPUs) alive.
        failure = type(inner)(str(inner).split("\n")[0])
    finally:
        if started:
            ray.shutdown()
    if failure is not None:
        raise failure
    return outputs.result


def prepare_on_ray(corpus_path=None, splits_path=None, out_dir="out", **options) -> PrepareResult:
    """``engine.pipeline.prepare`` (same keywords) on Ray Data: ``run_on_ray(PrepareOptions(...))``,
    after ``--out`` is checked (``run_checked``)."""
    check_option_names(options)
    options.setdefault("executor", "ray")
    if options["executor"] != "ray":
        raise ConfigurationError(f"prepare_on_ray runs on Ray, not executor={options['executor']!r} "
                                 "(engine.pipeline.prepare runs either)")
    return run_checked(run_on_ray, PrepareOptions(corpus_path, splits_path, out_dir, **options))
