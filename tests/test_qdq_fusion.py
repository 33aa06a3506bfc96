"""QDQ groups (vkep/ort/qdq.py): DequantizeLinear -> op -> QuantizeLinear claimed as one fused node where ORT's CPU
EP fuses the same nodes into a QLinear kernel, and run by vkep's kernel of that QLinear op: the same 8-bit
values as the CPU EP, every node on vkep in ORT's placement record, one kernel execution a group. Where the
CPU EP's conditions do not hold the nodes stay nodes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import cpu_ops, kernel_executions, quantize_static_model
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

RNG = np.random.default_rng(15)
U8, I8, F32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


class Builder:
    """A QDQ graph as ORT's quantizer writes one: 8-bit graph inputs, DQ before every op input, Q after."""

    def __init__(self):
        self.nodes, self.inits, self.inputs, self.feeds = [], [], [], {}

    def activation(self, name: str, shape, scale: float, zp: int, dtype=np.uint8) -> str:
        """A graph input of 8-bit values and its DQ; returns the DQ's output."""
        info = np.iinfo(dtype)
        self.feeds[name] = RNG.integers(info.min, info.max + 1, shape).astype(dtype)
        self.inputs.append(helper.make_tensor_value_info(name, U8 if dtype == np.uint8 else I8, shape))
        return self.dq(name, np.float32(scale), dtype(zp))

    def dq(self, source: str, scale, zp, axis: int | None = None) -> str:
        out = f"{source}_dq"
        have = {t.name for t in self.inits}  # (a Q's parameters serve the DQ after it)
        self.inits += [t for t in (_const(f"{source}_scale", scale), _const(f"{source}_zp", zp)) if t.name not in have]
        attrs = {} if axis is None else {"axis": axis}
        self.nodes.append(helper.make_node("DequantizeLinear", [source, f"{source}_scale", f"{source}_zp"], [out],
                                           **attrs))
        return out

    def weight(self, name: str, values: np.ndarray, scales: np.ndarray, axis: int) -> str:
        """A constant int8 weight (symmetric: zero points 0), per channel along `axis`, and its DQ."""
        self.inits.append(_const(name, values))
        return self.dq(name, scales.astype(np.float32), np.zeros(scales.shape, values.dtype), axis)

    def bias(self, name: str, values: np.ndarray, scales: np.ndarray) -> str:
        self.inits.append(_const(name, values.astype(np.int32)))
        return self.dq(name, scales.astype(np.float32), np.zeros(scales.shape, np.int32), 0)

    def q(self, source: str, out: str, scale: float, zp: int, dtype=np.uint8) -> str:
        self.inits += [_const(f"{out}_scale", np.float32(scale)), _const(f"{out}_zp", dtype(zp))]
        self.nodes.append(helper.make_node("QuantizeLinear", [source, f"{out}_scale", f"{out}_zp"], [out]))
        return out

    def model(self, outputs: list[str], opset: int = 21) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
        graph = helper.make_graph(self.nodes, "qdq", self.inputs, outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
        return onnx.shape_inference.infer_shapes(model)


def _conv(relu: bool = False, clip: bool = False) -> Builder:
    """A Conv (its bias DQ'd with x_scale * w_scale, as the quantizer writes it), with a Relu or a Clip(0, 6)
    after it that the Q makes redundant (the CPU EP then fuses it too)."""
    b = Builder()
    x = b.activation("x", [1, 16, 28, 28], 0.02, 131)
    w_scale = RNG.uniform(0.002, 0.01, 32).astype(np.float32)
    w = b.weight("w", RNG.integers(-64, 64, (32, 16, 3, 3)).astype(np.int8), w_scale, 0)
    bias = b.bias("b", RNG.integers(-3000, 3000, 32), np.float32(0.02) * w_scale)  # (x_scale * w_scale)
    b.nodes.append(helper.make_node("Conv", [x, w, bias], ["conv"], pads=[1, 1, 1, 1]))
    if relu:
        b.nodes.append(helper.make_node("Relu", ["conv"], ["relu"]))
    if clip:
        b.inits += [_const("lo", np.float32(0)), _const("hi", np.float32(6))]
        b.nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["relu"]))
    b.q("relu" if relu or clip else "conv", "y", 6 / 255 if clip else 0.35, 0)
    return b


