"""com.microsoft GroupQueryAttention on vkep against ORT's CPU EP: prompts and decode steps (packed and unpacked
QKV, rotary, a past KV cache of the exact length, empty or longer, scale, softcap, local window, smooth softmax,
head_sink, attention_bias, float16), what stays on the CPU EP, and a decoder layer run for a prompt and 3 decode
steps with its KV cache fed back."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from vkep import runner

MS = "com.microsoft"
VULKAN = "VulkanExecutionProvider"
INPUTS = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
          "sin_cache", "position_ids", "attention_bias", "head_sink"]


def _caches(max_pos: int, rot: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    angles = np.arange(max_pos)[:, None] / 10000.0 ** (np.arange(rot // 2)[None, :] * 2 / rot)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def gqa_case(batch: int = 1, seq: int = 4, heads: int = 4, kv_heads: int = 2, head: int = 16, past: int = 0,
             buffer: int | None = None, packed: bool = False, rotary: bool = False, rot: int | None = None,
             bias: tuple | None = None, sink: bool = False, positions: list | None = None, dtype=np.float32,
             seed: int = 0, **attrs):
    """A one-node GQA model and its feeds: `past` valid cache rows in a cache of `buffer` rows (None: no past
    inputs; past 0 with buffer 0: an empty cache), `bias` the attention_bias shape with -1 for the total length."""
    rng = np.random.default_rng(seed)
    total = past + seq
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    feeds: dict[str, np.ndarray] = {}
    if packed:
        feeds["query"] = rng.standard_normal((batch, seq, (heads + 2 * kv_heads) * head))
    else:
        feeds["query"] = rng.standard_normal((batch, seq, heads * head))
        feeds["key"] = rng.standard_normal((batch, seq, kv_heads * head))
        feeds["value"] = rng.standard_normal((batch, seq, kv_heads * head))
    if buffer is not None:
        for name in ("past_key", "past_value"):
            feeds[name] = rng.standard_normal((batch, kv_heads, buffer, head))
            feeds[name][:, :, past:] = 0  # rows past the valid ones: zeros, as ORT's present leaves them
    feeds["seqlens_k"] = np.full(batch, total - 1, np.int32)
    feeds["total_sequence_length"] = np.array(total, np.int32)
    if rotary:
        feeds["cos_cache"], feeds["sin_cache"] = _caches(total + 8, rot or head, dtype)
    if positions is not None:
        feeds["position_ids"] = np.array(positions, np.int64)
    if bias is not None:
        feeds["attention_bias"] = rng.standard_normal([total if n == -1 else n for n in bias])
    if sink:
        feeds["head_sink"] = rng.standard_normal(heads)
    feeds = {n: a.astype(dtype) if a.dtype == np.float64 else a for n, a in feeds.items()}
    names = [n if n in feeds else "" for n in INPUTS]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"], domain=MS,
                            num_heads=heads, kv_num_heads=kv_heads, do_rotary=int(rotary), **attrs)
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(n, elem, None) for n in ("output", "present_key", "present_value")]
    graph = helper.make_graph([node], "gqa", infos, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=8)
    return model, feeds


def _tolerance(dtype) -> dict:
    return {"rtol": 1e-2, "atol": 1e-2} if dtype == np.float16 else {"rtol": 1e-4, "atol": 1e-5}


def _check(model, feeds, dtype=np.float32, runs: int = 2) -> None:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VULKAN}
    want = runner.cpu_session(model).run(None, feeds)
    for _ in range(runs):
        got = session.run(None, feeds)
        for name, g, w in zip(("output", "present_key", "present_value"), got, want, strict=True):
            assert g.shape == w.shape, name
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), err_msg=name,
                                       **_tolerance(dtype))


CASES = {
    "prompt": {},
    "prompt_empty_past": {"buffer": 0},
    "prompt_packed": {"packed": True},
    "prompt_rotary": {"rotary": True},
    "prompt_rotary_interleaved_packed": {"rotary": True, "rotary_interleaved": 1, "packed": True},
    "prompt_partial_rotary": {"rotary": True, "rot": 16, "head": 32},
    "prompt_batch2": {"batch": 2, "rotary": True},
    "decode": {"seq": 1, "past": 6, "buffer": 6},
    "decode_rotary_packed_batch3": {"batch": 3, "seq": 1, "past": 9, "buffer": 9, "rotary": True, "packed": True},
    "decode_shared_length": {"seq": 1, "past": 5, "buffer": 12, "rotary": True},
    "continued_prompt": {"seq": 3, "past": 4, "buffer": 4, "rotary": True},
    "prompt_into_long_buffer": {"seq": 5, "past": 0, "buffer": 9},
    "scale_softcap": {"seq": 3, "past": 2, "buffer": 2, "scale": 0.3, "softcap": 2.0},
    "local_window": {"seq": 6, "past": 5, "buffer": 5, "local_window_size": 3},
    "local_window_of_one": {"seq": 3, "past": 2, "buffer": 2, "local_window_size": 1},
    "mha_heads": {"heads": 3, "kv_heads": 3, "head": 8, "seq": 2, "past": 3, "buffer": 3},
    "smooth_softmax": {"seq": 3, "past": 2, "buffer": 2, "smooth_softmax": 1},
    "head_sink": {"seq": 3, "past": 2, "buffer": 2, "sink": True},
    "attention_bias": {"seq": 3, "past": 2, "buffer": 2, "bias": (1, 4, 3, -1)},
    "attention_bias_decode": {"batch": 2, "seq": 1, "past": 4, "buffer": 4, "bias": (2, 1, 1, -1)},
    "bidirectional": {"seq": 3, "past": 4, "buffer": 4, "causal": 0},
    "bidirectional_prompt_static_cache": {"batch": 2, "seq": 3, "buffer": 6, "causal": 0, "rotary": True},
    "position_ids_prompt": {"seq": 3, "rotary": True, "positions": [[2, 7, 1]]},
    "position_ids_prompt_batch2": {"batch": 2, "seq": 3, "rotary": True, "positions": [[4, 0, 0], [1, 2, 3]]},
    "position_ids_continued": {"seq": 2, "past": 3, "buffer": 3, "rotary": True, "positions": [[5, 1]]},
    "position_ids_decode_batch2": {"batch": 2, "seq": 1, "past": 3, "buffer": 3, "rotary": True, "packed": True,
                                   "positions": [[3], [6]]},
    "position_ids_without_rotary": {"seq": 2, "past": 3, "buffer": 3, "positions": [[5, 1]]},
    "float16_decode": {"seq": 1, "past": 7, "buffer": 7, "rotary": True, "dtype": np.float16},
    "float16_prompt_packed": {"seq": 5, "packed": True, "rotary": True, "dtype": np.float16, "softcap": 5.0},
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_gqa_as_the_cpu_ep(ep_devices, case):
    model, feeds = gqa_case(**case)
    _check(model, feeds, case.get("dtype", np.float32))
