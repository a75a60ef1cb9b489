"""Run the CUDA block-table kernels under the numba-cuda simulator and compare with the CPU kernels
and the naive twin. Exit status 0 = identical everywhere, 1 = a mismatch (printed).

Launched as its own process by tests/test_block_masks.py (NUMBA_ENABLE_CUDASIM must be set before
numba.cuda is first imported). One thread per block and a grid of two, so grid-stride loops repeat.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import naive_packing as naive  # noqa: E402
from engine import masks  # noqa: E402
from engine.block_masks import block_mask_tensors  # noqa: E402


SMALL_GRID = 2  # blocks of one thread each


def cases() -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(11)
    fixed = [
        (np.array([[0, 0, 1, 1]], np.int32), 2),
        (np.array([[0, 0, 0, -1, -1], [0, 1, 1, 2, -1]], np.int32), 2),
        (np.array([[-1, -1, -1]], np.int32), 1),
        (np.array([[5, 5, 3, 3, -1, 7, 4]], np.int32), 2),  # ids that are not monotone
        (np.array([[0, 0, 0, 0, 0, 0, 1]], np.int32), 3),
        (np.array([[0]], np.int32), 4),
        (np.zeros((2, 0), np.int32), 2),
    ]
    random = [(runs(rng, 2, int(rng.integers(1, 12))), int(rng.integers(1, 4))) for _ in range(4)]
    return fixed + random


def runs(rng, rows: int, length: int) -> np.ndarray:
    """Rows of contiguous runs with ids in random order, some runs padding (-1)."""
    seg = np.empty((rows, length), np.int32)
    for b in range(rows):
        ids = rng.permutation(length + 1)
        cuts = np.sort(rng.choice(np.arange(1, length), size=min(3, length - 1), replace=False)) if length > 1 else []
        for k, run in enumerate(np.split(np.arange(length), cuts)):
            seg[b, run] = -1 if rng.random() < 0.2 else ids[k]
    return seg


def main() -> int:
    if not masks.cuda_available():
        print("numba.cuda is not available (simulator not enabled?)")
        return 1
    from numba import cuda

    from engine.cuda.block_masks import launch_block_tables

    failures = 0
    repeated = 0  # cases where every thread's grid-stride loop runs at least twice
    for seg, block_size in cases():
        on_cpu = block_mask_tensors(seg, block_size, device="cpu")
        reference = naive.naive_block_tables(seg, block_size)
        # One thread per block, two blocks: a stride of 2 over (row, block) tasks.
        small_grid = [t.copy_to_host() for t in launch_block_tables(cuda.to_device(seg), block_size, threads=1,
                                                                     max_blocks=SMALL_GRID)]
        repeated += seg.shape[0] * -(-seg.shape[1] // block_size) >= 2 * SMALL_GRID
        public = block_mask_tensors(seg, block_size, device="cuda", to_host=True)
        for name, a, b, c, d in zip(on_cpu._fields, small_grid, public, on_cpu, reference):
            if not (np.array_equal(a, c) and np.array_equal(b, c) and np.array_equal(c, d)):
                failures += 1
                print(f"MISMATCH {name} for {seg.tolist()} Q={block_size}:\ncuda={a}\ncpu={c}\nnaive={d}")
    if repeated < len(cases()) // 2:
        failures += 1
        print(f"only {repeated} cases are larger than the small grid: grid-stride loops barely repeat")
    print(f"small grid: {repeated} cases give each of its {SMALL_GRID} threads two or more tasks")
    print(f"cuda simulator: {len(cases())} cases, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
