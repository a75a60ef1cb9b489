"""A FlexAttention ``BlockMask`` for packed rows, built from segment ids without ``create_block_mask``.

``block_mask(segment_ids, block_size=128, device=None)`` computes the four block tables with
``engine.block_masks.block_mask_tensors`` (CPU kernel; the numba-cuda kernel when the segment ids
are a CUDA tensor and numba-cuda is usable) and hands them to ``BlockMask.from_kv_blocks`` with
the document-causal ``mask_mod`` for the partial blocks; on the host the query-side tables
(the transposition ``from_kv_blocks`` would compute) come from a kernel as well. The result equals what
``create_block_mask`` builds for the same rule, field by field, in milliseconds instead of seconds.
torch is imported only when this module is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.block_masks import DEFAULT_BLOCK_SIZE, block_mask_tensors, check_block_size
from engine.kernels import block_masks as block_kernels

__all__ = ["block_mask", "document_causal_mask_mod"]


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("engine.torch_masks needs PyTorch: pip install torch") from None
    return torch


def document_causal_mask_mod(segment_ids):
    """The ``mask_mod`` of SPEC §8 over an int32 tensor ``[B, L]``: ``kv <= q``, same id, both real;
    a padding query keeps itself as its one fallback key."""

    def mask_mod(b, h, q_idx, kv_idx):
        own = segment_ids[b, q_idx]
        return (q_idx == kv_idx) | ((kv_idx <= q_idx) & (own == segment_ids[b, kv_idx]) & (own >= 0))

    return mask_mod


def block_mask(segment_ids: Any, block_size: int = DEFAULT_BLOCK_SIZE, device: Any = None):
    """``BlockMask`` of ``segment_ids`` ``[B, L]`` (numpy array or tensor; -1 = padding).

    ``device``: where the mask's tensors live (default: the device of ``segment_ids`` when it is
    a tensor, else CPU).
    """
    torch = _torch()
    from torch.nn.attention.flex_attention import BlockMask

    block_size = check_block_size(block_size)
    on_cuda = False
    if isinstance(segment_ids, torch.Tensor):
        target = torch.device(device) if device is not None else segment_ids.device
        if segment_ids.is_cuda and _numba_cuda_usable():
            on_cuda = True
            tables = block_mask_tensors(segment_ids.to(torch.int32).contiguous(), block_size, device="cuda")
            tensors = [torch.as_tensor(t, device=segment_ids.device) for t in tables]
        else:
            host = segment_ids.detach().cpu().numpy()
            tables = block_mask_tensors(host, block_size, device="cpu")
        seg = segment_ids.to(device=target, dtype=torch.int32)
    else:
        target = torch.device(device) if device is not None else torch.device("cpu")
        host = np.asarray(segment_ids)
        tables = block_mask_tensors(host, block_size, device="cpu")
        seg = torch.from_numpy(np.ascontiguousarray(host, dtype=np.int32)).to(target)
    length = seg.shape[1]
    mask_mod = document_causal_mask_mod(seg)
    if on_cuda:  # torch transposes the tables on the GPU
        return BlockMask.from_kv_blocks(*[t.to(target) for t in tensors], BLOCK_SIZE=block_size, mask_mod=mask_mod,
                                        seq_lengths=(length, length))
    # On the host the query-side tables come from a kernel too: torch's transposition costs more
    # than the whole kv side.
    query_side = []
    for count, indices in ((tables.kv_num_blocks, tables.kv_indices), (tables.full_kv_num_blocks, tables.full_kv_indices)):
        q_count = np.empty((indices.shape[0], 1, indices.shape[3]), np.int32)
        q_indices = np.empty((indices.shape[0], 1, indices.shape[3], indices.shape[2]), np.int32)
        if indices.size:
            block_kernels.transpose_tables(count, indices, q_count, q_indices)
        query_side += [q_count, q_indices]
    mask = BlockMask.from_kv_blocks(*[torch.from_numpy(t).to(target) for t in tables], BLOCK_SIZE=block_size,
                                    mask_mod=mask_mod, seq_lengths=(length, length), compute_q_blocks=False)
    (mask.q_num_blocks, mask.q_indices, mask.full_q_num_blocks, mask.full_q_indices) = (
        torch.from_numpy(t).to(target) for t in query_side)
    return mask


def _numba_cuda_usable() -> bool:
    from engine.masks import cuda_available

    return cuda_available()
