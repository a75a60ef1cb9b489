"""Evidence about an epoch, computed by rebuilding and gathering — never assumed.

``audit_epoch`` checks one ``MiniBatchEpoch`` against the window rule of ``engine.windows`` and the
epoch rules of ``engine.batches``:
- coverage: the expected windows are recomputed with plain numpy from the partition's offsets
  (``(n - (T+1)) // S + 1`` per document, starts ``0, S, 2S, ...``), independently of the kernels;
  every batch is then built with ``epoch.batch(k)`` and its rows' descriptors collected, so each
  expected window must appear exactly once (no duplicates, nothing unexpected);
- tokens: every gathered row is compared with its document slice read by numpy fancy indexing;
- shapes: every batch has width ``B`` except the last (the remainder); padding ids added = cells
  beyond ``width * T`` (must be 0);
- partitions: every row's document id must belong to the epoch's partition in the source;
- scored targets: for documents with role flags, each row's ``loss_weights`` must equal the flags of
  its targets (numpy slices), and the sum of the batches' ``token_count`` (scored targets) must
  equal what the flags of the expected windows' targets count; without flags both are
  ``windows * T``;
- replay: the epoch rebuilt from its source with the same order has the same descriptors, state
  and rows; another seed (``seed + 1``) must keep membership and, with at least
  ``ORDER_CHANGE_MIN_WINDOWS`` windows, change the order (below that a different seed may give the
  same permutation by chance: with n windows the chance is 1/n!).

Cost: two more epoch builds, one gather of every row, and a sort of the descriptors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from engine.batches import BatchOrder, MiniBatchEpoch
from engine.buffers import as_token_buffers
from engine.partition import Partition
from engine.errors import ConfigurationError, EngineError

__all__ = ["AuditReport", "audit_epoch"]

ORDER_CHANGE_MIN_WINDOWS = 8


@dataclass(frozen=True)
class AuditReport:
    """What ``audit_epoch`` found; ``ok`` is True when every check holds."""

    partition: str
    context_length: int
    stride: int
    batch_size: int
    order: str
    expected_windows: int
    covered_windows: int
    duplicate_windows: int
    unexpected_windows: int
    batch_count: int
    wrong_width_batches: int
    padding_ids_added: int
    mismatched_rows: int
    cross_partition_windows: int
    replay_same: bool
    different_seed: int | None
    different_seed_changes_order: bool | None
    different_seed_same_membership: bool | None
    rebuild_error: str | None = None
    # Documents with role flags: targets with loss weight 1 in the batches, and what the flags of
    # the expected windows' targets say (numpy); without flags both count every target.
    scored_targets: int = 0
    expected_scored_targets: int = 0

    @property
    def ok(self) -> bool:
        order_ok = (
            self.different_seed_changes_order is None
            or self.different_seed_changes_order
            or self.expected_windows < ORDER_CHANGE_MIN_WINDOWS
        )
        return (
            self.covered_windows == self.expected_windows
            and self.duplicate_windows == 0
            and self.unexpected_windows == 0
            and self.wrong_width_batches == 0
            and self.padding_ids_added == 0
            and self.mismatched_rows == 0
            and self.cross_partition_windows == 0
            and self.replay_same
            and self.different_seed_same_membership is not False
            and self.scored_targets == self.expected_scored_targets
            and order_ok
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}

    def summary(self) -> str:
        """One line: the figures a reader checks first."""
        if self.different_seed is None:
            seed_text = "different seed: n/a (sequential)"
        else:
            changed = "changed" if self.different_seed_changes_order else "same"
            membership = "same" if self.different_seed_same_membership else "DIFFERENT"
            seed_text = f"seed {self.different_seed}: order {changed}, membership {membership}"
        return (
            f"{'ok' if self.ok else 'FAILED'}: coverage {self.covered_windows}/{self.expected_windows}, "
            f"duplicates {self.duplicate_windows}, unexpected {self.unexpected_windows}, "
            f"padding {self.padding_ids_added}, mismatched rows {self.mismatched_rows}, "
            f"cross-partition {self.cross_partition_windows}, wrong-width batches {self.wrong_width_batches}, "
            f"replay {'same' if self.replay_same else 'DIFFERENT'}, {seed_text}, "
            f"scored targets {self.scored_targets}/{self.expected_scored_targets}"
            + (f" (rebuild failed: {self.rebuild_error})" if self.rebuild_error else "")
        )


def _expected_positions(offsets: np.ndarray, context_length: int, stride: int) -> np.ndarray:
    """Every complete window's packed position, in document order, by plain numpy."""
    lengths = np.diff(offsets)
    required = context_length + 1
    counts = np.where(lengths >= required, (lengths - required) // stride + 1, 0)
    total = int(counts.sum())
    first_slot = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(offsets[:-1], counts) + (np.arange(total, dtype=np.int64) - first_slot) * stride


def _partition_ids(source, partition: Partition) -> set[str]:
    """Ids the source lists in ``partition`` (documents it holds of other partitions left out)."""
    return set(as_token_buffers(source, partition, skip_other_partitions=True).ids)


def audit_epoch(epoch: MiniBatchEpoch) -> AuditReport:
    """Rebuild, gather and compare; see the module docstring for each check."""
    if not isinstance(epoch, MiniBatchEpoch):
        raise ConfigurationError(f"audit_epoch needs a MiniBatchEpoch, got {type(epoch).__name__}")
    # The int64 forms of T and S give the same windows for every array (see CausalWindowConfig).
    T, S, B = epoch.window_config.kernel_context_length, epoch.window_config.kernel_stride, epoch.batch_size
    values, offsets = epoch.values, epoch.offsets
    expected = _expected_positions(offsets, T, S)
    allowed_ids = _partition_ids(epoch.source, epoch.partition)
    # Per document of the epoch: does the source list its id in the epoch's partition?
    document_allowed = np.array([doc_id in allowed_ids for doc_id in epoch.document_ids], dtype=bool)

    seen = np.empty(epoch.window_count, dtype=np.int64)
    row = 0
    wrong_width = padding = mismatched = cross_partition = 0
    rows_needed = min(B, epoch.window_count)  # no window: T may exceed any array, allocate nothing
    buffer = (np.empty((rows_needed, T if rows_needed else 0), dtype=np.uint32),
              np.empty((rows_needed, T if rows_needed else 0), dtype=np.uint32))
    # The flags the batches must follow, read from the source again (not the epoch's own copy).
    roles = as_token_buffers(epoch.source, epoch.partition).roles if epoch.roles is not None else None
    if roles is not None:
        buffer = (*buffer, np.empty((rows_needed, T if rows_needed else 0), dtype=np.uint8))
    scored = 0
    columns = np.arange(T if rows_needed else 0, dtype=np.int64)
    last = epoch.batch_count - 1
    for k in range(epoch.batch_count):
        batch = epoch.batch(k, out=buffer)
        width = batch.width
        expected_width = B if k < last else epoch.window_count - last * B
        wrong_width += width != expected_width or width == 0
        padding += batch.inputs.size - width * T + batch.targets.size - width * T
        document_index = batch.document_index
        source_rows = offsets[document_index] + batch.start
        if batch.inputs.shape == batch.targets.shape == (width, T):
            inside = (source_rows >= 0) & (source_rows + T < values.shape[0])
            index = np.where(inside, source_rows, 0)[:, None] + columns
            same = (values[index] == batch.inputs).all(axis=1) & (values[index + 1] == batch.targets).all(axis=1)
            if roles is not None:  # the weight at input position t is the flag of target t + 1
                same &= (roles[index + 1] == batch.loss_weights).all(axis=1)
            mismatched += int(np.count_nonzero(~(same & inside)))
        else:
            mismatched += width
        if batch.partition != epoch.partition:
            cross_partition += width
        else:
            known = document_index < document_allowed.shape[0]  # a corrupt position may lie past the end
            cross_partition += int(np.count_nonzero(~document_allowed[document_index[known]]))
        seen[row : row + width] = source_rows
        row += width
        scored += batch.token_count

    if roles is None:
        expected_scored = int(expected.shape[0]) * T
    else:
        prefix = np.concatenate([[0], np.cumsum(roles, dtype=np.int64)])
        expected_scored = int((prefix[expected + T + 1] - prefix[expected + 1]).sum()) if expected.size else 0
    unique = np.unique(seen[:row])
    covered = int(np.count_nonzero(np.isin(unique, expected, assume_unique=True)))

    rebuild_error = None
    other_seed = changes_order = same_membership = None
    try:
        replay = epoch.with_order(epoch.order)
        replay_same = (
            np.array_equal(replay.positions, epoch.positions)
            and replay.shuffle_state_after == epoch.shuffle_state_after
            and all(_same_rows(epoch, replay, k) for k in ([] if last < 0 else sorted({0, last})))
        )
        if epoch.order.is_shuffled:
            other_seed = (epoch.order.seed + 1) % (1 << 64)
            other = epoch.with_order(BatchOrder.shuffled(other_seed))
            changes_order = not np.array_equal(other.positions, epoch.positions)
            same_membership = np.array_equal(np.sort(other.positions), np.sort(epoch.positions))
    except EngineError as exc:  # the source no longer builds this epoch: that is a finding, not a crash
        replay_same = False
        rebuild_error = str(exc)

    return AuditReport(
        partition=epoch.partition.value,
        context_length=T,
        stride=S,
        batch_size=B,
        order=str(epoch.order),
        expected_windows=int(expected.shape[0]),
        covered_windows=covered,
        duplicate_windows=row - int(unique.shape[0]),
        unexpected_windows=int(unique.shape[0]) - covered,
        batch_count=epoch.batch_count,
        wrong_width_batches=int(wrong_width),
        padding_ids_added=int(padding),
        mismatched_rows=mismatched,
        cross_partition_windows=int(cross_partition),
        replay_same=bool(replay_same),
        different_seed=other_seed,
        different_seed_changes_order=changes_order,
        different_seed_same_membership=None if same_membership is None else bool(same_membership),
        rebuild_error=rebuild_error,
        scored_targets=int(scored),
        expected_scored_targets=expected_scored,
    )


def _same_rows(first: MiniBatchEpoch, second: MiniBatchEpoch, k: int) -> bool:
    a, b = first.batch(k), second.batch(k)
    return (np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
            and (a.loss_weights is None) == (b.loss_weights is None)
            and (a.loss_weights is None or np.array_equal(a.loss_weights, b.loss_weights)))
