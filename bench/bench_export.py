"""engine export against the peers of bench/peers_export.py: Megatron's IndexedDatasetBuilder fed the
same documents, and one write of the same bytes.

Run: ``pytest bench/bench_export.py --benchmark-only``. The store is the stdlib corpus prepared
with the byte-level ``tokenizer.json`` of peers_export (quick size); each engine benchmark records
the peer's seconds and the ratio (peer time / engine time) in extra_info.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from peers_export import bench_inputs
from timing import best_of

ROUNDS = 3


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from engine.pipeline import prepare
    from engine.store import TokenStore

    corpus, splits, tokenizer = bench_inputs(quick=True)
    out = tmp_path_factory.mktemp("export-bench")
    result = prepare(corpus, splits, out / "prepared", tokenizer=str(tokenizer), threads=2, quiet=True)
    return TokenStore.open(result.store_path)


def builder_write(store, prefix: str) -> None:
    """What Megatron's builder takes to write the same documents (without BOS), given the ids."""
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder

    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=DType.optimal_dtype(store.tokenizer().vocab_size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for doc in store.documents("train"):
            builder.add_document(doc.tokens[1:], [len(doc.tokens) - 1])
    builder.finalize(prefix + ".idx")


@pytest.mark.benchmark(group="export-megatron")
def test_export_megatron(benchmark, store, tmp_path):
    pytest.importorskip("megatron.core.datasets.indexed_dataset", reason="needs the bench extra (pip install -e '.[bench]')")
    from engine.export import export_megatron

    benchmark.pedantic(export_megatron, args=(store, "train", tmp_path / "engine"), kwargs={"bos": False},
                       rounds=ROUNDS, iterations=1, warmup_rounds=1)
    peer_s = best_of(lambda: builder_write(store, str(tmp_path / "peer")), ROUNDS)
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"engine{ext}").read_bytes() == (tmp_path / f"peer{ext}").read_bytes()
    engine_s = benchmark.stats.stats.min
    benchmark.extra_info.update({"peer": "IndexedDatasetBuilder.add_document per document", "peer_s": peer_s,
                                 "ratio": peer_s / engine_s, "tokens": int(store.num_tokens("train"))})


@pytest.mark.benchmark(group="export-flat")
def test_export_flat(benchmark, store, tmp_path):
    from engine.export import export_flat

    benchmark.pedantic(export_flat, args=(store, "train", tmp_path / "train.bin"), rounds=ROUNDS, iterations=1,
                       warmup_rounds=1)
    values, _ = store.arrays("train")
    data = values.astype(np.uint16).tobytes()
    peer_s = best_of(lambda: (tmp_path / "plain.bin").write_bytes(data), ROUNDS)
    engine_s = benchmark.stats.stats.min
    benchmark.extra_info.update({"peer": "one write of the same bytes", "peer_s": peer_s, "ratio": peer_s / engine_s})
