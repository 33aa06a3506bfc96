"""Nodes vkep cannot run are declined at GetCapability (they stay on the CPU EP and give its answer),
never accepted and failed at run time: what the graph tells (ranks, attributes) is enough for these."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner

F, B = TensorProto.FLOAT, TensorProto.BOOL


def _model(node, inputs) -> bytes:
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


CASES = {
    # alternating broadcast dims: nothing collapses below rank 7 (the shader's limit is 6)
    "add_rank7": (helper.make_node("Add", ["a", "b"], ["y"]), [("a", F, [2, 1, 2, 1, 2, 1, 2]), ("b", F, [1, 2, 1, 2, 1, 2, 1])]),
    "max_rank7": (helper.make_node("Max", ["a", "b"], ["y"]), [("a", F, [2, 1, 2, 1, 2, 1, 2]), ("b", F, [1, 2, 1, 2, 1, 2, 1])]),
    "where_rank7": (helper.make_node("Where", ["c", "a", "b"], ["y"]),
                    [("c", B, [2, 1, 2, 1, 2, 1, 2]), ("a", F, [1, 2, 1, 2, 1, 2, 1]), ("b", F, [2, 2, 2, 2, 2, 2, 2])]),
    # a sum over an index of one operand of two
    "einsum_sum_one": (helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bk"),
                       [("a", F, [2, 3, 4]), ("b", F, [2, 4, 5])]),
    # more inputs than the native Compute trampoline passes (256; 64 before 2026-11-28): its run failed before
    # GetCapability declined it
    "concat_257_inputs": (helper.make_node("Concat", [f"x{i}" for i in range(257)], ["y"], axis=0),
                          [(f"x{i}", F, [1, 3]) for i in range(257)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_declined_node_runs_on_the_cpu_ep(ep_devices, name):
    node, inputs = CASES[name]
    model = _model(node, inputs)
    rng = np.random.default_rng(0)
    feeds = {n: (rng.random(s) > 0.5 if t == B else rng.standard_normal(s).astype(np.float32)) for n, t, s in inputs}
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])


def test_rank6_add_still_runs_on_vkep(ep_devices):
    node, inputs = helper.make_node("Add", ["a", "b"], ["y"]), [("a", F, [2, 1, 2, 1, 2, 1]), ("b", F, [1, 2, 1, 2, 1, 2])]
    model = _model(node, inputs)
    feeds = {n: np.full(s, 1.5, np.float32) for n, _, s in inputs}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    np.testing.assert_array_equal(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])


def test_huge_geometry_attribute_is_declined(ep_devices):
    """A stride beyond 32 bits (the shaders' parameters) keeps the node on the CPU EP, which runs it."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[2**33])
    model = _model(node, [("x", F, [1, 1, 8])])
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 8)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0])


def _expand(out_shape) -> bytes:
    graph = helper.make_graph([helper.make_node("Expand", ["x", "s"], ["y"])], "big",
                              [helper.make_tensor_value_info("x", TensorProto.UINT8, [1]),
                               helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, out_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def test_more_elements_than_a_shader_indexes(ep_devices):
    """Past 2^31 - 1 elements a shader's (signed) index wraps below the buffer: a static shape is declined at
    GetCapability; a shape known only at run time fails that run with a clear error (it used to crash the
    process: the allocation past the heap's size was asked for, and the shader wrote below the buffer), and
    the session stays usable."""
    big = 2**31 + 16
    declared = runner.vkep_session(_expand([big]))
    assert {ep for _, _, ep in runner.placement(declared)} == {"CPUExecutionProvider"}
    session = runner.vkep_session(_expand(["n"]))
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    # where the device's heap holds 2 GB (lavapipe's does not), the dispatch refuses the tensor instead
    with pytest.raises(Exception, match=r"vkep: (a tensor of 2,147,483,664 elements .*32-bit signed indices|"
                                        r"\(2147483664,\) has more elements than shaders index|"
                                        r"out of device memory .* larger than its memory heap)"):
        session.run(None, {"x": np.array([7], np.uint8), "s": np.array([big], np.int64)})
    y = session.run(None, {"x": np.array([7], np.uint8), "s": np.array([5], np.int64)})[0]
    assert y.tolist() == [7] * 5


# invalid attributes where the graph does not tell the rank (so ONNX's shape inference cannot reject them):
# vkep fails where and as ORT's CPU EP does, at creation or at run, never an answer
ATTRIBUTE_CASES = {
    "softmax_axis": (helper.make_node("Softmax", ["x"], ["y"], axis=5), ["x"], "axis 5 is not in valid range"),
    "logsoftmax_axis": (helper.make_node("LogSoftmax", ["x"], ["y"], axis=-7), ["x"], "axis -7 is not in valid range"),
    "concat_axis": (helper.make_node("Concat", ["x", "x"], ["y"], axis=7), ["x"], "axis 7 is not in valid range"),
    "gather_axis": (helper.make_node("Gather", ["x", "i"], ["y"], axis=3), ["x", "i"], "axis 3 is not in valid range"),
    "flatten_axis": (helper.make_node("Flatten", ["x"], ["y"], axis=9), ["x"], "axis 9 is not in valid range"),
    "transpose_perm": (helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5]), ["x"], "invalid attribute perm"),
    "lrn_size": (helper.make_node("LRN", ["x"], ["y"], size=0), ["x"], "invalid attribute size=0"),
}


