"""float16 MatMul, Gemm and Conv on the device's matrix units (VK_KHR_cooperative_matrix, shaders/matmul_coop.comp).

No driver of Debian 12 offers cooperative matrices; Mesa 26's lavapipe does (8x8x8 float16 products with float32
sums). `tools/mesa_trixie.sh` (run by `./dev test`) sets up that driver and glslang 15 in a trixie root, and
`test_cases_on_mesa_26` runs this file again under it, where the cases below run instead of skipping. Each case
checks the CPU EP's answer and that every dispatch of the node went to matmul_coop.comp with `coopmat=1`
(matmul.comp with `coopmat=0`; `auto` follows vkep/kernels/tuning.json, which on lavapipe says matmul.comp)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnx import TensorProto, helper, numpy_helper
from test_conv import conv_with_constant_weights
from test_mesa26 import run_pytest_on_mesa_26

from vkep import runner
from vkep.gpu import device
from vkep.kernels import coopmat, tuning

VKEP = "VulkanExecutionProvider"


def has_coopmat() -> bool:
    return any(d.features.get("cooperativeMatrix") and d.coopmat for d in device.usable_devices())


needs_coopmat = pytest.mark.skipif(not has_coopmat(), reason="the device has no cooperative matrices (Mesa 26 "
                                   "lavapipe has: test_cases_on_mesa_26 runs these there)")


def kernels() -> dict:
    from vkep.ort.kernel import KERNELS

    return KERNELS


def product_model(op: str, a: tuple, b: tuple, c: tuple | None, weight: np.ndarray | None, **attrs):
    """One MatMul or Gemm node over float16 inputs (B a constant when `weight` is given)."""
    f16 = TensorProto.FLOAT16
    inputs = [helper.make_tensor_value_info("a", f16, list(a))]
    inits = []
    if weight is not None:
        inits.append(numpy_helper.from_array(weight, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", f16, list(b)))
    names = ["a", "b"]
    if c is not None:
        inputs.append(helper.make_tensor_value_info("c", f16, list(c)))
        names.append("c")
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", f16, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CASES = {
    # (op, A, B, C, B a constant, attributes)
    "matmul_tile_multiples": ("MatMul", (64, 32), (32, 48), None, False, {}),
    "matmul_odd_sizes": ("MatMul", (37, 29), (29, 45), None, False, {}),
    "matmul_k_past_a_tile_and_odd": ("MatMul", (17, 203), (203, 9), None, False, {}),
    "matmul_broadcast_batch": ("MatMul", (3, 2, 20, 24), (2, 24, 19), None, False, {}),
    "matmul_constant_b": ("MatMul", (2, 33, 40), (40, 27), None, True, {}),
    "gemm_transposes_bias": ("Gemm", (24, 35), (21, 24), (21,), False, {"transA": 1, "transB": 1}),
    "gemm_alpha_beta_full_c": ("Gemm", (40, 16), (16, 30), (40, 30), False, {"alpha": 0.5, "beta": 2.0}),
    "gemm_constant_b_transposed": ("Gemm", (19, 64), (70, 64), (1, 70), True, {"transB": 1}),
}


@needs_coopmat
@pytest.mark.parametrize("coop", ["1", "0"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_product_on_matrix_units(ep_devices, case, coop):
    op, a_shape, b_shape, c_shape, constant_b, attrs = CASES[case]
    rng = np.random.default_rng(7)
    a = rng.standard_normal(a_shape).astype(np.float16)
    b = rng.standard_normal(b_shape).astype(np.float16)
    feeds = {"a": a} if constant_b else {"a": a, "b": b}
    if c_shape is not None:
        feeds["c"] = rng.standard_normal(c_shape).astype(np.float16)
    model = product_model(op, a_shape, b_shape, c_shape, b if constant_b else None, **attrs)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"coopmat": coop})
    assert [ep for _, _, ep in runner.placement(session)] == [VKEP]
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):  # (the second run replays the recorded dispatch)
        got = session.run(None, feeds)[0]
        assert got.shape == want.shape and got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **tolerance("float16"))
    (kernel,) = [k for i, k in kernels().items() if i > first and k.spec.op == op]
    assert {shader for shader, _, _ in kernel.pipelines} == {"matmul_coop.comp" if coop == "1" else "matmul.comp"}


@needs_coopmat
def test_auto_follows_the_tuning_table(ep_devices):
    """`coopmat=auto` uses the matrix units where tuning.json does not say they are slower on this device's class
    (on lavapipe it does: they are emulated)."""
    (info,) = [d for d in device.usable_devices() if d.coopmat][:1]
    use = tuning.choice(info, "coopmat", coopmat.DEFAULT)["use"]
    model = product_model("MatMul", (64, 32), (32, 48), None, None)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    feeds = {"a": np.ones((64, 32), np.float16), "b": np.ones((32, 48), np.float16)}
    np.testing.assert_array_equal(session.run(None, feeds)[0], np.full((64, 48), 32, np.float16))
    (kernel,) = [k for i, k in kernels().items() if i > first and k.spec.op == "MatMul"]
    assert {shader for shader, _, _ in kernel.pipelines} == {"matmul_coop.comp" if use else "matmul.comp"}


@needs_coopmat
def test_float32_and_few_rows_stay_on_matmul_comp(ep_devices):
    """float32 products would lose their operands' precision in float16, and a few rows are the few-rows mode's (or
    mlas_gemm.comp's)."""
    for dtype, rows in (("float32", 64), ("float16", 4)):
        tp = TensorProto.FLOAT if dtype == "float32" else TensorProto.FLOAT16
        graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                                  [helper.make_tensor_value_info("a", tp, [rows, 32]),
                                   helper.make_tensor_value_info("b", tp, [32, 16])],
                                  [helper.make_tensor_value_info("y", tp, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        first = max(kernels(), default=0)
        session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"coopmat": "1"})
        session.run(None, {"a": np.ones((rows, 32), dtype), "b": np.ones((32, 16), dtype)})
        (kernel,) = [k for i, k in kernels().items() if i > first and k.spec.op == "MatMul"]
        # (not on the matrix units: matmul.comp, or for a small float32 product mlas_gemm.comp, the CPU EP's order)
        assert {shader for shader, _, _ in kernel.pipelines} in ({"matmul.comp"}, {"mlas_gemm.comp"}), (dtype, rows)


def test_coopmat_1_fails_cleanly_on_a_device_without_them(ep_devices):
    if has_coopmat():
        pytest.skip("the device has cooperative matrices")
    model = product_model("MatMul", (16, 16), (16, 16), None, None)
    with pytest.raises(Exception, match="coopmat=1.*cooperativeMatrix"):
        runner.vkep_session(model, ep_options={"coopmat": "1"})
    session = runner.vkep_session(model, ep_options={"coopmat": "0"})  # (the EP and device stay usable)
    assert [ep for _, _, ep in runner.placement(session)] == [VKEP]


def test_cases_on_mesa_26():
    """This file again, under Mesa 26 lavapipe (tools/mesa_trixie.sh), where the cases run: none may skip."""
    if has_coopmat():
        pytest.skip("this process's device has cooperative matrices itself: the cases ran here")
    res = run_pytest_on_mesa_26(__file__, "-rs", timeout=900)
    tail = (res.stdout + res.stderr)[-3000:]
    assert res.returncode == 0, tail
    summary = res.stdout.strip().splitlines()[-1]
    count = (len(CASES) + len(CONV_CASES)) * 2 + 4
    assert f"{count} passed" in summary and "failed" not in summary, tail


@needs_coopmat
def test_a_fused_epilogue_runs_on_the_matrix_units(ep_devices):
    """A float16 MatMul whose Add + Relu fuse into it (epilogues=1) runs matmul_coop.comp's EPILOGUE variant, bit for
    bit as its nodes one by one with coopmat=1."""
    f16 = TensorProto.FLOAT16
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, f16, s) for n, s in
                                           (("a", [37, 29]), ("b", [29, 45]), ("r", [37, 45]))],
                              [helper.make_tensor_value_info("y", f16, [37, 45])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(3)
    feeds = {k: rng.standard_normal(s).astype(np.float16) for k, s in (("a", (37, 29)), ("b", (29, 45)),
                                                                        ("r", (37, 45)))}
    first = max(kernels(), default=0)
    fused = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"coopmat": "1", "epilogues": "1"})
    got = fused.run(None, feeds)[0]
    (kernel,) = [k for i, k in kernels().items() if i > first and k.spec.op == "FusedEpilogue"]
    assert {(s, d) for s, d, _ in kernel.pipelines} == {("matmul_coop.comp", "float16+epilogue")}
    want = runner.vkep_session(model, ep_options={"coopmat": "1", "fuse": "0"}).run(None, feeds)[0]
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


