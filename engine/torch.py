"""PyTorch input pipeline: a resumable, elastic ``IterableDataset`` over any batch source (SPEC §6).

``TokenDataset(source)`` used as ``DataLoader(ds, batch_size=None, num_workers=N)`` yields, in the
epoch's order, one dict per global batch (or per rank's share of it)::

    {"input_ids": LongTensor [rows, T], "labels": LongTensor [rows, T],  # labels already shifted
     "segment_ids", "position_ids", "loss_weights": ...,                 # when the source has them
     "epoch": e, "batch_index": k}                                       # where the batch comes from

``labels[i, t]`` is the token after ``input_ids[i, t]``: pass them to the loss as they are.

Batch source protocol. ``MiniBatchEpoch`` implements it; a packed epoch or a mixture joins by
providing the same members:

- ``batch_count`` (int): batches in one epoch;
- ``batch_size`` (int): the global batch size ``B``; every batch has ``B`` rows except maybe the
  last, which holds the remainder; ``batch_width(k)`` gives the rows of batch ``k``;
- ``context_length`` (int): the length ``T`` of every row;
- ``order``: an object with ``seed`` (int, or None when unshuffled) and ``epoch`` (int);
- ``with_epoch(e)``: the same source in epoch ``e`` of the run (SPEC §6 seed rule);
- ``batch(k, out=None, *, rank=None, world_size=None, dtype=None)``: batch ``k`` (rank ``rank``'s
  rows ``[r*width//w, (r+1)*width//w)`` when given) built without building any other, with
  ``inputs``/``targets`` ``[rows, T]`` written into ``out=(inputs, targets)`` when passed, and
  optionally ``segment_ids``, ``position_ids`` and ``loss_weights`` arrays of the same shape;
- pickling carries paths and a few integers (DataLoader workers started by spawn rebuild it).

Workers: with ``N`` workers, worker ``i`` builds the batches ``j ≡ i (mod N)`` of the remaining
sequence (``j`` counts batches from the resume point, across epochs). DataLoader collects from
the workers in round-robin order, so the loader yields exactly the global order, for any ``N``.
Under ``ds.loader(num_workers=N)`` the unit is a group of consecutive batches instead of one
(about ``CHUNK_IDS`` ids per tensor): a worker hands a whole group over as one shared-memory block
and the loader splits it into batches again (views, no copy), because handing over one small
batch costs far more than building it. With ``num_workers=0`` the loader iterates the dataset
directly (DataLoader's per-item machinery has nothing to convert).

Ranks: ``rank``/``world_size`` default to ``torch.distributed`` when it is initialised (else 0 of
1). Rank ``r`` of ``w`` gets rows ``[r*width//w, (r+1)*width//w)`` of every global batch, so the
global sequence does not depend on ``w``. A ``w`` wider than some batch is a ConfigurationError.

State: ``state_dict()`` is ``{"seed", "epoch", "next_batch", "global_batch_size"}``: the next
global batch to hand out; every new iteration starts there, so a second ``for`` loop continues
where the first stopped. DataLoader workers hold copies of the dataset, so the state is kept in
the main process, from what the main-process iterator hands out: ``ds.loader(**options)`` (a
``DataLoader`` whose iterator records the ``epoch``/``batch_index`` tags of every batch it
yields) keeps it for any ``num_workers``; a plain ``DataLoader`` with ``num_workers=0`` also
keeps it, since the dataset's own iterator runs in the main process. ``load_state_dict`` makes the
next iteration start at that global batch, under any ``world_size`` and ``num_workers``
(elastic resume). Saving mid-epoch and resuming equals never stopping, batch for batch.

Buffers: in the main process (``num_workers=0``) the tensors are views of one set of reused
buffers (pinned with ``pin_memory=True``), overwritten by the next batch: copy them to the device
(or ``clone()``) before asking for the next one. Worker processes hand each batch over through
shared memory, so they fill a fresh tensor per batch (use ``DataLoader(pin_memory=True)`` there).

Cost: one batch is ``2 * rows * T`` id copies straight from the store's buffers into the tensors,
plus a few microseconds of Python; ``import engine`` does not import torch.

Block masks: ``block_mask(segment_ids, block_size=128)`` is a FlexAttention ``BlockMask`` for
packed rows, built from segment ids by ``engine.block_mask_tensors`` (a CPU kernel; the numba-cuda
kernel for CUDA tensors) and ``BlockMask.from_kv_blocks``, with the document-causal ``mask_mod``
of SPEC §8 for the partial blocks; it equals ``create_block_mask`` for the same rule, field by
field, in milliseconds instead of seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torch.utils.data._utils.collate import default_convert as _default_convert

from engine.block_masks import DEFAULT_BLOCK_SIZE, block_mask_tensors, check_block_size
from engine.checks import as_int
from engine.errors import ConfigurationError, DeviceError
from engine.kernels import block_masks as block_kernels

__all__ = ["TokenDataset", "TokenLoader", "block_mask", "document_causal_mask_mod"]

_DTYPES = {torch.int64: np.int64, torch.int32: np.int32}
EXTRA_FIELDS = ("segment_ids", "position_ids", "loss_weights")
# Worker chunks under TokenLoader hold about this many ids per tensor (2 MiB of int64).
CHUNK_IDS = 1 << 18
STATE_KEYS = ("seed", "epoch", "next_batch", "global_batch_size")


def _distributed_defaults(rank, world_size) -> tuple[int, int]:
    if rank is None and world_size is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1
    if rank is None or world_size is None:
        raise ConfigurationError("pass both rank and world_size, or neither (then torch.distributed decides)")
    rank = as_int(rank, "rank", expected="an integer >= 0")
    world_size = as_int(world_size, "world_size", expected="an integer >= 1")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigurationError(f"need world_size >= 1 and 0 <= rank < world_size, got rank={rank}, "
                                 f"world_size={world_size}")
    return rank, world_size


class TokenDataset(IterableDataset):
    """Global batches of ``source`` (or this rank's share of them) as dicts of tensors, in order.

    ``dtype``: ``torch.int64`` (default, what ``nn.Embedding`` takes) or ``torch.int32``.
    ``epochs``: how many epochs of the run to yield (``None``: forever); epoch ``e`` is
    ``source.with_epoch(e)``. ``pin_memory``: fill page-locked buffers (main process only).
    """

    def __init__(self, source, *, dtype=torch.int64, pin_memory: bool = False, rank: int | None = None,
                 world_size: int | None = None, epochs: int | None = 1) -> None:
        super().__init__()
        for name in ("batch", "batch_count", "batch_size", "batch_width", "context_length", "order", "with_epoch"):
            if not hasattr(source, name):
                raise ConfigurationError(f"source is a {type(source).__name__} without {name!r}; expected a "
                                         f"batch source such as a MiniBatchEpoch (see engine.torch)")
        if dtype not in _DTYPES:
            raise ConfigurationError(f"dtype must be torch.int64 or torch.int32, got {dtype!r}")
        if epochs is not None:
            epochs = as_int(epochs, "epochs", expected="an integer >= 1 or None (forever)")
            if epochs < 1:
                raise ConfigurationError(f"epochs must be >= 1 or None (forever), got {epochs}")
        if pin_memory and not torch.cuda.is_available():
            raise DeviceError("pin_memory=True needs a CUDA device, and torch sees none; expected pin_memory=False")
        self.rank, self.world_size = _distributed_defaults(rank, world_size)
        self._check_width(source)
        self.source = source
        self.dtype = dtype
        self.pin_memory = bool(pin_memory)
        self.epochs = epochs
        self._consumed = (0, 0)  # (epoch, next batch) after the last batch handed out
        self._sources = {}  # epoch -> source of that epoch (only the latest is kept)
        self._buffers = None
        self._chunk = 0  # batches per worker item; set by TokenLoader while its workers start

    def _check_width(self, source) -> None:
        count = source.batch_count
        last = source.batch_width(count - 1) if count else source.batch_size
        if self.world_size > min(source.batch_size, last):
            which = (f"a batch of {source.batch_size} rows" if self.world_size > source.batch_size
                     else f"the last batch ({count - 1}), which holds the remaining {last} rows")
            raise ConfigurationError(
                f"world_size {self.world_size} is wider than {which} of {source!r}; every rank needs at "
                f"least one row of every batch: expected fewer ranks or another batch size"
            )

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"seed", "epoch", "next_batch", "global_batch_size"}``: the next global batch to yield."""
        epoch, next_batch = self._consumed
        return {"seed": self.source.order.seed, "epoch": epoch, "next_batch": next_batch,
                "global_batch_size": self.source.batch_size}

    def load_state_dict(self, state: dict) -> None:
        """Start the next iteration at ``state``'s global batch (saved under any world size)."""
        if not isinstance(state, dict) or set(state) != set(STATE_KEYS):
            raise ConfigurationError(f"state must be a dict with keys {STATE_KEYS}, got {state!r}")
        if state["seed"] != self.source.order.seed:
            raise ConfigurationError(f"state was saved with seed {state['seed']}, this source has seed "
                                     f"{self.source.order.seed}; expected the same run's source")
        if state["global_batch_size"] != self.source.batch_size:
            raise ConfigurationError(f"state was saved with global batch size {state['global_batch_size']}, "
                                     f"this source has {self.source.batch_size}; the global batch size must "
                                     f"not change on resume (the number of ranks may)")
        epoch = as_int(state["epoch"], "state epoch", expected="an integer >= 0")
        next_batch = as_int(state["next_batch"], "state next_batch", expected="an integer >= 0")
        if epoch < 0 or not 0 <= next_batch <= self.source.batch_count:
            raise ConfigurationError(f"state epoch {epoch}, next_batch {next_batch} is outside this source "
                                     f"({self.source.batch_count} batches per epoch)")
        if next_batch == self.source.batch_count:
            epoch, next_batch = epoch + 1, 0
        self._consumed = (epoch, next_batch)

    def record(self, batch: dict) -> None:
        """Note that ``batch`` (a dict this dataset yielded) was handed out: the state moves past it."""
        epoch, k = int(batch["epoch"]), int(batch["batch_index"])
        self._consumed = (epoch, k + 1) if k + 1 < self.source.batch_count else (epoch + 1, 0)

    def loader(self, **options) -> "TokenLoader":
        """``TokenLoader(self, batch_size=None, **options)``: keeps ``state_dict()`` for any num_workers."""
        return TokenLoader(self, **options)

    # -- iteration -----------------------------------------------------------------------------
    def _epoch_source(self, epoch: int):
        source = self._sources.get(epoch)
        if source is None:
            source = self.source if self.source.order.epoch == epoch else self.source.with_epoch(epoch)
            self._sources = {epoch: source}
        return source

    def _epoch_runs(self):
        """``(epoch, source of that epoch, first batch)`` from the current state on."""
        epoch, k = self._consumed
        while self.source.batch_count and (self.epochs is None or epoch < self.epochs):
            yield epoch, self._epoch_source(epoch), k
            epoch, k = epoch + 1, 0

    def _main_buffers(self):
        if self._buffers is None:
            rows = -(-self.source.batch_size // self.world_size)
            shape = (rows, self.source.context_length)
            inputs = torch.empty(shape, dtype=self.dtype, pin_memory=self.pin_memory)
            labels = torch.empty(shape, dtype=self.dtype, pin_memory=self.pin_memory)
            self._buffers = (inputs, labels, (inputs.numpy(), labels.numpy()))
        return self._buffers

    def _share(self, source, k: int) -> int:
        """Rows of this rank's share of batch ``k``."""
        width = source.batch_width(k)
        return (self.rank + 1) * width // self.world_size - self.rank * width // self.world_size

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return self._iter_main()
        return self._iter_worker(info.id, info.num_workers)

    def _iter_main(self):
        inputs, labels, out = self._main_buffers()
        full = inputs.shape[0]
        rank, world = (self.rank, self.world_size) if self.world_size > 1 else (None, None)
        count = self.source.batch_count
        for epoch, source, first in self._epoch_runs():
            extras = None
            for k in range(first, count):
                batch = source.batch(k, out, rank=rank, world_size=world)
                rows = batch.inputs.shape[0]
                if rows == full:
                    item = {"input_ids": inputs, "labels": labels}
                else:
                    item = {"input_ids": inputs[:rows], "labels": labels[:rows]}
                if extras is None:
                    extras = [name for name in EXTRA_FIELDS if getattr(batch, name, None) is not None]
                for name in extras:
                    item[name] = torch.from_numpy(np.require(getattr(batch, name), requirements=("C", "W")))
                item["epoch"] = epoch
                item["batch_index"] = k
                self._consumed = (epoch, k + 1) if k + 1 < count else (epoch + 1, 0)
                yield item

    def _iter_worker(self, worker: int, workers: int):
        # The state was copied when the loader's iterator began. Plain DataLoader: one batch per
        # item. TokenLoader sets ``_chunk``: groups of ``_chunk`` consecutive batches travel as one
        # item (one shared-memory block instead of one per batch) and the loader splits them again.
        group = self._chunk or 1
        count = self.source.batch_count
        j = 0
        pending = []
        for epoch, source, first in self._epoch_runs():
            for k in range(first, count):
                if (j // group) % workers == worker:
                    pending.append((epoch, source, k))
                    if len(pending) == group:
                        yield self._build(pending)
                        pending = []
                j += 1
        if pending:
            yield self._build(pending)

    def _build(self, pending) -> dict:
        """Fresh tensors holding the batches ``pending`` (one ``(epoch, source, k)`` each)."""
        rank, world = (self.rank, self.world_size) if self.world_size > 1 else (None, None)
        rows = [self._share(source, k) for _, source, k in pending]
        shape = (sum(rows), self.source.context_length)
        inputs, labels = torch.empty(shape, dtype=self.dtype), torch.empty(shape, dtype=self.dtype)
        in_array, label_array = inputs.numpy(), labels.numpy()
        extras: dict[str, list] = {}
        row = 0
        for (_, source, k), n in zip(pending, rows):
            batch = source.batch(k, (in_array[row:row + n], label_array[row:row + n]), rank=rank, world_size=world)
            for name in EXTRA_FIELDS:
                array = getattr(batch, name, None)
                if array is not None:
                    extras.setdefault(name, []).append(array)
            row += n
        item = {"input_ids": inputs, "labels": labels}
        for name, arrays in extras.items():
            item[name] = torch.from_numpy(np.concatenate(arrays))
        if not self._chunk:
            (epoch, _, k), = pending
            item["epoch"], item["batch_index"] = epoch, k
            return item
        item["epoch"] = [epoch for epoch, _, _ in pending]
        item["batch_index"] = [k for _, _, k in pending]
        item["rows"] = rows
        return item

    def __len__(self) -> int:
        """Batches an iteration from the current state yields (TypeError when endless)."""
        if self.epochs is None:
            raise TypeError("an endless TokenDataset (epochs=None) has no length")
        epoch, k = self._consumed
        return max(0, (self.epochs - epoch) * self.source.batch_count - k)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_buffers"] = None  # buffers belong to one process
        state["_sources"] = {}
        return state

    def __repr__(self) -> str:
        return (f"TokenDataset({self.source!r}, rank={self.rank}, world_size={self.world_size}, "
                f"epochs={self.epochs}, dtype={self.dtype}, next={self._consumed})")


class TokenLoader(DataLoader):
    """A ``DataLoader(dataset, batch_size=None, ...)`` whose iterator records every batch it hands
    out in ``dataset``'s state, so ``dataset.state_dict()`` is right for any ``num_workers``."""

    def __init__(self, dataset: TokenDataset, **options) -> None:
        if not isinstance(dataset, TokenDataset):
            raise ConfigurationError(f"TokenLoader needs a TokenDataset, got {type(dataset).__name__}")
        if options.setdefault("batch_size", None) is not None:
            raise ConfigurationError("a TokenDataset yields whole batches: TokenLoader takes batch_size=None")
        super().__init__(dataset, **options)

    def __iter__(self):
        dataset = self.dataset
        if self.num_workers == 0 and self.collate_fn is _default_convert and not self.pin_memory:
            # Nothing for DataLoader's machinery to do: the dataset already yields tensors.
            yield from dataset
            return
        if self.num_workers:
            dataset._chunk = max(1, CHUNK_IDS // (dataset.source.batch_size * dataset.source.context_length))
        try:
            batches = super().__iter__()  # workers start here, with the chunk size set
        finally:
            dataset._chunk = 0
        for item in batches:
            if "rows" not in item:
                dataset.record(item)
                yield item
                continue
            parts = {name: item[name].split(item["rows"]) for name in ("input_ids", "labels", *EXTRA_FIELDS)
                     if name in item}
            for i, (epoch, k) in enumerate(zip(item["epoch"], item["batch_index"])):
                batch = {name: tensors[i] for name, tensors in parts.items()}
                batch["epoch"], batch["batch_index"] = epoch, k
                dataset.record(batch)
                yield batch

    def state_dict(self) -> dict:
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.dataset.load_state_dict(state)


# -- FlexAttention block masks for packed rows ---------------------------------------------------

def document_causal_mask_mod(segment_ids):
    """The ``mask_mod`` of SPEC §8 over an int32 tensor ``[B, L]``: ``kv <= q``, same id, both real;
    a padding query keeps itself as its one fallback key."""

    def mask_mod(b, h, q_idx, kv_idx):
        own = segment_ids[b, q_idx]
        return (q_idx == kv_idx) | ((kv_idx <= q_idx) & (own == segment_ids[b, kv_idx]) & (own >= 0))

    return mask_mod


def block_mask(segment_ids: Any, block_size: int = DEFAULT_BLOCK_SIZE, device: Any = None):
    """``BlockMask`` of ``segment_ids`` ``[B, L]`` (numpy array or tensor; -1 = padding).

    ``device``: where the mask's tensors live (default: the device of ``segment_ids`` when it is
    a tensor, else CPU).
    """
    from torch.nn.attention.flex_attention import BlockMask

    block_size = check_block_size(block_size)
    on_cuda = False
    if isinstance(segment_ids, torch.Tensor):
        target = torch.device(device) if device is not None else segment_ids.device
        if segment_ids.is_cuda and _numba_cuda_usable():
            on_cuda = True
            tables = block_mask_tensors(segment_ids.to(torch.int32).contiguous(), block_size, device="cuda")
            tensors = [torch.as_tensor(t, device=segment_ids.device) for t in tables]
        else:
            host = segment_ids.detach().cpu().numpy()
            tables = block_mask_tensors(host, block_size, device="cpu")
        seg = segment_ids.to(device=target, dtype=torch.int32)
    else:
        target = torch.device(device) if device is not None else torch.device("cpu")
        host = np.asarray(segment_ids)
        tables = block_mask_tensors(host, block_size, device="cpu")
        seg = torch.from_numpy(np.ascontiguousarray(host, dtype=np.int32)).to(target)
    length = seg.shape[1]
    mask_mod = document_causal_mask_mod(seg)
    if on_cuda:  # torch transposes the tables on the GPU
        return BlockMask.from_kv_blocks(*[t.to(target) for t in tensors], BLOCK_SIZE=block_size, mask_mod=mask_mod,
                                        seq_lengths=(length, length))
    # On the host the query-side tables come from a kernel too: torch's transposition costs more
    # than the whole kv side.
    query_side = []
    for count, indices in ((tables.kv_num_blocks, tables.kv_indices), (tables.full_kv_num_blocks, tables.full_kv_indices)):
        q_count = np.empty((indices.shape[0], 1, indices.shape[3]), np.int32)
        q_indices = np.empty((indices.shape[0], 1, indices.shape[3], indices.shape[2]), np.int32)
        if indices.size:
            block_kernels.transpose_tables(count, indices, q_count, q_indices)
        query_side += [q_count, q_indices]
    mask = BlockMask.from_kv_blocks(*[torch.from_numpy(t).to(target) for t in tables], BLOCK_SIZE=block_size,
                                    mask_mod=mask_mod, seq_lengths=(length, length), compute_q_blocks=False)
    (mask.q_num_blocks, mask.q_indices, mask.full_q_num_blocks, mask.full_q_indices) = (
        torch.from_numpy(t).to(target) for t in query_side)
    return mask


def _numba_cuda_usable() -> bool:
    from engine.masks import cuda_available

    return cuda_available()
