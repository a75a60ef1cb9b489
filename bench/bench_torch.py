"""The PyTorch input path beside the direct call and nanoGPT's loop (see peers_torch.py).

Run: ``pytest bench/bench_torch.py --benchmark-only``. The engine benchmark times its peers in the
same run and records them in extra_info (``peer_s`` and ``ratio`` = peer time / engine time).
"""

from __future__ import annotations

import pytest

from peers_torch import _loader_pass, pairs
from timing import best_of

ROUNDS = 3
BATCHES = 2000


@pytest.mark.benchmark(group="torch-loader")
@pytest.mark.parametrize("workers", [0, 2])
def test_loader_engine(benchmark, workers):
    epoch, batches, direct, nanogpt, _ = pairs(32, 64, BATCHES)
    run = _loader_pass(epoch, batches, workers)
    run()
    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    engine_s = benchmark.stats.stats.min
    peers = {"direct epoch.batch(k, out=...)": direct, f"plain DataLoader, num_workers={workers}":
             _loader_pass(epoch, batches, workers, plain=True)}
    if workers == 0:
        peers["nanoGPT torch.stack"] = nanogpt
    for name, peer_fn in peers.items():
        peer_s = best_of(peer_fn, ROUNDS)
        benchmark.extra_info[name] = {"peer_s": peer_s, "ratio": peer_s / engine_s}


@pytest.mark.benchmark(group="torch-loader")
def test_direct_batches(benchmark):
    _, _, direct, _, _ = pairs(32, 64, BATCHES)
    benchmark.pedantic(direct, rounds=ROUNDS, iterations=1)
