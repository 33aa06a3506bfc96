"""MatMul and Gemm in each of matmul.comp's modes (tiled with shared memory, registers only, broadcast, few rows)
against ORT's CPU EP: shapes off the 64x64 tile, broadcast batches, transposes, C, float16."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnx import helper
from test_conv import single_node

from vkep import runner
from vkep.kernels import matmul, mlas_gemm


@pytest.fixture(autouse=True)
def tiles_only(monkeypatch):
    """matmul.comp's modes under test: products mlas_gemm would take (the CPU EP's order, test_mlas_gemm.py) go to
    them here too."""
    monkeypatch.setattr(mlas_gemm, "ENABLED", False)


@pytest.fixture(params=[(True, True), (True, False), (False, False)],
                ids=["broadcast-on-cpu-devices", "registers-on-cpu-devices", "tiled"])
def mode(request, monkeypatch):
    # the plugin runs in this interpreter: its kernels read the module attributes when they record
    direct, broadcast = request.param
    monkeypatch.setattr(matmul, "DIRECT_ON_CPU_DEVICES", direct)
    monkeypatch.setattr(matmul, "BROADCAST", broadcast)
    return request.param


def _check(model_inputs: dict[str, tuple], op: str, dtype: str = "float32", **attrs):
    """The node on vkep against the CPU EP; vkep's session (its kernels live as long as it)."""
    rng = np.random.default_rng(1)
    feeds = {n: rng.uniform(-1, 1, s).astype(dtype) for n, s in model_inputs.items()}
    session = runner.vkep_session(single_node(op, model_inputs, 13, dtype, **attrs), disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    ref = runner.cpu_session(single_node(op, model_inputs, 13, "float32", **attrs))
    want = ref.run(None, {n: v.astype(np.float32) for n, v in feeds.items()})[0]
    for _ in range(2):  # the second run replays the recorded plan
        np.testing.assert_allclose(session.run(None, feeds)[0].astype(np.float32), want,
                                   **dict(tolerance(dtype), atol=2e-2 if dtype == "float16" else 1e-4))
    return session


@pytest.mark.parametrize("a, b", [((70, 33), (33, 130)), ((9, 64), (64, 64)), ((3, 65, 17), (17, 66)),
                                  ((2, 1, 40, 24), (3, 24, 9)), ((4, 10), (10,)), ((5,), (5, 70))])
def test_matmul(mode, a, b):
    _check({"a": a, "b": b}, "MatMul")


def test_matmul_float16(mode):
    _check({"a": (2, 72, 48), "b": (48, 80)}, "MatMul", "float16")


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm(mode, trans_a, trans_b):
    m, k, n = 67, 31, 90
    a = (k, m) if trans_a else (m, k)
    b = (n, k) if trans_b else (k, n)
    _check({"a": a, "b": b, "c": (n,)}, "Gemm", transA=trans_a, transB=trans_b, alpha=0.5, beta=2.0)


@pytest.mark.parametrize("op, m, k", [("MatMul", 1, 64), ("MatMul", 3, 30), ("MatMul", 40, 64), ("Gemm", 1, 128),
                                      ("Gemm", 8, 30), ("Gemm", 70, 20)])
def test_constant_weights(mode, op, m, k):
    """Weights as initializers, so they are prepacked: on CPU devices B stays (or becomes) [N, K], read with
    vec4 loads along K in the few-rows mode when K % 4 == 0, and through strides in the other modes."""
    from onnx import TensorProto, numpy_helper

    rng = np.random.default_rng(2)
    n = 72
    w = rng.uniform(-1, 1, (n, k) if op == "Gemm" else (k, n)).astype(np.float32)
    attrs = {"transB": 1} if op == "Gemm" else {}
    node = helper.make_node(op, ["a", "w"], ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("a", TensorProto.FLOAT, (m, k))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    feeds = {"a": rng.uniform(-1, 1, (m, k)).astype(np.float32)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **dict(tolerance("float32"), atol=1e-4))


def _weight_model(a_shape: tuple, k: int, n: int, op: str = "MatMul", seed: int = 3):
    from onnx import TensorProto, numpy_helper

    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, (n, k) if op == "Gemm" else (k, n)).astype(np.float32)
    attrs = {"transB": 1} if op == "Gemm" else {}
    graph = helper.make_graph([helper.make_node(op, ["a", "w"], ["y"], **attrs)], op,
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    return model, {"a": rng.uniform(-1, 1, a_shape).astype(np.float32)}


@pytest.mark.parametrize("a_shape, k, n, pairs", [
    ((1, 16), 16, 8, True), ((1, 50), 50, 7, True),  # K past the last 16: a partial step; N off the lanes
    ((2, 34), 34, 300, True),  # N past one workgroup's 256 columns
    ((9, 64), 64, 1, True), ((16, 18), 18, 40, True),  # rows 9..16: a second workgroup row; N = 1
    ((2, 3, 40), 40, 24, True),  # batch dimensions (strides even)
    ((1, 33), 33, 16, False), ((2, 3, 33), 33, 24, False),  # K odd: vec4 / scalar loads
    ((3, 2), 2, 5, True), ((1, 0), 0, 6, False)])  # K = 0: y = 0
@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
def test_few_rows_pairs_boundaries(monkeypatch, op, a_shape, k, n, pairs):
    """The few-rows mode's pair loads (PAIRS, CPU devices) at their boundaries, against the CPU EP; that the
    mode ran (or did not, where K is odd) is checked through the planner's last answer (the session's
    kernel; the first comes from GetCapability's dry run, on B as the graph holds it)."""
    if op == "Gemm" and len(a_shape) != 2:
        pytest.skip("Gemm takes 2-D A")
    answers = []
    decide = matmul._Tiled._pair_mode
    monkeypatch.setattr(matmul._Tiled, "_pair_mode", lambda *args: answers.append(decide(*args)) or answers[-1])
    model, feeds = _weight_model(a_shape, k, n, op)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **dict(tolerance("float32"), atol=1e-4))
    if k:  # (a constant B is interleaved for the pair loads: mode 2)
        assert answers and answers[-1] == (2 if pairs else 0), answers


def test_few_rows_pairs_long_k(monkeypatch):
    """K = 70,000: past what one invocation may loop over one element at a time (60,000), not in the pair
    mode's 16-wide steps: that mode sums it whole (the CPU EP's answer), never cut."""
    answers = []
    decide = matmul._Tiled._pair_mode
    monkeypatch.setattr(matmul._Tiled, "_pair_mode", lambda *args: answers.append(decide(*args)) or answers[-1])
    model, feeds = _weight_model((1, 70_000), 70_000, 9)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-3)
    assert answers[-1], answers


