"""The epoch audit reports the worked epoch as clean and catches each kind of broken epoch."""

from __future__ import annotations

import json

import numpy as np
import pytest

import engine.batches
from engine.audit import audit_epoch
from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.corpus import Partition
from engine.errors import ConfigurationError
from engine.store import EncodedDocument
from engine.windows import CausalWindowConfig

TRAIN = Partition.TRAIN


def doc(doc_id, tokens, partition=TRAIN):
    return EncodedDocument(doc_id, partition, np.array(tokens, dtype=np.uint32))


WORKED = [doc("train-a", [0, 10, 11, 12, 1]), doc("train-b", [0, 20, 21, 1])]


def build(documents=WORKED, seed=7, T=2, S=1, B=3):
    order = BatchOrder.sequential() if seed is None else BatchOrder.shuffled(seed)
    return MiniBatchEpoch.build(documents, "train", windows=CausalWindowConfig(T, S),
                                batches=MiniBatchConfig(B, order))


def bigger_documents():
    rng = np.random.default_rng(3)
    return [doc(f"d{i}", rng.integers(0, 300, size=n)) for i, n in enumerate([0, 2, 9, 30, 17, 3, 41])]


def test_worked_epoch_proof_line():
    report = audit_epoch(build())
    assert report.ok
    assert (report.covered_windows, report.expected_windows) == (5, 5)
    assert report.duplicate_windows == report.padding_ids_added == report.cross_partition_windows == 0
    assert report.replay_same and report.different_seed == 8
    assert report.different_seed_changes_order and report.different_seed_same_membership
    data = report.to_dict()
    assert json.loads(json.dumps(data)) == data and data["ok"] is True
    assert report.summary().startswith("ok: coverage 5/5, duplicates 0")


@pytest.mark.parametrize("seed, T, S, B", [(None, 4, 1, 8), (11, 4, 3, 5), (2**64 - 1, 1, 2, 1), (0, 40, 1, 2)])
def test_clean_epochs_pass(seed, T, S, B):
    report = audit_epoch(build(bigger_documents(), seed=seed, T=T, S=S, B=B))
    assert report.ok, report.summary()
    if seed is None:
        assert report.different_seed is None and report.different_seed_changes_order is None
    if seed == 2**64 - 1:
        assert report.different_seed == 0  # the next seed wraps around


def test_empty_epoch_is_clean():
    report = audit_epoch(build([doc("a", [0, 1])], T=3))
    assert report.ok and report.expected_windows == 0 and report.batch_count == 0


def sabotaged(positions):
    epoch = build(bigger_documents(), seed=5, T=4, S=1, B=7)
    epoch._positions = np.asarray(positions(epoch.positions.copy()), dtype=np.int64)
    return epoch


def test_duplicate_and_missing_window_are_counted():
    def duplicate(p):
        p[1] = p[0]
        return p

    report = audit_epoch(sabotaged(duplicate))
    assert not report.ok
    assert report.duplicate_windows == 1 and report.covered_windows == report.expected_windows - 1
    assert not report.replay_same  # the rebuilt epoch no longer matches


def test_dropped_window_is_missing_coverage():
    report = audit_epoch(sabotaged(lambda p: p[:-1]))
    assert not report.ok and report.covered_windows == report.expected_windows - 1


def test_window_crossing_a_document_is_unexpected():
    epoch = build(bigger_documents(), seed=None, T=4, B=7)
    # d2 has 9 tokens: start 5 would need tokens 5..9, i.e. one token of the next document.
    positions = epoch.positions.copy()
    positions[-1] = int(epoch.offsets[2]) + 5
    epoch._positions = positions
    report = audit_epoch(epoch)
    assert not report.ok and report.unexpected_windows == 1 and report.covered_windows == report.expected_windows - 1


def test_wrong_tokens_are_mismatched_rows(monkeypatch):
    def off_by_one(values, positions, lo, hi, T, inputs, targets):
        for r, p in enumerate(positions[lo:hi]):
            inputs[r] = values[p + 1 : p + T + 1]
            targets[r] = values[p + 1 : p + T + 1]
        return False

    epoch = build(bigger_documents(), seed=5, T=4, B=7)
    monkeypatch.setattr(engine.batches.window_kernels, "gather_batch", off_by_one)
    report = audit_epoch(epoch)
    assert not report.ok and report.mismatched_rows == epoch.window_count


def test_padding_is_counted(monkeypatch):
    epoch = build()
    real_batch = MiniBatchEpoch.batch

    def padded(self, k, out=None, **options):
        batch = real_batch(self, k, **options)
        batch.inputs = np.vstack([batch.inputs, np.zeros((1, 2), np.uint32)])  # one padding row
        return batch

    monkeypatch.setattr(MiniBatchEpoch, "batch", padded)
    report = audit_epoch(epoch)
    assert not report.ok and report.padding_ids_added == 2 * epoch.batch_count


def test_cross_partition_rows_are_counted():
    epoch = build()
    # The source now says train-b is a validation document: its two windows cross the partition.
    epoch.source = [WORKED[0], doc("train-b", [0, 20, 21, 1], Partition.VALIDATION)]
    report = audit_epoch(epoch)
    assert not report.ok and report.cross_partition_windows == 2


def test_replay_difference_is_detected(monkeypatch):
    epoch = build(bigger_documents(), seed=5, T=4, B=7)
    monkeypatch.setattr(MiniBatchEpoch, "with_order",
                        lambda self, order: MiniBatchEpoch.build(
                            self.source, self.partition, windows=self.window_config,
                            batches=MiniBatchConfig(self.batch_size, BatchOrder.shuffled(99))))
    report = audit_epoch(epoch)
    assert not report.replay_same and not report.ok


def test_membership_change_under_other_seed_is_detected(monkeypatch):
    epoch = build(bigger_documents(), seed=5, T=4, B=7)
    real = MiniBatchEpoch.with_order

    def losing_one(self, order):
        rebuilt = real(self, order)
        if order.seed != self.order.seed:
            rebuilt._positions = rebuilt.positions[:-1]
        return rebuilt

    monkeypatch.setattr(MiniBatchEpoch, "with_order", losing_one)
    report = audit_epoch(epoch)
    assert report.different_seed_same_membership is False and not report.ok


def test_audit_needs_an_epoch():
    with pytest.raises(ConfigurationError, match="audit_epoch needs a MiniBatchEpoch, got list"):
        audit_epoch([1, 2, 3])


def test_shakespeare_as_one_document(shakespeare_text):
    ids = np.frombuffer(shakespeare_text.encode("utf-8"), dtype=np.uint8).astype(np.uint32) + 2
    tokens = np.concatenate([[0], ids, [1]]).astype(np.uint32)
    epoch = build([doc("tinyshakespeare", tokens)], seed=2024, T=64, S=997, B=32)
    assert epoch.window_count == (tokens.shape[0] - 65) // 997 + 1
    report = audit_epoch(epoch)
    assert report.ok, report.summary()
    assert report.covered_windows == epoch.window_count and report.different_seed_changes_order


def test_position_past_the_end_is_reported_not_crashed(monkeypatch):
    epoch = build(bigger_documents(), seed=None, T=4, B=7)
    positions = epoch.positions.copy()
    positions[0] = epoch.values.shape[0] + 3
    epoch._positions = positions
    # The real kernel would read past the buffer; the audit itself must not.
    monkeypatch.setattr(engine.batches.window_kernels, "gather_batch", lambda values, p, lo, hi, T, a, b: False)
    report = audit_epoch(epoch)
    assert not report.ok and report.unexpected_windows == 1 and report.mismatched_rows >= 1
