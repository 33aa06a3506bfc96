"""QuantizeLinear and DequantizeLinear against the CPU EP, and a QDQ model made by ORT's quantizer."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import quantize_static_model
from onnx import TensorProto, helper, numpy_helper

from vkep import runner
from vkep.kernels.quantize import MINMAX_ONE_CALL


def _model(op: str, opset: int, x_type, scale, zp, axis: int | None, x_shape):
    if op == "QuantizeLinear":
        y_type = helper.np_dtype_to_tensor_dtype(zp.dtype) if zp is not None else TensorProto.UINT8
    else:
        y_type = helper.np_dtype_to_tensor_dtype(scale.dtype)
    inits = [numpy_helper.from_array(scale, "scale")] + ([numpy_helper.from_array(zp, "zp")] if zp is not None else [])
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node(op, ["x", "scale"] + (["zp"] if zp is not None else []), ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", x_type, x_shape)],
                              [helper.make_tensor_value_info("y", y_type, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def _check(model, feeds):
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    got, want = session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset", [13, 19, 21, 23])
@pytest.mark.parametrize("zp_type", [np.uint8, np.int8, None])
@pytest.mark.parametrize("per_axis", [False, True])
@pytest.mark.parametrize("float_type", [np.float32, np.float16])
def test_quantize_and_dequantize(ep_devices, opset, zp_type, per_axis, float_type):
    if float_type == np.float16 and opset < 19:
        pytest.skip("float16 scales from opset 19")
    rng = np.random.default_rng(opset)
    shape, axis = (2, 4, 5), 1
    channels = shape[axis] if per_axis else 1
    scale = rng.uniform(0.01, 0.2, channels).astype(float_type).reshape(-1 if per_axis else ())
    zp = None
    if zp_type is not None:
        info = np.iinfo(zp_type)
        zp = rng.integers(info.min // 2, info.max // 2, channels).astype(zp_type).reshape(-1 if per_axis else ())
    # values around the rounding boundaries and past the saturation points
    x = (rng.standard_normal(shape) * 10).astype(float_type)
    x.flat[:6] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e4])
    x = x.astype(float_type)
    f_type = TensorProto.FLOAT if float_type == np.float32 else TensorProto.FLOAT16
    _check(_model("QuantizeLinear", opset, f_type, scale, zp, axis if per_axis else None, shape), {"x": x})
    q_type = np.dtype(zp_type or np.uint8)
    q = rng.integers(np.iinfo(q_type).min, np.iinfo(q_type).max, shape).astype(q_type)
    q_proto = TensorProto.UINT8 if q_type == np.uint8 else TensorProto.INT8
    _check(_model("DequantizeLinear", opset, q_proto, scale, zp, axis if per_axis else None, shape), {"x": q})


def test_dequantize_int32(ep_devices):
    scale = np.array(0.125, np.float32)
    x = np.array([[-(2**31), -7, 0, 9, 2**31 - 1]], np.int32)
    _check(_model("DequantizeLinear", 19, TensorProto.INT32, scale, None, None, x.shape), {"x": x})


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
@pytest.mark.parametrize("zp_type", [np.uint8, np.int8, None])
@pytest.mark.parametrize("float_type", [np.float32, np.float16])
@pytest.mark.parametrize("shape,axis,block", [((4, 10), 1, 4), ((6, 5), 0, 2), ((2, 7, 3), -2, 3), ((3, 8), 1, 1),
                                              ((2, 3, 9), 2, 32)])
def test_blocked_quantization(ep_devices, op, zp_type, float_type, shape, axis, block):
    """Opset 21's block_size: a scale (and zero point) per block along the axis, the last block short; values on
    rounding boundaries, past saturation, past int32, infinite and NaN (the lowest value, as the CPU EP)."""
    rng = np.random.default_rng(block)
    pshape = list(shape)
    pshape[axis] = -(-shape[axis] // block)
    scale = rng.uniform(0.01, 0.2, pshape).astype(float_type)
    zp = None
    if zp_type is not None:
        info = np.iinfo(zp_type)
        zp = rng.integers(info.min, info.max + 1, pshape).astype(zp_type)
    q_type = np.dtype(zp_type or np.uint8)
    if op == "QuantizeLinear":
        x = (rng.standard_normal(shape) * 10).astype(float_type)
        flat = x.reshape(-1)
        flat[:10] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e4, -1e4, 6e4 if float_type == np.float16 else 3e9, np.inf,
                              np.nan])
        x_type = TensorProto.FLOAT if float_type == np.float32 else TensorProto.FLOAT16
    else:
        x = rng.integers(np.iinfo(q_type).min, np.iinfo(q_type).max + 1, shape).astype(q_type)
        x_type = TensorProto.UINT8 if q_type == np.uint8 else TensorProto.INT8
    model = _model(op, 21, x_type, scale, zp, axis, list(shape))
    model.graph.node[0].attribute.append(helper.make_attribute("block_size", block))
    _check(model, {"x": x})


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_qdq_model_from_orts_quantizer(ep_devices, tmp_path, weights):
    """vkep's default model quantized by ORT's quantize_static (QDQ, per-channel int8 or int4 weights, uint8
    activations): every node on vkep; with int8 weights the outputs equal the CPU EP's (both fuse the same
    Q/DQ groups into integer kernels: vkep/ort/qdq.py), with int4 weights (no group fused) within a
    quantization step or two, and the same top-1."""
    from onnxruntime.quantization import QuantFormat, QuantType

    from vkep import models

    model = models.all_ops()
    # (7-bit weights: reduce_range; test_qdq_fusion's CNN takes quantize_static's defaults)
    qdq = quantize_static_model(model, [models.random_inputs(model, seed=s) for s in range(8)], tmp_path,
                                quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt8,
                                weight_type=QuantType.QInt8 if weights == "int8" else QuantType.QInt4,
                                reduce_range=True)
    if weights == "int4":
        assert any(t.data_type == TensorProto.INT4 for t in qdq.graph.initializer)
    session, cpu = runner.vkep_session(qdq), runner.cpu_session(qdq)
    placed = [ep for _, _, ep in runner.placement(session)]
    assert placed.count("VulkanExecutionProvider") >= 0.95 * len(placed), placed
    assert {ep for _, op, ep in runner.placement(session) if op == "DequantizeLinear"} == {"VulkanExecutionProvider"}
    for seed in range(3):
        feeds = models.random_inputs(model, seed=100 + seed)
        for got, want in zip(session.run(None, feeds), cpu.run(None, feeds), strict=True):
            # a quantization step of these outputs (calibrated over ranges up to about 1, or their own)
            step = max(float(np.abs(want).max()), 1.0) / 127
            np.testing.assert_allclose(got, want, atol=2 * step + 1e-6, rtol=0)
            if weights == "int8":
                np.testing.assert_array_equal(got, want)
            assert np.array_equal(got.reshape(got.shape[0], -1).argmax(1), want.reshape(want.shape[0], -1).argmax(1))


def _dynamic_quantize_model(shape):
    """One DynamicQuantizeLinear node over a float32 X of `shape`: outputs y (uint8), scale, zp."""
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])
    graph = helper.make_graph([node], "dql", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None),
                               helper.make_tensor_value_info("scale", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("zp", TensorProto.UINT8, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("shape", [(7,), (3, 40), (2, 5, 300)])
@pytest.mark.parametrize("offset", [0.0, 3.0, -3.0])
def test_dynamic_quantize_linear(ep_devices, shape, offset):
    """Scale and zero point from the data (its range widened to hold 0), then quantized: as the CPU EP."""
    x = (np.random.default_rng(len(shape)).standard_normal(shape) + offset).astype(np.float32)
    model = _dynamic_quantize_model(shape)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    for got, want in zip(session.run(None, {"x": x}), runner.cpu_session(model).run(None, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)


def _nan_cases():
    """(name, x): NaN and infinities where MLAS's min / max meets them (its 4 x 8 lanes over runs of 32, 8 lanes over
    runs of 8, the lanes folded, a scalar tail): a NaN last in its lane's run survives, one inside wipes its lane's
    earlier values, one in the tail is dropped; all NaN; infinities (scale inf, zero point 255)."""
    nan, rng = np.float32("nan"), np.random.default_rng(8)
    out = [("all NaN", np.full(40, nan, np.float32)), ("inf and -inf", np.array([np.inf, -np.inf, 1, 2], np.float32))]
    for n in (5, 8, 13, 32, 45, 100, 1000, 4096, MINMAX_ONE_CALL):
        for where in ("last vector", "first", "tail", "wipes", "random"):
            x = (rng.standard_normal(n) * 3).astype(np.float32)
            at = {"last vector": max(n // 8 * 8 - 1, 0), "first": 0, "tail": n - 1, "wipes": min(n - 1, 40),
                  "random": int(rng.integers(n))}[where]
            if where == "wipes":
                x[min(n - 1, 8)] = 50.0  # (lane 0's largest, then a NaN later in its lane: max from after it)
            x[at] = nan
            out.append((f"{n} {where}", x))
    return out


@pytest.mark.parametrize("name,x", _nan_cases(), ids=[c[0] for c in _nan_cases()])
def test_dynamic_quantize_linear_of_nan_and_inf_as_the_cpu_ep(ep_devices, name, x):
    """NaN and infinities give the CPU EP's scale, zero point and y (dynamic_quantize.comp's MLAS min / max where x
    holds a NaN, ORT's std::min / max on the range, the zero point and the scale)."""
    model = _dynamic_quantize_model(x.shape)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    for got, want in zip(session.run(None, {"x": x}), runner.cpu_session(model).run(None, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)


def test_dynamic_quantize_linear_past_one_workgroup(ep_devices):
    """[1, 64, 512, 512] (16.8M elements, past one workgroup's loop budget: two stages), as each of the first
    convolutions' outputs of imgly's quantized background-removal model (@imgly/background-removal-data,
    ConvInteger over a 1024 x 1024 image): the extremes sit in different workgroups' chunks."""
    shape = (1, 64, 512, 512)
    x = np.random.default_rng(5).uniform(0.0, 4.0, shape).astype(np.float32)
    x.flat[x.size - 1], x.flat[x.size // 3] = -1.25, 6.5
    model = _dynamic_quantize_model(shape)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(model).run(None, {"x": x})
    assert want[1] == np.float32(7.75 / 255)  # the range from both extremes
    for _ in range(2):  # the second run replays the plan
        for got, expected in zip(session.run(None, {"x": x}), want, strict=True):
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("zero_points", ["none", "scalar", "per_row_col"])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 12), (12, 7)), ((2, 3, 16), (16, 4)), ((2, 3, 8), (2, 8, 5))])
def test_matmul_integer(ep_devices, a_type, b_type, zero_points, a_shape, b_shape):
    rng = np.random.default_rng(0)
    a_lo, a_hi = np.iinfo(a_type).min, np.iinfo(a_type).max
    # int8 times uint8 in [-64, 63], where the CPU EP's AVX2 sums do not saturate (tests/test_qlinear.py)
    b_lo, b_hi = (-64, 63) if a_type != b_type else (np.iinfo(b_type).min, np.iinfo(b_type).max)
    feeds = {"a": rng.integers(a_lo, a_hi + 1, a_shape).astype(a_type),
             "b": rng.integers(b_lo, b_hi + 1, b_shape).astype(b_type)}
    names = ["a", "b"]
    if zero_points != "none":
        if zero_points == "per_row_col" and len(a_shape) > 2:
            pytest.skip("per-row zero points are for a 2-D A")
        m, n = a_shape[-2], b_shape[-1]
        feeds["azp"] = rng.integers(a_lo, a_hi + 1, (m,) if zero_points == "per_row_col" else ()).astype(a_type)
        feeds["bzp"] = rng.integers(b_lo, b_hi + 1, (n,) if zero_points == "per_row_col" else ()).astype(b_type)
        names += ["azp", "bzp"]
    node = helper.make_node("MatMulInteger", names, ["y"])
    graph = helper.make_graph([node], "mmi", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                                            v.shape) for k, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    try:
        want = runner.cpu_session(model).run(None, feeds)[0]
    except Exception as exc:  # the CPU EP has no kernel for some type pairs (int8 A with uint8 B)
        pytest.skip(f"the CPU EP cannot run the reference: {exc}")
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    np.testing.assert_array_equal(session.run(None, feeds)[0], want)