def test_interleaved_weight_with_symbolic_rows(monkeypatch):
    """A graph whose rows are symbolic: MatMul's constant B is interleaved for the pair loads, the only mode
    that reads it then, also for runs with more rows than the few-rows mode's usual 16 (workgroup rows)."""
    answers = []
    decide = matmul._Tiled._pair_mode
    monkeypatch.setattr(matmul._Tiled, "_pair_mode", lambda *args: answers.append(decide(*args)) or answers[-1])
    model, _ = _weight_model((1, 64), 64, 40)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "m"
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    cpu = runner.cpu_session(model)
    for m in (3, 37, 1):
        feeds = {"a": np.random.default_rng(m).uniform(-1, 1, (m, 64)).astype(np.float32)}
        np.testing.assert_allclose(session.run(None, feeds)[0], cpu.run(None, feeds)[0],
                                   **dict(tolerance("float32"), atol=1e-4))
        assert answers[-1] == 2, answers


def _matmul_pipelines_since(first_id: int) -> tuple[list, object]:
    """The matmul.comp pipelines' specialization constants (by name) of the MatMul/Gemm kernels made after first_id,
    and one of those kernels."""
    from test_conv import kernels

    made = [k for i, k in list(kernels().items()) if i > first_id and k.spec.op in ("MatMul", "Gemm")]
    return [dict(c) for k in made for shader, _, c in k.pipelines if shader == "matmul.comp"], made[-1]


BROADCAST_CASES = {
    # (inputs, attributes, (A_PAIRS, B_PAIRS) the broadcast mode must take)
    "odd_m_n_k": ({"a": (70, 33), "b": (33, 131)}, {}, (0, 0)),  # K odd: scalar loads, a zeroed half step
    "k_odd_n_even": ({"a": (70, 33), "b": (33, 130)}, {}, (0, 1)),
    "pairs_both": ({"a": (67, 48), "b": (48, 90)}, {}, (1, 1)),  # M, N off the 32 x 64 block
    "n_odd": ({"a": (33, 40), "b": (40, 75)}, {}, (1, 0)),
    "k_zero": ({"a": (20, 0), "b": (0, 10)}, {}, (1, 1)),  # y = 0
    "batch_broadcast": ({"a": (2, 1, 40, 24), "b": (3, 24, 10)}, {}, (1, 1)),
    "a_batch_b_2d": ({"a": (3, 65, 18), "b": (18, 66)}, {}, (1, 1)),
    "gemm_bias_per_column": ({"a": (67, 32), "b": (32, 90), "c": (90,)}, {"alpha": 0.5, "beta": 2.0}, (1, 1)),
    "gemm_bias_per_row": ({"a": (40, 16), "b": (16, 20), "c": (40, 1)}, {}, (1, 1)),
    "gemm_trans_a": ({"a": (31, 67), "b": (31, 90), "c": (90,)}, {"transA": 1}, (0, 1)),
    "gemm_trans_b": ({"a": (67, 30), "b": (90, 30)}, {"transB": 1}, (1, 2)),
    "gemm_trans_both_odd": ({"a": (31, 67), "b": (91, 31)}, {"transA": 1, "transB": 1}, (0, 0)),
}


