"""NonZero on vkep against ORT's CPU EP: coordinates in row-major order across many chunks (nonzero.comp's
workgroups), every element type ORT's CPU EP has, -0.0 (zero), NaN and infinities (non-zero), scalars, no
non-zero element at all, and a session whose input changes from run to run (an output whose length depends on
the values is never replayed)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from test_reduce import check_node

from vkep import runner
from vkep.kernels.nonzero import WG


def _sparse(shape, dtype, zeros: float = 0.6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.uniform(-3, 3, shape)
    values[rng.random(shape) < zeros] = 0
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "uint8", "bool"])
def test_types(ep_devices, dtype):
    check_node("NonZero", {"x": _sparse((4, 7, 9), dtype)}, 13, outputs=[("y", np.int64)])


@pytest.mark.parametrize("shape", [(WG * 389 + 17,), (3, WG + 1, 5), (2, 1, 3, 1, 2, 3, 1, 2), (1,), ()])
def test_shapes_across_chunks(ep_devices, shape):
    check_node("NonZero", {"x": _sparse(shape, "float32", seed=len(shape))}, 13, outputs=[("y", np.int64)])


def test_special_values_and_opset_9(ep_devices):
    x = np.array([[0.0, -0.0, np.nan, np.inf], [-np.inf, 1e-45, 0.0, -2.0]], np.float32)  # (1e-45: a subnormal)
    got = check_node("NonZero", {"x": x}, 9, outputs=[("y", np.int64)])[0]
    assert got.tolist() == [[0, 0, 1, 1, 1], [2, 3, 0, 1, 3]]


@pytest.mark.parametrize("shape", [(5, 6), (0, 3)])
def test_nothing_non_zero(ep_devices, shape):
    got = check_node("NonZero", {"x": np.zeros(shape, np.float32)}, 13, outputs=[("y", np.int64)])[0]
    assert got.shape == (2, 0)


def test_each_run_counts_its_own_values(ep_devices):
    """One session, inputs with different numbers of non-zero elements: each run's output has its own length
    (a replayed plan would keep the first run's)."""
    node = helper.make_node("NonZero", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [64, 33])],
                              [helper.make_tensor_value_info("y", 7, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    cpu = runner.cpu_session(model)
    for seed, zeros in enumerate([0.1, 0.9, 0.5, 1.0, 0.0, 0.5]):
        x = _sparse((64, 33), "float32", zeros, seed)
        got, want = session.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0]
        assert got.shape == want.shape and np.array_equal(got, want), (seed, got.shape, want.shape)
