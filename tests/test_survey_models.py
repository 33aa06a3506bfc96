"""tools/survey_models.py's child (`--one`): a model runs on vkep and on the CPU EP and its record says so;
`--inputs NAME=FILE.npy` feeds the given values (their shape setting the free dimensions), and a float input
named like a recurrent state is zeros unless given."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

_SPEC = importlib.util.spec_from_file_location("survey_models", Path(__file__).parents[1] / "tools" / "survey_models.py")
survey_models = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(survey_models)


def _model(path: Path) -> Path:
    """y = x * speed + h0: speed and h0 [1], x ["N", 3]."""
    nodes = [helper.make_node("Mul", ["x", "speed"], ["t"]), helper.make_node("Add", ["t", "h0"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
                                           helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1]),
                                           helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path / "m.onnx")
    return path / "m.onnx"


def test_given_inputs_set_values_and_free_dims(ep_devices, tmp_path):
    model = _model(tmp_path)
    np.save(tmp_path / "x.npy", np.arange(15, dtype=np.float32).reshape(5, 3))
    np.save(tmp_path / "h0.npy", np.full(1, 2.0, np.float32))
    record = survey_models._run_one(str(model), 320, 1, 0, [], [f"x={tmp_path / 'x.npy'}",
                                                                f"h0={tmp_path / 'h0.npy'}", "other=unused.npy"])
    assert record["vkep_error"] is None and record["cpu_error"] is None
    assert record["inputs"]["x"] == ["float32", [5, 3]]  # the given array's shape, not vkep run's default N
    assert record["placement"]["on_vkep"] == record["placement"]["nodes"] == 2
    (out,) = record["outputs"]
    assert out["shape"] == [5, 3] and out["matches"]


def test_state_inputs_are_zeros_unless_given(ep_devices, tmp_path):
    model = onnx.load(_model(tmp_path))
    import vkep.run.execute as execute

    seen = {}
    real = execute.attempt

    def spy(name, make, feeds, runs):
        seen[name] = {k: v.copy() for k, v in feeds.items()}
        return real(name, make, feeds, runs)

    execute.attempt = spy
    try:
        survey_models._run_one(str(tmp_path / "m.onnx"), 320, 1, 0, [], [])
        assert np.all(seen["vkep"]["h0"] == 0)  # a recurrent state: zeros
        np.save(tmp_path / "h0.npy", np.full(1, 3.0, np.float32))
        survey_models._run_one(str(tmp_path / "m.onnx"), 320, 1, 0, [], [f"h0={tmp_path / 'h0.npy'}"])
        assert np.all(seen["vkep"]["h0"] == 3)  # given: kept
    finally:
        execute.attempt = real
    assert model.graph.input[2].name == "h0"
