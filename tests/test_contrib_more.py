"""com.microsoft ops that ORT's own tools write into exported and quantized models, against ORT's CPU EP:
QuantizeLinear / DequantizeLinear (16-bit activations, UseQDQContribOps, 4-bit weights) and a small CNN that
quantize_static makes with them, run on vkep end to end."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import quantize_static_model
from onnx import TensorProto, helper, numpy_helper

import vkep
from vkep import runner

MS = "com.microsoft"
PROTO = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "uint8": TensorProto.UINT8,
         "int8": TensorProto.INT8, "uint16": TensorProto.UINT16, "int16": TensorProto.INT16,
         "uint4": TensorProto.UINT4, "int4": TensorProto.INT4, "int32": TensorProto.INT32,
         "int64": TensorProto.INT64, "bool": TensorProto.BOOL}


def _one_node(op: str, feeds: dict, inits: dict, out_type: str, attrs: dict | None = None, names=None,
              outputs: int = 1) -> onnx.ModelProto:
    """One com.microsoft `op` node over graph inputs `feeds` then initializers `inits` (or the input `names`)."""
    proto_inits = [_init(name, v) for name, v in inits.items()]
    node = helper.make_node(op, names if names is not None else [*feeds, *inits],
                            [f"y{i}" for i in range(outputs)], domain=MS, **(attrs or {}))
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(k, PROTO[str(v.dtype)], v.shape)
                                           for k, v in feeds.items()],
                              [helper.make_tensor_value_info(f"y{i}", PROTO[out_type], None)
                               for i in range(outputs)], proto_inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
                             ir_version=10)


def _init(name: str, v) -> onnx.TensorProto:
    """An initializer; a (dtype, array) pair for the 4-bit types numpy has no dtype for."""
    if isinstance(v, tuple):
        dtype, values = v
        return helper.make_tensor(name, PROTO[dtype], values.shape, values.reshape(-1).tolist())
    return numpy_helper.from_array(v, name)


def _same(model: onnx.ModelProto, feeds: dict, exact: bool = True, atol: float = 1e-3, rtol: float = 0.0) -> None:
    """Every node on vkep; its outputs the CPU EP's (bit for bit where `exact`, else within atol)."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    got, want = session.run(None, feeds), runner.cpu_session(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


# ---- com.microsoft QuantizeLinear and DequantizeLinear -----------------------------------------------------

RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
          "uint4": (0, 15), "int4": (-8, 7)}


