"""The PyTorch input path beside the direct call and nanoGPT's loop (see peers_torch.py).

Run: ``pytest bench/bench_torch.py --benchmark-only``. Each engine benchmark times its peers in
turns in the same run and records them in extra_info (``peer_s`` and ``ratio`` = peer time /
engine time, with the row's target). Workloads: windows at B=32, T=64 / B=16, T=1024 /
B=32, T=2048 and packed rows at B=8, L=4096; the loader is timed in steady state (worker
start-up excluded, see ``_loader_pass``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")

from peers_torch import _direct_pass, _interleaved, _loader_pass, cases, pairs  # noqa: E402

ROUNDS = 3
QUICK_CASES = {label: (source, batches) for label, source, batches in cases(quick=True)}
TARGETS = {0: 0.8, 2: None}  # ratio direct / loader: keep 80 % with no workers; two: information (WORKERS_INFO)


@pytest.mark.benchmark(group="torch-loader")
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("label", list(QUICK_CASES))
def test_loader_engine(benchmark, label, workers):
    source, batches = QUICK_CASES[label]
    run = _loader_pass(source, batches, workers)
    run()
    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    engine_s, direct_s = _interleaved(run, _direct_pass(source, batches), ROUNDS)
    benchmark.extra_info["direct source.batch(k, out=...)"] = {
        "peer_s": direct_s, "ratio": direct_s / engine_s, "at_least": TARGETS[workers]}
    engine_s, plain_s = _interleaved(run, _loader_pass(source, batches, workers, plain=True), ROUNDS)
    benchmark.extra_info[f"plain DataLoader, num_workers={workers}"] = {"peer_s": plain_s, "ratio": plain_s / engine_s}
    if workers == 0 and label == "B=32, T=64":
        _, _, _, nanogpt, _ = pairs(32, 64, batches)
        engine_s, nanogpt_s = _interleaved(run, nanogpt, ROUNDS)
        benchmark.extra_info["nanoGPT torch.stack"] = {"peer_s": nanogpt_s, "ratio": nanogpt_s / engine_s,
                                                       "at_least": 50}


@pytest.mark.benchmark(group="torch-loader")
@pytest.mark.parametrize("label", list(QUICK_CASES))
def test_direct_batches(benchmark, label):
    source, batches = QUICK_CASES[label]
    benchmark.pedantic(_direct_pass(source, batches), rounds=ROUNDS, iterations=1)
