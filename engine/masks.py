"""Attention masks, position ids and variable-length boundaries from segment ids.

``segment_ids`` is an integer array ``[B, L]``: ids ``>= 0`` name the segment (document piece)
a position belongs to, ``-1`` marks padding. The attention rule (cited as "the attention rule of
engine.masks"), which every output follows:

    query ``i`` may attend key ``j``  iff  ``j <= i`` and ``seg[i] == seg[j]`` and both are real;
    a padding query attends only itself (a harmless fallback key, so softmax never sees an
    all-masked row); zero its output and ignore its loss.

So no real query ever sees a padding key, and changing any padding value (its id, its token)
changes no real output.

A segment id names ONE contiguous run of its row (segment ids are unique inside a row, the
packing rules of engine.packing, so packed rows always are): a real id that reappears after
another run (``[0, 0, 1, 1, 0, 0]``, or ``[0, -1, 0]``) is malformed, and every function here
refuses such a row with a PackingError naming the row, position and id, on both devices. So the
dense/additive masks, ``position_ids`` (restart per run) and ``varlen_boundaries`` (one sequence
per run) always describe the same segments. Padding (``-1``) may appear anywhere, any number of times.

Outputs: ``attention_mask(kind="dense")`` bool ``[B, L, L]`` (True = may attend),
``kind="additive"`` float32 ``[B, L, L]`` (0 / -inf, add to the scores before softmax),
``position_ids`` (restart at 0 in every run of equal ids, 0 on padding) and
``varlen_boundaries`` (``cu_seqlens``, ``max_seqlen``) for variable-length kernels (flash-attn varlen
convention).

Devices: ``device="auto"`` runs the numba-cuda kernels (``engine.cuda.masks``, imported only
then) when ``numba.cuda.is_available()``, else the CPU kernels (``engine.kernels.masks``); if
``out`` is given, ``auto`` follows where ``out`` lives. ``device="cuda"`` without a usable GPU
raises ``DeviceError``; there is no silent fallback. Both devices give identical output. CUDA
results stay on the device unless ``to_host=True``. Cost: ``O(B L^2)`` bytes written for the
masks, ``O(B L)`` for the rest.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import numpy as np

from engine.checks import check_count
from engine.errors import ConfigurationError, DeviceError, PackingError
from engine.kernels import masks as cpu_kernels

__all__ = [
    "attention_mask",
    "mask_buffer",
    "varlen_boundaries",
    "position_ids",
    "loss_mask",
    "cuda_available",
    "resolve_device",
]

MASK_KINDS = {"dense": np.dtype(np.bool_), "additive": np.dtype(np.float32)}
DEVICES = ("auto", "cpu", "cuda")
_INT32_MAX = np.iinfo(np.int32).max


def cuda_available() -> bool:
    """True iff numba-cuda is installed and ``numba.cuda.is_available()`` (a GPU or the simulator)."""
    if importlib.util.find_spec("numba_cuda") is None:
        return False
    from numba import cuda

    return bool(cuda.is_available())


def _is_device_array(array: Any) -> bool:
    """A numba device array (real or simulated) or any object with ``__cuda_array_interface__``."""
    if isinstance(array, np.ndarray):
        return False
    if hasattr(array, "__cuda_array_interface__"):
        return True
    cuda = sys.modules.get("numba.cuda")
    return cuda is not None and bool(cuda.devicearray.is_cuda_ndarray(array))


def resolve_device(device: str, out: Any = None) -> str:
    """``"cpu"`` or ``"cuda"`` for a requested ``device``; raises DeviceError for an unusable GPU."""
    if device not in DEVICES:
        raise ConfigurationError(f"device={device!r} is not one of {DEVICES}")
    if device == "auto":
        if out is not None:
            return "cuda" if _is_device_array(out) else "cpu"
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda":
        if importlib.util.find_spec("numba_cuda") is None:
            raise DeviceError(
                "device='cuda' needs numba-cuda, which is not installed; "
                "install it with `pip install 'engine[cuda]'` or pass device='cpu'"
            )
        if not cuda_available():
            raise DeviceError("device='cuda' was requested but numba.cuda finds no usable GPU; pass device='cpu'")
    return device


def _host_segment_ids(segment_ids: Any) -> np.ndarray:
    """Validated C-contiguous int32 copy (or view) of host segment ids ``[B, L]``."""
    try:
        array = np.asarray(segment_ids)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise PackingError(f"segment_ids: expected a 2-D integer array [rows, length] ({exc})") from None
    if array.ndim != 2:
        raise PackingError(f"segment_ids: expected a 2-D array [rows, length], got shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise PackingError(f"segment_ids: expected an integer dtype, got {array.dtype}")
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < -1:
            row, col = np.argwhere(array < -1)[0]
            raise PackingError(
                f"segment_ids[{row}, {col}] = {array[row, col]}: expected -1 (padding) or an id >= 0"
            )
        if high > _INT32_MAX:
            row, col = np.argwhere(array > _INT32_MAX)[0]
            raise PackingError(f"segment_ids[{row}, {col}] = {array[row, col]}: expected an id < 2**31")
    array = np.ascontiguousarray(array, dtype=np.int32)
    _check_segment_runs(array)
    return array


def _check_segment_runs(array: np.ndarray) -> None:
    """PackingError at the first real id that starts a run after an earlier run of the same id in its row."""
    rows, length = array.shape
    if rows == 0 or length < 2:
        return
    starts = np.empty(array.shape, dtype=bool)
    starts[:, 0] = True
    np.not_equal(array[:, 1:], array[:, :-1], out=starts[:, 1:])
    starts &= array >= 0
    run_rows, run_cols = np.nonzero(starts)  # row-major: earlier positions first
    keys = (run_rows.astype(np.int64) << 32) | array[run_rows, run_cols].astype(np.int64)
    order = np.argsort(keys, kind="stable")
    repeats = np.flatnonzero(keys[order[1:]] == keys[order[:-1]]) + 1
    if repeats.size:
        k = int(np.argmin(order[repeats]))  # the reappearance earliest in row-major order
        later, earlier = int(order[repeats[k]]), int(order[repeats[k] - 1])
        row, col, first = int(run_rows[later]), int(run_cols[later]), int(run_cols[earlier])
        raise PackingError(
            f"segment_ids[{row}, {col}] = {array[row, col]}: segment {array[row, col]} of row {row} already ran from "
            f"position {first} and ended; a segment id names one contiguous run of its row (ids are unique per row)"
        )


def _device_segment_ids(segment_ids: Any):
    from numba import cuda

    if _is_device_array(segment_ids):
        array = segment_ids if cuda.devicearray.is_cuda_ndarray(segment_ids) else cuda.as_cuda_array(segment_ids)
        if array.ndim != 2 or array.dtype != np.int32 or not array.is_c_contiguous():
            raise PackingError(
                f"segment_ids on the device: expected a C-contiguous int32 [rows, length] array, "
                f"got {array.dtype} with shape {array.shape}"
            )
        _host_segment_ids(array.copy_to_host())  # the same checks as host input (B*L ids: small next to a mask)
        return array
    return cuda.to_device(_host_segment_ids(segment_ids))


def _check_out(out: Any, shape: tuple, dtype: np.dtype, device: str, what: str):
    """Validate a caller-provided output buffer; returns it (as a numba device array on CUDA)."""
    if device == "cuda":
        if not _is_device_array(out):
            raise ConfigurationError(
                f"{what} out=: device='cuda' needs a device array (numba or any __cuda_array_interface__), "
                f"got {type(out).__name__}; use to_host=True for a host copy"
            )
        from numba import cuda

        if not cuda.devicearray.is_cuda_ndarray(out):
            out = cuda.as_cuda_array(out)
        contiguous = out.is_c_contiguous()
    else:
        if not isinstance(out, np.ndarray):
            raise ConfigurationError(f"{what} out=: expected a numpy array, got {type(out).__name__}")
        contiguous = out.flags.c_contiguous and out.flags.writeable
    if tuple(out.shape) != tuple(shape) or np.dtype(out.dtype) != dtype or not contiguous:
        raise ConfigurationError(
            f"{what} out=: expected a C-contiguous writeable {dtype} array of shape {tuple(shape)}, "
            f"got {np.dtype(out.dtype)} with shape {tuple(out.shape)}"
        )
    return out


def attention_mask(
    segment_ids: Any, kind: str = "dense", *, device: str = "auto", out: Any = None, to_host: bool = False
):
    """The attention mask of ``segment_ids`` ``[B, L]``: bool (``"dense"``) or float32 (``"additive"``) ``[B, L, L]``.

    ``out`` is reused when given (same shape and dtype; a device array for CUDA). On CUDA the
    result is a device array unless ``to_host=True``.
    """
    if kind not in MASK_KINDS:
        raise ConfigurationError(f"kind={kind!r} is not one of {tuple(MASK_KINDS)}")
    dtype = MASK_KINDS[kind]
    where = resolve_device(device, out)
    if where == "cuda":
        from numba import cuda

        from engine.cuda import masks as cuda_kernels

        seg = _device_segment_ids(segment_ids)
        rows, length = seg.shape
        shape = (rows, length, length)
        result = cuda.device_array(shape, dtype=dtype) if out is None else _check_out(out, shape, dtype, where, kind)
        cuda_kernels.launch_mask(kind, seg, result)
        return result.copy_to_host() if to_host else result
    seg = _host_segment_ids(segment_ids)
    rows, length = seg.shape
    shape = (rows, length, length)
    result = _aligned_empty(shape, dtype) if out is None else _check_out(out, shape, dtype, where, kind)
    run_start = np.empty_like(seg)
    contiguous = np.empty(rows, dtype=np.uint8)
    cpu_kernels.segment_runs(seg, run_start, contiguous)
    itemsize = result.dtype.itemsize
    step = cpu_kernels.STREAM_BYTES
    if result.size and result.ctypes.data % step == 0 and (length * itemsize) % step == 0:
        # Rows tile into aligned 32-byte chunks: write them with streaming stores (one memory pass).
        allowed, blocked = (True, False) if kind == "dense" else (0.0, -np.inf)
        patterns = [np.full(step // itemsize, v, dtype=dtype).view(np.uint8) for v in (allowed, blocked)]
        cpu_kernels.streamed_mask(seg, run_start, contiguous, result.reshape(-1).view(np.uint8), itemsize, *patterns)
    else:
        kernel = cpu_kernels.dense_mask if kind == "dense" else cpu_kernels.additive_mask
        kernel(seg, run_start, contiguous, result)
    return result


def mask_buffer(batch: int, length: int, kind: str = "dense") -> np.ndarray:
    """An empty host ``out`` for ``attention_mask`` (``[batch, length, length]``), aligned so the
    streaming-store kernel can write it; allocate once and reuse it every step."""
    if kind not in MASK_KINDS:
        raise ConfigurationError(f"kind={kind!r} is not one of {tuple(MASK_KINDS)}")
    batch, length = check_count(batch, "mask_buffer: batch"), check_count(length, "mask_buffer: length")
    return _aligned_empty((batch, length, length), MASK_KINDS[kind])


def _aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on a 64-byte boundary."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    skip = (-raw.ctypes.data) % 64
    return raw[skip : skip + nbytes].view(dtype).reshape(shape)


def position_ids(segment_ids: Any, *, device: str = "auto", out: Any = None, to_host: bool = False):
    """int32 ``[B, L]``: offset inside each run of equal ids (restarting at 0), 0 on padding."""
    where = resolve_device(device, out)
    if where == "cuda":
        from numba import cuda

        from engine.cuda import masks as cuda_kernels

        seg = _device_segment_ids(segment_ids)
        dtype = np.dtype(np.int32)
        result = cuda.device_array(seg.shape, dtype=dtype) if out is None else _check_out(
            out, seg.shape, dtype, where, "position_ids"
        )
        cuda_kernels.launch_position_ids(seg, result)
        return result.copy_to_host() if to_host else result
    seg = _host_segment_ids(segment_ids)
    result = np.empty(seg.shape, np.int32) if out is None else _check_out(
        out, seg.shape, np.dtype(np.int32), where, "position_ids"
    )
    cpu_kernels.position_ids(seg, result)
    return result


def varlen_boundaries(segment_ids: Any, *, device: str = "auto", to_host: bool = False):
    """``(cu_seqlens, max_seqlen)`` over the flattened ``[B * L]`` tokens (flash-attn varlen convention).

    Every maximal run of equal ids in a row is one sequence, so ``cu_seqlens`` (int32) holds the
    flattened start ``b * L + i`` of every run and finally ``B * L``. A row's padding run is a
    sequence of its own: offsets index ``q.reshape(B * L, heads, dim)`` directly, real sequences
    never see padding, padding outputs are to be zeroed. ``max_seqlen`` (int) covers every run,
    padding included, as the kernels require. Rows always start a new sequence.
    """
    where = resolve_device(device)
    if where == "cuda":
        from engine.cuda import masks as cuda_kernels

        seg = _device_segment_ids(segment_ids)
        _check_flat_size(seg.shape)
        bounds, longest = cuda_kernels.launch_cu_seqlens(seg)
        return (bounds.copy_to_host() if to_host else bounds), longest
    seg = _host_segment_ids(segment_ids)
    _check_flat_size(seg.shape)
    bounds = np.empty(cpu_kernels.run_count(seg) + 1, dtype=np.int32)
    longest = int(cpu_kernels.run_boundaries(seg, bounds))
    return bounds, longest


def _check_flat_size(shape: tuple) -> None:
    if shape[0] * shape[1] > _INT32_MAX:
        raise ConfigurationError(
            f"segment_ids of shape {tuple(shape)} hold more than 2**31 - 1 tokens; int32 cu_seqlens cannot index them"
        )


def loss_mask(segment_ids: Any) -> np.ndarray:
    """bool ``[B, L]``: True on real positions (``segment_ids >= 0``); padding is never scored."""
    return _host_segment_ids(segment_ids) >= 0
