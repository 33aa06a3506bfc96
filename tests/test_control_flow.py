"""If, Loop and Scan: ORT's control-flow kernels on vkep, with their subgraph bodies on vkep too."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

F32 = TensorProto.FLOAT


def _vi(name, elem=F32, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(graph, opset=21):
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _check(model, feeds_list):
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    for feeds in feeds_list:
        for got, want in zip(session.run(None, feeds), cpu.run(None, feeds), strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, **tolerance(want.dtype))
    return session


def _ops_on(session) -> dict[str, set[str]]:
    by_ep: dict[str, set[str]] = {}
    for _, op, ep in runner.placement(session):
        by_ep.setdefault(ep, set()).add(op)
    return by_ep


def test_if_runs_both_branches_on_vkep(ep_devices):
    then_graph = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [_vi("t", F32, [2, 3])])
    else_graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"])], "else", [], [_vi("e", F32, [2, 3])])
    nodes = [helper.make_node("Identity", ["c0"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph),
             helper.make_node("Add", ["y", "x"], ["z"])]
    graph = helper.make_graph(nodes, "if", [_vi("c0", TensorProto.BOOL, []), _vi("x", F32, [2, 3])], [_vi("z")])
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3)).astype(np.float32)
    session = _check(_model(graph), [{"c0": np.array(True), "x": x}, {"c0": np.array(False), "x": x}])
    ops = _ops_on(session)
    assert {"If", "Relu", "Mul", "Add"} <= ops["VulkanExecutionProvider"], ops


def test_loop_with_scan_outputs(ep_devices):
    # body(i, cond, acc) -> (cond, acc + x, acc * 2 as a per-iteration scan output)
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Mul", ["acc_out", "two"], ["scan_out"])],
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []), _vi("acc_in", F32, [4])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("acc_out", F32, [4]), _vi("scan_out", F32, [4])])
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "cond", "acc0"], ["acc", "stacked"], body=body)], "loop",
        [_vi("m", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("acc0", F32, [4]), _vi("x", F32, [4])],
        [_vi("acc"), _vi("stacked")], [two])
    x = np.arange(4, dtype=np.float32)
    feeds = [{"m": np.array(n, np.int64), "cond": np.array(True), "acc0": np.ones(4, np.float32), "x": x}
             for n in (1, 3, 5)]
    session = _check(_model(graph), feeds)
    assert {"Loop", "Add", "Mul"} <= _ops_on(session)["VulkanExecutionProvider"]


@pytest.mark.parametrize("opset", [11, 21])
def test_scan_running_sum(ep_devices, opset):
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])],
        "body", [_vi("sum_in", F32, [2]), _vi("next", F32, [2])], [_vi("sum_out", F32, [2]), _vi("scan_out", F32, [2])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1)], "scan",
        [_vi("init", F32, [2]), _vi("xs", F32, [5, 2])], [_vi("final"), _vi("ys")])
    feeds = {"init": np.zeros(2, np.float32), "xs": np.arange(10, dtype=np.float32).reshape(5, 2)}
    session = _check(_model(graph, opset), [feeds])
    assert "Scan" in _ops_on(session)["VulkanExecutionProvider"]


def test_scan_with_scan_axes_transposes_on_the_device(ep_devices):
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])],
        "body", [_vi("sum_in", F32, [3]), _vi("next", F32, [3])], [_vi("sum_out", F32, [3]), _vi("scan_out", F32, [3])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_output_axes=[1])], "scan",
        [_vi("init", F32, [3]), _vi("xs", F32, [3, 4])], [_vi("final"), _vi("ys")])
    feeds = {"init": np.zeros(3, np.float32), "xs": np.arange(12, dtype=np.float32).reshape(3, 4)}
    session = _check(_model(graph, 21), [feeds])
    assert "Scan" in _ops_on(session)["VulkanExecutionProvider"]


# ---- If outputs made on the other EP (docs/design.md, "Host access and reused memory", rule 5) ----------

def _leave_named_nodes_to_the_cpu_ep(monkeypatch):
    """vkep declines every node whose name starts with "cpu_", as it declines nodes it cannot run."""
    from vkep.ort import api
    from vkep.ort import ep as ep_module

    refused = ep_module._refused

    def refuse(node, ep):
        name = api.ffi.new("const char**")
        api.check(api.lib.ort_Node_GetName(node, name))
        return "left to the CPU EP by this test" if api.ffi.string(name[0]).startswith(b"cpu_") else refused(node, ep)

    monkeypatch.setattr(ep_module, "_refused", refuse)


def _if_model(if_name: str, maker_name: str, dims) -> object:
    """y = If(x's size is 6) then Concat(Relu(x), -x) (made by `maker_name`) else Unsqueeze(x); x of `dims`."""
    axis0 = numpy_helper.from_array(np.array([0], np.int64), "axis0")
    then_graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="dev_relu"),
         helper.make_node("Unsqueeze", ["a", "axis0"], ["a1"], name="dev_unsqueeze_a"),
         helper.make_node("Neg", ["x"], ["b"], name="dev_neg"),
         helper.make_node("Unsqueeze", ["b", "axis0"], ["b1"], name="dev_unsqueeze_b"),
         helper.make_node("Concat", ["a1", "b1"], ["t"], axis=0, name=maker_name)],
        "then", [], [_vi("t")])
    else_graph = helper.make_graph([helper.make_node("Unsqueeze", ["x", "axis0"], ["e"], name="dev_else")],
                                   "else", [], [_vi("e")])
    nodes = [helper.make_node("Size", ["x"], ["size"], name="dev_size"),
             helper.make_node("Equal", ["size", "six"], ["c"], name="dev_equal"),
             helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph, name=if_name),
             helper.make_node("Mul", ["y", "y"], ["z"], name="dev_mul")]
    six = numpy_helper.from_array(np.array(6, np.int64), "six")
    graph = helper.make_graph(nodes, "if", [_vi("x", F32, dims)], [_vi("z"), _vi("y")], [axis0, six])
    return _model(graph)


