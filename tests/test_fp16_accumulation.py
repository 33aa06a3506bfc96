"""The EP option fp16_accumulation=float16: float16 MatMul, Gemm and Conv multiply and sum in float16 (matmul.comp's
and conv.comp's ACC16 variants) in every mode float16 takes, and stay within the error such a sum can have of the
CPU EP's result.

The bound, per output element: a sum of K products in float16 (unit roundoff u = 2^-11), each step rounded,
in order, has (to first order) |computed - exact| <= u (sum_j |s_j| + sum_j |p_j|), s_j the partial sums and p_j the
products (each addition rounds to within u of its result; each product, where it is not fused, within u of
itself). A conv's bias (first in the sum of its direct mode) adds at most u K |bias|. The result's rounding to
float16 adds u |y|, and the CPU EP's own float16 result is within u |y| (+ a float32 sum's error) of exact: hence
`_bound`. For K terms of size ~1 that is the "K x 2^-11 relative" of the option's help, but measured on the actual
partial sums, so that random signs (partial sums ~ sqrt(j)) give a bound well below the values themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner
from vkep.kernels import matmul

U = 2.0 ** -11
ACC16 = {"fp16_accumulation": "float16"}


@pytest.fixture(params=["registers", "tiled"])
def mode(request, monkeypatch):
    """matmul.comp's float16 modes: the registers-only mode lavapipe takes, and the tiled mode of GPUs (the few-rows
    mode: the shapes with at most 8 rows)."""
    monkeypatch.setattr(matmul, "DIRECT_ON_CPU_DEVICES", request.param == "registers")
    return request.param


def _model(op: str, inputs: dict[str, tuple], **attrs):
    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, TensorProto.FLOAT16, s)
                                           for n, s in inputs.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)


def _bound(terms: np.ndarray, bias: np.ndarray | float, y: np.ndarray) -> np.ndarray:
    """The largest |vkep - CPU EP| a float16 sum can give (module docstring): `terms` [..., K] the products in the
    order the shader sums them, `bias` added to the sum (Conv's), `y` the exact result."""
    partial = np.abs(np.cumsum(terms, axis=-1)).sum(axis=-1)
    k = terms.shape[-1]
    return 1.01 * U * (partial + np.abs(terms).sum(axis=-1) + k * np.abs(bias) + 2 * np.abs(y)) + 2.0 ** -24


def _run(model, feeds: dict, options: dict) -> np.ndarray:
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options=options)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    first = session.run(None, feeds)[0]
    np.testing.assert_array_equal(session.run(None, feeds)[0], first)  # (the replayed plan)
    return first.astype(np.float64)


def _compare(model, feeds: dict, terms: np.ndarray, bias) -> None:
    """fp16_accumulation=float16 within _bound of the CPU EP, and not the default's float32 sums everywhere (the
    option reached the kernel); the default within a float16 rounding of the CPU EP."""
    cpu = runner.cpu_session(model).run(None, feeds)[0].astype(np.float64)
    exact = terms.sum(axis=-1) + bias
    got16, got32 = _run(model, feeds, ACC16), _run(model, feeds, {})
    assert got16.shape == cpu.shape == exact.shape
    bound = _bound(terms, bias, exact)
    excess = np.abs(got16 - cpu) - bound
    assert excess.max() <= 0, f"{(excess > 0).sum()} of {excess.size} beyond the bound, worst by {excess.max():.3g}"
    # ... and typical: rounding errors spread evenly over [-u, u] and independent add up to a variance of
    # u^2 / 3 (sum_j s_j^2 + p_j^2 + y^2), which over thousands of elements a wrong sum (a term lost, a product
    # off by 1%) exceeds where the worst-case bound may not
    partial = np.cumsum(terms, axis=-1) + np.asarray(bias)[..., None]
    typical = U * np.sqrt(((partial ** 2).sum(axis=-1) + (terms ** 2).sum(axis=-1) + exact ** 2).mean() / 3)
    rms = np.sqrt(((got16 - exact) ** 2).mean())
    assert rms <= 2 * typical, f"RMS error {rms:.3g} past twice the {typical:.3g} a float16 sum typically has"
    assert (got16 != got32).any(), "fp16_accumulation=float16 gave the float32 sums' results"
    np.testing.assert_allclose(got32, cpu, rtol=2 * U, atol=1e-3)
    # the float16 sums are worse than the float32 ones, and of the size a rounded sum has
    assert np.abs(got16 - exact).mean() > np.abs(got32 - exact).mean()