@pytest.mark.parametrize("case", list(BROADCAST_CASES))
def test_broadcast_mode(ep_devices, case):
    """Many-row products on a CPU device with 8-wide subgroups run in matmul.comp's broadcast mode (3) with the
    pair loads their strides allow, and agree with the CPU EP; on other devices they never take it."""
    from test_conv import kernels

    inputs, attrs, pairs = BROADCAST_CASES[case]
    op = "Gemm" if "c" in inputs or attrs else "MatMul"
    first = max(kernels(), default=0)
    session = _check(inputs, op, **attrs)  # noqa: F841 (its kernels live as long as it)
    constants, kernel = _matmul_pipelines_since(first)
    info = kernel.impl.device_info  # (the device's properties, not the planner's answer)
    if info.device_type == "cpu" and info.subgroup_size == 8:
        assert {c["mode"] for c in constants} == {matmul.MODE_BROADCAST}
        assert {(c["a_pairs"], c["b_pairs"]) for c in constants} == {pairs}
    else:
        assert matmul.MODE_BROADCAST not in {c["mode"] for c in constants}


def test_broadcast_mode_declines_c_per_element(ep_devices):
    """A Gemm C that varies along both axes is left to the registers-only mode (matmul.comp says why)."""
    from test_conv import kernels

    first = max(kernels(), default=0)
    session = _check({"a": (40, 16), "b": (16, 20), "c": (40, 20)}, "Gemm", beta=0.5)  # noqa: F841
    constants, _ = _matmul_pipelines_since(first)
    assert constants and matmul.MODE_BROADCAST not in {c["mode"] for c in constants}


def test_broadcast_mode_long_k(ep_devices):
    """K = 70,001 (odd, past the element-at-a-time loop budget): the broadcast mode sums it in pairs, whole."""
    inputs = {"a": (20, 70_001), "b": (70_001, 9)}
    rng = np.random.default_rng(4)
    feeds = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in inputs.items()}
    model = single_node("MatMul", inputs, 13)
    want = runner.cpu_session(model).run(None, feeds)[0]  # (|y| ~ 100: float32 sums of 70,001 terms differ ~1e-3)
    got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=3e-3)


@pytest.mark.parametrize(("k", "broadcast", "split"), [(87_264, False, False), (87_265, False, True),
                                                     (125_000, True, True)])
def test_tiled_mode_long_k_within_lavapipes_loop_count(ep_devices, monkeypatch, k, broadcast, split):
    """matmul.comp's tiled mode spends 11 loop steps a step of 16 of K as lavapipe counts them (matmul.tiled_loops:
    its A and B staging loops), not 1: K = 87,264 is the longest it sums in one dispatch (59,995 steps); past it the
    product is split (splitk.comp). K = 125,000 (past the broadcast mode's 120,000) took the tiled mode whole under the
    old count and missed its last terms: y 0.095 for 5.1. The decisive terms last, equal to the CPU EP."""
    from test_conv import kernels

    monkeypatch.setattr(matmul, "BROADCAST", broadcast)  # (off: K past the registers mode's 60,000 takes the tiles)
    inputs = {"a": (20, k), "b": (k, 9)}
    feeds = {"a": np.full(inputs["a"], 1e-3, np.float32), "b": np.full(inputs["b"], 1e-3, np.float32)}
    feeds["a"][:, -1], feeds["b"][-1] = 1.0, 5.0
    model = single_node("MatMul", inputs, 13)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-3)
    assert (("splitk.comp", "float32") in _shaders_since(first, "MatMul")) == split


