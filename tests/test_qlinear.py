"""ConvInteger, QLinearMatMul, QLinearConv and com.microsoft QLinearAdd / QLinearMul against ORT's CPU EP, bit
for bit, through real sessions; and a QOperator model made by ORT's quantize_static.

ORT's x86-64 kernels without VNNI (this machine class: AVX2) multiply uint8 by int8 in pairs that saturate
at int16 (vpmaddubsw), so the CPU EP's sums are wrong where a pair exceeds 32767. vkep keeps the exact sums
that ONNX defines (the CPU EP's on VNNI machines). Tests that pair uint8 with int8 keep the int8 operand in
[-64, 63] (what ORT's reduce_range does) where they compare with the CPU EP, and compare the full range
with numpy's exact sums (`_reference_*`, which requantize as ORT does: checked against the CPU EP here)."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from conftest import quantize_static_model
from onnx import helper, numpy_helper

import vkep
from vkep import runner
from vkep.kernels import quantize

VKEP = "VulkanExecutionProvider"
MS = "com.microsoft"


def _model(op: str, inputs: dict[str, np.ndarray | None], consts: dict[str, np.ndarray], opset: int = 10,
           domain: str = "", **attrs) -> onnx.ModelProto:
    """One node over `inputs` (graph inputs, None: absent) then `consts` (initializers), in that order."""
    names = [name if v is not None else "" for name, v in inputs.items()] + list(consts)
    node = helper.make_node(op, names, ["y"], domain=domain, **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                     for k, v in inputs.items() if v is not None],
        [onnx.ValueInfoProto(name="y")], [numpy_helper.from_array(v, k) for k, v in consts.items()])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _run(model, feeds, reference: np.ndarray | None = None) -> np.ndarray:
    """The node on vkep (asserted by ORT's record), equal to the CPU EP's answer (or to `reference`)."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    got = session.run(None, feeds)[0]
    want = runner.cpu_session(model).run(None, feeds)[0] if reference is None else reference
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)
    return got


def _ints(rng, shape, dtype, low: int | None = None, high: int | None = None) -> np.ndarray:
    info = np.iinfo(dtype)
    lo = info.min if low is None else max(low, info.min)
    hi = info.max if high is None else min(high, info.max)
    return np.asarray(rng.integers(lo, hi + 1, shape), dtype)


def _requantize(acc: np.ndarray, multiplier: np.ndarray, zp, dtype) -> np.ndarray:
    """MLAS's MlasRequantizeOutput: float32 acc x multiplier, clamped, rounded half to even, + zp."""
    info = np.iinfo(dtype)
    v = (acc.astype(np.int32).astype(np.float32) * np.asarray(multiplier, np.float32)).astype(np.float32)
    v = np.clip(v, np.float32(info.min - int(zp)), np.float32(info.max - int(zp)))
    return (np.rint(v).astype(np.int64) + int(zp)).astype(dtype)


def _multiplier(a_scale, b_scale, y_scale) -> np.ndarray:
    """ORT's ComputeOutputScale: (a_scale * b_scale) / y_scale, each step in float32."""
    product = (np.float32(a_scale) * np.asarray(b_scale, np.float32)).astype(np.float32)
    return (product / np.float32(y_scale)).astype(np.float32)


def _reference_qlinear_matmul(a, a_scale, azp, b, b_scale, bzp, y_scale, yzp) -> np.ndarray:
    acc = np.matmul(a.astype(np.int64) - int(azp), b.astype(np.int64) - bzp.astype(np.int64))
    return _requantize(acc, _multiplier(a_scale, b_scale, y_scale), yzp, yzp.dtype)


def _reference_conv(x, w, xzp, wzp, group=1, strides=None, pads=None, dilations=None) -> np.ndarray:
    """Exact integer convolution (int64) of (x - xzp) and (w - wzp), NC + 1 or 2 spatial dims."""
    nd = x.ndim - 2
    strides, dilations, pads = strides or [1] * nd, dilations or [1] * nd, pads or [0] * (2 * nd)
    xi = np.pad(x.astype(np.int64) - int(xzp), [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    wi = w.astype(np.int64) - np.asarray(wzp, np.int64).reshape((-1,) + (1,) * (w.ndim - 1))
    cg, mg = x.shape[1] // group, w.shape[0] // group
    out = [(xi.shape[2 + i] - (w.shape[2 + i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(nd)]
    y = np.zeros((x.shape[0], w.shape[0], *out), np.int64)
    for tap in itertools.product(*[range(k) for k in w.shape[2:]]):
        window = tuple(slice(tap[i] * dilations[i], tap[i] * dilations[i] + (out[i] - 1) * strides[i] + 1, strides[i])
                       for i in range(nd))
        patch = xi[(slice(None), slice(None)) + window]
        for g in range(group):
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch[:, g * cg:(g + 1) * cg],
                                                   wi[(slice(g * mg, (g + 1) * mg), slice(None), *tap)])
    return y


def _reference_qlinear_conv(x, x_scale, xzp, w, w_scale, wzp, y_scale, yzp, bias=None, **attrs) -> np.ndarray:
    acc = _reference_conv(x, w, xzp, wzp, **attrs)
    if bias is not None:
        acc = acc + bias.astype(np.int64).reshape((-1,) + (1,) * (x.ndim - 2))
    multiplier = _multiplier(x_scale, w_scale, y_scale).reshape((-1,) + (1,) * (x.ndim - 2))
    return _requantize(acc, multiplier, yzp, yzp.dtype)


def _scale(rng, shape=()) -> np.ndarray:
    return np.asarray(rng.uniform(0.002, 0.05, shape), np.float32)


# ---- QLinearMatMul ---------------------------------------------------------------------------------------------

QLINEAR_TYPES = [("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8")]  # what ORT's CPU EP has


@pytest.mark.parametrize("a_type,b_type", QLINEAR_TYPES)
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 12), (12, 7)), ((2, 3, 16), (16, 4)), ((2, 3, 8), (2, 8, 5)),
                                             ((1, 64), (64, 32)), ((2, 37, 70), (70, 45))])
def test_qlinear_matmul(ep_devices, a_type, b_type, per_column, opset, a_shape, b_shape):
    rng = np.random.default_rng(len(a_shape) * 10 + opset)
    n = b_shape[-1]
    mixed = a_type != b_type  # uint8 x int8: 7-bit weights, as ORT's reduce_range (module docstring)
    lo, hi = (-64, 63) if mixed else (None, None)
    pshape = ((n,) if len(b_shape) == 2 else b_shape[:-2] + (1, n)) if per_column else ()
    a, b = _ints(rng, a_shape, a_type), _ints(rng, b_shape, b_type, lo, hi)
    consts = {"a_scale": _scale(rng), "a_zp": _ints(rng, (), a_type), "b": b, "b_scale": _scale(rng, pshape),
              "b_zp": _ints(rng, pshape, b_type, lo, hi), "y_scale": _scale(rng) * 20, "y_zp": _ints(rng, (), a_type)}
    model = _model("QLinearMatMul", {"a": a}, consts, opset)
    want = _reference_qlinear_matmul(a, *consts.values())
    np.testing.assert_array_equal(runner.cpu_session(model).run(None, {"a": a})[0], want)  # the reference is ORT's
    _run(model, {"a": a})


@pytest.mark.parametrize("a_type,b_type", QLINEAR_TYPES)
@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul_float16_scales(ep_devices, a_type, b_type, per_column):
    """Opset 21's float16 scales: the CPU EP widens them to float32 and requantizes as with float32 ones."""
    rng = np.random.default_rng(21)
    lo, hi = (-64, 63) if a_type != b_type else (None, None)
    a, b = _ints(rng, (3, 5, 24), a_type), _ints(rng, (24, 6), b_type, lo, hi)
    pshape = (6,) if per_column else ()
    consts = {"a_scale": _scale(rng).astype(np.float16), "a_zp": _ints(rng, (), a_type), "b": b,
              "b_scale": _scale(rng, pshape).astype(np.float16), "b_zp": _ints(rng, pshape, b_type, lo, hi),
              "y_scale": (_scale(rng) * 20).astype(np.float16), "y_zp": _ints(rng, (), a_type)}
    model = _model("QLinearMatMul", {"a": a}, consts, 21)
    want = _reference_qlinear_matmul(a, *(v.astype(np.float32) if v.dtype == np.float16 else v
                                          for v in consts.values()))
    np.testing.assert_array_equal(runner.cpu_session(model).run(None, {"a": a})[0], want)
    _run(model, {"a": a})


