"""Mixtures of sources (the rule of engine.mixing) against the plain-loop schedule and independently built epochs."""

from __future__ import annotations

import numpy as np
import pytest

from engine import BatchOrder, CausalWindowConfig, MiniBatchConfig, MiniBatchEpoch
from engine.corpus import Partition
from engine.errors import BatchError, ConfigurationError
from engine.mixing import Mixture
from engine.packed import PackedEpoch
from engine.store import EncodedDocument
from tests.naive_packing import naive_epoch_seed, naive_mixture_sources

T = 4


def documents(prefix, lengths, seed):
    rng = np.random.default_rng(seed)
    return [EncodedDocument(f"{prefix}{k}", Partition.TRAIN, rng.integers(0, 500, size=n).astype(np.uint32))
            for k, n in enumerate(lengths)]


def window_epoch(docs, seed):
    order = BatchOrder.sequential() if seed is None else BatchOrder.shuffled(seed)
    return MiniBatchEpoch.build(docs, "train", windows=CausalWindowConfig(T, 2), batches=MiniBatchConfig(1, order))


@pytest.mark.parametrize("weights", [[0.001, 0.999], [1, 1, 1], [0.2, 0.3, 0.5], [3, 1e-6, 7]])
def test_schedule_equals_the_naive_rule_from_any_start(weights):
    sources = [(window_epoch(documents(f"s{i}-", [9], i), None), w) for i, w in enumerate(weights)]
    mixture = Mixture(sources, batch_size=5, checkpoint_every=64)
    expected = naive_mixture_sources(weights, 3000)
    for n in (2999, 0, 1500, 64, 63, 700, 2999):  # out of order: checkpoints and the last state are reused
        counts = np.bincount(np.array(expected[:n], dtype=np.int64), minlength=len(weights))
        np.testing.assert_array_equal(mixture.taken(n), counts)
    for k in (17, 3, 599):
        assert mixture.batch(k).source.tolist() == expected[5 * k : 5 * k + 5]
    share = np.bincount(expected, minlength=len(weights)) / 3000
    np.testing.assert_allclose(share, np.array(weights) / sum(weights), atol=1 / 3000 + 1e-12)


def test_window_rows_come_from_each_source_epoch_in_order():
    a_docs = documents("a", [11, 7, 15], 1)
    b_docs = documents("b", [6], 2)  # one document, one window (T = 4): a new epoch every sample
    a, b = window_epoch(a_docs, 5), window_epoch(b_docs, 9)
    mixture = Mixture([(a, 0.3), (b, 0.7)], batch_size=4, names=["web", "books"])
    schedule = naive_mixture_sources([0.3, 0.7], 4 * 12)
    counters = [0, 0]
    for k in range(12):
        batch = mixture.batch(k)
        for r in range(4):
            i = schedule[4 * k + r]
            t = counters[i]
            counters[i] += 1
            base, docs, seed = ((a, a_docs, 5), (b, b_docs, 9))[i]
            epoch, slot = divmod(t, base.window_count)
            independent = window_epoch(docs, naive_epoch_seed(seed, epoch))
            expected = independent.batch(slot)
            np.testing.assert_array_equal(batch.inputs[r], expected.inputs[0])
            np.testing.assert_array_equal(batch.targets[r], expected.targets[0])
            assert (batch.source[r], batch.source_epoch[r], batch.source_slot[r]) == (i, epoch, slot)
            record = batch.provenance[r]
            assert record["source"] == ("web", "books")[i]
            assert (record["document_id"], record["start"]) == (expected.provenance[0].document_id,
                                                                expected.provenance[0].start)
    report = {row["source"]: row for row in mixture.report(12)}
    assert report["books"]["samples"] == counters[1] and report["web"]["samples"] == counters[0]
    assert b.window_count == 1 and report["books"]["epochs_used"] == counters[1]
    assert report["web"]["share"] == counters[0] / 48


