"""FlexAttention block masks from segment ids: the four tables of ``BlockMask.from_kv_blocks``.

The block rule (cited as "the block rule of engine.block_masks"). For segment ids ``[B, L]``
(``-1`` = padding) and block size ``Q`` (default 128; queries and keys alike), query block ``qb``
holds queries ``[qb*Q, min((qb+1)*Q, L))`` and key block ``kb`` keys ``[kb*Q, min((kb+1)*Q, L))``.
Under the attention rule of ``engine.masks`` (query ``i`` sees key ``j`` iff ``j <= i``, same id,
both real; a padding query sees itself), the block pair ``(qb, kb)`` is *full* when every
``(i, j)`` in it is allowed, *partial* when some but not all are, and absent when none is.
``block_mask_tensors`` returns, per row and query block, the count and ascending indices of the
partial key blocks and of the full key blocks:

- ``kv_num_blocks`` / ``full_kv_num_blocks``: int32 ``[B, 1, nq]``;
- ``kv_indices`` / ``full_kv_indices``: int32 ``[B, 1, nq, nk]``, ``nq = nk = ceil(L / Q)``; the
  slots past the count hold the remaining block indices ascending, exactly as
  ``torch.nn.attention.flex_attention.create_block_mask`` leaves them, so the tables equal its
  output field by field (the head dimension is 1: the rule is the same for every head).

Devices as ``engine.masks``: ``device="auto"`` runs the numba-cuda kernels when a GPU is usable,
else the CPU kernels; both give identical tables. Cost: ``O(B L + B nq nk)`` for rows whose ids
rise or fall monotonically, as packed rows do (see ``engine.kernels.block_masks``); measured
about 1 ms on CPU for ``[8, 8192]``, where ``create_block_mask`` takes seconds.
``engine.torch.block_mask`` wraps the tables in a ``BlockMask``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from engine.checks import check_count
from engine.kernels import block_masks as cpu_kernels
from engine.masks import _device_segment_ids, _host_segment_ids, resolve_device

__all__ = ["BlockMaskTensors", "block_mask_tensors", "DEFAULT_BLOCK_SIZE"]

DEFAULT_BLOCK_SIZE = 128


class BlockMaskTensors(NamedTuple):
    """The four int32 tables ``BlockMask.from_kv_blocks`` takes, in its argument order."""

    kv_num_blocks: Any  # [B, 1, nq]
    kv_indices: Any  # [B, 1, nq, nk]
    full_kv_num_blocks: Any  # [B, 1, nq]
    full_kv_indices: Any  # [B, 1, nq, nk]


def check_block_size(block_size: Any) -> int:
    return check_count(block_size, "block_size", low=1)


def block_mask_tensors(segment_ids: Any, block_size: int = DEFAULT_BLOCK_SIZE, *, device: str = "auto",
                       to_host: bool = False) -> BlockMaskTensors:
    """The block tables of ``segment_ids`` ``[B, L]`` for block size ``block_size``.

    On CUDA the tables are device arrays unless ``to_host=True``; on CPU numpy arrays.
    """
    block_size = check_block_size(block_size)
    where = resolve_device(device)
    if where == "cuda":
        from engine.cuda import block_masks as cuda_kernels

        seg = _device_segment_ids(segment_ids)
        tables = cuda_kernels.launch_block_tables(seg, block_size)
        if to_host:
            tables = tuple(t.copy_to_host() for t in tables)
        return BlockMaskTensors(*tables)
    seg = _host_segment_ids(segment_ids)
    rows, length = seg.shape
    blocks = -(-length // block_size)
    block_min = np.empty((rows, blocks), np.int32)
    block_max = np.empty((rows, blocks), np.int32)
    block_uniform = np.empty((rows, blocks), np.int32)
    tables = BlockMaskTensors(
        np.empty((rows, 1, blocks), np.int32),
        np.empty((rows, 1, blocks, blocks), np.int32),
        np.empty((rows, 1, blocks), np.int32),
        np.empty((rows, 1, blocks, blocks), np.int32),
    )
    if blocks:
        cpu_kernels.block_summaries(seg, block_size, block_min, block_max, block_uniform)
        cpu_kernels.block_tables(seg, block_size, block_min, block_max, block_uniform, *tables)
    return tables
