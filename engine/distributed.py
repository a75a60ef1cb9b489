"""The prepare steps on Ray Data, for corpora spread over a cluster (extra ``engine[distributed]``).

What runs where:

- on the cluster: reading (``ray.data.read_json`` / ``read_parquet``), split assignment
  (``assign_splits``: the manifest is shipped once), word counting per batch (``count_words``:
  one word -> count table per batch, in first-appearance order) and encoding (``encode``: a
  callable class, so each actor rebuilds the tokenizer from its JSON and loads the compiled kernels
  once, then maps Arrow batches ``id``/``text``/``split`` to ``id``/``tokens``/``split``);
- on the driver: folding the per-batch word tables in batch order into one word-type table and
  training the BPE merges from it (O(word types)), the manifest checks (O(documents) id sets), and
  writing the store (``write_store``): batches arrive in dataset order (``preserve_order``), each
  partition's documents are cut into the same chunks as the local path and handed to
  ``TokenStoreWriter.write_chunk``, so the store is the local store, byte for byte.

The driver holds one block at a time plus the word-type table: O(documents + word types), never
O(tokens). Everything that is O(tokens) (reading, splitting, counting, encoding) runs on the cluster.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.corpus import PARTITIONS, ManifestCheck, Partition, SplitManifest
from engine.errors import ConfigurationError, CorpusError, EngineError
from engine.parallel import TOKENIZER_KINDS, WordTypeCounts, train_bpe_from_word_counts
from engine.progress import Progress
from engine.store import TokenStore
from engine.tokenizers.base import Tokenizer, load_tokenizer

__all__ = [
    "require_ray", "read_corpus", "assign_splits", "count_words", "train_from_word_counts",
    "fit_tokenizer", "encode", "write_store", "prepare_on_ray",
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


def read_corpus(path: str | os.PathLike):
    """A Dataset with ``id`` and ``text`` (strings) from a JSONL file or a Parquet file/directory."""
    ray = require_ray()
    path = Path(path)
    if path.suffix in (".jsonl", ".json") and path.is_file():
        import pyarrow.json as pajson

        ds = ray.data.read_json(str(path), read_options=pajson.ReadOptions(block_size=64 << 20),
                                parse_options=pajson.ParseOptions(explicit_schema=pa.schema(
                                    [("id", pa.string()), ("text", pa.string())])))
    elif path.suffix == ".parquet" or path.is_dir():
        ds = ray.data.read_parquet(str(path), columns=["id", "text"])
    else:
        raise ConfigurationError(
            f"{path}: the Ray executor reads .jsonl files and Parquet files or directories "
            "(use --executor local for folders of text files, Arrow IPC files and continuous .txt files)"
        )
    return ds.select_columns(["id", "text"])


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


class _CountWords:
    """Per batch: distinct words in first-appearance order with counts (``word``, ``count``)."""

    def __init__(self, level: str, pattern: str):
        self.level, self.pattern = level, pattern

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column("text").to_pylist()
        if self.level == "char":
            words, counts = WordTypeCounts.batch_words(texts)
            return pa.table({"word": pa.array(words, pa.string()), "count": pa.array(counts, pa.int64())})
        from engine.tokenizers.byte_bpe import WordCounts
        from engine.tokenizers.pretokenize import utf8_bytes

        table = WordCounts(self.pattern)
        table.add([utf8_bytes(t, None, "training text") for t in texts])
        pool, starts = table.pool.tobytes(), table.starts[: table.total + 1].tolist()
        words = [pool[starts[w]:starts[w + 1]] for w in range(table.total)]
        return pa.table({"word": pa.array(words, pa.binary()), "count": pa.array(table.counts[: table.total])})


def count_words(dataset, *, level: str = "char", pattern: str = "gpt2", concurrency: int | None = None):
    """Word types of ``dataset``'s ``text`` with counts, numbered by first appearance in dataset order.

    ``level="char"``: pieces of ``\\w+|[^\\w\\s]|\\s`` as ``str``; ``level="byte"``: pieces of the
    byte-level pre-tokenizer ``pattern`` as ``bytes``. Map on the cluster, fold on the driver.
    Returns ``(words, counts int64)``.
    """
    if level not in ("char", "byte"):
        raise ConfigurationError(f"count_words level {level!r} is unknown (expected 'char' or 'byte')")
    index: dict[Any, int] = {}
    counts = np.zeros(1024, dtype=np.int64)
    with _ordered():
        mapped = dataset.map_batches(_CountWords, fn_constructor_kwargs={"level": level, "pattern": pattern},
                                     batch_format="pyarrow", batch_size=MAP_BATCH_ROWS,
                                     compute=_actor_pool(concurrency))
        with _blocks(mapped) as blocks:
            for batch in blocks:
                words = batch.column("word").to_pylist()
                ranks = np.fromiter((index.setdefault(w, len(index)) for w in words), dtype=np.int64,
                                    count=len(words))
                if len(index) > counts.shape[0]:
                    counts = np.concatenate([counts, np.zeros(max(counts.shape[0], len(index)), dtype=np.int64)])
                np.add.at(counts, ranks, batch.column("count").to_numpy())
    return list(index), counts[: len(index)].copy()


def train_from_word_counts(words: list, counts: np.ndarray, *, merges: int, level: str = "char",
                           pattern: str = "gpt2") -> Tokenizer:
    """Train BPE merges locally from word counts (first-appearance order), as the trainers would."""
    if level == "char":
        return train_bpe_from_word_counts(words, counts, merges)
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    return ByteBpeTrainer(merges=merges, pattern=pattern).train_from_counts(words, counts)


def _distinct_chars(batch: pa.Table) -> pa.Table:
    from engine.kernels.wordsplit import code_points

    distinct = np.unique(code_points("".join(batch.column("text").to_pylist())))
    return pa.table({"cp": pa.array(distinct, pa.uint32())})


def fit_tokenizer(train, kind: str, *, merges: int = 200, concurrency: int | None = None) -> Tokenizer:
    """Fit ``char``, ``word`` or ``bpe`` on a Dataset of training texts, as ``StreamingFit`` does locally."""
    from engine.tokenizers.char import CharTokenizer
    from engine.tokenizers.word import WordTokenizer

    if kind == "char":
        seen = np.zeros(0, dtype=np.uint32)
        with _ordered(), _blocks(train.map_batches(_distinct_chars, batch_format="pyarrow")) as blocks:
            for batch in blocks:
                seen = np.union1d(seen, batch.column("cp").to_numpy())
        return CharTokenizer.fit(seen.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass"))
    words, counts = count_words(train, level="char", concurrency=concurrency)
    if kind == "word":
        return WordTokenizer(sorted(words), unknown="<unk>") if words else WordTokenizer.fit([], unknown="<unk>")
    if kind == "bpe":
        return train_from_word_counts(words, counts, merges=merges)
    raise ConfigurationError(f"tokenizer kind {kind!r} is unknown (expected one of: {', '.join(TOKENIZER_KINDS)})")


# -- encoding and the store ---------------------------------------------------------------------


class _EncodeBatch:
    """Callable class: one tokenizer per actor, rebuilt from its JSON; kernels load once."""

    def __init__(self, tokenizer_json: dict):
        import engine.tokenizers  # noqa: F401  (registers the kinds)
        from engine.tokenizers.base import tokenizer_from_json

        self.tokenizer = tokenizer_from_json(tokenizer_json, "tokenizer sent to a Ray actor")
        self.tokenizer.encode_documents([""], ["warm-up"])

    def __call__(self, batch: pa.Table) -> pa.Table:
        ids = batch.column("id").to_pylist()
        texts = batch.column("text").to_pylist()
        # A document the manifest forgets (split "") is not encoded: the driver names it instead.
        keep = [i for i, split in enumerate(batch.column("split").to_pylist()) if split]
        values, kept_offsets = self.tokenizer.encode_documents([texts[i] for i in keep], [ids[i] for i in keep])
        lengths = np.zeros(len(ids), dtype=np.int64)
        lengths[keep] = np.diff(kept_offsets)
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tokens = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values, pa.uint32()))
        chars = pc.utf8_length(batch.column("text")).cast(pa.int64())
        return pa.table({"id": batch.column("id"), "tokens": tokens, "split": batch.column("split"), "chars": chars})


def encode(dataset, tokenizer: Tokenizer, *, concurrency: int | None = None):
    """Map ``id``/``text``/``split`` to ``id``/``tokens`` (large_list<uint32>)/``split`` (+ ``chars``)."""
    return dataset.map_batches(_EncodeBatch, fn_constructor_kwargs={"tokenizer_json": tokenizer.to_json()},
                               batch_format="pyarrow", batch_size=MAP_BATCH_ROWS, compute=_actor_pool(concurrency))


def write_store(encoded, path: str | os.PathLike, tokenizer: Tokenizer, *, check=None, context_length: int = 64,
                stride: int = 1, quiet: bool = True) -> dict:
    """Write the store from an encoded Dataset on the driver, in dataset order; returns per-partition tallies.

    ``check`` (a ``ManifestCheck``) sees every id and runs before the store is committed.
    """
    from engine import pipeline

    tallies = {p: pipeline.PartitionTally() for p in PARTITIONS}
    pending: dict[Partition, list] = {p: [] for p in PARTITIONS}

    def flush(writer, part):
        rows, pending[part] = pending[part], []
        ids = [r[0] for r in rows]
        lengths = np.fromiter((r[1].shape[0] for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.concatenate([r[1] for r in rows]) if rows else np.empty(0, np.uint32)
        writer.write_chunk(part, ids, values, offsets)
        tally = pipeline.window_counts(offsets, context_length, stride)
        tally.update(documents=len(rows), characters=sum(r[2] for r in rows), tokens=int(offsets[-1]))
        tallies[part].add(tally)

    writer_options = {"row_group_size": pipeline.STORE_ROW_GROUP_ROWS, "max_rows_per_file": pipeline.STORE_FILE_ROWS}
    with _ordered(), TokenStore.writer(path, tokenizer, **writer_options) as writer, \
            Progress("writing the store from Ray", quiet=quiet) as bar:
        chars = {p: 0 for p in PARTITIONS}
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
                    pending[part].append((doc_id, values[offsets[i]:offsets[i + 1]], n_chars))
                    chars[part] += n_chars
                    # The local path's chunk rule, so row groups (and file bytes) match it.
                    if len(pending[part]) >= pipeline.ENCODE_CHUNK_DOCUMENTS or chars[part] >= pipeline.ENCODE_CHUNK_CHARS:
                        flush(writer, part)
                        chars[part] = 0
                bar.update(batch.num_rows)
        for part in PARTITIONS:
            if pending[part]:
                flush(writer, part)
        if check is not None:
            check.finish()
    return tallies


def _run(corpus_path, splits_path, out_dir, *, tokenizer, merges, hash_split, context_length, stride, threads, quiet):
    """The Ray steps of ``prepare_on_ray``: fit (or load), encode, write. Returns (tokenizer, tallies, actors)."""
    from engine import pipeline

    manifest = SplitManifest.from_json(splits_path) if splits_path is not None else SplitManifest.by_hash(hash_split)
    check = ManifestCheck(manifest, str(corpus_path))
    concurrency = _concurrency(threads)
    with _ordered():
        docs = assign_splits(read_corpus(corpus_path), manifest)
        if tokenizer in TOKENIZER_KINDS:
            with Progress(f"fitting {tokenizer} on train (Ray)", unit="steps", quiet=quiet):
                tok = fit_tokenizer(docs.map_batches(_only_train, batch_format="pyarrow"), tokenizer,
                                    merges=merges, concurrency=concurrency)
        else:
            tok = load_tokenizer(tokenizer)
        tallies = write_store(encode(docs, tok, concurrency=concurrency), Path(out_dir) / "store", tok,
                              check=check, context_length=context_length, stride=stride, quiet=quiet)
    return tok, tallies, concurrency


def prepare_on_ray(
    corpus_path: str | os.PathLike | None = None,
    splits_path: str | os.PathLike | None = None,
    out_dir: str | os.PathLike = "out",
    *,
    tokenizer: str = "bpe",
    merges: int = 200,
    context_length: int = 64,
    stride: int = 1,
    train_fraction: float = 0.9,
    hash_split: dict[str, float] | None = None,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    text_column: str = "text",
    id_column: str | None = None,
    threads: int | None = None,
    quiet: bool = False,
    ray_address: str | None = None,
):
    """``engine.pipeline.prepare`` with reading, counting and encoding on Ray Data; same outputs.

    Joins the cluster at ``ray_address`` (``"auto"``: the one ``ray start`` runs here), or starts a
    local Ray instance (shut down again at the end). ``threads`` caps the actors per step (default:
    the cluster's CPUs). A continuous ``.txt`` file is one document per partition: it runs locally.
    """
    from engine import pipeline

    corpus_path, splits_path, continuous = pipeline.resolve_inputs(
        corpus_path, splits_path, hash_split=hash_split, tokenizer=tokenizer, merges=merges,
        context_length=context_length, stride=stride)
    if continuous:
        return pipeline.prepare(corpus_path, None, out_dir, tokenizer=tokenizer, merges=merges,
                                context_length=context_length, stride=stride, train_fraction=train_fraction,
                                on_invalid_utf8=on_invalid_utf8, text_column=text_column, id_column=id_column,
                                threads=threads, quiet=quiet)
    if on_invalid_utf8 != "error" or skip_bad_lines:
        raise ConfigurationError("--on-invalid-utf8 and --skip-bad-lines apply to --executor local only")
    if text_column != "text" or id_column is not None:
        raise ConfigurationError("--text-column and --id-column apply to --executor local only")
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=ray_address, include_dashboard=False, logging_level="ERROR",
                 log_to_driver=False, configure_logging=False)
    failure = None
    try:
        tok, tallies, concurrency = _run(corpus_path, splits_path, out_dir, tokenizer=tokenizer, merges=merges,
                                         hash_split=hash_split, context_length=context_length, stride=stride,
                                         threads=threads, quiet=quiet)
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
    return pipeline.finish_report(Path(out_dir), corpus_path, splits_path, tok, tallies,
                                  context_length=context_length, stride=stride, threads=concurrency)
