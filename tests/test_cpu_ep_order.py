"""Float32 products, Softmax and sums equal ORT's CPU EP to the last bit where vkep follows its order of operations
on x86-64 with AVX2 and FMA: MatMul, Gemm and FusedMatMul as MLAS's SGEMM (vkep/kernels/mlas_gemm.py,
shaders/mlas_sgemm.glsl: its M1 kernels for one row, B transposed or not, and for one column; the FMA3 kernel's K
blocks for a packed constant B and for each thread's share of the columns; a thread's share of one row; A's batch
folded into M; alpha, beta and C; an epilogue), ConvTranspose's columns through it, Softmax as MLAS's (softmax.comp
ORDER 1), ReduceSum and ReduceMean over trailing axes as Eigen's vectorised sum (reduce.comp ORDER 1)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_conv import kernels

from vkep import runner
from vkep.gpu import device
from vkep.kernels import base, host, matmul, mlas_gemm

F = TensorProto.FLOAT


def _follows() -> bool:
    return host.mlas_fma3()


def _model(nodes, inputs: dict, inits: dict, domain: str = ""):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(v, n) for n, v in inits.items()])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _check(model, feeds: dict, what: str) -> None:
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    assert all(p[2] == "VulkanExecutionProvider" for p in runner.placement(session)), runner.placement(session)
    (got,), (want,) = session.run(None, feeds), cpu.run(None, feeds)
    assert got.shape == want.shape
    apart = (got != want) & ~(np.isnan(got) & np.isnan(want))  # (NaN where the CPU EP gives NaN)
    assert not apart.any(), f"{what}: {np.count_nonzero(apart)} of {got.size} values apart"


# (A, B, B constant): attention's Q K^T and its weights times V (K 64 and 16, batched, both operands computed), one
# row (the M1 kernel: 4, 2 and 1 rows of B a step), a batch folded into M, a packed constant B (K blocks of 256: 768),
# one row of a constant B (packed: no M1), the columns' thread shares (K 300 over N 40: blocks from each share's
# size), the rows' (3 rows over 2 threads: the last row alone takes the M1 kernel); one column of B computed (MLAS's
# M1 kernel for a transposed B, A's rows its columns: a row share's blocks of 4, 2 and 1), batched, and constant
# (packed: the FMA3 kernel); a long GEMV (many blocks of columns, their loads shared); many batches of few blocks
# (folded into the grid: a box extractor's 102,400 products of 2 x 2 by 2 x 1 took 2.9 s, a workgroup each)
MATMULS = [((1, 12, 16, 64), (1, 12, 64, 16), False), ((1, 12, 16, 16), (1, 12, 16, 64), False),
           ((1, 67), (67, 32), False), ((4, 1, 67), (67, 32), False), ((8, 768), (768, 96), True),
           ((1, 300), (300, 40), True), ((16, 300), (300, 40), False), ((3, 11000), (11000, 2), False),
           ((300, 77), (77, 1), False), ((3, 20, 9), (3, 9, 1), False), ((1000, 13), (13, 1), True),
           ((1, 150), (150, 603), False), ((102_400, 2, 2), (102_400, 2, 1), False),
           ((7, 700, 3, 5), (7, 700, 5, 9), False)]


@pytest.mark.parametrize("a_shape,b_shape,constant", MATMULS, ids=[f"{a}x{b}{'c' if c else ''}" for a, b, c in MATMULS])
def test_matmul_equals_the_cpu_ep_bit_for_bit(ep_devices, a_shape, b_shape, constant):
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    rng = np.random.default_rng(sum(a_shape) + sum(b_shape))
    a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
    inputs = {"a": a_shape} if constant else {"a": a_shape, "b": b_shape}
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], inputs, {"b": b} if constant else {})
    _check(model, {"a": a} if constant else {"a": a, "b": b}, f"MatMul {a_shape} x {b_shape}")


# (A, B, C, attributes, B constant): C per column with alpha and beta (C times beta first), B transposed; one row with B
# transposed and computed (MlasSgemmKernelM1TransposeBAvx, C added last); C per element, A transposed; C with a
# thread's share of one row (its M1 kernel) beside the FMA3 kernel's rows; one column, A transposed (the M1 kernel
# with A and B's roles swapped); A transposed with K past 128 over few columns (its K blocks stay 128)
GEMMS = [((31, 50), (31, 1), (1,), {"transA": 1}, False), ((300, 20), (300, 40), (40,), {"transA": 1}, False),
         ((8, 200), (24, 200), (24,), {"alpha": 2.0, "beta": 0.5, "transB": 1}, True),
         ((1, 70), (30, 70), (30,), {"transB": 1}, False),
         ((1, 9), (9, 36), (1, 36), {}, False),
         ((40, 6), (40, 10), (6, 10), {"transA": 1, "beta": 3.0}, False),
         ((3, 11000), (11000, 2), (2,), {}, False)]


@pytest.mark.parametrize("a_shape,b_shape,c_shape,attrs,constant", GEMMS, ids=[str(g[:2]) for g in GEMMS])
def test_gemm_equals_the_cpu_ep_bit_for_bit(ep_devices, a_shape, b_shape, c_shape, attrs, constant):
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    rng = np.random.default_rng(len(b_shape) + b_shape[0])
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in (a_shape, b_shape, c_shape))
    inputs = {"a": a_shape, "c": c_shape} | ({} if constant else {"b": b_shape})
    model = _model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], **attrs)], inputs, {"b": b} if constant else {})
    _check(model, {"a": a, "c": c} | ({} if constant else {"b": b}), f"Gemm {a_shape} x {b_shape} {attrs}")


def test_fused_matmul_and_an_epilogue_equal_the_cpu_ep_bit_for_bit(ep_devices):
    """com.microsoft FusedMatMul (transposes and alpha), and a MatMul whose Add and Relu run in its epilogue."""
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 40, 8)).astype(np.float32), rng.standard_normal((2, 12, 40)).astype(np.float32)
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", alpha=0.5, transA=1, transB=1)
    _check(_model([node], {"a": a.shape, "b": b.shape}, {}, "com.microsoft"), {"a": a, "b": b}, "FusedMatMul")
    a, w = rng.standard_normal((20, 130)).astype(np.float32), rng.standard_normal((130, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["p"]), helper.make_node("Add", ["p", "bias"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    _check(_model(nodes, {"a": a.shape}, {"w": w, "bias": bias}), {"a": a}, "MatMul, Add, Relu")


# (X, W, attributes): ConvTranspose's columns W^T x X as the CPU EP's SGEMM (its PrePack transposes a constant W), an
# image a call, then col2im and the bias: Kokoro-82M's 1-D upsampling (kernel 2 x stride), 2-D with pads and output
# padding, batched images, dilations, one input position (one column: the M1 kernel, roles swapped)
CONV_TRANSPOSES = [((1, 64, 20), (64, 32, 20), {"strides": [10], "pads": [5, 5]}),
                   ((1, 16, 8, 8), (16, 8, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
                   ((2, 300, 8, 8), (300, 2, 2, 2), {"strides": [2, 2]}),  # (each image's columns split alone)
                   ((1, 32, 7, 9), (32, 16, 3, 3), {"dilations": [2, 2]}),
                   ((1, 40, 1), (40, 30, 4), {"strides": [4]})]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_TRANSPOSES, ids=[str(c[:2]) for c in CONV_TRANSPOSES])
@pytest.mark.parametrize("w_constant", [True, False])
def test_conv_transpose_equals_the_cpu_ep_bit_for_bit(ep_devices, x_shape, w_shape, attrs, w_constant):
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    rng = np.random.default_rng(sum(w_shape))
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.normal(0, 0.2, w_shape).astype(np.float32)
    bias = rng.standard_normal(w_shape[1]).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "bias"], ["y"], **attrs)
    inputs = {"x": x_shape} | ({} if w_constant else {"w": w_shape})
    model = _model([node], inputs, {"bias": bias} | ({"w": w} if w_constant else {}))
    _check(model, {"x": x} | ({} if w_constant else {"w": w}), f"ConvTranspose {x_shape} {w_shape} {attrs}")


def test_large_products_keep_the_tiles(ep_devices):
    """Past MAX_MACS (MAX_MACS_CONSTANT_B for a constant B), and for other types, a product takes matmul.comp's tiles,
    for their speed."""
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    computed, weights = (type("Probe", (), {"device_info": device.usable_devices()[0], "b_constant": constant})()
                         for constant in (False, True))
    f32, f16 = (type("T", (), {"dtype": t})() for t in ("float32", "float16"))

    def product(macs: int) -> dict:
        k = macs // 4096
        return matmul.product_members(64, 64, k, a=(0, 0, k, 1), b=(0, 0, 64, 1))

    def variant(kernel, t, members: dict, batches: int):  # (B read as the kernel's MatMul reads it: packed if constant)
        return mlas_gemm.variant(kernel, t, t, members, batches, packed=kernel.b_constant, trans_b=False,
                                 interleaved=False)
    assert variant(computed, f32, product(mlas_gemm.MAX_MACS), 1) is not None
    assert variant(computed, f32, product(mlas_gemm.MAX_MACS + 4096), 1) is None
    assert variant(weights, f32, product(mlas_gemm.MAX_MACS_CONSTANT_B), 1) is not None
    assert variant(weights, f32, product(mlas_gemm.MAX_MACS_CONSTANT_B + 4096), 1) is None
    assert variant(computed, f32, product(mlas_gemm.MAX_MACS), 2) is None
    assert variant(computed, f16, product(4096), 1) is None
    # ConvTranspose's columns W^T X of a constant W: a weight layer's bound, whichever operand is the constant
    for macs, exact in ((mlas_gemm.MAX_MACS_CONSTANT_B, True), (mlas_gemm.MAX_MACS_CONSTANT_B + 4096, False)):
        found = mlas_gemm.variant(computed, f32, f32, product(macs), 1, packed=False, trans_b=False,
                                  interleaved=False, weights=True)
        assert (found is not None) == exact


# (op, A, B, attributes, B constant, on mlas_gemm.comp): the longest K of an invocation's loop budget as lavapipe counts
# it (mlas_gemm.invocation_loops: 4 rows' FMA3 chain in pairs 3 steps a 1 of K; one row of B transposed, 4 columns
# one by one through the M1 kernel k + 23 each; one row of a packed B in pairs 1.5 a 1 of K), then past it (matmul.comp,
# within float32 rounding). The old count (K up to 60,000, 1 step each) took 8 x 20,001 x 8 and both K 60,000 Gemms
# and cut them short (y 0 for 5.02 and 5.06)
LONG_K = [("MatMul", (4, 19570), (19570, 4), {}, False, True), ("MatMul", (4, 19572), (19572, 4), {}, False, False),
          ("MatMul", (8, 20001), (20001, 8), {}, False, False),
          ("Gemm", (1, 14977), (4, 14977), {"transB": 1}, False, True),
          ("Gemm", (1, 60000), (4, 60000), {"transB": 1}, False, False),
          ("Gemm", (1, 38356), (4, 38356), {"transB": 1}, True, True),
          ("Gemm", (1, 60000), (4, 60000), {"transB": 1}, True, False)]


@pytest.mark.parametrize("op,a_shape,b_shape,attrs,constant,exact", LONG_K,
                         ids=[f"{c[0]}{c[1]}x{c[2]}{'c' if c[4] else ''}" for c in LONG_K])
def test_long_k_within_lavapipes_loop_count(ep_devices, op, a_shape, b_shape, attrs, constant, exact):
    """The decisive terms last (A's last column 1, B's last row 5, the rest 1e-3): a loop cut short misses them."""
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    a, b = np.full(a_shape, 1e-3, np.float32), np.full(b_shape, 1e-3, np.float32)
    a[:, -1] = 1.0
    if attrs.get("transB"):
        b[:, -1] = 5.0
    else:
        b[-1] = 5.0
    inputs = {"a": a_shape} if constant else {"a": a_shape, "b": b_shape}
    model = _model([helper.make_node(op, ["a", "b"], ["y"], **attrs)], inputs, {"b": b} if constant else {})
    feeds = {"a": a} if constant else {"a": a, "b": b}
    first = max(kernels(), default=0)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    got, want = session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]
    shaders = {shader for i, k in kernels().items() if i > first for shader, _, _ in k.pipelines}
    if exact:  # (mlas_gemm.comp: bit for bit)
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert ("mlas_gemm.comp" in shaders) == exact, shaders


@pytest.mark.parametrize("shape,axis,opset", [((64, 16), -1, 13), ((3, 12, 16, 16), -1, 13), ((4, 5, 7), 1, 13),
                                              ((6, 1000), -1, 13), ((2, 3, 9), 1, 11), ((8, 3), -1, 13)])
def test_softmax_equals_the_cpu_ep_bit_for_bit(ep_devices, shape, axis, opset):
    """float32 Softmax as MLAS computes it (softmax.comp ORDER 1: its exp, eight lanes of sums, times 1 / sum): rows of
    every length mod 8, an axis not last (opset 13), the flattened trailing axes (opset 11), small exps."""
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    x = (np.random.default_rng(len(shape) + shape[-1]).standard_normal(shape) * 3).astype(np.float32)
    x.flat[::7] -= 30.0  # (small exps; not below 2^-126: Mesa 26's lavapipe flushes denormal results to 0)
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], "g",
                              [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    _check(model, {"x": x}, f"Softmax {shape} axis {axis}")


@pytest.mark.parametrize("shape,axis,opset,scale", [((64, 16), -1, 13, 3.0), ((4, 5, 7), 1, 13, 3.0),
                                                    ((6, 1000), -1, 13, 0.01), ((40, 300), -1, 13, 1.0),
                                                    ((2, 3, 9), 1, 11, 3.0), ((64, 1), -1, 13, 1.0)])
def test_log_softmax_equals_the_cpu_ep_bit_for_bit(ep_devices, shape, axis, opset, scale):
    """float32 LogSoftmax as MLAS computes it: softmax.comp's ORDER 1 sum, its log as glibc's logf (the FLOAT64
    variant), then (x - max) - log. Sums from 1 to ~1,000 (every subinterval of logf's table), a -inf element, one
    element a row (log 1 = 0)."""
    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    if not base.has_float64(device.usable_devices()[0]):
        pytest.skip("the order needs the FLOAT64 variant (shaderFloat64)")
    rng = np.random.default_rng(shape[-1])
    x = (rng.standard_normal(shape) * scale + rng.uniform(-2, 2, shape[:1] + (1,) * (len(shape) - 1))).astype(np.float32)
    x.flat[5::97] = -np.inf
    x.flat[0] = 0.0
    graph = helper.make_graph([helper.make_node("LogSoftmax", ["x"], ["y"], axis=axis)], "g",
                              [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    _check(model, {"x": x}, f"LogSoftmax {shape} axis {axis}")


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(1, 2100, 4, 16), (96, 7), (64, 1), (80, 256), (3, 40, 33)])
def test_softmax_rows_an_invocation_as_a_workgroup_a_row(ep_devices, monkeypatch, op, shape):
    """Many short rows run one invocation a row (softmax.comp SERIAL: MLAS's lanes as an array, each max, exp and sum
    in the same order and tree): the same values as a workgroup a row, bit for bit, with NaN, infinities and rows
    of one element, and the CPU EP's where its values are finite. (A detector's DFL Softmax of [1, 21504, 4, 16]:
    125 -> 34 ms on lavapipe.)"""
    from vkep.kernels import softmax

    if not _follows():
        pytest.skip("vkep follows MLAS's order on x86-64 with AVX2 and FMA")
    if op == "LogSoftmax" and not base.has_float64(device.usable_devices()[0]):
        pytest.skip("the order needs the FLOAT64 variant (shaderFloat64)")
    rng = np.random.default_rng(shape[-1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.flat[3::101] = np.inf
    x.flat[7::89] = -np.inf
    x.flat[11::97] = np.nan
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=-1)], "g",
                              [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    serial = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    monkeypatch.setattr(softmax, "SERIAL_LENGTH", 0)
    grouped = runner.vkep_session(model, disable_cpu_fallback=True).run(None, {"x": x})[0]
    assert np.array_equal(serial.view(np.uint32), grouped.view(np.uint32)) or np.array_equal(serial, grouped,
                                                                                            equal_nan=True)
    finite = np.isfinite(x).all(axis=-1)
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(serial[finite], want[finite])


@pytest.mark.parametrize("op,shape,axes,keepdims", [("ReduceSum", (1, 16, 50), [-1], 0), ("ReduceSum", (7, 33), [1], 1),
                                                     ("ReduceSum", (5, 100), None, 0), ("ReduceSum", (3, 7), [-1], 0),
                                                     ("ReduceSum", (2, 3, 4, 5), [2, 3], 0),
                                                     ("ReduceMean", (6, 3, 70), [-1], 1), ("ReduceSum", (4, 2), [1], 0),
                                                     ("ReduceMean", (1, 96, 96, 64), [1, 2], 0),
                                                     ("ReduceSum", (300, 40), [0], 1), ("ReduceMean", (1, 7, 7, 1280),
                                                                                       [1, 2], 1)])
def test_sums_equal_the_cpu_ep_bit_for_bit(ep_devices, op, shape, axes, keepdims):
    """ReduceSum and ReduceMean of float32 over trailing axes as ORT's CPU EP adds (Eigen's 4-float packets from each
    row's first 16-byte aligned element: rows of every length mod 8 and starts mod 4, all axes, a short row); over
    leading axes (an NHWC image's spatial mean, TFLite's MEAN through tf2onnx: 62 of 64 channels apart over 96 x 96
    in vkep's tree) row by row in order, as its FastReduceRK adds."""
    if not _follows():
        pytest.skip("vkep follows the CPU EP's order on x86-64")
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    inputs = [helper.make_tensor_value_info("x", F, shape)]
    inits = [] if axes is None else [helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes)]
    node = helper.make_node(op, ["x"] + (["axes"] if axes is not None else []), ["y"], keepdims=keepdims)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    _check(model, {"x": x}, f"{op} {shape} axes {axes}")


