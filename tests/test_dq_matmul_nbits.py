"""DequantizeLinear (constant 4- or 8-bit weights) -> MatMul (or a Gemm that is one), as ORT 1.32's CPU EP computes
it: its optimizer turns the pair into MatMulNBits at the session's accuracy level (session.qdq_matmulnbits_accuracy_level, 4 by default: A
quantized to int8 per block), 0.5-1% away from the float product the two nodes define. vkep runs such a pair as its
own MatMulNBits kernel (vkep/ort/qdq.py find_weight_only), so it gives the CPU EP's answer; where the CPU EP leaves
the pair as nodes (weights quantized per row, blocks along N or of 8, weights another node reads too, another
accuracy level) vkep runs the nodes too."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

VKEP = "VulkanExecutionProvider"
TYPES = {"int4": (TensorProto.INT4, -8, 8), "uint4": (TensorProto.UINT4, 0, 16), "int8": (TensorProto.INT8, -128, 128),
         "uint8": (TensorProto.UINT8, 0, 256)}


def _model(rng, wtype: str, k: int, n: int, scale_shape: tuple, attrs: dict, zp: bool = True,
           a_shape: tuple = (4,), second_consumer: bool = False) -> bytes:
    elem, lo, hi = TYPES[wtype]
    inits = [helper.make_tensor("w", elem, [k, n], rng.integers(lo, hi, (k, n)).flatten().tolist()),
             numpy_helper.from_array((rng.random(scale_shape) * 0.02 + 0.001).astype(np.float32), "scale")]
    names = ["w", "scale"]
    if zp:
        values = rng.integers(lo + (hi - lo) // 4, hi - (hi - lo) // 4, scale_shape)
        inits.append(helper.make_tensor("zp", elem, list(scale_shape), values.flatten().tolist()))
        names.append("zp")
    nodes = [helper.make_node("DequantizeLinear", names, ["w_float"], **attrs),
             helper.make_node("MatMul", ["a", "w_float"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if second_consumer:
        nodes.append(helper.make_node("Mul", ["w_float", "w_float"], ["w_squared"]))
        outputs.append(helper.make_tensor_value_info("w_squared", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "dq_matmul", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [*a_shape, k])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10).SerializeToString()


def _check(model: bytes, a: np.ndarray, level: str | None = None) -> None:
    """Every node on vkep, and every output as the CPU EP's (the same session config) to float32 rounding."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if level is not None:
        so.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", level)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    if level is not None:  # (vkep reads the level from the session config, as the CPU EP's optimizer does)
        options = runner.session_options(disable_cpu_fallback=True)
        options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", level)
        session = ort.InferenceSession(model, sess_options=options, enable_fallback=0)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    want = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, {"a": a})
    for got, expected in zip(session.run(None, {"a": a}), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-6 * float(np.abs(expected).max()))


