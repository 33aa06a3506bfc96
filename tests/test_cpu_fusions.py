"""Groups ORT's CPU EP fuses (vkep/ort/cpu_fusions.py): the Erf form of Gelu, LayerNorm and RMSNorm written out in
nodes, Add (-> Add) -> LayerNormalization, claimed as one fused node where ORT's CPU EP fuses the same nodes into
Gelu, LayerNormalization, SimplifiedLayerNormalization or SkipLayerNormalization, and run by vkep's kernel of that
op: the CPU EP's values to the last bit, every node on vkep in ORT's placement record, one kernel execution a group.
Where ORT's conditions do not hold the nodes stay nodes (and equal the CPU EP's unfused nodes). A LayerNormalization
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
    """Bit for bit with the CPU EP; with the option cpu_fusions=0 (node by node) the same nodes are apart, so the
    comparison can tell."""
    kw = CASES[case]
    model = _model(**kw)
    fused = cpu_ops(model, tmp_path)
    assert "SkipLayerNormalization" in fused, fused
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for *_, ep in placed} == {"VulkanExecutionProvider"} and len(placed) == len(model.graph.node)
    cpu, nodes = runner.cpu_session(model), runner.vkep_session(model, ep_options={"cpu_fusions": "0"})
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


# GeluFusion, LayerNormFusion, SimplifiedLayerNormFusion: models written out in nodes as exporters write them

N = helper.make_node
MS = "com.microsoft"


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _graph(nodes: list, inits: list, inputs: tuple[str, ...] = ("x",), opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in inputs],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _gelu(form: str, sqrt2: float = 1.4142135623730951) -> onnx.ModelProto:
    """torch's (x * (erf(x / sqrt 2) + 1)) * 0.5, Hugging Face's (x * 0.5) * (...), and forms ORT does not fuse."""
    x = "x"
    nodes = []
    if form == "x-from-a-mul":  # (x made by a Mul: ORT takes it for pattern 1's Mul(x, 0.5), finds two readers)
        nodes.append(N("Mul", ["x0", "three"], ["x"]))
    divide = N("Mul", [x, "r2"], ["a"]) if form == "times-rsqrt2" else N("Div", [x, "s2"], ["a"])
    nodes += [divide, N("Erf", ["a"], ["b"]), N("Add", ["b", "one"], ["c"])]
    if form == "half-first":
        nodes += [N("Mul", [x, "half"], ["h"]), N("Mul", ["h", "c"], ["out"])]
    elif form == "half-of-the-sum":
        nodes += [N("Mul", ["c", "half"], ["d"]), N("Mul", [x, "d"], ["out"])]
    else:
        nodes += [N("Mul", [x, "c"], ["d"]), N("Mul", ["d", "half"], ["out"])]
    inits = [_const("s2", sqrt2), _const("r2", 0.7071067811865476), _const("one", 1.0), _const("half", 0.5),
             _const("three", 3.0)]
    return _graph(nodes, inits, ("x0",) if form == "x-from-a-mul" else ("x",))


def _layer_norm(form: str = "", epsilon: float = 1e-5) -> onnx.ModelProto:
    """ReduceMean -> Sub -> Pow -> ReduceMean -> Add -> Sqrt -> Div -> Mul -> Add, as torch exports LayerNorm before
    opset 17 (`two-subs`: older exports' second Sub; `epsilon-first`: Add(eps, var); `after-an-add`: then fused
    into SkipLayerNormalization). From opset 17 on ORT fuses them into LayerNormalization before any EP sees them."""
    x = "s" if form == "after-an-add" else "x"
    rng = np.random.default_rng(1)
    nodes = [N("Add", ["x", "y"], ["s"])] if form == "after-an-add" else []
    nodes += [N("ReduceMean", [x], ["m"], axes=[-1]), N("Sub", [x, "m"], ["d"])]
    nodes += [N("Sub", [x, "m"], ["d2"])] if form == "two-subs" else []
    nodes += [N("Mul", ["d", "d"], ["p"])] if form == "square-by-mul" else [N("Pow", ["d", "two"], ["p"])]
    nodes += [N("ReduceMean", ["p"], ["v"], axes=[-1]),
              N("Add", ["eps", "v"] if form == "epsilon-first" else ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]),
              N("Div", ["d2" if form == "two-subs" else "d", "sd"], ["n"]), N("Mul", ["n", "g"], ["ng"]),
              N("Add", ["ng", "b"], ["out"])]
    inits = [_const("two", 2.0), _const("eps", epsilon), _const("g", rng.normal(1, .2, HIDDEN)),
             _const("b", rng.normal(0, .2, HIDDEN))]
    return _graph(nodes, inits, ("x", "y") if form == "after-an-add" else ("x",))


def _rms_norm(form: str = "") -> onnx.ModelProto:
    """Pow -> ReduceMean -> Add -> Sqrt -> Div -> Mul (`reciprocal`: Llama's x * (1 / sqrt), not fused by ORT;
    `axes-input`: opset 18's ReduceMean)."""
    x = "s" if form == "after-an-add" else "x"
    nodes = [N("Add", ["x", "y"], ["s"])] if form == "after-an-add" else []
    mean = N("ReduceMean", ["p", "axes"], ["v"]) if form == "axes-input" else N("ReduceMean", ["p"], ["v"], axes=[-1])
    nodes += [N("Pow", [x, "two"], ["p"]), mean, N("Add", ["v", "eps"], ["ve"]),
              N("Sqrt", ["ve"], ["sd"])]
    if form == "reciprocal":
        nodes += [N("Reciprocal", ["sd"], ["r"]), N("Mul", [x, "r"], ["n"])]
    else:
        nodes += [N("Div", [x, "sd"], ["n"])]
    nodes += [N("Mul", ["n", "g"], ["out"])]
    inits = [_const("two", 2.0), _const("eps", 1e-6), _const("g", np.random.default_rng(2).normal(1, .2, HIDDEN)),
             numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    return _graph(nodes, inits, ("x", "y") if form == "after-an-add" else ("x",), 18 if form == "axes-input" else 13)


def _scaled_product(form: str) -> onnx.ModelProto:
    """Attention scores as exporters write them: Q K / sqrt(40), or (Q s) (K s) as torch's scaled_dot_product_attention
    exports it, or scaled before and after (a Mul after alone equals alpha: MLAS scales the sum); and forms ORT
    does not fuse."""
    q, k = [2, 4, 24, 40], [2, 4, 40, 24]
    inits = [_const("sqrt", np.sqrt(40.0)), _const("s", 40.0 ** -0.25), _const("c", 0.3),
             _const("rank5", np.full((1, 1, 1, 1, 1), 8.0))]
    if form == "fused-then-divided":
        k = [2, 4, 24, 40]
        nodes = [N("FusedMatMul", ["q", "k"], ["mm"], domain=MS, alpha=0.5, transB=1), N("Div", ["mm", "sqrt"], ["out"])]
    elif form == "inputs-scaled":
        nodes = [N("Mul", ["q", "s"], ["qs"]), N("Mul", ["s", "k"], ["ks"]), N("MatMul", ["qs", "ks"], ["out"])]
    elif form == "scaled-before-and-after":
        nodes = [N("Mul", ["q", "s"], ["qs"]), N("MatMul", ["qs", "k"], ["mm"]), N("Mul", ["c", "mm"], ["out"])]
    else:
        divisor = {"divided-by-an-input": "d", "divided-by-rank-5": "rank5"}.get(form, "sqrt")
        nodes = [N("MatMul", ["q", "k"], ["mm"]), N("Div", ["mm", divisor], ["out"])]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, q), helper.make_tensor_value_info("k", TensorProto.FLOAT, k)]
    if form == "divided-by-an-input":
        inputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, []))
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    if form == "product-also-an-output":
        outputs.append(helper.make_tensor_value_info("mm", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "m", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)],
                             ir_version=8)


