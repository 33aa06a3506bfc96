"""RoiAlign on vkep against ORT's CPU EP: avg and max, both coordinate modes (opset 16's half_pixel, opset 10's
output_half_pixel), fixed and adaptive sampling, a spatial scale, ROIs past the borders and thinner than a
pixel, several images."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from vkep import runner
from vkep.conformance.generated import tolerance


def _model(opset: int, **attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [3, 4, 13, 17]),
                                            helper.make_tensor_value_info("rois", 1, [9, 4]),
                                            helper.make_tensor_value_info("idx", 7, [9])],
                              [helper.make_tensor_value_info("y", 1, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _feeds(scale: float):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 13, 17)).astype(np.float32)
    lo = rng.uniform(-3, 12, (9, 2)) / scale
    rois = np.concatenate([lo, lo + rng.uniform(0.3, 9, (9, 2)) / scale], 1).astype(np.float32)
    rois[0] = [-4 / scale, -2 / scale, 25 / scale, 19 / scale]  # (past every border)
    rois[1, 2:] = rois[1, :2] + 0.2 / scale  # (thinner than a pixel)
    return {"x": x, "rois": rois, "idx": rng.integers(0, 3, 9).astype(np.int64)}


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("opset,coord", [(16, "half_pixel"), (16, "output_half_pixel"), (10, None)])
@pytest.mark.parametrize("sampling_ratio,scale", [(0, 1.0), (2, 0.5), (0, 0.25)])
def test_against_the_cpu_ep(ep_devices, mode, opset, coord, sampling_ratio, scale):
    attrs = {"mode": mode, "output_height": 5, "output_width": 4, "sampling_ratio": sampling_ratio,
             "spatial_scale": scale}
    if coord:
        attrs["coordinate_transformation_mode"] = coord
    model = _model(opset, **attrs)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    feeds = _feeds(scale)
    want = runner.cpu_session(model).run(None, feeds)[0]
    got = session.run(None, feeds)[0]
    assert got.shape == want.shape == (9, 4, 5, 4)
    np.testing.assert_allclose(got, want, **tolerance(np.float32))