@pytest.mark.parametrize("a_type,b_type", QLINEAR_TYPES)
def test_qlinear_matmul_edges(ep_devices, a_type, b_type):
    """Zero points at their extremes, outputs saturating both ways, values on rounding boundaries, and
    B computed at run time (a graph input); full-range uint8 x int8 as the CPU EP computes it (its int16 pair
    sums saturate on x86-64 without VNNI, and so do vkep's there: test_uint8_int8_products_saturate_as_the_cpu_ep)."""
    rng = np.random.default_rng(7)
    ai, bi = np.iinfo(a_type), np.iinfo(b_type)
    for azp, bzp, yzp in [(ai.min, bi.min, ai.min), (ai.max, bi.max, ai.max), (0, 0, 0)]:
        a, b = _ints(rng, (6, 9), a_type), _ints(rng, (9, 5), b_type)
        params = [np.asarray(x, t) for x, t in ((0.02, np.float32), (azp, a_type))]
        params_b = [np.asarray(x, t) for x, t in ((0.03, np.float32), (bzp, b_type), (0.05, np.float32),
                                                   (yzp, a_type))]
        inputs = {"a": a, "a_scale": params[0], "a_zp": params[1], "b": b}
        consts = dict(zip(["b_scale", "b_zp", "y_scale", "y_zp"], params_b, strict=True))
        model = _model("QLinearMatMul", inputs, consts)
        reference = _reference_qlinear_matmul(a, *params, b, *params_b)
        assert {int(reference.min()), int(reference.max())} & {ai.min, ai.max}, "no output saturates"
        _run(model, inputs)
        if not quantize.cpu_ep_saturates():  # (the exact sums: this host's CPU EP gives them too)
            np.testing.assert_array_equal(runner.cpu_session(model).run(None, inputs)[0], reference)
    # accumulators that are exact halves of an output step: ties go to even
    a = np.asarray([[1, 2, 3, 5, 7, 9]], a_type).T
    b = np.asarray([[1]], b_type)
    consts = {"a_scale": np.float32(1), "a_zp": np.asarray(0, a_type), "b": b, "b_scale": np.float32(0.5),
              "b_zp": np.asarray(0, b_type), "y_scale": np.float32(1), "y_zp": np.asarray(0, a_type)}
    got = _run(_model("QLinearMatMul", {"a": a}, consts), {"a": a})
    np.testing.assert_array_equal(got.ravel(), [0, 1, 2, 2, 4, 4])


def test_qlinear_matmul_empty(ep_devices):
    rng = np.random.default_rng(0)
    a = np.zeros((0, 4), np.uint8)
    consts = {"a_scale": _scale(rng), "a_zp": _ints(rng, (), "uint8"), "b": _ints(rng, (4, 3), "uint8"),
              "b_scale": _scale(rng), "b_zp": _ints(rng, (), "uint8"), "y_scale": _scale(rng),
              "y_zp": _ints(rng, (), "uint8")}
    assert _run(_model("QLinearMatMul", {"a": a}, consts), {"a": a}).shape == (0, 3)


# ---- ConvInteger and QLinearConv -------------------------------------------------------------------------------

# (x shape, w shape, attributes): real models' shapes (a 3x3 stem with stride 2, a depthwise 3x3, a pointwise
# 1x1, a grouped conv with dilation) and 1-D ones
CONVS = [
    ((1, 3, 16, 16), (8, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 8, 9, 9), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ((1, 16, 7, 7), (24, 16, 1, 1), {}),
    ((1, 6, 11, 10), (4, 3, 3, 2), {"group": 2, "dilations": [2, 1], "pads": [0, 1, 2, 0], "strides": [1, 2]}),
    ((2, 4, 13), (6, 4, 3), {"strides": [2], "pads": [1, 2]}),
    ((1, 4, 12), (4, 2, 4), {"group": 2, "strides": [3], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 7, 8), (2, 3, 2, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 5, 5), (3, 2, 2, 2), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 2, 70001), (3, 2, 5), {"dilations": [3], "pads": [6, 5]}),  # a width past 16 bits (Kokoro's noise convs)
]
CONV_TYPES = [("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8"), ("int8", "uint8")]


