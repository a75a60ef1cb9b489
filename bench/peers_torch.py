"""The PyTorch input path beside calling the epoch directly and beside nanoGPT's batch loop.

Workload: Tiny Shakespeare as ONE document (id = UTF-8 byte + 2, in BOS/EOS), a shuffled epoch of
windows with stride S = T, int64 batches (what ``nn.Embedding`` takes), ``N`` batches in epoch order:
- engine: ``TokenDataset(epoch).loader(num_workers=W)`` for W = 0 and 2 (worker start-up
  included: one loader per timed run), and beside it a plain ``DataLoader(ds, batch_size=None,
  num_workers=W)`` over the same dataset (same batches, one inter-process item per batch);
- direct: ``epoch.batch(k, out=(int64 inputs, int64 targets))`` + ``torch.from_numpy``, one process;
- nanoGPT: ``torch.stack([data[i:i+T] for i in ix])`` for inputs and targets, ``ix`` the same
  starts (``data`` an int64 tensor, as ``get_batch`` builds it per step);
- HF: a ``datasets.Dataset`` of the same windows (``input_ids``, ``labels`` columns, torch format)
  read by ``DataLoader(batch_size=B, sampler=<the epoch's order>)`` with its default collate.
Every peer's batches are checked equal to the loader's before anything is timed.

Ratio = peer time / engine time, so ``>= 0.8x`` against the direct call means the loader keeps at
least 80 % of its throughput.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.corpus import Partition
from engine.store import EncodedDocument
from engine.torch import TokenDataset
from engine.windows import CausalWindowConfig
from peers_windows import shakespeare_ids
from timing import best_of


def _loader_pass(epoch, batches: int, workers: int, plain: bool = False):
    def run():
        dataset = TokenDataset(epoch, epochs=None)
        options = dict(num_workers=workers, multiprocessing_context="fork" if workers else None)
        loader = DataLoader(dataset, batch_size=None, **options) if plain else dataset.loader(**options)
        for n, item in enumerate(loader):
            if n + 1 == batches:
                break
    return run


def pairs(batch_size: int, context_length: int, batches: int):
    ids = shakespeare_ids()
    document = EncodedDocument("tinyshakespeare", Partition.TRAIN, ids)
    epoch = MiniBatchEpoch.build([document], Partition.TRAIN, windows=CausalWindowConfig(context_length, context_length),
                                 batches=MiniBatchConfig(batch_size, BatchOrder.shuffled(1)))
    # ``batches`` global batches run over several epochs (as TokenDataset(epoch, epochs=None) does)
    epochs = -(-batches // epoch.batch_count)
    sequence = [(epoch.with_epoch(e), k) for e in range(epochs) for k in range(epoch.batch_count)][:batches]
    out = (np.empty((batch_size, context_length), np.int64), np.empty((batch_size, context_length), np.int64))

    def direct():
        for source, k in sequence:
            batch = source.batch(k, out)
            torch.from_numpy(batch.inputs), torch.from_numpy(batch.targets)

    data = torch.from_numpy(ids.astype(np.int64))
    starts = [torch.from_numpy(source.positions[k * batch_size:(k + 1) * batch_size].copy()) for source, k in sequence]

    def nanogpt():
        for ix in starts:
            torch.stack([data[i:i + context_length] for i in ix]), torch.stack([data[i + 1:i + 1 + context_length] for i in ix])

    hf = _hf_pipeline(ids, sequence, batch_size, context_length)

    # equal output before timing: batch 0 and the last batch by every path
    loaded = [(b["input_ids"].clone(), b["labels"].clone()) for _, b in zip(range(batches), TokenDataset(epoch, epochs=None))]
    for k in (0, batches - 1):
        source, index = sequence[k]
        b = source.batch(index, dtype=np.int64)
        ix = starts[k]
        stacked = torch.stack([data[i:i + context_length] for i in ix])
        assert np.array_equal(loaded[k][0].numpy(), b.inputs) and np.array_equal(loaded[k][1].numpy(), b.targets)
        assert torch.equal(stacked, loaded[k][0])
    if hf is not None:
        first = next(iter(hf.loader()))
        assert torch.equal(first["input_ids"], loaded[0][0]) and torch.equal(first["labels"], loaded[0][1])
    direct()
    return epoch, batches, direct, nanogpt, hf


def _hf_pipeline(ids, sequence, batch_size: int, context_length: int):
    """HF ``datasets`` rows of (input_ids, labels) + ``DataLoader(collate)`` in the epoch's order."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - the bench extra installs it
        return None
    datasets.disable_progress_bars()
    starts = np.arange(0, ids.shape[0] - context_length, context_length)  # the epoch's windows (S = T)
    column = np.arange(context_length)
    table = datasets.Dataset.from_dict({"input_ids": ids[starts[:, None] + column].astype(np.int64),
                                        "labels": ids[starts[:, None] + column + 1].astype(np.int64)})
    table.set_format("torch")
    order = np.concatenate([source.positions[k * batch_size:(k + 1) * batch_size] // context_length
                            for source, k in sequence]).tolist()

    def run():
        return DataLoader(table, batch_size=batch_size, sampler=order)

    def one_pass():
        for _ in run():
            pass

    one_pass.loader = run
    return one_pass


def rows(quick: bool) -> list[dict]:
    rounds = 2 if quick else 5
    out = []
    for batch_size, context_length, count, targets in (
        (32, 64, 2000 if quick else 20000, {"direct": ">= 0.8x", "nanoGPT": ">= 50x"}),
        (16, 1024, 300 if quick else 3000, {"direct": "", "nanoGPT": ""}),
    ):
        epoch, batches, direct, nanogpt, hf = pairs(batch_size, context_length, count)
        direct_s = best_of(direct, rounds)
        nanogpt_s = best_of(nanogpt, max(1, rounds // 2))
        for workers in (0, 2):
            engine_s = best_of(_loader_pass(epoch, batches, workers), rounds, warmup=True)
            name = f"ds.loader(num_workers={workers}), B={batch_size}, T={context_length}, {batches} batches"
            out.append({"benchmark": name, "engine_s": engine_s, "peer": "epoch.batch(k, out=...) + from_numpy, 1 process",
                        "peer_s": direct_s, "ratio": direct_s / engine_s,
                        "target": targets["direct"] if workers == 0 else (">= 1.6x" if targets["direct"] else "")})
            plain_s = best_of(_loader_pass(epoch, batches, workers, plain=True), rounds, warmup=True)
            out.append({"benchmark": name, "engine_s": engine_s, "peer": f"plain DataLoader(ds, num_workers={workers})",
                        "peer_s": plain_s, "ratio": plain_s / engine_s, "target": ""})
            if workers == 0:
                out.append({"benchmark": name, "engine_s": engine_s, "peer": "nanoGPT torch.stack of slices",
                            "peer_s": nanogpt_s, "ratio": nanogpt_s / engine_s, "target": targets["nanoGPT"]})
                if hf is not None and context_length == 64:
                    hf_s = best_of(hf, 1)
                    out.append({"benchmark": name, "engine_s": engine_s, "peer": "HF datasets + DataLoader(collate)",
                                "peer_s": hf_s, "ratio": hf_s / engine_s, "target": targets["nanoGPT"]})
    return out


if __name__ == "__main__":  # python bench/peers_torch.py [--quick]
    import sys

    for row in rows("--quick" in sys.argv):
        print(f"{row['benchmark']:<70} engine {row['engine_s'] * 1e3:9.2f} ms  {row['peer']:<45} "
              f"{row['peer_s'] * 1e3:9.2f} ms  {row['ratio']:6.2f}x  (target {row['target']})")
