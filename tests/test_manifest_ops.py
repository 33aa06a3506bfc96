"""Generated from kernels.yaml: every entry × element type × opset range runs as a one-node model on vkep
and matches ORT's CPU EP. A new manifest entry is tested the moment it exists. (The generator is
vkep.conformance.generated, which `vkep dev` runs for the kernel being edited.)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException as OrtRuntimeException

from vkep import runner
from vkep.conformance import generated


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in generated.cases()])
def test_op(ep_devices, case):
    spec = case.spec
    model = generated.one_node_model(spec, case.opset, case.dtype, case.constraint)
    feeds = generated.feeds_for(model, spec, case.dtype)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert [(op, ep) for _, op, ep in placed] == [(spec.op, "VulkanExecutionProvider")]
    # float16 is checked against the float32 twin of the model on the CPU EP
    try:
        want = runner.cpu_session(generated.reference_model(case)).run(None, generated.reference_feeds(feeds))
    except (OrtNotImplemented, OrtRuntimeException) as exc:
        # e.g. DepthToSpace of int32, ScatterElements of bool with reduction: nothing to compare with
        if isinstance(exc, OrtRuntimeException) and "not supported" not in str(exc):
            raise
        pytest.skip(f"the CPU EP cannot run the reference: {exc}")
    for _ in range(2):  # the second run replays the node's plan
        got = session.run(None, feeds)
        for g, w, out_type in zip(got, want, generated.output_types(case), strict=True):
            assert g.shape == w.shape
            assert g.dtype == out_type
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **tolerance(out_type))