def _explicit_pads(x_shape, w_shape, attrs: dict) -> dict:
    """The attributes with auto_pad resolved into pads, as ONNX defines SAME_UPPER / SAME_LOWER / VALID."""
    attrs = dict(attrs)
    auto_pad = attrs.pop("auto_pad", "NOTSET")
    nd = len(x_shape) - 2
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        strides = attrs.get("strides", [1] * nd)
        begin, end = [], []
        for size, k, s in zip(x_shape[2:], w_shape[2:], strides, strict=True):
            total = max(0, (-(-size // s) - 1) * s + k - size)
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
            end.append(total - begin[-1])
        attrs["pads"] = begin + end
    return attrs


@pytest.mark.parametrize("x_type,w_type", CONV_TYPES)
@pytest.mark.parametrize("zero_points", ["none", "x", "both", "per_channel"])
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv_integer(ep_devices, x_type, w_type, zero_points, case):
    x_shape, w_shape, attrs = CONVS[case]
    rng = np.random.default_rng(case)
    mixed = x_type != w_type  # one operand in [-64, 63] where the CPU EP is the reference (module docstring)
    # (the CPU EP pads X with its zero point: that too)
    x_range = (-64, 63) if mixed and x_type == "int8" else (None, None)
    w_range = (-64, 63) if mixed and w_type == "int8" else (None, None)
    x, w = _ints(rng, x_shape, x_type, *x_range), _ints(rng, w_shape, w_type, *w_range)
    consts = {"w": w}
    if zero_points != "none":
        consts["x_zp"] = _ints(rng, (), x_type, *x_range)
    if zero_points in ("both", "per_channel"):
        consts["w_zp"] = _ints(rng, (w_shape[0],) if zero_points == "per_channel" else (), w_type, *w_range)
    model = _model("ConvInteger", {"x": x}, consts, **attrs)
    reference = _reference_conv(x, w, consts.get("x_zp", 0), consts.get("w_zp", 0),
                                **_explicit_pads(x_shape, w_shape, attrs)).astype(np.int32)
    if zero_points != "per_channel":  # (the CPU EP takes w_zp per tensor only)
        np.testing.assert_array_equal(runner.cpu_session(model).run(None, {"x": x})[0], reference)
    _run(model, {"x": x}, reference)


def test_conv_integer_full_range_and_empty(ep_devices):
    """uint8 x int8 over the full range (the CPU EP saturates here: numpy is the reference), zero points at
    the extremes, and an empty batch."""
    rng = np.random.default_rng(3)
    x, w = _ints(rng, (1, 8, 6, 6), "uint8"), _ints(rng, (4, 8, 3, 3), "int8")
    for x_zp, w_zp in [(0, -128), (255, 127)]:
        consts = {"w": w, "x_zp": np.asarray(x_zp, np.uint8), "w_zp": np.asarray(w_zp, np.int8)}
        model = _model("ConvInteger", {"x": x}, consts, pads=[1, 1, 1, 1])
        _run(model, {"x": x}, _reference_conv(x, w, x_zp, w_zp, pads=[1, 1, 1, 1]).astype(np.int32))
    empty = np.zeros((0, 8, 6, 6), np.uint8)
    assert _run(_model("ConvInteger", {"x": empty}, {"w": w}), {"x": empty}).shape == (0, 4, 4, 4)


@pytest.mark.parametrize("x_type,w_type", QLINEAR_TYPES)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_qlinear_conv(ep_devices, x_type, w_type, per_channel, bias, case):
    x_shape, w_shape, attrs = CONVS[case]
    rng = np.random.default_rng(100 + case)
    m = w_shape[0]
    lo, hi = (-64, 63) if x_type != w_type else (None, None)
    x, w = _ints(rng, x_shape, x_type), _ints(rng, w_shape, w_type, lo, hi)
    consts = {"x_scale": _scale(rng), "x_zp": _ints(rng, (), x_type), "w": w,
              "w_scale": _scale(rng, (m,) if per_channel else ()),
              # the CPU EP takes one zero point for every channel (and its symmetric path needs 0)
              "w_zp": np.full((m,) if per_channel else (), 0 if w_type == "int8" else rng.integers(0, 256), w_type),
              "y_scale": _scale(rng) * 10, "y_zp": _ints(rng, (), x_type)}
    if bias:
        consts["b"] = _ints(rng, (m,), "int32", -20000, 20000)
    model = _model("QLinearConv", {"x": x}, consts, **attrs)
    reference = _reference_qlinear_conv(x, *consts.values(), **_explicit_pads(x_shape, w_shape, attrs))
    np.testing.assert_array_equal(runner.cpu_session(model).run(None, {"x": x})[0], reference)
    _run(model, {"x": x})


@pytest.mark.parametrize("x_type,w_type", QLINEAR_TYPES)
def test_qlinear_conv_edges(ep_devices, x_type, w_type):
    """Zero points at their extremes, outputs saturating both ways, nonzero weight zero points, full-range
    uint8 x int8 as the CPU EP computes it (numpy's exact sums where it gives them: not on x86-64 without VNNI,
    test_qlinear_conv_products_saturate_as_the_cpu_ep), an empty batch."""
    rng = np.random.default_rng(11)
    xi, wi = np.iinfo(x_type), np.iinfo(w_type)
    x, w = _ints(rng, (1, 6, 7, 7), x_type), _ints(rng, (5, 6, 3, 3), w_type)
    for x_zp, w_zp, y_zp in [(xi.min, wi.min, xi.min), (xi.max, wi.max, xi.max), (0, 3, 0)]:
        consts = {"x_scale": np.float32(0.03), "x_zp": np.asarray(x_zp, x_type), "w": w,
                  "w_scale": _scale(rng, (5,)), "w_zp": np.asarray(w_zp, w_type), "y_scale": np.float32(0.05),
                  "y_zp": np.asarray(y_zp, x_type), "b": _ints(rng, (5,), "int32", -30000, 30000)}
        model = _model("QLinearConv", {"x": x}, consts, pads=[1, 1, 1, 1], strides=[2, 1])
        reference = _reference_qlinear_conv(x, *consts.values(), pads=[1, 1, 1, 1], strides=[2, 1])
        assert {int(reference.min()), int(reference.max())} & {xi.min, xi.max}, "no output saturates"
        exact = x_type != w_type and not quantize.cpu_ep_saturates()
        _run(model, {"x": x}, reference if exact else None)
    empty = np.zeros((0, 6, 7, 7), x_type)
    model = _model("QLinearConv", {"x": empty}, consts, pads=[1, 1, 1, 1], strides=[2, 1])
    assert _run(model, {"x": empty}).shape == (0, 5, 4, 7)


@pytest.mark.parametrize("op", ["QLinearConv", "ConvInteger"])
@pytest.mark.parametrize("kernel,old_longest", [((1, 1), 19999), ((3, 3), 4615)])
def test_most_channels_within_lavapipes_loop_count(ep_devices, op, kernel, old_longest):
    """The most input channels conv_integer.comp takes (quantize.conv_integer_loops: 3 + kh (2 + kw) loop steps a
    channel, as lavapipe counts them) give the CPU EP's answer, the product's last channel included; one more is
    left to the CPU EP. The count before (1 + kh (1 + kw)) took `old_longest`, whose last channels were cut off
    (a 1x1 conv of 19,999 channels ran 10,923 of them; now left to the CPU EP)."""
    from vkep.kernels.base import LOOP_BUDGET

    kh, kw = kernel
    fixed, per_channel = quantize.conv_integer_loops(0, kh, kw), quantize.conv_integer_loops(1, kh, kw)
    longest = (LOOP_BUDGET - fixed) // (per_channel - fixed)
    for c in (old_longest, longest, longest + 1):
        x, w = np.zeros((1, c, kh, kw), np.uint8), np.zeros((2, c, kh, kw), np.uint8)
        x[0, 0, 0, 0], w[:, 0, 0, 0] = 1, 3
        x[0, -1, -1, -1], w[:, -1, -1, -1] = 10, 10  # (the last channel's product decides)
        consts = {"w": w} if op == "ConvInteger" else {
            "x_scale": np.float32(1), "x_zp": np.uint8(0), "w": w, "w_scale": np.float32(1), "w_zp": np.uint8(0),
            "y_scale": np.float32(1), "y_zp": np.uint8(0)}
        model = _model(op, {"x": x}, consts)
        session = runner.vkep_session(model)
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0])
        on_vkep = {ep for _, _, ep in runner.placement(session)} == {VKEP}
        assert on_vkep == (c <= longest), (c, on_vkep)


# ---- com.microsoft QLinearAdd and QLinearMul -------------------------------------------------------------------

# (A shape, B shape): every value against every value (256 x 256), each of ORT's span kinds (both vectors,
# B a scalar of the span, A a scalar of the span, spans of one element), broadcasts of real models; rank 5 (trueocr's
# recognizer, QOperator: collapses to 3), and broadcasts that collapse past qlinear_binary.comp's rank 4 (5 and 6:
# a dispatch per index of the outer dims)
BINARY_SHAPES = [((256, 256), (256, 256)), ((256, 256), (256, 1)), ((256, 1), (256, 256)), ((256, 1), (1,)),
                 ((256,), ()), ((), (256,)), ((1,), (1,)), ((2, 8, 5, 5), (1, 8, 1, 1)), ((2, 3, 4), (4,)),
                 ((1, 16, 1, 1), (3, 16, 7, 7)), ((3, 1, 5), (1, 4, 1)), ((0, 3), (1, 3)),
                 ((1, 4, 16, 24, 20), (1, 4, 1, 24, 20)), ((2, 3, 1, 4, 1), (1, 3, 5, 1, 6)),
                 ((2, 1, 3, 1, 5, 1), (1, 4, 1, 6, 1, 7))]


def _table(shape, dtype, rng) -> np.ndarray:
    """Every value of dtype along the first 256-long axis (tiled), random elsewhere."""
    info = np.iinfo(dtype)
    if shape and shape[0] == 256:
        values = np.arange(info.min, info.max + 1).astype(dtype)
        if len(shape) == 2 and shape[1] == 256:
            return np.asarray(np.broadcast_to(values[:, None] if rng.random() < 0.5 else values, shape))
        return np.asarray(np.broadcast_to(values.reshape((256,) + (1,) * (len(shape) - 1)), shape))
    return _ints(rng, shape, dtype)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shapes", range(len(BINARY_SHAPES)))
def test_qlinear_binary(ep_devices, op, dtype, shapes):
    a_shape, b_shape = BINARY_SHAPES[shapes]
    rng = np.random.default_rng(shapes)
    for trial in range(4):
        a, b = _table(a_shape, dtype, rng), _table(b_shape, dtype, rng)
        if trial == 0 and a.size and b.size:
            b = np.asarray(np.flip(b), dtype)  # the other pairing of the tables
        # scale ratios from 1/100 to 100 (outputs saturate at the large ones); zero points anywhere
        scales = [np.asarray(rng.uniform(0.001, 0.1) * 10 ** rng.uniform(-1, 1), np.float32) for _ in range(3)]
        zps = [_ints(rng, (), dtype) for _ in range(3)]
        inputs = {"a": a, "a_scale": scales[0], "a_zp": zps[0], "b": b, "b_scale": scales[1], "b_zp": zps[1],
                  "c_scale": scales[2], "c_zp": zps[2]}
        if trial == 3:  # zero points at the extremes
            info = np.iinfo(dtype)
            inputs.update(a_zp=np.asarray(info.min, dtype), b_zp=np.asarray(info.max, dtype),
                          c_zp=np.asarray(info.min if rng.random() < 0.5 else info.max, dtype))
        _run(_model(op, inputs, {}, domain=MS), inputs)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shapes", [0, 1, 2, 3])
def test_qlinear_add_rounding(ep_devices, dtype, shapes):
    """QLinearAdd's chain of fused multiply-adds (about one output in 10^4 differs when one is not fused):
    every value pair under 24 sets of scales and zero points per span kind, on one session each."""
    a_shape, b_shape = BINARY_SHAPES[shapes]
    rng = np.random.default_rng(40 + shapes)
    a, b = _table(a_shape, dtype, rng), _table(b_shape, dtype, rng)
    feeds = {"a": a, "a_scale": np.float32(1), "a_zp": _ints(rng, (), dtype), "b": b, "b_scale": np.float32(1),
             "b_zp": _ints(rng, (), dtype), "c_scale": np.float32(1), "c_zp": _ints(rng, (), dtype)}
    model = _model("QLinearAdd", {k: np.asarray(v) for k, v in feeds.items()}, {}, domain=MS)
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    for _ in range(24):
        for name in ("a_scale", "b_scale", "c_scale"):
            feeds[name] = np.asarray(rng.uniform(0.001, 0.1) * 10 ** rng.uniform(-1.5, 1.5), np.float32)
        for name in ("a_zp", "b_zp", "c_zp"):
            feeds[name] = _ints(rng, (), dtype)
        feeds = {k: np.asarray(v) for k, v in feeds.items()}
        np.testing.assert_array_equal(session.run(None, feeds)[0], cpu.run(None, feeds)[0])


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shapes", [0, 1, 2, 12, 14])
def test_qlinear_binary_looked_up_where_its_scales_are_constants(ep_devices, op, dtype, shapes):
    """Scales and zero points as initializers: the node builds the table of every byte pair once (its first run,
    not replayed) and later runs look results up (QLinearBinary.TABLE_FROM elements and more). Every value pair under
    three sets of scales and zero points, each of ORT's span kinds (a table each) and broadcasts past the shader's
    rank: the first run and the replays equal the CPU EP's bit for bit. (Scales fed as inputs, the other tests,
    take the computing path.)"""
    from vkep.kernels.quantize import QLinearBinary

    a_shape, b_shape = BINARY_SHAPES[shapes]
    rng = np.random.default_rng(70 + shapes)
    a, b = _table(a_shape, dtype, rng), _table(b_shape, dtype, rng)
    assert np.broadcast(a, b).size >= QLinearBinary.TABLE_FROM
    for trial in range(3):
        scales = [np.asarray(rng.uniform(0.001, 0.1) * 10 ** rng.uniform(-1.5, 1.5), np.float32) for _ in range(3)]
        zps = [_ints(rng, (), dtype) for _ in range(3)]
        consts = {"a_scale": scales[0], "a_zp": zps[0], "b_scale": scales[1], "b_zp": zps[1], "c_scale": scales[2],
                  "c_zp": zps[2]}
        node = helper.make_node(op, ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "c_scale", "c_zp"], ["y"],
                                domain=MS)
        graph = helper.make_graph([node], op, [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(
            v.dtype), v.shape) for k, v in (("a", a), ("b", b))], [onnx.ValueInfoProto(name="y")],
            [numpy_helper.from_array(v, k) for k, v in consts.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10), helper.make_opsetid(MS, 1)],
                                  ir_version=10)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
        want = runner.cpu_session(model).run(None, {"a": a, "b": b})[0]
        for _ in range(3):  # (the first builds the table, the second makes the plan, the third replays it)
            np.testing.assert_array_equal(session.run(None, {"a": a, "b": b})[0], want, err_msg=f"trial {trial}")


