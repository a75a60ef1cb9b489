"""PyTorch input pipeline: a resumable, elastic ``IterableDataset`` over any batch source (engine.batches).

``TokenDataset(source)`` used as ``ds.loader(num_workers=N)`` (or ``DataLoader(ds,
batch_size=None, ...)``) yields, in the run's order, one dict per global batch (or per rank's
share of it)::

    {"input_ids": LongTensor [rows, T], "targets": LongTensor [rows, T],  # targets already shifted
     "segment_ids", "position_ids": IntTensor, "loss_weights": ByteTensor,  # packed sources
     "epoch": e, "batch_index": k}                                       # where the batch comes from

``targets[i, t]`` is the token after ``input_ids[i, t]`` (nanoGPT's meaning): pass them to
``F.cross_entropy(logits.flatten(0, 1), targets.flatten())`` as they are, weighted by
``loss_weights`` for packed rows (0 where position ``t`` holds no target: padding).

Labels for a model that shifts itself: ``TokenDataset(source, labels="ignore_index")`` yields
``labels`` instead of ``targets``, in Hugging Face's convention (a ``*ForCausalLM`` model scores
``logits[:, t]`` against ``labels[:, t + 1]`` and skips ``-100``)::

    labels[:, 0] = -100                                       # no position predicts the first
    labels[:, t + 1] = targets[:, t] if loss_weights[:, t] else -100   # for t < T - 1

so the model scores exactly the transitions ``targets`` scores, each once, with no second shift.
For windows every target is scored and ``labels`` equals ``input_ids`` except ``labels[:, 0]``;
in packed rows the first position of a segment carries the previous segment's last target (a
transition inside that document, not across the boundary) and padding is ``-100``. A row holds
``T`` inputs, so the last target of each row (``targets[:, T - 1]``) has no place: a model trained
on these labels scores ``T - 1`` of every row's ``T`` transitions (use ``targets`` to score all).
``loss_weights`` stays aligned with the inputs' positions, as for ``targets``.

Sources: anything of the batch source protocol (``engine.batches.BatchSource``, documented there):
a ``MiniBatchEpoch`` (windows), a ``PackedEpoch`` (packed rows: the three extra fields) or a
``Mixture`` of either (endless: ``epochs`` does not apply, its sources move through their own).

Batches you can keep: every batch is its own tensors, as ``DataLoader`` gives them, whatever the
path: in the main process (``num_workers=0``) each batch is written into freshly allocated tensors
(page-locked with ``pin_memory=True``, from torch's caching host allocator, which does not hand a
block out again while a ``non_blocking`` copy may still read it); under ``ds.loader(num_workers=N)``
workers write groups of batches into shared-memory buffers that they reuse, and the loader copies
each group out (one copy per tensor per group) before handing its batches out as views of that
private copy. So ``list(loader)``, a gradient-accumulation loop that keeps batches, and
``batch["input_ids"].to("cuda", non_blocking=True)`` all see the batches they were given.
``reuse_buffers=True`` skips those allocations and copies: the loader then hands out views of
reused buffers, under one rule: **a batch is valid until the next one is requested** (copy it to
the device, or ``clone()`` it, before asking for the next). It cannot be combined with the
dataset's ``pin_memory=True`` (a reused pinned buffer could be overwritten while a
``non_blocking`` copy still reads it: a ConfigurationError).

Workers: with ``N`` workers, worker ``i`` builds the batches ``j ≡ i (mod N)`` of the remaining
sequence (``j`` counts batches from the resume point, across epochs); DataLoader collects from the
workers in round-robin order, so the loader yields exactly the global order, for any ``N``. Under
``ds.loader(num_workers=N)`` the unit is a group of consecutive batches (about ``limits.chunk_ids`` ids per
tensor, ``LoaderLimits``) written into one of a few shared-memory buffers that each worker allocates once and reuses:
only the buffer's number and the batches' ``(epoch, k, rows)`` cross the process boundary per item
(the buffers themselves once). DataLoader never lets a worker run more than ``prefetch_factor * N``
items ahead of the loop, so a worker keeps that many buffers plus two, and never overwrites one
the loop can still see (with ``reuse_buffers=True`` the loader's batches are views of them). A
plain ``DataLoader`` gets one batch per item in fresh tensors (the slow path: per-item hand-over
costs more than a small batch); so does ``ds.loader`` with ``pin_memory=True`` (DataLoader pins a
copy of every item) or a ``collate_fn`` of your own.
With ``num_workers=0`` the loader iterates the dataset directly.

Ranks: ``rank``/``world_size`` default to ``torch.distributed`` when it is initialised (else 0 of
1). Rank ``r`` of ``w`` gets rows ``[r*width//w, (r+1)*width//w)`` of every global batch, so the
global sequence does not depend on ``w``. A ``w`` wider than some batch is a ConfigurationError.

State: ``state_dict()`` is ``{"seed", "epoch", "next_batch", "global_batch_size"}`` plus what the
source's ``progress(next_batch)`` adds (a mixture: ``"sources"``, each source's name, epoch,
position and samples taken): the next global batch to hand out. Every new iteration starts there,
so a second ``for`` loop continues where the first stopped. DataLoader workers hold copies of the
dataset, so the state is kept in the main process, from what the main-process iterator hands out:
``ds.loader(**options)`` (a ``DataLoader`` whose iterator records the ``epoch``/``batch_index``
tags of every batch it yields) keeps it for any ``num_workers``; a plain ``DataLoader`` with
``num_workers=0`` also keeps it, since the dataset's own iterator runs in the main process.
``load_state_dict`` makes the next iteration start at that global batch, under any
``world_size`` and ``num_workers`` (elastic resume), after checking the seed, the global batch
size and the source's progress against this source. Saving mid-epoch and resuming equals never
stopping, batch for batch.

Cost: one batch is ``2 * rows * T`` id copies straight from the store's buffers into the tensors
(plus the fields of packed rows), the tensors' allocation (or, with workers, one copy out of the
shared buffer) and a few microseconds of Python; ``import engine`` does not import torch.

Block masks: ``block_mask(segment_ids, block_size=128)`` is a FlexAttention ``BlockMask`` for
packed rows, built from segment ids by ``engine.block_mask_tensors`` (a CPU kernel; the numba-cuda
kernel for CUDA tensors) and ``BlockMask.from_kv_blocks``, with the document-causal ``mask_mod``
of ``engine.masks`` for the partial blocks; it equals ``create_block_mask`` for the same rule, field by
field, in milliseconds instead of seconds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torch.utils.data._utils.collate import default_convert as _default_convert

from engine.batches import FIELD_DTYPES
from engine.block_masks import DEFAULT_BLOCK_SIZE, block_mask_tensors, check_block_size
from engine.checks import as_int, positive_int
from engine.errors import BatchError, ConfigurationError, DeviceError
from engine.kernels import block_masks as block_kernels

__all__ = ["IGNORE_INDEX", "LoaderLimits", "TokenDataset", "TokenLoader", "block_mask", "document_causal_mask_mod",
           "hf_labels"]

_DTYPES = {torch.int64: np.int64, torch.int32: np.int32}
_TORCH_FIELDS = {"segment_ids": torch.int32, "position_ids": torch.int32, "loss_weights": torch.uint8}


@dataclass(frozen=True)
class LoaderLimits:
    """The sizes a ``TokenDataset`` cuts its work into; they change no batch, only how it is built.

    ``chunk_ids``: under ``ds.loader(num_workers=N)`` a worker's item is a group of consecutive
    batches of about this many ids per tensor (at least one batch; 2 MiB of int64 by default);
    ``stage_ids``: a batch of at most this many ids per tensor (and no Hugging Face labels) is built
    into a reused stage and copied into its fresh tensors, a larger one straight into arrays of its
    own (made by the source's ``batch``; 0: never staged). Ints, checked on construction:
    ``chunk_ids`` >= 1, ``stage_ids`` >= 0.
    """

    chunk_ids: int = 1 << 18
    stage_ids: int = 1 << 12

    def __post_init__(self) -> None:
        object.__setattr__(self, "chunk_ids", positive_int(self.chunk_ids, "LoaderLimits.chunk_ids"))
        stage = as_int(self.stage_ids, "LoaderLimits.stage_ids", expected="an integer >= 0")
        if stage < 0:
            raise ConfigurationError(f"LoaderLimits.stage_ids must be >= 0 (0: never staged), got {stage}")
        object.__setattr__(self, "stage_ids", stage)

STATE_KEYS = ("seed", "epoch", "next_batch", "global_batch_size")
PROTOCOL = ("batch", "batch_count", "batch_size", "batch_width", "context_length", "fields", "order", "progress",
            "with_epoch")
# The label a Hugging Face model (and F.cross_entropy's default ignore_index) does not score.
IGNORE_INDEX = -100
LABEL_MODES = (None, "ignore_index")


def hf_labels(targets: np.ndarray, loss_weights: np.ndarray | None, out: np.ndarray) -> np.ndarray:
    """Hugging Face ``labels`` ``[rows, T]`` from already-shifted ``targets`` into ``out``.

    ``out[:, 0] = -100`` and ``out[:, t + 1] = targets[:, t]`` where ``loss_weights[:, t]`` is
    nonzero (every ``t`` when ``loss_weights`` is None), else ``-100``: a model that scores
    ``logits[:, t]`` against ``labels[:, t + 1]`` scores exactly the weighted targets of
    positions ``0 .. T-2`` (the last target of a row has no place; see the module docstring)."""
    out[:, 0] = IGNORE_INDEX
    out[:, 1:] = targets[:, :-1]
    if loss_weights is not None:
        out[:, 1:][loss_weights[:, :-1] == 0] = IGNORE_INDEX
    return out


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


def _plain(value):
    """A seed as the state holds it: a mixture's tuple of seeds as a list (what JSON gives back)."""
    return list(value) if isinstance(value, tuple) else value


def _as_is(item):
    """TokenLoader's collate function: the dataset's items are already tensors."""
    return item


class TokenDataset(IterableDataset):
    """Global batches of ``source`` (or this rank's share of them) as dicts of tensors, in order.

    ``dtype``: ``torch.int64`` (default, what ``nn.Embedding`` takes) or ``torch.int32``.
    ``epochs``: how many epochs of the run to yield (``None``: forever); epoch ``e`` is
    ``source.with_epoch(e)``. An endless source (a ``Mixture``) yields forever whatever ``epochs``
    says. ``pin_memory``: page-locked tensors (main process only). ``labels``: ``None`` (the
    batch's ``targets``, already shifted) or ``"ignore_index"`` (Hugging Face ``labels`` instead,
    see ``hf_labels``). ``reuse_buffers``: hand out views of reused buffers instead of fresh
    tensors; a batch is then valid until the next one is requested (not with ``pin_memory``).
    ``limits``: how batches are built and handed over by workers (``LoaderLimits``).
    """

    def __init__(self, source, *, dtype=torch.int64, pin_memory: bool = False, rank: int | None = None,
                 world_size: int | None = None, epochs: int | None = 1, labels: str | None = None,
                 reuse_buffers: bool = False, limits: LoaderLimits = LoaderLimits()) -> None:
        super().__init__()
        if not isinstance(limits, LoaderLimits):
            raise ConfigurationError(f"limits is {type(limits).__name__}; expected a LoaderLimits")
        for name in PROTOCOL:
            if not hasattr(source, name):
                raise ConfigurationError(f"source is a {type(source).__name__} without {name!r}; expected a "
                                         f"batch source such as a MiniBatchEpoch, a PackedEpoch or a Mixture "
                                         f"(engine.batches.BatchSource)")
        unknown = [name for name in source.fields if name not in FIELD_DTYPES]
        if unknown:
            raise ConfigurationError(f"source fields {unknown} are not among {sorted(FIELD_DTYPES)}")
        if dtype not in _DTYPES:
            raise ConfigurationError(f"dtype must be torch.int64 or torch.int32, got {dtype!r}")
        if epochs is not None:
            epochs = as_int(epochs, "epochs", expected="an integer >= 1 or None (forever)")
            if epochs < 1:
                raise ConfigurationError(f"epochs must be >= 1 or None (forever), got {epochs}")
        if not (labels is None or (isinstance(labels, str) and labels in LABEL_MODES)):
            raise ConfigurationError(f"labels must be None (batches hold targets: the next tokens, already shifted) "
                                     f"or 'ignore_index' (Hugging Face labels, -100 where nothing is scored), "
                                     f"got {labels!r}")
        if reuse_buffers and pin_memory:
            raise ConfigurationError("reuse_buffers=True with pin_memory=True could overwrite a pinned buffer while a "
                                     "non_blocking copy to the device still reads it; expected reuse_buffers=False "
                                     "(each batch its own pinned tensors) or pin_memory=False")
        if pin_memory and not torch.cuda.is_available():
            raise DeviceError("pin_memory=True needs a CUDA device, and torch sees none; expected pin_memory=False")
        self.rank, self.world_size = _distributed_defaults(rank, world_size)
        self._check_width(source)
        self.source = source
        self.dtype = dtype
        self.pin_memory = bool(pin_memory)
        self.epochs = epochs
        self.labels = labels
        self.reuse_buffers = bool(reuse_buffers)
        self.limits = limits
        self.names = ("input_ids", "targets" if labels is None else "labels", *source.fields)
        # Where the loss weights sit among (inputs, targets, *fields): HF labels leave unweighted targets out.
        self._weights = 2 + source.fields.index("loss_weights") if "loss_weights" in source.fields else None
        self._consumed = (0, 0)  # (epoch, next batch) after the last batch handed out
        self._sources = {}  # epoch -> source of that epoch (only the latest is kept)
        self._buffers = None  # reuse_buffers=True: the main process's reused tensors
        self._stage_arrays = self._scratch_array = None  # see _stage and _scratch
        # Small batches (and no HF labels) are built into a reused stage and copied (see _fresh).
        self._staged = labels is None and self._rows() * source.context_length <= limits.stage_ids
        self._chunk = 0  # batches per worker item; set by TokenLoader while its workers start
        self._slots = 0  # reused shared buffers per worker; set with _chunk

    def _check_width(self, source) -> None:
        count = source.batch_count
        if count == 0:
            raise BatchError(f"{source!r} has no batches (no document of its partition gives a complete window or "
                             "row), so a loop over it would end at once; expected a shorter context or a partition "
                             "with longer documents")
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
        """``{"seed", "epoch", "next_batch", "global_batch_size"}`` (plus the source's ``progress``,
        e.g. a mixture's per-source epochs and positions): the next global batch to yield."""
        epoch, next_batch = self._consumed
        return {"seed": _plain(self.source.order.seed), "epoch": epoch, "next_batch": next_batch,
                "global_batch_size": self.source.batch_size, **self.source.progress(next_batch)}

    def load_state_dict(self, state: dict) -> None:
        """Start the next iteration at ``state``'s global batch (saved under any world size)."""
        if not isinstance(state, dict) or not set(STATE_KEYS) <= set(state):
            raise ConfigurationError(f"state must be a dict with keys {STATE_KEYS}, got {state!r}")
        seed = _plain(self.source.order.seed)
        if _plain(state["seed"]) != seed:
            raise ConfigurationError(f"state was saved with seed {state['seed']}, this source has seed "
                                     f"{seed}; expected the same run's source")
        if state["global_batch_size"] != self.source.batch_size:
            raise ConfigurationError(f"state was saved with global batch size {state['global_batch_size']}, "
                                     f"this source has {self.source.batch_size}; the global batch size must "
                                     f"not change on resume (the number of ranks may)")
        epoch = as_int(state["epoch"], "state epoch", expected="an integer >= 0")
        next_batch = as_int(state["next_batch"], "state next_batch", expected="an integer >= 0")
        count = self.source.batch_count
        if epoch < 0 or next_batch < 0 or (count is not None and next_batch > count) or (count is None and epoch):
            raise ConfigurationError(f"state epoch {epoch}, next_batch {next_batch} is outside this source "
                                     f"({'endless, epoch 0' if count is None else f'{count} batches per epoch'})")
        if next_batch == count:
            epoch, next_batch = epoch + 1, 0
        extra = {key: value for key, value in state.items() if key not in STATE_KEYS}
        expected = self.source.progress(next_batch) if count is None or extra else {}
        if extra != expected:
            raise ConfigurationError(f"state says the source stands at {extra!r} before batch {next_batch}, this "
                                     f"source at {expected!r}; expected the same sources, weights and batch size")
        self._consumed = (epoch, next_batch)

    def _after(self, epoch: int, k: int) -> tuple[int, int]:
        count = self.source.batch_count
        return (epoch, k + 1) if count is None or k + 1 < count else (epoch + 1, 0)

    def record(self, batch: dict) -> None:
        """Note that ``batch`` (a dict this dataset yielded) was handed out: the state moves past it."""
        self._consumed = self._after(int(batch["epoch"]), int(batch["batch_index"]))

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

    def _batches(self):
        """``(epoch, source of that epoch, k)`` of every batch from the current state on."""
        epoch, first = self._consumed
        count = self.source.batch_count
        if count is None:  # endless: one epoch
            source = self._epoch_source(epoch)
            for k in itertools.count(first):
                yield epoch, source, k
            return
        while count and (self.epochs is None or epoch < self.epochs):
            source = self._epoch_source(epoch)
            for k in range(first, count):
                yield epoch, source, k
            epoch, first = epoch + 1, 0

    def _dtypes(self) -> list:
        return [self.dtype, self.dtype] + [_TORCH_FIELDS[name] for name in self.source.fields]

    def _numpy_dtypes(self) -> list:
        return [np.dtype(_DTYPES[self.dtype])] * 2 + [FIELD_DTYPES[name] for name in self.source.fields]

    def _rows(self) -> int:
        """Rows of this rank's largest share of a batch."""
        return -(-self.source.batch_size // self.world_size)

    def _main_buffers(self):
        if self._buffers is None:
            shape = (self._rows(), self.source.context_length)
            tensors = [torch.empty(shape, dtype=dtype) for dtype in self._dtypes()]
            self._buffers = (dict(zip(self.names, tensors)), tuple(t.numpy() for t in tensors))
        return self._buffers

    def _scratch(self) -> np.ndarray:
        """Targets ``[rows, T]`` for ``labels="ignore_index"``, reused in this process, never handed out."""
        if self._scratch_array is None:
            self._scratch_array = np.empty((self._rows(), self.source.context_length), _DTYPES[self.dtype])
        return self._scratch_array

    def _stage(self) -> tuple:
        """One batch's arrays, one per name, reused in this process and never handed out."""
        if self._stage_arrays is None:
            shape = (self._rows(), self.source.context_length)
            self._stage_arrays = tuple(np.empty(shape, dtype) for dtype in self._numpy_dtypes())
        return self._stage_arrays

    def _share(self, source, k: int) -> int:
        """Rows of this rank's share of batch ``k``."""
        width = source.batch_width(k)
        return (self.rank + 1) * width // self.world_size - self.rank * width // self.world_size

    def _write(self, source, k: int, dest, same_buffers: bool = False) -> int:
        """Build this rank's share of batch ``k`` into ``dest`` (one array per name, at least that
        many rows; HF labels are built from targets in the scratch array); its row count.

        ``same_buffers``: ``dest`` is the one tuple of buffers used every time. A source remembers
        the last ``out`` it checked when no rank is given, which pays off for one reused tuple and
        costs tens of microseconds per call for fresh arrays: so fresh arrays pass the rank (0 of
        1 without ranks) and reused buffers do not."""
        if same_buffers and self.world_size == 1:
            rank = world = None
        else:
            rank, world = self.rank, self.world_size
        if self.labels is None:
            return source.batch(k, dest, rank=rank, world_size=world).inputs.shape[0]
        scratch = self._scratch()
        out = (dest[0], scratch[:dest[0].shape[0]], *dest[2:])
        rows = source.batch(k, out, rank=rank, world_size=world).inputs.shape[0]
        weights = None if self._weights is None else out[self._weights][:rows]
        hf_labels(scratch[:rows], weights, dest[1][:rows])
        return rows

    def _fresh(self, source, k: int, pin: bool = False) -> list:
        """Batch ``k``'s share in tensors of its own, one per name (page-locked with ``pin``).

        A small batch is built into the stage and copied (the copy costs less than the source's
        check of fresh arrays); a larger one into arrays the source makes (no ``out`` to check), or,
        with HF labels, into fresh arrays of the dataset's."""
        if self._staged and not pin:
            stage = self._stage()
            rows = self._write(source, k, stage, same_buffers=True)
            return [torch.from_numpy(a.copy() if rows == a.shape[0] else a[:rows].copy()) for a in stage]
        if not pin and self.labels is None:
            whole = self.world_size == 1
            batch = source.batch(k, rank=None if whole else self.rank, world_size=None if whole else self.world_size,
                                 dtype=_DTYPES[self.dtype])
            return [torch.from_numpy(batch.inputs), torch.from_numpy(batch.targets),
                    *(torch.from_numpy(getattr(batch, name)) for name in self.source.fields)]
        shape = (self._share(source, k), self.source.context_length)
        if pin:
            tensors = [torch.empty(shape, dtype=dtype, pin_memory=True) for dtype in self._dtypes()]
            self._write(source, k, tuple(t.numpy() for t in tensors))
            return tensors
        arrays = tuple(np.empty(shape, dtype) for dtype in self._numpy_dtypes())
        self._write(source, k, arrays)
        return [torch.from_numpy(a) for a in arrays]

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return self._iter_reused() if self.reuse_buffers else self._iter_main()
        if self._chunk:
            return self._iter_ring(info.id, info.num_workers)
        return self._iter_worker(info.id, info.num_workers)

    def _iter_main(self):
        # Every batch in tensors of its own (from torch's caching host allocator when pinned).
        names, after, pin = self.names, self._after, self.pin_memory
        for epoch, source, k in self._batches():
            item = dict(zip(names, self._fresh(source, k, pin)))
            item["epoch"] = epoch
            item["batch_index"] = k
            self._consumed = after(epoch, k)
            yield item

    def _iter_reused(self):
        # reuse_buffers=True: views of one set of buffers, valid until the next batch is requested.
        full, out = self._main_buffers()
        rows_full = out[0].shape[0]
        after = self._after
        for epoch, source, k in self._batches():
            rows = self._write(source, k, out, same_buffers=True)
            item = full.copy() if rows == rows_full else {name: t[:rows] for name, t in full.items()}
            item["epoch"] = epoch
            item["batch_index"] = k
            self._consumed = after(epoch, k)
            yield item

    def _mine(self, worker: int, workers: int, group: int):
        """Groups of up to ``group`` consecutive ``(epoch, source, k)`` of this worker's items."""
        pending = []
        for j, batch in enumerate(self._batches()):
            if (j // group) % workers == worker:
                pending.append(batch)
                if len(pending) == group:
                    yield pending
                    pending = []
        if pending:
            yield pending

    def _fill(self, pending, arrays) -> list[int]:
        """Write the batches ``pending`` one after another into ``arrays``; their row counts."""
        rows, row = [], 0
        for _, source, k in pending:
            n = self._share(source, k)
            dest = tuple(a[row:row + n] for a in arrays)
            if self._staged:  # see _fresh
                stage = self._stage()
                self._write(source, k, stage, same_buffers=True)
                for array, staged in zip(dest, stage):
                    array[...] = staged[:n]
            else:
                self._write(source, k, dest)
            rows.append(n)
            row += n
        return rows

    def _iter_worker(self, worker: int, workers: int):
        # Plain DataLoader: one batch per item, in fresh tensors (DataLoader moves them to shared memory).
        for (epoch, source, k), in self._mine(worker, workers, 1):
            item = dict(zip(self.names, self._fresh(source, k)))
            item["epoch"], item["batch_index"] = epoch, k
            yield item

    def _ring_layout(self, chunk: int, slots: int) -> tuple[list, int]:
        """Where each slot's tensors (one per name) sit in the worker's flat shared byte block:
        ``([[(offset, dtype), ...] per slot], total bytes)``; every tensor starts on a 64-byte
        boundary. The worker that allocates the block and the loader that receives it both use it."""
        size = chunk * self._rows() * self.source.context_length
        layout, offset = [], 0
        for _ in range(slots):
            places = []
            for dtype in self._dtypes():
                places.append((offset, dtype))
                offset += -(-size * torch.empty((), dtype=dtype).element_size() // 64) * 64
            layout.append(places)
        return layout, offset

    def _ring_views(self, ring: torch.Tensor, chunk: int, slots: int) -> list:
        """Per slot, its tensors ``[chunk * rows, T]`` as views of the byte block ``ring``."""
        rows, length = chunk * self._rows(), self.source.context_length
        layout, _ = self._ring_layout(chunk, slots)
        return [tuple(ring[offset:].view(dtype)[:rows * length].view(rows, length) for offset, dtype in places)
                for places in layout]

    def _iter_ring(self, worker: int, workers: int):
        # TokenLoader: groups of ``_chunk`` batches, written into ``_slots`` buffers reused in turn,
        # all carved from one shared-memory block that travels with the worker's first item only
        # (one file descriptor); later items name their slot by number. (The loader copies each
        # group out unless reuse_buffers: a fresh shared block per group costs far more, in page
        # faults, than that copy.)
        _, nbytes = self._ring_layout(self._chunk, self._slots)
        ring = torch.empty(nbytes, dtype=torch.uint8).share_memory_()
        slots = [tuple(t.numpy() for t in tensors) for tensors in self._ring_views(ring, self._chunk, self._slots)]
        for n, pending in enumerate(self._mine(worker, workers, self._chunk)):
            slot = n % self._slots
            item = {"worker": worker, "slot": slot, "chunk": self._chunk, "slots": self._slots}
            if n == 0:
                item["ring"] = ring
            item["rows"] = self._fill(pending, slots[slot])
            item["epoch"] = [epoch for epoch, _, _ in pending]
            item["batch_index"] = [k for _, _, k in pending]
            yield item

    def __len__(self) -> int:
        """Batches an iteration from the current state yields (TypeError when endless)."""
        if self.epochs is None or self.source.batch_count is None:
            raise TypeError("an endless TokenDataset (epochs=None, or an endless source) has no length")
        epoch, k = self._consumed
        return max(0, (self.epochs - epoch) * self.source.batch_count - k)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_buffers"] = state["_stage_arrays"] = state["_scratch_array"] = None  # buffers belong to one process
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
        if options.get("persistent_workers"):
            raise ConfigurationError("TokenLoader starts its workers at the state of each new iteration; "
                                     "persistent_workers=True would resume them from a stale state")
        if options.get("in_order", True) is not True:
            raise ConfigurationError("TokenLoader yields batches in the run's order: in_order must stay True")
        options.setdefault("collate_fn", _as_is)
        super().__init__(dataset, **options)

    def __iter__(self):
        dataset = self.dataset
        if self.num_workers == 0 and self.collate_fn in (_as_is, _default_convert) and not self.pin_memory:
            # Nothing for DataLoader's machinery to do: the dataset already yields tensors.
            yield from dataset
            return
        if self.num_workers and not self.pin_memory and self.collate_fn in (_as_is, _default_convert):
            # (With pin_memory DataLoader pins a copy of each item, and a collate_fn of your own
            # expects batches: then workers hand over fresh tensors, one batch per item.)
            source = dataset.source
            dataset._chunk = max(1, dataset.limits.chunk_ids // (dataset._rows() * source.context_length))
            # A worker is never more than prefetch_factor * num_workers items ahead of this loop.
            dataset._slots = self.prefetch_factor * self.num_workers + 2
        try:
            batches = super().__iter__()  # workers start here, with the chunk size set
        finally:
            dataset._chunk = dataset._slots = 0
        names, reuse = dataset.names, dataset.reuse_buffers
        full = dataset._rows()
        ring: dict = {}  # (worker, slot) -> its tensors, and per place in its chunk the full-batch views
        for item in batches:
            if "slot" not in item:
                dataset.record(item)
                yield item
                continue
            if "ring" in item:  # a worker's first item: its whole ring, carved as the worker carved it
                for slot, tensors in enumerate(dataset._ring_views(item["ring"], item["chunk"], item["slots"])):
                    ring[(item["worker"], slot)] = (tensors, [
                        {name: t[i * full:(i + 1) * full] for name, t in zip(names, tensors)}
                        for i in range(item["chunk"])])
            tensors, views = ring[(item["worker"], item["slot"])]
            shares = item["rows"]
            if not reuse:  # one private copy of the group (the worker writes this slot again later), cut per batch
                parts = [t[:sum(shares)].clone().split(shares) for t in tensors]
                for i, (epoch, k) in enumerate(zip(item["epoch"], item["batch_index"])):
                    batch = {name: part[i] for name, part in zip(names, parts)}
                    batch["epoch"], batch["batch_index"] = epoch, k
                    dataset._consumed = dataset._after(epoch, k)
                    yield batch
                continue
            row = 0
            for i, (epoch, k, n) in enumerate(zip(item["epoch"], item["batch_index"], shares)):
                if n == full and row == i * full:
                    batch = views[i].copy()
                else:
                    batch = {name: t[row:row + n] for name, t in zip(names, tensors)}
                row += n
                batch["epoch"], batch["batch_index"] = epoch, k
                dataset._consumed = dataset._after(epoch, k)
                yield batch

    def state_dict(self) -> dict:
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.dataset.load_state_dict(state)


# -- FlexAttention block masks for packed rows ---------------------------------------------------

def document_causal_mask_mod(segment_ids):
    """The ``mask_mod`` of engine.masks' attention rule over an int32 tensor ``[B, L]``: ``kv <= q``,
    same id, both real; a padding query keeps itself as its one fallback key."""

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
