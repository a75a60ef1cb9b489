"""Attention masks, position ids and cu_seqlens (CPU kernels) against the rule, the reference
text's numbers and the naive twins."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import masks
from engine.errors import ConfigurationError, DeviceError, PackingError
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


def test_non_contiguous_ids_follow_the_rule():
    seg = np.array([[3, 3, 5, 3, -1, 5]], np.int32)
    np.testing.assert_array_equal(masks.attention_mask(seg, device="cpu"), naive_dense_mask(seg))
    assert masks.attention_mask(seg, device="cpu")[0, 3].tolist() == [1, 1, 0, 1, 0, 0]


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
    assert masks.cu_seqlens(seg, device="cpu").tolist() == bounds.tolist()
    assert masks.max_seqlen(seg, device="cpu") == 5
    np.testing.assert_array_equal(masks.loss_mask(seg), seg >= 0)


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
    seg = np.array(rows, np.int32)
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


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([32, 64, 96]), st.booleans())
def test_streamed_masks_equal_the_naive_twin(seed, length, reuse_ids):
    rng = np.random.default_rng(seed)
    seg = _random_rows(rng, 3, length, reuse_ids)
    dense = masks.attention_mask(seg, "dense", device="cpu")
    assert dense.ctypes.data % 32 == 0  # engine allocates aligned outputs, so this is the streamed path
    np.testing.assert_array_equal(dense, naive_dense_mask(seg.tolist()))
    additive = masks.attention_mask(seg, "additive", device="cpu")
    np.testing.assert_array_equal(additive, naive_additive_mask(seg.tolist()))


def test_unaligned_out_takes_the_plain_kernel_with_the_same_result():
    rng = np.random.default_rng(3)
    seg = _random_rows(rng, 2, 64, True)
    raw = np.empty(2 * 64 * 64 + 1, dtype=bool)
    unaligned = raw[1:].reshape(2, 64, 64) if raw[1:].ctypes.data % 32 else raw[:-1].reshape(2, 64, 64)
    assert unaligned.ctypes.data % 32 != 0
    unaligned[...] = True  # stale values must all be overwritten
    result = masks.attention_mask(seg, "dense", device="cpu", out=unaligned)
    assert result is unaligned
    np.testing.assert_array_equal(result, naive_dense_mask(seg.tolist()))


def test_mask_buffer_is_aligned_and_reusable():
    seg = np.array([[0, 0, 1, 1, 1, -1, -1, -1] * 4], dtype=np.int32)
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