# ---- a QOperator model from ORT's quantizer --------------------------------------------------------------------

def _small_cnn(seed: int = 0) -> onnx.ModelProto:
    """A stride-2 stem, a depthwise and a pointwise conv, a residual Add, a Mul, a classifier MatMul: the ops a
    mobile CNN quantizes to."""
    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...], scale: float | None = None):
        scale = scale if scale is not None else 1 / np.sqrt(np.prod(shape[1:]))
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [weight("w1", (16, 3, 3, 3)), weight("b1", (16,), 0.1), weight("w2", (16, 1, 3, 3)),
             weight("b2", (16,), 0.1), weight("w3", (32, 16, 1, 1)), weight("b3", (32,), 0.1),
             weight("w4", (32, 32, 3, 3)), weight("b4", (32,), 0.1), weight("w5", (32, 32, 1, 1)),
             weight("b5", (32,), 0.1), weight("fc", (32 * 4 * 4, 10)), weight("fcb", (10,), 0.1),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]), node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=16), node("Relu", ["c2"], ["r2"]),
             node("Conv", ["r2", "w3", "b3"], ["c3"]), node("Relu", ["c3"], ["r3"]),
             node("Conv", ["r3", "w4", "b4"], ["c4"], pads=[1, 1, 1, 1], strides=[2, 2]), node("Relu", ["c4"], ["r4"]),
             node("Conv", ["r4", "w5", "b5"], ["c5"]), node("Add", ["c5", "r4"], ["a5"]), node("Relu", ["a5"], ["r5"]),
             node("Mul", ["r5", "r4"], ["m5"]), node("Reshape", ["m5", "shape"], ["flat"]),
             node("MatMul", ["flat", "fc"], ["mm"]), node("Add", ["mm", "fcb"], ["y"])]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _qoperator(model: onnx.ModelProto, tmp_path, calibration: list[dict[str, np.ndarray]], per_channel: bool,
               weight_type: str) -> onnx.ModelProto:
    """`model` quantized by ORT's quantize_static in the QOperator format over `calibration`: uint8
    activations, 7-bit weights (reduce_range: module docstring)."""
    from onnxruntime.quantization import QuantFormat, QuantType

    return quantize_static_model(model, calibration, tmp_path, quant_format=QuantFormat.QOperator,
                                 per_channel=per_channel, activation_type=QuantType.QUInt8,
                                 weight_type=getattr(QuantType, weight_type), reduce_range=True)


@pytest.mark.parametrize("per_channel,weight_type", [(True, "QInt8"), (False, "QUInt8")])
def test_qoperator_model_from_orts_quantizer(ep_devices, tmp_path, per_channel, weight_type):
    """A small CNN quantized by ORT's quantize_static in the QOperator format (QLinearConv, QLinearAdd,
    QLinearMul, QLinearMatMul between QuantizeLinear and DequantizeLinear): every node on vkep, the same top-1 as
    the CPU EP and outputs within two quantization steps of its own. Weights are 7-bit (reduce_range, ORT's
    advice for x86-64 without VNNI, where the CPU EP saturates uint8 x int8 sums: module docstring)."""
    def image(seed: int) -> dict[str, np.ndarray]:
        return {"x": np.random.default_rng(seed).standard_normal((1, 3, 16, 16)).astype(np.float32)}

    model = _qoperator(_small_cnn(), tmp_path, [image(s) for s in range(16)], per_channel, weight_type)
    ops = [n.op_type for n in model.graph.node]
    assert {"QLinearConv", "QLinearAdd", "QLinearMul", "QLinearMatMul"} <= set(ops), ops
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    placed = runner.placement(session)
    assert [ep for _, _, ep in placed] == [VKEP] * len(placed), placed
    out_scale = next(numpy_helper.to_array(t) for t in model.graph.initializer
                     if t.name == next(n for n in model.graph.node if n.op_type == "DequantizeLinear").input[1])
    before = None
    for seed in range(100, 104):
        got, want = session.run(None, image(seed))[0], cpu.run(None, image(seed))[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=2 * float(out_scale) + 1e-7)
        assert got.argmax() == want.argmax()
        before = vkep.stats()["process"]["nodes_replayed_natively"] if before is None else before
    # after the first run every node but the feed's reader and the output's writer replays natively
    # (tests/test_models.py)
    assert vkep.stats()["process"]["nodes_replayed_natively"] - before >= 3 * (len(placed) - 2)


