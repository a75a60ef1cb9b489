"""Attention masks, position ids and cu_seqlens (CPU kernels) against the rule, the reference
text's numbers and the naive twins."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine import masks
from engine.errors import ConfigurationError, DeviceError, PackingError
from engine.kernels import masks as cpu_kernels
from tests.naive_packing import (
    naive_additive_mask,
    naive_dense_mask,
    naive_position_ids,
    naive_varlen,
    reference_attention,
)

VALUES = np.array([[2.0, 4.0, 8.0, 16.0]])


def attend(values, segment_ids):
    segment_ids = np.asarray(segment_ids, np.int32)
    return reference_attention(values, masks.attention_mask(segment_ids, "additive", device="cpu"), segment_ids)


def test_causal_prefix_means_and_counterfactual():
    out = attend(VALUES, [[0, 0, 0, 0]])
    np.testing.assert_allclose(out[0], [2, 3, 14 / 3, 7.5])
    changed = attend([[2.0, 4.0, 8.0, 1000.0]], [[0, 0, 0, 0]])
    np.testing.assert_array_equal(changed[0, :3], out[0, :3])
    expected = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], bool)
    np.testing.assert_array_equal(masks.attention_mask(np.zeros((1, 4), np.int32), device="cpu")[0], expected)


def test_segments_give_packed_means():
    out = attend(VALUES, [[0, 0, 1, 1]])
    np.testing.assert_allclose(out[0], [2, 3, 8, 12])
    mask = masks.attention_mask(np.array([[0, 0, 1, 1]]), device="cpu")[0]
    assert not mask[2, :2].any() and not mask[3, :2].any()


def test_padding_never_changes_real_outputs_and_no_nan():
    segment_ids = [[0, 0, 1, -1, -1]]
    base = attend([[2.0, 4.0, 8.0, 16.0, 32.0]], segment_ids)
    assert np.isfinite(base).all()
    np.testing.assert_allclose(base[0], [2, 3, 8, 0, 0])
    for position in (3, 4):
        values = np.array([[2.0, 4.0, 8.0, 16.0, 32.0]])
        values[0, position] = -1e6
        np.testing.assert_array_equal(attend(values, segment_ids), base)
    mask = masks.attention_mask(np.array(segment_ids), device="cpu")[0]
    np.testing.assert_array_equal(mask[3], [0, 0, 0, 1, 0])  # padding query: only itself
    np.testing.assert_array_equal(mask[:3, 3:], np.zeros((3, 2), bool))  # no real query sees padding


def test_additive_is_zero_or_minus_inf_from_the_same_rule():
    seg = np.array([[0, 0, 1, -1], [2, 2, 2, 2]], np.int32)
    dense = masks.attention_mask(seg, device="cpu")
    additive = masks.attention_mask(seg, "additive", device="cpu")
    assert additive.dtype == np.float32
    np.testing.assert_array_equal(additive == 0.0, dense)
    assert np.isneginf(additive[~dense]).all()


NOT_CONTIGUOUS = [
    ([[0, 0, 1, 1, 0, 0]], "segment_ids[0, 4] = 0: segment 0 of row 0 already ran from position 0 and ended"),
    ([[3, 3, 5, 3, -1, 5]], "segment_ids[0, 3] = 3: segment 3 of row 0 already ran from position 0 and ended"),
    ([[0, 1, 2], [4, -1, 4]], "segment_ids[1, 2] = 4: segment 4 of row 1 already ran from position 0 and ended"),
    ([[7, 8, 7, 8, 7]], "segment_ids[0, 2] = 7: segment 7 of row 0 already ran from position 0 and ended"),
]


@pytest.mark.parametrize("rows, message", NOT_CONTIGUOUS)
def test_non_contiguous_ids_are_refused_by_every_output(rows, message):
    seg = np.array(rows, np.int32)
    calls = {
        "dense": lambda: masks.attention_mask(seg, device="cpu"),
        "additive": lambda: masks.attention_mask(seg, "additive", device="cpu"),
        "varlen": lambda: masks.varlen_boundaries(seg, device="cpu"),
        "position_ids": lambda: masks.position_ids(seg, device="cpu"),
        "loss_mask": lambda: masks.loss_mask(seg),
    }
    for name, call in calls.items():
        with pytest.raises(PackingError) as caught:
            call()
        assert str(caught.value).startswith(message), name
        assert "a segment id names one contiguous run of its row" in str(caught.value)


def test_padding_may_repeat_and_sit_anywhere():
    seg = np.array([[-1, 0, 0, -1, 1, -1, -1, 2]], np.int32)
    np.testing.assert_array_equal(masks.attention_mask(seg, device="cpu"), naive_dense_mask(seg))
    assert masks.varlen_boundaries(seg, device="cpu")[0].tolist() == [0, 1, 3, 4, 5, 7, 8]
    assert masks.position_ids(seg, device="cpu").tolist() == [[0, 0, 1, 0, 0, 0, 0, 0]]


def test_kernels_alone_still_apply_the_rule_to_any_row():
    """The CPU kernels keep their general path; engine.masks refuses such rows before calling them."""
    seg = np.array([[3, 3, 5, 3, -1, 5]], np.int32)
    out = np.empty((1, 6, 6), bool)
    run_start, contiguous = np.empty_like(seg), np.empty(1, np.uint8)
    cpu_kernels.segment_runs(seg, run_start, contiguous)
    assert contiguous.tolist() == [0]
    cpu_kernels.dense_mask(seg, run_start, contiguous, out)
    np.testing.assert_array_equal(out, naive_dense_mask(seg))
    assert out[0, 3].tolist() == [1, 1, 0, 1, 0, 0]


def test_out_is_reused_and_validated():
    seg = np.array([[0, 0, 1]], np.int32)
    out = np.ones((1, 3, 3), bool)
    result = masks.attention_mask(seg, device="cpu", out=out)
    assert result is out
    np.testing.assert_array_equal(out, naive_dense_mask(seg))
    with pytest.raises(ConfigurationError, match=r"shape \(1, 3, 3\)"):
        masks.attention_mask(seg, device="cpu", out=np.empty((1, 3, 4), bool))
    with pytest.raises(ConfigurationError, match="float32"):
        masks.attention_mask(seg, "additive", device="cpu", out=np.empty((1, 3, 3), np.float64))
    with pytest.raises(ConfigurationError, match="numpy array"):
        masks.attention_mask(seg, device="cpu", out=[[[True] * 3] * 3])


def test_bad_input_errors():
    with pytest.raises(PackingError, match=r"segment_ids\[0, 1\] = -2"):
        masks.attention_mask(np.array([[0, -2]]), device="cpu")
    with pytest.raises(PackingError, match="2-D"):
        masks.attention_mask(np.array([0, 1]), device="cpu")
    with pytest.raises(PackingError, match="integer"):
        masks.attention_mask(np.array([[0.0]]), device="cpu")
    with pytest.raises(ConfigurationError, match="kind="):
        masks.attention_mask(np.zeros((1, 2), np.int32), "sparse", device="cpu")
    with pytest.raises(ConfigurationError, match="device="):
        masks.attention_mask(np.zeros((1, 2), np.int32), device="tpu")


def test_cuda_without_gpu_is_a_device_error(monkeypatch):
    monkeypatch.setattr(masks, "cuda_available", lambda: False)
    with pytest.raises(DeviceError, match="device='cpu'"):
        masks.attention_mask(np.zeros((1, 2), np.int32), device="cuda")
    assert masks.resolve_device("auto") == "cpu"


def test_position_ids_and_varlen_boundaries():
    seg = np.array([[0, 0, 0, 1, 1, -1], [0, 1, 1, 1, 1, 1]], np.int32)
    np.testing.assert_array_equal(masks.position_ids(seg, device="cpu"), [[0, 1, 2, 0, 1, 0], [0, 0, 1, 2, 3, 4]])
    bounds, longest = masks.varlen_boundaries(seg, device="cpu")
    assert bounds.dtype == np.int32
    assert bounds.tolist() == [0, 3, 5, 6, 7, 12]  # the padding run [5, 6) is a sequence of its own
    assert longest == 5
    np.testing.assert_array_equal(masks.loss_mask(seg), seg >= 0)


def one_id_per_run(seg: np.ndarray) -> np.ndarray:
    """Each run of equal real ids gets its own id (its run number): well-formed rows from random ones."""
    out = seg.copy()
    for b in range(seg.shape[0]):
        run = -1
        for i in range(seg.shape[1]):
            if i == 0 or seg[b, i] != seg[b, i - 1]:
                run += 1
            out[b, i] = run if seg[b, i] >= 0 else -1
    return out


segment_rows = st.integers(1, 3).flatmap(
    lambda rows: st.integers(1, 12).flatmap(
        lambda length: st.lists(
            st.lists(st.integers(-1, 3), min_size=length, max_size=length), min_size=rows, max_size=rows
        )
    )
)


@settings(max_examples=60, deadline=None)
@given(segment_rows, st.booleans())
def test_kernels_match_naive_twins(rows, sort_rows):
    seg = one_id_per_run(np.array(rows, np.int32))
    if sort_rows:  # packed layout: contiguous ids, padding last
        seg = np.sort(np.where(seg < 0, 99, seg), axis=1)
        seg[seg == 99] = -1
    np.testing.assert_array_equal(masks.attention_mask(seg, device="cpu"), naive_dense_mask(seg))
    np.testing.assert_array_equal(masks.attention_mask(seg, "additive", device="cpu"), naive_additive_mask(seg))
    np.testing.assert_array_equal(masks.position_ids(seg, device="cpu"), naive_position_ids(seg))
    bounds, longest = masks.varlen_boundaries(seg, device="cpu")
    assert (bounds.tolist(), longest) == naive_varlen(seg.tolist())


# -- the streaming-store path (rows tile into aligned 32-byte chunks) and its fallback -------------


def _random_rows(rng, rows, length, reuse_ids):
    seg = np.full((rows, length), -1, dtype=np.int32)
    for b in range(rows):
        pos, sid = 0, 0
        end = int(rng.integers(0, length + 1))
        while pos < end:
            n = int(rng.integers(1, 20))
            seg[b, pos:pos + n] = sid
            pos += n
            sid += 1
        if reuse_ids and end > 4:  # a real id reappearing after another run: the general path
            seg[b, end - 2:end] = 0
    return seg[:, :length]


def reuses_an_id(seg: np.ndarray) -> bool:
    for row in seg.tolist():
        seen = set()
        for i, value in enumerate(row):
            if value >= 0 and (i == 0 or row[i - 1] != value):
                if value in seen:
                    return True
                seen.add(value)
    return False


def kernel_mask(seg: np.ndarray, kind: str, out: np.ndarray) -> np.ndarray:
    """engine.masks' CPU branch without its input checks, to reach the kernels' general path."""
    run_start, contiguous = np.empty_like(seg), np.empty(seg.shape[0], np.uint8)
    cpu_kernels.segment_runs(seg, run_start, contiguous)
    itemsize, step = out.dtype.itemsize, cpu_kernels.STREAM_BYTES
    if out.ctypes.data % step == 0 and (seg.shape[1] * itemsize) % step == 0:
        allowed, blocked = (True, False) if kind == "dense" else (0.0, -np.inf)
        patterns = [np.full(step // itemsize, v, dtype=out.dtype).view(np.uint8) for v in (allowed, blocked)]
        cpu_kernels.streamed_mask(seg, run_start, contiguous, out.reshape(-1).view(np.uint8), itemsize, *patterns)
    else:
        (cpu_kernels.dense_mask if kind == "dense" else cpu_kernels.additive_mask)(seg, run_start, contiguous, out)
    return out


def mask_of(seg: np.ndarray, kind: str, out: np.ndarray | None = None) -> np.ndarray:
    """engine.masks for well-formed rows; a row reusing an id is refused there, so the kernels run directly."""
    if not reuses_an_id(seg):
        return masks.attention_mask(seg, kind, device="cpu", out=out)
    with pytest.raises(PackingError, match="a segment id names one contiguous run of its row"):
        masks.attention_mask(seg, kind, device="cpu", out=out)
    return kernel_mask(seg, kind, masks.mask_buffer(seg.shape[0], seg.shape[1], kind) if out is None else out)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([32, 64, 96]), st.booleans())
def test_streamed_masks_equal_the_naive_twin(seed, length, reuse_ids):
    rng = np.random.default_rng(seed)
    seg = _random_rows(rng, 3, length, reuse_ids)
    dense = mask_of(seg, "dense")
    assert dense.ctypes.data % 32 == 0  # engine allocates aligned outputs, so this is the streamed path
    np.testing.assert_array_equal(dense, naive_dense_mask(seg.tolist()))
    additive = mask_of(seg, "additive")
    np.testing.assert_array_equal(additive, naive_additive_mask(seg.tolist()))


def test_unaligned_out_takes_the_plain_kernel_with_the_same_result():
    rng = np.random.default_rng(3)
    seg = _random_rows(rng, 2, 64, True)
    raw = np.empty(2 * 64 * 64 + 1, dtype=bool)
    unaligned = raw[1:].reshape(2, 64, 64) if raw[1:].ctypes.data % 32 else raw[:-1].reshape(2, 64, 64)
    assert unaligned.ctypes.data % 32 != 0
    unaligned[...] = True  # stale values must all be overwritten
    assert reuses_an_id(seg)
    result = mask_of(seg, "dense", out=unaligned)
    assert result is unaligned
    np.testing.assert_array_equal(result, naive_dense_mask(seg.tolist()))
    unaligned[...] = True
    seg = _random_rows(rng, 2, 64, False)
    assert masks.attention_mask(seg, "dense", device="cpu", out=unaligned) is unaligned
    np.testing.assert_array_equal(unaligned, naive_dense_mask(seg.tolist()))


def test_mask_buffer_is_aligned_and_reusable():
    seg = np.array([[0 + k, 0 + k, 1 + k, 1 + k, 1 + k, -1, -1, -1] for k in (0, 2, 4, 6)], dtype=np.int32).reshape(1, 32)
    buf = masks.mask_buffer(1, 32)
    assert buf.shape == (1, 32, 32) and buf.dtype == np.bool_ and buf.ctypes.data % 64 == 0
    assert masks.attention_mask(seg, out=buf, device="cpu") is buf
    np.testing.assert_array_equal(buf, naive_dense_mask(seg.tolist()))
    add = masks.mask_buffer(1, 32, "additive")
    assert add.dtype == np.float32 and add.ctypes.data % 64 == 0
    with pytest.raises(ConfigurationError, match="kind='sparse'"):
        masks.mask_buffer(1, 4, "sparse")
    with pytest.raises(ConfigurationError, match="length=-1"):
        masks.mask_buffer(1, -1)


# -- packing and masks --------------------------------------------------------------------------------


def test_mask_inputs_and_out_arrays_are_checked():
    from engine import masks

    with pytest.raises(PackingError, match=r"segment_ids: expected a 2-D array \[rows, length\], got shape \(3,\)"):
        masks.attention_mask(np.array([0, 0, 1]), device="cpu")
    with pytest.raises(PackingError, match="segment_ids: expected an integer dtype, got float32"):
        masks.position_ids(np.zeros((1, 2), np.float32), device="cpu")
    with pytest.raises(PackingError, match=r"segment_ids\[0, 1\] = -2: expected -1 \(padding\) or an id >= 0"):
        masks.attention_mask(np.array([[0, -2]]), device="cpu")
    with pytest.raises(PackingError, match=rf"segment_ids\[0, 1\] = {2**63 + 1}: expected an id < 2\*\*31"):
        masks.attention_mask(np.array([[0, 2**63 + 1]], np.uint64), device="cpu")
    with pytest.raises(PackingError, match="segment_ids: expected a 2-D integer array"):
        masks.attention_mask([[0, 0], [0]], device="cpu")
    seg = np.array([[0, 0, -1]])
    for out in (np.empty((1, 3, 4), bool), np.empty((1, 3, 3), np.int8), np.empty((1, 3, 6), bool)[:, :, ::2]):
        with pytest.raises(ConfigurationError, match=r"dense out=: expected a C-contiguous writeable bool array of "
                                                     r"shape \(1, 3, 3\)"):
            masks.attention_mask(seg, device="cpu", out=out)
    readonly = np.empty((1, 3), np.int32)
    readonly.flags.writeable = False
    with pytest.raises(ConfigurationError, match="position_ids out=: expected a C-contiguous writeable int32"):
        masks.position_ids(seg, device="cpu", out=readonly)
    with pytest.raises(ConfigurationError, match="device='tpu' is not one of"):
        masks.attention_mask(seg, device="tpu")


@pytest.mark.parametrize("kind", ["dense", "additive"])
@pytest.mark.parametrize("length", [1, 8, 31, 32, 33, 64])
def test_mask_matches_the_rule_on_odd_shapes(kind, length):
    rng = np.random.default_rng(length)
    seg = rng.integers(-1, 3, size=(3, length)).astype(np.int32)
    runs = np.ones(seg.shape, bool)
    runs[:, 1:] = seg[:, 1:] != seg[:, :-1]
    seg = np.where(seg >= 0, np.cumsum(runs, axis=1), -1).astype(np.int32)  # one id per run: unique per row
    seg[0] = -1  # a row of all padding
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    own, key = seg[:, :, None], seg[:, None, :]
    expected = ((j <= i) & (own == key) & (own >= 0)) | ((own < 0) & (i == j))
    got = masks.attention_mask(seg, kind, device="cpu")
    if kind == "dense":
        assert np.array_equal(got, expected)
    else:
        assert np.array_equal(got == 0, expected) and np.isneginf(got[~expected]).all()