def _matmul(with_q: bool = True, low: int = -64) -> Builder:
    """Without a Q the CPU EP makes MatMulIntegerToFloat of it; `low`: the weights' least value (-127: full
    range, whose uint8 x int8 products it saturates on x86-64 without VNNI)."""
    b = Builder()
    a = b.activation("a", [2, 24, 128], 0.03, 120)
    w = b.weight("w", RNG.integers(low, -low, (128, 96)).astype(np.int8), RNG.uniform(0.002, 0.01, 96), 1)
    b.nodes.append(helper.make_node("MatMul", [a, w], ["mm" if with_q else "y"]))
    if with_q:
        b.q("mm", "y", 0.5, 125)
    return b


def _gemm(with_q: bool = True) -> Builder:
    b = Builder()
    a = b.activation("a", [8, 256], 0.03, 120)
    w_scale = RNG.uniform(0.002, 0.01, 64).astype(np.float32)
    w = b.weight("w", RNG.integers(-64, 64, (64, 256)).astype(np.int8), w_scale, 0)  # (transB: [N, K])
    bias = b.bias("b", RNG.integers(-3000, 3000, 64), np.float32(0.03) * w_scale)
    b.nodes.append(helper.make_node("Gemm", [a, w, bias], ["gemm" if with_q else "y"], transB=1))
    if with_q:
        b.q("gemm", "y", 0.5, 125)
    return b


def _conv_clip_without_max() -> Builder:
    """Clip(0) with no max before the Q: redundant too (the CPU EP fuses it)."""
    b = _conv(clip=True)
    clip = next(n for n in b.nodes if n.op_type == "Clip")
    del clip.input[2]
    b.inits = [t for t in b.inits if t.name != "hi"]
    return b


def _binary(op: str, dtype=np.uint8) -> Builder:
    b = Builder()
    zp = 0 if dtype == np.int8 else 128
    x = b.activation("x", [1, 32, 14, 14], 0.04, zp + 3, dtype)
    g = b.activation("g", [1, 32, 1, 1], 0.02 if op == "Add" else 0.004, zp - 5, dtype)
    b.nodes.append(helper.make_node(op, [x, g], ["op"]))
    b.q("op", "y", 0.05 if op == "Add" else 0.01, zp + 1, dtype)
    return b


def _mul_by_constant() -> Builder:
    """The second operand a quantized constant (as the quantizer writes a Hardswish's 1/6)."""
    b = Builder()
    x = b.activation("x", [1, 32, 14, 14], 0.04, 128)
    b.inits.append(_const("c", np.uint8(200)))
    c = b.dq("c", np.float32(1 / 1200), np.uint8(0))
    b.nodes.append(helper.make_node("Mul", [x, c], ["op"]))
    b.q("op", "y", 0.008, 128)
    return b


def _unary(op: str, shape=(1, 64, 20, 20), **attrs) -> Builder:
    b = Builder()
    x = b.activation("x", list(shape), 0.05, 128)
    b.nodes.append(helper.make_node(op, [x], ["op"], **attrs))
    out_scale, out_zp = {"Sigmoid": (1 / 256, 0), "Softmax": (1 / 256, 0)}.get(op, (0.03, 120))
    b.q("op", "y", out_scale, out_zp)
    return b


def _concat(count: int = 3) -> Builder:
    """`count` inputs: six make 20 inputs of QLinearConcat; the fused node takes the six tensors alone."""
    b = Builder()
    params = [(16, 0.02, 128), (8, 0.05, 100), (24, 0.03, 140), (4, 0.01, 0), (8, 0.04, 255), (12, 0.06, 90)]
    xs = [b.activation(f"x{k}", [1, c, 8, 8], scale, zp) for k, (c, scale, zp) in enumerate(params[:count])]
    b.nodes.append(helper.make_node("Concat", xs, ["op"], axis=1))
    b.q("op", "y", 0.04, 128)
    return b