def _branchy_cnn(seed: int = 0) -> onnx.ModelProto:
    """A stem with LeakyRelu and MaxPool, two branches (ReLU, Sigmoid) concatenated, an AveragePool, a nearest
    upsampling, a pointwise conv, global average pooling and a Gemm classifier: the other ops ORT's quantizer emits
    for CNNs."""
    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...], scale: float | None = None):
        scale = scale if scale is not None else 1 / np.sqrt(np.prod(shape[1:]))
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [weight("w1", (16, 3, 3, 3)), weight("b1", (16,), 0.1), weight("w2", (8, 16, 1, 1)),
             weight("b2", (8,), 0.1), weight("w3", (8, 16, 3, 3)), weight("b3", (8,), 0.1),
             weight("w4", (32, 16, 1, 1)), weight("b4", (32,), 0.1), weight("fc", (10, 32)), weight("fcb", (10,), 0.1),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up")]
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             node("LeakyRelu", ["c1"], ["r1"], alpha=0.1), node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["p1", "w2", "b2"], ["c2"]), node("Relu", ["c2"], ["r2"]),
             node("Conv", ["p1", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]), node("Sigmoid", ["c3"], ["s3"]),
             node("Concat", ["r2", "s3"], ["cat"], axis=1),
             node("AveragePool", ["cat"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             node("Resize", ["ap", "", "up"], ["big"], mode="nearest"),
             node("Conv", ["big", "w4", "b4"], ["c4"]), node("Relu", ["c4"], ["r4"]),
             node("GlobalAveragePool", ["r4"], ["g"]), node("Flatten", ["g"], ["flat"]),
             node("Gemm", ["flat", "fc", "fcb"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("per_channel,weight_type", [(True, "QInt8"), (False, "QUInt8")])
def test_qoperator_cnn_with_pools_concat_and_gemm(ep_devices, tmp_path, per_channel, weight_type):
    """_branchy_cnn quantized by quantize_static (QOperator): QLinearLeakyRelu, MaxPool and Resize on uint8,
    QLinearSigmoid, QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool and QGemm beside QLinearConv; every
    node on vkep and every output equal to the CPU EP's (7-bit weights: module docstring)."""
    def image(seed: int) -> dict[str, np.ndarray]:
        return {"x": np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)}

    model = _qoperator(_branchy_cnn(), tmp_path, [image(s) for s in range(8)], per_channel, weight_type)
    ops = {n.op_type for n in model.graph.node}
    assert {"QLinearLeakyRelu", "MaxPool", "QLinearSigmoid", "QLinearConcat", "QLinearAveragePool", "Resize",
            "QLinearGlobalAveragePool", "QGemm"} <= ops, ops
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    placed = runner.placement(session)
    assert [ep for _, _, ep in placed] == [VKEP] * len(placed), placed
    for seed in range(100, 103):
        np.testing.assert_array_equal(session.run(None, image(seed))[0], cpu.run(None, image(seed))[0])


def _placed(model) -> set[str]:
    return {ep for _, _, ep in runner.placement(runner.vkep_session(model))}


def test_what_stays_on_the_cpu_ep(ep_devices):
    """Declined at GetCapability (the node runs on the CPU EP, or fails there as the CPU EP fails it): 3-D
    convolutions, dilations with SAME padding (the CPU EP refuses them), per-row QLinearMatMul A parameters
    (the CPU EP takes them per tensor only), a QLinearAdd of rank 7 (past binary.comp's 6, as the float ops)."""
    rng = np.random.default_rng(0)
    x = _ints(rng, (1, 2, 4, 4, 4), "uint8")
    assert _placed(_model("ConvInteger", {"x": x}, {"w": _ints(rng, (3, 2, 2, 2, 2), "uint8")})) == {"CPUExecutionProvider"}
    x = _ints(rng, (1, 2, 8, 8), "uint8")
    model = _model("ConvInteger", {"x": x}, {"w": _ints(rng, (3, 2, 3, 3), "uint8")}, dilations=[2, 2],
                   auto_pad="SAME_UPPER")
    assert _placed(model) == {"CPUExecutionProvider"}
    a = _ints(rng, (4, 6), "uint8")
    consts = {"a_scale": _scale(rng, (4, 1)), "a_zp": _ints(rng, (4, 1), "uint8"), "b": _ints(rng, (6, 3), "uint8"),
              "b_scale": _scale(rng), "b_zp": _ints(rng, (), "uint8"), "y_scale": _scale(rng),
              "y_zp": _ints(rng, (), "uint8")}
    assert _placed(_model("QLinearMatMul", {"a": a}, consts)) == {"CPUExecutionProvider"}
    a, b = _ints(rng, (2, 1, 2, 1, 2, 1, 2), "uint8"), _ints(rng, (1, 2, 1, 2, 1, 2, 1), "uint8")
    params = {"a_scale": _scale(rng), "a_zp": _ints(rng, (), "uint8"), "b": b, "b_scale": _scale(rng),
              "b_zp": _ints(rng, (), "uint8"), "c_scale": _scale(rng), "c_zp": _ints(rng, (), "uint8")}
    assert _placed(_model("QLinearAdd", {"a": a}, params, domain=MS)) == {"CPUExecutionProvider"}
    # a broadcast of rank 5 that collapses to 5 runs on vkep (a dispatch per index of its outer dim)
    a, params["b"] = a.reshape(2, 1, 2, 1, 4), b.reshape(1, 2, 1, 2, 2)[..., :1]
    _run(_model("QLinearAdd", {"a": a}, params, domain=MS), {"a": a})


# ---- com.microsoft QLinearLeakyRelu, QLinearSigmoid, QLinearConcat, QLinearGlobalAveragePool, QLinearAveragePool --

def _params(rng, dtype, names: tuple[str, ...], extreme: bool = False) -> dict[str, np.ndarray]:
    """A scale (from about 1/1000 to 1) per `*scale` name, a zero point anywhere (or at the type's ends) per `*zp`."""
    info = np.iinfo(dtype)
    out = {}
    for name in names:
        if name.endswith("scale"):
            out[name] = np.asarray(rng.uniform(0.002, 0.05) * 10 ** rng.uniform(-1, 1.3), np.float32)
        else:
            out[name] = np.asarray(rng.choice([info.min, info.max]) if extreme else _ints(rng, (), dtype), dtype)
    return out


@pytest.mark.parametrize("op", ["QLinearLeakyRelu", "QLinearSigmoid"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_lookup(ep_devices, op, dtype):
    """Every 8-bit value under 24 sets of scales and zero points (zero points at the extremes too: outputs
    saturate) on one session, then a model's shape, an empty tensor and constant parameters."""
    rng = np.random.default_rng(7)
    x = np.arange(256).astype(np.uint8).view(dtype).reshape(1, 256, 1, 1)
    names = ("x_scale", "x_zp", "y_scale", "y_zp")
    attrs = {"alpha": 0.1} if op == "QLinearLeakyRelu" else {}
    feeds = {"x": x, **_params(rng, dtype, names)}
    model = _model(op, feeds, {}, domain=MS, **attrs)
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    for trial in range(24):
        feeds.update(_params(rng, dtype, names, extreme=trial % 6 == 5))
        np.testing.assert_array_equal(session.run(None, feeds)[0], cpu.run(None, feeds)[0])
    params = _params(rng, dtype, names)
    for shape in ((2, 16, 7, 9), (0, 3)):
        x = _ints(rng, shape, dtype)
        _run(_model(op, {"x": x}, params, domain=MS, alpha=0.2) if attrs else _model(op, {"x": x}, params, domain=MS),
             {"x": x})


def _reference_lookup(x, x_scale, x_zp, y_scale, y_zp, f=lambda v: v) -> np.ndarray:
    """QlinearBuildLookupTable's arithmetic in numpy (float32 at every step)."""
    v = f((np.float32(x_scale) * (x.astype(np.int32) - np.int32(x_zp)).astype(np.float32)).astype(np.float32))
    info = np.iinfo(x.dtype)
    q = np.clip((v / np.float32(y_scale)).astype(np.float32), info.min - int(y_zp), info.max - int(y_zp))
    return (np.rint(q).astype(np.int32) + int(y_zp)).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("axis,shapes", [(1, [(1, 8, 4, 4), (1, 3, 4, 4), (1, 5, 4, 4)]),
                                         (-1, [(2, 3, 256), (2, 3, 1)]), (0, [(256,), (0,), (256,), (5,)]),
                                         (1, [(2, 0, 3), (2, 0, 3)])])
def test_qlinear_concat(ep_devices, dtype, axis, shapes):
    """Each input requantized to the output's parameters (the second one has the output's: a copy), against
    the CPU EP and numpy."""
    rng = np.random.default_rng(len(shapes))
    for trial in range(3):
        y = _params(rng, dtype, ("y_scale", "y_zp"), extreme=trial == 2)
        inputs, consts, refs = {}, {}, []
        for j, shape in enumerate(shapes):
            x = _table(shape, dtype, rng)
            p = _params(rng, dtype, ("scale", "zp"), extreme=trial == 1)
            if j == 1:
                p = {"scale": y["y_scale"].copy(), "zp": y["y_zp"].copy()}
            inputs[f"x{j}"], consts[f"x{j}_scale"], consts[f"x{j}_zp"] = x, p["scale"], p["zp"]
            refs.append(_reference_lookup(x, p["scale"], p["zp"], y["y_scale"], y["y_zp"]))
        names = ["y_scale", "y_zp"] + [n for j in range(len(shapes)) for n in (f"x{j}", f"x{j}_scale", f"x{j}_zp")]
        node = helper.make_node("QLinearConcat", names, ["y"], domain=MS, axis=axis)
        graph = helper.make_graph(
            [node], "concat", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                               for k, v in inputs.items()],
            [onnx.ValueInfoProto(name="y")],
            [numpy_helper.from_array(v, k) for k, v in {**y, **consts}.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)],
                                  ir_version=10)
        got = _run(model, inputs)
        np.testing.assert_array_equal(got, np.concatenate(refs, axis=axis))


def _reference_global_pool(x, x_scale, x_zp, y_scale, y_zp) -> np.ndarray:
    size = int(np.prod(x.shape[2:]))
    acc = x.reshape(x.shape[:2] + (size,)).astype(np.int32).sum(-1) - np.int32(x_zp) * size
    multiplier = np.float32(x_scale) / (np.float32(y_scale) * np.float32(size))
    return _requantize(acc, multiplier, y_zp, x.dtype).reshape(x.shape[:2] + (1,) * (x.ndim - 2))


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shape", [(1, 64, 7, 7), (2, 24, 13, 13), (1, 8, 1, 1), (1, 4, 56, 56), (1, 8, 10),
                                   (1, 2, 3, 4, 5), (0, 4, 3, 3), (1, 3, 300, 300)])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(ep_devices, dtype, shape, channels_last):
    """Against the CPU EP and numpy (the int32 sum requantized), zero points at the extremes too; channels_last:
    [N, spatial..., C], as ORT's transpose optimizer leaves it in an NHWC model (survey 11's TFLite int8 nets)."""
    rng = np.random.default_rng(sum(shape))
    for trial in range(3):
        x = _ints(rng, shape, dtype)
        if trial == 2:
            x[...] = np.iinfo(dtype).max  # (the largest sums)
        params = _params(rng, dtype, ("x_scale", "x_zp", "y_scale", "y_zp"), extreme=trial > 0)
        want = _reference_global_pool(x, **params)
        if channels_last:
            x, want = np.ascontiguousarray(np.moveaxis(x, 1, -1)), np.moveaxis(want, 1, -1)
        got = _run(_model("QLinearGlobalAveragePool", {"x": x}, params, domain=MS, channels_last=channels_last),
                   {"x": x})
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shape,attrs", [
    ((1, 8, 9, 9), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ((2, 4, 10, 11), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1}),
    ((1, 4, 10, 11), {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 4, 10, 11), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "count_include_pad": 1,
                      "pads": [1, 1, 1, 1]}),
    ((1, 4, 8, 8), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 4, 12), {"kernel_shape": [5], "strides": [3], "pads": [2, 2]}),
    ((1, 16, 7, 7), {"kernel_shape": [7, 7]}),  # the whole image: the CPU EP's global path
    ((1, 4, 3, 3), {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}),
    ((0, 4, 5, 5), {"kernel_shape": [3, 3]})])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_average_pool(ep_devices, dtype, shape, attrs, channels_last):
    rng = np.random.default_rng(len(shape) + len(attrs))
    for trial in range(3):
        x = _ints(rng, shape, dtype)
        if channels_last:
            x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
        params = _params(rng, dtype, ("x_scale", "x_zp", "y_scale", "y_zp"), extreme=trial == 2)
        _run(_model("QLinearAveragePool", {"x": x}, params, domain=MS, channels_last=channels_last, **attrs), {"x": x})


