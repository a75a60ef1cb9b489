"""Run every CUDA mask kernel under the numba-cuda simulator and compare with the CPU kernels and
the naive twins. Exit status 0 = identical everywhere, 1 = a mismatch (printed).

NUMBA_ENABLE_CUDASIM must be set before numba.cuda is first imported, so this runs as its own
process (tests/test_cuda_masks.py starts it): ``NUMBA_ENABLE_CUDASIM=1 python tests/cuda_sim_check.py``.
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


def cases() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    fixed = [
        np.array([[0, 0, 1, 1]], np.int32),
        np.array([[0, 0, 0, -1, -1], [0, 1, 1, 2, -1]], np.int32),
        np.array([[-1, -1, -1]], np.int32),
        np.array([[3, 3, 5, -1, 4, 4]], np.int32),  # ids in any order, padding between segments
        np.array([[0]], np.int32),
    ]
    random = [one_id_per_run(rng.integers(-1, 3, size=(2, int(rng.integers(1, 9)))).astype(np.int32)) for _ in range(3)]
    return fixed + random


# Launch configurations smaller than the work, so every grid-stride loop repeats: the masks' 2-D
# grid has 2 x 1 blocks of 1 x 2 threads (strides of 2 over key columns and over query rows); the
# per-row kernels run one thread in one block (a stride of 1 over rows).
SMALL_MASK_THREADS = (1, 2)
SMALL_MASK_BLOCKS = (2, 1)
SMALL_ROWS_GRID = 1


def small_grid_checks(seg: np.ndarray, checks: dict) -> dict:
    """Every kernel launched directly on the small grids; compared with the CPU and naive results in ``checks``."""
    from numba import cuda

    from engine.cuda import masks as cuda_masks

    rows, length = seg.shape
    device_ids = cuda.to_device(seg)
    out = {}
    for kind, dtype in (("dense", np.bool_), ("additive", np.float32)):
        mask = cuda.device_array((rows, length, length), dtype=dtype)
        cuda_masks.launch_mask(kind, device_ids, mask, threads=SMALL_MASK_THREADS, max_blocks=SMALL_MASK_BLOCKS)
        out[f"{kind} small grid"] = (mask.copy_to_host(), *checks[kind][1:])
    positions = cuda.device_array((rows, length), dtype=np.int32)
    cuda_masks.launch_position_ids(device_ids, positions, threads=1, max_blocks=SMALL_ROWS_GRID)
    out["position_ids small grid"] = (positions.copy_to_host(), *checks["position_ids"][1:])
    bounds, longest = cuda_masks.launch_cu_seqlens(device_ids, threads=1, max_blocks=SMALL_ROWS_GRID)
    out["cu_seqlens small grid"] = (bounds.copy_to_host(), *checks["cu_seqlens"][1:])
    out["max_seqlen small grid"] = (np.array(longest), *checks["max_seqlen"][1:])
    return out


def one_id_per_run(seg: np.ndarray) -> np.ndarray:
    """Each run of equal real ids gets its own id: a well-formed row (ids unique per row) from a random one."""
    out = seg.copy()
    for b in range(seg.shape[0]):
        run = -1
        for i in range(seg.shape[1]):
            if i == 0 or seg[b, i] != seg[b, i - 1]:
                run += 1
            out[b, i] = run if seg[b, i] >= 0 else -1
    return out


# Rows whose segment ids are not contiguous: refused on both devices with the same message.
MALFORMED = [np.array([[3, 3, 5, 3, -1, 5]], np.int32), np.array([[0, 1, 2], [4, -1, 4]], np.int32),
             np.array([[0, 0, 1, 1, 0, 0]], np.int32)]


def refusal_mismatches() -> int:
    from numba import cuda

    from engine.errors import PackingError

    failures = 0
    for seg in MALFORMED:
        messages = {}
        calls = {
            "cpu dense": lambda: masks.attention_mask(seg, "dense", device="cpu"),
            "cpu varlen": lambda: masks.varlen_boundaries(seg, device="cpu"),
            "cuda dense": lambda: masks.attention_mask(seg, "dense", device="cuda"),
            "cuda additive": lambda: masks.attention_mask(seg, "additive", device="cuda"),
            "cuda varlen": lambda: masks.varlen_boundaries(seg, device="cuda"),
            "cuda position_ids": lambda: masks.position_ids(seg, device="cuda"),
            "cuda device input": lambda: masks.attention_mask(cuda.to_device(seg), "dense", device="cuda"),
            "cuda device varlen": lambda: masks.varlen_boundaries(cuda.to_device(seg), device="cuda"),
        }
        for name, call in calls.items():
            try:
                call()
            except PackingError as exc:
                messages[name] = str(exc)
            else:
                messages[name] = "no error"
        if len(set(messages.values())) != 1 or "one contiguous run" not in messages["cpu dense"]:
            failures += 1
            print(f"REFUSAL MISMATCH for segment_ids {seg.tolist()}: {messages}")
    return failures


def main() -> int:
    if not masks.cuda_available():
        print("numba.cuda is not available (simulator not enabled?)")
        return 1
    failures = 0
    repeated = 0  # cases where every thread's grid-stride loops run at least twice
    for seg in cases():
        checks = {
            "dense": (
                masks.attention_mask(seg, "dense", device="cuda", to_host=True),
                masks.attention_mask(seg, "dense", device="cpu"),
                naive.naive_dense_mask(seg),
            ),
            "additive": (
                masks.attention_mask(seg, "additive", device="cuda", to_host=True),
                masks.attention_mask(seg, "additive", device="cpu"),
                naive.naive_additive_mask(seg),
            ),
            "position_ids": (
                masks.position_ids(seg, device="cuda", to_host=True),
                masks.position_ids(seg, device="cpu"),
                naive.naive_position_ids(seg),
            ),
        }
        cuda_bounds, cuda_longest = masks.varlen_boundaries(seg, device="cuda", to_host=True)
        cpu_bounds, cpu_longest = masks.varlen_boundaries(seg, device="cpu")
        naive_bounds, naive_longest = naive.naive_varlen(seg.tolist())
        checks["cu_seqlens"] = (cuda_bounds, cpu_bounds, np.array(naive_bounds, np.int32))
        checks["max_seqlen"] = (np.array(cuda_longest), np.array(cpu_longest), np.array(naive_longest))
        # A device-resident output buffer is reused and written in place.
        from numba import cuda

        out = cuda.device_array((seg.shape[0], seg.shape[1], seg.shape[1]), dtype=np.bool_)
        masks.attention_mask(cuda.to_device(seg), "dense", device="cuda", out=out)
        checks["dense out="] = (out.copy_to_host(), checks["dense"][1], checks["dense"][2])
        checks.update(small_grid_checks(seg, checks))
        repeated += seg.shape[0] >= 2 * SMALL_ROWS_GRID and seg.shape[1] >= 2 * SMALL_MASK_THREADS[0] * SMALL_MASK_BLOCKS[0]
        for name, (on_cuda, on_cpu, reference) in checks.items():
            if not (np.array_equal(on_cuda, on_cpu) and np.array_equal(on_cpu, reference)):
                failures += 1
                print(f"MISMATCH {name} for segment_ids {seg.tolist()}:\ncuda={on_cuda}\ncpu={on_cpu}\nnaive={reference}")
    failures += refusal_mismatches()
    if repeated < 3:
        failures += 1
        print(f"only {repeated} cases are larger than the small grids: grid-stride loops barely repeat")
    print(f"small grids: {repeated} cases give every thread two or more tasks in each loop")
    print(f"cuda simulator: {len(cases())} cases, {len(MALFORMED)} malformed rows, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
