"""Token-weighted means (engine.loss) on the worked seed-7 epoch: 1.020833 and 0.4375, not 4/6 of it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.corpus import Partition
from engine.errors import BatchError, ConfigurationError
from engine.loss import TokenMeanAccumulator
from engine.store import EncodedDocument
from engine.windows import CausalWindowConfig


def worked_epoch():
    documents = [
        EncodedDocument("train-a", Partition.TRAIN, np.array([0, 10, 11, 12, 1], dtype=np.uint32)),
        EncodedDocument("train-b", Partition.TRAIN, np.array([0, 20, 21, 1], dtype=np.uint32)),
    ]
    return MiniBatchEpoch.build(documents, "train", windows=CausalWindowConfig(2),
                                batches=MiniBatchConfig(3, BatchOrder.shuffled(7)))


def contributions(batch):
    """Stand-in per-token values (no model): loss = (8*document + 2*start + token + 1) / 8, gradient
    [2L, 2 - L]. They are binary fractions, so every sum is exact: batch 0 (rows b@1, a@1, b@0 of the
    seed-7 epoch, see test_batches) sums to 6.125 over 6 targets, batch 1 (a@0, a@2) to 1.75 over 4."""
    losses = np.array([
        (p.document_index * 8 + p.start * 2 + t + 1) / 8
        for p in batch.provenance
        for t in range(batch.context_length)
    ])
    return losses, np.stack([2 * losses, 2 - losses], axis=1)


def test_worked_batch_means():
    first, last = worked_epoch()
    losses0, gradients0 = contributions(first)
    losses1, gradients1 = contributions(last)
    assert losses0.tolist() == [1.375, 1.5, 0.375, 0.5, 1.125, 1.25]
    assert losses1.tolist() == [0.125, 0.25, 0.625, 0.75]
    results = []
    for batch, losses, gradients in ((first, losses0, gradients0), (last, losses1, gradients1)):
        acc = TokenMeanAccumulator(2)
        acc.add_batch(losses, gradients)
        assert acc.token_count == batch.token_count
        results.append((acc.loss_sum, *acc.finish()))
    (sum0, mean0, grad0), (sum1, mean1, grad1) = results
    assert sum0 == 6.125 and sum1 == 1.75
    assert mean0 == pytest.approx(1.020833, abs=5e-7) and mean0 == 6.125 / 6
    assert mean1 == 0.4375
    assert grad0 == pytest.approx([2.041667, 0.979167], abs=5e-7)
    assert grad1.tolist() == [0.875, 1.5625]


def test_capacity_denominator_is_the_4_6_scale_error():
    last = worked_epoch().batch(1)
    losses, gradients = contributions(last)
    acc = TokenMeanAccumulator(2)
    acc.add_batch(losses, gradients)
    mean_loss, mean_gradient = acc.finish()
    capacity = 3 * last.context_length
    assert last.token_count == 4 and capacity == 6
    wrong_loss, wrong_gradient = acc.loss_sum / capacity, acc.gradient_sum / capacity
    assert wrong_loss == pytest.approx(0.291667, abs=5e-7)
    assert wrong_loss == pytest.approx(mean_loss * 4 / 6) and wrong_gradient == pytest.approx(mean_gradient * 4 / 6)
    assert mean_loss != wrong_loss  # the accumulator divides by the 4 actual tokens


def test_merge_of_raw_sums_equals_one_pass_and_mean_of_means_does_not():
    losses, gradients = (np.concatenate(parts) for parts in zip(*map(contributions, worked_epoch())))
    whole = TokenMeanAccumulator(2)
    for loss, gradient in zip(losses, gradients):
        whole.add_token(loss, gradient)
    left, right = TokenMeanAccumulator(2), TokenMeanAccumulator(2)
    left.add_batch(losses[:6], gradients[:6])
    right.add_batch(losses[6:], gradients[6:])
    mean_of_means = (left.finish()[0] + right.finish()[0]) / 2
    left.merge(right)
    assert left.token_count == 10
    assert left.finish()[0] == whole.finish()[0] == 7.875 / 10
    assert np.array_equal(left.finish()[1], whole.finish()[1])
    assert mean_of_means == pytest.approx((6.125 / 6 + 0.4375) / 2) and mean_of_means != 0.7875


def test_split_accumulation_equals_batch_mean_in_each_batch():
    for batch in worked_epoch():
        losses, gradients = contributions(batch)
        one_pass, halves, other = TokenMeanAccumulator(2), TokenMeanAccumulator(2), TokenMeanAccumulator(2)
        one_pass.add_batch(losses, gradients)
        split = losses.shape[0] // 2
        for loss, gradient in zip(losses[:split], gradients[:split]):
            halves.add_token(loss, gradient)
        other.add_batch(losses[split:], gradients[split:])
        halves.merge(other)
        assert halves.finish()[0] == one_pass.finish()[0]
        assert np.array_equal(halves.finish()[1], one_pass.finish()[1])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_change_nothing(bad):
    acc = TokenMeanAccumulator(2)
    acc.add_token(1.0, [2.0, 3.0])
    before = (acc.loss_sum, acc.gradient_sum.copy(), acc.token_count)
    with pytest.raises(BatchError, match="token loss is"):
        acc.add_token(bad, [0.0, 0.0])
    with pytest.raises(BatchError, match="coordinate 1"):
        acc.add_token(0.5, [0.0, bad])
    with pytest.raises(BatchError, match="loss of token 2"):
        acc.add_batch([1.0, 1.0, bad], np.zeros((3, 2)))
    with pytest.raises(BatchError, match="gradient of token 1, coordinate 0"):
        acc.add_batch([1.0, 1.0], [[0.0, 0.0], [bad, 0.0]])
    assert (acc.loss_sum, acc.gradient_sum.tolist(), acc.token_count) == (before[0], before[1].tolist(), before[2])


def test_overflowing_sum_is_rejected_before_any_change():
    acc = TokenMeanAccumulator(1)
    acc.add_token(1e308, [1e308])
    with pytest.raises(BatchError, match="loss sum would become inf"):
        acc.add_token(1e308, [0.0])
    with pytest.raises(BatchError, match="gradient sum at coordinate 0"):
        acc.add_token(0.0, [1e308])
    other = TokenMeanAccumulator(1)
    other.add_token(1e308, [0.0])
    with pytest.raises(BatchError, match="the loss sum would become inf; nothing was added"):
        acc.merge(other)
    assert acc.token_count == 1 and acc.loss_sum == 1e308


def test_shape_and_width_errors():
    acc = TokenMeanAccumulator(2)
    with pytest.raises(BatchError, match=r"shape \(3,\), expected \(2,\)"):
        acc.add_token(1.0, [1.0, 2.0, 3.0])
    with pytest.raises(BatchError, match=r"shape \(2, 2\), expected \(3, 2\)"):
        acc.add_batch([1.0, 2.0, 3.0], np.zeros((2, 2)))
    with pytest.raises(BatchError, match="gradient width 3 into width 2"):
        acc.merge(TokenMeanAccumulator(3))
    with pytest.raises(BatchError, match="no target tokens"):
        acc.finish()
    with pytest.raises(ConfigurationError, match="gradient width must be >= 0, got -1"):
        TokenMeanAccumulator(-1)
    with pytest.raises(BatchError, match="number"):
        acc.add_token("x", [0.0, 0.0])
    assert acc.token_count == 0


def test_loss_only_accumulator():
    acc = TokenMeanAccumulator(0)
    acc.add_batch([1.0, 2.0, 6.0], np.zeros((3, 0)))
    assert acc.finish()[0] == 3.0 and acc.finish()[1].shape == (0,)


def test_evaluation_path_adds_loss_sums_without_gradients():
    acc = TokenMeanAccumulator()
    acc.add_loss(6.0, 4)  # a batch of 4 targets summing to 6
    acc.add_loss(np.float32(1.5), np.int64(2))
    assert acc.token_count == 6 and acc.loss_sum == 7.5 and acc.mean_loss == 1.25
    assert acc.finish()[0] == 1.25
    acc.add_loss(0.0, 0)  # an empty batch changes nothing
    assert acc.token_count == 6
    with pytest.raises(BatchError, match="must be finite"):
        acc.add_loss(float("inf"), 1)
    with pytest.raises(BatchError, match="token count must be >= 0"):
        acc.add_loss(1.0, -1)
    with pytest.raises(BatchError, match="loss sum must be a number"):
        acc.add_loss("x", 1)
    assert acc.token_count == 6 and acc.loss_sum == 7.5
    with pytest.raises(BatchError, match="add_loss adds none"):
        TokenMeanAccumulator(2).add_loss(1.0, 1)
    with pytest.raises(BatchError, match="zero tokens"):
        TokenMeanAccumulator().mean_loss


def test_evaluation_path_takes_torch_sums():
    torch = pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")

    losses = torch.tensor([[0.5, 1.5], [2.0, 4.0]])
    acc = TokenMeanAccumulator()
    acc.add_loss(losses.sum(), losses.numel())
    assert acc.mean_loss == 2.0


def test_a_loss_that_requires_grad_adds_its_value_without_a_warning():
    import warnings

    torch = pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")

    weights = torch.tensor([0.5, 1.5, 2.0], requires_grad=True)
    acc = TokenMeanAccumulator()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when float() meets a tensor that requires grad
        acc.add_loss((weights * 2).sum(), 3)
    assert acc.mean_loss == 8.0 / 3
    assert weights.grad is None  # nothing flowed back