@pytest.mark.parametrize("kw", [1, 9])
def test_qlinear_average_pool_tall_windows_within_lavapipes_loop_count(ep_devices, kw):
    """The tallest windows QLinearAveragePool takes (pool.window_loops: each row and the rows' loop cost a leaving
    pass, as in pool.comp) give the CPU EP's answer, their last rows included; a row more is left to the CPU EP.
    The count before (kh (1 + ceil(kw / 8))) took windows of 30,000 x 1 rows, cut short (0 for 5: the window's
    last rows, which hold its large values, never read)."""
    from vkep.kernels.base import LOOP_BUDGET
    from vkep.kernels.pool import window_loops

    fixed, per_row = window_loops(1, 0, kw), window_loops(1, 1, kw) - window_loops(1, 0, kw)
    longest = (LOOP_BUDGET - fixed) // per_row
    for kh in (LOOP_BUDGET // (1 + -(-kw // 8)), longest, longest + 1):  # (the first: the old count's longest)
        x = np.zeros((1, 1, kh, kw + 1), np.uint8)
        x[0, 0, -2:, :] = 255  # (the window's last rows decide)
        params = {"x_scale": np.float32(1), "x_zp": np.uint8(0), "y_scale": np.float32(100 / (kh * kw)),
                  "y_zp": np.uint8(0)}
        model = _model("QLinearAveragePool", {"x": x}, params, domain=MS, kernel_shape=[kh, kw])
        session = runner.vkep_session(model)
        got = session.run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, runner.cpu_session(model).run(None, {"x": x})[0])
        assert got.min() > 0
        assert ({ep for _, _, ep in runner.placement(session)} == {VKEP}) == (kh <= longest), kh


def test_qlinear_pools_left_to_the_cpu_ep(ep_devices):
    """3-D average pools and a QLinearConcat of more tensors than the native trampoline passes (256 inputs) stay on
    the CPU EP."""
    rng = np.random.default_rng(3)
    params = _params(rng, "uint8", ("x_scale", "x_zp", "y_scale", "y_zp"))
    x = _ints(rng, (1, 2, 4, 4, 4), "uint8")
    assert _placed(_model("QLinearAveragePool", {"x": x}, params, domain=MS, kernel_shape=[2, 2, 2])) == {
        "CPUExecutionProvider"}
    tensors = {f"x{j}": _ints(rng, (2, 3), "uint8") for j in range(85)}  # (257 inputs)
    names = ["y_scale", "y_zp"] + [n for j in range(85) for n in (f"x{j}", "x_scale", "x_zp")]
    graph = helper.make_graph(
        [helper.make_node("QLinearConcat", names, ["y"], domain=MS, axis=0)], "concat",
        [helper.make_tensor_value_info(k, onnx.TensorProto.UINT8, v.shape) for k, v in tensors.items()],
        [onnx.ValueInfoProto(name="y")], [numpy_helper.from_array(v, k) for k, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)],
                              ir_version=10)
    assert _placed(model) == {"CPUExecutionProvider"}


# ---- com.microsoft QGemm -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("a_type,b_type", [("uint8", "int8"), ("uint8", "uint8"), ("int8", "int8")])
@pytest.mark.parametrize("case", [
    dict(m=1, k=512, n=10, transB=1, bias="n", per_column=True),  # a classifier as ORT's quantizer emits it
    dict(m=5, k=33, n=20, bias="mn", alpha=0.5),
    dict(m=7, k=16, n=17, transA=1, bias="m1"),
    dict(m=3, k=9, n=4, transA=1, transB=1, bias="scalar", per_column=True, alpha=2.0),
    dict(m=0, k=4, n=3), dict(m=9, k=40, n=18)])