@pytest.mark.parametrize("wtype", list(TYPES))
@pytest.mark.parametrize("k,n,scale_of,attrs,zp", [
    (128, 64, lambda k, n: (k // 32, n), {"axis": 0, "block_size": 32}, True),  # blocks along K
    (128, 48, lambda k, n: (k // 16, n), {"axis": 0, "block_size": 16}, False),  # no zero point
    (300, 40, lambda k, n: (3, n), {"axis": 0, "block_size": 128}, True),  # a last block part-filled
    (96, 64, lambda k, n: (), {}, True),  # per tensor: blocks of 32 on the CPU EP
    (100, 64, lambda k, n: (n,), {"axis": 1}, True),  # per column, K not a multiple of 32
])
def test_runs_as_the_cpu_eps_matmulnbits(ep_devices, wtype, k, n, scale_of, attrs, zp):
    rng = np.random.default_rng(k + n)
    a = rng.standard_normal((2, 5, k)).astype(np.float32)
    _check(_model(rng, wtype, k, n, scale_of(k, n), attrs, zp, a_shape=(2, 5)), a)


@pytest.mark.parametrize("case", ["per_row", "block_8", "blocks_along_n", "second_consumer", "shared_weights",
                                  "level_0"])
def test_pairs_the_cpu_ep_leaves_as_nodes(ep_devices, case):
    """The CPU EP keeps these as DequantizeLinear and MatMul (float products): so does vkep."""
    rng = np.random.default_rng(7)
    k, n = 64, 32
    a = rng.standard_normal((4, k)).astype(np.float32)
    shapes = {"per_row": ((k,), {"axis": 0}), "block_8": ((k // 8, n), {"axis": 0, "block_size": 8}),
              "blocks_along_n": ((k, n // 16), {"axis": 1, "block_size": 16})}
    shape, attrs = shapes.get(case, ((k // 32, n), {"axis": 0, "block_size": 32}))
    model = _model(rng, "int8", k, n, shape, attrs, second_consumer=case == "second_consumer")
    if case == "shared_weights":  # (a second DequantizeLinear of the same weights, into a second MatMul)
        proto = onnx.load_from_string(model)
        proto.graph.node.extend([helper.make_node("DequantizeLinear", ["w", "scale", "zp"], ["w_float2"], **attrs),
                                 helper.make_node("MatMul", ["a", "w_float2"], ["y2"])])
        proto.graph.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, None))
        model = proto.SerializeToString()
    _check(model, a, level="0" if case == "level_0" else None)


@pytest.mark.parametrize("case,fused", [("no_bias", True), ("bias", True), ("bias_input", True), ("trans_b", False),
                                        ("alpha", False), ("bias_rows", False)])
def test_gemm(ep_devices, case, fused):
    """Gemm (transA 0, transB 0, alpha 1, a bias [N] with beta 1 or none) is a MatMul to the CPU EP: MatMulNBits with
    the bias; transposed, scaled or with a bias of another shape it stays Gemm. vkep gives the CPU EP's answer."""
    rng = np.random.default_rng(11)
    k, n = 96, 40
    w_shape = [n, k] if case == "trans_b" else [k, n]
    inits = [helper.make_tensor("w", TensorProto.INT8, w_shape, rng.integers(-128, 128, w_shape).flatten().tolist()),
             numpy_helper.from_array((rng.random((n,)) * 0.02 + 0.001).astype(np.float32), "scale")]
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [6, k])]
    feeds = {"a": rng.standard_normal((6, k)).astype(np.float32)}
    names = ["a", "w_float"]
    if case in ("bias", "bias_rows"):
        inits.append(numpy_helper.from_array(rng.standard_normal((6, n) if case == "bias_rows" else (n,))
                                             .astype(np.float32), "bias"))
        names.append("bias")
    elif case == "bias_input":
        inputs.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [n]))
        feeds["bias"] = rng.standard_normal(n).astype(np.float32)
        names.append("bias")
    attrs = {"transB": 1} if case == "trans_b" else {"alpha": 2.0} if case == "alpha" else {}
    nodes = [helper.make_node("DequantizeLinear", ["w", "scale"], ["w_float"], axis=0 if case == "trans_b" else 1),
             helper.make_node("Gemm", names, ["y"], **attrs)]
    graph = helper.make_graph(nodes, "dq_gemm", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10).SerializeToString()
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    got, want = session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * float(np.abs(want).max()))
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    as_nodes = ort.InferenceSession(model, plain, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert fused == (np.abs(want - as_nodes).max() > 1e-3 * np.abs(want).max())  # (the CPU EP's own choice)


@pytest.mark.parametrize("activation", [np.int16, np.uint16])
def test_sixteen_bit_activations(ep_devices, activation):
    """A QDQ MatMul with 16-bit activations (quantize_static with QInt16 / QUInt16): the CPU EP has no QLinear kernel
    for it and fuses the weights' DequantizeLinear and the MatMul into MatMulNBits between the activations' own
    DequantizeLinear and QuantizeLinear; so does vkep."""
    rng = np.random.default_rng(3)
    k, n = 64, 48
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(activation))
    zero = 0 if activation == np.int16 else 30000
    inits = [helper.make_tensor("w", TensorProto.INT8, [k, n], rng.integers(-128, 128, (k, n)).flatten().tolist()),
             numpy_helper.from_array((rng.random((n,)) * 0.02 + 0.001).astype(np.float32), "scale"),
             numpy_helper.from_array(np.array(0.002, np.float32), "a_scale"),
             numpy_helper.from_array(np.array(zero, activation), "a_zp"),
             numpy_helper.from_array(np.array(0.05, np.float32), "y_scale")]
    nodes = [helper.make_node("DequantizeLinear", ["a", "a_scale", "a_zp"], ["a_float"]),
             helper.make_node("DequantizeLinear", ["w", "scale"], ["w_float"], axis=1),
             helper.make_node("MatMul", ["a_float", "w_float"], ["mm"]),
             helper.make_node("QuantizeLinear", ["mm", "y_scale", "a_zp"], ["y"])]
    graph = helper.make_graph(nodes, "qdq16", [helper.make_tensor_value_info("a", elem, [4, k])],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10).SerializeToString()
    a = (zero + rng.integers(-3000, 3000, (4, k))).astype(activation)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    np.testing.assert_array_equal(session.run(None, {"a": a})[0], runner.cpu_session(model).run(None, {"a": a})[0])


@pytest.mark.parametrize("wtype,scale_of,attrs", [
    ("int4", lambda k, n: (k // 32, n), {"axis": 0, "block_size": 32}),
    ("uint8", lambda k, n: (n,), {"axis": 1}),
])
def test_float16_models(ep_devices, wtype, scale_of, attrs):
    """A float16 model's pair: the CPU EP casts A to float32 around the MatMulNBits it makes, and so does vkep
    (qdq.Float32Product)."""
    rng = np.random.default_rng(5)
    k, n = 128, 48
    proto = onnx.load_from_string(_model(rng, wtype, k, n, scale_of(k, n), attrs, a_shape=(2, 7)))
    for t in proto.graph.initializer:
        if t.name == "scale":
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), "scale"))
    proto.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    proto.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    model = proto.SerializeToString()
    a = rng.standard_normal((2, 7, k)).astype(np.float16)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    got, want = session.run(None, {"a": a})[0], runner.cpu_session(model).run(None, {"a": a})[0]
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-3)
