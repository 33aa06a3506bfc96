"""MaxPool, AveragePool, LpPool, the Global pools and LRN against ORT's CPU EP: padding, ceil_mode,
dilations, count_include_pad, 1-D to 3-D, and the opsets the CPU EP lacks (checked against an equal one)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from test_conv import check, single_node

from vkep import runner

POOL_CASES = {
    "max_1d": ("MaxPool", (2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    "max_2d_ceil": ("MaxPool", (1, 3, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "max_2d_ceil_pads": ("MaxPool", (1, 2, 7, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                                   "ceil_mode": 1}),
    "max_2d_dilations": ("MaxPool", (1, 2, 9, 8), {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 0, 1, 2]}),
    "max_2d_same_upper": ("MaxPool", (1, 2, 9, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "max_2d_same_lower": ("MaxPool", (1, 2, 9, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "max_3d": ("MaxPool", (1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 1, 0]}),
    "max_resnet": ("MaxPool", (1, 64, 28, 28), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "avg_2d_include_pad": ("AveragePool", (1, 3, 8, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                                         "count_include_pad": 1}),
    "avg_2d_ceil_include_pad": ("AveragePool", (1, 3, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                              "pads": [1, 1, 1, 1], "count_include_pad": 1,
                                                              "ceil_mode": 1}),
    "avg_2d_ceil_exclude_pad": ("AveragePool", (1, 3, 8, 7), {"kernel_shape": [3, 2], "strides": [2, 3],
                                                              "pads": [1, 0, 0, 1], "ceil_mode": 1}),
    "avg_2d_dilations": ("AveragePool", (1, 2, 9, 9), {"kernel_shape": [2, 2], "dilations": [2, 3],
                                                       "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    "avg_2d_same_lower": ("AveragePool", (1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                        "auto_pad": "SAME_LOWER"}),
    "avg_3d": ("AveragePool", (1, 2, 5, 6, 4), {"kernel_shape": [3, 2, 2], "pads": [1, 0, 1, 1, 1, 0]}),
    "lp_p1": ("LpPool", (1, 3, 8, 7), {"kernel_shape": [2, 3], "p": 1, "strides": [2, 1]}),
    "lp_p3_pads": ("LpPool", (1, 3, 8, 7), {"kernel_shape": [3, 3], "p": 3, "pads": [1, 1, 1, 1]}),
    "lp_ceil_dilations": ("LpPool", (1, 3, 9, 7), {"kernel_shape": [2, 2], "dilations": [2, 1], "strides": [2, 2],
                                                   "ceil_mode": 1}),
    "global_avg_1d": ("GlobalAveragePool", (2, 5, 13), {}),
    "global_avg_3d": ("GlobalAveragePool", (1, 4, 3, 5, 6), {}),
    "global_avg_large": ("GlobalAveragePool", (1, 8, 64, 64), {}),
    "global_max_2d": ("GlobalMaxPool", (2, 3, 7, 9), {}),
    # windows past lavapipe's 65,535 loop iterations per invocation (once silently cut short)
    "global_avg_256": ("GlobalAveragePool", (1, 2, 256, 256), {}),
    "global_avg_512": ("GlobalAveragePool", (1, 1, 512, 512), {}),
    "global_max_256": ("GlobalMaxPool", (1, 2, 256, 256), {}),
    "avg_300_window": ("AveragePool", (1, 1, 300, 300), {"kernel_shape": [300, 300]}),
    "lp_260_window": ("LpPool", (1, 1, 260, 260), {"kernel_shape": [260, 260], "p": 2}),
    "lrn": ("LRN", (2, 9, 3, 4), {"size": 5, "alpha": 0.02, "beta": 0.6, "bias": 2.0}),
    "lrn_wide": ("LRN", (1, 5, 6, 2), {"size": 7}),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", list(POOL_CASES))
def test_pool(ep_devices, case, dtype):
    op, shape, attrs = POOL_CASES[case]
    # LpPool with ceil_mode/dilations exists from opset 18; the others as of the latest opset
    check(op, {"x": shape}, opset=22, dtype=dtype, **attrs)


@pytest.mark.parametrize("op,opset,ref_opset,attrs", [
    ("AveragePool", 1, 7, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # the CPU EP starts at 7
    ("GlobalLpPool", 22, 2, {"p": 3}),  # the CPU EP stops at 2
    ("MaxPool", 1, 8, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("LpPool", 2, 11, {"kernel_shape": [2, 2], "p": 2}),
])
def test_pool_opsets_without_cpu_kernel(ep_devices, op, opset, ref_opset, attrs):
    check(op, {"x": (1, 3, 6, 6)}, opset=opset, ref_opset=ref_opset, **attrs)


@pytest.mark.parametrize("shape,size", [((2, 9, 3, 4), 4), ((1, 5, 6), 3), ((2, 6), 2)])
def test_lrn_beyond_the_cpu_ep(ep_devices, shape, size):
    """Even sizes and ranks other than 4, which the CPU EP refuses, against the ONNX definition."""
    alpha, beta, bias = 0.02, 0.6, 2.0
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    session = runner.vkep_session(single_node("LRN", {"x": shape}, 13, size=size, alpha=alpha, beta=beta, bias=bias),
                                  disable_cpu_fallback=True)
    square = np.zeros_like(x)
    for c in range(shape[1]):
        lo, hi = max(0, c - (size - 1) // 2), min(shape[1] - 1, c + size // 2)
        square[:, c] = (x[:, lo:hi + 1] ** 2).sum(axis=1)
    want = x / (bias + alpha / size * square) ** beta
    np.testing.assert_allclose(session.run(None, {"x": x})[0], want, **tolerance("float32"))


@pytest.mark.parametrize("op,attrs", [("MaxPool", {"kernel_shape": [2]}), ("MaxPool", {"kernel_shape": [3], "pads": [1, 1]})])
def test_max_pool_special_values_as_the_cpu_ep(ep_devices, op, attrs):
    """NaN is skipped and a window of NaN and -inf gives -FLT_MAX, as ORT's CPU EP's MaxPool does (its
    GlobalMaxPool is Eigen's maxCoeff, whose NaN result depends on where the NaN falls: not pinned here)."""
    x = np.array([[[np.nan, np.inf, 1, np.nan, -np.inf, 2, 3, np.nan, np.nan, -0.0]]], np.float32)
    model = single_node(op, {"x": x.shape}, 22, **attrs)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0])