def test_packed_sources_and_rank_shares():
    a_docs = documents("a", [30, 5, 12, 40, 3], 3)
    b_docs = documents("b", [2], 4)  # one document, one transition
    config = dict(row_length=8, batches=MiniBatchConfig(1, BatchOrder.shuffled(11)))
    a = PackedEpoch.build(a_docs, "train", **config)
    b = PackedEpoch.build(b_docs, "train", row_length=8, batches=MiniBatchConfig(1, BatchOrder.shuffled(12)))
    mixture = Mixture([(a, 0.999), (b, 0.001)], batch_size=6)
    schedule = naive_mixture_sources([0.999, 0.001], 6 * 400)
    assert schedule.count(1) == 2  # the rare source is drawn at samples 499.. and 1499..
    k = next(n // 6 for n, i in enumerate(schedule) if i == 1)
    batch = mixture.batch(k)
    for r in range(6):
        i, t = int(batch.source[r]), None
        base, docs = (a, a_docs) if i == 0 else (b, b_docs)
        t = schedule[: 6 * k + r].count(i)
        epoch, slot = divmod(t, base.rows)
        independent = PackedEpoch.build(docs, "train", row_length=8, epoch=epoch,
                                        batches=MiniBatchConfig(1, base.batch_config.order)).batch(slot)
        for name in ("inputs", "targets", "segment_ids", "position_ids", "loss_weights"):
            np.testing.assert_array_equal(getattr(batch, name)[r], getattr(independent, name)[0], err_msg=name)
        assert [s["document_id"] for s in batch.provenance[r]] == [
            independent.segment(s)["document_id"] for s in range(independent.segments)]
    for world in (1, 2, 4, 6):
        shares = [mixture.batch(k, rank=r, world_size=world) for r in range(world)]
        np.testing.assert_array_equal(np.concatenate([s.inputs for s in shares]), batch.inputs)
        np.testing.assert_array_equal(np.concatenate([s.source for s in shares]), batch.source)
    with pytest.raises(BatchError, match="fewer than world_size=7"):
        mixture.batch(0, rank=0, world_size=7)


def test_state_dict_resumes_and_iteration_advances():
    a = window_epoch(documents("a", [20, 9], 5), 1)
    b = window_epoch(documents("b", [13], 6), 2)
    mixture = Mixture([(a, 1), (b, 2)], batch_size=3)
    stream = iter(mixture)
    first = [next(stream) for _ in range(5)]
    state = mixture.state_dict()
    assert state["next_batch"] == 5
    again = Mixture([(a, 1), (b, 2)], batch_size=3)
    again.load_state_dict(state)
    np.testing.assert_array_equal(next(iter(again)).inputs, mixture.batch(5).inputs)
    np.testing.assert_array_equal(first[2].inputs, again.batch(2).inputs)
    with pytest.raises(ConfigurationError, match="state batch_size=4"):
        again.load_state_dict({**state, "batch_size": 4})


def test_errors_name_the_problem():
    a = window_epoch(documents("a", [20], 5), 1)
    with pytest.raises(ConfigurationError, match="at least one"):
        Mixture([], batch_size=2)
    with pytest.raises(ConfigurationError, match="weight 0.0"):
        Mixture([(a, 0.0)], batch_size=2)
    with pytest.raises(ConfigurationError, match="weight nan"):
        Mixture([(a, float("nan"))], batch_size=2)
    with pytest.raises(ConfigurationError, match="expected a MiniBatchEpoch or a PackedEpoch"):
        Mixture([([1, 2], 1.0)], batch_size=2)
    empty = window_epoch(documents("e", [3], 5), 1)  # 3 tokens: no window of T = 4
    with pytest.raises(ConfigurationError, match="no samples"):
        Mixture([(a, 1), (empty, 1)], batch_size=2)
    other = MiniBatchEpoch.build(documents("o", [20], 5), "train", windows=CausalWindowConfig(5),
                                 batches=MiniBatchConfig(1))
    with pytest.raises(ConfigurationError, match="same T"):
        Mixture([(a, 1), (other, 1)], batch_size=2)
    with pytest.raises(BatchError, match="batch size must be a positive integer"):
        Mixture([(a, 1)], batch_size=0)
    with pytest.raises(BatchError, match="expected an index >= 0"):
        Mixture([(a, 1)], batch_size=2).batch(-1)


def test_sources_of_two_tokenizers_or_two_partitions_are_refused(tmp_path):
    from engine.store import TokenStore
    from engine.tokenizers.char import CharTokenizer
    from tests.helpers import small_store

    first = small_store(tmp_path / "a")
    other_tok = CharTokenizer.fit("abcdefgh xyz")  # another vocabulary
    other_docs = {"train": [EncodedDocument("u", "train", other_tok.encode_document("xyz abc"))]}
    second = TokenStore.write(tmp_path / "b", other_docs, other_tok)
    config = dict(windows=CausalWindowConfig(T, 2), batches=MiniBatchConfig(1, BatchOrder.sequential()))
    a = MiniBatchEpoch.build(first, "train", **config)
    b = MiniBatchEpoch.build(second, "train", **config)
    with pytest.raises(ConfigurationError) as info:
        Mixture([(a, 1), (b, 1)], batch_size=2)
    assert str(info.value) == (
        f"sources[1] comes from {second.path} (tokenizer {second.tokenizer_hash[:12]}), sources[0] from {first.path} "
        f"(tokenizer {first.tokenizer_hash[:12]}); a mixture's sources must be encoded by one tokenizer (encode both "
        "corpora with the same tokenizer file: engine prepare --tokenizer FILE)")
    Mixture([(a, 1), (MiniBatchEpoch.build(first, "train", **config), 2)], batch_size=2)  # one tokenizer: fine
    validation = MiniBatchEpoch.build(first, "validation", windows=CausalWindowConfig(2, 1),
                                      batches=MiniBatchConfig(1, BatchOrder.sequential()))
    train = MiniBatchEpoch.build(first, "train", windows=CausalWindowConfig(2, 1),
                                 batches=MiniBatchConfig(1, BatchOrder.sequential()))
    with pytest.raises(ConfigurationError, match=r"^sources\[1\] is a validation epoch, but sources\[0\] a train one; "
                                                 r"a mixture draws from one partition"):
        Mixture([(train, 1), (validation, 1)], batch_size=2)
