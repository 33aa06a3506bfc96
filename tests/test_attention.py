"""Attention (opset 23/24) on vkep against ORT's CPU EP: real-model shapes (BERT-like self-attention with a
padding mask, a GQA decode step with a KV cache), the long-row path and the qk_matmul_output modes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import tolerance
from onnx import helper
from onnx.reference import ReferenceEvaluator
from test_reduce import _data, check_node

from vkep import runner


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_bert_self_attention_padding_mask(ep_devices, dtype):
    """3-D [B, S, heads*64] inputs as BERT feeds them, a bool key-padding mask [B, 1, 1, S]."""
    b, s, heads, d = 2, 16, 4, 64
    mask = np.ones((b, 1, s, s), bool)  # the CPU EP takes no broadcast query axis (onnx allows [B, 1, 1, S])
    mask[1, ..., 11:] = False  # the second sequence has 11 tokens
    feeds = {"q": _data((b, s, heads * d), dtype), "k": _data((b, s, heads * d), dtype, seed=1),
             "v": _data((b, s, heads * d), dtype, seed=2), "mask": mask}
    check_node("Attention", feeds, 23, q_num_heads=heads, kv_num_heads=heads)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gqa_decode_step_with_past(ep_devices, dtype):
    """One new token, 8 query heads over 2 KV heads, a 37-token cache: Y and the concatenated cache."""
    b, hq, hkv, past, d = 2, 8, 2, 37, 64
    feeds = {"q": _data((b, hq, 1, d), dtype), "k": _data((b, hkv, 1, d), dtype, seed=1),
             "v": _data((b, hkv, 1, d), dtype, seed=2), "past_k": _data((b, hkv, past, d), dtype, seed=3),
             "past_v": _data((b, hkv, past, d), dtype, seed=4)}
    check_node("Attention", feeds, 23, input_order=["q", "k", "v", "", "past_k", "past_v"],
               outputs=[("y", None), ("present_k", None), ("present_v", None)], is_causal=1)


def test_prefill_3d_gqa_with_past_float_mask(ep_devices):
    """3-D inputs with a cache, a float mask, softcap, V's head size differing from K's."""
    b, s, hq, hkv, past, d, dv = 1, 5, 6, 2, 7, 16, 24
    feeds = {"q": _data((b, s, hq * d)), "k": _data((b, s, hkv * d), seed=1), "v": _data((b, s, hkv * dv), seed=2),
             "mask": _data((s, past + s), seed=5), "past_k": _data((b, hkv, past, d), seed=3),
             "past_v": _data((b, hkv, past, dv), seed=4)}
    check_node("Attention", feeds, 23, input_order=["q", "k", "v", "mask", "past_k", "past_v"],
               outputs=[("y", None), ("present_k", None), ("present_v", None)], q_num_heads=hq, kv_num_heads=hkv,
               softcap=3.0, is_causal=1)


@pytest.mark.parametrize("kv,d,dv,dtype", [
    (3000, 32, 96, "float32"),    # more keys than shared memory holds (scores recomputed)
    (3000, 32, 96, "float16"),
    (300, 6, 130, "float32"),     # head sizes not multiples of 4 (scalar loads), 3 output columns per thread
    (20000, 128, 64, "float32"),  # past the 64-wide workgroup's loop budget: 256 threads
])
def test_long_rows(ep_devices, kv, d, dv, dtype):
    feeds = {"q": _data((1, 2, 2, d), dtype, low=-0.5, high=0.5),
             "k": _data((1, 2, kv, d), dtype, seed=1, low=-0.5, high=0.5),
             "v": _data((1, 2, kv, dv), dtype, seed=2), "mask": _data((2, kv), dtype, seed=3)}
    check_node("Attention", feeds, 23)


def test_nonpad_kv_seqlen(ep_devices):
    """Opset 24 external cache: keys past nonpad_kv_seqlen[b] are padding; causal frontier at its end."""
    feeds = {"q": _data((3, 4, 2, 8)), "k": _data((3, 2, 9, 8), seed=1), "v": _data((3, 2, 9, 8), seed=2),
             "lens": np.array([9, 5, 2], np.int64)}
    check_node("Attention", feeds, 24, input_order=["q", "k", "v", "", "", "", "lens"], is_causal=1)


@pytest.mark.parametrize("keys", [60_000, 125_000])
def test_many_keys_within_lavapipes_loop_count(ep_devices, keys):
    """64 query rows take the two products (by_products) while one dispatch of the weighted values' product sums
    their keys (matmul.tiled_loops); 125,000 keys took matmul.comp's tiled mode under the old count, which cut the
    sum short (y 2.6e-11 for 7: the last key, which holds every weight, was missed); now MODE 0. Equal to the CPU EP."""
    q = np.ones((1, 1, 64, 1), np.float32)
    k = np.full((1, 1, keys, 1), 0.01, np.float32)
    v = np.random.default_rng(0).standard_normal((1, 1, keys, 1)).astype(np.float32)
    k[0, 0, -1], v[0, 0, -1] = 30.0, 7.0  # (the last key's weight is ~1)
    feeds = {"q": q, "k": k, "v": v}
    model = _model(23, feeds, list(feeds), ["y"])
    np.testing.assert_allclose(_on_vkep(model, feeds)[0], runner.cpu_session(model).run(None, feeds)[0],
                               **tolerance(np.float32))


def _model(opset: int, inputs: dict[str, np.ndarray], order: list[str], outputs: list[str], **attrs):
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(inputs[order[0]].dtype), None)
            for n in outputs if n]
    node = helper.make_node("Attention", order, outputs, **attrs)
    graph = helper.make_graph([node], "attention", infos, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _on_vkep(model, feeds: dict) -> list[np.ndarray]:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert [ep for _, _, ep in runner.placement(session)] == ["VulkanExecutionProvider"]
    session.run(None, feeds)
    return session.run(None, feeds)  # the second run replays the recorded plan


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_qk_matmul_output(ep_devices, mode):
    """Mode 0 is q.k before softcap (the spec and the CPU EP; onnx's reference softcaps it)."""
    feeds = {"q": _data((2, 3, 4, 8)), "k": _data((2, 3, 6, 8), seed=1), "v": _data((2, 3, 6, 8), seed=2),
             "mask": _data((4, 6), seed=3)}
    model = _model(23, feeds, list(feeds), ["y", "", "", "qk"], softcap=2.0, qk_matmul_output_mode=mode)
    want = runner.cpu_session(model).run(None, feeds)
    for g, w in zip(_on_vkep(model, feeds), want, strict=True):
        np.testing.assert_allclose(g, w, **tolerance(np.float32))


@pytest.mark.parametrize("mask", [
    np.array([[True, False, True, True], [False] * 4, [True] * 4]),   # row 1 fully masked
    np.array([[[[True] * 5 + [False]]], [[[False] * 6]]]),            # [B, 1, 1, S]: batch 1 fully masked
])
def test_short_mask_and_fully_masked_rows(ep_devices, mask):
    """Masks the CPU EP rejects, checked against onnx's reference: shorter than the keys (the rest is
    masked), broadcast over queries; a row with no key allowed gives zeros in Y and in the probabilities."""
    feeds = {"q": _data((mask.shape[0] if mask.ndim == 4 else 1, 2, 3, 8)), "mask": mask}
    feeds["k"] = _data(feeds["q"].shape[:2] + (6, 8), seed=1)
    feeds["v"] = _data(feeds["q"].shape[:2] + (6, 8), seed=2)
    model = _model(23, feeds, ["q", "k", "v", "mask"], ["y", "", "", "qk"], qk_matmul_output_mode=3)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = _on_vkep(model, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **tolerance(np.float32))
    masked = np.broadcast_to(~mask.any(axis=-1), got[0].shape[:-1])  # rows with no key allowed
    assert masked.any() and not got[0][masked].any() and not got[1][masked].any()


@pytest.mark.parametrize("heads,hkv,s", [(4, 2, 160), (2, 2, 40)])
def test_many_rows_through_two_products(ep_devices, heads, hkv, s):
    """float32 without a past or qk output: Q K^T and P V are two products of the MatMul kernel around
    attention.comp's softmax of the score rows (640 rows: an invocation a row; 160: a workgroup a row), with a causal
    frontier, a bool key-padding mask and query heads over fewer KV heads."""
    b, d = 2, 40
    mask = np.ones((b, 1, s, s), bool)
    mask[1, ..., s - 7:] = False
    feeds = {"q": _data((b, heads, s, d)), "k": _data((b, hkv, s, d), seed=1), "v": _data((b, hkv, s, d), seed=2),
             "mask": mask}
    check_node("Attention", feeds, 23, is_causal=1)


def test_3d_query_heads_over_fewer_kv_heads_through_two_products(ep_devices):
    """3-D [B, S, heads * D] with 6 query heads over 2 KV heads: Q gathered into [B, Hq, S, D] for the products, Y
    gathered back."""
    b, s, hq, hkv, d = 2, 20, 6, 2, 24
    feeds = {"q": _data((b, s, hq * d)), "k": _data((b, s, hkv * d), seed=1), "v": _data((b, s, hkv * d), seed=2)}
    check_node("Attention", feeds, 23, q_num_heads=hq, kv_num_heads=hkv, is_causal=1)


def test_fully_masked_rows_give_zeros_without_a_qk_output(ep_devices):
    """The product path's softmax keeps the reference's guard: a row with no key allowed gives zeros."""
    mask = np.array([[[[True] * 5 + [False]]], [[[False] * 6]]])  # batch 1 fully masked
    feeds = {"q": _data((2, 2, 32, 8)), "k": _data((2, 2, 6, 8), seed=1), "v": _data((2, 2, 6, 8), seed=2),
             "mask": mask}
    model = _model(23, feeds, ["q", "k", "v", "mask"], ["y"])
    want = ReferenceEvaluator(model).run(None, feeds)
    got = _on_vkep(model, feeds)
    np.testing.assert_allclose(got[0], want[0], **tolerance(np.float32))
    assert not got[0][1].any() and got[0][0].any()


@pytest.mark.parametrize("attrs", [{"softmax_precision": onnx.TensorProto.BFLOAT16}])
def test_declined_stays_on_cpu(ep_devices, attrs):
    """Declined attributes: ORT keeps the node on its CPU EP."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 4, 8])
    node = helper.make_node("Attention", ["x", "x", "x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]


def test_mixed_q_and_v_types_are_declined():
    """T1 (Q, K) float32 with T2 (V) float16 is declined at partitioning (ORT 1.31 itself cannot run such
    a node: its CPU EP has no kernel for it and its function body does not type-check)."""
    from vkep.kernels import manifest
    from vkep.kernels.attention import Attention

    spec = next(s for s in manifest.load() if s.op == "Attention")
    assert Attention.declines(spec, {}, 23, [4, 4, 4], ["float32", "float32", "float16"])
    assert Attention.declines(spec, {}, 23, [4, 4, 4], ["float16"] * 3) is None
