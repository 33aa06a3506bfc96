"""Add (-> Add) -> LayerNormalization groups (vkep/ort/skip_norm.py): claimed as one fused node where ORT's CPU EP
fuses the same nodes into com.microsoft SkipLayerNormalization, and run by vkep's SkipLayerNormalization kernel: the
CPU EP's values to the last bit, every node on vkep in ORT's placement record, one kernel execution a group. Where
ORT's conditions do not hold the nodes stay nodes (and equal the CPU EP's unfused nodes). A LayerNormalization
without a bias is compared with the SkipLayerNormalization node ORT would make of it (its fusion hands that node a
NodeArg that has left scope: ORT 1.32's CPU EP session crashes). float16 is not fused: the CPU EP has no float16
Add, so its Adds run in float32 between Casts, which part them from the norm."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import cpu_ops, kernel_executions
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

HIDDEN = 384
SHAPE = [2, 24, HIDDEN]


def _model(fmt: int, batch: int | str = 2, epsilon: float | None = 1e-5, output_sum: bool = False,
           bias_fed: bool = False, skip_shape: list | None = None) -> onnx.ModelProto:
    """Format 3: LN(x + y); format 1: LN((x + c) + y); format 2: LN(x + (y + c)), c a constant bias (a graph input
    where `bias_fed`); `output_sum`: the first Add's value a graph output too."""
    dtype, np_type = TensorProto.FLOAT, np.float32
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(1, .2, HIDDEN).astype(np_type), "g"),
             numpy_helper.from_array(rng.normal(0, .2, HIDDEN).astype(np_type), "b")]
    inputs = [helper.make_tensor_value_info("x", dtype, [batch, *SHAPE[1:]]),
              helper.make_tensor_value_info("y", dtype, skip_shape or [batch, *SHAPE[1:]])]
    c = numpy_helper.from_array(rng.normal(0, .5, HIDDEN).astype(np_type), "c")
    if bias_fed:
        inputs.append(helper.make_tensor_value_info("c", dtype, [HIDDEN]))
    elif fmt != 3:
        inits.append(c)
    nodes = {3: [helper.make_node("Add", ["x", "y"], ["s"])],
             1: [helper.make_node("Add", ["x", "c"], ["t"]), helper.make_node("Add", ["t", "y"], ["s"])],
             2: [helper.make_node("Add", ["y", "c"], ["t"]), helper.make_node("Add", ["x", "t"], ["s"])]}[fmt]
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    nodes.append(helper.make_node("LayerNormalization", ["s", "g", "b"], ["out"], axis=-1, **attrs))
    outputs = [helper.make_tensor_value_info("out", dtype, None)]
    if output_sum:
        outputs.append(helper.make_tensor_value_info("s", dtype, None))
    graph = helper.make_graph(nodes, "skip", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feeds(model: onnx.ModelProto, seed: int, scale: float = 3.0) -> dict:
    r = np.random.default_rng(seed)
    out = {}
    for value in model.graph.input:
        dims = [d.dim_value or 3 for d in value.type.tensor_type.shape.dim]
        np_type = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        out[value.name] = r.normal(0.5, scale, dims).astype(np_type)
    return out


CASES = {
    "add": dict(fmt=3),
    "add-of-a-bias-first": dict(fmt=1),
    "add-of-a-bias-second": dict(fmt=2),
    "symbolic-batch": dict(fmt=1, batch="batch"),
    "no-epsilon": dict(fmt=3, epsilon=None),  # (SkipLayerNormalization's 1e-12, not LayerNormalization's 1e-5)
    "bias-fed": dict(fmt=1, bias_fed=True),  # (the bias Add stays a node: ORT fuses the second Add alone)
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_add_then_layer_norm_runs_as_the_cpu_eps_skip_layer_norm(ep_devices, case, tmp_path):
    """Bit for bit with the CPU EP; with the option skip_norm=0 (node by node) the same nodes are apart, so the
    comparison can tell."""
    kw = CASES[case]
    model = _model(**kw)
    fused = cpu_ops(model, tmp_path)
    assert "SkipLayerNormalization" in fused, fused
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for *_, ep in placed} == {"VulkanExecutionProvider"} and len(placed) == len(model.graph.node)
    cpu, nodes = runner.cpu_session(model), runner.vkep_session(model, ep_options={"skip_norm": "0"})
    apart = 0
    for seed in range(2):
        # (tiny values for the default epsilon: 1e-12 against LayerNormalization's 1e-5 on a variance near 1e-6)
        feeds = _feeds(model, seed, 1e-3 if kw.get("epsilon", 1) is None else 3.0)
        got, executions = kernel_executions(session, feeds)
        assert executions == len(fused), (executions, fused)
        want = cpu.run(None, feeds)
        np.testing.assert_array_equal(got[0], want[0])
        apart += int((nodes.run(None, feeds)[0] != want[0]).sum())
    assert apart > 0


NOT_FUSED = {
    "sum-also-an-output": dict(fmt=3, output_sum=True),
    "broadcast-skip": dict(fmt=3, skip_shape=[1, 1, HIDDEN]),
    "skip-of-rank-2": dict(fmt=3, skip_shape=[24, HIDDEN]),
}


@pytest.mark.parametrize("case", sorted(NOT_FUSED))
def test_adds_the_cpu_ep_does_not_fuse_stay_nodes(ep_devices, case, tmp_path):
    model = _model(**NOT_FUSED[case])
    assert "SkipLayerNormalization" not in cpu_ops(model, tmp_path)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    feeds = _feeds(model, 0)
    got, executions = kernel_executions(session, feeds)
    assert executions == len(model.graph.node), executions
    for g, w in zip(got, runner.cpu_session(model).run(None, feeds), strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_norm_without_a_bias_equals_the_cpu_eps_skip_layer_norm_node(ep_devices):
    """ORT 1.32's CPU EP crashes creating this session (its fusion's bias placeholder has left scope), so the
    reference is the SkipLayerNormalization node it would have made, run on the CPU EP."""
    model = _model(fmt=1)
    model.graph.node[-1].input[2] = ""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    fused = helper.make_node("SkipLayerNormalization", ["x", "y", "g", "", "c"], ["out"], domain="com.microsoft",
                             epsilon=1e-5)
    graph = helper.make_graph([fused], "fused", list(model.graph.input), list(model.graph.output),
                              list(model.graph.initializer))
    reference = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    feeds = _feeds(model, 0)
    got, executions = kernel_executions(session, feeds)
    assert executions == 1, executions
    np.testing.assert_array_equal(got[0], runner.cpu_session(reference).run(None, feeds)[0])