CASES = {"conv": _conv, "conv_relu": lambda: _conv(relu=True), "conv_clip6": lambda: _conv(clip=True),
         "conv_clip_without_max": _conv_clip_without_max, "matmul": _matmul, "gemm": _gemm,
         "matmul_float_output": lambda: _matmul(with_q=False),
         "matmul_float_output_full_range": lambda: _matmul(with_q=False, low=-127),
         "gemm_float_output": lambda: _gemm(with_q=False), "add": lambda: _binary("Add"),
         "add_int8": lambda: _binary("Add", np.int8), "mul": lambda: _binary("Mul"),
         "average_pool": lambda: _unary("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         "global_average_pool": lambda: _unary("GlobalAveragePool", (1, 64, 7, 7)),
         "sigmoid": lambda: _unary("Sigmoid"), "leaky_relu": lambda: _unary("LeakyRelu", alpha=0.1),
         "softmax": lambda: _unary("Softmax", (1, 10, 64), axis=-1), "concat": _concat,
         "concat_six": lambda: _concat(6), "mul_by_constant": _mul_by_constant}
# the QLinear op ORT's CPU EP makes of each case
QLINEAR = {"conv": "QLinearConv", "conv_relu": "QLinearConv", "conv_clip6": "QLinearConv", "conv_clip_without_max": "QLinearConv",
           "matmul": "QLinearMatMul", "gemm": "QGemm", "matmul_float_output": "MatMulIntegerToFloat",
           "matmul_float_output_full_range": "MatMulIntegerToFloat",
           "gemm_float_output": "QGemm", "add": "QLinearAdd", "add_int8": "QLinearAdd", "mul": "QLinearMul",
           "average_pool": "QLinearAveragePool", "global_average_pool": "QLinearGlobalAveragePool",
           "sigmoid": "QLinearSigmoid", "leaky_relu": "QLinearLeakyRelu", "softmax": "QLinearSoftmax",
           "concat": "QLinearConcat", "concat_six": "QLinearConcat", "mul_by_constant": "QLinearMul"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_qdq_group_runs_as_its_qlinear_kernel_and_equals_the_cpu_ep(ep_devices, case, tmp_path):
    b = CASES[case]()
    model = b.model(["y"])
    assert QLINEAR[case] in cpu_ops(model, tmp_path)  # (the CPU EP fuses these nodes)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for *_, ep in placed} == {"VulkanExecutionProvider"} and len(placed) == len(b.nodes)
    got, executions = kernel_executions(session, b.feeds)
    assert executions == 1, executions
    want = runner.cpu_session(model).run(None, b.feeds)
    np.testing.assert_array_equal(got[0], want[0])


def _conv_bias_scale_off() -> Builder:
    """A bias DQ whose scale is 5% off x_scale * w_scale: ORT 1.32's CPU EP does not fuse it."""
    b = _conv()
    scale = next(t for t in b.inits if t.name == "b_scale")
    scale.CopyFrom(_const("b_scale", numpy_helper.to_array(scale) * np.float32(1.05)))
    return b


def _conv_read_twice() -> Builder:
    """The Conv's value is a graph output besides its Q's input."""
    return _conv()


def _matmul_int8() -> Builder:
    """int8 activations: the CPU EP fuses no MatMul of them on x86-64 (QDQIsInt8Allowed)."""
    b = Builder()
    a = b.activation("a", [2, 24, 128], 0.03, -8, np.int8)
    w = b.weight("w", RNG.integers(-64, 64, (128, 96)).astype(np.int8), RNG.uniform(0.002, 0.01, 96), 1)
    b.nodes.append(helper.make_node("MatMul", [a, w], ["mm"]))
    b.q("mm", "y", 0.5, -3, np.int8)
    return b


def _conv_clip_narrower() -> Builder:
    """Clip(0, 4) before a Q whose range reaches 6: the Clip is no redundant one, and the CPU EP fuses nothing."""
    b = _conv(clip=True)
    next(t for t in b.inits if t.name == "hi").CopyFrom(_const("hi", np.float32(4)))
    return b


def _gemm_alpha_with_bias() -> Builder:
    """alpha 0.5 and a bias: ORT 1.32's CPU EP does not fuse it (QGemm would scale the bias by alpha too)."""
    b = _gemm()
    b.nodes[-2].attribute.append(helper.make_attribute("alpha", 0.5))
    return b


UNFUSED = {"gemm_alpha_with_bias": (_gemm_alpha_with_bias, ["y"]), "conv_clip_narrower": (_conv_clip_narrower, ["y"]),
           "conv_bias_scale_off": (_conv_bias_scale_off, ["y"]), "conv_read_twice": (_conv_read_twice, ["y", "conv"]),
           "matmul_int8_activations": (_matmul_int8, ["y"])}


@pytest.mark.parametrize("case", sorted(UNFUSED))
def test_groups_the_cpu_ep_does_not_fuse_stay_nodes(ep_devices, case, tmp_path):
    make, outputs = UNFUSED[case]
    b = make()
    model = b.model(outputs)
    assert not {"QLinearConv", "QLinearMatMul", "QGemm"} & set(cpu_ops(model, tmp_path))
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    got, executions = kernel_executions(session, b.feeds)
    assert executions == len(b.nodes), executions
    for g, w in zip(got, runner.cpu_session(model).run(None, b.feeds), strict=True):
        # (float Convs and MatMuls on both sides: a sum rounded apart may move an 8-bit value by one)
        np.testing.assert_allclose(g.astype(np.float64), w, atol=1 if g.dtype != np.float32 else 1e-4, rtol=1e-5)


def _small_cnn() -> onnx.ModelProto:
    """A float CNN of the ops ORT's quantizer turns into QDQ groups: Conv + Relu, MaxPool, a residual Add,
    AveragePool, GlobalAveragePool, Gemm, Softmax."""
    rng = np.random.default_rng(7)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32),
                                       name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["c3", "p1"], ["a1"]),
        helper.make_node("AveragePool", ["a1"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["ap"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w4", "b4"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    inits = [w("w1", 16, 3, 3, 3), w("b1", 16), w("w2", 16, 16, 3, 3), w("b2", 16), w("w3", 16, 16, 1, 1),
             w("b3", 16), w("w4", 10, 16), w("b4", 10)]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", F32, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", F32, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("options", ["reduce_range", "defaults", "per_channel"])
def test_a_cnn_quantized_by_orts_quantizer_equals_the_cpu_ep(ep_devices, tmp_path, options):
    """quantize_static (QDQ) of a small CNN three ways: per-channel int8 weights, uint8 activations and reduce_range
    (7-bit weights); quantize_static's defaults (int8 activations, which the CPU EP computes as uint8, and int8
    weights per tensor); and the defaults with per-channel weights, whose full-range products the CPU EP
    saturates on x86-64 without VNNI (so does vkep there: this case fails without). Every node on vkep, its QDQ
    groups run as QLinear kernels, outputs equal to the CPU EP's."""
    from onnxruntime.quantization import QuantType

    rng = np.random.default_rng(1)
    batches = [{"x": rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)} for _ in range(8)]
    kwargs = {"reduce_range": {"per_channel": True, "activation_type": QuantType.QUInt8, "reduce_range": True},
              "defaults": {}, "per_channel": {"per_channel": True}}[options]
    model = quantize_static_model(_small_cnn(), batches, tmp_path, **kwargs)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for *_, ep in placed} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for seed in range(3):
        feeds = {"x": np.random.default_rng(100 + seed).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)}
        got, executions = kernel_executions(session, feeds)
        np.testing.assert_array_equal(got[0], cpu.run(None, feeds)[0])
    qlinear = [op for op in cpu_ops(model, tmp_path) if op.startswith("QLinear") or op == "QGemm"]
    # (each QDQ group one execution: the nodes left are the DQ of the input's Q, MaxPool's, Flatten's, ...)
    assert executions <= len(placed) - 3 * len(qlinear), (executions, len(placed), qlinear)


