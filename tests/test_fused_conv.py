"""com.microsoft FusedConv and FusedGemm on vkep against ORT's CPU EP: every activation ORT's optimizer fuses
(with its parameters); FusedConv with and without Z (added before the activation) and a bias, on the conv paths a
3x3 (Winograd), a 1x1, a strided 5x5 and a grouped conv take, and the conv without either."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from vkep import runner

ACTIVATIONS = [("Relu", []), ("Tanh", []), ("Sigmoid", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.75]),
               ("HardSigmoid", [0.3, 0.4]), ("", [])]
CONVS = {  # name: (X, W, attributes)
    "3x3": ((1, 8, 12, 12), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "1x1": ((2, 16, 7, 7), (8, 16, 1, 1), {}),
    "5x5_stride2": ((1, 3, 17, 15), (6, 3, 5, 5), {"strides": [2, 2], "pads": [2, 1, 2, 1]}),
    "grouped": ((1, 8, 9, 9), (8, 2, 3, 3), {"group": 4}),
}


def _model(conv: str, activation: str, params: list, bias: bool, z: bool):
    xs, ws, attrs = CONVS[conv]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(ws).astype(np.float32), "w")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32), "b"))
    names = ["x", "w", "b" if bias else "", "z" if z else ""]
    while names[-1] == "":
        names.pop()
    if activation:
        attrs = {**attrs, "activation": activation, **({"activation_params": params} if params else {})}
    node = helper.make_node("FusedConv", names, ["y"], domain="com.microsoft", **attrs)
    inputs = [helper.make_tensor_value_info("x", 1, xs)]
    if z:
        inputs.append(helper.make_tensor_value_info("z", 1, None))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


CASES = ([(conv, a, p, bias, True) for conv in ("3x3", "5x5_stride2") for a, p in ACTIVATIONS for bias in (True, False)]
         + [(conv, "Relu", [], True, False) for conv in CONVS] + [(conv, "Sigmoid", [], True, True) for conv in
                                                                 ("1x1", "grouped")])


@pytest.mark.parametrize("conv,activation,params,bias,z", CASES,
                         ids=[f"{c}-{a or 'none'}-{'b' if b else 'nob'}-{'z' if z else 'noz'}" for c, a, _, b, z in CASES])
def test_against_the_cpu_ep(ep_devices, conv, activation, params, bias, z):
    model = _model(conv, activation, params, bias, z)
    cpu = runner.cpu_session(model)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal(CONVS[conv][0]).astype(np.float32)}
    if z:
        out = runner.cpu_session(_model(conv, "", [], bias, False)).run(None, feeds)[0].shape
        feeds["z"] = rng.standard_normal(out).astype(np.float32)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = cpu.run(None, feeds)[0]
    for _ in range(2):
        got = session.run(None, feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


GEMM_ACTIVATIONS = [("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("LeakyRelu", {"activation_alpha": 0.15}),
                    ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4})]  # (ORT needs one)


@pytest.mark.parametrize("activation,params", GEMM_ACTIVATIONS, ids=[a or "none" for a, _ in GEMM_ACTIVATIONS])
@pytest.mark.parametrize("trans_b,c", [(1, True), (0, False), (1, False)])
def test_fused_gemm_against_the_cpu_ep(ep_devices, activation, params, trans_b, c):
    """com.microsoft FusedGemm: activation(alpha A B + beta C), a constant B and C (prepacked, as a fully connected
    layer's) and a row of 33 samples."""
    rng = np.random.default_rng(2)
    b = rng.standard_normal((24, 40) if trans_b else (40, 24)).astype(np.float32)
    inits = [numpy_helper.from_array(b, "b")] + ([numpy_helper.from_array(rng.standard_normal(24).astype(np.float32),
                                                                          "c")] if c else [])
    attrs = {"transB": trans_b, "alpha": 0.5, "beta": 1.5, "activation": activation, **params}
    node = helper.make_node("FusedGemm", ["a", "b"] + (["c"] if c else []), ["y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", 1, [33, 40])],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=10)
    feeds = {"a": rng.standard_normal((33, 40)).astype(np.float32)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)
