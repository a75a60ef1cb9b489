"""Role flags downstream: windows' loss_weights (the flag of each target), packed rows and packing
from a store with roles, mixtures, TokenDataset labels, token counts and audits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.audit import audit_epoch
from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.buffers import EncodedDocument
from engine.kernels import windows as window_kernels
from engine.mixing import Mixture
from engine.packed import PackedEpoch
from engine.packing import pack_documents
from engine.store import TokenStore
from engine.tokenizers.byte_bpe import ByteBpeTokenizer
from engine.windows import CausalWindowConfig
from tests import naive_windows

TOK = ByteBpeTokenizer([bytes([b]) for b in range(256)], specials={"<bos>": 256, "<eos>": 257})


def _documents(seed=0, n=9):
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        length = int(rng.integers(1, 30))
        tokens = rng.integers(0, 256, length).astype(np.uint32)
        roles = (rng.random(length) < 0.4).astype(np.uint8)
        docs.append(EncodedDocument(f"d{i}", "train", tokens, roles))
    return docs


@pytest.fixture
def store(tmp_path):
    return TokenStore.write(tmp_path / "s", {"train": _documents()}, TOK, roles=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1), min_size=2, max_size=60), st.integers(1, 8), st.data())
def test_gather_weights_equals_its_plain_twin(roles, context_length, data):
    roles_array = np.array(roles, np.uint8)
    valid = len(roles) - context_length
    if valid < 1:
        return
    positions = data.draw(st.lists(st.integers(0, valid - 1), min_size=0, max_size=10))
    lo = data.draw(st.integers(0, len(positions)))
    hi = data.draw(st.integers(lo, len(positions) + 2))
    rows = min(hi, len(positions)) - lo
    out = np.full((max(rows, 0), context_length), 7, np.uint8)
    window_kernels.gather_weights(roles_array, np.array(positions, np.int64), lo, hi, context_length, out)
    assert out.tolist() == naive_windows.gather_weights(roles, positions, lo, hi, context_length)


def test_window_loss_weights_are_the_flags_of_the_targets(store):
    docs = store.documents("train")
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(4, 2),
                                 batches=MiniBatchConfig(3, BatchOrder.shuffled(5)))
    assert epoch.fields == ("loss_weights",)
    total = 0
    for batch in epoch:
        assert batch.loss_weights.dtype == np.uint8 and batch.loss_weights.shape == batch.inputs.shape
        for row, (d, s) in enumerate(zip(batch.document_index.tolist(), batch.start.tolist())):
            assert batch.inputs[row].tolist() == docs[d].tokens[s:s + 4].tolist()
            assert batch.loss_weights[row].tolist() == docs[d].roles[s + 1:s + 5].tolist()
        assert batch.token_count == int(batch.loss_weights.sum())
        total += batch.token_count
    report = audit_epoch(epoch)
    assert report.ok and report.scored_targets == report.expected_scored_targets == total > 0
    # out buffers and rank shares give the same weights
    out = (np.empty((3, 4), np.int64), np.empty((3, 4), np.int64), np.empty((3, 4), np.uint8))
    first = epoch.batch(0)
    again = epoch.batch(0, out)
    assert np.array_equal(again.loss_weights, first.loss_weights) and again.loss_weights.base is out[2]
    share = epoch.batch(0, rank=1, world_size=2)
    lo = 3 // 2
    assert np.array_equal(share.loss_weights, first.loss_weights[lo:])


def test_audit_catches_weights_that_do_not_follow_the_flags(store):
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(4, 1),
                                 batches=MiniBatchConfig(4, BatchOrder.sequential()))
    assert audit_epoch(epoch).ok
    epoch.roles = np.ascontiguousarray(np.roll(epoch.roles, 1))  # weights one token early: the input's flag
    report = audit_epoch(epoch)
    assert not report.ok and report.mismatched_rows > 0


def test_store_without_roles_has_no_weights(tmp_path):
    docs = [EncodedDocument("a", "train", np.array([256, 1, 2, 3, 4, 5, 257], np.uint32))]
    store = TokenStore.write(tmp_path / "s", {"train": docs}, TOK)
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(3, 1),
                                 batches=MiniBatchConfig(2, BatchOrder.sequential()))
    batch = epoch.batch(0)
    assert epoch.fields == () and batch.loss_weights is None and batch.token_count == 6
    assert audit_epoch(epoch).ok


def test_packed_rows_take_roles_from_the_store(store):
    docs = store.documents("train")
    epoch = PackedEpoch.build(store, "train", row_length=8, batches=MiniBatchConfig(2, BatchOrder.shuffled(1)))
    audit = epoch.audit()
    flagged = sum(int(d.roles[1:].sum()) for d in docs)
    assert audit.every_transition_once and audit.weighted == audit.flagged == flagged
    explicit = PackedEpoch.build(store, "train", row_length=8, batches=MiniBatchConfig(2, BatchOrder.shuffled(1)),
                                 roles=[np.ones(len(d.tokens), np.uint8) for d in docs])
    assert explicit.audit().weighted == sum(len(d.tokens) - 1 for d in docs)
    batch = epoch.batch(0)
    for s in range(batch.segments):
        row, column, n = int(batch.segment_row[s]), int(batch.segment_column[s]), int(batch.segment_length[s])
        d, start = int(batch.segment_document[s]), int(batch.segment_source_start[s])
        assert batch.loss_weights[row, column:column + n].tolist() == docs[d].roles[start + 1:start + n + 1].tolist()
    packed = pack_documents(store, 8, split="train")
    assert packed.loss_weights.sum() == flagged


def test_mixture_of_windows_passes_loss_weights(store):
    a = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(4, 1),
                             batches=MiniBatchConfig(2, BatchOrder.shuffled(3)))
    mixture = Mixture([(a, 1.0)], batch_size=4)
    assert mixture.fields == ("loss_weights",)
    batch = mixture.batch(2)
    positions = a.positions[batch.source_slot]
    expected = np.stack([a.roles[p + 1:p + 5] for p in positions])
    assert np.array_equal(batch.loss_weights, expected)


def test_token_dataset_labels_ignore_unscored_targets(store):
    torch = pytest.importorskip("torch", reason="needs the torch extra")
    from engine.torch import IGNORE_INDEX, TokenDataset

    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(4, 1),
                                 batches=MiniBatchConfig(3, BatchOrder.shuffled(2)))
    plain = next(iter(TokenDataset(epoch)))
    assert set(plain) >= {"input_ids", "targets", "loss_weights"} and plain["loss_weights"].dtype == torch.uint8
    batch = epoch.batch(0)
    assert plain["loss_weights"].numpy().tolist() == batch.loss_weights.tolist()
    labelled = next(iter(TokenDataset(epoch, labels="ignore_index")))
    labels = labelled["labels"].numpy()
    assert (labels[:, 0] == IGNORE_INDEX).all()
    for t in range(3):
        expected = np.where(batch.loss_weights[:, t] == 1, batch.targets[:, t].astype(np.int64), IGNORE_INDEX)
        assert labels[:, t + 1].tolist() == expected.tolist()