def test_int8_activations_fuse_where_the_cpu_ep_makes_them_uint8(ep_devices, tmp_path):
    """int8 Q -> DQ pairs with one consumer become uint8 pairs on the CPU EP (QDQS8ToU8Transformer, x86-64), so
    a Conv between such pairs is fused there though its int8 activations alone would not be: vkep fuses it too
    and runs QLinearConv over the int8 values (the same integers, shifted with their zero points)."""
    b = Builder()
    b.inputs.append(helper.make_tensor_value_info("x", F32, [1, 16, 28, 28]))
    b.feeds["x"] = RNG.uniform(-1.5, 1.5, (1, 16, 28, 28)).astype(np.float32)
    xq = b.q("x", "xq", 0.012, 3, np.int8)
    x = b.dq(xq, np.float32(0.012), np.int8(3))
    w_scale = RNG.uniform(0.002, 0.01, 32).astype(np.float32)
    w = b.weight("w", RNG.integers(-64, 64, (32, 16, 3, 3)).astype(np.int8), w_scale, 0)
    bias = b.bias("b", RNG.integers(-3000, 3000, 32), np.float32(0.012) * w_scale)
    b.nodes.append(helper.make_node("Conv", [x, w, bias], ["conv"], pads=[1, 1, 1, 1]))
    b.dq(b.q("conv", "yq", 0.2, -7, np.int8), np.float32(0.2), np.int8(-7))
    model = b.model(["yq_dq"])
    assert "QLinearConv" in cpu_ops(model, tmp_path)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    got, executions = kernel_executions(session, b.feeds)
    assert executions == 3, executions  # (Q, the group, DQ)
    np.testing.assert_array_equal(got[0], runner.cpu_session(model).run(None, b.feeds)[0])