# name → (model, the op the CPU EP fuses its nodes into, or None where it keeps them)
FUSIONS = {
    "gelu-torch": (lambda: _gelu("torch"), "Gelu"),
    "gelu-half-first": (lambda: _gelu("half-first"), "Gelu"),
    "gelu-rounded-sqrt2": (lambda: _gelu("torch", 1.4142099618911743), "Gelu"),
    "gelu-sqrt2-to-1e-5": (lambda: _gelu("torch", 1.41422), "Gelu"),
    "gelu-sqrt2-off": (lambda: _gelu("torch", 1.4143), None),
    "gelu-times-rsqrt2": (lambda: _gelu("times-rsqrt2"), None),
    "gelu-half-of-the-sum": (lambda: _gelu("half-of-the-sum"), None),
    "gelu-x-from-a-mul": (lambda: _gelu("x-from-a-mul"), None),
    "layer-norm": (lambda: _layer_norm(), "LayerNormalization"),
    "layer-norm-two-subs": (lambda: _layer_norm("two-subs"), "LayerNormalization"),
    "layer-norm-epsilon-first": (lambda: _layer_norm("epsilon-first", 0.05), "LayerNormalization"),
    "layer-norm-after-an-add": (lambda: _layer_norm("after-an-add"), "SkipLayerNormalization"),
    "layer-norm-square-by-mul": (lambda: _layer_norm("square-by-mul"), None),
    "rms-norm": (lambda: _rms_norm(), "SimplifiedLayerNormalization"),
    "rms-norm-after-an-add": (lambda: _rms_norm("after-an-add"), "SimplifiedLayerNormalization"),
    "rms-norm-reciprocal": (lambda: _rms_norm("reciprocal"), None),
    "rms-norm-axes-input": (lambda: _rms_norm("axes-input"), "SimplifiedLayerNormalization"),
    "matmul-divided": (lambda: _scaled_product("divided"), "FusedMatMul"),
    "matmul-inputs-scaled": (lambda: _scaled_product("inputs-scaled"), "FusedMatMul"),
    "matmul-scaled-before-and-after": (lambda: _scaled_product("scaled-before-and-after"), "FusedMatMul"),
    "matmul-fused-then-divided": (lambda: _scaled_product("fused-then-divided"), "FusedMatMul"),
    "matmul-divided-by-an-input": (lambda: _scaled_product("divided-by-an-input"), None),
    "matmul-divided-by-rank-5": (lambda: _scaled_product("divided-by-rank-5"), None),
    "matmul-product-also-an-output": (lambda: _scaled_product("product-also-an-output"), None),
}


@pytest.mark.parametrize("case", sorted(FUSIONS))
def test_written_out_gelu_and_norms_compute_as_the_cpu_eps_fused_op(ep_devices, case, tmp_path):
    """Where the CPU EP fuses the nodes, vkep runs them as one kernel of the fused op: bit for bit the CPU EP's
    values, which node by node (cpu_fusions=0) are apart; where it does not, they stay nodes and equal it too."""
    make, op = FUSIONS[case]
    model = make()
    ops = cpu_ops(model, tmp_path)
    assert (op in ops) if op else ops == [n.op_type for n in model.graph.node], ops
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for *_, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu, nodes = runner.cpu_session(model), runner.vkep_session(model, ep_options={"cpu_fusions": "0"})
    apart = 0
    for seed in range(2):
        feeds = _feeds(model, seed)
        got, executions = kernel_executions(session, feeds)
        assert executions == len(ops) or op is None, (executions, ops)  # (vkep's own groups take unfused nodes)
        want = cpu.run(None, feeds)
        np.testing.assert_array_equal(got[0], want[0])
        apart += int((nodes.run(None, feeds)[0] != want[0]).sum())
    assert (apart > 0) == (op is not None), apart