@pytest.mark.parametrize("float_output", [False, True])
def test_qgemm(ep_devices, a_type, b_type, case, float_output):
    """Against the CPU EP and numpy (the int32 sum plus C, times (alpha * a_scale) * b_scale [/ y_scale]); int8
    weights with uint8 A in [-64, 63] (module docstring), zero points at the extremes in the last trial."""
    mixed = a_type != b_type
    rng = np.random.default_rng(case["m"] * 100 + case["k"])
    m, k, n = case["m"], case["k"], case["n"]
    alpha = case.get("alpha", 1.0)
    for trial in range(2):
        a = _ints(rng, (k, m) if case.get("transA") else (m, k), a_type)
        b = _ints(rng, (n, k) if case.get("transB") else (k, n), b_type, *((-64, 63) if mixed else ()))
        cols = (n,) if case.get("per_column") else ()
        a_zp = _ints(rng, (), a_type) if trial == 0 else np.asarray(np.iinfo(a_type).max, a_type)
        b_zp = _ints(rng, cols, b_type, *((-64, 63) if mixed else ()))
        if trial == 1 and not mixed:
            b_zp[...] = np.iinfo(b_type).min
        a_scale, b_scale = _scale(rng), _scale(rng, cols)
        bias_shape = {"n": (n,), "mn": (m, n), "m1": (m, 1), "scalar": ()}.get(case.get("bias"))
        consts = {"a_scale": a_scale, "a_zp": a_zp, "b": b, "b_scale": b_scale, "b_zp": b_zp}
        names = ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp"]
        if bias_shape is not None:
            consts["c"] = np.asarray(rng.integers(-5000, 5000, bias_shape), np.int32)
        names.append("c" if bias_shape is not None else "")
        if not float_output:
            consts["y_scale"] = np.asarray(_scale(rng) * 20, np.float32)
            consts["y_zp"] = _ints(rng, (), a_type) if trial == 0 else np.asarray(np.iinfo(a_type).min, a_type)
            names += ["y_scale", "y_zp"]
        attrs = {key: case[key] for key in ("transA", "transB") if key in case}
        node = helper.make_node("QGemm", names, ["y"], domain=MS, alpha=alpha, **attrs)
        graph = helper.make_graph(
            [node], "qgemm", [helper.make_tensor_value_info("a", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)],
            [onnx.ValueInfoProto(name="y")], [numpy_helper.from_array(v, key) for key, v in consts.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)],
                                  ir_version=10)
        got = _run(model, {"a": a})
        aa = (a.T if case.get("transA") else a).astype(np.int32) - np.int32(a_zp)
        bb = (b.T if case.get("transB") else b).astype(np.int32) - b_zp.astype(np.int32)
        acc = aa @ bb + (consts["c"] if "c" in consts else 0)
        scale = (np.float32(alpha) * a_scale).astype(np.float32) * b_scale
        if float_output:
            np.testing.assert_array_equal(got, (acc.astype(np.float32) * scale).astype(np.float32))
        else:
            multiplier = (scale / consts["y_scale"]).astype(np.float32)
            np.testing.assert_array_equal(got, _requantize(acc, multiplier, consts["y_zp"], a_type))


def _mlas_logistic(x: np.ndarray, fused: bool = True) -> np.ndarray:
    """MlasLogisticKernelFma3 in numpy, float32: its fused multiply-adds through float64 (where the product is
    exact), or (fused=False) each product rounded first."""
    f32 = np.float32

    def madd(a, b, c):
        if fused:
            return (a.astype(np.float64) * np.float64(b) + np.float64(c)).astype(f32)
        return ((a * f32(b)).astype(f32) + f32(c)).astype(f32)

    x = np.clip(x.astype(f32), f32(-18), f32(18))
    x2 = (x * x).astype(f32)
    p = madd(x2, f32(4.37031012579801e-11), f32(1.15627324459942e-07))
    for c in (6.08574864600143e-05, 8.51377133304701e-03, 2.48287947061529e-01):
        p = madd(x2, p, f32(c)) if fused else ((x2 * p).astype(f32) + f32(c)).astype(f32)
    q = madd(x2, f32(6.10247389755681e-13), f32(5.76102136993427e-09))
    for c in (6.29106785017040e-06, 1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01):
        q = madd(x2, q, f32(c)) if fused else ((x2 * q).astype(f32) + f32(c)).astype(f32)
    return np.maximum(((x * p).astype(f32) / q).astype(f32) + f32(0.5), f32(0))


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_sigmoid_fused_rounding(ep_devices, dtype):
    """Output scales that put a logistic value on a rounding boundary where MLAS's fused multiply-adds and
    separately rounded ones quantize differently: vkep must give the fused answer, as the CPU EP does."""
    x = np.arange(256).astype(np.uint8).view(dtype)
    found = 0
    for x_scale in (0.05, 0.031, 0.07, 0.02):
        feeds = {"x": x, "x_scale": np.asarray(x_scale, np.float32), "x_zp": np.asarray(0, dtype)}
        v = (np.float32(x_scale) * x.astype(np.int32).astype(np.float32)).astype(np.float32)
        fused, plain = _mlas_logistic(v), _mlas_logistic(v, fused=False)
        for i in np.flatnonzero(fused != plain)[:12]:
            for j in range(1, 40):
                y_scale = np.float32(fused[i] / np.float32(j + 0.5))
                feeds.update(y_scale=np.asarray(y_scale, np.float32), y_zp=np.asarray(np.iinfo(dtype).min, dtype))
                want = _reference_lookup(x, x_scale, feeds["x_zp"], y_scale, feeds["y_zp"], _mlas_logistic)
                other = _reference_lookup(x, x_scale, feeds["x_zp"], y_scale, feeds["y_zp"],
                                          lambda t: _mlas_logistic(t, fused=False))
                if (want != other).any():
                    model = _model("QLinearSigmoid", {k: np.asarray(val) for k, val in feeds.items()}, {}, domain=MS)
                    np.testing.assert_array_equal(_run(model, feeds), want)
                    found += 1
                    break
    assert found >= 4, found


@pytest.mark.parametrize("op", ["QLinearLeakyRelu", "QLinearSigmoid"])
def test_qlinear_absent_zero_points(ep_devices, op):
    """Zero points are optional inputs of these ops (0 when absent). (QLinearAveragePool's are too, but ORT's type
    inference refuses a node without them.)"""
    rng = np.random.default_rng(11)
    x = np.arange(256).astype(np.uint8).reshape(1, 4, 8, 8)
    inputs = {"x": x, "x_scale": np.asarray(0.05, np.float32), "x_zp": None, "y_scale": np.asarray(0.02, np.float32),
              "y_zp": None}
    feeds = {k: v for k, v in inputs.items() if v is not None}
    _run(_model(op, inputs, {}, domain=MS), feeds)
    feeds["x"] = inputs["x"] = _ints(rng, (2, 3, 5), "uint8")
    _run(_model(op, inputs, {}, domain=MS), feeds)


# ---- Resize of 8-bit tensors (between QLinear ops in QOperator models) -------------------------------------------