def _phase_of_failure(make, feeds) -> tuple[str, str]:
    try:
        session = make()
    except Exception as exc:  # noqa: BLE001
        return "creation", str(exc)
    try:
        session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        return "run", str(exc)
    return "none", ""


@pytest.mark.parametrize("name", list(ATTRIBUTE_CASES))
def test_invalid_attribute_fails_as_on_the_cpu_ep(ep_devices, name):
    node, names, message = ATTRIBUTE_CASES[name]
    types = {"x": F, "i": TensorProto.INT64}
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info(n, types[n], None) for n in names],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    feeds = {"x": np.ones((1, 2, 3, 3) if name == "lrn_size" else (2, 3), np.float32), "i": np.array([1, 0])}
    feeds = {n: feeds[n] for n in names}
    cpu_phase, _ = _phase_of_failure(lambda: runner.cpu_session(model), feeds)
    vkep_phase, text = _phase_of_failure(lambda: runner.vkep_session(model), feeds)
    assert cpu_phase != "none" and vkep_phase == cpu_phase, (cpu_phase, vkep_phase, text)
    assert message in text


def test_tensor_larger_than_the_device_can_allocate_is_declined(ep_devices):
    """A node whose output would not fit one allocation of the device (lavapipe: its 2 GiB heap) stays on the
    CPU EP, where it ran out of device memory at run time before; the nodes around it that fit stay on vkep."""
    from onnx import numpy_helper

    from vkep.gpu.device import open_device

    elements = open_device(0).memory.largest_block() // 4 + 64
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Expand", ["r", "shape"], ["big"]),
             helper.make_node("Relu", ["x"], ["y"])]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", F, [1])],
                              [helper.make_tensor_value_info("big", F, None), helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(np.array([elements], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    placed = {op: ep for _, op, ep in runner.placement(runner.vkep_session(model.SerializeToString()))}
    assert placed == {"Relu": "VulkanExecutionProvider", "Expand": "CPUExecutionProvider"}, placed


@pytest.mark.parametrize("op, computes", [("Max", True), ("Min", True), ("Sum", True), ("Clip", True), ("Mod", True),
                                          ("Sin", True), ("Cos", True), ("CumSum", True), ("Einsum", True),
                                          ("LogSoftmax", True), ("Unique", True),
                                          ("Shrink", True), ("LpNormalization", True), ("Where", False),
                                          ("Dropout", False), ("LayerNormalization", True),
                                          ("BatchNormalization", True), ("MaxPool", True),
                                          ("ScatterElements-add", True), ("ScatterElements-max", True),
                                          ("ScatterElements", False), ("RandomUniformLike", True),
                                          ("RandomNormalLike", True)])
def test_float64_ops_decline_without_shader_float64_where_they_compute(op, computes):
    """The float64 ops added on the f64b and f64c branches: those computing in double (FLOAT64 variants) decline
    float64 on a device without shaderFloat64; Where, Dropout and ScatterElements without a reduction only move
    float64 (as int64) and run there."""
    from types import SimpleNamespace

    from vkep.kernels import manifest
    from vkep.kernels.base import implementation

    op, _, reduction = op.partition("-")
    spec = [s for s in manifest.load() if s.op == op and s.domain in ("", "ai.onnx")][-1]
    kind = implementation(spec)
    attrs = {"fmod": 1} if op == "Mod" else {"reduction": reduction} if reduction else {}
    without, with_ = SimpleNamespace(features={}), SimpleNamespace(features={"shaderFloat64": True})
    types = (["bool"] if op == "Where" else []) + ["float64", "float64"]
    assert ("shaderFloat64" in (kind.declines_on(without, attrs, types) or "")) == computes
    assert kind.declines_on(with_, attrs, types) is None
