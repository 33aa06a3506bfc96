"""QDQ groups (vkep/ort/qdq.py): DequantizeLinear -> op -> QuantizeLinear claimed as one fused node where ORT's CPU
EP fuses the same nodes into a QLinear kernel, and run by vkep's kernel of that QLinear op: the same 8-bit
values as the CPU EP, every node on vkep in ORT's placement record, one kernel execution a group. Where the
CPU EP's conditions do not hold the nodes stay nodes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import vkep
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
        self.inits += [_const(f"{source}_scale", scale), _const(f"{source}_zp", zp)]
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


def _conv(relu: bool = False) -> Builder:
    b = Builder()
    x = b.activation("x", [1, 16, 28, 28], 0.02, 131)
    w_scale = RNG.uniform(0.002, 0.01, 32).astype(np.float32)
    w = b.weight("w", RNG.integers(-64, 64, (32, 16, 3, 3)).astype(np.int8), w_scale, 0)
    bias = b.bias("b", RNG.integers(-3000, 3000, 32), np.float32(0.02) * w_scale)  # (x_scale * w_scale)
    b.nodes.append(helper.make_node("Conv", [x, w, bias], ["conv"], pads=[1, 1, 1, 1]))
    if relu:
        b.nodes.append(helper.make_node("Relu", ["conv"], ["relu"]))
    b.q("relu" if relu else "conv", "y", 0.35, 0)
    return b


def _matmul() -> Builder:
    b = Builder()
    a = b.activation("a", [2, 24, 128], 0.03, 120)
    w = b.weight("w", RNG.integers(-64, 64, (128, 96)).astype(np.int8), RNG.uniform(0.002, 0.01, 96), 1)
    b.nodes.append(helper.make_node("MatMul", [a, w], ["mm"]))
    b.q("mm", "y", 0.5, 125)
    return b


CASES = {"conv": _conv, "conv_relu": lambda: _conv(relu=True), "matmul": _matmul}


def _executions(session, feeds: dict) -> tuple[list, int]:
    """(outputs, kernel executions of the second run: nodes, or fused groups)."""
    session.run(None, feeds)
    vkep.reset_stats()
    out = session.run(None, feeds)
    stats = vkep.stats()["process"]
    return out, stats["nodes_replayed_natively"] + stats["nodes_python_path"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_qdq_group_runs_as_its_qlinear_kernel_and_equals_the_cpu_ep(ep_devices, case):
    b = CASES[case]()
    model = b.model(["y"])
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for *_, ep in placed} == {"VulkanExecutionProvider"} and len(placed) == len(b.nodes)
    got, executions = _executions(session, b.feeds)
    assert executions == 1, executions
    want = runner.cpu_session(model).run(None, b.feeds)
    np.testing.assert_array_equal(got[0], want[0])
