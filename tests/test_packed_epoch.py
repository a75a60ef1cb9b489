"""Packed epochs (engine.packed): plan, seeded row order, batch(k), ranks, audit — against plain-loop twins."""

from __future__ import annotations

import numpy as np
import pytest

from engine import BatchOrder, MiniBatchConfig
from engine.corpus import Partition
from engine.errors import BatchError, ConfigurationError, PackingError
from engine.packed import PackedEpoch, epoch_seed
from engine.store import EncodedDocument
from tests.naive_packing import naive_bos_crop, naive_epoch_seed, naive_pack, naive_rows_from_pieces
from tests.naive_windows import fisher_yates

FIELDS = ("inputs", "targets", "segment_ids", "position_ids", "loss_weights")


def make_documents(seed=0, count=40, longest=30, partition="train"):
    rng = np.random.default_rng(seed)
    lengths = [0, 1, 2] + [int(n) for n in rng.integers(0, longest, size=count)]
    return [EncodedDocument(f"doc-{d}", Partition(partition), rng.integers(0, 1000, size=n).astype(np.uint32))
            for d, n in enumerate(lengths)]


def expected_rows(documents, row_length, strategy, buffer_size=1000, roles=None):
    tokens = [d.tokens.tolist() for d in documents]
    if strategy == "bfd":
        out, pieces, placed = naive_pack(tokens, row_length, "bfd", roles)
        table = [(d, s, n, *where) for (d, s, n), where in zip(pieces, placed)]
        return out, table, len(out["inputs"]), 0
    pieces, rows, cropped = naive_bos_crop([len(t) for t in tokens], row_length, buffer_size)
    table = [(d, 0, n, row, column, segment) for d, n, row, column, segment in pieces]
    return naive_rows_from_pieces(tokens, row_length, table, rows, roles), table, rows, cropped


def check_epoch(epoch, documents, row_length, strategy, seed, epoch_index=0, buffer_size=1000, roles=None):
    out, table, rows, cropped = expected_rows(documents, row_length, strategy, buffer_size, roles)
    order = list(range(rows)) if seed is None else fisher_yates(list(range(rows)), naive_epoch_seed(seed, epoch_index))[0]
    assert epoch.rows == rows and epoch.cropped_transitions == cropped
    assert epoch.row_order.tolist() == order
    batch_size = epoch.batch_size
    assert epoch.batch_count == -(-rows // batch_size)
    for k in range(epoch.batch_count):
        batch = epoch.batch(k)
        chosen = order[k * batch_size : (k + 1) * batch_size]
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(batch, name), np.array([out[name][r] for r in chosen]).reshape(
                len(chosen), row_length), err_msg=name)
        segments = [(chosen.index(row), segment, column, d, s, n)
                    for d, s, n, row, column, segment in table if row in chosen]
        segments.sort()
        got = list(zip(batch.segment_row.tolist(), batch.segment_id.tolist(), batch.segment_column.tolist(),
                       batch.segment_document.tolist(), batch.segment_source_start.tolist(),
                       batch.segment_length.tolist()))
        assert got == segments


@pytest.mark.parametrize("strategy", ["bfd", "bos_crop"])
@pytest.mark.parametrize("seed, epoch_index", [(None, 0), (7, 0), (7, 3), (2**64 - 1, 1)])
def test_batches_equal_the_naive_twin(strategy, seed, epoch_index):
    documents = make_documents(seed=1)
    order = BatchOrder.sequential() if seed is None else BatchOrder.shuffled(seed)
    epoch = PackedEpoch.build(documents, "train", row_length=16, batches=MiniBatchConfig(3, order),
                              strategy=strategy, epoch=epoch_index, buffer_size=5)
    check_epoch(epoch, documents, 16, strategy, seed, epoch_index, buffer_size=5)


