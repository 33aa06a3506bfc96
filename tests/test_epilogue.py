"""Fused epilogues (vkep/ort/epilogues.py, vkep/kernels/epilogue.py, shaders/epilogue.glsl): a Conv, MatMul or
Gemm with the elementwise nodes after it in its own last dispatch computes bit for bit what the nodes compute
one by one (fuse=0), special values included, on every path the producer takes; ORT's CPU EP within tolerance;
every node still on vkep in ORT's placement record; native replay and graph capture as for any node."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import tolerance
from onnx import TensorProto, helper, numpy_helper
from test_fusion import _executions, _vi, random_graph

import vkep
from vkep import runner
from vkep.kernels import host, matmul, mlas_gemm

# producers take their groups whatever tuning.json says for this device (it says not by default on lavapipe)
EPILOGUES = {"epilogues": "1"}

SPECIAL = [np.nan, np.inf, -np.inf, -0.0]


def _kernels() -> dict:
    from vkep.ort.kernel import KERNELS

    return KERNELS


def _model(nodes, inputs, initializers, elem=TensorProto.FLOAT, opset: int = 21) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "epilogue", inputs, [_vi("y", None, elem)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit for bit, but for the sign of a NaN."""
    bits = np.uint32 if got.dtype == np.float32 else np.uint16
    same = (got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want))
    assert got.shape == want.shape and same.all(), (got[~same][:4], want[~same][:4])


def _check(model: onnx.ModelProto, feeds: dict, shaders: set[str] | None = None, groups: int = 1,
           options: dict | None = None, close: dict | None = None) -> set:
    """Fused: `groups` kernel executions a run, every node on vkep, the epilogue variant of `shaders`, the same bits
    as fuse=0, the CPU EP's values within tolerance (`close`, else as test_conv's); the (shader, dtype) pairs the
    fused kernels ran."""
    first = max(_kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={**EPILOGUES, **(options or {})})
    unfused = runner.vkep_session(model, ep_options={**(options or {}), "fuse": "0"})
    placed = runner.placement(session)  # (node by node, as ORT placed the nodes it kept: it may fold a Conv's Add)
    assert {ep for *_, ep in placed} == {"VulkanExecutionProvider"} and sorted(placed) == sorted(
        runner.placement(unfused))
    got, executions = _executions(session, feeds)
    assert executions == groups, executions
    fused = [k for i, k in list(_kernels().items()) if i > first and k.spec.op == "FusedEpilogue"]
    used = {(shader, dtype) for k in fused for shader, dtype, _ in k.pipelines}
    if shaders is not None:
        assert {s for s, d in used if d.endswith("+epilogue")} == shaders, used
    want = unfused.run(None, feeds)
    _same(got[0], want[0])
    finite = np.isfinite(want[0])
    cpu = runner.cpu_session(model).run(None, feeds)[0]
    if close is None:
        close = tolerance(np.float16) if got[0].dtype == np.float16 else {"rtol": 1e-4, "atol": 1e-4}  # (as test_conv)
    np.testing.assert_allclose(got[0][finite], cpu[finite], **close)
    return used


