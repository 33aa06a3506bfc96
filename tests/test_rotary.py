"""RotaryEmbedding (opset 23) on vkep against ORT's CPU EP: 4-D and 3-D X, halves and interleaved pairs,
partial rotation, caches indexed by position ids or given per token, float16; position ids outside the
cache against the documented wrap-and-clamp; declined nodes stay on the CPU EP."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import tolerance
from onnx import helper
from onnx.reference import ReferenceEvaluator
from test_reduce import _data, check_node

from vkep import runner


def _caches(rows: tuple[int, ...], width: int, dtype: str, seed: int = 5) -> dict[str, np.ndarray]:
    """cos/sin caches of real angles, so that each pair is a true rotation."""
    angles = _data(rows + (width,), "float32", seed=seed, low=-3.0, high=3.0)
    return {"cos": np.cos(angles).astype(dtype), "sin": np.sin(angles).astype(dtype)}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("interleaved,rot", [(0, 0), (1, 0), (0, 32), (1, 48)])
def test_4d_with_position_ids(ep_devices, dtype, interleaved, rot):
    """[B, H, S, D] with a [max_pos, rot/2] cache: a prefill with arbitrary positions per batch."""
    b, h, s, d, max_pos = 2, 4, 7, 64, 40
    width = (rot or d) // 2
    pos = np.random.default_rng(3).integers(0, max_pos, size=(b, s)).astype(np.int64)
    feeds = {"x": _data((b, h, s, d), dtype), **_caches((max_pos,), width, dtype), "pos": pos}
    check_node("RotaryEmbedding", feeds, 23, interleaved=interleaved, rotary_embedding_dim=rot)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("interleaved,rot", [(0, 0), (1, 16)])
def test_3d_without_position_ids(ep_devices, dtype, interleaved, rot):
    """[B, S, H*D] split by num_heads, caches of one row per token [B, S, rot/2]."""
    b, s, heads, d = 3, 5, 6, 24
    width = (rot or d) // 2
    feeds = {"x": _data((b, s, heads * d), dtype), **_caches((b, s), width, dtype)}
    check_node("RotaryEmbedding", feeds, 23, num_heads=heads, interleaved=interleaved, rotary_embedding_dim=rot)


def test_3d_decode_step_with_position_ids(ep_devices):
    """One new token per sequence at different positions of a long cache, 32 heads of 128."""
    b, heads, d, max_pos = 2, 32, 128, 2048
    feeds = {"x": _data((b, 1, heads * d)), **_caches((max_pos,), d // 2, "float32"),
             "pos": np.array([[37], [2047]], np.int64)}
    check_node("RotaryEmbedding", feeds, 23, num_heads=heads)


def _model(feeds: dict[str, np.ndarray], **attrs) -> onnx.ModelProto:
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in feeds.items()]
    node = helper.make_node("RotaryEmbedding", list(feeds), ["y"], **attrs)
    graph = helper.make_graph([node], "rope", infos, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def test_position_ids_outside_the_cache(ep_devices):
    """The CPU EP rejects these ids; vkep wraps negatives as onnx's reference does and clamps the rest."""
    max_pos = 10
    pos = np.array([[-1, -10, 10, 1000, 3]], np.int64)
    feeds = {"x": _data((1, 2, 5, 8)), **_caches((max_pos,), 4, "float32"), "pos": pos}
    model = _model(feeds)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    clamped = np.clip(np.where(pos < 0, pos + max_pos, pos), 0, max_pos - 1)
    want = ReferenceEvaluator(model).run(None, {**feeds, "pos": clamped})[0]
    for _ in range(2):  # the second run replays the recorded plan
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **tolerance(np.float32))


@pytest.mark.parametrize("shapes,attrs", [
    ({"x": (1, 2, 3, 8), "cos": (1, 3, 4), "sin": (1, 3, 4), "pos": (1, 3)}, {}),   # per-token caches and ids
    ({"x": (1, 2, 3, 8), "cos": (1, 3, 4), "sin": (1, 3, 4)}, {"interleaved": 2}),
])
def test_declined_stays_on_cpu(ep_devices, shapes, attrs):
    """(3-D X without num_heads and a negative rotary_embedding_dim are declined too, but ORT rejects such
    models itself: shape inference, the CPU kernel's constructor.)"""
    feeds = {n: np.zeros(s, np.int64 if n == "pos" else np.float32) for n, s in shapes.items()}
    session = runner.vkep_session(_model(feeds, **attrs))
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("x_shape,num_heads,rot", [([2, 5, 16], 2, 0), ([2, 5, 16], 2, 4), ([2, 2, 5, 8], 0, 0),
                                                   ([2, 2, 5, 8], 2, 4)])
def test_contrib_rotary_embedding(ep_devices, interleaved, x_shape, num_heads, rot):
    """com.microsoft's RotaryEmbedding (input, position_ids, cos_cache, sin_cache) as ORT's CPU EP."""
    from onnx import TensorProto

    from vkep import runner

    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot, "num_heads": num_heads}
    half = (rot or x_shape[-1] // (num_heads if len(x_shape) == 3 else 1)) // 2
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain="com.microsoft", **attrs)
    f32 = TensorProto.FLOAT
    graph = helper.make_graph([node], "rot", [helper.make_tensor_value_info("x", f32, x_shape),
                                              helper.make_tensor_value_info("pos", TensorProto.INT64, [2, 5]),
                                              helper.make_tensor_value_info("cos", f32, [10, half]),
                                              helper.make_tensor_value_info("sin", f32, [10, half])],
                              [helper.make_tensor_value_info("y", f32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32), "pos": rng.integers(0, 10, (2, 5)),
             "cos": rng.standard_normal((10, half)).astype(np.float32),
             "sin": rng.standard_normal((10, half)).astype(np.float32)}
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0],
                               rtol=1e-5, atol=1e-5)
