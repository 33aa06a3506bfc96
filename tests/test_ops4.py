"""Ops of the fourth helper round on vkep against ORT's CPU EP, in real sessions with vkep loaded: AveragePool and
MaxPool whose window runs past the padded input (and auto_pad SAME with dilations), DeformConv, Det, MaxRoiPool and
com.microsoft CropAndResize. Every node a test claims for vkep is checked in ORT's own placement record."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner

F32 = TensorProto.FLOAT


def _model(nodes, inputs, opset: int = 19, ms_opset: bool = False, out_types: dict | None = None):
    """A model of `nodes` over `inputs` ((name, elem type, shape)); its outputs: the last node's (float32 but those
    `out_types` names)."""
    nodes = nodes if isinstance(nodes, list) else [nodes]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(o, (out_types or {}).get(o, F32), None)
                               for o in nodes[-1].output if o])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms_opset else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _on_vkep(model):
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    return session


def _compare(model, feeds, rtol=0.0, atol=0.0, equal_nan=True):
    """vkep's outputs (every node placed on vkep) against the CPU EP's: shapes equal, values within rtol/atol; a
    second run (the node's native replay) gives the first's bits."""
    session = _on_vkep(model)
    got = session.run(None, feeds)
    for again, first in zip(session.run(None, feeds), got, strict=True):
        np.testing.assert_array_equal(again, first)
    want = runner.cpu_session(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return got, want


def _placed_on(model) -> set[str]:
    return {ep for _, _, ep in runner.placement(runner.vkep_session(model))}


# ---- 1. AveragePool / MaxPool whose window runs past the padded input -----------------------------------------

# (input spatial dims, attributes): windows longer than the padded input (the CPU EP's truncating division gives an
# output, or none), with pads, strides, ceil_mode, dilations, auto_pad SAME with dilations (pads from the undilated
# kernel) and SAME pads that come out negative
POOL_CASES = [
    ([2, 80], dict(kernel_shape=[3, 2], strides=[3, 2])),  # PP-OCRv4 rec's AveragePool fed 32-pixel lines
    ([2], dict(kernel_shape=[3], strides=[3])),
    ([2], dict(kernel_shape=[5], strides=[4])),
    ([2], dict(kernel_shape=[5], strides=[2])),  # (no output)
    ([2], dict(kernel_shape=[3], strides=[1])),  # (no output)
    ([3], dict(kernel_shape=[5], strides=[2], pads=[1, 0])),
    ([2], dict(kernel_shape=[4], strides=[2], pads=[1, 0])),
    ([2, 3], dict(kernel_shape=[4, 5], strides=[3, 4], pads=[1, 0, 0, 1])),
    ([2, 2, 7], dict(kernel_shape=[3, 4, 2], strides=[4, 3, 2], pads=[0, 1, 0, 0, 0, 1])),
    ([4], dict(kernel_shape=[2], strides=[2], pads=[0, 1])),  # (ceil_mode: the last window starts in the pad)
    ([5], dict(kernel_shape=[3], dilations=[2], auto_pad="SAME_UPPER")),
    ([6, 5], dict(kernel_shape=[3, 2], dilations=[2, 3], strides=[2, 1], auto_pad="SAME_LOWER")),
    ([11], dict(kernel_shape=[1], strides=[4], auto_pad="SAME_UPPER")),  # (SAME pads -1 + 0)
    ([10, 11], dict(kernel_shape=[1, 2], strides=[4, 4], auto_pad="SAME_LOWER")),
    ([9, 10], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),  # (an ordinary window)
]


def _pool(op: str, dims, attrs: dict, outputs=("y",), opset: int = 19):
    return _model(helper.make_node(op, ["x"], list(outputs), **attrs), [("x", F32, [2, 3, *dims])], opset,
                  out_types={"i": TensorProto.INT64})


def _pool_feeds(dims):
    return {"x": np.random.default_rng(len(dims)).normal(0, 1, (2, 3, *dims)).astype(np.float32)}


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("dims,attrs", POOL_CASES)
def test_average_pool_past_the_input(ep_devices, dims, attrs, ceil_mode, count_include_pad):
    model = _pool("AveragePool", dims, {**attrs, "ceil_mode": ceil_mode, "count_include_pad": count_include_pad})
    _compare(model, _pool_feeds(dims), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("indices", [False, True])
@pytest.mark.parametrize("dims,attrs", POOL_CASES)
def test_max_pool_past_the_input(ep_devices, dims, attrs, ceil_mode, indices):
    model = _pool("MaxPool", dims, {**attrs, "ceil_mode": ceil_mode}, ("y", "i") if indices else ("y",))
    if not indices and attrs.get("strides", [1])[0] > attrs["kernel_shape"][0] and "dilations" not in attrs \
            and attrs.get("auto_pad", "").startswith("SAME"):
        # negative SAME pads: the CPU EP's MLAS MaxPool (no Indices, no dilation) fails the run; vkep declines
        assert _placed_on(model) == {"CPUExecutionProvider"}
        return
    _compare(model, _pool_feeds(dims))


@pytest.mark.parametrize("dtype", [TensorProto.INT8, TensorProto.UINT8])
def test_8_bit_max_pool_takes_negative_same_pads(ep_devices, dtype):
    """(8-bit MaxPool is not MLAS's on the CPU EP: negative SAME pads run there, and on vkep.)"""
    dims, attrs = POOL_CASES[13]
    model = _model(helper.make_node("MaxPool", ["x"], ["y"], **attrs), [("x", dtype, [2, 3, *dims])], 12,
                   out_types={"y": dtype})
    x = np.random.default_rng(5).integers(-100 if dtype == TensorProto.INT8 else 0, 127, (2, 3, *dims))
    _compare(model, {"x": x.astype(np.int8 if dtype == TensorProto.INT8 else np.uint8)})


def test_the_repro_shape(ep_devices):
    """PP-OCRv4 rec's p2o.AveragePool.0 at a 2-high input (opset 12): [1, 480, 1, 40], the mean of 2 x 2."""
    model = _pool("AveragePool", [2, 80], dict(kernel_shape=[3, 2], strides=[3, 2], pads=[0, 0, 0, 0]), opset=12)
    x = np.random.default_rng(0).normal(0, 1, (2, 3, 2, 80)).astype(np.float32)
    y = _on_vkep(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, x.reshape(2, 3, 2, 40, 2).mean(axis=(2, 4))[:, :, None, :], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_a_negative_output_size_is_declined(ep_devices, op):
    """(2 - 4) / 1 + 1 = -1: the CPU EP fails the run; vkep leaves the node to it."""
    assert _placed_on(_pool(op, [2], dict(kernel_shape=[4]))) == {"CPUExecutionProvider"}


# ---- 2. DeformConv ---------------------------------------------------------------------------------------------

def _deform_model(x_shape, w_shape, attrs: dict, bias: bool, mask: bool, opset: int = 19):
    a = {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], **attrs}
    kh, kw = w_shape[2:]
    n, _, h, w = x_shape
    oh = int((h + a["pads"][0] + a["pads"][2] - a["dilations"][0] * (kh - 1) - 1) / a["strides"][0]) + 1
    ow = int((w + a["pads"][1] + a["pads"][3] - a["dilations"][1] * (kw - 1) - 1) / a["strides"][1]) + 1
    og = attrs.get("offset_group", 1)
    inputs = [("x", F32, list(x_shape)), ("w", F32, list(w_shape)), ("off", F32, [n, og * 2 * kh * kw, oh, ow])]
    names = ["x", "w", "off"]
    if bias:
        inputs.append(("b", F32, [w_shape[0]]))
    if mask:
        inputs.append(("m", F32, [n, og * kh * kw, oh, ow]))
    names += ["b" if bias else "", "m"] if mask else (["b"] if bias else [])
    return _model(helper.make_node("DeformConv", names, ["y"], **attrs), inputs, opset), inputs


def _deform_feeds(inputs, offset_scale: float = 1.5, seed: int = 0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, _, shape in inputs:
        if name == "off":
            feeds[name] = (rng.normal(0, offset_scale, shape)).astype(np.float32)
        elif name == "m":
            feeds[name] = rng.uniform(0, 1, shape).astype(np.float32)
        else:
            feeds[name] = rng.normal(0, 1, shape).astype(np.float32)
    return feeds


DEFORM_CASES = [
    ([1, 4, 9, 9], [6, 4, 3, 3], dict(pads=[1, 1, 1, 1])),  # torchvision's 3x3 DCN
    ([2, 4, 8, 7], [6, 2, 3, 3], dict(pads=[1, 1, 1, 1], group=2, offset_group=2)),
    ([1, 6, 10, 9], [4, 6, 3, 2], dict(pads=[2, 0, 1, 1], strides=[2, 1], dilations=[2, 3], offset_group=3)),
    ([2, 3, 6, 6], [5, 3, 1, 1], {}),
    ([1, 4, 7, 8], [8, 1, 3, 3], dict(pads=[1, 1, 1, 1], group=4, offset_group=4)),  # depthwise
    ([1, 2, 2, 5], [3, 2, 3, 3], dict(strides=[2, 2])),  # (2 - 3) / 2 + 1 = 1 row: the window past the input
]


@pytest.mark.parametrize("bias,mask,opset", [(False, False, 19), (True, True, 22)])
@pytest.mark.parametrize("x_shape,w_shape,attrs", DEFORM_CASES)
def test_deform_conv(ep_devices, x_shape, w_shape, attrs, bias, mask, opset):
    model, inputs = _deform_model(x_shape, w_shape, attrs, bias, mask, opset)
    for scale in (0.7, 4.0):  # (4: many samples past the borders)
        _compare(model, _deform_feeds(inputs, scale), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias,mask", [(True, False), (False, True)])
@pytest.mark.parametrize("x_shape,w_shape,attrs", [DEFORM_CASES[1], DEFORM_CASES[2]])
def test_deform_conv_bias_or_mask(ep_devices, x_shape, w_shape, attrs, bias, mask):
    model, inputs = _deform_model(x_shape, w_shape, attrs, bias, mask)
    _compare(model, _deform_feeds(inputs, 2.0, seed=7), rtol=1e-5, atol=1e-5)


def test_deform_conv_of_a_detector_s_size(ep_devices):
    """A DCN layer's shape (64 channels, 3x3, 2 groups of offsets): the product's 576-long sums through MatMul's
    tiles, within float32 rounding of MLAS's."""
    model, inputs = _deform_model([1, 64, 20, 18], [48, 64, 3, 3], dict(pads=[1, 1, 1, 1], offset_group=2), True,
                                  True)
    _compare(model, _deform_feeds(inputs, 2.0, seed=8), rtol=1e-4, atol=1e-4)


def test_deform_conv_samples_exactly(ep_devices):
    """A 1x1 kernel of weight 1 over one channel passes each sample (times the mask) through a one-term product: its
    bits are the bilinear plan's. Offsets on pixel centres, on the borders (-1 and H exactly), just inside them, far
    out, and random; a NaN and an inf at element 0 (every sample with a corner outside reads element 0, weight 0)."""
    model, inputs = _deform_model([1, 1, 5, 6], [1, 1, 1, 1], dict(pads=[1, 2, 1, 0]), False, True)
    feeds = _deform_feeds(inputs, 2.0, seed=3)
    feeds["w"][:] = 1
    off = feeds["off"]  # [1, 2, 7, 8]
    off[0, 0, 0, :4] = [-0.0, 1.0, -1.0 + 1e-6, 5.0]  # h offsets of row 0
    off[0, 1, 0, :4] = [0.0, -2.0, -1e-7, 30.0]
    off[0, :, 1, :] = np.float32(0.25) * np.arange(8, dtype=np.float32) - 1
    off[0, 0, 2, :] = np.float32(-1.0)
    off[0, :, 0, 5] = [0.0, 0.3]  # (h exactly -1: outside, though its lower corners are in the image)
    got, _ = _compare(model, feeds)
    assert np.isfinite(got).all()
    feeds["x"][0, 0, 0, 0] = np.nan
    got, _ = _compare(model, feeds)
    assert np.isnan(got).any() and not np.isnan(got).all()
    feeds["x"][0, 0, 0, 0] = np.inf
    _compare(model, feeds)
    feeds["x"][0, 0, 0, 0] = 1.0
    feeds["x"][0, 0, 0, 1:] = np.nan  # (h = -1 exactly is outside: 0, not 0 x NaN)
    got, _ = _compare(model, feeds)
    assert got[0][0, 0, 0, 5] == 0


def test_deform_conv_nan_and_inf_inputs(ep_devices):
    model, inputs = _deform_model([1, 2, 6, 6], [3, 2, 3, 3], dict(pads=[1, 1, 1, 1]), True, True)
    feeds = _deform_feeds(inputs, 1.0, seed=5)
    feeds["x"][0, 1, 3, 2] = np.nan
    feeds["x"][0, 0, 5, 5] = np.inf
    feeds["m"][0, 4, 2, 2] = np.nan
    _compare(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs,w_shape,off_shape", [
    (dict(kernel_shape=[3, 2]), [2, 2, 3, 3], [1, 18, 3, 3]),  # (kernel_shape unlike W's)
    ({}, [2, 2, 3, 3], [1, 12, 3, 3]),  # (offsets of 6 taps for a 3x3 kernel)
    ({}, [2, 2, 3, 3], [1, 18, 4, 3]),  # (offsets of another output size)
    (dict(group=2), [2, 2, 3, 3], [1, 18, 3, 3]),  # (C = 2 is not W's 2 x group 2)
])
def test_deform_conv_what_the_cpu_ep_refuses_is_declined(ep_devices, attrs, w_shape, off_shape):
    inputs = [("x", F32, [1, 2, 5, 5]), ("w", F32, w_shape), ("off", F32, off_shape)]
    model = _model(helper.make_node("DeformConv", ["x", "w", "off"], ["y"], **attrs), inputs)
    assert _placed_on(model) == {"CPUExecutionProvider"}


# ---- 3. Det ------------------------------------------------------------------------------------------------------

def _det_model(shape, opset: int = 11):
    return _model(helper.make_node("Det", ["x"], ["y"]), [("x", F32, list(shape))], opset)


@pytest.mark.parametrize("opset", [11, 22])
@pytest.mark.parametrize("shape", [[3, 3], [1, 1], [5, 1, 1], [4, 2, 2], [2, 3, 3, 3], [6, 4, 4], [3, 5, 5], [2, 8, 8],
                                   [2, 16, 16], [0, 3, 3], [2, 0, 0], [0, 0]])
def test_det(ep_devices, shape, opset):
    x = np.random.default_rng(len(shape) * 100 + shape[-1]).normal(0, 1, shape).astype(np.float32)
    _compare(_det_model(shape, opset), {"x": x})  # (bit for bit: Eigen's LU in its order)


def _det_cases(m: int) -> np.ndarray:
    """Singular, near-singular, pivot-order, integer and special-value matrices of m x m."""
    rng = np.random.default_rng(m)
    mats = []
    a = rng.normal(0, 1, (m, m)).astype(np.float32)
    s = a.copy()
    s[-1] = s[0] * 2  # (a repeated row: singular)
    mats.append(s)
    s = a.copy()
    s[:, 1 % m] = s[:, 0] * np.float32(0.5)  # (repeated column)
    mats.append(s)
    s = a.copy()
    s[-1] = s[0] + np.float32(1e-5) * a[-1]  # (near-singular)
    mats.append(s)
    mats.append(np.zeros((m, m), np.float32))
    mats.append(np.eye(m, dtype=np.float32)[::-1].copy())  # (a permutation: the swaps' sign)
    mats.append(rng.integers(-3, 4, (m, m)).astype(np.float32))  # (ties between pivots)
    mats.append(np.triu(a) * 1e-12)  # (tiny: the product underflows toward 0 on the way)
    mats.append(a * 1e12)  # (huge: inf)
    for value in (np.nan, np.inf, -np.inf):
        for at in ((0, 0), (m - 1, m - 1), (m // 2, 0)):
            s = a.copy()
            s[at] = value
            mats.append(s)
    s = a.copy()
    s[:, 0] = 0
    s[m // 2, 0] = np.nan  # (a NaN below a zero: passed over by the pivot search)
    mats.append(s)
    return np.stack(mats)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 6, 9, 16, 17, 19, 20, 21, 23, 24, 30, 33, 44, 47, 48])
def test_det_special_matrices(ep_devices, m):
    """Bit for bit: Eigen's unblocked LU up to 16 rows, its blocked LU past them (panels of 8; the trailing
    products' orders by Eigen's GEMM paths: whole blocks of 8 and of 4 columns, leftover columns and rows)."""
    x = np.concatenate([_det_cases(m), np.random.default_rng(m).normal(0, 1, (20, m, m)).astype(np.float32)])
    _compare(_det_model(x.shape), {"x": x})


def test_det_of_a_matrix_past_the_limit_is_declined(ep_devices):
    assert _placed_on(_det_model([2, 49, 49])) == {"CPUExecutionProvider"}


# ---- 4. MaxRoiPool -----------------------------------------------------------------------------------------------

def _roi_pool_model(n_rois: int, opset: int = 1, **attrs):
    return _model(helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], **attrs),
                  [("x", F32, [3, 4, 13, 17]), ("rois", F32, [n_rois, 5])], opset=opset)


def _rois(scale: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-4, 15, (12, 2))
    rois = np.concatenate([rng.integers(0, 3, (12, 1)), lo, lo + rng.uniform(-1, 12, (12, 2))], 1) / [1, *[scale] * 4]
    rois[0] = [2.7, -6, -3, 30, 25]  # (batch 2.7 is 2; past every border)
    rois[1] = [-0.5, 2.5, 3.5, 6.5, -2.5]  # (batch -0.5 is 0; halves round away from zero; y2 < y1: 1 row)
    rois[2] = [1, 40, 40, 50, 50]  # (wholly outside: empty bins, 0)
    rois[3] = [0, 5, 5, 5, 5]  # (one pixel)
    rois[1:4, 1:] /= scale
    return rois.astype(np.float32)


@pytest.mark.parametrize("pooled", [[2, 2], [7, 7], [3, 5], [1, 1]])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.0625])
def test_max_roi_pool(ep_devices, pooled, scale):
    model = _roi_pool_model(12, pooled_shape=pooled, spatial_scale=scale)
    x = np.random.default_rng(1).normal(0, 1, (3, 4, 13, 17)).astype(np.float32)
    x[0, 1] -= 100  # (a channel of negatives: the max starts from the lowest float)
    x[2, 2, 3:9:2, 4:12:3] = np.nan
    _compare(model, {"x": x, "rois": _rois(scale)})