def _conv_model(xs, ws, attrs: dict, tail: str, bias: bool = True, dtype=np.float32, seed: int = 0):
    """Conv of X `xs` by a constant W `ws` (+ bias), then the epilogue `tail` names; (model, feeds)."""
    rng = np.random.default_rng(seed)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inits = [numpy_helper.from_array((rng.uniform(-1, 1, ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype), "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, ws[0]).astype(dtype), "b"))
        names.append("b")
    nodes = [helper.make_node("Conv", names, ["c"], **attrs)]
    x = rng.standard_normal(xs).astype(dtype)
    x.flat[:4] = SPECIAL
    feeds = {"x": x}
    inputs = [_vi("x", list(xs), elem)]
    out = runner.cpu_session(_model(nodes + [helper.make_node("Identity", ["c"], ["y"])], inputs, inits, elem)).run(
        None, feeds)[0].shape
    nodes += _tail(tail, out, 1, inputs, inits, feeds, rng, dtype)
    return _model(nodes, inputs, inits, elem), feeds


def _tail(tail: str, out: tuple, row_axis: int, inputs: list, inits: list, feeds: dict, rng, dtype) -> list:
    """The elementwise nodes after the producer's "c" (of shape `out`, its channels or rows along `row_axis`),
    ending in "y"; their operands as inputs or constants."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    row = [1] * len(out)
    row[row_axis] = out[row_axis]

    def operand(name: str, shape, constant: bool):
        value = rng.standard_normal(shape).astype(dtype)
        if value.size > 4:
            value.flat[-4:] = SPECIAL
        if constant:
            inits.append(numpy_helper.from_array(value, name))
        else:
            inputs.append(_vi(name, list(shape), elem))
            feeds[name] = value

    if tail == "relu":
        return [helper.make_node("Relu", ["c"], ["y"])]
    if tail == "residual_relu":  # resnet's block end: Sum with the block's input, then Relu
        operand("r", out, False)
        return [helper.make_node("Sum", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    if tail == "channel_clip":  # PRelu by a per-channel constant (ORT folds a Conv's Add or Mul), then Clip by inputs
        operand("k", row[1:] if row[0] == 1 else row, True)
        inits += [numpy_helper.from_array(np.array(0, dtype), "lo"), numpy_helper.from_array(np.array(6, dtype), "hi")]
        return [helper.make_node("PRelu", ["c", "k"], ["s"]), helper.make_node("Clip", ["s", "lo", "hi"], ["y"])]
    if tail == "scale_hardswish":  # a scalar constant, then HardSwish
        inits.append(numpy_helper.from_array(np.array([1.5], dtype), "k"))
        return [helper.make_node("Mul", ["c", "k"], ["s"]), helper.make_node("HardSwish", ["s"], ["y"])]
    if tail == "row_input_sigmoid":  # a runtime operand broadcast along the channels (or rows), then Sigmoid
        operand("r", row[1:] if row[0] == 1 else row, False)  # (of a lower rank where it can be)
        return [helper.make_node("Sub", ["r", "c"], ["s"]), helper.make_node("Sigmoid", ["s"], ["y"])]
    if tail == "elu_max":  # Elu, then Max with a scalar input (not Gelu: unary_mlas.comp's, never fused)
        operand("r", [1], False)
        return [helper.make_node("Elu", ["c"], ["s"], alpha=0.7), helper.make_node("Max", ["s", "r"], ["y"])]
    raise ValueError(tail)


TAILS = ["relu", "residual_relu", "channel_clip", "scale_hardswish", "row_input_sigmoid", "elu_max"]
CONV_PATHS = {
    # (X, W, attributes, bias, the shaders whose epilogue variant runs): resnet50's paths first
    "winograd": ((1, 16, 10, 9), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}, True, {"winograd.comp"}),
    "pointwise_pairs": ((2, 24, 6, 8), (40, 24, 1, 1), {}, True, {"matmul.comp"}),
    "pointwise_odd_pixels": ((1, 33, 7, 7), (70, 33, 1, 1), {}, False, {"conv.comp"}),
    "3x3_stride2_pads": ((1, 12, 13, 11), (40, 12, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 2]}, True,
                         {"conv.comp"}),
    "7x7_stem": ((1, 3, 30, 28), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, True, {"conv.comp"}),
    "im2col": ((1, 24, 13, 11), (128, 24, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 2]}, True, {"matmul.comp"}),
    "grouped_direct": ((2, 12, 9, 7), (6, 4, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}, False, {"conv.comp"}),
    "depthwise": ((1, 8, 9, 9), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}, True, {"conv.comp"}),
    "1d": ((2, 10, 30), (24, 10, 3), {"strides": [2], "pads": [1, 1]}, True, {"conv.comp"}),
    "3d": ((1, 4, 5, 6, 7), (9, 4, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}, True, {"conv.comp"}),
}


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("path", list(CONV_PATHS))
def test_conv_epilogues_compute_what_the_nodes_compute(ep_devices, path, tail):
    xs, ws, attrs, bias, shaders = CONV_PATHS[path]
    model, feeds = _conv_model(xs, ws, attrs, tail, bias)
    _check(model, feeds, shaders)


@pytest.mark.parametrize("path", ["pointwise_odd_pixels", "3x3_stride2_pads", "grouped_direct"])
def test_conv_epilogues_without_subgroups_take_the_implicit_gemm(ep_devices, path):
    """subgroups=0: conv.comp's MODE 0 and 1 (gemm()), whose stores are laid out by pc.wn."""
    xs, ws, attrs, bias, _ = CONV_PATHS[path]
    model, feeds = _conv_model(xs, ws, attrs, "residual_relu", bias)
    _check(model, feeds, {"conv.comp"}, options={"subgroups": "0"})


def test_float16_conv_epilogues_round_as_the_nodes_do(ep_devices):
    for path in ("winograd", "pointwise_odd_pixels", "3x3_stride2_pads"):
        xs, ws, attrs, bias, _ = CONV_PATHS[path]
        model, feeds = _conv_model(xs, ws, attrs, "residual_relu", bias, dtype=np.float16)
        _check(model, feeds)


def test_float16_sums_in_epilogue_variants(ep_devices):
    """fp16_accumulation=float16: conv.comp's ACC16 EPILOGUE variant (float16 sums, each mode float16 takes) gives
    the bits of the nodes run one by one with the same option (tests/test_fp16_accumulation.py bounds the sums)."""
    for path in ("pointwise_odd_pixels", "3x3_stride2_pads", "grouped_direct"):
        xs, ws, attrs, bias, shaders = CONV_PATHS[path]
        model, feeds = _conv_model(xs, ws, attrs, "residual_relu", bias, dtype=np.float16)
        # (the CPU EP within K x 2^-11 of values near 1: K <= 108 here)
        used = _check(model, feeds, shaders, options={"fp16_accumulation": "float16"}, close={"rtol": 0.06, "atol": 0.06})
        assert {d for _, d in used} == {"float16+acc16+epilogue"}, used


@pytest.fixture
def tiles_only(monkeypatch):
    """matmul.comp's modes under test: the small products mlas_gemm.comp would take (the CPU EP's order) go to them
    here too (test_cpu_ep_order.py tests that shader's epilogue)."""
    monkeypatch.setattr(mlas_gemm, "ENABLED", False)


MATMUL_CASES = {
    # (A, B, the products matmul.comp's modes take)
    "broadcast_pairs": ((70, 34), (34, 66)),
    "broadcast_odd": ((2, 3, 37, 9), (9, 33)),
    "few_rows": ((3, 16), (16, 33)),
    "few_rows_interleaved": ((1, 64), (64, 40)),
}


@pytest.mark.parametrize("mode", ["lavapipe", "direct", "tiled"])
@pytest.mark.parametrize("case", list(MATMUL_CASES))
def test_matmul_epilogues_compute_what_the_nodes_compute(ep_devices, monkeypatch, tiles_only, case, mode):
    if mode != "lavapipe":  # (matmul.comp's other modes for many rows: the registers-only one, the shared tiles)
        monkeypatch.setattr(matmul, "BROADCAST", False)
        monkeypatch.setattr(matmul, "DIRECT_ON_CPU_DEVICES", mode == "direct")
    a_shape, b_shape = MATMUL_CASES[case]
    for tail in ("residual_relu", "row_input_sigmoid", "elu_max"):
        rng = np.random.default_rng(3)
        a = rng.standard_normal(a_shape).astype(np.float32)
        a.flat[:4] = SPECIAL
        inits = [numpy_helper.from_array(rng.standard_normal(b_shape).astype(np.float32), "w")]
        inputs, feeds = [_vi("a", list(a_shape))], {"a": a}
        out = a_shape[:-1] + b_shape[-1:]
        nodes = [helper.make_node("MatMul", ["a", "w"], ["c"])] + _tail(tail, out, -2, inputs, inits, feeds, rng,
                                                                        np.float32)
        _check(_model(nodes, inputs, inits), feeds, {"matmul.comp"})


def test_gemm_epilogues_with_bias_and_a_column_operand(ep_devices, tiles_only):
    rng = np.random.default_rng(4)
    for trans_b, c_shape in ((1, (33,)), (0, (40, 1)), (1, (40, 33))):
        a = rng.standard_normal((40, 20)).astype(np.float32)
        a.flat[:4] = SPECIAL
        w = rng.standard_normal((33, 20) if trans_b else (20, 33)).astype(np.float32)
        inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(c_shape).astype(
            np.float32), "cb"), numpy_helper.from_array(rng.standard_normal(33).astype(np.float32), "k")]
        nodes = [helper.make_node("Gemm", ["a", "w", "cb"], ["c"], transB=trans_b, alpha=0.5, beta=2.0),
                 helper.make_node("Add", ["c", "k"], ["s"]), helper.make_node("LeakyRelu", ["s"], ["y"], alpha=0.1)]
        _check(_model(nodes, [_vi("a", [40, 20])], inits), {"a": a}, {"matmul.comp"})


def test_groups_an_epilogue_cannot_read_keep_their_producer(ep_devices):
    """An operand the producer's stores do not index (along the width of a Conv's output), a second tensor, and
    a residual of undeclared shape: the elementwise nodes fuse (or run) without the Conv, which runs alone."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "w")
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    cases = [
        ([_vi("r", [6])], {"r": rng.standard_normal(6).astype(np.float32)}, ["Add"]),
        ([_vi("r", [1, 8, 6, 6]), _vi("q", [1, 8, 6, 6])],
         {"r": rng.standard_normal((1, 8, 6, 6)).astype(np.float32),
          "q": rng.standard_normal((1, 8, 6, 6)).astype(np.float32)}, ["Add", "Mul"]),
        ([_vi("r", ["n", 8, 6, 6])], {"r": rng.standard_normal((1, 8, 6, 6)).astype(np.float32)}, ["Add"]),
    ]
    for inputs, feeds, ops in cases:
        names = ["r", "q"]
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
        value = "c"
        for k, op in enumerate(ops):
            nodes.append(helper.make_node(op, [value, names[k]], [f"s{k}"]))
            value = f"s{k}"
        nodes.append(helper.make_node("Relu", [value], ["y"]))
        _check(_model(nodes, [_vi("x", [1, 4, 6, 6])] + inputs, [w]), {"x": x, **feeds}, shaders=set(), groups=2)


@pytest.mark.parametrize("producer", ["matmul.comp", "mlas_gemm.comp"])
@pytest.mark.parametrize("steps", [[("Sub", "c", "c")], [("Mul", "c", "zero"), ("Add", "s0", "two")],
                                   [("Sub", "c", "c"), ("Pow", "s0", "two")]])
def test_steps_that_a_compiler_could_fold_keep_infinities_and_nan(ep_devices, monkeypatch, steps, producer):
    """inf - inf, inf * 0 are NaN: a compiler that sees one step's value go into the next may fold c - c to 0 or
    c * 0 to 0 as if no value were infinite (MatMul, Sub, Pow gave 0 for NaN before epilogue.glsl laundered the
    values each step reads)."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((40, 8)).astype(np.float32)
    a[:4, 0] = [np.inf, -np.inf, np.nan, 1e30]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(2, np.float32), "two")]
    nodes = [helper.make_node("MatMul", ["a", "w"], ["c"])]
    for k, (op, x, z) in enumerate(steps):
        nodes.append(helper.make_node(op, [x, z], ["y" if k == len(steps) - 1 else f"s{k}"]))
    if producer == "matmul.comp":
        monkeypatch.setattr(mlas_gemm, "ENABLED", False)
    elif not host.mlas_fma3():
        pytest.skip("mlas_gemm.comp follows the CPU EP on x86-64 with AVX2 and FMA")
    # (cpu_fusions 0: else a Mul by a scalar constant joins the MatMul as FusedMatMul's alpha, as on the CPU EP)
    _check(_model(nodes, [_vi("a", [40, 8])], inits), {"a": a}, {producer}, options={"cpu_fusions": "0"})