@pytest.mark.parametrize("dims", [["n", 3], [2, 3]], ids=["runtime_shape", "static_shape"])
@pytest.mark.parametrize("if_name, maker_name", [("if", "cpu_concat"), ("cpu_if", "dev_concat")],
                         ids=["vkep_if_cpu_maker", "cpu_if_vkep_maker"])
def test_if_output_made_on_the_other_ep(ep_devices, monkeypatch, if_name, maker_name, dims):
    """An If whose branch output the other EP makes: ORT loses the output (it keeps whatever its memory held)
    when the shape is known only at run time and vkep's memory is host memory of its own, so vkep runs the If
    and that node on the same EP; with a static shape ORT copies it and vkep keeps its side."""
    _leave_named_nodes_to_the_cpu_ep(monkeypatch)
    model = _if_model(if_name, maker_name, dims)
    session, cpu = runner.vkep_session(model), runner.cpu_session(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    for got, want in zip(session.run(None, {"x": x}), cpu.run(None, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)
    placed = {name: ep for name, _, ep in runner.placement(session)}
    from vkep.gpu.device import physical_devices
    from vkep.ort.factory import shares_host_memory

    tied = shares_host_memory(physical_devices()[0]) and dims[0] == "n"
    assert (placed[if_name] == placed[maker_name]) == tied, (tied, sorted(placed.items()))
    assert placed["dev_relu"] == "VulkanExecutionProvider"  # only the tied nodes move


def test_scan_and_the_makers_of_its_body_outputs_share_an_ep(ep_devices):
    """ONNX's LinearAttention (opset 27), a function ORT expands into a Scan whose body ends in a Cast to
    float16: with vkep's fp16 switched off that Cast runs on the CPU EP, and on a unified device ORT lost the
    first iteration's slice of the Scan output (128 of 512 outputs 0, found by the conformance matrix). vkep
    keeps a control-flow node and the makers of its subgraphs' outputs on one EP (vkep/ort/ties.py); the
    float32 cases, whose body ends in a CastLike that vkep runs, keep their Scan on vkep."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = {c.name: c for c in collect_testcases() if c.name in ("test_linear_attention_fp16",
                                                                     "test_linear_attention_linear")}
    for name, options, scan_on in (("test_linear_attention_fp16", {"fp16": "0"}, None),
                                   ("test_linear_attention_linear", {}, "VulkanExecutionProvider")):
        case = found[name]
        inputs, expected = case.data_sets[0]
        feeds = {i.name: v for i, v in zip(case.model.graph.input, inputs, strict=True)}
        session = runner.vkep_session(case.model, ep_options=options)
        placed = {ep for _, op, ep in runner.placement(session) if op == "Scan"}
        assert len(placed) == 1, (name, placed)
        assert scan_on is None or placed == {scan_on}, (name, placed)
        for got, want in zip(session.run(None, feeds), expected, strict=True):
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=case.rtol,
                                       atol=case.atol)


def _recurrent_loop(n: int = 128):
    """A Loop as tf2onnx writes a recurrent layer: the body's condition (Less of a counter), a counter, a state
    carried from step to step (MatMul, Add, Tanh) and the state again as a scan output; every one made by a vkep
    node, and the state's maker the heaviest."""
    i64 = TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Add", ["t_in", "one"], ["t_out"]),
         helper.make_node("Less", ["t_out", "steps"], ["cond_out"]),
         helper.make_node("MatMul", ["h_in", "w"], ["hw"]),
         helper.make_node("Add", ["hw", "x"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Mul", ["h_out", "half"], ["seq_out"])],
        "body",
        [_vi("i", i64, []), _vi("cond_in", TensorProto.BOOL, []), _vi("t_in", i64, []), _vi("h_in", F32, [4, n])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("t_out", i64, []), _vi("h_out", F32, [4, n]),
         _vi("seq_out", F32, [4, n])])
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.uniform(-0.3, 0.3, (n, n)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "cond", "t0", "h0"], ["t", "h", "seq"], body=body)], "rnn",
        [_vi("cond", TensorProto.BOOL, []), _vi("t0", i64, []), _vi("h0", F32, [4, n]), _vi("x", F32, [4, n]),
         _vi("steps", i64, [])],
        [_vi("t", i64), _vi("h"), _vi("seq")], inits)
    return _model(graph)


