"""Edge cases of the first op set (broadcasting, batch broadcast, transposes, axes) against the CPU EP."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _check(model, feeds, dtype=np.float32):
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)
    for _ in range(2):
        for got, w in zip(session.run(None, feeds), want, strict=True):
            assert got.shape == w.shape
            np.testing.assert_allclose(got, w, **tolerance(dtype))


RNG = np.random.default_rng(7)


def _rand(*shape, dtype=np.float32):
    return RNG.uniform(-2, 2, size=shape).astype(dtype)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("sa,sb", [
    ((), (3, 4)), ((3, 4), ()), ((1,), (5,)), ((2, 1, 4), (3, 1)), ((4,), (2, 3, 4)), ((2, 3, 4, 5), (1, 3, 1, 5)),
    ((1, 1, 1), (1, 1, 1)), ((0, 3), (1, 3)), ((2, 1, 3, 1, 2), (1, 4, 1, 5, 1)),
])
def test_binary_broadcasting(ep_devices, op, sa, sb):
    model = _model([helper.make_node(op, ["a", "b"], ["y"])], [("a", F32, list(sa)), ("b", F32, list(sb))],
                   [("y", F32)])
    b = _rand(*sb)
    if op == "Div":
        b = np.where(np.abs(b) < 0.25, 1.0, b).astype(np.float32)
    _check(model, {"a": _rand(*sa), "b": b})


@pytest.mark.parametrize("sa,sb", [
    ((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)), ((2, 4, 5), (5, 3)), ((4, 5), (2, 5, 3)),
    ((2, 1, 4, 5), (3, 5, 6)), ((2, 3, 4, 5), (2, 3, 5, 6)), ((1, 17, 33), (33, 19)), ((3, 1, 7), (1, 7, 2)),
])
def test_matmul_shapes(ep_devices, sa, sb):
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", F32, list(sa)), ("b", F32, list(sb))],
                   [("y", F32)])
    _check(model, {"a": _rand(*sa), "b": _rand(*sb)})


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (), (1,), (6,), (5, 1), (5, 6)])
def test_gemm(ep_devices, trans_a, trans_b, c_shape):
    a_shape = (7, 5) if trans_a else (5, 7)
    b_shape = (6, 7) if trans_b else (7, 6)
    inputs = [("a", F32, list(a_shape)), ("b", F32, list(b_shape))]
    names = ["a", "b"]
    feeds = {"a": _rand(*a_shape), "b": _rand(*b_shape)}
    if c_shape is not None:
        inputs.append(("c", F32, list(c_shape)))
        names.append("c")
        feeds["c"] = _rand(*c_shape)
    node = helper.make_node("Gemm", names, ["y"], alpha=0.7, beta=1.3, transA=trans_a, transB=trans_b)
    _check(_model([node], inputs, [("y", F32)]), feeds)


def test_gemm_with_constant_weights(ep_devices):
    w = numpy_helper.from_array(_rand(10, 8), "w")
    bias = numpy_helper.from_array(_rand(10), "bias")
    node = helper.make_node("Gemm", ["x", "w", "bias"], ["y"], transB=1)
    _check(_model([node], [("x", F32, [3, 8])], [("y", F32)], [w, bias]), {"x": _rand(3, 8)})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [-3, -1, 0, 1, 2])
def test_softmax_axes(ep_devices, opset, axis):
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [("x", F32, [3, 4, 70])], [("y", F32)],
                   opset=opset)
    _check(model, {"x": _rand(3, 4, 70) * 10})


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh"])
def test_unary_extremes(ep_devices, op):
    x = np.array([-1e4, -88.0, -20.0, -1.0, -0.0, 0.0, 1e-8, 1.0, 20.0, 88.0, 1e4], np.float32)
    _check(_model([helper.make_node(op, ["x"], ["y"])], [("x", F32, [11])], [("y", F32)]), {"x": x})


def test_views_inside_a_graph_copy_nothing(ep_devices):
    import vkep

    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("Unsqueeze", ["f", "axes"], ["u"]),
             helper.make_node("Squeeze", ["u", "axes"], ["s"]),
             helper.make_node("Flatten", ["s"], ["fl"], axis=1),
             helper.make_node("Identity", ["fl"], ["i"]),
             helper.make_node("Sigmoid", ["i"], ["y"])]
    model = _model(nodes, [("x", F32, [2, 3, 4])], [("y", F32)], [shape, axes])
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    feeds = {"x": _rand(2, 3, 4)}
    session.run(None, feeds)
    before = vkep.stats()[0]["device_copies"]
    got = session.run(None, feeds)[0]
    assert vkep.stats()[0]["device_copies"] == before, "a view copied bytes although ORT aliased it"
    np.testing.assert_allclose(got, runner.cpu_session(model).run(None, feeds)[0], **tolerance(np.float32))


def test_view_as_graph_output_copies(ep_devices):
    shape = numpy_helper.from_array(np.array([6, 4], np.int64), "shape")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["y"])]
    _check(_model(nodes, [("x", F32, [2, 3, 4])], [("y", F32), ], [shape]), {"x": _rand(2, 3, 4)})


@pytest.mark.parametrize("axis", [-3, -2, -1, 0, 1, 3])
def test_flatten_axes(ep_devices, axis):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Flatten", ["r"], ["f"], axis=axis),
             helper.make_node("Sigmoid", ["f"], ["y"])]
    _check(_model(nodes, [("x", F32, [2, 3, 4])], [("y", F32)]), {"x": _rand(2, 3, 4)})