def test_model_from_orts_dynamic_quantizer(ep_devices, tmp_path):
    """A BERT-style encoder quantized by ORT's quantize_dynamic (DynamicQuantizeLinear + MatMulInteger around
    every MatMul with a weight): nodes on vkep, outputs close to the CPU EP's."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from vkep import models

    model = models.bert_encoder()
    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    onnx.save(model, src)
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, reduce_range=True)  # (as above)
    quantized = onnx.load(dst)
    ops = {n.op_type for n in quantized.graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops, ops
    session, cpu = runner.vkep_session(quantized), runner.cpu_session(quantized)
    placed = [(op, ep) for _, op, ep in runner.placement(session)]
    on_vkep = [op for op, ep in placed if ep == "VulkanExecutionProvider"]
    assert len(on_vkep) >= 0.95 * len(placed), [p for p in placed if p[1] != "VulkanExecutionProvider"]
    feeds = models.bert_inputs(model)
    for got, want in zip(session.run(None, feeds), cpu.run(None, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


NIBBLE_RANGES = {TensorProto.INT4: (-8, 7), TensorProto.UINT4: (0, 15)}


def _four_bit_model(t4: int, x_shape: tuple, axis: int, per: str, zero_points: bool, float_type, seed: int):
    """A float feed through two vkep nodes, QuantizeLinear to a 4-bit type (scale and zero point per tensor, per
    axis or per block of 3), DequantizeLinear back, and DequantizeLinear of a constant 4-bit weight of the same
    shape: every output is a float tensor numpy can hold (4-bit values are not)."""
    rng = np.random.default_rng(seed)
    lo, hi = NIBBLE_RANGES[t4]
    f_type = helper.np_dtype_to_tensor_dtype(np.dtype(float_type))
    pshape = [] if per == "tensor" else [x_shape[axis]] if per == "axis" else list(x_shape)
    if per == "block":
        pshape[axis] = -(-x_shape[axis] // 3)
    attrs = {} if per == "tensor" else {"axis": axis} | ({"block_size": 3} if per == "block" else {})
    scale = rng.uniform(0.3, 2, pshape).astype(float_type)
    inits = [numpy_helper.from_array(scale, "s"), helper.make_tensor("w", t4, x_shape, rng.integers(
        lo, hi + 1, x_shape).ravel().tolist())]
    q_args = ["r", "s"]
    if zero_points:
        inits.append(helper.make_tensor("z", t4, pshape, rng.integers(lo, hi + 1, pshape).ravel().tolist()))
        q_args.append("z")
    q_attrs = attrs if zero_points else attrs | {"output_dtype": t4}
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Neg", ["n"], ["r"]),
             helper.make_node("QuantizeLinear", q_args, ["q"], **q_attrs),
             helper.make_node("DequantizeLinear", ["q", *q_args[1:]], ["y"], **attrs),
             helper.make_node("DequantizeLinear", ["w", *q_args[1:]], ["dw"], **attrs)]
    graph = helper.make_graph(nodes, "four_bit", [helper.make_tensor_value_info("x", f_type, x_shape)],
                              [helper.make_tensor_value_info(n, f_type, None) for n in ("y", "dw")], inits)
    x = (rng.standard_normal(x_shape) * 8).astype(float_type)
    x.flat[:8] = [0.5, 1.5, 2.5, -0.5, -2.5, np.nan, np.inf, -np.inf]  # rounding ties, saturation, NaN
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), {"x": x}


@pytest.mark.parametrize("t4", list(NIBBLE_RANGES), ids=["int4", "uint4"])
@pytest.mark.parametrize("per", ["tensor", "axis", "block"])
@pytest.mark.parametrize("zero_points", [True, False], ids=["zp", "no_zp"])
@pytest.mark.parametrize("float_type", [np.float32, np.float16])
@pytest.mark.parametrize("x_shape,axis", [((3, 5), 1), ((2, 7, 3), 1)])  # odd element counts: a half byte at the end
def test_four_bit_quantization(ep_devices, t4, per, zero_points, float_type, x_shape, axis):
    """int4 and uint4 (opset 21), two elements a byte, as the CPU EP computes them, bit for bit, on the first run and
    on replayed ones; a constant 4-bit weight is read as ORT packed it."""
    import vkep

    model, feeds = _four_bit_model(t4, x_shape, axis, per, zero_points, float_type, seed=len(x_shape) + t4)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)
    for run in range(3):
        vkep.reset_stats()
        for got, w in zip(session.run(None, feeds), want, strict=True):
            assert got.dtype == w.dtype
            np.testing.assert_array_equal(got, w)
        if run:  # Q between two vkep nodes replays; the edges (feed reader, output producers) enter Python
            assert vkep.stats()["process"]["nodes_replayed_natively"] >= 2