@pytest.mark.parametrize("op", ["Add", "Mul", "AveragePool"])
def test_int8_groups_compute_as_the_uint8_the_cpu_ep_makes_of_them(ep_devices, op, tmp_path):
    """Between int8 Q -> DQ pairs the CPU EP runs QLinearAdd / QLinearMul / QLinearAveragePool on the values + 128
    (zero points + 128), and their float steps see the shift: one value of these 200,704 (Add) rounds otherwise
    unless vkep computes them so too (qlinear_binary.comp's and qlinear_pool.comp's SIGNED 2; for Mul and the
    pool no value here does, but the shifted path must give the CPU EP's values all the same)."""
    b, rng = Builder(), np.random.default_rng(1)
    shape = [1, 64, 56, 56]
    names = ["x", "g"] if op != "AveragePool" else ["x"]
    for name in names:
        b.inputs.append(helper.make_tensor_value_info(name, F32, shape))
        b.feeds[name] = rng.uniform(-2, 2, shape).astype(np.float32)
    params = [(rng.uniform(*scales), int(rng.integers(-20, 20))) for scales in ((0.005, 0.03),) * 2 + ((0.01, 0.05),)]
    ins = [b.dq(b.q(name, f"{name}q", scale, zp, np.int8), np.float32(scale), np.int8(zp))
           for name, (scale, zp) in zip(names, params, strict=False)]
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]} if op == "AveragePool" else {}
    b.nodes.append(helper.make_node(op, ins, ["op"], **attrs))
    scale, zp = params[2]
    b.dq(b.q("op", "yq", scale, zp, np.int8), np.float32(scale), np.int8(zp))
    model = b.model(["yq_dq"])
    assert f"QLinear{op}" in cpu_ops(model, tmp_path)
    got, executions = kernel_executions(runner.vkep_session(model, disable_cpu_fallback=True), b.feeds)
    assert executions == len(names) + 2, executions  # (the inputs' Qs, the group, the DQ)
    np.testing.assert_array_equal(got[0], runner.cpu_session(model).run(None, b.feeds)[0])


def _huge_scale_group(op: str, in_scale: float, out_scale: float) -> tuple[onnx.ModelProto, dict]:
    """x -> Q -> DQ -> op -> Q (uint8, per tensor), as ORT's quantize_static writes an attention's scores + mask
    where the mask holds float32's lowest (scales of 1.3e36: survey 7)."""
    c = lambda name, v, t: numpy_helper.from_array(np.array(v, t), name)  # noqa: E731
    inits = [c("xs", in_scale, np.float32), c("xz", 128, np.uint8), c("ys", out_scale, np.float32),
             c("yz", 128, np.uint8)]
    mid = {"Add": [helper.make_node("Add", ["xd", "xd"], ["m"])],
           "Mul": [helper.make_node("Mul", ["xd", "xd"], ["m"])],
           "Sigmoid": [helper.make_node("Sigmoid", ["xd"], ["m"])],
           "Concat": [helper.make_node("Concat", ["xd", "xd"], ["m"], axis=1)],
           "LeakyRelu": [helper.make_node("LeakyRelu", ["xd"], ["m"], alpha=0.1)],
           "MatMul": [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
                      helper.make_node("MatMul", ["xd", "wd"], ["m"])]}[op]
    if op == "MatMul":
        inits += [numpy_helper.from_array(RNG.integers(-100, 100, (16, 8)).astype(np.int8), "wq"),
                  c("ws", 0.01, np.float32), c("wz", 0, np.int8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]), *mid,
             helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["yq"])]
    graph = helper.make_graph(nodes, "huge", [helper.make_tensor_value_info("x", F32, [2, 16])],
                              [helper.make_tensor_value_info("yq", U8, None)], inits)
    x = (RNG.integers(-120, 120, (2, 16)) * in_scale).astype(np.float32)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9), {"x": x}


@pytest.mark.parametrize("op", ["Add", "Mul", "Sigmoid", "Concat", "LeakyRelu", "MatMul"])
@pytest.mark.parametrize("scales", [(1e36, 1e36), (0.01, 1e36), (1e36, 0.01), (1e35, 9e34)])
def test_huge_scales_give_the_cpu_eps_bytes(ep_devices, op, scales):
    """Scales (or their quotients) past FLT_MAX / 4097, where precise.glsl's product split overflowed and the fused
    kernels wrote NaN clamped to 0 (Llama, GPT-2, T5 quantized by quantize_static had wrong logits): the CPU EP's
    bytes."""
    model, feeds = _huge_scale_group(op, *scales)
    session = runner.vkep_session(model)
    assert "VulkanExecutionProvider" in {ep for *_, ep in runner.placement(session)}
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])
