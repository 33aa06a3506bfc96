"""MatMul and Gemm in each of matmul.comp's modes (tiled with shared memory, registers only, few rows)
against ORT's CPU EP: shapes off the 64x64 tile, broadcast batches, transposes, C, float16."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tolerance
from onnx import helper
from test_conv import single_node

from vkep import runner
from vkep.kernels import matmul


@pytest.fixture(params=[True, False], ids=["registers-on-cpu-devices", "tiled"])
def mode(request, monkeypatch):
    # the plugin runs in this interpreter: its kernels read the module attribute when they record
    monkeypatch.setattr(matmul, "DIRECT_ON_CPU_DEVICES", request.param)
    return request.param


def _check(model_inputs: dict[str, tuple], op: str, dtype: str = "float32", **attrs) -> None:
    rng = np.random.default_rng(1)
    feeds = {n: rng.uniform(-1, 1, s).astype(dtype) for n, s in model_inputs.items()}
    session = runner.vkep_session(single_node(op, model_inputs, 13, dtype, **attrs), disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    ref = runner.cpu_session(single_node(op, model_inputs, 13, "float32", **attrs))
    want = ref.run(None, {n: v.astype(np.float32) for n, v in feeds.items()})[0]
    for _ in range(2):  # the second run replays the recorded plan
        np.testing.assert_allclose(session.run(None, feeds)[0].astype(np.float32), want,
                                   **dict(tolerance(dtype), atol=2e-2 if dtype == "float16" else 1e-4))


@pytest.mark.parametrize("a, b", [((70, 33), (33, 130)), ((9, 64), (64, 64)), ((3, 65, 17), (17, 66)),
                                  ((2, 1, 40, 24), (3, 24, 9)), ((4, 10), (10,)), ((5,), (5, 70))])
def test_matmul(mode, a, b):
    _check({"a": a, "b": b}, "MatMul")


def test_matmul_float16(mode):
    _check({"a": (2, 72, 48), "b": (48, 80)}, "MatMul", "float16")


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm(mode, trans_a, trans_b):
    m, k, n = 67, 31, 90
    a = (k, m) if trans_a else (m, k)
    b = (n, k) if trans_b else (k, n)
    _check({"a": a, "b": b, "c": (n,)}, "Gemm", transA=trans_a, transB=trans_b, alpha=0.5, beta=2.0)


@pytest.mark.parametrize("op, m, k", [("MatMul", 1, 64), ("MatMul", 3, 30), ("MatMul", 40, 64), ("Gemm", 1, 128),
                                      ("Gemm", 8, 30), ("Gemm", 70, 20)])
def test_constant_weights(mode, op, m, k):
    """Weights as initializers, so they are prepacked: on CPU devices B stays (or becomes) [N, K], read with
    vec4 loads along K in the few-rows mode when K % 4 == 0, and through strides in the other modes."""
    from onnx import TensorProto, numpy_helper

    rng = np.random.default_rng(2)
    n = 72
    w = rng.uniform(-1, 1, (n, k) if op == "Gemm" else (k, n)).astype(np.float32)
    attrs = {"transB": 1} if op == "Gemm" else {}
    node = helper.make_node(op, ["a", "w"], ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("a", TensorProto.FLOAT, (m, k))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    feeds = {"a": rng.uniform(-1, 1, (m, k)).astype(np.float32)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **dict(tolerance("float32"), atol=1e-4))
