"""Windows, epochs and batches beside what people write today, timed in the same run.

Workloads (Tiny Shakespeare as ONE document: id = UTF-8 byte + 2, wrapped in BOS/EOS):
- sequential epoch: every T=64, stride-1 window gathered into preallocated inputs/targets with
  ``epoch.batch(0, out=...)`` (batch size = all windows) vs ``np.copyto`` of the same output size;
- shuffled batches: ``epoch.batch(k, out=...)`` with B=32, T=64 vs numpy fancy indexing
  ``np.take(data, starts[:, None] + arange(T), out=...)`` into the same preallocated inputs and
  targets, and the classic ``torch.stack([data[i:i+T] for i in ix])`` loop (nanoGPT's
  ``get_batch``; skipped without torch); both give engine's first batch, checked before timing;
- shuffling descriptors: the Fisher–Yates/SplitMix64 kernel (engine.kernels.shuffle) on int64 descriptors in place vs
  ``numpy.random.Generator.shuffle`` in place and ``torch.randperm(out=...)`` (each a permutation
  of the descriptors, checked before timing);
- counting windows and enumerating ``(document_index, start)`` for 10 million documents
  (lengths 1..256, T=64, S=64) vs the same in vectorised numpy (same arrays, checked).

``rows(quick)`` returns rows built by ``timing.row`` with ratio = peer time / engine time;
bench_windows.py runs the same pairs under pytest-benchmark.
"""

from __future__ import annotations

import numpy as np

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.corpus import Partition
from engine.kernels import shuffle as shuffle_kernels
from engine.store import EncodedDocument
from engine.windows import CausalWindowConfig, enumerate_windows
from timing import best_of_interleaved, row, shakespeare_path


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
    numpy_out = (np.empty((B, T), np.uint32), np.empty((B, T), np.uint32))

    def engine_batches():
        for k in range(batches):
            epoch.batch(k, out)

    def numpy_batch(s):
        index = s[:, None] + columns
        np.take(ids, index, out=numpy_out[0])
        index += 1
        np.take(ids, index, out=numpy_out[1])

    def numpy_fancy():
        for s in starts:
            numpy_batch(s)

    epoch.batch(0, out)
    numpy_batch(starts[0])
    if not (np.array_equal(out[0], numpy_out[0]) and np.array_equal(out[1], numpy_out[1])):
        raise RuntimeError("numpy's batch differs from engine's")
    peers = {"numpy fancy indexing": numpy_fancy}
    if torch is not None:
        data = torch.from_numpy(ids.astype(np.int64))
        starts_t = [torch.from_numpy(s.copy()) for s in starts]

        def torch_batch(ix):
            return torch.stack([data[i : i + T] for i in ix]), torch.stack([data[i + 1 : i + 1 + T] for i in ix])

        def torch_stack():
            for ix in starts_t:
                torch_batch(ix)

        if not all(np.array_equal(a.numpy(), b) for a, b in zip(torch_batch(starts_t[0]), out)):
            raise RuntimeError("the torch.stack batch differs from engine's")
        peers["torch.stack loop"] = torch_stack
    engine_batches()
    return engine_batches, peers


def shuffle_pair(count: int):
    descriptors = np.arange(count, dtype=np.int64)
    numpy_descriptors = descriptors.copy()
    generator = np.random.default_rng(0)

    def engine_shuffle():
        shuffle_kernels.fisher_yates_shuffle(descriptors, np.uint64(7))

    peers = {"numpy Generator.shuffle (in place)": lambda: generator.shuffle(numpy_descriptors)}
    if torch is not None:
        permutation = torch.empty(count, dtype=torch.int64)
        peers["torch.randperm(out=)"] = lambda: torch.randperm(count, out=permutation)
    engine_shuffle()
    for shuffle in peers.values():
        shuffle()
    for shuffled in [descriptors, numpy_descriptors] + ([permutation.numpy()] if torch is not None else []):
        seen = np.zeros(count, np.bool_)
        seen[shuffled] = True
        if shuffled.shape[0] != count or not seen.all():
            raise RuntimeError("a shuffle lost or repeated descriptors")
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
    pairs = zip(enumerate_windows(offsets, config), numpy_enumerate(offsets, T, 64))
    if not all(np.array_equal(a, b) for a, b in pairs):
        raise RuntimeError("numpy's windows differ from engine's")
    return (lambda: enumerate_windows(offsets, config)), {"numpy repeat/cumsum": lambda: numpy_enumerate(offsets, T, 64)}


# -- the table -----------------------------------------------------------------------------


def rows(quick: bool) -> list[dict]:
    ids = shakespeare_ids()
    rounds = 2 if quick else 5
    cases = [
        (f"gather sequential epoch (T={T}, {ids.shape[0] - T} windows)", sequential_epoch_pair(ids),
         {"np.copyto (same output bytes)": {"at_least": 0.7}}),
        (f"gather shuffled batches (B={B}, T={T}, {200 if quick else 5000} batches)",
         shuffled_batches_pair(ids, 200 if quick else 5000),
         {"numpy fancy indexing": {"at_least": 6}, "torch.stack loop": {"at_least": 100}}),
        (f"shuffle {10**7 if quick else 10**8:,} descriptors", shuffle_pair(10**7 if quick else 10**8),
         {"numpy Generator.shuffle (in place)": {"at_least": 2}, "torch.randperm(out=)": {"at_least": 1}}),
        (f"count + enumerate windows of {10**6 if quick else 10**7:,} documents",
         enumerate_pair(10**6 if quick else 10**7),
         {"numpy repeat/cumsum": {"engine_under_s": 1.0, "note": "goal at 10M documents"}}),
    ]
    out = []
    for name, (engine_fn, peers), targets in cases:
        for peer, peer_fn in peers.items():  # in turns: both see the same moments of a shared machine
            engine_s, peer_s = best_of_interleaved(engine_fn, peer_fn, rounds)
            out.append(row(name, engine_s, peer, peer_s, **targets.get(peer, {})))
    return out


if __name__ == "__main__":  # python bench/peers_windows.py [--quick]
    import sys

    for r in rows("--quick" in sys.argv):
        print(f"{r['benchmark']:<58} engine {r['engine_s'] * 1e3:9.2f} ms  {r['peer']:<30} "
              f"{r['peer_s'] * 1e3:9.2f} ms  {r['ratio']:6.2f}x  (target {r['target']})")