def test_a_loop_body_waits_once_an_iteration(ep_devices):
    """ORT's Loop reads the body's outputs with the CPU once the body has run; only their last producer waits for
    the device (vkep/ort/subgraph_waits.py), after the first iteration has shown which it is. The four producers
    here each submitted and waited, every iteration, before: the run made 4 submits an iteration."""
    import vkep

    model, n, steps = _recurrent_loop(), 128, 40
    rng = np.random.default_rng(2)
    feeds = {"cond": np.array(True), "t0": np.array(0, np.int64), "h0": rng.uniform(-1, 1, (4, n)).astype(np.float32),
             "x": rng.uniform(-1, 1, (4, n)).astype(np.float32), "steps": np.array(steps, np.int64)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    want = cpu.run(None, feeds)
    assert set(_ops_on(session)) == {"VulkanExecutionProvider"}, _ops_on(session)
    for run in range(3):
        vkep.reset_stats()
        got = session.run(None, {**feeds, "h0": feeds["h0"] * (1 + run)}) if run else session.run(None, feeds)
        want = cpu.run(None, {**feeds, "h0": feeds["h0"] * (1 + run)}) if run else want
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert got[2].shape == (steps, 4, n)
        submits = sum(d["submits"] for d in vkep.stats().values() if "submits" in d)
        if run:  # (the first run learns the order)
            assert submits <= steps + 4, submits


def test_loop_bodies_in_concurrent_runs(ep_devices):
    """Two threads run the same Loop at once: each body's wait still covers its own producers' work."""
    from concurrent.futures import ThreadPoolExecutor

    model, n = _recurrent_loop(64), 64
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    rng = np.random.default_rng(3)
    feeds = [{"cond": np.array(True), "t0": np.array(0, np.int64), "h0": rng.uniform(-1, 1, (4, n)).astype(np.float32),
              "x": rng.uniform(-1, 1, (4, n)).astype(np.float32), "steps": np.array(s, np.int64)} for s in (17, 29)] * 4
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda f: session.run(None, f), feeds))
    for f, got in zip(feeds, results, strict=True):
        for g, w in zip(got, cpu.run(None, f), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_an_if_with_outputs_from_several_nodes(ep_devices):
    """Each branch makes three outputs with three vkep nodes; the If reads all of them once its branch has run."""
    def branch(name, op):
        nodes = [helper.make_node(op, ["x", "x"], [f"{name}_a"]), helper.make_node("Sin", [f"{name}_a"], [f"{name}_b"]),
                 helper.make_node("MatMul", [f"{name}_b", "x"], [f"{name}_c"])]
        return helper.make_graph(nodes, name, [], [_vi(f"{name}_{k}", F32, [64, 64]) for k in "abc"])

    nodes = [helper.make_node("If", ["c"], ["a", "b", "c_"], then_branch=branch("then", "Add"),
                              else_branch=branch("else", "Mul"))]
    graph = helper.make_graph(nodes, "if3", [_vi("c", TensorProto.BOOL, []), _vi("x", F32, [64, 64])],
                              [_vi("a"), _vi("b"), _vi("c_")])
    x = np.random.default_rng(4).uniform(-1, 1, (64, 64)).astype(np.float32)
    _check(_model(graph), [{"c": np.array(c), "x": x * k} for k in (1, 2) for c in (True, False, True)])


def test_loop_bodies_that_name_their_values_alike(ep_devices):
    """Two Loops whose bodies are copies, value names and all (ONNX allows it in sibling subgraphs): vkep knows a
    kernel's outputs by name only, so neither body's producers can tell their group from the other's; they all
    keep their waits (subgraph_waits.py), and both Loops equal the CPU EP."""
    loop = _recurrent_loop(96).graph.node[0]
    second = helper.make_node("Loop", ["", "cond", "t0", "h"], ["t2", "h2", "seq2"], body=loop.attribute[0].g)
    graph = _recurrent_loop(96).graph
    graph.node.append(second)
    graph.output.extend([_vi("t2", TensorProto.INT64), _vi("h2"), _vi("seq2")])
    rng = np.random.default_rng(5)
    feeds = [{"cond": np.array(True), "t0": np.array(0, np.int64), "h0": rng.uniform(-1, 1, (4, 96)).astype(np.float32),
              "x": rng.uniform(-1, 1, (4, 96)).astype(np.float32), "steps": np.array(s, np.int64)} for s in (23, 31, 23)]
    _check(_model(graph), feeds)


def test_a_loop_body_with_an_if_and_an_inner_loop(ep_devices):
    """Body outputs made inside a nested If (by its branch's producers) and by an inner Loop, beside the body's own
    producers: each subgraph's last producer waits for its own (subgraph_waits.py), and the outer Loop reads all
    of them complete."""
    n, i64, b = 64, TensorProto.INT64, TensorProto.BOOL

    def branch(name, op):
        nodes = [helper.make_node("MatMul", ["h_in", "w"], [f"{name}_p"]), helper.make_node(op, [f"{name}_p"], [f"{name}_h"]),
                 helper.make_node("Mul", [f"{name}_h", "half"], [f"{name}_s"])]
        return helper.make_graph(nodes, name, [], [_vi(f"{name}_h", F32, [4, n]), _vi(f"{name}_s", F32, [4, n])])

    inner = helper.make_graph(
        [helper.make_node("Identity", ["ic_in"], ["ic_out"]), helper.make_node("Sin", ["acc_in"], ["acc_s"]),
         helper.make_node("Add", ["acc_s", "h_in"], ["acc_out"])], "inner",
        [_vi("j", i64, []), _vi("ic_in", b, []), _vi("acc_in", F32, [4, n])],
        [_vi("ic_out", b, []), _vi("acc_out", F32, [4, n])])
    body = helper.make_graph(
        [helper.make_node("Add", ["t_in", "one"], ["t_out"]),
         helper.make_node("Less", ["t_out", "steps"], ["cond_out"]),
         helper.make_node("Mod", ["t_in", "two"], ["parity"]),
         helper.make_node("Cast", ["parity"], ["odd"], to=b),
         helper.make_node("If", ["odd"], ["h_out", "seq_out"], then_branch=branch("then", "Tanh"),
                          else_branch=branch("else", "Sigmoid")),
         helper.make_node("Loop", ["three", "", "h_out"], ["acc"], body=inner)],
        "body", [_vi("i", i64, []), _vi("cond_in", b, []), _vi("t_in", i64, []), _vi("h_in", F32, [4, n])],
        [_vi("cond_out", b, []), _vi("t_out", i64, []), _vi("h_out", F32, [4, n]), _vi("seq_out", F32, [4, n]),
         _vi("acc", F32, [4, n])])
    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array(rng.uniform(-0.3, 0.3, (n, n)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(2, np.int64), "two"),
             numpy_helper.from_array(np.array(3, np.int64), "three"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "cond", "t0", "h0"], ["t", "h", "seq", "accs"], body=body)], "nested",
        [_vi("cond", b, []), _vi("t0", i64, []), _vi("h0", F32, [4, n]), _vi("steps", i64, [])],
        [_vi("t", i64), _vi("h"), _vi("seq"), _vi("accs")], inits)
    feeds = [{"cond": np.array(True), "t0": np.array(0, np.int64), "h0": rng.uniform(-1, 1, (4, n)).astype(np.float32),
              "steps": np.array(s, np.int64)} for s in (9, 14, 9)]
    session = _check(_model(graph), feeds)
    assert set(_ops_on(session)) == {"VulkanExecutionProvider"}, _ops_on(session)
