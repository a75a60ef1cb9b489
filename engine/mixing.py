"""Weighted mixtures of sources, batch by batch.

``Mixture([(source, weight), ...], batch_size=B)`` draws samples from sources ``i = 0..m-1`` —
each a ``MiniBatchEpoch`` (a sample is one window) or each a ``PackedEpoch`` (a sample is one
packed row); all of one kind, with one ``T`` or one ``L``. Weights are positive and normalised to
sum 1. Sample ``n`` comes from the source with the largest deficit ``w_i * (n + 1) - taken_i``
(float64), ties to the smaller ``i``, so every source stays within about one sample of its share
at every prefix; tiny weights (0.001) and one-sample sources work, since nothing is rounded to a
count up front.

Source ``i`` yields its samples in its own epoch order: its ``t``-th sample is slot
``t mod N_i`` of its epoch ``t div N_i``; epoch 0 is the source as given, epoch ``e >= 1`` is the
same windows or rows reordered with ``epoch_seed(seed, e)`` (the seed rule of engine.batches; a sequential source keeps
its order); a source that runs out simply continues with its next epoch. Batch ``k`` is samples
``[kB, (k+1)B)``, each row's provenance naming its source too: the schedule is stepped from the nearest
checkpoint (one every 65536 samples, kept as they are passed) without building any batch, then
only those ``B`` rows are gathered. A mixture never ends; ``report`` tells each source's share
and the epochs it has used. ``state_dict()`` / ``load_state_dict()`` hold the next batch and
what must match on resume (weights, batch size, source sizes and seeds).
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple, Sequence

import numpy as np

from engine.batches import PACKED_FIELDS, MiniBatchEpoch
from engine.checks import check_batch_size, check_count, positive_int, rank_rows
from engine.errors import BatchError, ConfigurationError
from engine.kernels import mixing as kernels
from engine.kernels import packed_epoch as packed_kernels
from engine.kernels import windows as window_kernels
from engine.packed import PackedEpoch, _row_buffers
from engine.store import TokenStore
from engine.windows import check_int32_rows, prepare_rows

__all__ = ["Mixture", "MixtureBatch", "MixtureOrder"]

# Samples between the schedule states ``taken`` keeps (Mixture's ``checkpoint_every``): a state is
# one int64 per source, and reaching any sample costs at most this many steps from the last one.
CHECKPOINT = 1 << 16
_EPOCHS_KEPT = 2  # epochs of each source kept built (a batch spans at most two of one source)


class MixtureOrder(NamedTuple):
    """A mixture's order as the batch source protocol sees it: the sources' seeds, one epoch (0)."""

    seed: tuple
    epoch: int = 0


@dataclass(frozen=True)
class MixtureBatch:
    """Batch ``index`` of a mixture (or one rank's share): rows and, per row, where it came from.

    ``inputs``/``targets`` ``[width, T or L]``; for packed sources also ``segment_ids``,
    ``position_ids`` and ``loss_weights``. Per row: ``source`` (index), ``source_epoch``,
    ``source_slot`` (position in that epoch's order) and ``provenance`` records naming the source
    (built when first read: a training loop that never reads them does not pay for them).
    """

    index: int
    inputs: np.ndarray
    targets: np.ndarray
    segment_ids: np.ndarray | None
    position_ids: np.ndarray | None
    loss_weights: np.ndarray | None
    source: np.ndarray  # int64 [width]
    source_epoch: np.ndarray  # int64 [width]
    source_slot: np.ndarray  # int64 [width]
    _mixture: Any = field(default=None, repr=False, compare=False)

    @property
    def width(self) -> int:
        return int(self.source.shape[0])

    @property
    def provenance(self) -> list:
        """Per row: a dict (windows) or a list of per-segment dicts (packed rows), naming the source."""
        cached = self.__dict__.get("_provenance")
        if cached is None:
            cached = self._mixture._provenance(self.source, self.source_epoch, self.source_slot)
            object.__setattr__(self, "_provenance", cached)
        return cached


class Mixture:
    """Weighted, resumable interleaving of epochs or packed epochs (module docstring).

    A ``BatchSource`` (``engine.batches``) without end: ``batch_count`` is None, its one epoch is 0,
    ``order.seed`` is the tuple of the sources' seeds and ``progress(k)`` names each source's
    epoch and position where batch ``k`` begins. ``checkpoint_every``: samples between the
    schedule states kept (``CHECKPOINT``); it changes the cost of a far jump, never a batch."""

    def __init__(self, sources: Sequence[tuple[Any, float]], batch_size: int, *, names: Sequence[str] | None = None,
                 checkpoint_every: int = CHECKPOINT) -> None:
        self._checkpoint_every = positive_int(checkpoint_every, "checkpoint_every")
        sources = list(sources)
        if not sources:
            raise ConfigurationError("a Mixture needs at least one (source, weight) pair")
        epochs, weights = [], []
        for index, pair in enumerate(sources):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ConfigurationError(f"sources[{index}]: expected a (source, weight) pair, got {pair!r}")
            source, weight = pair
            if not isinstance(source, (MiniBatchEpoch, PackedEpoch)):
                raise ConfigurationError(f"sources[{index}] is a {type(source).__name__}; expected a MiniBatchEpoch "
                                         "or a PackedEpoch")
            try:
                weight = float(weight)
            except (TypeError, ValueError):
                raise ConfigurationError(f"sources[{index}]: weight {weight!r} is not a number") from None
            if not np.isfinite(weight) or weight <= 0:
                raise ConfigurationError(f"sources[{index}]: weight {weight!r}; expected a finite number > 0")
            epochs.append(source)
            weights.append(weight)
        packed = isinstance(epochs[0], PackedEpoch)
        for index, source in enumerate(epochs):
            if isinstance(source, PackedEpoch) != packed:
                raise ConfigurationError(f"sources[{index}]: all sources must be MiniBatchEpoch or all PackedEpoch")
            if _width(source) != _width(epochs[0]):
                raise ConfigurationError(f"sources[{index}]: rows of {_width(source)} tokens, but sources[0] has "
                                         f"{_width(epochs[0])}; every source needs the same T (or L)")
            if _samples(source) == 0:
                raise ConfigurationError(f"sources[{index}] has no samples (an empty epoch); expected at least one")
            if source.partition != epochs[0].partition:
                raise ConfigurationError(
                    f"sources[{index}] is a {source.partition.value} epoch, but sources[0] a "
                    f"{epochs[0].partition.value} one; a mixture draws from one partition (mix train epochs "
                    "to train, validation epochs to evaluate)")
        _check_one_tokenizer(epochs)
        batch_size = check_batch_size(batch_size)
        self.names = tuple(str(n) for n in names) if names is not None else tuple(
            f"source{i}:{s.partition.value}" for i, s in enumerate(epochs))
        if len(self.names) != len(epochs):
            raise ConfigurationError(f"names: expected {len(epochs)} names, got {len(self.names)}")
        total = float(sum(weights))
        self.weights = np.array([w / total for w in weights], dtype=np.float64)
        self.batch_size = int(batch_size)
        self.packed = packed
        self.row_width = _width(epochs[0])
        self._sources = epochs
        self._samples = np.array([_samples(s) for s in epochs], dtype=np.int64)
        self._built = [OrderedDict({0: s}) for s in epochs]
        self._checkpoints: dict[int, np.ndarray] = {0: np.zeros(len(epochs), np.int64)}
        self._last = (0, np.zeros(len(epochs), np.int64))
        self.next_batch = 0
        # Windows of documents with role flags (any source) carry loss_weights; a source without flags scores all.
        self.weighted = not packed and any(getattr(s, "roles", None) is not None for s in epochs)
        self.fields = PACKED_FIELDS if packed else (("loss_weights",) if self.weighted else ())
        self.order = MixtureOrder(tuple(s.order.seed for s in epochs))

    # -- the batch source protocol -------------------------------------------------------------
    batch_count = None  # endless: sources continue into their next epochs

    @property
    def context_length(self) -> int:
        return self.row_width

    def batch_width(self, k: int) -> int:
        self._check_index(k)
        return self.batch_size

    def with_epoch(self, epoch: int) -> "Mixture":
        """A mixture has one endless epoch (0); its sources move through their own epochs."""
        if epoch != 0:
            raise ConfigurationError(f"a Mixture has one endless epoch (0), got epoch {epoch!r}")
        return self

    def progress(self, k: int) -> dict:
        """Where batch ``k`` begins: per source its name, epoch and position in that epoch's order,
        and the samples it gave before (JSON-able)."""
        k = self._check_index(k)
        taken = self.taken(k * self.batch_size).tolist()
        return {"sources": [{"name": name, "epoch": t // n, "position": t % n, "samples": t}
                            for name, t, n in zip(self.names, taken, self._samples.tolist())]}

    def __reduce__(self):
        """Pickle as the sources (paths for stores), the normalised weights exactly, the batch size,
        the names, ``next_batch`` and ``checkpoint_every``; the copy rebuilds its checkpoints as it goes."""
        return (_rebuild_mixture, (self._sources, self.weights.tolist(), self.batch_size, self.names,
                                   self.next_batch, self._checkpoint_every))

    @staticmethod
    def _check_index(k) -> int:
        try:
            index = operator.index(k)
        except TypeError:
            raise BatchError(f"batch index must be an integer, got {type(k).__name__} {k!r}") from None
        if isinstance(k, bool) or index < 0:
            raise BatchError(f"batch {k!r}: expected an index >= 0 (a mixture has no last batch)")
        return index

    # -- the schedule --------------------------------------------------------------------------
    def taken(self, n: int) -> np.ndarray:
        """Samples each source gave before mixture sample ``n`` (int64 ``[m]``)."""
        n = operator.index(n)
        if n < 0:
            raise BatchError(f"sample {n}: expected an index >= 0")
        start = max((c for c in self._checkpoints if c <= n), default=0)
        last_n, last_taken = self._last
        if start <= last_n <= n:
            start, taken = last_n, last_taken.copy()
        else:
            taken = self._checkpoints[start].copy()
        nothing = np.empty(0, np.int64)
        while start < n:
            every = self._checkpoint_every
            stop = min(n, (start // every + 1) * every)
            kernels.advance(self.weights, start, taken, stop - start, nothing)
            start = stop
            if start % every == 0 and start not in self._checkpoints:
                self._checkpoints[start] = taken.copy()
        self._last = (n, taken.copy())
        return taken

    def schedule(self, n: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Sources of samples ``[n, n + count)`` and each one's sample number inside its source."""
        taken = self.taken(n)
        running = taken.copy()
        sources = np.empty(count, np.int64)
        kernels.advance(self.weights, n, taken, count, sources)
        index = np.empty(count, np.int64)
        for r, i in enumerate(sources.tolist()):
            index[r] = running[i]
            running[i] += 1
        return sources, index

    def _epoch(self, i: int, e: int):
        built = self._built[i]
        if e in built:
            built.move_to_end(e)
            return built[e]
        base = self._sources[i]
        epoch = base.with_epoch(e)  # packed or windowed: the seed rule of engine.batches; sequential stays as it is
        built[e] = epoch
        while len(built) > _EPOCHS_KEPT + 1:
            oldest = next(k for k in built if k != 0)
            del built[oldest]
        return epoch

    # -- batches -------------------------------------------------------------------------------
    def batch(self, k: int, out: Any = None, *, rank: int | None = None, world_size: int | None = None,
              dtype: Any = None) -> MixtureBatch:
        """Batch ``k`` (samples ``[kB, (k+1)B)``) or rank ``rank``'s rows ``[r*B//w, (r+1)*B//w)`` of it.

        ``out``: ``(inputs, targets)`` (windows) or ``(inputs, targets, segment_ids, position_ids,
        loss_weights)`` (packed rows), C-contiguous with at least ``width`` rows; the batch then
        holds views of them. ``dtype``: of the ids (uint32, int32 or int64).
        """
        k = self._check_index(k)
        lo, hi = rank_rows(0, self.batch_size, rank, world_size, batch=k)
        sources, sample = self.schedule(k * self.batch_size, self.batch_size)
        sources, sample = sources[lo:hi], sample[lo:hi]
        width = hi - lo
        epochs = sample // self._samples[sources]
        slots = sample - epochs * self._samples[sources]
        if self.packed:
            arrays = _row_buffers(width, self.row_width, out, dtype)
        elif self.weighted:
            if out is not None and (not isinstance(out, tuple) or len(out) != 3):
                raise ConfigurationError("out must be (inputs, targets, loss_weights) for windows with role flags")
            arrays = prepare_rows(width, self.row_width, None if out is None else out[:2], dtype)
            weights = np.empty((width, self.row_width), np.uint8) if out is None else out[2][:width]
            if weights.dtype != np.uint8 or weights.shape != (width, self.row_width) or not weights.flags.c_contiguous:
                raise ConfigurationError(f"out loss_weights must be C-contiguous uint8 [{width}, {self.row_width}]")
            arrays = (*arrays, weights)
        else:
            arrays = prepare_rows(width, self.row_width, out, dtype)
        for i, e in sorted(set(zip(sources.tolist(), epochs.tolist()))):
            rows = np.flatnonzero((sources == i) & (epochs == e))
            epoch = self._epoch(i, e)
            temp = tuple(np.empty((rows.shape[0], self.row_width), a.dtype) for a in arrays)
            if self.packed:
                selected = np.ascontiguousarray(epoch.row_order[slots[rows]])
                roles = epoch._roles if epoch._roles is not None else np.zeros(1, np.uint8)
                plan = epoch.plan
                packed_kernels.fill_rows(epoch.values, epoch.offsets, roles, epoch._roles is not None, selected,
                                         epoch._row_first, epoch._row_pieces, plan.piece_document,
                                         plan.piece_source_start, plan.piece_length, plan.piece_column, *temp)
            else:
                positions = np.ascontiguousarray(epoch.positions[slots[rows]])
                window_kernels.gather_positions(epoch.values, positions, self.row_width, *temp[:2])
                if self.weighted and epoch.roles is not None:
                    window_kernels.gather_weights(epoch.roles, positions, 0, positions.shape[0], self.row_width,
                                                  temp[2])
                elif self.weighted:
                    temp[2][:] = 1
            for array, part_rows in zip(arrays, temp):
                array[rows] = part_rows
        if arrays[0].dtype == np.int32:
            check_int32_rows(arrays[0], arrays[1])
        extra = arrays[2:] if self.packed else (None, None, arrays[2] if self.weighted else None)
        return MixtureBatch(index=k, inputs=arrays[0], targets=arrays[1], segment_ids=extra[0],
                            position_ids=extra[1], loss_weights=extra[2], source=sources, source_epoch=epochs,
                            source_slot=slots, _mixture=self)

    def _provenance(self, sources: np.ndarray, epochs: np.ndarray, slots: np.ndarray) -> list:
        """Per row of a batch, where it came from (``MixtureBatch.provenance``)."""
        provenance: list = [None] * sources.shape[0]
        for i, e in sorted(set(zip(sources.tolist(), epochs.tolist()))):
            rows = np.flatnonzero((sources == i) & (epochs == e))
            epoch = self._epoch(i, e)
            if self.packed:
                plan = epoch.plan
                selected = epoch.row_order[slots[rows]]
                for r, plan_row in zip(rows.tolist(), selected.tolist()):
                    pieces = epoch._row_pieces[epoch._row_first[plan_row]:epoch._row_first[plan_row + 1]]
                    provenance[r] = [{
                        "source": self.names[i], "partition": epoch.partition.value,
                        "segment_id": int(plan.piece_segment[p]), "column": int(plan.piece_column[p]),
                        "document_index": int(plan.piece_document[p]),
                        "document_id": epoch.document_ids[int(plan.piece_document[p])],
                        "source_start": int(plan.piece_source_start[p]), "length": int(plan.piece_length[p]),
                    } for p in pieces.tolist()]
            else:
                positions = epoch.positions[slots[rows]]
                document = np.searchsorted(epoch.offsets, positions, side="right") - 1
                start = positions - epoch.offsets[document]
                for r, d, st in zip(rows.tolist(), document.tolist(), start.tolist()):
                    provenance[r] = {"source": self.names[i], "partition": epoch.partition.value,
                                     "document_index": d, "document_id": epoch.document_ids[d], "start": st}
        return provenance

    def __iter__(self) -> Iterator[MixtureBatch]:
        """Batches from ``next_batch`` on, advancing it (a mixture never ends)."""
        while True:
            batch = self.batch(self.next_batch)
            self.next_batch += 1
            yield batch

    # -- report and state ----------------------------------------------------------------------
    def report(self, batches: int | None = None) -> list[dict]:
        """Per source after ``batches`` batches (default ``next_batch``): samples taken, share of
        all samples, target weight, and epochs used (started) and completed."""
        batches = self.next_batch if batches is None else operator.index(batches)
        samples = batches * self.batch_size
        taken = self.taken(samples)
        rows = []
        for i, name in enumerate(self.names):
            count = int(taken[i])
            per_epoch = int(self._samples[i])
            rows.append({
                "source": name, "weight": float(self.weights[i]), "samples": count,
                "share": count / samples if samples else 0.0, "samples_per_epoch": per_epoch,
                "epochs_used": -(-count // per_epoch), "epochs_completed": count // per_epoch,
            })
        return rows

    def state_dict(self) -> dict:
        return {
            "next_batch": self.next_batch,
            "batch_size": self.batch_size,
            "weights": self.weights.tolist(),
            "samples_per_epoch": self._samples.tolist(),
            "seeds": [s.batch_config.order.seed for s in self._sources],
        }

    def load_state_dict(self, state: dict) -> None:
        expected = self.state_dict()
        for key in ("batch_size", "weights", "samples_per_epoch", "seeds"):
            if state.get(key) != expected[key]:
                raise ConfigurationError(f"state {key}={state.get(key)!r} does not match this mixture's "
                                         f"{expected[key]!r}; resume with the same sources, weights and batch size")
        next_batch = state.get("next_batch")
        next_batch = check_count(next_batch, "state next_batch")
        self.next_batch = next_batch

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={w:.4g}" for n, w in zip(self.names, self.weights))
        return f"Mixture({parts}, B={self.batch_size}, next_batch={self.next_batch})"


def _check_one_tokenizer(epochs: list) -> None:
    """Sources read from token stores must share the tokenizer (ids of two vocabularies do not mix)."""
    stores = [(i, e.source) for i, e in enumerate(epochs) if isinstance(e.source, TokenStore)]
    for index, store in stores[1:]:
        first, other = stores[0]
        if store.tokenizer_hash != other.tokenizer_hash:
            raise ConfigurationError(
                f"sources[{index}] comes from {store.path} (tokenizer {store.tokenizer_hash[:12]}), "
                f"sources[{first}] from {other.path} (tokenizer {other.tokenizer_hash[:12]}); a mixture's sources "
                "must be encoded by one tokenizer (encode both corpora with the same tokenizer file: "
                "engine prepare --tokenizer FILE)")


def _width(source) -> int:
    return source.row_length if isinstance(source, PackedEpoch) else source.context_length


def _samples(source) -> int:
    return source.rows if isinstance(source, PackedEpoch) else source.window_count


def _rebuild_mixture(sources, weights, batch_size, names, next_batch, checkpoint_every=CHECKPOINT) -> Mixture:
    mixture = Mixture(list(zip(sources, weights)), batch_size, names=names, checkpoint_every=checkpoint_every)
    mixture.weights = np.array(weights, dtype=np.float64)  # exactly the original's (renormalising may round)
    mixture.next_batch = next_batch
    return mixture
