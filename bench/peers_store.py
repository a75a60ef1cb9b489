"""Token store beside plain pyarrow: writing and opening the stdlib corpus.

engine's writer does more than ``pq.write_table``: it validates offsets, BOS/EOS and id
uniqueness, streams chunks, hashes and fsyncs every file, and renames the store into place under
a lock. Opening checks sizes, row counts and footers before handing out zero-copy views. The
peer is pyarrow writing and reading the same table per split, with nothing checked.

``rows(quick)`` is what ``engine bench`` prints; bench_store.py runs the same pair under
pytest-benchmark.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.corpus import Corpus, Partition, SplitManifest
from engine.store import TokenStore
# id = UTF-8 byte + 2: the cheapest tokenizer there is, so the store dominates the timing.
from plain_python import ByteTokenizer as BenchBytes
from timing import best_of, row

BENCH_DIR = Path(__file__).resolve().parent
CHUNK_DOCUMENTS = 4096


def stdlib_corpus_paths(limit_mb: float | None = None) -> tuple[Path, Path]:
    """(corpus.jsonl, splits.json): $ENGINE_STDLIB_CORPUS, else generated once under bench/.cache/."""
    env = os.environ.get("ENGINE_STDLIB_CORPUS")
    if env and limit_mb is None:
        return Path(env) / "corpus.jsonl", Path(env) / "splits.json"
    out = BENCH_DIR / ".cache" / ("stdlib" if limit_mb is None else f"stdlib-{limit_mb:g}mb")
    if not (out / "corpus.jsonl").exists() or not (out / "splits.json").exists():
        script = BENCH_DIR.parent / "scripts" / "make_stdlib_corpus.py"
        spec = importlib.util.spec_from_file_location("make_stdlib_corpus", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.make_stdlib_corpus(out, limit_mb)
    return out / "corpus.jsonl", out / "splits.json"


def encode_partitions(corpus_path: Path, splits_path: Path) -> dict[Partition, tuple[list[str], np.ndarray, np.ndarray]]:
    """{partition: (ids, values uint32, offsets int64)} with every document wrapped in BOS/EOS."""
    tok = BenchBytes()
    parts = SplitManifest.from_json(splits_path).partition(Corpus.from_jsonl(corpus_path))
    encoded = {}
    for part, docs in parts:
        values, offsets = tok.encode_documents([d.text for d in docs])
        encoded[part] = ([d.id for d in docs], values, offsets)
    return encoded


def engine_write(path: Path, encoded) -> None:
    with TokenStore.writer(path, BenchBytes()) as writer:
        for part, (ids, values, offsets) in encoded.items():
            for lo in range(0, len(ids), CHUNK_DOCUMENTS):
                hi = min(lo + CHUNK_DOCUMENTS, len(ids))
                a, b = offsets[lo], offsets[hi]
                writer.write_chunk(part, ids[lo:hi], values[a:b], offsets[lo : hi + 1] - a)
            if not ids:
                writer.write_chunk(part, [], values[:0], offsets[:1])


def arrow_tables(encoded) -> dict[Partition, pa.Table]:
    return {
        part: pa.table({"id": pa.array(ids, pa.string()),
                        "tokens": pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))})
        for part, (ids, values, offsets) in encoded.items()
    }


def peer_write(path: Path, tables: dict[Partition, pa.Table]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for part, table in tables.items():
        pq.write_table(table, path / f"{part.value}.parquet")


def engine_read(path: Path) -> int:
    store = TokenStore.open(path)
    return sum(int(store.arrays(p)[0].shape[0]) for p in store.partitions)


def peer_read(path: Path) -> int:
    total = 0
    for part in Partition:
        column = pq.read_table(path / f"{part.value}.parquet").column("tokens").combine_chunks()
        total += int(column.values.to_numpy(zero_copy_only=True).shape[0])
    return total


def same_tokens(store_path: Path, peer_path: Path) -> bool:
    """The store and the Parquet files hold the same token values, partition by partition."""
    store = TokenStore.open(store_path)
    for part in store.partitions:
        column = pq.read_table(peer_path / f"{part.value}.parquet").column("tokens").combine_chunks()
        if not np.array_equal(store.arrays(part)[0], column.values.to_numpy()):
            return False
    return True


def rows(quick: bool) -> list[dict]:
    corpus_path, splits_path = stdlib_corpus_paths(limit_mb=4 if quick else None)
    encoded = encode_partitions(corpus_path, splits_path)
    tables = arrow_tables(encoded)
    rounds = 2 if quick else 5
    tokens = sum(v.shape[0] for _, v, _ in encoded.values())
    scratch = Path(tempfile.mkdtemp(prefix="engine-bench-store-"))
    try:
        store_path, peer_path = scratch / "store", scratch / "peer"
        engine_write(store_path, encoded)
        peer_write(peer_path, tables)
        if not same_tokens(store_path, peer_path):
            raise RuntimeError("the token store and the pyarrow files hold different tokens")
        write_engine = best_of(lambda: engine_write(store_path, encoded), rounds)
        write_peer = best_of(lambda: peer_write(peer_path, tables), rounds)
        read_engine = best_of(lambda: engine_read(store_path), rounds)
        read_peer = best_of(lambda: peer_read(peer_path), rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    label = f"stdlib corpus, {tokens / 1e6:.1f}M tokens"
    return [
        row(f"store write ({label})", write_engine, "pyarrow pq.write_table", write_peer, at_least=0.5,
            note="engine also hashes, fsyncs, renames"),
        row(f"store open + arrays ({label})", read_engine, "pyarrow pq.read_table", read_peer, at_least=0.8),
    ]


if __name__ == "__main__":
    for row in rows(quick=True):
        print(row)
