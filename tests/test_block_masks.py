"""FlexAttention block tables (the block rule of engine.block_masks) against the naive twin, torch's
create_block_mask field by field, and the CUDA kernels (simulator and PTX for sm_90)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import block_mask_tensors
from engine.errors import ConfigurationError, PackingError
from tests.naive_packing import naive_block_tables, naive_transposed_tables

HERE = Path(__file__).resolve().parent
FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")


def packed_rows(rng, rows, length, padded=True):
    """Rows as a packer writes them: runs of rising ids, sometimes a padding run, padding at the end."""
    seg = np.full((rows, length), -1, np.int32)
    for b in range(rows):
        position, segment = 0, 0
        while position < length:
            n = int(rng.integers(1, 12))
            seg[b, position : position + n] = segment if rng.random() > 0.1 else -1
            position += n
            segment += 1
        if padded:
            seg[b, length - int(rng.integers(0, length + 1)) :] = -1
    return seg


def random_cases(seed=3, count=30):
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(count):
        rows, length, block = int(rng.integers(1, 4)), int(rng.integers(1, 40)), int(rng.choice([1, 2, 3, 4, 8, 128]))
        if k % 3 == 0:  # contiguous runs whose ids are in any order (not rising)
            seg = packed_rows(rng, rows, length, padded=False)
            relabel = rng.permutation(length + 1).astype(np.int32)
            seg = np.where(seg >= 0, relabel[np.maximum(seg, 0)], -1).astype(np.int32)
        else:
            seg = packed_rows(rng, rows, length, padded=k % 3 == 2)
        cases.append((seg, block))
    return cases


def test_hand_computed_tables():
    # Two documents of 3 and 2 positions, then 3 padding; block size 2 -> 4 blocks.
    seg = np.array([[0, 0, 0, 1, 1, -1, -1, -1]], np.int32)
    tables = block_mask_tensors(seg, 2, device="cpu")
    # qb0: diag partial. qb1 (positions 2,3 = ids 0,1): kb0 partial (id 0), diag partial.
    # qb2 (4,5 = id 1, pad): kb1 partial (id 1), kb0 absent. qb3 (pad): diagonal only.
    np.testing.assert_array_equal(tables.kv_num_blocks, [[[1, 2, 2, 1]]])
    np.testing.assert_array_equal(
        tables.kv_indices, [[[[0, 1, 2, 3], [0, 1, 2, 3], [1, 2, 0, 3], [3, 0, 1, 2]]]]
    )
    np.testing.assert_array_equal(tables.full_kv_num_blocks, [[[0, 0, 0, 0]]])
    np.testing.assert_array_equal(tables.full_kv_indices, np.tile(np.arange(4, dtype=np.int32), (1, 1, 4, 1)))
    assert all(t.dtype == np.int32 for t in tables)


def test_full_blocks_and_last_partial_block():
    # One document of 5 positions, block 2: (1, 0) is full; block 2 holds only position 4 (L = 5)
    # so it is never full, and (2, 0), (2, 1) are partial.
    tables = block_mask_tensors(np.zeros((1, 5), np.int32), 2, device="cpu")
    np.testing.assert_array_equal(tables.full_kv_num_blocks, [[[0, 1, 0]]])
    np.testing.assert_array_equal(tables.full_kv_indices[0, 0, 1], [0, 1, 2])
    np.testing.assert_array_equal(tables.kv_num_blocks, [[[1, 1, 3]]])
    np.testing.assert_array_equal(tables.kv_indices[0, 0, 2], [0, 1, 2])
    # Block size 1: every allowed pair is a full block, none is partial.
    tables = block_mask_tensors(np.array([[0, 0, -1]], np.int32), 1, device="cpu")
    np.testing.assert_array_equal(tables.kv_num_blocks, [[[0, 0, 0]]])
    np.testing.assert_array_equal(tables.full_kv_num_blocks, [[[1, 2, 1]]])
    np.testing.assert_array_equal(tables.full_kv_indices, [[[[0, 1, 2], [0, 1, 2], [2, 0, 1]]]])


@pytest.mark.parametrize("seg, block", random_cases())
def test_cpu_kernel_equals_naive_twin(seg, block):
    for name, mine, reference in zip(FIELDS, block_mask_tensors(seg, block, device="cpu"), naive_block_tables(seg, block)):
        np.testing.assert_array_equal(mine, reference, err_msg=name)


@pytest.mark.parametrize("seg, block", random_cases(seed=4, count=10))
def test_query_side_tables_equal_naive_transposition(seg, block):
    from engine.kernels.block_masks import transpose_tables

    tables = block_mask_tensors(seg, block, device="cpu")
    for count, indices in ((tables.kv_num_blocks, tables.kv_indices), (tables.full_kv_num_blocks, tables.full_kv_indices)):
        q_count = np.empty((indices.shape[0], 1, indices.shape[3]), np.int32)
        q_indices = np.empty((indices.shape[0], 1, indices.shape[3], indices.shape[2]), np.int32)
        transpose_tables(count, indices, q_count, q_indices)
        expected = naive_transposed_tables(count, indices)
        np.testing.assert_array_equal(q_count, expected[0])
        np.testing.assert_array_equal(q_indices, expected[1])


def test_empty_shapes():
    tables = block_mask_tensors(np.zeros((3, 0), np.int32), device="cpu")
    assert [t.shape for t in tables] == [(3, 1, 0), (3, 1, 0, 0), (3, 1, 0), (3, 1, 0, 0)]
    tables = block_mask_tensors(np.zeros((0, 5), np.int32), 2, device="cpu")
    assert [t.shape for t in tables] == [(0, 1, 3), (0, 1, 3, 3), (0, 1, 3), (0, 1, 3, 3)]


def test_errors_name_the_problem():
    with pytest.raises(ConfigurationError, match="block_size=0"):
        block_mask_tensors(np.zeros((1, 4), np.int32), 0)
    with pytest.raises(ConfigurationError, match="block_size=True"):
        block_mask_tensors(np.zeros((1, 4), np.int32), True)
    with pytest.raises(PackingError, match=r"segment_ids\[0, 1\] = -2"):
        block_mask_tensors(np.array([[0, -2]]), 2, device="cpu")
    with pytest.raises(PackingError, match="2-D"):
        block_mask_tensors(np.zeros(4, np.int32), 2, device="cpu")


try:
    import torch
except ImportError:
    torch = None
torch_missing = pytest.mark.skipif(torch is None, reason="needs the torch extra (pip install -e '.[torch]')")


def torch_reference(seg, block):
    from torch.nn.attention.flex_attention import create_block_mask

    from engine.torch import document_causal_mask_mod

    rows, length = seg.shape
    mod = document_causal_mask_mod(torch.from_numpy(seg))
    return create_block_mask(mod, rows, 1, length, length, device="cpu", BLOCK_SIZE=block)


@torch_missing
@pytest.mark.parametrize("seg, block", random_cases(seed=5, count=12))
def test_tables_equal_create_block_mask(seg, block):
    reference = torch_reference(seg, block)
    for name, mine in zip(FIELDS, block_mask_tensors(seg, block, device="cpu")):
        np.testing.assert_array_equal(mine, getattr(reference, name).numpy(), err_msg=name)


@torch_missing
@pytest.mark.parametrize("seg, block", random_cases(seed=9, count=6))
def test_block_mask_equals_create_block_mask_field_by_field(seg, block):
    from engine.torch import block_mask

    reference = torch_reference(seg, block)
    mine = block_mask(seg, block)
    assert mine.seq_lengths == reference.seq_lengths and mine.BLOCK_SIZE == reference.BLOCK_SIZE
    for name in FIELDS + ("q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"):
        assert torch.equal(getattr(mine, name), getattr(reference, name)), name
    assert torch.equal(mine.to_dense(), reference.to_dense())
    from_tensor = block_mask(torch.from_numpy(seg).to(torch.int64), block)
    assert torch.equal(from_tensor.kv_indices, reference.kv_indices)


@torch_missing
def test_flex_attention_with_the_block_mask_equals_dense_attention():
    from torch.nn.attention.flex_attention import flex_attention

    from engine.masks import attention_mask
    from engine.torch import block_mask

    seg = packed_rows(np.random.default_rng(2), 2, 37)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 37, 8, generator=generator, dtype=torch.float64) for _ in range(3))
    out = flex_attention(q, k, v, block_mask=block_mask(seg, 8))
    dense = torch.from_numpy(attention_mask(seg, device="cpu"))[:, None]
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense)
    real = torch.from_numpy(seg >= 0)[:, None, :, None].expand_as(out)
    torch.testing.assert_close(out[real], expected[real])


cuda_missing = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is None, reason="numba-cuda is not installed (pip install 'engine[cuda]')"
)


@cuda_missing
def test_cuda_kernels_match_cpu_and_naive_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run([sys.executable, str(HERE / "cuda_sim_block_masks.py")], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "11 cases, 0 mismatches" in result.stdout


@cuda_missing
def test_cuda_kernels_compile_to_ptx_for_sm90():
    code = (
        "from numba import cuda\n"
        "from engine.cuda.block_masks import KERNELS\n"
        "for name, (function, signature) in KERNELS.items():\n"
        "    ptx, _ = cuda.compile_ptx(function, signature, cc=(9, 0))\n"
        "    assert '.target sm_90' in ptx, name\n"
        "    print(name, len(ptx))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert {line.split()[0] for line in result.stdout.splitlines()} == {"block_summaries_kernel", "block_tables_kernel"}
