"""Packed epochs: a plan of rows over one partition, a seeded row order, and batches built on demand.

The packed-epoch rule: a packed epoch plans rows over ONE partition (the packing rules of
``engine.packing``; ``bfd`` places pieces by best-fit decreasing, largest first, ties by document
order), then permutes the ROW indices with the SplitMix64 Fisher–Yates of ``engine.kernels.shuffle``,
seeded per epoch by the seed rule of ``engine.batches``; batch ``k`` is rows ``[k*B, (k+1)*B)`` of that
order, the last batch smaller (never padded with empty rows, never dropped). Every in-document
transition of the partition is scored exactly once per packed epoch (``bfd``; ``bos_crop`` crops).

``PackedEpoch.build(documents_or_store, partition, row_length=L, batches=MiniBatchConfig(B, order))``
plans every row of the partition once, in memory linear in the number of pieces (documents, plus
one per ``L`` transitions of a long document; about 64 bytes each), never materialising a row:

- ``strategy="bfd"``: best-fit decreasing over pieces (``engine.packing``); documents longer than
  a row are cut into pieces that overlap by one source token, so every in-document transition of
  the partition is scored exactly once per epoch (``audit`` checks it batch by batch).
- ``strategy="bos_crop"``: every row starts at a document start, best fit from a buffer of
  ``buffer_size`` documents; what does not fit the row is cropped and never scored
  (``cropped_share`` reports the share; see ``engine.kernels.packed_epoch``).

The ROW indices are then permuted by that Fisher–Yates with the epoch's seed
(``epoch_seed(seed, e)``); ``BatchOrder.sequential()`` keeps plan order. ``batch(k)`` materialises
rows ``[kB, (k+1)B)`` of that order only — inputs, targets (uint32, or int64 with ``dtype``),
segment ids, position ids, loss weights and one provenance record per segment — so a resumed run
needs ``(seed, epoch, k)`` only. With ``rank=r, world_size=w`` it returns rows
``[r*width//w, (r+1)*width//w)`` of the batch; ``w`` above the batch width is a BatchError
(``engine.checks.rank_rows``, the rule of every batch source).
Cost: build ``O(D + P log L)`` plus one shuffle of ``R`` row indices; a batch writes ``17`` bytes
per position (contiguous runs, see ``engine.kernels.packed_epoch``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from engine.batches import PACKED_FIELDS, MiniBatchConfig, epoch_seed
from engine.buffers import as_token_buffers
from engine.checks import check_count, check_partition, rank_rows
from engine.partition import Partition
from engine.errors import BatchError, ConfigurationError, PackingError
from engine.kernels import packed_epoch as kernels
from engine.kernels import shuffle as shuffle_kernels
from engine.packing import PackedBatch, _check_row_length, _flat_roles, _plan_from_offsets
from engine.windows import check_int32_rows

__all__ = ["PackedEpoch", "PackedEpochBatch", "PackedAudit", "PACKED_STRATEGIES", "epoch_seed"]

PACKED_STRATEGIES = ("bfd", "bos_crop")
ROW_DTYPES = (np.dtype(np.uint32), np.dtype(np.int32), np.dtype(np.int64))


@dataclass(frozen=True, repr=False)
class PackedEpochBatch(PackedBatch):
    """Batch ``index`` of a packed epoch: the ``PackedBatch`` fields (``segment_row`` is the row
    inside this batch) plus where the rows sit in the epoch and the partition."""

    index: int
    epoch_rows: np.ndarray  # int64 [width]: slots of the rows in the epoch's row order
    plan_rows: np.ndarray  # int64 [width]: the rows' indices in the plan
    partition: Partition

    @property
    def width(self) -> int:
        return self.rows

    def segment(self, k: int) -> dict:
        return {**super().segment(k), "partition": self.partition.value}

    def _repr_fields(self) -> str:
        return f"index={self.index}, partition={self.partition.value!r}, "


@dataclass(frozen=True)
class PackedAudit:
    """What ``PackedEpoch.audit`` checked: every count is exact."""

    batches: int
    rows: int
    documents: int
    transitions: int  # in-document transitions of the partition
    scored: int  # positions holding a transition (each checked against its source tokens)
    cropped: int  # transitions no row holds (bos_crop only; 0 for bfd)
    weighted: int = 0  # positions with loss weight 1: the scored targets a token-weighted mean divides by
    flagged: int = 0  # in-document transitions whose target's role flag is 1 (all of them without roles)

    @property
    def every_transition_once(self) -> bool:
        return self.scored == self.transitions and self.cropped == 0

    @property
    def every_flagged_transition_once(self) -> bool:
        """Every transition the role flags score is scored, once (each is held once; weights follow flags)."""
        return self.weighted == self.flagged and self.cropped == 0


class PackedEpoch:
    """One reproducible packed traversal of a partition, cut into batches of rows.

    A ``BatchSource`` (``engine.batches``): rows of ``context_length = row_length`` positions
    with the per-position ``fields`` segment ids, position ids and loss weights."""

    fields: tuple[str, ...] = PACKED_FIELDS

    def __init__(self, *, source, partition, document_ids, values, offsets, roles, row_length, batches, strategy,
                 plan, row_first, row_pieces, row_order, cropped, seed, epoch=0, buffer_size=1000) -> None:
        self.source = source
        self.partition = partition
        self.document_ids = document_ids
        self.values = values
        self.offsets = offsets
        self._roles = roles
        self.row_length = row_length
        self.batch_config = batches
        self.strategy = strategy
        self.plan = plan
        self._row_first = row_first
        self._row_pieces = row_pieces
        self.row_order = row_order
        self.cropped_transitions = cropped
        self.seed = seed
        self.epoch = epoch
        self.buffer_size = buffer_size
        self._batch_size = batches.batch_size
        self._batch_count = -(-row_order.shape[0] // self._batch_size)

    @classmethod
    def build(cls, documents, partition, *, row_length: int, batches: MiniBatchConfig, strategy: str = "bfd",
              roles: Any = None, epoch: int | None = None, buffer_size: int = 1000) -> "PackedEpoch":
        """Plan the rows of ``partition`` (a TokenStore, zero-copy, or a list of EncodedDocument).

        ``epoch``: which epoch of the run (the seed rule of engine.batches); default ``batches.order.epoch``
        where the order carries one, else 0. ``roles``: 0/1 flags per source token (one array per
        document, or one flat array) to weight the loss; default the documents' own (a store with
        roles, EncodedDocuments with ``roles``), else every real target scored.
        """
        row_length = _check_row_length(row_length)
        if not isinstance(batches, MiniBatchConfig):
            raise ConfigurationError(f"batches must be a MiniBatchConfig, got {type(batches).__name__}")
        if strategy not in PACKED_STRATEGIES:
            raise ConfigurationError(f"strategy={strategy!r} is not one of {PACKED_STRATEGIES}")
        buffer_size = check_count(buffer_size, "buffer_size", low=1)
        partition = check_partition(partition)
        buffers = as_token_buffers(documents, partition, error=BatchError, kind_error=ConfigurationError)
        values, offsets, document_ids = buffers.values, buffers.offsets, buffers.ids
        document_ids = tuple(document_ids)
        if roles is None:
            roles = buffers.roles  # a store with roles (chat data) weights the loss by them
        flags = None if roles is None else _flat_roles(roles, offsets, document_ids)
        if strategy == "bfd":
            plan = _plan_from_offsets(offsets, row_length, "bfd")
            cropped = 0
        else:
            plan, cropped = _bos_crop_plan(offsets, row_length, int(buffer_size))
        row_first = np.empty(plan.rows + 1, np.int64)
        row_pieces = np.empty(plan.piece_length.shape[0], np.int64)
        kernels.row_index(plan.piece_row, plan.piece_segment, plan.rows, row_first, row_pieces)
        order = batches.order
        if epoch is None:
            epoch = getattr(order, "epoch", 0) or 0
        epoch = check_count(epoch, "epoch")
        row_order, seed = _row_order(plan.rows, order, epoch)
        return cls(source=documents, partition=partition, document_ids=document_ids, values=values, offsets=offsets,
                   roles=flags, row_length=row_length, batches=batches, strategy=strategy, plan=plan,
                   row_first=row_first, row_pieces=row_pieces, row_order=row_order, cropped=int(cropped), seed=seed,
                   epoch=epoch, buffer_size=int(buffer_size))

    def with_epoch(self, epoch: int) -> "PackedEpoch":
        """Epoch ``epoch`` of the same run: the same plan, rows reordered with ``epoch_seed(seed, epoch)``
        of the order's seed (the seed rule of engine.batches); a sequential order is the same every epoch."""
        epoch = check_count(epoch, "epoch")
        row_order, seed = _row_order(self.rows, self.batch_config.order, epoch)
        return PackedEpoch(source=self.source, partition=self.partition, document_ids=self.document_ids,
                           values=self.values, offsets=self.offsets, roles=self._roles, row_length=self.row_length,
                           batches=self.batch_config, strategy=self.strategy, plan=self.plan,
                           row_first=self._row_first, row_pieces=self._row_pieces, row_order=row_order,
                           cropped=self.cropped_transitions, seed=seed, epoch=epoch, buffer_size=self.buffer_size)

    def __reduce__(self):
        """Pickle as what ``build`` takes (a store as its path; roles as their flat array); the copy
        plans again, which is deterministic."""
        return (_rebuild_packed, (self.source, self.partition, self.row_length, self.batch_config, self.strategy,
                                  self._roles, self.epoch, self.buffer_size))

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return int(self.row_order.shape[0])

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def batch_count(self) -> int:
        return self._batch_count

    @property
    def context_length(self) -> int:
        """Positions per row, ``L`` (BatchSource)."""
        return self.row_length

    @property
    def order(self):
        """The run's order in this epoch: ``.seed`` is the run's seed, ``.epoch`` this epoch (BatchSource)."""
        return self.batch_config.order.with_epoch(self.epoch)

    def batch_width(self, k: int) -> int:
        lo, hi = self.batch_rows(k)
        return hi - lo

    def progress(self, k: int) -> dict:
        """Nothing beyond ``(epoch, k)``: batch ``k`` is slots ``[kB, (k+1)B)`` of the row order (BatchSource)."""
        return {}

    def __len__(self) -> int:
        return self._batch_count

    @property
    def transitions(self) -> int:
        """In-document transitions of the partition (documents of n tokens have n - 1)."""
        lengths = np.diff(self.offsets)
        return int(np.maximum(lengths - 1, 0).sum())

    @property
    def real_positions(self) -> int:
        return self.plan.real_positions

    @property
    def fill_efficiency(self) -> float:
        """Real positions / all positions of the epoch's rows."""
        return self.plan.fill_efficiency

    @property
    def cropped_share(self) -> float:
        """Share of the partition's transitions cropped away (bos_crop; 0.0 for bfd)."""
        total = self.transitions
        return self.cropped_transitions / total if total else 0.0

    # -- batches -------------------------------------------------------------------------------
    def batch_rows(self, k: int, *, rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
        """Slots ``[lo, hi)`` of the epoch's row order that batch ``k`` (rank ``rank``'s share) holds."""
        try:
            index = operator.index(k)
        except TypeError:
            raise BatchError(f"batch index must be an integer, got {type(k).__name__} {k!r}") from None
        if isinstance(k, bool) or not 0 <= index < self._batch_count:
            valid = f"0..{self._batch_count - 1}" if self._batch_count else "none: the epoch is empty"
            raise BatchError(f"batch {k!r} is out of range: this epoch has {self._batch_count} batches (valid: {valid})")
        lo = index * self._batch_size
        return rank_rows(lo, min(lo + self._batch_size, self.rows), rank, world_size, batch=index)

    def batch(self, k: int, out: Any = None, *, rank: int | None = None, world_size: int | None = None, dtype: Any = None
              ) -> PackedEpochBatch:
        """Batch ``k`` (or rank ``rank``'s share), built without building any other batch.

        ``out``: ``(inputs, targets, segment_ids, position_ids, loss_weights)``, C-contiguous,
        at least ``width`` rows of ``L``, dtypes (uint32, int32 or int64 twice, int32, int32, uint8);
        the batch then holds views of them. int32 ids need ids below 2^31.
        """
        lo, hi = self.batch_rows(k, rank=rank, world_size=world_size)
        return self._rows(lo, hi, operator.index(k), out, dtype)

    def materialise(self, lo: int = 0, hi: int | None = None, *, dtype: Any = None) -> PackedEpochBatch:
        """Slots ``[lo, hi)`` of the epoch's row order as one batch (index -1); default every row."""
        hi = self.rows if hi is None else hi
        for name, value in (("lo", lo), ("hi", hi)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ConfigurationError(f"{name} must be an integer, got {value!r}")
        if not 0 <= lo <= hi <= self.rows:
            raise BatchError(f"rows [{lo}, {hi}) are out of range: this epoch has {self.rows} rows")
        return self._rows(int(lo), int(hi), -1, None, dtype)

    def _rows(self, lo: int, hi: int, index: int, out: Any, dtype: Any) -> PackedEpochBatch:
        selected = np.ascontiguousarray(self.row_order[lo:hi])
        arrays = _row_buffers(hi - lo, self.row_length, out, dtype)
        plan = self.plan
        roles = self._roles if self._roles is not None else np.zeros(1, np.uint8)
        kernels.fill_rows(self.values, self.offsets, roles, self._roles is not None, selected, self._row_first,
                          self._row_pieces, plan.piece_document, plan.piece_source_start, plan.piece_length,
                          plan.piece_column, *arrays)
        if arrays[0].dtype == np.int32:
            check_int32_rows(arrays[0], arrays[1])
        segments = kernels.segment_count(selected, self._row_first)
        piece = np.empty(segments, np.int64)
        segment_row = np.empty(segments, np.int64)
        kernels.selected_segments(selected, self._row_first, self._row_pieces, piece, segment_row)
        return PackedEpochBatch(
            row_length=self.row_length, strategy=self.strategy, inputs=arrays[0], targets=arrays[1],
            segment_ids=arrays[2], position_ids=arrays[3], loss_weights=arrays[4], segment_row=segment_row,
            segment_id=plan.piece_segment[piece], segment_column=plan.piece_column[piece],
            segment_document=plan.piece_document[piece], segment_source_start=plan.piece_source_start[piece],
            segment_length=plan.piece_length[piece], document_ids=self.document_ids,
            skipped_documents=plan.skipped_documents, index=index,
            epoch_rows=np.arange(lo, hi, dtype=np.int64), plan_rows=selected, partition=self.partition,
        )

    def __iter__(self) -> Iterator[PackedEpochBatch]:
        for k in range(self._batch_count):
            yield self.batch(k)

    def audit(self) -> PackedAudit:
        """Materialise every batch and check it against the source tokens (raises PackingError):
        each real position holds the transition its provenance names, loss weights follow the role
        flags, padding is never scored, every plan row appears once, and per document the scored
        transitions tile ``[0, n - 1)`` exactly once (bfd) or a prefix of it per piece (bos_crop)."""
        documents = self.offsets.shape[0] - 1
        covered = [[] for _ in range(documents)]
        seen_rows = np.zeros(self.rows, np.int64)
        scored = weighted = 0
        for batch in self:
            seen_rows[batch.plan_rows] += 1
            if (batch.loss_weights[batch.segment_ids < 0] != 0).any():
                raise PackingError(f"batch {batch.index}: a padding position is scored")
            for s in range(batch.segments):
                row, column, n = int(batch.segment_row[s]), int(batch.segment_column[s]), int(batch.segment_length[s])
                d, start = int(batch.segment_document[s]), int(batch.segment_source_start[s])
                source = self.values[self.offsets[d] + start : self.offsets[d] + start + n + 1]
                span = slice(column, column + n)
                expected_weights = 1 if self._roles is None else self._roles[self.offsets[d] + start + 1 :
                                                                             self.offsets[d] + start + n + 1]
                if not (np.array_equal(batch.inputs[row, span], source[:-1])
                        and np.array_equal(batch.targets[row, span], source[1:])
                        and (batch.segment_ids[row, span] == batch.segment_id[s]).all()
                        and np.array_equal(batch.position_ids[row, span], np.arange(n))
                        and (batch.loss_weights[row, span] == expected_weights).all()):
                    raise PackingError(f"batch {batch.index} row {row} segment {s}: positions {column}..{column + n} "
                                       f"do not hold transitions {start}..{start + n} of document "
                                       f"{self.document_ids[d]!r}")
                covered[d].append((start, n))
                scored += n
                weighted += int(np.count_nonzero(batch.loss_weights[row, span]))
            real = int((batch.segment_ids >= 0).sum())
            if real != int(batch.segment_length.sum()):
                raise PackingError(f"batch {batch.index}: {real} real positions but segments cover "
                                   f"{int(batch.segment_length.sum())}")
        if (seen_rows != 1).any():
            row = int(np.flatnonzero(seen_rows != 1)[0])
            raise PackingError(f"plan row {row} appears {int(seen_rows[row])} times in the epoch; expected once")
        cropped = 0
        for d in range(documents):
            transitions = max(int(self.offsets[d + 1] - self.offsets[d]) - 1, 0)
            position = 0
            for start, n in sorted(covered[d]):
                if start != position:
                    raise PackingError(f"document {self.document_ids[d]!r}: transition {position} is "
                                       f"{'missing' if start > position else 'scored twice'}")
                position = start + n
            if self.strategy == "bfd" and position != transitions:
                raise PackingError(f"document {self.document_ids[d]!r}: transitions {position}..{transitions} "
                                   "are never scored")
            cropped += transitions - position
        if cropped != self.cropped_transitions:
            raise PackingError(f"{cropped} transitions are cropped, but the plan reports {self.cropped_transitions}")
        if self._roles is None:
            flagged = self.transitions
        else:  # targets are every token but each document's first
            firsts = self.offsets[:-1][np.diff(self.offsets) > 0]
            flagged = int(np.count_nonzero(self._roles)) - int(np.count_nonzero(self._roles[firsts]))
        return PackedAudit(batches=self._batch_count, rows=self.rows, documents=documents,
                           transitions=self.transitions, scored=scored, cropped=cropped, weighted=weighted,
                           flagged=flagged)

    def __repr__(self) -> str:
        return (f"PackedEpoch(partition={self.partition.value!r}, L={self.row_length}, B={self._batch_size}, "
                f"strategy={self.strategy!r}, order={self.batch_config.order}, rows={self.rows}, "
                f"batches={self._batch_count}, fill={self.fill_efficiency:.4f})")


def _bos_crop_plan(offsets: np.ndarray, row_length: int, buffer_size: int):
    from engine.packing import PackingPlan

    documents = offsets.shape[0] - 1
    piece_document = np.empty(documents, np.int64)
    piece_length = np.empty(documents, np.int64)
    piece_row = np.empty(documents, np.int64)
    piece_column = np.empty(documents, np.int64)
    piece_segment = np.empty(documents, np.int32)
    pieces, rows, cropped = kernels.bos_crop_plan(offsets, row_length, min(buffer_size, max(documents, 1)),
                                                  piece_document, piece_length, piece_row, piece_column, piece_segment)
    plan = PackingPlan(
        row_length=row_length, rows=int(rows), piece_document=piece_document[:pieces],
        piece_source_start=np.zeros(pieces, np.int64), piece_length=piece_length[:pieces],
        piece_row=piece_row[:pieces], piece_column=piece_column[:pieces], piece_segment=piece_segment[:pieces],
        skipped_documents=np.flatnonzero(np.diff(offsets) < 2).astype(np.int64),
    )
    return plan, cropped


_OUT_DTYPES = (None, np.dtype(np.int32), np.dtype(np.int32), np.dtype(np.uint8))


def _row_buffers(rows: int, length: int, out: Any, dtype: Any) -> tuple[np.ndarray, ...]:
    """The five ``[rows, L]`` outputs: fresh, or the first ``rows`` rows of ``out`` after checking it."""
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype not in ROW_DTYPES:
            raise ConfigurationError(f"dtype={dtype}: expected uint32, int32 or int64 token ids")
    if out is None:
        ids = dtype or np.dtype(np.uint32)
        return (np.empty((rows, length), ids), np.empty((rows, length), ids), np.empty((rows, length), np.int32),
                np.empty((rows, length), np.int32), np.empty((rows, length), np.uint8))
    if not isinstance(out, (tuple, list)) or len(out) != 5:
        raise ConfigurationError("out must be (inputs, targets, segment_ids, position_ids, loss_weights)")
    ids = dtype or np.dtype(getattr(out[0], "dtype", np.uint32))
    names = ("inputs", "targets", "segment_ids", "position_ids", "loss_weights")
    for name, array, expected in zip(names, out, (ids, ids) + _OUT_DTYPES[1:]):
        if (not isinstance(array, np.ndarray) or array.ndim != 2 or array.shape[1] != length or array.shape[0] < rows
                or array.dtype != expected or not array.flags.c_contiguous or not array.flags.writeable):
            raise ConfigurationError(
                f"out {name}: expected a writeable C-contiguous {expected} array of at least {rows} rows of {length}, "
                f"got {getattr(array, 'dtype', type(array).__name__)} {getattr(array, 'shape', '')}"
            )
    if ids not in ROW_DTYPES:
        raise ConfigurationError(f"out inputs: dtype {ids}, expected uint32, int32 or int64 token ids")
    return tuple(array[:rows] for array in out)


def _row_order(rows: int, order, epoch: int) -> tuple[np.ndarray, int | None]:
    """Plan row indices in epoch ``epoch``'s order (read-only) and the Fisher–Yates seed used (None
    for a sequential order): SplitMix64 seeded with ``epoch_seed(order.seed, epoch)`` (module docstring)."""
    row_order = np.arange(rows, dtype=np.int64)
    seed = None
    if order.is_shuffled:
        seed = epoch_seed(order.seed, epoch)
        shuffle_kernels.fisher_yates_shuffle(row_order, np.uint64(seed))
    row_order.flags.writeable = False
    return row_order, seed


def _rebuild_packed(source, partition, row_length, batches, strategy, roles, epoch, buffer_size) -> PackedEpoch:
    return PackedEpoch.build(source, partition, row_length=row_length, batches=batches, strategy=strategy,
                             roles=roles, epoch=epoch, buffer_size=buffer_size)
