"""Out-of-range indices fail the run, as on ORT's CPU EP (the shaders clamp them, so nothing outside a
tensor is read or written, and report them through the device's error word); in-range negative indices
wrap; the session goes on with correct indices, replayed or not."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner


def _model(node, inputs, opset: int = 18) -> bytes:
    graph = helper.make_graph([node], "idx", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


F, I64 = TensorProto.FLOAT, TensorProto.INT64
DATA = np.arange(20, dtype=np.float32).reshape(4, 5)
CASES = {
    "Gather": (helper.make_node("Gather", ["x", "i"], ["y"], axis=1), [("x", F, [4, 5]), ("i", I64, [3])],
               np.array([0, -1, 2]), np.array([0, 5, 2])),
    "GatherElements": (helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0), [("x", F, [4, 5]), ("i", I64, [1, 5])],
                       np.array([[0, 1, 2, 3, -4]]), np.array([[0, 1, 4, 3, 0]])),
    "GatherND": (helper.make_node("GatherND", ["x", "i"], ["y"]), [("x", F, [4, 5]), ("i", I64, [2, 2])],
                 np.array([[0, 0], [3, -1]]), np.array([[0, 0], [3, 7]])),
    "ScatterND": (helper.make_node("ScatterND", ["x", "i", "u"], ["y"]),
                  [("x", F, [4, 5]), ("i", I64, [1, 2]), ("u", F, [1])], np.array([[1, 2]]), np.array([[1, 9]])),
    "ScatterElements": (helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1),
                        [("x", F, [4, 5]), ("i", I64, [1, 2]), ("u", F, [1, 2])], np.array([[1, -2]]), np.array([[1, -7]])),
}


@pytest.mark.parametrize("op", list(CASES))
def test_out_of_range_index_fails_the_run_and_the_session_goes_on(ep_devices, op):
    node, inputs, good, bad = CASES[op]
    model = _model(node, inputs)
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)

    def feeds(index):
        out = {"x": DATA, "i": index.astype(np.int64)}
        if len(inputs) == 3:
            out["u"] = np.full([d for d in inputs[2][2]], -1.0, np.float32)
        return out

    for _ in range(2):  # the second run replays
        np.testing.assert_array_equal(session.run(None, feeds(good))[0], cpu.run(None, feeds(good))[0])
    with pytest.raises(Exception, match=r"\S"):  # the reference fails too (its own message)
        cpu.run(None, feeds(bad))
    with pytest.raises(Exception, match="index was out of range"):
        session.run(None, feeds(bad))
    np.testing.assert_array_equal(session.run(None, feeds(good))[0], cpu.run(None, feeds(good))[0])


def test_replayed_wait_reports_an_out_of_range_index(ep_devices):
    """The Gather and the Relu that makes the graph output both replay natively once planned (the indices come
    from a device Cast, not from a feed); the Relu then waits natively for the work (the replay contract), and
    that wait must still see the Gather's report in the error word and fail the run, as the Python path does."""
    import vkep

    nodes = [helper.make_node("Cast", ["f"], ["i"], to=I64), helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
             helper.make_node("Relu", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "replayed_gather", [helper.make_tensor_value_info("f", F, [3])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [helper.make_tensor("x", F, [4, 5], (DATA - 9).ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8).SerializeToString()
    session, cpu = runner.vkep_session(model), runner.cpu_session(model)
    good = {"f": np.array([0, 4, 2], np.float32)}
    for _ in range(2):
        vkep.reset_stats()
        got = session.run(None, good)[0]
    assert vkep.stats()["process"]["nodes_replayed_natively"] == 2, vkep.stats()["process"]
    np.testing.assert_array_equal(got, cpu.run(None, good)[0])
    del got  # (its memory back to the allocator: the Relu's replay takes a chunk of that size)
    with pytest.raises(Exception, match="index was out of range"):
        session.run(None, {"f": np.array([0, 9, 2], np.float32)})
    np.testing.assert_array_equal(session.run(None, good)[0], cpu.run(None, good)[0])
