"""com.microsoft FusedMatMul on vkep against ORT's CPU EP: transA and transB on batched and broadcast operands,
alpha, a constant B, shapes that take matmul.comp's few-rows, tiled and broadcast modes; transBatch declined."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from vkep import runner
from vkep.conformance.generated import tolerance


def _model(sa, sb, const_b: np.ndarray | None = None, **attrs):
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", **attrs)
    inputs = [helper.make_tensor_value_info("a", 1, sa)]
    if const_b is None:
        inputs.append(helper.make_tensor_value_info("b", 1, sb))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(const_b, "b")] if const_b is not None else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("sa,sb", [((3, 7), (7, 5)), ((2, 3, 40, 24), (24, 33)), ((4, 1, 9, 16), (3, 16, 6)),
                                   ((130, 70), (70, 90))])
def test_against_the_cpu_ep(ep_devices, ta, tb, sa, sb):
    swap = lambda s: s[:-2] + (s[-1], s[-2])  # noqa: E731
    sa, sb = swap(sa) if ta else sa, swap(sb) if tb else sb
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    for model, feeds in ((_model(sa, sb, transA=ta, transB=tb, alpha=0.75), {"a": a, "b": b}),
                         (_model(sa, sb, b, transA=ta, transB=tb, alpha=-2.0), {"a": a})):
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
        want = runner.cpu_session(model).run(None, feeds)[0]
        for _ in range(2):
            got = session.run(None, feeds)[0]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, **tolerance(np.float32))


def test_trans_batch_stays_on_the_cpu_ep(ep_devices):
    model = _model((2, 2, 4), (2, 4, 5), transBatchA=1)
    assert [ep for _, _, ep in runner.placement(runner.vkep_session(model))] == ["CPUExecutionProvider"]