def test_random_elementwise_graphs_after_a_producer_compute_what_their_nodes_compute(ep_devices):
    """test_fusion's random graphs fed by a MatMul or a Conv (special values in its input): every output bit for
    bit as with fuse=0. MatMul and Conv seed 366 (Sub, then Pow) gave 0 for NaN while the epilogue's steps read each
    other's results as they are (epilogue.glsl launders them): a compiler may fold a step as if no value were NaN
    or infinite."""
    producer_groups = 0
    for kind in ("matmul", "conv"):
        for seed in [366, *range(400, 420)]:
            model, feeds = _fed_by(kind, seed)
            first = max(_kernels(), default=0)
            session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options=EPILOGUES)
            got = session.run(None, feeds)
            producer_groups += any(k.spec.op == "FusedEpilogue" for i, k in list(_kernels().items()) if i > first)
            want = runner.vkep_session(model, ep_options={"fuse": "0"}).run(None, feeds)
            for g, w in zip(got, want, strict=True):
                same = (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))
                assert same.all(), (kind, seed, g[~same][:4], w[~same][:4])
    assert producer_groups >= 16, producer_groups


def _fed_by(kind: str, seed: int) -> tuple[onnx.ModelProto, dict]:
    """random_graph with its first node reading, instead of x, a MatMul or a Conv (of x's shape) of an input with
    NaN and infinities."""
    model, feeds = random_graph(seed)
    graph, rng = model.graph, np.random.default_rng(seed + 1000)
    if kind == "matmul":
        w, a = rng.standard_normal((6, 5)) * 0.5, rng.standard_normal((2, 3, 4, 6))
        node = helper.make_node("MatMul", ["a", "w"], ["p"])
    else:
        w, a = rng.standard_normal((3, 2, 3, 3)) * 0.5, rng.standard_normal((2, 2, 4, 5))
        node = helper.make_node("Conv", ["a", "w"], ["p"], pads=[1, 1, 1, 1])
    a = a.astype(np.float32)
    a.flat[:3] = SPECIAL[:3]
    first = graph.node[0]
    first.input[list(first.input).index("x")] = "p"
    graph.node.insert(0, node)
    graph.initializer.append(numpy_helper.from_array(w.astype(np.float32), "w"))
    graph.input.append(_vi("a", list(a.shape)))
    return model, {"a": a, **feeds}