@pytest.mark.parametrize("opset", [1, 21])  # (ORT 1.32's CPU EP has no MaxRoiPool 22: neither has vkep)
def test_max_roi_pool_default_scale(ep_devices, opset):
    x = np.random.default_rng(2).normal(0, 1, (3, 4, 13, 17)).astype(np.float32)
    _compare(_roi_pool_model(12, opset, pooled_shape=[3, 3]), {"x": x, "rois": _rois(1.0, seed=4)})


@pytest.mark.parametrize("batch", [3.0, -1.0, np.nan])
def test_max_roi_pool_batch_index_out_of_range_fails_the_run(ep_devices, batch):
    model = _roi_pool_model(2, pooled_shape=[2, 2])
    feeds = {"x": np.ones((3, 4, 13, 17), np.float32), "rois": np.array([[0, 1, 1, 5, 5], [batch, 1, 1, 5, 5]],
                                                                        np.float32)}
    with pytest.raises(Exception, match="roi_batch_id"):  # noqa: B017 (ORT's Python exceptions share no base)
        runner.cpu_session(model).run(None, feeds)
    with pytest.raises(Exception, match="an index was out of range"):  # noqa: B017
        _on_vkep(model).run(None, feeds)


# ---- 5. com.microsoft CropAndResize ------------------------------------------------------------------------------