def test_roles_shift_with_targets_and_int64_out():
    documents = make_documents(seed=4, count=12)
    rng = np.random.default_rng(0)
    roles = [rng.integers(0, 2, size=len(d.tokens)).astype(np.uint8) for d in documents]
    epoch = PackedEpoch.build(documents, "train", row_length=8, batches=MiniBatchConfig(2, BatchOrder.shuffled(3)),
                              roles=roles)
    check_epoch(epoch, documents, 8, "bfd", 3, roles=[r.tolist() for r in roles])
    buffers = (np.empty((4, 8), np.int64), np.empty((4, 8), np.int64), np.empty((4, 8), np.int32),
               np.empty((4, 8), np.int32), np.empty((4, 8), np.uint8))
    batch = epoch.batch(1, out=buffers)
    assert batch.inputs.base is buffers[0] or batch.inputs is buffers[0] or np.shares_memory(batch.inputs, buffers[0])
    np.testing.assert_array_equal(batch.inputs, epoch.batch(1).inputs.astype(np.int64))
    assert epoch.batch(0, dtype="int64").targets.dtype == np.int64
    assert epoch.audit().scored == epoch.transitions


def test_bos_crop_rows_start_at_document_starts_and_report_the_crop():
    # Lengths (transitions): 9, 3, 6, 2 with L = 8 and a buffer of 2.
    documents = [EncodedDocument(f"d{k}", Partition.TRAIN, np.arange(n + 1, dtype=np.uint32)) for k, n in
                 enumerate([9, 3, 6, 2])]
    epoch = PackedEpoch.build(documents, "train", row_length=8, batches=MiniBatchConfig(4), strategy="bos_crop",
                              buffer_size=2)
    # Row 0: buffer {9, 3}: 3 fits (3), then buffer {9, 6}: nothing fits 5 -> 6 cropped to 5 (1 cropped).
    # Row 1: buffer {9, 2}: 2 fits, then {9}: 9 cropped to 6 (3 cropped).
    plan = epoch.plan
    assert plan.piece_document.tolist() == [1, 2, 3, 0]
    assert plan.piece_length.tolist() == [3, 5, 2, 6]
    assert plan.piece_row.tolist() == [0, 0, 1, 1]
    assert (plan.piece_source_start == 0).all()
    assert epoch.cropped_transitions == 4 and epoch.cropped_share == 4 / 20
    report = epoch.audit()
    assert (report.transitions, report.scored, report.cropped) == (20, 16, 4)
    assert not report.every_transition_once


def test_audit_proves_every_transition_once_and_catches_a_broken_plan():
    documents = make_documents(seed=2, count=60, longest=50)
    epoch = PackedEpoch.build(documents, "train", row_length=12, batches=MiniBatchConfig(5, BatchOrder.shuffled(1)))
    report = epoch.audit()
    assert report.every_transition_once
    assert report.transitions == sum(max(len(d.tokens) - 1, 0) for d in documents)
    assert report.rows == epoch.rows and report.batches == epoch.batch_count
    long_piece = int(np.flatnonzero(epoch.plan.piece_source_start > 0)[0])
    epoch.plan.piece_source_start[long_piece] += 1
    with pytest.raises(PackingError, match="document 'doc-.*': transition"):
        epoch.audit()


def test_ranks_split_each_batch_and_too_many_ranks_is_an_error():
    documents = make_documents(seed=3)
    epoch = PackedEpoch.build(documents, "train", row_length=16, batches=MiniBatchConfig(4, BatchOrder.shuffled(5)))
    last = epoch.batch_count - 1
    for k in (0, last):
        whole = epoch.batch(k)
        for world in range(1, whole.width + 1):
            shares = [epoch.batch(k, rank=r, world_size=world) for r in range(world)]
            for name in FIELDS:
                np.testing.assert_array_equal(np.concatenate([getattr(s, name) for s in shares]), getattr(whole, name))
            assert sum(s.segments for s in shares) == whole.segments
    with pytest.raises(BatchError, match="fewer than world_size=5"):
        epoch.batch(0, rank=0, world_size=5)
    with pytest.raises(ConfigurationError, match="0 <= rank < world_size"):
        epoch.batch(0, rank=2, world_size=2)


