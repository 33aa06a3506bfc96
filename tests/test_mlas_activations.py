"""Tanh, Erf and the Gelus equal ORT's CPU EP to the last bit: vkep evaluates MLAS's own approximations
(shaders/mlas_logistic.glsl: MlasComputeTanh, MlasComputeErf, and ORT's Gelu formulas in its order) as the
CPU EP's AVX2/FMA3 kernels do. A model near a rounding tie depends on it: Kokoro-82M int8 quantizes each FastGelu's
output (DynamicQuantizeLinear), and with FastGelu a few ulps off its durations, so the audio's length, differed
(docs/design.md, "A third survey"). Where the CPU EP runs other kernels (no AVX2 / FMA), within float noise."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner
from vkep.kernels import host

VKEP = "VulkanExecutionProvider"
# (no denormals, in or out: devices flush them or not, as float controls allow, Mesa 26 lavapipe does)
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 3.725, -3.725, 8.5, -9.0, 40.0],
                    np.float32)


def _inputs() -> np.ndarray:
    """A dense sweep of [-12, 12], random values of several scales, and the special values."""
    rng = np.random.default_rng(0)
    return np.concatenate([np.linspace(-12, 12, 48001, dtype=np.float32), rng.normal(0, 3, 20000).astype(np.float32),
                           rng.normal(0, 1e-3, 2000).astype(np.float32), SPECIALS])


CASES = {  # name → (op, domain, attributes, with a bias input)
    "Tanh": ("Tanh", "", {}, False),
    "Erf": ("Erf", "", {}, False),
    "Gelu-none": ("Gelu", "", {}, False),
    "Gelu-tanh": ("Gelu", "", {"approximate": "tanh"}, False),
    "ms-Gelu": ("Gelu", "com.microsoft", {}, False),
    "FastGelu": ("FastGelu", "com.microsoft", {}, False),
    "FastGelu-bias": ("FastGelu", "com.microsoft", {}, True),
    "BiasGelu": ("BiasGelu", "com.microsoft", {}, True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_equal_to_the_cpu_ep(ep_devices, name):
    op, domain, attrs, biased = CASES[name]
    x = _inputs()
    width = 64
    x = np.concatenate([x, np.zeros(-x.size % width, np.float32)]).reshape(-1, width)
    bias = np.random.default_rng(1).normal(0, 1, width).astype(np.float32)
    node = helper.make_node(op, ["x", "bias"] if biased else ["x"], ["y"], domain=domain, **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(bias, "bias")] if biased else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)])
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == [VKEP]
    got = session.run(None, {"x": x})[0]
    want = runner.cpu_session(model).run(None, {"x": x})[0]
    if host.mlas_fma3():
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), f"{(~same).sum()} values differ, e.g. x={x[~same][:4]}: {got[~same][:4]} vs {want[~same][:4]}"
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
