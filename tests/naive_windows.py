"""Plain-loop twins of engine/kernels/windows.py and engine/kernels/shuffle.py: slow and obvious.

Everything here is Python ints and lists, written straight from the rules stated in engine.windows,
engine.kernels.shuffle and engine.batches.
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1


class SplitMix64:
    """SplitMix64 as engine.kernels.shuffle states it; the seed is the initial state."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def sample_below(self, bound: int) -> int:
        threshold = ((1 << 64) - bound) % bound
        while True:
            draw = self.next()
            if draw >= threshold:
                return draw % bound


def fisher_yates(items: list, seed: int) -> tuple[list, int]:
    """Shuffled copy of ``items`` and the generator state after (the Fisher–Yates of engine.kernels.shuffle)."""
    out = list(items)
    rng = SplitMix64(seed)
    for upper in range(len(out) - 1, 0, -1):
        j = rng.sample_below(upper + 1)
        out[upper], out[j] = out[j], out[upper]
    return out, rng.state


def window_count(length: int, context_length: int, stride: int) -> int:
    """Count candidate starts s = kS with s + T < length, one at a time."""
    count = 0
    s = 0
    while s + context_length < length:
        count += 1
        s += stride
    return count


def window_counts(offsets: list[int], context_length: int, stride: int) -> list[int]:
    return [
        window_count(offsets[d + 1] - offsets[d], context_length, stride) for d in range(len(offsets) - 1)
    ]


def window_prefix_sums(offsets: list[int], context_length: int, stride: int) -> list[int]:
    prefix = [0]
    for count in window_counts(offsets, context_length, stride):
        prefix.append(prefix[-1] + count)
    return prefix


def enumerate_descriptors(offsets: list[int], context_length: int, stride: int) -> list[tuple[int, int]]:
    """Every window as (document_index, start), document order then start order."""
    out = []
    for d in range(len(offsets) - 1):
        length = offsets[d + 1] - offsets[d]
        s = 0
        while s + context_length < length:
            out.append((d, s))
            s += stride
    return out


def decode_position(offsets: list[int], position: int) -> tuple[int, int]:
    """The document holding token ``position`` (the non-empty one) and the offset inside it."""
    for d in range(len(offsets) - 1):
        if offsets[d] <= position < offsets[d + 1]:
            return d, position - offsets[d]
    raise IndexError(position)


def gather(values: list[int], offsets: list[int], descriptors, context_length: int):
    """Rows of inputs and targets as lists of lists, copied one id at a time."""
    inputs, targets = [], []
    for d, s in descriptors:
        base = offsets[d] + s
        inputs.append([values[base + t] for t in range(context_length)])
        targets.append([values[base + t + 1] for t in range(context_length)])
    return inputs, targets


def gather_batch(values: list[int], positions: list[int], lo: int, hi: int, context_length: int):
    """Rows of positions[lo:hi] (as far as positions go), copied one id at a time, and whether any
    copied id is >= 2^31."""
    inputs, targets, high = [], [], False
    for p in positions[lo:hi]:
        inputs.append([values[p + t] for t in range(context_length)])
        targets.append([values[p + t + 1] for t in range(context_length)])
        high = high or any(v >= 2**31 for v in inputs[-1] + targets[-1])
    return inputs, targets, high


def gather_weights(roles: list[int], positions: list[int], lo: int, hi: int, context_length: int) -> list[list[int]]:
    """Loss weights of the windows positions[lo:hi]: row r, column t is the flag of target t, roles[p + t + 1]."""
    return [[roles[p + t + 1] for t in range(context_length)] for p in positions[lo:hi]]
