"""Token store vs plain pyarrow on the stdlib corpus: write a store, open it and take the arrays.

Run: ``pytest bench/bench_store.py --benchmark-only``. Each engine benchmark also times the peer
in the same run and records ``peer_s`` and ``ratio`` (peer time / engine time) in extra_info;
the peer benchmarks appear beside them in the same group.
"""

from __future__ import annotations

import pytest

from peers_store import arrow_tables, best_of, encode_partitions, engine_read, engine_write, peer_read, peer_write

ROUNDS = 3


@pytest.fixture(scope="module")
def encoded(stdlib_corpus):
    return encode_partitions(*stdlib_corpus)


@pytest.fixture(scope="module")
def written(encoded, tmp_path_factory):
    root = tmp_path_factory.mktemp("store-bench")
    engine_write(root / "store", encoded)
    peer_write(root / "peer", arrow_tables(encoded))
    return root


def record(benchmark, peer_name: str, peer_s: float, tokens: int) -> None:
    engine_s = benchmark.stats.stats.min
    benchmark.extra_info.update(
        {"peer": peer_name, "peer_s": peer_s, "ratio": peer_s / engine_s, "tokens": tokens}
    )


@pytest.mark.benchmark(group="store-write")
def test_write_engine(benchmark, encoded, tmp_path):
    benchmark.pedantic(engine_write, args=(tmp_path / "store", encoded), rounds=ROUNDS, iterations=1)
    tables = arrow_tables(encoded)
    peer_s = best_of(lambda: peer_write(tmp_path / "peer", tables), ROUNDS)
    record(benchmark, "pyarrow pq.write_table", peer_s, sum(v.shape[0] for _, v, _ in encoded.values()))


@pytest.mark.benchmark(group="store-write")
def test_write_pyarrow(benchmark, encoded, tmp_path):
    tables = arrow_tables(encoded)
    benchmark.pedantic(peer_write, args=(tmp_path / "peer", tables), rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="store-read")
def test_open_arrays_engine(benchmark, written):
    tokens = benchmark.pedantic(engine_read, args=(written / "store",), rounds=ROUNDS, iterations=1)
    assert tokens == peer_read(written / "peer")
    record(benchmark, "pyarrow pq.read_table", best_of(lambda: peer_read(written / "peer"), ROUNDS), tokens)


@pytest.mark.benchmark(group="store-read")
def test_open_arrays_pyarrow(benchmark, written):
    benchmark.pedantic(peer_read, args=(written / "peer",), rounds=ROUNDS, iterations=1)