def _crop_model(n_boxes: int, crop, **attrs):
    crop_size = helper.make_tensor("crop", TensorProto.INT32, [2], crop)
    nodes = [helper.make_node("Constant", [], ["crop"], value=crop_size),
             helper.make_node("CropAndResize", ["x", "rois", "idx", "crop"], ["y"], domain="com.microsoft", **attrs)]
    return _model(nodes, [("x", F32, [3, 4, 13, 17]), ("rois", F32, [n_boxes, 4]),
                          ("idx", TensorProto.INT32, [n_boxes])], opset=13, ms_opset=True)


def _boxes(seed: int = 0):
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-0.3, 1.0, (10, 2))
    rois = np.concatenate([lo, lo + rng.uniform(-0.2, 0.9, (10, 2))], 1)
    rois[0] = [-0.5, -0.25, 1.5, 1.25]  # (past every border: extrapolated rows and columns)
    rois[1] = [0.0, 0.0, 1.0, 1.0]  # (the whole image: its corners exactly)
    rois[2] = [0.75, 0.5, 0.25, 0.125]  # (flipped)
    rois[3] = [0.5, 0.5, 0.5, 0.5]  # (a point)
    rois[4] = [0.125, 0.0625, 0.375, 0.5625]  # (samples at halves: nearest rounds them away from zero)
    return {"rois": rois.astype(np.float32), "idx": rng.integers(0, 3, 10).astype(np.int32)}


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [[5, 7], [1, 1], [1, 4], [9, 2], [24, 33]])
@pytest.mark.parametrize("extrapolation_value", [0.0, -1.5])
def test_crop_and_resize(ep_devices, mode, crop, extrapolation_value):
    model = _crop_model(10, crop, mode=mode, extrapolation_value=extrapolation_value)
    x = np.random.default_rng(3).normal(0, 1, (3, 4, 13, 17)).astype(np.float32)
    x[1, 2, 4:9, 3:11] = np.nan
    _compare(model, {"x": x, **_boxes()})


def test_crop_and_resize_defaults_and_mode_case(ep_devices):
    x = np.random.default_rng(4).normal(0, 1, (3, 4, 13, 17)).astype(np.float32)
    _compare(_crop_model(10, [6, 6]), {"x": x, **_boxes(1)})
    _compare(_crop_model(10, [6, 6], mode="NEAREST"), {"x": x, **_boxes(2)})


def test_crop_and_resize_an_unknown_mode_is_declined(ep_devices):
    # (the CPU EP fails such a node at session creation: the session fails either way, not on vkep)
    from vkep.kernels.crop_and_resize import CropAndResize
    assert CropAndResize.declines(None, {"mode": "bicubic"}, 1, [4, 2, 1, 1], [])


def test_crop_and_resize_a_box_index_out_of_range_fails_the_run(ep_devices):
    boxes = _boxes()
    boxes["idx"][3] = 3
    x = np.zeros((3, 4, 13, 17), np.float32)
    with pytest.raises(Exception, match="an index was out of range"):  # noqa: B017 (ORT's exceptions share no base)
        _on_vkep(_crop_model(10, [3, 3])).run(None, {"x": x, **boxes})
