"""GridSample (opsets 16, 20, 22) on vkep against ORT's CPU EP: every mode × padding × align_corners on 4-D X,
nearest and linear on 5-D X, float16, grid points well outside [-1, 1], nearest ties (half to even); where
ORT and onnx's reference disagree (cubic with border padding) vkep follows ORT; declined nodes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from test_reduce import _data, check_node

from vkep import runner
from vkep.kernels.grid_sample import GridSample

PADDINGS = ["zeros", "border", "reflection"]


def _grid(shape: tuple[int, ...], dtype: str = "float32", seed: int = 1, reach: float = 1.7) -> np.ndarray:
    """Normalized grid points, many outside [-1, 1] (up to ±reach) so that every padding mode matters."""
    return _data(shape, dtype, seed=seed, low=-reach, high=reach)


@pytest.mark.parametrize("opset", [16, 20, 22])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [0, 1])
def test_2d(ep_devices, opset, mode, padding, align):
    if opset == 16:
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    feeds = {"x": _data((2, 3, 5, 7)), "grid": _grid((2, 6, 4, 2))}
    check_node("GridSample", feeds, opset, mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("opset", [20, 22])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [0, 1])
def test_3d(ep_devices, opset, mode, padding, align):
    feeds = {"x": _data((2, 2, 3, 4, 5)), "grid": _grid((2, 3, 2, 4, 3), reach=2.5)}
    check_node("GridSample", feeds, opset, mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("mode,rank", [("nearest", 4), ("linear", 4), ("cubic", 4), ("linear", 5)])
@pytest.mark.parametrize("padding", PADDINGS)
def test_float16(ep_devices, mode, rank, padding):
    """Against the float32 twin on the CPU EP (which has no float16 GridSample)."""
    x_shape, grid_shape = ((2, 3, 6, 5), (2, 4, 3, 2)) if rank == 4 else ((1, 2, 3, 4, 5), (1, 2, 3, 4, 3))
    feeds = {"x": _data(x_shape, "float16"), "grid": _grid(grid_shape, "float16")}
    check_node("GridSample", feeds, 20, mode=mode, padding_mode=padding)


def test_large_grid_defaults(ep_devices):
    """Default attributes, more output points than one workgroup and a grid reaching far outside."""
    feeds = {"x": _data((1, 4, 16, 16)), "grid": _grid((1, 40, 50, 2), reach=6.0)}
    check_node("GridSample", feeds, 22)


@pytest.mark.parametrize("grid_shape", [(2, 0, 3, 2), (2, 3, 0, 2)])
def test_empty_output(ep_devices, grid_shape):
    """No output points: nothing is dispatched, Y keeps its [N, C, H_out, W_out] shape."""
    check_node("GridSample", {"x": _data((2, 3, 4, 5)), "grid": np.zeros(grid_shape, np.float32)}, 20)


@pytest.mark.parametrize("align", [0, 1])
def test_nearest_ties_round_half_to_even(ep_devices, align):
    """Grid points exactly between two pixels: ORT's CPU EP (std::nearbyint) and onnx's reference round them
    to the even pixel, where rounding half away from zero picks 1 and 3. The widths keep every coordinate
    exact in float32 (W - 1 = 4 with align_corners, W = 4 without)."""
    w = 5 if align else 4
    coords = np.array([0.5, 1.5, 2.5, -0.5], np.float32)  # input coordinates along W
    norm = coords / (w - 1) * 2 - 1 if align else (2 * coords + 1) / w - 1
    grid = np.stack([norm, np.zeros_like(norm)], -1).reshape(1, 1, -1, 2).astype(np.float32)
    x = (np.arange(2 * w, dtype=np.float32) + 10).reshape(1, 1, 2, w)
    got = check_node("GridSample", {"x": x, "grid": grid}, 20, mode="nearest", align_corners=align)[0]
    # y = 0 maps to row 0.5 in both cases, which rounds to row 0
    np.testing.assert_array_equal(got[0, 0, 0], x[0, 0, 0, [0, 2, 2, 0]])


def _model(x_type: int, grid_type: int, x_shape, grid_shape, opset: int = 20, **attrs) -> onnx.ModelProto:
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    graph = helper.make_graph([node], "grid_sample", [helper.make_tensor_value_info("x", x_type, x_shape),
                                                      helper.make_tensor_value_info("grid", grid_type, grid_shape)],
                              [helper.make_tensor_value_info("y", x_type, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def test_cubic_border_follows_ort_not_the_reference(ep_devices):
    """onnx's reference clamps the continuous coordinate to the border before taking the 4x4 taps; ORT's CPU
    EP (and vkep) clamps each tap. Points outside the image tell them apart."""
    x, grid = _data((1, 2, 4, 5)), _grid((1, 3, 6, 2), reach=1.8)
    model = _model(onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT, x.shape, grid.shape, mode="cubic",
                   padding_mode="border")
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(model).run(None, {"x": x, "grid": grid})[0]
    reference = ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})[0]
    assert np.abs(want - reference).max() > 1e-2  # the two really differ here
    for _ in range(2):  # the second run replays the recorded plan
        np.testing.assert_allclose(session.run(None, {"x": x, "grid": grid})[0], want, rtol=1e-5, atol=1e-5)


def test_volumetric_cubic_stays_on_cpu(ep_devices):
    """Cubic is 2-D only (the spec; ORT's CPU EP fails it at run time): vkep declines it at partitioning."""
    model = _model(onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT, (1, 1, 2, 3, 4), (1, 2, 2, 2, 3), mode="cubic")
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]


@pytest.mark.parametrize("attrs,since,ranks,types,why", [
    ({"mode": "cubic"}, 20, [5, 5], ["float32", "float32"], "cubic"),
    ({"mode": "bilinear"}, 16, [5, 5], ["float32", "float32"], "rank 5"),
    ({"mode": "linear"}, 20, [3, 3], ["float32", "float32"], "rank 3"),
    ({"mode": "linear"}, 20, [4, 5], ["float32", "float32"], "grid of rank 5 for X of rank 4"),
    ({"mode": "bilinear"}, 16, [-1, 5], ["float32", "float32"], "grid of rank 5"),
    ({"mode": "linear"}, 20, [4, 4], ["float16", "float32"], "float16 with a grid of float32"),
    ({"mode": "linear"}, 22, [4, 4], ["bfloat16", "bfloat16"], "element types"),
    ({"mode": "area"}, 20, [4, 4], ["float32", "float32"], "mode"),
    ({"mode": "bilinear"}, 20, [4, 4], ["float32", "float32"], "mode 'bilinear' at opset 20"),
    ({"mode": "cubic"}, 16, [4, 4], ["float32", "float32"], "mode 'cubic' at opset 16"),
    ({"mode": "linear", "padding_mode": "wrap"}, 20, [4, 4], ["float32", "float32"], "padding_mode"),
])
def test_declines(attrs, since, ranks, types, why):
    """What vkep leaves to other EPs; mixed X/grid types have no CPU kernel either, so only the reason is
    checked here."""
    attrs = {"padding_mode": "zeros", "align_corners": 0, **attrs}
    reason = GridSample.declines(None, attrs, since, ranks, types)
    assert reason is not None and why in reason
    assert GridSample.declines(None, {**attrs, "mode": "nearest", "padding_mode": "zeros"}, 20, [4, 4],
                               ["float32", "float32"]) is None