@pytest.mark.parametrize("op,attrs", [("GlobalAveragePool", {}), ("GlobalLpPool", {"p": 2}), ("GlobalLpPool", {"p": 1})])
def test_a_global_pool_past_the_loop_budget_runs_as_a_reduction(ep_devices, op, attrs):
    """2048 x 2048 taps are past what one invocation loops over (lavapipe's budget): the pool runs as a
    reduction over the spatial dims split across a workgroup (reduce.comp), on vkep, shapes known only at
    run time. Compared with float64 sums: ORT's CPU EP sums 4M terms in float32 (6.5e-4 off for L2)."""
    session = runner.vkep_session(single_node(op, {"x": (2, 1, "h", "w")}, 18, **attrs), disable_cpu_fallback=True)
    x = np.random.default_rng(0).standard_normal((2, 1, 2048, 2048)).astype(np.float32)
    wide = x.astype(np.float64).reshape(2, 1, -1)
    p = attrs.get("p")
    want = wide.mean(-1) if op == "GlobalAveragePool" else (np.abs(wide) ** p).sum(-1) ** (1 / p)
    np.testing.assert_allclose(session.run(None, {"x": x})[0].reshape(2, 1), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("rows", [19_000, 25_000])
def test_tall_windows_within_lavapipes_loop_count(ep_devices, op, rows):
    """A window of many rows of one tap each costs lavapipe's count two loop passes a row besides its tap (a
    loop's leaving pass counts): 19,000 rows run on vkep, 25,000 (counted as 50,001 before, and cut short: a
    maximum in the last rows missed) are left to the CPU EP; equal to the CPU EP either way."""
    from onnx import TensorProto, helper

    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[rows, 1])
    graph = helper.make_graph([node], "tall", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, rows + 3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    session = runner.vkep_session(model)
    assert {ep for *_, ep in runner.placement(session)} == {
        "VulkanExecutionProvider" if rows < 20_000 else "CPUExecutionProvider"}
    x = np.random.default_rng(0).standard_normal((1, 1, rows + 3, 2)).astype(np.float32)
    x[0, 0, -1] = 50.0  # (the largest value in the last window's last row)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_a_global_max_pool_past_the_loop_budget_is_a_clear_error(ep_devices):
    """(MaxPool skips NaN as ORT's CPU EP does; the reductions propagate it: no reduction stands in.)"""
    session = runner.vkep_session(single_node("GlobalMaxPool", {"x": (1, 1, "h", "w")}, 22), disable_cpu_fallback=True)
    with pytest.raises(Exception, match=r"GlobalMaxPool: a window of \[2048, 2048\] taps is too large"):
        session.run(None, {"x": np.ones((2048, 2048), np.float32).reshape(1, 1, 2048, 2048)})


@pytest.mark.parametrize("op,attrs", [("AveragePool", {"count_include_pad": 0}), ("LpPool", {}), ("MaxPool", {})])
def test_window_larger_than_its_padded_input_runs_as_the_cpu_ep(ep_devices, op, attrs):
    """Found by fuzzing: a window longer than its padded input has no output by ONNX's formula, but one by
    ORT's CPU EP (its C++ division truncates toward zero); vkep answered the former, then left such a node to
    the CPU EP, and now computes the CPU EP's size and pools the taps that exist (more: tests/test_ops4.py)."""
    from onnx import TensorProto, helper

    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[0, 0, 0, 0], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 1)).astype(np.float32)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    got, want = session.run(None, {"x": x})[0], runner.cpu_session(model).run(None, {"x": x})[0]
    assert got.shape == want.shape == (1, 2, 2, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", [c for c in POOL_CASES if c.startswith("max_")])
@pytest.mark.parametrize("indices", [False, True])
def test_float64_max_pool_equals_the_cpu_ep(ep_devices, case, indices):
    """float64 MaxPool (pool.comp's FLOAT64 variant) as the CPU EP's MaxPool<double>: the window's first tap taken
    whatever it is, then a greater one, so a NaN first in its window stays and a window of -inf gives -inf (float's
    MLAS path skips NaN); with its Indices (storage_order 0 and 1), 1-D to 3-D, pads, dilations, ceil_mode, auto_pad.
    Bit for bit, with NaN, infinities, -0, subnormals and huge values."""
    from onnx import TensorProto
    from test_norm import assert_bits_equal, float64_outputs

    _, shape, attrs = POOL_CASES[case]
    rng = np.random.default_rng(len(case))
    x = rng.normal(0, 1e3, shape)
    special = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-310, 5e-324, 1.7e308, -1.7e308]
    x.flat[rng.choice(x.size, x.size // 4, replace=False)] = rng.choice(special, x.size // 4)
    x[0, 0, :2] = -np.inf  # (a window of -inf)
    outs = [("y", TensorProto.DOUBLE)] + ([("indices", TensorProto.INT64)] if indices else [])
    for order in (0, 1) if indices and len(shape) == 4 else (0,):
        got, want = float64_outputs("MaxPool", 12, {"x": x}, outs, storage_order=order, **attrs)
        for g, w in zip(got, want, strict=True):
            assert_bits_equal(g, w) if g.dtype == np.float64 else np.testing.assert_array_equal(g, w)
