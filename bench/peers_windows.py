"""Windows, epochs and batches beside what people write today, timed in the same run.

Workloads (Tiny Shakespeare as ONE document: id = UTF-8 byte + 2, wrapped in BOS/EOS):
- sequential epoch: every T=64, stride-1 window gathered into preallocated inputs/targets with
  ``epoch.batch(0, out=...)`` (batch size = all windows) vs ``np.copyto`` of the same output size;
- shuffled batches: ``epoch.batch(k, out=...)`` with B=32, T=64 vs numpy fancy indexing
  ``data[starts[:, None] + arange(T)]`` (inputs and targets) and the classic
  ``torch.stack([data[i:i+T] for i in ix])`` loop (nanoGPT's ``get_batch``; skipped without torch);
- shuffling descriptors: SPEC's Fisher–Yates/SplitMix64 kernel on int64 descriptors vs
  ``numpy.random.Generator.permutation`` and ``torch.randperm``;
- counting windows and enumerating ``(document_index, start)`` for 10 million documents
  (lengths 1..256, T=64, S=64) vs the same in vectorised numpy.

``rows(quick)`` returns ``{"benchmark", "engine_s", "peer", "peer_s", "ratio", "target"}`` rows with
ratio = peer time / engine time; bench_windows.py runs the same pairs under pytest-benchmark.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.corpus import Partition
from engine.kernels import shuffle as shuffle_kernels
from engine.store import EncodedDocument
from engine.windows import CausalWindowConfig, enumerate_windows
from timing import best_of, shakespeare_path  # noqa: E402


T = 64
B = 32

try:  # optional peer
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None


def shakespeare_ids() -> np.ndarray:
    raw = np.frombuffer(shakespeare_path().read_bytes(), dtype=np.uint8)
    ids = np.empty(raw.shape[0] + 2, dtype=np.uint32)
    ids[0], ids[-1] = 0, 1
    ids[1:-1] = raw
    ids[1:-1] += 2
    return ids


def shakespeare_epoch(ids: np.ndarray, order: BatchOrder, batch_size: int) -> MiniBatchEpoch:
    document = EncodedDocument("tinyshakespeare", Partition.TRAIN, ids)
    return MiniBatchEpoch.build([document], Partition.TRAIN, windows=CausalWindowConfig(T),
                                batches=MiniBatchConfig(batch_size, order))


# -- workloads: each returns (engine callable, {peer name: peer callable}) ----------------------


def sequential_epoch_pair(ids: np.ndarray):
    window_count = ids.shape[0] - T
    epoch = shakespeare_epoch(ids, BatchOrder.sequential(), window_count)
    out = (np.empty((window_count, T), np.uint32), np.empty((window_count, T), np.uint32))
    source = np.ones((2 * window_count, T), np.uint32)
    target = np.empty_like(source)
    epoch.batch(0, out)  # compile and touch the pages before timing
    np.copyto(target, source)
    return (lambda: epoch.batch(0, out)), {"np.copyto (same output bytes)": lambda: np.copyto(target, source)}


def shuffled_batches_pair(ids: np.ndarray, batches: int):
    epoch = shakespeare_epoch(ids, BatchOrder.shuffled(1), B)
    batches = min(batches, len(epoch))
    out = (np.empty((B, T), np.uint32), np.empty((B, T), np.uint32))
    starts = [epoch.positions[k * B : (k + 1) * B] for k in range(batches)]  # one document: start = position
    columns = np.arange(T)

    def engine_batches():
        for k in range(batches):
            epoch.batch(k, out)

    def numpy_fancy():
        for s in starts:
            index = s[:, None] + columns
            ids[index], ids[index + 1]

    peers = {"numpy fancy indexing": numpy_fancy}
    if torch is not None:
        data = torch.from_numpy(ids.astype(np.int64))
        starts_t = [torch.from_numpy(s.copy()) for s in starts]

        def torch_stack():
            for ix in starts_t:
                torch.stack([data[i : i + T] for i in ix]), torch.stack([data[i + 1 : i + 1 + T] for i in ix])

        peers["torch.stack loop"] = torch_stack
    engine_batches()
    return engine_batches, peers


def shuffle_pair(count: int):
    descriptors = np.arange(count, dtype=np.int64)
    generator = np.random.default_rng(0)

    def engine_shuffle():
        shuffle_kernels.fisher_yates_shuffle(descriptors, np.uint64(7))

    peers = {"numpy Generator.permutation": lambda: generator.permutation(count)}
    if torch is not None:
        peers["torch.randperm"] = lambda: torch.randperm(count)
    shuffle_kernels.fisher_yates_shuffle(descriptors[:10].copy(), np.uint64(7))
    return engine_shuffle, peers


def many_documents(count: int) -> np.ndarray:
    lengths = np.random.default_rng(0).integers(1, 257, size=count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def numpy_enumerate(offsets: np.ndarray, context_length: int, stride: int):
    lengths = np.diff(offsets)
    counts = np.where(lengths > context_length, (lengths - context_length - 1) // stride + 1, 0)
    document_index = np.repeat(np.arange(counts.shape[0]), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    start = (np.arange(document_index.shape[0]) - first) * stride
    return document_index, start


def enumerate_pair(documents: int):
    offsets = many_documents(documents)
    config = CausalWindowConfig(T, 64)
    enumerate_windows(offsets[:10], config)
    return (lambda: enumerate_windows(offsets, config)), {"numpy repeat/cumsum": lambda: numpy_enumerate(offsets, T, 64)}


# -- the table -----------------------------------------------------------------------------


def rows(quick: bool) -> list[dict]:
    ids = shakespeare_ids()
    rounds = 2 if quick else 5
    cases = [
        (f"gather sequential epoch (T={T}, {ids.shape[0] - T} windows)", sequential_epoch_pair(ids),
         {"np.copyto (same output bytes)": ">= 0.7x"}),
        (f"gather shuffled batches (B={B}, T={T}, {200 if quick else 5000} batches)",
         shuffled_batches_pair(ids, 200 if quick else 5000),
         {"numpy fancy indexing": ">= 4x", "torch.stack loop": ">= 100x"}),
        (f"shuffle {10**7 if quick else 10**8:,} descriptors", shuffle_pair(10**7 if quick else 10**8),
         {"numpy Generator.permutation": ">= 2x", "torch.randperm": ">= 1x"}),
        (f"count + enumerate windows of {10**6 if quick else 10**7:,} documents",
         enumerate_pair(10**6 if quick else 10**7), {"numpy repeat/cumsum": "< 1 s at 10M documents"}),
    ]
    out = []
    for name, (engine_fn, peers), targets in cases:
        engine_s = best_of(engine_fn, rounds)
        for peer, peer_fn in peers.items():
            peer_s = best_of(peer_fn, rounds)
            out.append({"benchmark": name, "engine_s": engine_s, "peer": peer, "peer_s": peer_s,
                        "ratio": peer_s / engine_s, "target": targets.get(peer, "")})
    return out


if __name__ == "__main__":  # python bench/peers_windows.py [--quick]
    import sys

    for row in rows("--quick" in sys.argv):
        print(f"{row['benchmark']:<58} engine {row['engine_s'] * 1e3:9.2f} ms  {row['peer']:<30} "
              f"{row['peer_s'] * 1e3:9.2f} ms  {row['ratio']:6.2f}x  (target {row['target']})")
