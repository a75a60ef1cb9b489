"""CUDA mask kernels: run under the simulator (own process) against the CPU kernels and the naive
twins, and compiled to PTX for sm_90 by the real compiler. Skipped only without numba-cuda."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is None,
    reason="numba-cuda is not installed (pip install 'engine[cuda]')",
)

HERE = Path(__file__).resolve().parent


def test_kernels_match_cpu_and_naive_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run(
        [sys.executable, str(HERE / "cuda_sim_check.py")], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 mismatches" in result.stdout


def test_every_kernel_compiles_to_ptx_for_sm90():
    # In its own process too: a simulator-enabled numba.cuda in this one could not compile.
    code = (
        "from numba import cuda\n"
        "from engine.cuda.masks import KERNELS\n"
        "for name, (function, signature) in KERNELS.items():\n"
        "    ptx, _ = cuda.compile_ptx(function, signature, cc=(9, 0))\n"
        "    assert '.target sm_90' in ptx, name\n"
        "    print(name, len(ptx))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert {line.split()[0] for line in result.stdout.splitlines()} == {
        "dense_mask_kernel", "additive_mask_kernel", "position_ids_kernel", "run_count_kernel", "run_boundaries_kernel",
    }


CUDA_SIM_CODE = """
import numpy as np
from engine import masks
for shape in [(2, 0), (0, 3), (0, 0)]:
    seg = np.zeros(shape, np.int32)
    cpu = masks.varlen_boundaries(seg, device="cpu")
    gpu = masks.varlen_boundaries(seg, device="cuda", to_host=True)
    print(shape, cpu[0].tolist(), cpu[1], gpu[0].tolist(), gpu[1])
"""


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="numba-cuda is not installed (pip install "
                                                                           "-e '.[cuda]')")
def test_cuda_varlen_boundaries_match_cpu_on_empty_shapes():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run([sys.executable, "-c", CUDA_SIM_CODE], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "(2, 0) [0] 0 [0] 0",
        "(0, 3) [0] 0 [0] 0",
        "(0, 0) [0] 0 [0] 0",
    ]