@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("attrs,scales", [
    ({}, [1, 1, 2, 2]),  # the upsampling of FPN / YOLO heads
    ({"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 1, 2, 2]),
    ({"coordinate_transformation_mode": "align_corners", "nearest_mode": "round_prefer_ceil"}, [1, 1, 1.7, 0.6]),
    ({"coordinate_transformation_mode": "pytorch_half_pixel", "nearest_mode": "ceil"}, [1, 1, 3, 0.5])])
def test_resize_8bit_nearest(ep_devices, dtype, attrs, scales):
    rng = np.random.default_rng(5)
    x = _ints(rng, (2, 3, 5, 6), dtype)
    consts = {"roi": np.zeros(0, np.float32), "scales": np.asarray(scales, np.float32)}
    _run(_model("Resize", {"x": x}, consts, opset=13, mode="nearest", **attrs), {"x": x})


def test_resize_8bit_linear_stays_on_the_cpu_ep(ep_devices):
    x = _ints(np.random.default_rng(6), (1, 2, 4, 4), "uint8")
    consts = {"roi": np.zeros(0, np.float32), "scales": np.asarray([1, 1, 2, 2], np.float32)}
    assert _placed(_model("Resize", {"x": x}, consts, opset=13, mode="linear")) == {"CPUExecutionProvider"}


@pytest.mark.parametrize("op,m,k,n", [("MatMulInteger", 1, 64, 64), ("MatMulInteger", 16, 63, 48),
                                      ("QLinearMatMul", 8, 256, 96), ("MatMulInteger", 3, 130, 40)])
def test_uint8_int8_products_saturate_as_the_cpu_ep(ep_devices, op, m, k, n):
    """Large uint8 values times full-range int8 weights: on x86-64 without VNNI the CPU EP adds the products in pairs
    along K into int16 (MLAS's vpmaddubsw) and a pair past 32767 clamps; vkep's integer GEMM does the same there
    (quantize.cpu_ep_saturates), and gives the exact sums elsewhere, as the CPU EP then does."""
    rng = np.random.default_rng(k)
    a = _ints(rng, (m, k), "uint8", 150)
    b = _ints(rng, (k, n), "int8", -127)
    azp, bzp = np.asarray(128, np.uint8), np.asarray(3 if op == "MatMulInteger" else 0, np.int8)
    if op == "MatMulInteger":
        model = _model(op, {"a": a}, {"b": b, "a_zp": azp, "b_zp": bzp})
    else:
        consts = {"a_scale": np.float32(0.02), "a_zp": azp, "b": b, "b_scale": np.float32(0.01), "b_zp": bzp,
                  "y_scale": np.float32(0.9), "y_zp": np.asarray(120, np.uint8)}
        model = _model(op, {"a": a}, consts)
    got = _run(model, {"a": a})
    exact = (a.astype(np.int64) - int(azp)) @ (b.astype(np.int64) - int(bzp))
    if op == "MatMulInteger":  # (the test means something only where the sums do saturate)
        assert quantize.cpu_ep_saturates() == bool((got != exact).any())


@pytest.mark.parametrize("c,m,group,kernel,stride,pads", [
    (3, 16, 1, 3, 2, 1),     # a stem: 3 channels, pairs join two taps (MLAS's GEMM over its NHWC im2col)
    (16, 16, 1, 3, 1, 1),    # MLAS's symmetric conv kernel (input channels % 4, output channels % 8)
    (16, 24, 1, 1, 1, 0),    # pointwise: the GEMM over the NHWC input itself
    (5, 8, 1, 1, 1, 0),      # pointwise, odd channels
    (6, 8, 1, 3, 1, 1),      # even channels not a multiple of 4: the GEMM path
    (32, 32, 4, 3, 1, 1),    # grouped
    (8, 16, 8, 3, 1, 1),     # two output channels a group (a GEMM of K = 9 a group)
    (32, 32, 32, 3, 1, 1),   # depthwise: exact on the CPU EP too
    (24, 24, 24, 3, 2, 1)])  # depthwise, groups not a multiple of 16 (MlasConvDepthwise)
@pytest.mark.parametrize("x_type", ["uint8", "int8"])
def test_qlinear_conv_products_saturate_as_the_cpu_ep(ep_devices, c, m, group, kernel, stride, pads, x_type):
    """QLinearConv over large activations and full-range int8 weights, as a QDQ model gives it: where the CPU EP
    saturates (x86-64 without VNNI) MLAS adds the raw bytes' products in pairs along its NHWC im2col's
    (ky, kx, c) order into int16; vkep's conv_integer.comp does the same, but for depthwise convolutions, which
    MLAS computes exactly. int8 activations run as the CPU EP's QDQS8ToU8Transformer makes them: uint8 + 128."""
    rng = np.random.default_rng(c * 100 + m + group)
    shape = (2, c, 9, 11)
    x = rng.normal(0, 1, shape).astype(np.float32)
    w = rng.normal(0, 1, (m, c // group, kernel, kernel)).astype(np.float32)
    x_scale, x_zp = np.float32(3.0 / 127), np.asarray(0 if x_type == "int8" else 128, x_type)
    w_scale = (np.abs(w).reshape(m, -1).max(1) / 127).astype(np.float32)  # (per channel: full-range weights)
    wq = np.clip(np.rint(w / w_scale[:, None, None, None]), -127, 127).astype(np.int8)
    y_scale = np.float32(0.05)
    attrs = {"group": group, "strides": [stride] * 2, "pads": [pads] * 4}
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xzp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xzp"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wzp"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"], ["c"], **attrs),
             helper.make_node("QuantizeLinear", ["c", "ys", "xzp"], ["yq"]),  # (a Q -> DQ pair: int8 ones become
             helper.make_node("DequantizeLinear", ["yq", "ys", "xzp"], ["y"])]  # uint8 on the CPU EP)
    consts = {"xs": x_scale, "xzp": x_zp, "wq": wq, "ws": w_scale, "wzp": np.zeros(m, np.int8), "ys": y_scale}
    graph = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                              [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    got = _run(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10), {"x": x})
    # The exact sums (the CPU EP's ConvInteger computes them), requantized: the test means something only where
    # the CPU EP's differ from them.
    info = np.iinfo(x_type)
    xq = np.clip(np.rint(x / x_scale) + int(x_zp), info.min, info.max).astype(x_type)
    sums = runner.cpu_session(_model("ConvInteger", {"x": xq}, {"w": wq, "x_zp": x_zp}, **attrs)).run(None, {"x": xq})[0]
    exact = _requantize(sums, ((x_scale * w_scale) / y_scale)[None, :, None, None], x_zp, x_type)
    exact = (exact.astype(np.float32) - np.float32(x_zp)) * y_scale
    depthwise = c // group == 1 and m // group == 1
    assert bool((got != exact).any()) == (quantize.cpu_ep_saturates() and not depthwise)


@pytest.mark.parametrize("x_type", ["uint8", "int8"])
@pytest.mark.parametrize("k", [64, 75])
def test_qdq_matmul_products_saturate_as_the_cpu_ep(ep_devices, x_type, k):
    """A QDQ MatMul (the CPU EP's QLinearMatMul) over large activations and full-range int8 weights: int8
    activations saturate as the uint8 + 128 the CPU EP makes of them (matmul_integer.comp's SATURATE 2)."""
    rng = np.random.default_rng(k)
    x = rng.normal(0, 1, (3, 16, k)).astype(np.float32)
    wq = _ints(rng, (k, 24), "int8", -127)
    x_scale, x_zp, y_scale = np.float32(3.0 / 127), np.asarray(0 if x_type == "int8" else 128, x_type), np.float32(0.2)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xzp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xzp"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "xzp"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "xzp"], ["y"])]
    consts = {"xs": x_scale, "xzp": x_zp, "wq": wq, "ws": np.float32(0.01), "ys": y_scale}
    graph = helper.make_graph(nodes, "qdq_matmul", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in consts.items()])
    got = _run(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10), {"x": x})
    info = np.iinfo(x_type)
    xq = np.clip(np.rint(x / x_scale) + int(x_zp), info.min, info.max).astype(np.int64)
    exact = _requantize((xq - int(x_zp)) @ wq.astype(np.int64), (x_scale * np.float32(0.01)) / y_scale, x_zp, x_type)
    exact = (exact.astype(np.float32) - np.float32(x_zp)) * y_scale
    assert bool((got != exact).any()) == quantize.cpu_ep_saturates()


@pytest.mark.parametrize("count", [21, 25, 49])
def test_qlinear_concat_of_many_tensors(ep_devices, count):
    """ORT's QOperator quantizer (quantize_static) writes densenet121's dense-block concats as QLinearConcat of
    21-25 tensors (65-77 inputs, past the 64 the trampoline passed: the tenth survey), densenet201's of up to 49."""
    rng = np.random.default_rng(count)
    params = _params(rng, "uint8", ("y_scale", "y_zp"))
    tensors = {f"x{j}": _ints(rng, (1, 2, 3, 3), "uint8") for j in range(count)}
    scales = {f"s{j}": np.array(rng.uniform(0.01, 0.1), np.float32) for j in range(count)}
    zps = {f"z{j}": np.array(rng.integers(0, 256), np.uint8) for j in range(count)}
    names = ["y_scale", "y_zp"] + [n for j in range(count) for n in (f"x{j}", f"s{j}", f"z{j}")]
    graph = helper.make_graph(
        [helper.make_node("QLinearConcat", names, ["y"], domain=MS, axis=1)], "concat",
        [helper.make_tensor_value_info(k, onnx.TensorProto.UINT8, v.shape) for k, v in tensors.items()],
        [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(v, k) for k, v in {**params, **scales, **zps}.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)],
                              ir_version=10)
    assert _placed(model) == {"VulkanExecutionProvider"}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    for _ in range(2):
        np.testing.assert_array_equal(session.run(None, tensors)[0], runner.cpu_session(model).run(None, tensors)[0])