@pytest.mark.parametrize("qtype", list(RANGES))
@pytest.mark.parametrize("ftype", ["float32", "float16"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_dequantize(ep_devices, qtype, ftype, per_axis):
    rng = np.random.default_rng(len(qtype) + per_axis)
    shape, axis = (2, 3, 7), 1
    lo, hi = RANGES[qtype]
    pshape = (shape[axis],) if per_axis else ()
    # a step of the scale such that x spans the type's range and past it (saturation)
    scale = np.asarray(rng.uniform(0.5, 1.5, pshape) * (12.0 / (hi - lo)), ftype)
    zp = rng.integers(lo // 2, hi // 2 + 1, pshape)
    zp_init = (qtype, zp) if qtype in ("uint4", "int4") else np.asarray(zp, qtype)
    attrs = {"axis": axis} if per_axis else {}
    x = np.asarray(rng.uniform(-9, 9, shape), ftype)
    x.flat[:4] = np.asarray([0.5, -1.5, 2.5, 40.0]) * float(scale.reshape(-1)[0])  # ties to even; saturation
    if qtype in ("uint4", "int4"):  # (numpy has no 4-bit type: Q's output read through a DequantizeLinear)
        model = _one_node("QuantizeLinear", {"x": x}, {"s": scale, "z": zp_init}, ftype, attrs)
        model.graph.node[0].output[0] = "q"
        model.graph.node.append(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y0"], domain=MS, **attrs))
        _same(model, {"x": x})
        q = rng.integers(lo, hi + 1, shape)
        _same(_one_node("DequantizeLinear", {}, {"q": (qtype, q), "s": scale, "z": zp_init}, ftype, attrs), {})
        return
    _same(_one_node("QuantizeLinear", {"x": x}, {"s": scale, "z": zp_init}, qtype, attrs), {"x": x})
    q = np.asarray(rng.integers(lo, hi + 1, shape), qtype)
    _same(_one_node("DequantizeLinear", {"q": q}, {"s": scale, "z": zp_init}, ftype, attrs), {"q": q})


def test_dequantize_int32_without_zero_point(ep_devices):
    q = np.asarray(np.random.default_rng(1).integers(-100000, 100000, (4, 5)), np.int32)
    _same(_one_node("DequantizeLinear", {"q": q}, {"s": np.asarray(0.003, np.float32)}, "float32"), {"q": q})


def _small_cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = {"w1": rng.standard_normal((8, 3, 3, 3)) * 0.3, "b1": rng.standard_normal(8) * 0.1,
             "w2": rng.standard_normal((8, 8, 3, 3)) * 0.2, "b2": rng.standard_normal(8) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "c2"], ["a"]), helper.make_node("Sigmoid", ["a"], ["s"]),
             helper.make_node("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                              [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.mark.parametrize("activations,weights", [("QInt16", "QInt8"), ("QUInt16", "QUInt8"),
                                                 ("QUInt8", "QUInt8")])
def test_quantize_static_contrib_qdq_model(ep_devices, tmp_path, activations, weights):
    """quantize_static with UseQDQContribOps: every Q and DQ com.microsoft's; 16-bit activations run node by node
    (the CPU EP fuses no 16-bit group: float ops between, so a step or two apart), 8-bit ones, bit for bit, as the
    QLinear ops the CPU EP fuses them into. (No MatMul or
    Gemm: with 16-bit activations the CPU EP turns a DQ -> MatMul of 8-bit weights into MatMulNBits, which
    quantizes A to int8; tests/test_dq_matmul_nbits.py checks vkep's same fusion.)"""
    from onnxruntime.quantization import QuantFormat, QuantType

    rng = np.random.default_rng(2)
    batches = [{"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)]
    model = quantize_static_model(_small_cnn(), batches, tmp_path, quant_format=QuantFormat.QDQ,
                                  activation_type=getattr(QuantType, activations),
                                  weight_type=getattr(QuantType, weights), per_channel=True,
                                  extra_options={"UseQDQContribOps": True})
    qdq = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert qdq and all(n.domain == MS for n in qdq)
    feeds = {"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    if activations.endswith("16"):  # (float Conv sums in another order than MLAS: a 16-bit step may flip, ~1.5e-5)
        _same(model, feeds, exact=False, atol=1e-4)
        return
    _same(model, feeds)
    # vkep ran the groups the CPU EP fused as its QLinear kernels: as many kernels as the CPU EP's nodes, less the
    # layout Transposes the CPU EP adds around its NHWC kernels, plus the DQ and Q around MaxPool and Flatten that
    # the CPU EP drops (exact either way)
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "cpu.onnx")
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    cpu_ops = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node if n.op_type != "Transpose"]
    assert "QLinearConv" in cpu_ops
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    session.run(None, feeds)
    vkep.reset_stats()
    session.run(None, feeds)
    stats = vkep.stats()["process"]
    kept = 2 * sum(op in ("MaxPool", "Flatten") for op in cpu_ops)
    assert stats["nodes_replayed_natively"] + stats["nodes_python_path"] == len(cpu_ops) + kept, cpu_ops


# ---- com.microsoft GatherBlockQuantized ----------------------------------------------------------------------

def _gbq_case(rng, dtype: str, shape: tuple, gather_axis: int, quantize_axis: int, block: int, bits: int,
              with_zp: bool, ftype: str, ids) -> tuple[onnx.ModelProto, dict]:
    """A table of `shape` (uint8: packed, its last dimension bytes), its scales and zero points, gathered by ids."""
    per_byte = 8 // bits if dtype == "uint8" else 1
    lo, hi = {"int4": (-8, 7), "uint4": (0, 15), "uint8": (0, 255)}[dtype]
    data = rng.integers(lo, hi + 1, shape)
    q = quantize_axis % len(shape)
    blocks = -(-shape[q] * per_byte // block)
    sshape = tuple(blocks if d == q else n for d, n in enumerate(shape))
    inits = {"data": (dtype, data) if dtype != "uint8" else np.asarray(data, np.uint8),
             "scales": np.asarray(rng.uniform(0.01, 0.1, sshape), ftype)}
    if with_zp:
        zshape = tuple(-(-blocks // per_byte) if d == q else n for d, n in enumerate(sshape))
        zp = rng.integers(lo, hi + 1, zshape)
        inits["zp"] = (dtype, zp) if dtype != "uint8" else np.asarray(zp, np.uint8)
    names = ["data", "ids", "scales"] + (["zp"] if with_zp else [])
    attrs = {"gather_axis": gather_axis, "quantize_axis": quantize_axis, "block_size": block}
    if dtype == "uint8":
        attrs["bits"] = bits
    return _one_node("GatherBlockQuantized", {"ids": ids}, inits, ftype, attrs, names=names), {"ids": ids}


GBQ_CASES = {  # (data type, table shape, gather_axis, quantize_axis, block_size, bits, zero points)
    "int4_embedding": ("int4", (50, 64), 0, 1, 32, 4, False),
    "uint4_embedding_zp": ("uint4", (50, 64), 0, 1, 32, 4, True),
    "uint4_odd_blocks": ("uint4", (7, 40), 0, -1, 16, 4, True),  # (a partial last block, an odd count of them)
    "int4_quantize_axis_0": ("int4", (48, 5, 3), 1, 0, 16, 4, True),
    "uint8_nibbles": ("uint8", (50, 32), 0, 1, 16, 4, True),  # (MatMulNBits' packing: [vocab, hidden / 2] bytes)
    "uint8_nibbles_default_zp": ("uint8", (50, 24), 0, -1, 16, 4, False),
    "uint8_nibbles_odd_blocks": ("uint8", (9, 40), 0, 1, 16, 4, True),
    "uint8_bytes": ("uint8", (50, 64), 0, 1, 32, 8, True),
    "uint8_bytes_default_zp": ("uint8", (50, 64), 0, 1, 16, 8, False),
}


@pytest.mark.parametrize("case", GBQ_CASES)
@pytest.mark.parametrize("ftype", ["float32", "float16"])
@pytest.mark.parametrize("itype", ["int64", "int32"])
def test_gather_block_quantized(ep_devices, case, ftype, itype):
    dtype, shape, gather_axis, quantize_axis, block, bits, with_zp = GBQ_CASES[case]
    rng = np.random.default_rng(len(case))
    axis_len = shape[gather_axis]
    # input_ids [batch, sequence]: negatives wrap, out-of-range ones give zeros (the CPU EP's answer)
    ids = rng.integers(0, axis_len, (2, 5))
    ids[0, :3] = [-1, axis_len, -axis_len - 1]
    model, feeds = _gbq_case(rng, dtype, shape, gather_axis, quantize_axis, block, bits, with_zp, ftype,
                             np.asarray(ids, itype))
    _same(model, feeds)


def test_gather_block_quantized_declines_two_bits(ep_devices):
    """uint8 data of 2-bit values (four a byte): the CPU EP runs it, vkep declines it."""
    rng = np.random.default_rng(0)
    model, feeds = _gbq_case(rng, "uint8", (4, 8), 0, 1, 16, 2, True, "float32", np.asarray([0, 3], np.int64))
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    session.run(None, feeds)


# ---- com.microsoft names of ONNX ops: Range, Trilu, ExpandDims, GridSample, TransposeMatMul --------------------

def _scalars(**values) -> dict:
    return {k: np.asarray(v) for k, v in values.items()}


@pytest.mark.parametrize("feeds", [
    _scalars(start=np.float32(0.5), limit=np.float32(7.3), delta=np.float32(0.7)),
    _scalars(start=np.int32(-3), limit=np.int32(10), delta=np.int32(2)),
    _scalars(start=np.int64(10), limit=np.int64(-5), delta=np.int64(-3)),
    _scalars(start=np.int64(2), limit=np.int64(9)),  # (delta absent: 1)
    _scalars(start=np.float32(4), limit=np.float32(1)),  # (nothing)
], ids=["float32", "int32", "int64_down", "no_delta", "empty"])
def test_range(ep_devices, feeds):
    dtype = str(feeds["start"].dtype)
    _same(_one_node("Range", feeds, {}, dtype), feeds)


@pytest.mark.parametrize("dtype,upper,k", [("float32", 0, -1), ("float16", 1, 2), ("int64", 1, None),
                                           ("float32", 1, -7)])
def test_trilu(ep_devices, dtype, upper, k):
    x = np.asarray(np.random.default_rng(3).integers(-9, 9, (2, 4, 5)), dtype)
    inits = {} if k is None else {"k": np.asarray(k, np.int64)}
    _same(_one_node("Trilu", {"x": x}, inits, dtype, {"upper": upper}), {"x": x})


@pytest.mark.parametrize("dtype,axis", [("float32", -1), ("float32", 0), ("float16", 2), ("int64", 1), ("bool", -3)])
def test_expand_dims(ep_devices, dtype, axis):
    x = np.asarray(np.random.default_rng(4).integers(0, 2, (2, 3)), dtype)
    feeds = {"x": x, "axis": np.asarray(axis, np.int32)}
    _same(_one_node("ExpandDims", feeds, {}, dtype), feeds)


@pytest.mark.parametrize("mode,padding,align", [("bilinear", "zeros", 0), ("nearest", "border", 1),
                                                ("bicubic", "reflection", 0)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_grid_sample(ep_devices, mode, padding, align, dtype):
    rng = np.random.default_rng(5)
    feeds = {"x": np.asarray(rng.standard_normal((2, 3, 5, 6)), dtype),
             "grid": np.asarray(rng.uniform(-1.2, 1.2, (2, 4, 3, 2)), dtype)}
    _same(_one_node("GridSample", feeds, {}, dtype, {"mode": mode, "padding_mode": padding, "align_corners": align}),
          feeds, exact=False, atol=2e-3)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("attrs,shapes", [({"transA": 1, "transB": 1, "alpha": 0.5}, ((2, 8, 3), (5, 8))),
                                          ({"transB": 1}, ((2, 3, 4, 8), (2, 3, 6, 8))), ({}, ((4, 8), (8, 5)))])
def test_transpose_matmul(ep_devices, dtype, attrs, shapes):
    rng = np.random.default_rng(6)
    feeds = {"a": np.asarray(rng.standard_normal(shapes[0]), dtype), "b": np.asarray(rng.standard_normal(shapes[1]),
                                                                                       dtype)}
    _same(_one_node("TransposeMatMul", feeds, {}, dtype, attrs), feeds, exact=False,
          atol=1e-2 if dtype == "float16" else 1e-4)


# ---- com.microsoft QLinearWhere --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((3, 1), (1, 4), (3, 4)), ((4,), (2, 3, 4), ())])
@pytest.mark.parametrize("params", ["constant", "fed", "z_equals_x"])
def test_qlinear_where(ep_devices, dtype, shapes, params):
    rng = np.random.default_rng(7)
    lo, hi = RANGES[dtype]
    c = rng.random(shapes[0]) < 0.5
    x, y = (np.asarray(rng.integers(lo, hi + 1, s), dtype) for s in shapes[1:])
    scales = {"xs": np.float32(0.02), "ys": np.float32(0.11), "zs": np.float32(0.05)}
    zps = {"xz": np.asarray(rng.integers(lo, hi + 1), dtype), "yz": np.asarray(rng.integers(lo, hi + 1), dtype),
           "zz": np.asarray(rng.integers(lo // 2, hi // 2), dtype)}
    if params == "z_equals_x":  # (the CPU EP copies X then)
        scales["zs"], zps["zz"] = scales["xs"], zps["xz"]
    names = ["c", "x", "xs", "xz", "y", "ys", "yz", "zs", "zz"]
    params_in = {k: np.asarray(v) for k, v in {**scales, **zps}.items()}
    feeds = {"c": c, "x": x, "y": y}
    if params == "fed":
        feeds |= params_in
        params_in = {}
    model = _one_node("QLinearWhere", feeds, params_in, dtype, names=names)
    _same(model, feeds)


# ---- com.microsoft MatMulInteger16 -----------------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((4, 40), (40, 7)), ((2, 3, 5, 33), (33, 20)), ((5, 9), (2, 9, 17)),
                                    ((2, 4, 6), (2, 6, 3))])
@pytest.mark.parametrize("scale", [3000, 32768])
def test_matmul_integer16(ep_devices, shapes, scale):
    rng = np.random.default_rng(8)
    feeds = {k: np.asarray(rng.integers(-scale, scale, s), np.int16) for k, s in zip("ab", shapes, strict=True)}
    feeds["a"].flat[:2] = [-32768, 32767]  # (the int32 sums wrap as the CPU EP's do)
    _same(_one_node("MatMulInteger16", feeds, {}, "int32"), feeds)


# ---- com.microsoft NhwcMaxPool ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shape,attrs", [
    ((1, 9, 8, 16), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # (resnet's, as NHWC)
    ((2, 7, 7, 3), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 6, 5, 4), {"kernel_shape": [3, 2], "dilations": [2, 1], "pads": [2, 0, 1, 1]}),
    ((1, 6, 5, 4), {"kernel_shape": [3, 2], "strides": [2, 1], "auto_pad": "SAME_LOWER"}),
    ((2, 10, 3), {"kernel_shape": [4], "strides": [3]}),
])
def test_nhwc_max_pool(ep_devices, dtype, shape, attrs):
    lo, hi = RANGES[dtype]
    x = np.asarray(np.random.default_rng(9).integers(lo, hi + 1, shape), dtype)
    _same(_one_node("NhwcMaxPool", {"x": x}, {}, dtype, attrs), {"x": x})


@pytest.mark.parametrize("shape,attrs", [
    ((1, 6, 5, 4), {"kernel_shape": [3, 2], "dilations": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((2, 9, 11, 3), {"kernel_shape": [3, 3], "dilations": [2, 3], "strides": [2, 1], "auto_pad": "SAME_LOWER"}),
    ((1, 11, 11, 2), {"kernel_shape": [1, 1], "strides": [4, 4], "auto_pad": "SAME_UPPER"}),  # (pads -1)
])
def test_nhwc_max_pool_same_padding_with_dilations(ep_devices, shape, attrs):
    """The CPU EP pads SAME for the undilated window and then dilates it: vkep left that to it, and since
    pool.py's pool_geometry (which pads so for every pool, as the CPU EP does) runs it."""
    x = np.asarray(np.random.default_rng(9).integers(0, 256, shape), np.uint8)
    _same(_one_node("NhwcMaxPool", {"x": x}, {}, "uint8", attrs), {"x": x})


# ---- com.microsoft CDist -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize("m,n,k", [(5, 7, 3), (1, 4, 7), (6, 2, 16), (9, 9, 130)])
def test_cdist(ep_devices, metric, m, n, k):
    rng = np.random.default_rng(10)
    feeds = {"a": rng.standard_normal((m, k)).astype(np.float32), "b": rng.standard_normal((n, k)).astype(np.float32)}
    model = _one_node("CDist", feeds, {}, "float32", {"metric": metric})
    # (the CPU EP's GEMM sums with fused multiply-adds in its own order: a few ulps apart)
    _same(model, feeds, exact=False, atol=1e-5 * k)


def test_cdist_of_equal_rows(ep_devices):
    """Equal rows: the CPU EP's form gives small distances (never negative ones), and so does vkep's."""
    a = (np.random.default_rng(1).standard_normal((6, 5)) * 3).astype(np.float32)
    feeds = {"a": a, "b": a[::-1].copy()}
    for metric in ("sqeuclidean", "euclidean"):
        _same(_one_node("CDist", feeds, {}, "float32", {"metric": metric}), feeds, exact=False, atol=1e-2)


# ---- com.microsoft Inverse ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (5, 5), (2, 3, 12, 12), (1, 1)])
def test_inverse(ep_devices, shape):
    rng = np.random.default_rng(11)
    n = shape[-1]
    x = (rng.standard_normal(shape) + 2 * np.eye(n)).astype(np.float32)  # (well conditioned)
    x[..., 0, :] *= -1  # (a pivot off the diagonal)
    feeds = {"x": x}
    _same(_one_node("Inverse", feeds, {}, "float32"), feeds, exact=False, atol=1e-4, rtol=1e-4)


# ---- com.microsoft MatMulBnb4 ------------------------------------------------------------------------------------

def _bnb4_model(k: int, n: int, quant_type: int, block_size: int, seed: int = 0,
                dtype: str = "float32") -> onnx.ModelProto:
    """A MatMul by a [k, n] weight, quantized by ORT's own MatMulBnb4Quantizer."""
    from onnxruntime.quantization.matmul_bnb4_quantizer import MatMulBnb4Quantizer

    weight = np.random.default_rng(seed).standard_normal((k, n)).astype(dtype)
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y0"])], "bnb4",
                              [helper.make_tensor_value_info("a", PROTO[dtype], None)],
                              [helper.make_tensor_value_info("y0", PROTO[dtype], None)],
                              [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    quantizer = MatMulBnb4Quantizer(model, quant_type, block_size)
    quantizer.process()
    quantized = quantizer.model.model
    assert [node.op_type for node in quantized.graph.node] == ["MatMulBnb4"]
    return quantized


@pytest.mark.parametrize("quant_type", [0, 1])
@pytest.mark.parametrize("k,n,block,a_shape", [(64, 48, 64, (2, 5, 64)), (128, 96, 16, (1, 128)),
                                                (96, 40, 256, (3, 96)), (64, 33, 32, (1, 7, 64))])
def test_matmul_bnb4(ep_devices, quant_type, k, n, block, a_shape):
    """FP4 and NF4 weights as ORT's quantizer writes them (transformers.js's bnb4 models), in blocks over the flat
    [N, K] weight (a block may span rows): the dequantized weight is the CPU EP's, and the product its SGEMM's with
    B transposed and not packed, bit for bit."""
    model = _bnb4_model(k, n, quant_type, block, seed=k + n)
    feeds = {"a": np.random.default_rng(1).standard_normal(a_shape).astype(np.float32)}
    _same(model, feeds)


@pytest.mark.parametrize("a_shape", [(2, 64), (1, 5, 64)])
def test_matmul_bnb4_of_float16(ep_devices, a_shape):
    """float16 activations and absmax (the quantizer applied to a float16 model): the CPU EP's product is float32's,
    A widened and the result rounded once, which vkep computes between two Casts, bit for bit."""
    model = _bnb4_model(64, 48, 1, 32, seed=3, dtype="float16")
    feeds = {"a": np.random.default_rng(4).standard_normal(a_shape).astype(np.float16)}
    _same(model, feeds)


def test_matmul_bnb4_past_the_exact_path(ep_devices):
    """A product past mlas_gemm's bound (2^20 multiply-adds with a constant B) takes matmul.comp's tiles: within
    float32 rounding of the CPU EP."""
    model = _bnb4_model(512, 384, 1, 64)
    feeds = {"a": np.random.default_rng(2).standard_normal((2, 8, 512)).astype(np.float32)}
    _same(model, feeds, exact=False, atol=2e-4, rtol=1e-5)


def test_matmul_bnb4_dequantizes_as_the_cpu_ep(ep_devices):
    """Every code of both tables at absmax values of both signs and an odd N x K (the last byte's low nibble
    unused): with A the identity, the output is the dequantized weight, which must equal the CPU EP's exactly."""
    k, n, block = 15, 7, 16
    codes = np.arange(n * k, dtype=np.uint8) % 16
    flat = np.append(codes, 0)
    packed = ((flat[0::2] << 4) | flat[1::2]).astype(np.uint8)
    absmax = np.array([1.5, -0.25, 3.0e-3, 7.0, 1.0, 0.5, 2.0], np.float32)[:-(-n * k // block)]
    feeds = {"a": np.eye(k, dtype=np.float32)}
    for quant_type in (0, 1):
        model = _one_node("MatMulBnb4", feeds, {"b": packed, "absmax": absmax}, "float32",
                          {"K": k, "N": n, "block_size": block, "quant_type": quant_type})
        _same(model, feeds)


def test_matmul_bnb4_declines_what_the_cpu_ep_does_not_run(ep_devices):
    """A block size the CPU EP has no kernel for (it fails the run), a B fed at run time (vkep packs B) and an
    absmax shorter than N x K's blocks (the CPU EP reads past it) stay on the CPU EP."""
    feeds = {"a": np.ones((2, 16), np.float32)}
    inits = {"b": np.zeros(64, np.uint8), "absmax": np.ones(16, np.float32)}
    odd_block = _one_node("MatMulBnb4", feeds, inits, "float32", {"K": 16, "N": 8, "block_size": 8, "quant_type": 1})
    fed = {**feeds, "b": inits["b"]}
    fed_b = _one_node("MatMulBnb4", fed, {"absmax": np.ones(8, np.float32)}, "float32",
                      {"K": 16, "N": 8, "block_size": 16, "quant_type": 1})
    short = _one_node("MatMulBnb4", feeds, {**inits, "absmax": np.ones(7, np.float32)}, "float32",
                      {"K": 16, "N": 8, "block_size": 16, "quant_type": 1})
    for model in (odd_block, fed_b, short):
        session = runner.vkep_session(model)
        assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}


def test_matmul_bnb4_one_row_of_a_long_k(ep_devices):
    """One row by a weight of K 18,000: the CPU EP's SGEMM reads the dequantized B transposed and unpacked, so each
    element runs MLAS's M1 kernel (k + 23 loop steps as lavapipe counts them, 4 elements an invocation). mlas_gemm
    counted it as a packed B read straight (MatMulBnb4 packs B: its `b_constant`), fewer steps than lavapipe's: the
    sums came out cut short. Counted from how the product reads B, it takes matmul.comp's tiles."""
    model = _bnb4_model(18_000, 4, 1, 64, seed=5)
    feeds = {"a": np.random.default_rng(6).standard_normal((1, 18_000)).astype(np.float32)}
    _same(model, feeds, exact=False, atol=2e-4, rtol=1e-5)