def test_fused_producers_replay_natively_and_in_captured_graphs(ep_devices):
    """After its first run a fused Conv + Sum + Relu (Winograd: scratch memory; the residual another node's
    value) replays from C, and graph capture records and replays it."""
    rng = np.random.default_rng(8)
    xs = (1, 16, 10, 9)
    inits = [numpy_helper.from_array(rng.uniform(-0.2, 0.2, (16, 16, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.uniform(-0.2, 0.2, (8, 16, 1, 1)).astype(np.float32), "w2")]
    nodes = [helper.make_node("Relu", ["x"], ["x1"]),  # (the feed's reader: it enters Python)
             helper.make_node("Conv", ["x1", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sum", ["c", "x1"], ["s"]), helper.make_node("Relu", ["s"], ["t"]),
             helper.make_node("Conv", ["t", "w2"], ["y"])]
    model = _model(nodes, [_vi("x", list(xs))], inits)
    unfused = runner.vkep_session(model, ep_options={"fuse": "0"})
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options=EPILOGUES)
    feeds = {"x": rng.standard_normal(xs).astype(np.float32)}
    session.run(None, feeds)
    vkep.reset_stats()
    for _ in range(3):
        _same(session.run(None, feeds)[0], unfused.run(None, feeds)[0])
    process = vkep.stats()["process"]
    assert process["nodes_replayed_natively"] >= 2 * 3, process  # (the fused node and the last Conv each run)

    from test_graph_capture import _bound, _node_executions

    captured = runner.vkep_session(model, ep_options={**EPILOGUES, "enable_graph_capture": "1"})
    binding, values = _bound(captured, ep_devices, {"x": xs}, {"y": (1, 8, 10, 9)})
    executed = []
    for _ in range(3):
        x = rng.standard_normal(xs).astype(np.float32)
        values["x"].update_inplace(x)
        before = _node_executions()
        captured.run_with_iobinding(binding)
        executed.append(_node_executions() - before)
        _same(values["y"].numpy(), unfused.run(None, {"x": x})[0])
    assert executed[0] == 2 * 3 and executed[1:] == [0, 0], executed


def test_auto_follows_the_tuning_table(ep_devices):
    """`epilogues=auto` groups a producer where vkep/kernels/tuning.json does not say it costs more than it gives
    on the device's class (on lavapipe it does: cold start); `1` groups it anyway, `0` never."""
    from vkep.gpu import device
    from vkep.kernels import tuning
    from vkep.ort import epilogues

    model, feeds = _conv_model((1, 8, 6, 6), (8, 8, 3, 3), {"pads": [1, 1, 1, 1]}, "relu")
    info = device.usable_devices()[0]
    use = tuning.choice(info, "epilogues", epilogues.DEFAULT)["use"]
    for wanted, executions in (("auto", 1 if use else 2), ("1", 1), ("0", 2)):
        session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"epilogues": wanted})
        assert _executions(session, feeds)[1] == executions, wanted
