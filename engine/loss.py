"""Token-weighted means of loss and gradient.

The rule (cited as "token-weighted, engine.loss"): a batch's loss and gradient are sums over its
ACTUAL target tokens divided by their count (``width * T`` for plain windows, the number of scored
targets where a loss mask applies) — never by capacity, padding or a count of rows. Partial results
merge as raw sums and counts and are divided once at the end; a mean of means is wrong (it would
weight a short piece like a full one). A non-finite loss or gradient coordinate is rejected before
anything is changed: all or nothing.

``TokenMeanAccumulator`` keeps raw float64 sums and the token count; pieces merge as raw sums, and
``finish`` divides once. Every update checks the contribution and the new sums to be finite before
anything is stored; a non-finite value, a wrong gradient width or finishing with no tokens raises
``BatchError`` naming the token and coordinate. ``add_batch`` sums with numpy (pairwise
summation), so it may differ from one ``add_token`` per row in the last bits; values that are
binary fractions sum exactly either way. For evaluation, ``TokenMeanAccumulator()`` (gradient
width 0) takes ``add_loss(loss_sum, token_count)`` per batch and ``mean_loss`` is the answer.
Cost: O(width) per token, vectorised for a batch.
"""

from __future__ import annotations


import numpy as np

from engine.checks import as_int
from engine.errors import BatchError, ConfigurationError

__all__ = ["TokenMeanAccumulator"]


def _check_finite(vector: np.ndarray, message: str) -> None:
    """BatchError(message with ``c`` and ``v``) naming the first non-finite coordinate, if any."""
    bad = np.flatnonzero(~np.isfinite(vector))
    if bad.size:
        c = int(bad[0])
        raise BatchError(message.format(c=c, v=vector[c]))


