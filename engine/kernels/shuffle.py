"""SplitMix64, bounded draws and Fisher–Yates over descriptor arrays, bit-exact.

The shuffle rule (epochs, packed row orders, mixtures and ``sample_windows`` cite it here, as "the
SplitMix64 Fisher–Yates of engine.kernels.shuffle"). All arithmetic is modulo 2^64:

- SplitMix64, one output: ``state += 0x9E3779B97F4A7C15; z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
  return z ^ (z >> 31)``. The seed is the initial state (no output is skipped); ``mix(x)`` is the
  output function alone: the two multiply steps and the last xor-shift applied to ``z = x``.
- ``sample_below(b)`` for ``b >= 1``: ``threshold = (2^64 - b) mod b``; draw outputs until one is
  ``>= threshold``; return ``draw mod b``. Rejecting the lowest ``threshold`` values leaves a
  multiple of ``b`` equally likely values, so the result is uniform over ``0 .. b-1``.
- Fisher–Yates over ``n`` items: for ``upper`` from ``n - 1`` down to ``1``:
  ``j = sample_below(upper + 1)``; swap positions ``upper`` and ``j`` (``j == upper`` swaps nothing).
  ``n < 2`` draws nothing.

Every kernel returns the state after its last draw, so callers can chain them.
The threshold is always smaller than ``b``, so a draw ``>= b`` is accepted without computing it:
the second modulo runs only for the rare draw below ``b`` (probability ``b / 2^64``), and the
result is exactly the rule above.

Fisher–Yates (``upper = n-1 .. 1``: ``j = sample_below(upper + 1)``, swap) is bound by random
memory access once the array outgrows the caches. The positions ``j`` depend only on the
generator, never on the data, so the kernel draws them ``LOOKAHEAD`` steps early and issues a
prefetch for each; the swaps then hit cache lines already on their way. The draw order is
unchanged, so the permutation is identical to the plain loop (``tests/naive_windows.py``).
Cost: n draws plus n swaps; measured about 1.1 s for 10^8 int64 descriptors on one core.

All arithmetic is on ``uint64`` values with ``uint64`` constants: mixing ``int64`` and
``uint64`` in Numba promotes to float64 and would silently lose bits.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel
from engine.kernels.prefetch import prefetch

__all__ = [
    "GOLDEN_GAMMA",
    "splitmix64_fill",
    "sample_below_fill",
    "fisher_yates_shuffle",
]

GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFT_30 = np.uint64(30)
_SHIFT_27 = np.uint64(27)
_SHIFT_31 = np.uint64(31)
_ZERO = np.uint64(0)
_ONE = np.uint64(1)

# Draws kept in flight ahead of the swap; 32 covers main-memory latency at one swap per ~10 ns.
LOOKAHEAD = 32


@kernel(inline="always")
def _mix(z):
    z = (z ^ (z >> _SHIFT_30)) * _MIX_1
    z = (z ^ (z >> _SHIFT_27)) * _MIX_2
    return z ^ (z >> _SHIFT_31)


@kernel(inline="always")
def _sample_below(state, bound):
    """One bounded draw: returns (state after, value in [0, bound)). ``bound`` is uint64 >= 1."""
    while True:
        state += GOLDEN_GAMMA
        draw = _mix(state)
        # threshold = (2^64 - bound) mod bound < bound, so draw >= bound already passes.
        if draw >= bound:
            break
        if draw >= (_ZERO - bound) % bound:
            break
    return state, draw % bound


@kernel
def splitmix64_fill(state, out):
    """Fill ``out`` (uint64) with consecutive SplitMix64 outputs; return the state after."""
    for i in range(out.shape[0]):
        state += GOLDEN_GAMMA
        out[i] = _mix(state)
    return state


@kernel
def sample_below_fill(state, bound, out):
    """Fill ``out`` (int64, or uint64 for bounds past 2^63) with ``sample_below(bound)`` draws."""
    for i in range(out.shape[0]):
        state, value = _sample_below(state, bound)
        out[i] = value
    return state


@kernel
def fisher_yates_shuffle(descriptors, state):
    """Shuffle ``descriptors`` (1-D int64) in place by the module's Fisher–Yates; return the state after."""
    n = descriptors.shape[0]
    if n < 2:
        return state
    pending = np.empty(LOOKAHEAD, dtype=np.uint64)
    # Step i swaps position n-1-i with a draw made LOOKAHEAD steps earlier.
    next_upper = np.uint64(n - 1)  # the upper bound whose draw comes next
    filled = 0
    while filled < LOOKAHEAD and next_upper >= _ONE:
        state, j = _sample_below(state, next_upper + _ONE)
        pending[filled] = j
        prefetch(descriptors, j, True)
        filled += 1
        next_upper -= _ONE
    slot = 0
    upper = np.uint64(n - 1)
    while upper >= _ONE:
        j = pending[slot]
        if next_upper >= _ONE:
            state, ahead = _sample_below(state, next_upper + _ONE)
            pending[slot] = ahead
            prefetch(descriptors, ahead, True)
            next_upper -= _ONE
        slot += 1
        if slot == LOOKAHEAD:
            slot = 0
        kept = descriptors[upper]
        descriptors[upper] = descriptors[j]
        descriptors[j] = kept
        upper -= _ONE
    return state