@pytest.mark.parametrize("reverse,exclusive", [(0, 0), (1, 0), (0, 1)])
def test_long_float_cumsum_equals_the_cpu_ep_bit_for_bit(ep_devices, reverse, exclusive):
    """A float CumSum adds in order as the CPU EP does, on lines past CUMSUM_SERIAL too (Kokoro-82M's phase: 38,400
    samples; a segmented scan drifted), the first element copied (a -0 stays -0)."""
    x = np.random.default_rng(3).uniform(0.001, 0.02, (2, 38400)).astype(np.float32)
    x[:, 0] = -0.0
    graph = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["y"], reverse=reverse, exclusive=exclusive)],
                              "g", [helper.make_tensor_value_info("x", F, x.shape)],
                              [helper.make_tensor_value_info("y", F, None)],
                              [helper.make_tensor("axis", TensorProto.INT64, [], [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=10)
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    (got,), (want,) = session.run(None, {"x": x}), cpu.run(None, {"x": x})
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), np.count_nonzero(got != want)


@pytest.mark.parametrize("shape,scales,coord", [((1, 9, 32), (1, 1, 300), "half_pixel"),  # Kokoro's phase upsampling
                                                ((1, 9, 9600), (1, 1, 1 / 300), "half_pixel"),
                                                ((2, 3, 5), (2, 1.5, 3), "align_corners"),
                                                ((1, 2, 6, 7), (1, 1, 2.5, 0.6), "half_pixel"),
                                                ((5, 4), (1.7, 3), "asymmetric"),
                                                ((1, 1, 3, 4, 5), (1, 1, 2, 1.5, 0.5), "pytorch_half_pixel")])
def test_linear_resize_equals_the_cpu_ep_bit_for_bit(ep_devices, shape, scales, coord):
    """float32 linear Resize as ORT's CPU EP computes it (resize.comp MODE 3): UpsampleBilinear's 4 products over the
    last 2 dims of 2-D and 4-D inputs, UpsampleTrilinear's 8 over the last 3 of 3-D and 5-D ones (an unscaled dim of
    one element weighs 0.5 twice), summed in its order."""
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 1000).astype(np.float32)
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode=coord)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, shape)],
                              [helper.make_tensor_value_info("y", F, None)],
                              [helper.make_tensor("s", F, [len(scales)], [float(v) for v in scales])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    _check(model, {"x": x}, f"Resize {shape} x {scales} {coord}")


@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_sin_and_cos_equal_the_cpu_ep_bit_for_bit(ep_devices, op):
    """float32 Sin and Cos as Eigen computes them in ORT's CPU EP (unary_ops.glsl eigen_sin_cos): small and large
    arguments below Eigen's huge threshold, signed zeros, multiples of pi/2 (Kokoro-82M's harmonic phases reach
    thousands of radians)."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-10, 10, 4000), rng.uniform(-18000, 18000, 4000), [0.0, -0.0, 1e-30, -1e-30],
                        np.arange(-40, 40) * np.float32(np.pi / 2)]).astype(np.float32)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", F, x.shape)],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    session, cpu = runner.vkep_session(model, disable_cpu_fallback=True), runner.cpu_session(model)
    (got,), (want,) = session.run(None, {"x": x}), cpu.run(None, {"x": x})
    apart = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert not apart.size, f"{op}: {apart.size} apart, e.g. x={x[apart[:3]]} vkep {got[apart[:3]]} cpu {want[apart[:3]]}"
