"""ReverseSequence on vkep against ORT's CPU EP: both axis orders, lengths from 0 to every step, inner dims,
several element types; a length out of range fails the run on both EPs and the session stays usable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from vkep import runner


def _model(shape, elem: int, time_axis: int, batch_axis: int):
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis, batch_axis=batch_axis)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, shape),
                                            helper.make_tensor_value_info("lens", 7, [shape[batch_axis]])],
                              [helper.make_tensor_value_info("y", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)], ir_version=10)


@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8", "bool"])
def test_against_the_cpu_ep(ep_devices, time_axis, batch_axis, dtype):
    steps, batches = 7, 5
    shape = [0, 0, 3, 2]
    shape[time_axis], shape[batch_axis] = steps, batches
    x = (np.random.default_rng(0).standard_normal(shape) * 50).astype(dtype)
    model = _model(shape, helper.np_dtype_to_tensor_dtype(x.dtype), time_axis, batch_axis)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for lens in ([7, 0, 1, 3, 6], [7, 7, 7, 7, 7], [2, 5, 4, 1, 0]):
        feeds = {"x": x, "lens": np.array(lens, np.int64)}
        got, want = session.run(None, feeds)[0], cpu.run(None, feeds)[0]
        assert got.dtype == want.dtype and np.array_equal(got, want), lens


@pytest.mark.parametrize("bad", [8, -1])
def test_a_length_out_of_range_fails_the_run(ep_devices, bad):
    model = _model([7, 3], 1, 0, 1)
    x = np.arange(21, dtype=np.float32).reshape(7, 3)
    feeds = {"x": x, "lens": np.array([2, bad, 1], np.int64)}
    with pytest.raises(Exception, match="[Ss]equence"):
        runner.cpu_session(model).run(None, feeds)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    with pytest.raises(Exception, match="ReverseSequence"):
        session.run(None, feeds)
    good = {"x": x, "lens": np.array([2, 7, 1], np.int64)}
    assert np.array_equal(session.run(None, good)[0], runner.cpu_session(model).run(None, good)[0])
