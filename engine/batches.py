"""Epochs of causal windows and the mini-batches cut from them.

The epoch rules (cited as "the epoch rules of engine.batches"; "the seed rule of engine.batches"
is the fourth):

1. Membership. An epoch is built from ONE partition's documents; a document of another partition,
   a repeated document id or an empty id is a ``BatchError``. Its windows are every window of those
   documents (the window rule of ``engine.windows``), the same in every epoch of a run.
2. Order. Windows are identified by descriptors ``(document_index, start)``, listed in document
   order, then by increasing start (stored packed as one int64, ``offsets[document_index] + start``,
   8 bytes per window; see ``engine.kernels.windows``). ``BatchOrder.sequential()`` keeps that
   order; ``BatchOrder.shuffled(seed)`` permutes the descriptors — never the tokens — with the
   SplitMix64 Fisher–Yates of ``engine.kernels.shuffle`` whose initial state is the epoch's seed.
   The same seed replays the same order exactly; another seed may change the order, never the
   membership.
3. Batches. Batch ``k`` is descriptors ``[k*B, min((k+1)*B, W))`` of that order (``W`` windows):
   every batch has ``B`` rows but the last, which holds the remainder ``W - (ceil(W/B) - 1)*B``; no
   batch is padded and none is dropped. A batch is two row-major ``[width, T]`` arrays, ``inputs``
   and ``targets``, and one ``Provenance`` per row: partition, document index, document id, start.
   Batch ``k`` is built without building batches ``0 .. k-1`` (resumption). Documents with role
   flags (a store with roles) add ``loss_weights`` ``[width, T]`` uint8: the weight at input
   position ``t`` is the flag of target token ``t + 1`` of the window, and ``token_count`` (the
   denominator of the batch's mean loss) counts the scored targets only.
4. Seed rule. Epoch ``e`` (0-based) of a run seeded with ``s`` shuffles with ``s`` itself when
   ``e = 0`` and with ``s_e = mix(s + e * 0x9E3779B97F4A7C15 mod 2^64)`` when ``e >= 1``, where
   ``mix`` is SplitMix64's output function (``engine.kernels.shuffle``); so ``s_e`` is the ``e``-th
   output of SplitMix64 seeded with ``s``. Seeds are integers in ``0 .. 2^64 - 1``. Only the order
   changes between epochs; a sequential order is the same in every epoch.
5. Training state and ranks. A run's data state is ``(seed, epoch, next batch k, global batch size
   B)``. With ``w`` data-parallel ranks, rank ``r`` takes rows ``[r*width//w, (r+1)*width//w)`` of
   every global batch of ``width`` rows (floor division): the shares are contiguous, disjoint,
   cover the batch and differ by at most one row, and the global sequence of batches does not
   depend on ``w``, so a run saved at batch ``k`` under ``w`` ranks resumes exactly under any other
   ``w'`` (elastic resume). ``w`` larger than a batch's width is a BatchError, not an empty share (``engine.checks.rank_rows``,
   the rule of every batch source).

``epoch.with_epoch(e)`` rebuilds the order of another epoch of the same run. ``epoch.batch(k)``
gathers only that batch's rows, straight from the partition's token buffers into the final
``[width, T]`` arrays, so ``(seed, epoch, k)`` is all a resumed run needs; ``rank=r, world_size=w``
gives rank ``r``'s share of global batch ``k``.

Cost: building is one pass over the offsets, one int64 write per window and (shuffled) one
Fisher–Yates pass; a batch costs ``2 * width * T`` id copies plus a few microseconds of Python.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple, Protocol

import numpy as np
from numba import typeof

from engine.buffers import as_token_buffers
from engine.checks import as_int, check_batch_size, check_partition, check_seed, rank_rows
from engine.partition import Partition
from engine.errors import BatchError, ConfigurationError
from engine.kernels import shuffle as shuffle_kernels
from engine.kernels import windows as window_kernels
from engine.numba_internals import compiled_entry_point
from engine.store import TokenStore
from engine.windows import INT32_TOO_SMALL, CausalWindowConfig, prepare_rows

__all__ = ["BatchOrder", "BatchSource", "FIELD_DTYPES", "MiniBatchConfig", "MiniBatchEpoch", "MiniBatch",
           "PACKED_FIELDS", "Provenance"]

# Per-position arrays a batch may hold besides inputs and targets, and their dtypes.
FIELD_DTYPES = {"segment_ids": np.dtype(np.int32), "position_ids": np.dtype(np.int32),
                "loss_weights": np.dtype(np.uint8)}
PACKED_FIELDS = ("segment_ids", "position_ids", "loss_weights")


class BatchSource(Protocol):
    """The batch source protocol: what ``engine.torch.TokenDataset`` (or any loop over global
    batches) needs. ``MiniBatchEpoch`` (rows are windows), ``engine.PackedEpoch`` (packed rows) and
    ``engine.Mixture`` (rows drawn from several of either) implement it.

    - ``batch_size``: the global batch size ``B``.
    - ``context_length``: the length of every row (``T`` of the windows, ``L`` of packed rows).
    - ``batch_count``: batches in one epoch; every batch has ``B`` rows except maybe the last,
      which holds the remainder. ``None``: an endless source (a mixture), whose one epoch (0)
      never ends; its sources move through their own epochs.
    - ``batch_width(k)``: the rows of global batch ``k``.
    - ``fields``: the per-position arrays a batch holds besides ``inputs`` and ``targets``, by
      name (``()`` for windows, ``PACKED_FIELDS`` for packed rows); ``FIELD_DTYPES`` gives their
      dtypes.
    - ``order``: ``.seed`` (an int; ``None`` when sequential; a tuple of the sources' seeds for a
      mixture) and ``.epoch``, the 0-based epoch of the run this source is.
    - ``with_epoch(e)``: the same source in epoch ``e`` of the run (the seed rule above).
    - ``batch(k, out=None, *, rank=None, world_size=None, dtype=None)``: global batch ``k``, or
      rank ``r``'s rows ``[r*width//w, (r+1)*width//w)`` of it, built without building any other
      batch. The result has ``inputs`` and ``targets`` ``[rows, context_length]`` and one array of
      the same shape per name in ``fields``. ``out``: a tuple ``(inputs, targets, *fields)`` of
      C-contiguous arrays with at least ``rows`` rows; the result's arrays are views of them.
      ``dtype``: of the ids (uint32 by default, or that of ``out``; int32 or int64).
    - ``progress(k)``: JSON-able facts, beyond ``(epoch, k)``, that say where batch ``k`` begins
      (a mixture: each source's epoch and position); ``{}`` when ``(epoch, k)`` says it all.
    - Pickling carries paths and small state, so DataLoader workers started by spawn rebuild it.
    """

    batch_size: int
    context_length: int
    batch_count: int | None
    fields: tuple[str, ...]
    order: Any

    def batch_width(self, k: int) -> int: ...

    def with_epoch(self, epoch: int) -> "BatchSource": ...

    def batch(self, k: int, out: Any = None, *, rank: int | None = None, world_size: int | None = None,
              dtype: Any = None) -> Any: ...

    def progress(self, k: int) -> dict: ...


@dataclass(frozen=True, slots=True)
class BatchOrder:
    """Epoch order: ``sequential()`` keeps document order; ``shuffled(seed, epoch=e)`` permutes it.

    ``seed`` is the run's seed and ``epoch`` the 0-based epoch of the run. The shuffle of epoch 0
    is seeded with ``seed``; epoch ``e >= 1`` with ``mix(seed + e * 0x9E3779B97F4A7C15)`` (the seed
    rule of the module docstring), the ``e``-th output of SplitMix64 seeded with ``seed``. A
    sequential order is the same in every epoch, so its ``epoch`` is always 0.
    """

    seed: int | None = None
    epoch: int = 0

    @classmethod
    def sequential(cls) -> "BatchOrder":
        return cls(None)

    @classmethod
    def shuffled(cls, seed: int, *, epoch: int = 0) -> "BatchOrder":
        epoch = as_int(epoch, "epoch", expected="an integer >= 0")
        if epoch < 0:
            raise ConfigurationError(f"epoch must be >= 0, got {epoch}")
        return cls(check_seed(seed), epoch)

    @property
    def is_shuffled(self) -> bool:
        return self.seed is not None

    @property
    def epoch_seed(self) -> int | None:
        """The SplitMix64 seed of this epoch's Fisher–Yates shuffle (None when sequential)."""
        if self.seed is None or self.epoch == 0:
            return self.seed
        return epoch_seed(self.seed, self.epoch)

    def with_epoch(self, epoch: int) -> "BatchOrder":
        """The same run's order for another epoch (a sequential order stays as it is)."""
        return self if self.seed is None else BatchOrder.shuffled(self.seed, epoch=epoch)

    def __str__(self) -> str:
        if self.seed is None:
            return "sequential"
        return f"shuffled(seed={self.seed})" if self.epoch == 0 else f"shuffled(seed={self.seed}, epoch={self.epoch})"


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed rule: ``seed`` for epoch 0, else ``mix(seed + epoch * 0x9E3779B97F4A7C15)`` (mod 2^64)."""
    if epoch == 0:
        return seed
    z = (seed + epoch * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class MiniBatchConfig:
    """Requested batch width ``B`` (the last batch may be smaller) and the epoch order."""

    batch_size: int
    order: BatchOrder = BatchOrder()

    def __post_init__(self) -> None:
        size = self.batch_size
        object.__setattr__(self, "batch_size", check_batch_size(size))
        if not isinstance(self.order, BatchOrder):
            raise ConfigurationError(
                f"order must be BatchOrder.sequential() or BatchOrder.shuffled(seed), got {self.order!r}"
            )


class Provenance(NamedTuple):
    """Where one batch row comes from."""

    partition: Partition
    document_index: int
    document_id: str
    start: int


class MiniBatch:
    """One batch (or one rank's share): row-major ``inputs``/``targets`` ``[width, T]`` and provenance.

    Provenance is read from the epoch when asked for: ``positions`` is a view of the epoch's
    descriptors ``[first_row, first_row + width)``, and nothing is built per batch beyond this object."""

    __slots__ = ("index", "inputs", "targets", "partition", "first_row", "_stop", "_epoch", "loss_weights")

    def __init__(self, index, inputs, targets, partition, first_row, stop, epoch, loss_weights=None) -> None:
        self.index = index  # batch number k inside the epoch
        self.inputs = inputs
        self.targets = targets
        # uint8 [width, T] for documents with role flags: weight t is the flag of target t (token t + 1
        # of the window); None when every target is scored.
        self.loss_weights = loss_weights
        self.partition = partition
        self.first_row = first_row  # epoch row (descriptor slot) of row 0
        self._stop = stop
        self._epoch = epoch

    @property
    def positions(self) -> np.ndarray:
        """Packed descriptors of the rows (a read-only view of the epoch order)."""
        return self._epoch._positions[self.first_row:self._stop]

    @property
    def width(self) -> int:
        """Rows actually in the batch: one per window (never padded)."""
        return self.positions.shape[0]

    @property
    def context_length(self) -> int:
        return self.inputs.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.width, self.inputs.shape[1])

    @property
    def token_count(self) -> int:
        """Scored target tokens, the denominator of this batch's mean loss: ``width * T``, or the
        count of nonzero ``loss_weights`` for documents with role flags."""
        if self.loss_weights is not None:
            return int(np.count_nonzero(self.loss_weights))
        return self.width * self.inputs.shape[1]

    @property
    def document_index(self) -> np.ndarray:
        """Per row, the document's index in the partition (int64)."""
        return np.searchsorted(self._epoch.offsets, self.positions, side="right") - 1

    @property
    def start(self) -> np.ndarray:
        """Per row, the window's start inside its document (int64)."""
        return self.positions - self._epoch.offsets[self.document_index]

    @property
    def document_ids(self) -> list[str]:
        ids = self._epoch.document_ids
        return [ids[d] for d in self.document_index.tolist()]

    @property
    def provenance(self) -> list[Provenance]:
        ids = self._epoch.document_ids
        return [
            Provenance(self.partition, d, ids[d], s)
            for d, s in zip(self.document_index.tolist(), self.start.tolist())
        ]

    def __repr__(self) -> str:
        return f"MiniBatch(index={self.index}, shape={list(self.shape)}, partition={self.partition.value!r})"


class MiniBatchEpoch:
    """One reproducible traversal of a partition's complete windows, cut into mini-batches.

    A ``BatchSource``: its rows are windows, with no per-position fields besides inputs and targets,
    or, for documents with role flags (a store with roles), ``loss_weights``: the flag of each target."""

    fields: tuple[str, ...] = ()

    def __init__(self, *, source, partition, document_ids, values, offsets, windows, batches, positions,
                 shuffle_state_after, roles=None) -> None:
        self.source = source
        self.roles = roles
        self.fields = ("loss_weights",) if roles is not None else ()
        self.partition = partition
        self.document_ids = document_ids
        self.values = values
        self.offsets = offsets
        self.window_config = windows
        self.batch_config = batches
        self._positions = positions
        self.shuffle_state_after = shuffle_state_after
        self._context_length = windows.context_length
        self._batch_size = batches.batch_size
        self._window_count = positions.shape[0]
        self._batch_count = -(-self._window_count // self._batch_size)
        self._checked_out = None  # (out tuple, its dtype, the kernel, its rows) last accepted (batch())

    @classmethod
    def build(cls, documents, partition, *, windows: CausalWindowConfig, batches: MiniBatchConfig
              ) -> "MiniBatchEpoch":
        """Epoch over ``partition`` of a TokenStore (zero-copy), a list of EncodedDocument, a
        ``(values, offsets, ids)`` triple or TokenBuffers (``engine.buffers.as_token_buffers``)."""
        if not isinstance(windows, CausalWindowConfig):
            raise ConfigurationError(f"windows must be a CausalWindowConfig, got {type(windows).__name__}")
        if not isinstance(batches, MiniBatchConfig):
            raise ConfigurationError(f"batches must be a MiniBatchConfig, got {type(batches).__name__}")
        partition = check_partition(partition)
        buffers = as_token_buffers(documents, partition, error=BatchError, kind_error=ConfigurationError)
        values, offsets, document_ids = buffers.values, buffers.offsets, list(buffers.ids)
        # A store stays the source (a rebuild reads it again); any other form is replaced by its buffers.
        documents = documents if isinstance(documents, TokenStore) else buffers
        prefix = np.empty(offsets.shape[0], dtype=np.int64)  # offsets were checked above
        window_kernels.window_prefix_sums(offsets, windows.kernel_context_length, windows.kernel_stride, prefix)
        positions = np.empty(int(prefix[-1]), dtype=np.int64)
        window_kernels.enumerate_positions(offsets, prefix, windows.kernel_stride, positions)
        state_after = None
        if batches.order.is_shuffled:
            state = shuffle_kernels.fisher_yates_shuffle(positions, np.uint64(batches.order.epoch_seed))
            state_after = int(state)
        positions.flags.writeable = False
        return cls(source=documents, partition=partition, document_ids=document_ids, values=values,
                   offsets=offsets, windows=windows, batches=batches, positions=positions,
                   shuffle_state_after=state_after, roles=buffers.roles)

    # -- sizes -------------------------------------------------------------------------------
    @property
    def context_length(self) -> int:
        return self.window_config.context_length

    @property
    def batch_size(self) -> int:
        return self.batch_config.batch_size

    @property
    def order(self) -> BatchOrder:
        return self.batch_config.order

    @property
    def window_count(self) -> int:
        return self._window_count

    @property
    def batch_count(self) -> int:
        return self._batch_count

    def __len__(self) -> int:
        return self.batch_count

    @property
    def positions(self) -> np.ndarray:
        """The packed descriptors in epoch order (read-only int64 view, 8 bytes per window)."""
        return self._positions

    def descriptors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(document_index, start)`` of every window in epoch order (two int64 arrays)."""
        document_index = np.empty(self.window_count, dtype=np.int64)
        start = np.empty(self.window_count, dtype=np.int64)
        window_kernels.decode_positions(self.offsets, self._positions, document_index, start)
        return document_index, start

    # -- batches -----------------------------------------------------------------------------
    def _check_index(self, k) -> int:
        try:
            index = operator.index(k)
        except TypeError:
            raise BatchError(f"batch index must be an integer, got {type(k).__name__} {k!r}") from None
        count = self.batch_count
        if isinstance(k, bool) or not 0 <= index < count:
            valid = f"0..{count - 1}" if count else "none: the epoch is empty"
            raise BatchError(f"batch {k!r} is out of range: this epoch has {count} batches (valid: {valid})")
        return index

    def batch_rows(self, k: int, *, rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
        """Epoch rows ``[lo, hi)`` of batch ``k`` (or of rank ``rank``'s share of it)."""
        k = self._check_index(k)
        lo = k * self.batch_size
        hi = min(lo + self.batch_size, self.window_count)
        return rank_rows(lo, hi, rank, world_size, batch=k)

    def batch_width(self, k: int) -> int:
        if type(k) is int and 0 <= k < self._batch_count:
            return min(self._batch_size, self._window_count - k * self._batch_size)
        lo, hi = self.batch_rows(k)
        return hi - lo

    def batch(self, k: int, out=None, *, rank: int | None = None, world_size: int | None = None,
              dtype=None) -> MiniBatch:
        """Batch ``k`` (or rank ``rank``'s share), built without building any other batch.

        ``out=(inputs, targets)`` (``(inputs, targets, loss_weights)`` for documents with role flags):
        C-contiguous arrays with at least ``width`` rows of length ``T``;
        the rows are written there and the batch holds views of them. ``dtype``: uint32 (default,
        or that of ``out``), int32 or int64 (what ``torch.nn.Embedding`` takes); int32 needs ids
        below 2^31. ``k`` outside ``0..len(epoch)-1`` is a BatchError.
        """
        # A training loop asks for batch k of the whole epoch into the same buffer pair every step, and
        # checking the pair costs more than gathering a small batch: the pair accepted last (it holds
        # every batch's rows) is remembered with the compiled kernel for its dtype. The tuple is
        # immutable, so the same tuple with unchanged dtypes holds the same checked arrays; the kernel
        # checks their shapes (2: changed since, so the pair is checked again below).
        if self.roles is not None:
            return self._weighted_batch(k, out, rank, world_size, dtype)
        memo = self._checked_out
        if (memo is not None and out is memo[0] and type(k) is int and 0 <= k < self._batch_count
                and rank is None and world_size is None and dtype is None):
            inputs, targets = out
            kind = memo[1]
            if inputs.dtype is kind and targets.dtype is kind:
                lo = k * self._batch_size
                hi = lo + self._batch_size
                if hi > self._window_count:
                    hi = self._window_count
                # One kernel call: the rows, and whether an id needs more than 31 bits.
                code = memo[2](self.values, self._positions, lo, hi, self._context_length, inputs, targets)
                if code != 2:
                    if code and kind == np.int32:
                        raise ConfigurationError(INT32_TOO_SMALL)
                    if hi - lo != memo[3]:
                        inputs, targets = inputs[:hi - lo], targets[:hi - lo]
                    return MiniBatch(k, inputs, targets, self.partition, lo, hi, self)
        lo, hi = self.batch_rows(k, rank=rank, world_size=world_size)
        k = operator.index(k)
        inputs, targets = prepare_rows(hi - lo, self._context_length, out, dtype)
        high = window_kernels.gather_batch(self.values, self._positions, lo, hi, self._context_length, inputs, targets)
        if (dtype is None and type(out) is tuple and rank is None and world_size is None
                and out[0].shape[0] >= self._batch_size):
            kernel = _compiled(window_kernels.gather_batch, self.values, self._positions, lo, hi,
                               self._context_length, inputs, targets)
            self._checked_out = (out, out[0].dtype, kernel, out[0].shape[0])
        if high and inputs.dtype == np.int32:
            raise ConfigurationError(INT32_TOO_SMALL)
        return MiniBatch(k, inputs, targets, self.partition, lo, hi, self)

    def _weighted_batch(self, k, out, rank, world_size, dtype) -> MiniBatch:
        """A batch of documents with role flags: the windows and the flag of each target."""
        lo, hi = self.batch_rows(k, rank=rank, world_size=world_size)
        k = operator.index(k)
        weights_out = None
        if out is not None:
            if not isinstance(out, tuple) or len(out) != 3:
                raise ConfigurationError("out must be (inputs, targets, loss_weights) for documents with role flags")
            out, weights_out = out[:2], out[2]
        inputs, targets = prepare_rows(hi - lo, self._context_length, out, dtype)
        shape = (hi - lo, self._context_length)
        if weights_out is None:
            weights = np.empty(shape, np.uint8)
        else:
            if (not isinstance(weights_out, np.ndarray) or weights_out.dtype != np.uint8 or weights_out.ndim != 2
                    or weights_out.shape[0] < shape[0] or weights_out.shape[1] != shape[1]
                    or not weights_out.flags.c_contiguous):
                raise ConfigurationError(f"out loss_weights must be C-contiguous uint8 with at least {shape[0]} rows "
                                         f"of {shape[1]}, got {getattr(weights_out, 'dtype', type(weights_out))} "
                                         f"{getattr(weights_out, 'shape', '')}")
            weights = weights_out[:shape[0]]
        high = window_kernels.gather_batch(self.values, self._positions, lo, hi, self._context_length, inputs, targets)
        if high and inputs.dtype == np.int32:
            raise ConfigurationError(INT32_TOO_SMALL)
        window_kernels.gather_weights(self.roles, self._positions, lo, hi, self._context_length, weights)
        return MiniBatch(k, inputs, targets, self.partition, lo, hi, self, weights)

    def progress(self, k: int) -> dict:
        """Nothing beyond ``(epoch, k)``: batch ``k`` is descriptors ``[kB, (k+1)B)`` (BatchSource)."""
        return {}

    def __iter__(self) -> Iterator[MiniBatch]:
        for k in range(self.batch_count):
            yield self.batch(k)

    def __reduce__(self):
        """Pickle as ``(source, partition, window config, batch config)``; the copy rebuilds its
        descriptors, which is deterministic. A store source pickles as its path (a few hundred
        bytes in all); a list of documents carries its arrays."""
        return (_rebuild_epoch, (self.source, self.partition, self.window_config, self.batch_config))

    def with_order(self, order: BatchOrder) -> "MiniBatchEpoch":
        """The same documents and window configuration rebuilt in another order."""
        return MiniBatchEpoch.build(self.source, self.partition, windows=self.window_config,
                                    batches=MiniBatchConfig(self.batch_size, order))

    def with_epoch(self, epoch: int) -> "MiniBatchEpoch":
        """Epoch ``epoch`` (0-based) of the same run: same windows, order per the seed rule above.

        A sequential epoch is the same in every epoch and returns itself."""
        order = self.order.with_epoch(epoch)
        return self if order == self.order else self.with_order(order)

    def __repr__(self) -> str:
        return (f"MiniBatchEpoch(partition={self.partition.value!r}, T={self.context_length}, "
                f"S={self.window_config.stride}, B={self.batch_size}, order={self.order}, "
                f"windows={self.window_count}, batches={self.batch_count})")


def _compiled(kernel, *args):
    """``kernel``'s compiled entry point for exactly the types of ``args`` (a Numba dispatcher that
    already ran with them), or ``kernel`` itself: calling it skips the per-call type dispatch."""
    entry = compiled_entry_point(kernel, tuple(typeof(a) for a in args))
    return kernel if entry is None else entry


def _rebuild_epoch(source, partition, windows, batches) -> MiniBatchEpoch:
    return MiniBatchEpoch.build(source, partition, windows=windows, batches=batches)