CONV_CASES = {
    # (inputs, attributes): W and B initializers, as in models (prepacked: no Winograd where the units take a 3x3)
    "3x3_pads_bias": ({"x": (1, 8, 10, 12), "w": (16, 8, 3, 3), "b": (16,)}, {"pads": [1, 1, 1, 1]}),
    "3x3_stride2_batch2": ({"x": (2, 5, 11, 9), "w": (12, 5, 3, 3)}, {"strides": [2, 2], "pads": [1, 0, 1, 0]}),
    "1x1_pointwise_bias": ({"x": (2, 24, 7, 7), "w": (20, 24, 1, 1), "b": (20,)}, {}),
    "1d_dilated": ({"x": (1, 6, 30), "w": (10, 6, 3)}, {"dilations": [2]}),
    "stem_7x7": ({"x": (1, 3, 32, 32), "w": (16, 3, 7, 7), "b": (16,)}, {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
}


@needs_coopmat
@pytest.mark.parametrize("coop", ["1", "0"])
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_on_matrix_units(ep_devices, case, coop):
    """A float16 Conv as W x its patches (im2col.comp; X itself for 1x1 stride 1) on matmul_coop.comp with
    `coopmat=1`, against the CPU EP on the float32 twin; `coopmat=0` keeps conv.comp or Winograd."""
    inputs, attrs = CONV_CASES[case]
    model, reference, x = conv_with_constant_weights(inputs, "float16", **attrs)
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"coopmat": coop})
    assert [ep for _, _, ep in runner.placement(session)] == [VKEP]
    want = runner.cpu_session(reference).run(None, {"x": x.astype(np.float32)})[0]
    for _ in range(2):  # (the second run replays the recorded dispatches)
        got = session.run(None, {"x": x})[0]
        assert got.shape == want.shape and got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **tolerance("float16"))
    (kernel,) = [k for i, k in kernels().items() if i > first and k.spec.op == "Conv"]
    used = {shader for shader, _, _ in kernel.pipelines}
    if coop == "1":
        assert used == {"matmul_coop.comp"} | (set() if case.startswith("1x1") else {"im2col.comp"}), used
    else:
        assert "matmul_coop.comp" not in used and "im2col.comp" not in used, used


@needs_coopmat
def test_conv_epilogue_on_the_matrix_units(ep_devices):
    """A float16 Conv with a per-channel Add and a Relu fused into it (epilogues=1) on the matrix units: the channel
    of each value is its row of the product; bit for bit as the nodes one by one."""
    f16 = TensorProto.FLOAT16
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((12, 6, 3, 3)).astype(np.float16), "w")
    shift = numpy_helper.from_array(rng.standard_normal((1, 12, 1, 1)).astype(np.float16), "shift")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "shift"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f16, [1, 6, 9, 11])],
                              [helper.make_tensor_value_info("y", f16, [1, 12, 9, 11])], [w, shift])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": rng.standard_normal((1, 6, 9, 11)).astype(np.float16)}
    first = max(kernels(), default=0)
    fused = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"coopmat": "1", "epilogues": "1"})
    got = fused.run(None, feeds)[0]
    (kernel,) = [k for i, k in kernels().items() if i > first and k.spec.op == "FusedEpilogue"]
    assert ("matmul_coop.comp", "float16+epilogue") in {(s, d) for s, d, _ in kernel.pipelines}
    want = runner.vkep_session(model, ep_options={"coopmat": "1", "fuse": "0"}).run(None, feeds)[0]
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