def _uniform(rng, shape) -> np.ndarray:
    return rng.uniform(-1, 1, shape).astype(np.float16)


@pytest.mark.parametrize("a, b", [((2, 72, 48), (48, 80)), ((4, 256), (256, 64)), ((96, 512), (512, 70))],
                         ids=["batched", "few-rows", "k512"])
def test_matmul(mode, a, b):
    rng = np.random.default_rng(3)
    x, w = _uniform(rng, a), _uniform(rng, b)
    terms = x.astype(np.float64)[..., :, None, :] * np.swapaxes(w.astype(np.float64), -1, -2)[..., None, :, :]
    _compare(_model("MatMul", {"a": a, "b": b}), {"a": x, "b": w}, terms, 0.0)


def test_einsum():
    """Einsum's products (matmul.comp's tiled mode whatever the device) follow the option too."""
    rng = np.random.default_rng(6)
    x, w = _uniform(rng, (3, 40, 200)), _uniform(rng, (3, 200, 50))
    terms = x.astype(np.float64)[:, :, None, :] * np.swapaxes(w.astype(np.float64), -1, -2)[:, None, :, :]
    model = _model("Einsum", {"a": x.shape, "b": w.shape}, equation="bij,bjk->bik")
    _compare(model, {"a": x, "b": w}, terms, 0.0)


def test_gemm(mode):
    """transB, alpha and C per column: alpha x the float16 sum + beta C in float, rounded once."""
    m, k, n = 70, 300, 96
    rng = np.random.default_rng(4)
    x, w, c = _uniform(rng, (m, k)), _uniform(rng, (n, k)), _uniform(rng, (n,))
    terms = 0.5 * x.astype(np.float64)[:, None, :] * w.astype(np.float64)[None, :, :]
    model = _model("Gemm", {"a": (m, k), "b": (n, k), "c": (n,)}, transB=1, alpha=0.5, beta=1.0)
    _compare(model, {"a": x, "b": w, "c": c}, terms, c.astype(np.float64))


@pytest.mark.parametrize("channels, out_channels, kernel, group, pads", [
    (16, 32, 3, 1, 1),  # the implicit GEMM over taps (MODE 0)
    (64, 24, 1, 1, 0),  # 1x1, stride 1: the GEMM over X as it is (MODE 1)
    (8, 8, 5, 8, 2),  # depthwise: the direct mode (MODE 2), the bias first in its sum
], ids=["3x3", "1x1", "depthwise"])
def test_conv(channels, out_channels, kernel, group, pads):
    rng = np.random.default_rng(5)
    xs, ws = (2, channels, 12, 14), (out_channels, channels // group, kernel, kernel)
    x, w, b = _uniform(rng, xs), _uniform(rng, ws), _uniform(rng, (out_channels,))
    model = _model("Conv", {"x": xs, "w": ws, "b": (out_channels,)}, pads=[pads] * 4, group=group)
    # the products in conv.comp's order: input channel, then kernel row and column (W's row layout)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads, pads), (pads, pads)))
    oh, ow = xs[2] + 2 * pads - kernel + 1, xs[3] + 2 * pads - kernel + 1
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kernel, kernel), axis=(2, 3))  # [n, c, oh, ow, kh, kw]
    per_group = out_channels // group
    terms = np.empty((2, out_channels, oh, ow, ws[1] * kernel * kernel))
    for m in range(out_channels):
        g = m // per_group
        patch = windows[:, g * ws[1]:(g + 1) * ws[1]]  # [n, cg, oh, ow, kh, kw]
        prod = patch * w[m].astype(np.float64)[None, :, None, None, :, :]
        terms[:, m] = prod.transpose(0, 2, 3, 1, 4, 5).reshape(2, oh, ow, -1)
    _compare(model, {"x": x, "w": w, "b": b}, terms, b.astype(np.float64)[None, :, None, None])