class TokenMeanAccumulator:
    """Raw sums of per-token losses and gradients, plus the number of target tokens added."""

    __slots__ = ("gradient_width", "loss_sum", "gradient_sum", "token_count")

    def __init__(self, gradient_width: int = 0) -> None:
        width = as_int(gradient_width, "gradient width", expected="an integer >= 0")
        if width < 0:
            raise ConfigurationError(f"gradient width must be >= 0, got {width}")
        self.gradient_width = width
        self.loss_sum = 0.0
        self.gradient_sum = np.zeros(width, dtype=np.float64)
        self.token_count = 0

    def add_token(self, loss: float, gradient) -> None:
        """Add one target token's loss and gradient vector (length ``gradient_width``)."""
        gradient = np.asarray(gradient, dtype=np.float64)
        if gradient.shape != (self.gradient_width,):
            raise BatchError(f"gradient has shape {gradient.shape}, expected ({self.gradient_width},) "
                             f"(one coordinate per parameter; nothing was added)")
        try:
            loss = float(loss)
        except (TypeError, ValueError):
            raise BatchError(f"token loss must be a number, got {loss!r} (nothing was added)") from None
        if not np.isfinite(loss):
            raise BatchError(f"token loss is {loss}; every loss must be finite (nothing was added)")
        _check_finite(gradient, "token gradient coordinate {c} is {v}; every coordinate must be finite "
                                "(nothing was added)")
        with np.errstate(over="ignore", invalid="ignore"):
            loss_sum, gradient_sum = self.loss_sum + loss, self.gradient_sum + gradient
        self._commit(loss_sum, gradient_sum, 1)

    def add_batch(self, losses, gradients) -> None:
        """Add ``n`` tokens at once: ``losses`` ``[n]`` and ``gradients`` ``[n, gradient_width]``."""
        losses = np.asarray(losses, dtype=np.float64)
        if losses.ndim != 1:
            raise BatchError(f"losses must be 1-D (one per target token), got shape {losses.shape}")
        gradients = self._gradient_rows(gradients, losses.shape[0], "gradients")
        bad = np.flatnonzero(~np.isfinite(losses))
        if bad.size:
            t = int(bad[0])
            raise BatchError(f"loss of token {t} is {losses[t]}; every loss must be finite (nothing was added)")
        bad_rows, bad_columns = np.nonzero(~np.isfinite(gradients))
        if bad_rows.size:
            t, c = int(bad_rows[0]), int(bad_columns[0])
            raise BatchError(f"gradient of token {t}, coordinate {c} is {gradients[t, c]}; every coordinate "
                             f"must be finite (nothing was added)")
        with np.errstate(over="ignore", invalid="ignore"):
            loss_sum = self.loss_sum + float(losses.sum())
            gradient_sum = self.gradient_sum + gradients.sum(axis=0)
        self._commit(loss_sum, gradient_sum, losses.shape[0])

    def add_loss(self, loss_sum, token_count) -> None:
        """Evaluation: add a batch's summed loss over ``token_count`` scored targets, no gradients.

        ``loss_sum`` is a number or a 0-d tensor (e.g. ``F.cross_entropy(..., reduction="sum")``,
        or the ``loss_weights``-weighted sum); ``token_count`` the targets it sums over. Only an
        accumulator of gradient width 0 takes losses without gradients.
        """
        if self.gradient_width:
            raise BatchError(f"this accumulator sums gradients of width {self.gradient_width}; add_loss "
                             f"adds none (use TokenMeanAccumulator() for evaluation, or add_batch)")
        detach = getattr(loss_sum, "detach", None)  # a tensor that requires grad: its value, without torch's warning
        try:
            loss = float(detach() if callable(detach) else loss_sum)
        except (TypeError, ValueError, RuntimeError):
            raise BatchError(f"loss sum must be a number, got {loss_sum!r} (nothing was added)") from None
        count = as_int(token_count, "token count", expected="an integer >= 0")
        if count < 0:
            raise BatchError(f"token count must be >= 0, got {count} (nothing was added)")
        if not np.isfinite(loss):
            raise BatchError(f"loss sum is {loss}; it must be finite (nothing was added)")
        with np.errstate(over="ignore", invalid="ignore"):
            total = self.loss_sum + loss
        self._commit(total, self.gradient_sum, count)

    @property
    def mean_loss(self) -> float:
        """The loss sum divided by the actual token count (BatchError with no tokens)."""
        if self.token_count == 0:
            raise BatchError("no target tokens were added; a mean over zero tokens is undefined")
        return self.loss_sum / self.token_count

    def merge(self, other: "TokenMeanAccumulator") -> None:
        """Add another accumulator's raw sums and count (not its mean)."""
        if not isinstance(other, TokenMeanAccumulator):
            raise ConfigurationError(f"can only merge a TokenMeanAccumulator, got {type(other).__name__}")
        if other.gradient_width != self.gradient_width:
            raise BatchError(f"cannot merge gradient width {other.gradient_width} into width "
                             f"{self.gradient_width}")
        with np.errstate(over="ignore", invalid="ignore"):
            loss_sum, gradient_sum = self.loss_sum + other.loss_sum, self.gradient_sum + other.gradient_sum
        self._commit(loss_sum, gradient_sum, other.token_count)

    def finish(self) -> tuple[float, np.ndarray]:
        """``(mean loss, mean gradient)``: the raw sums divided by the actual token count."""
        if self.token_count == 0:
            raise BatchError("no target tokens were added; a mean over zero tokens is undefined")
        return self.loss_sum / self.token_count, self.gradient_sum / self.token_count

    def _gradient_rows(self, gradients, rows: int, name: str) -> np.ndarray:
        gradients = np.asarray(gradients, dtype=np.float64)
        expected = (rows, self.gradient_width)
        if gradients.shape != expected:
            raise BatchError(f"{name} has shape {gradients.shape}, expected {expected} "
                             f"(one vector of width {self.gradient_width} per target token)")
        return gradients

    def _commit(self, loss_sum: float, gradient_sum: np.ndarray, tokens: int) -> None:
        # The sums of finite values can still overflow to inf; check before storing anything.
        if not np.isfinite(loss_sum):
            raise BatchError(f"the loss sum would become {loss_sum}; nothing was added")
        _check_finite(gradient_sum, "the gradient sum at coordinate {c} would become {v}; nothing was added")
        self.loss_sum = float(loss_sum)
        self.gradient_sum = gradient_sum
        self.token_count += tokens

    def __repr__(self) -> str:
        return (f"TokenMeanAccumulator(gradient_width={self.gradient_width}, tokens={self.token_count}, "
                f"loss_sum={self.loss_sum!r})")
