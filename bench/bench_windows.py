"""Windows and batches beside their peers: gathering, shuffling, counting (see peers_windows.py).

Run: ``pytest bench/bench_windows.py --benchmark-only``. Each engine benchmark times its peers in
the same run and records them in extra_info (``peer_s`` and ``ratio`` = peer time / engine time
per peer); the peer benchmarks appear beside them in the same group.
Set ENGINE_BENCH_QUICK=1 for the smaller sizes (10^7 descriptors, 10^6 documents).
"""

from __future__ import annotations

import os

import pytest

from peers_windows import enumerate_pair, sequential_epoch_pair, shakespeare_ids, shuffle_pair, shuffled_batches_pair
from timing import best_of

QUICK = os.environ.get("ENGINE_BENCH_QUICK") == "1"
ROUNDS = 3
SHUFFLE_COUNT = 10**7 if QUICK else 10**8
DOCUMENTS = 10**6 if QUICK else 10**7
BATCHES = 1000


@pytest.fixture(scope="module")
def ids():
    return shakespeare_ids()


def compare(benchmark, engine_fn, peers: dict, rounds: int = ROUNDS) -> None:
    benchmark.pedantic(engine_fn, rounds=rounds, iterations=1)
    engine_s = benchmark.stats.stats.min
    for name, peer_fn in peers.items():
        peer_s = best_of(peer_fn, rounds)
        benchmark.extra_info[name] = {"peer_s": peer_s, "ratio": peer_s / engine_s}


@pytest.mark.benchmark(group="windows-gather-sequential")
def test_gather_sequential_epoch_engine(benchmark, ids):
    engine_fn, peers = sequential_epoch_pair(ids)
    compare(benchmark, engine_fn, peers)


@pytest.mark.benchmark(group="windows-gather-sequential")
def test_gather_sequential_epoch_copyto(benchmark, ids):
    _, peers = sequential_epoch_pair(ids)
    benchmark.pedantic(peers["np.copyto (same output bytes)"], rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="windows-gather-shuffled")
def test_gather_shuffled_batches_engine(benchmark, ids):
    engine_fn, peers = shuffled_batches_pair(ids, BATCHES)
    compare(benchmark, engine_fn, peers)


@pytest.mark.benchmark(group="windows-gather-shuffled")
def test_gather_shuffled_batches_numpy(benchmark, ids):
    _, peers = shuffled_batches_pair(ids, BATCHES)
    benchmark.pedantic(peers["numpy fancy indexing"], rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="windows-gather-shuffled")
def test_gather_shuffled_batches_torch(benchmark, ids):
    pytest.importorskip("torch")
    _, peers = shuffled_batches_pair(ids, BATCHES)
    benchmark.pedantic(peers["torch.stack loop"], rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="windows-shuffle")
def test_shuffle_engine(benchmark):
    engine_fn, peers = shuffle_pair(SHUFFLE_COUNT)
    compare(benchmark, engine_fn, peers, rounds=2)


@pytest.mark.benchmark(group="windows-shuffle")
def test_shuffle_numpy_in_place(benchmark):
    _, peers = shuffle_pair(SHUFFLE_COUNT)
    benchmark.pedantic(peers["numpy Generator.shuffle (in place)"], rounds=2, iterations=1)


@pytest.mark.benchmark(group="windows-shuffle")
def test_shuffle_torch_randperm(benchmark):
    pytest.importorskip("torch")
    _, peers = shuffle_pair(SHUFFLE_COUNT)
    benchmark.pedantic(peers["torch.randperm(out=)"], rounds=2, iterations=1)


@pytest.mark.benchmark(group="windows-enumerate")
def test_enumerate_engine(benchmark):
    engine_fn, peers = enumerate_pair(DOCUMENTS)
    compare(benchmark, engine_fn, peers)


@pytest.mark.benchmark(group="windows-enumerate")
def test_enumerate_numpy(benchmark):
    _, peers = enumerate_pair(DOCUMENTS)
    benchmark.pedantic(peers["numpy repeat/cumsum"], rounds=ROUNDS, iterations=1)
