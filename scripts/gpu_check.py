"""Run every CUDA mask kernel for real at training size and compare it with the CPU kernels.

    python scripts/gpu_check.py            # B=8, L=4096
    python scripts/gpu_check.py --rows 2 --length 1024

For each kernel: equality with the CPU output, then its time and GB/s written, beside a
device-to-device copy of the same number of bytes (the device's copy bandwidth; a copy reads
and writes, so it moves twice the bytes: both figures are printed). Exit status: 0 = all equal,
1 = a mismatch, 2 = no GPU (or numba-cuda missing).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def packed_segments(rows: int, length: int, seed: int = 0) -> np.ndarray:
    """Segment ids of packed rows: log-normal document lengths (mean ~500), padding at row ends."""
    rng = np.random.default_rng(seed)
    segment_ids = np.full((rows, length), -1, np.int32)
    for b in range(rows):
        column, segment = 0, 0
        while True:
            n = int(np.clip(round(rng.lognormal(np.log(500) - 0.5, 1.0)), 1, length))
            if column + n > length:
                break
            segment_ids[b, column : column + n] = segment
            column, segment = column + n, segment + 1
    return segment_ids


def timed(cuda, fn, repeat: int = 10) -> float:
    fn()
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    cuda.synchronize()
    return (time.perf_counter() - start) / repeat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--length", type=int, default=4096)
    args = parser.parse_args()
    try:
        from numba import cuda
    except ImportError:
        print("no GPU check possible: numba-cuda is not installed (pip install 'engine[cuda]')")
        return 2
    if not cuda.is_available():
        print("no GPU found by numba.cuda: nothing to check on this machine")
        return 2

    from engine import masks
    from engine.cuda import masks as cuda_masks

    segment_ids = packed_segments(args.rows, args.length)
    device_ids = cuda.to_device(segment_ids)
    rows, length = segment_ids.shape
    name = getattr(cuda.get_current_device(), "name", "simulator")
    print(f"device: {name.decode() if isinstance(name, bytes) else name}")
    print(f"segment_ids [{rows}, {length}], {int((segment_ids >= 0).sum())} real positions")

    failures = 0
    for kind in ("dense", "additive"):
        dtype = masks.MASK_KINDS[kind]
        out = cuda.device_array((rows, length, length), dtype=dtype)
        masks.attention_mask(device_ids, kind, device="cuda", out=out)
        equal = np.array_equal(out.copy_to_host(), masks.attention_mask(segment_ids, kind, device="cpu"))
        failures += not equal
        seconds = timed(cuda, lambda: cuda_masks.launch_mask(kind, device_ids, out))
        copy_src = cuda.device_array(out.nbytes, dtype=np.uint8)
        copy_dst = cuda.device_array(out.nbytes, dtype=np.uint8)
        copy_s = timed(cuda, lambda: copy_dst.copy_to_device(copy_src))
        gb = out.nbytes / 1e9
        print(f"{kind:>9} mask: {'equal' if equal else 'MISMATCH'}  {seconds * 1e3:8.3f} ms  {gb / seconds:7.1f} GB/s written"
              f"  | d2d copy of {gb:.3f} GB: {copy_s * 1e3:.3f} ms = {gb / copy_s:.1f} GB/s "
              f"({2 * gb / copy_s:.1f} GB/s read+write)"
              f"  ratio {copy_s / seconds:.2f}")

    positions = cuda.device_array((rows, length), dtype=np.int32)
    masks.position_ids(device_ids, device="cuda", out=positions)
    equal = np.array_equal(positions.copy_to_host(), masks.position_ids(segment_ids, device="cpu"))
    failures += not equal
    seconds = timed(cuda, lambda: cuda_masks.launch_position_ids(device_ids, positions))
    print(f"position ids: {'equal' if equal else 'MISMATCH'}  {seconds * 1e3:.3f} ms  "
          f"{positions.nbytes / 1e9 / seconds:.1f} GB/s")

    bounds, longest = masks.varlen_boundaries(device_ids, device="cuda", to_host=True)
    cpu_bounds, cpu_longest = masks.varlen_boundaries(segment_ids, device="cpu")
    equal = np.array_equal(bounds, cpu_bounds) and longest == cpu_longest
    failures += not equal
    seconds = timed(cuda, lambda: cuda_masks.launch_cu_seqlens(device_ids))
    print(f"cu_seqlens ({bounds.shape[0] - 1} sequences, max {longest}): {'equal' if equal else 'MISMATCH'}  "
          f"{seconds * 1e3:.3f} ms (two launches and a host sum)")

    print("all CUDA kernels equal the CPU kernels" if not failures else f"{failures} MISMATCHES")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