def test_same_seed_replays_other_seed_reorders_rows_only():
    documents = make_documents(seed=5)
    config = dict(row_length=16, strategy="bfd")
    a = PackedEpoch.build(documents, "train", batches=MiniBatchConfig(3, BatchOrder.shuffled(9)), **config)
    b = PackedEpoch.build(documents, "train", batches=MiniBatchConfig(3, BatchOrder.shuffled(9)), **config)
    c = PackedEpoch.build(documents, "train", batches=MiniBatchConfig(3, BatchOrder.shuffled(10)), **config)
    np.testing.assert_array_equal(a.batch(2).inputs, b.batch(2).inputs)
    assert a.row_order.tolist() != c.row_order.tolist()
    assert sorted(a.row_order.tolist()) == sorted(c.row_order.tolist()) == list(range(a.rows))
    batch = a.batch(1)
    record = batch.segment(0)
    assert record["partition"] == "train" and record["document_id"] == documents[record["document_index"]].id


def test_epoch_seed_follows_the_spec_rule():
    for seed in (0, 1, 12345, 2**64 - 1):
        for e in (0, 1, 2, 1000):
            assert epoch_seed(seed, e) == naive_epoch_seed(seed, e)
    assert epoch_seed(5, 0) == 5


def test_errors_name_the_problem():
    documents = make_documents(seed=6, count=5)
    config = MiniBatchConfig(2)
    with pytest.raises(ConfigurationError, match="strategy='sequential' is not one of"):
        PackedEpoch.build(documents, "train", row_length=8, batches=config, strategy="sequential")
    with pytest.raises(BatchError, match="belongs to partition 'train'"):
        PackedEpoch.build(documents, "validation", row_length=8, batches=config)
    with pytest.raises(ConfigurationError, match="row_length=0"):
        PackedEpoch.build(documents, "train", row_length=0, batches=config)
    with pytest.raises(ConfigurationError, match="buffer_size=0"):
        PackedEpoch.build(documents, "train", row_length=8, batches=config, buffer_size=0)
    epoch = PackedEpoch.build(documents, "train", row_length=8, batches=config)
    with pytest.raises(BatchError, match=f"this epoch has {epoch.batch_count} batches"):
        epoch.batch(epoch.batch_count)
    with pytest.raises(ConfigurationError, match="out inputs"):
        epoch.batch(0, out=(np.empty((1, 8), np.uint32),) * 5)
    empty = PackedEpoch.build([], "train", row_length=8, batches=config)
    assert empty.rows == 0 and empty.batch_count == 0 and empty.audit().scored == 0


def test_pack_command_seed_batch_size_and_bos_crop(tmp_path):
    import json

    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from engine.cli import main
    from engine.store import TokenStore
    from tests.fakes import ByteIdsTokenizer

    tok = ByteIdsTokenizer()
    texts = {"a": "hello world", "b": "hi", "c": "packing rows of eight tokens", "d": "x" * 20, "e": "seven!"}
    encoded = [EncodedDocument(i, Partition.TRAIN, tok.encode_document(t, i)) for i, t in texts.items()]
    store = TokenStore.write(tmp_path / "store", {Partition.TRAIN: encoded}, tok)
    for strategy in ("bfd", "bos_crop"):
        out = tmp_path / f"packed-{strategy}"
        args = ["pack", str(tmp_path / "store"), "--row-length", "8", "--strategy", strategy, "--seed", "4",
                "--batch-size", "3", "--out", str(out), "--json"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        epoch = PackedEpoch.build(store, "train", row_length=8, strategy=strategy,
                                  batches=MiniBatchConfig(3, BatchOrder.shuffled(4)))
        assert report["rows"] == epoch.rows and report["batches"] == epoch.batch_count
        assert report["waste"] == pytest.approx(1 - epoch.fill_efficiency)
        assert report["cropped_share"] == pytest.approx(epoch.cropped_share)
        assert (report["cropped_share"] > 0) == (strategy == "bos_crop")
        table = pq.read_table(out / "rows.parquet")
        assert table.column("inputs").to_pylist() == epoch.materialise().inputs.tolist()
    text = CliRunner().invoke(main, ["pack", str(tmp_path / "store"), "--row-length", "8", "--strategy", "bos_crop"])
    assert "cropped:" in text.output and "waste (padding)" in text.output
    bad = CliRunner().invoke(main, ["pack", str(tmp_path / "store"), "--row-length", "8", "--strategy", "sequential",
                                    "--seed", "1"])
    assert bad.exit_code == 2 and "--seed applies to --strategy bfd or bos_crop" in bad.output
