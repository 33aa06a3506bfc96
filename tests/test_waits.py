"""Waits for the device: in slices, with no fixed limit; only a limit the application sets (the provider
option wait_limit_s) ends a slow run, with an error that names the node and how long it waited, and the
session stays usable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from vkep import runner


def _matmul_model() -> bytes:
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [512, 512], rng.standard_normal(512 * 512).astype(np.float32))
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 512])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def test_wait_limit_is_a_clear_error_and_the_session_goes_on(ep_devices):
    from vkep.gpu.device import open_device

    if not open_device(0).memory.unified:
        # on the discrete path the run's last wait is ORT's stream synchronisation, outside any node
        pytest.skip("wait_limit_s limits the waits of vkep's nodes (the unified path waits in them)")
    model = _matmul_model()
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"wait_limit_s": "0.02"})
    cpu = runner.cpu_session(model)
    small = {"x": np.ones((1, 512), np.float32)}
    np.testing.assert_allclose(session.run(None, small)[0], cpu.run(None, small)[0], rtol=1e-4, atol=1e-3)
    big = {"x": np.ones((8192, 512), np.float32)}  # ~4 GFLOP: far beyond 20 ms on lavapipe
    with pytest.raises(Exception, match=r"MatMul node .* did not complete within the wait limit of 0.02 s "
                                        r"\(waited \d+\.\d+ s"):
        session.run(None, big)
    np.testing.assert_allclose(session.run(None, small)[0], cpu.run(None, small)[0], rtol=1e-4, atol=1e-3)


def test_without_a_limit_slow_work_completes(ep_devices):
    model = _matmul_model()
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    big = {"x": np.full((4096, 512), 0.5, np.float32)}
    np.testing.assert_allclose(session.run(None, big)[0], runner.cpu_session(model).run(None, big)[0],
                               rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_bad_wait_limit_fails_session_creation(ep_devices, value):
    with pytest.raises(Exception, match=f"EP option wait_limit_s=.{value}. is not valid: expected a number of seconds above 0"):
        runner.vkep_session(_matmul_model(), ep_options={"wait_limit_s": value})
