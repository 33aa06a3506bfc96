"""OneHot on vkep against ORT's CPU EP: every axis, negative and out-of-range indices, float indices and depth
(truncated), the type combinations ORT's CPU EP has, a depth fed at run time, empty indices, and a depth that
is not positive (both EPs fail the run)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from test_reduce import check_node

from vkep import runner

INDICES = np.array([[0, 3, -1, 4], [-5, 5, 2, -6], [1, 1, -2, 9]])  # (depth 5: -5..4 hit, the others miss)


def _consts(depth, values, depth_type="int64"):
    return {"depth": np.array(depth, depth_type), "values": np.array(values)}


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -3])
def test_axes_and_indices_out_of_range(ep_devices, axis):
    check_node("OneHot", {"indices": INDICES}, 11, consts=_consts(5, np.float32([-1.5, 2.25])),
               outputs=[("y", np.float32)], axis=axis)


@pytest.mark.parametrize("indices,depth,values", [
    ("float32", "float32", "float32"), ("float32", "float16", "float16"), ("int32", "int32", "float32"),
    ("int64", "float32", "int32"), ("float16", "float16", "float16"), ("int64", "int32", "float16")])
def test_type_combinations(ep_devices, indices, depth, values):
    """Each against the CPU EP in its own types (its float16 OneHot included)."""
    x = (INDICES + 0.75).astype(indices) if indices.startswith("float") else INDICES.astype(indices)
    depth_value = np.array(4.6 if depth.startswith("float") else 5, depth)
    node = helper.make_node("OneHot", ["indices", "depth", "values"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("indices", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(values)), None)],
        [numpy_helper.from_array(depth_value, "depth"), numpy_helper.from_array(np.array([3, -7], values), "values")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=10)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    got, want = session.run(None, {"indices": x})[0], runner.cpu_session(model).run(None, {"indices": x})[0]
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_empty_indices(ep_devices):
    check_node("OneHot", {"indices": np.zeros((0, 3), np.int64)}, 11, consts=_consts(4, np.float32([0, 1])),
               outputs=[("y", np.float32)])


def _fed_depth_model():
    node = helper.make_node("OneHot", ["indices", "depth", "values"], ["y"], axis=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("indices", 7, [3, 4]),
                                            helper.make_tensor_value_info("depth", 7, [])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(np.float32([0.5, 9]), "values")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=10)


def test_a_depth_fed_at_run_time_and_one_that_is_not_positive(ep_devices):
    model = _fed_depth_model()
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for depth in (5, 2, 11):
        feeds = {"indices": INDICES, "depth": np.array(depth, np.int64)}
        got, want = session.run(None, feeds)[0], cpu.run(None, feeds)[0]
        assert got.shape == want.shape and np.array_equal(got, want), depth
    for depth in (0, -3):
        feeds = {"indices": INDICES, "depth": np.array(depth, np.int64)}
        with pytest.raises(Exception, match="[Dd]epth"):
            cpu.run(None, feeds)
        with pytest.raises(Exception, match="depth"):
            session.run(None, feeds)
    assert np.array_equal(session.run(None, {"indices": INDICES, "depth": np.array(3, np.int64)})[0],
                          cpu.run(None, {"indices": INDICES, "depth": np.array(3, np.int64)})[0])