SPLIT_CASES = {
    # (op, inputs, attributes, workgroups the device runs at once): K cut into slices, summed by splitk.comp
    "k_past_one_dispatch": ("MatMul", {"a": (3, 1_000_000), "b": (1_000_000, 5)}, {}, 2),  # (no mode sums it whole)
    "few_tiles_long_k": ("MatMul", {"a": (64, 16384), "b": (16384, 64)}, {}, 2),
    "batched": ("MatMul", {"a": (3, 8, 8192), "b": (8192, 16)}, {}, 8),
    "gemm_transposes_alpha_beta_c": ("Gemm", {"a": (8192, 16), "b": (24, 8192), "c": (16, 24)},
                                     {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, 2),
}


def _split_for_speed_below(monkeypatch, tiles: int) -> None:
    """Products of fewer 64 x 64 tiles split for speed in this test (this device class's measured entry in
    tuning.json splits none: lavapipe gains nothing from it)."""
    from vkep.gpu import device
    from vkep.kernels import tuning

    entries = tuning.table().setdefault(tuning.device_class(device.usable_devices()[0]), {})
    monkeypatch.setitem(entries, "splitk", {"tiles": tiles})


def _shaders_since(first: int, op: str) -> set[tuple[str, str]]:
    from test_conv import kernels

    return {(shader, dtype) for i, k in kernels().items() if i > first and k.spec.op == op
            for shader, dtype, _ in k.pipelines}


@pytest.mark.parametrize("case", sorted(SPLIT_CASES))
def test_split_k(ep_devices, monkeypatch, case):
    """Split-K: a K no dispatch can sum whole (declined before), or a product with fewer tiles of y than the device
    runs workgroups at once, as float32 partial products over slices of K summed by splitk.comp (alpha, C) against
    the CPU EP."""
    from test_conv import kernels

    op, inputs, attrs, parallel = SPLIT_CASES[case]
    _split_for_speed_below(monkeypatch, parallel)
    rng = np.random.default_rng(6)
    feeds = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in inputs.items()}
    model = single_node(op, inputs, 13, **attrs)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):  # (the second run replays the plan)
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=2e-3)
    assert ("splitk.comp", "float32") in _shaders_since(first, op)


def test_split_k_not_without_a_divisor(ep_devices):
    """K = 8191 (prime): no equal slices, so the product runs whole, as before."""
    from test_conv import kernels

    first = max(kernels(), default=0)
    session = _check({"a": (16, 8191), "b": (8191, 16)}, "MatMul")  # noqa: F841 (its kernels live as long as it)
    assert {shader for shader, _ in _shaders_since(first, "MatMul")} == {"matmul.comp"}


def test_split_k_with_a_fused_epilogue(ep_devices, monkeypatch):
    """A split product with a residual Add and a Relu fused into it (epilogues=1): splitk.comp's EPILOGUE variant,
    bit for bit as the nodes one by one."""
    from onnx import TensorProto
    from test_conv import kernels

    _split_for_speed_below(monkeypatch, 2)
    f32 = TensorProto.FLOAT
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    shapes = {"a": (24, 16384), "b": (16384, 40), "r": (24, 40)}
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, f32, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", f32, [24, 40])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(8)
    feeds = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in shapes.items()}
    first = max(kernels(), default=0)
    fused = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"epilogues": "1"})
    got = fused.run(None, feeds)[0]
    assert ("splitk.comp", "float32+epilogue") in _shaders_since(first, "FusedEpilogue")
    want = runner.vkep_session(model, ep_options={"fuse": "0"}).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("form", ["matmul", "matmul_batched", "matmul_weight", "gemm", "gemm_trans_c_row"])
def test_float64_products_equal_the_cpu_ep(ep_devices, form):
    """float64 MatMul and Gemm (scikit-learn's double models: logistic regression, PCA, MLPs) in double
    (matmul.comp's FLOAT64 variant): transposes, alpha, beta, a broadcast C, a constant B, batches; every node on
    vkep and within double rounding of the CPU EP (its products sum in another order)."""
    from onnx import TensorProto, numpy_helper

    rng = np.random.default_rng(11)
    a = rng.normal(0, 1, (37, 70))
    inits, attrs = [], {}
    if form == "matmul":
        b, inputs, node = rng.normal(0, 1, (70, 19)), ["a", "b"], "MatMul"
    elif form == "matmul_batched":
        a = rng.normal(0, 1, (3, 37, 70))
        b, inputs, node = rng.normal(0, 1, (3, 70, 19)), ["a", "b"], "MatMul"
    elif form == "matmul_weight":
        b, inputs, node = rng.normal(0, 1, (70, 19)), ["a", "w"], "MatMul"
        inits.append(numpy_helper.from_array(b, "w"))
    else:
        trans = form == "gemm_trans_c_row"
        b = rng.normal(0, 1, (19, 70) if trans else (70, 19))
        inits.append(numpy_helper.from_array(rng.normal(0, 1, (1, 19) if trans else (37, 19)), "c"))
        inputs, node, attrs = ["a", "b", "c"], "Gemm", {"alpha": 0.75, "beta": -1.5, "transB": int(trans)}
    a.flat[:3] = [np.inf, np.nan, 1e300]
    feeds = {"a": a} if "w" in inputs else {"a": a, "b": b}
    graph = helper.make_graph([helper.make_node(node, inputs, ["y"], **attrs)], "f64_product",
                              [helper.make_tensor_value_info(k, TensorProto.DOUBLE, list(v.shape)) for k, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for *_, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):  # (the second run replays the plan)
        got = session.run(None, feeds)[0]
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
