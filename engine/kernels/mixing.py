"""CPU kernel for the mixture schedule (the rule of engine.mixing).

Sample ``n`` comes from the source with the largest deficit ``w_i * (n + 1) - taken_i``, ties to
the smaller ``i``, evaluated in float64 (``w_i`` the normalised weights, ``taken_i`` the samples
source ``i`` gave before ``n``). ``advance`` steps the schedule from any known ``(n, taken)``;
``engine.mixing`` keeps checkpoints so batch ``k`` costs ``O(m)`` per sample from the nearest one.
"""

from __future__ import annotations

from engine.kernels import kernel


@kernel
def advance(weights, n, taken, steps, sources):
    """Choose the sources of samples ``n .. n + steps - 1``; ``taken`` (int64 ``[m]``, the counts
    before ``n``) is updated in place. Writes the choices to ``sources`` when it has ``steps`` slots."""
    m = weights.shape[0]
    record = sources.shape[0] >= steps
    for s in range(steps):
        scale = float(n + s + 1)
        best = 0
        best_deficit = weights[0] * scale - float(taken[0])
        for i in range(1, m):
            deficit = weights[i] * scale - float(taken[i])
            if deficit > best_deficit:
                best = i
                best_deficit = deficit
        taken[best] += 1
        if record:
            sources[s] = best
