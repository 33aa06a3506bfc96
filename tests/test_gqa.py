"""com.microsoft GroupQueryAttention on vkep against ORT's CPU EP: prompts and decode steps (packed and unpacked
QKV, rotary, a past KV cache of the exact length, empty or longer, scale, softcap, local window, smooth softmax,
head_sink, attention_bias, float16), what stays on the CPU EP, and a decoder layer run for a prompt and 3 decode
steps with its KV cache fed back."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from vkep import runner
from vkep.kernels import attention

MS = "com.microsoft"
VULKAN = "VulkanExecutionProvider"
INPUTS = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
          "sin_cache", "position_ids", "attention_bias", "head_sink"]


def _caches(max_pos: int, rot: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    angles = np.arange(max_pos)[:, None] / 10000.0 ** (np.arange(rot // 2)[None, :] * 2 / rot)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def gqa_case(batch: int = 1, seq: int = 4, heads: int = 4, kv_heads: int = 2, head: int = 16, past: int = 0,
             buffer: int | None = None, packed: bool = False, rotary: bool = False, rot: int | None = None,
             bias: tuple | None = None, sink: bool = False, positions: list | None = None,
             lengths: list | None = None, dtype=np.float32, seed: int = 0, **attrs):
    """A one-node GQA model and its feeds: `past` valid cache rows in a cache of `buffer` rows (None: no past
    inputs; past 0 with buffer 0: an empty cache), `bias` the attention_bias shape with -1 for the total length,
    `lengths` each row's total length (a padded batch; None: past + seq for every row)."""
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
    feeds["seqlens_k"] = np.array(lengths or [total] * batch, np.int32) - 1
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
    "padded_decode": {"batch": 3, "seq": 1, "past": 6, "buffer": 6, "rotary": True, "lengths": [7, 4, 1]},
    "padded_decode_static_cache": {"batch": 2, "seq": 1, "past": 5, "buffer": 10, "rotary": True, "packed": True,
                                   "lengths": [3, 6], "bias": (2, 1, 1, -1)},
    "padded_decode_positions": {"batch": 2, "seq": 1, "past": 4, "buffer": 4, "rotary": True, "lengths": [5, 2],
                                "positions": [[4], [1]], "local_window_size": 2},
    "padded_prompt": {"batch": 2, "seq": 5, "rotary": True, "lengths": [5, 2]},
    "padded_prompt_positions": {"batch": 2, "seq": 4, "rotary": True, "rotary_interleaved": 1, "lengths": [4, 3],
                                "positions": [[2, 0, 1, 3], [5, 1, 2, 0]], "smooth_softmax": 1},
    "padded_prompt_bias_sink": {"batch": 3, "seq": 4, "lengths": [1, 4, 3], "bias": (3, 4, 4, -1), "sink": True},
    "padded_prompt_window": {"batch": 2, "seq": 6, "lengths": [3, 6], "local_window_size": 2, "packed": True},
    # (ORT's CPU EP windows the rows past a prompt's length otherwise in float16, or with softcap or a sink)
    "float16_padded_prompt_window": {"batch": 2, "seq": 6, "lengths": [2, 6], "local_window_size": 2,
                                     "dtype": np.float16},
    "padded_prompt_window_softcap": {"batch": 2, "seq": 6, "lengths": [1, 6], "local_window_size": 2,
                                     "softcap": 3.0},
    "padded_prompt_window_sink": {"batch": 2, "seq": 6, "lengths": [3, 6], "local_window_size": 2, "sink": True},
    "padded_prompt_bidirectional": {"batch": 2, "seq": 4, "lengths": [2, 4], "causal": 0, "buffer": 7},
    "head_size_512": {"seq": 2, "past": 1, "buffer": 1, "heads": 2, "kv_heads": 1, "head": 512},
    "float16_decode": {"seq": 1, "past": 7, "buffer": 7, "rotary": True, "dtype": np.float16},
    "float16_prompt_packed": {"seq": 5, "packed": True, "rotary": True, "dtype": np.float16, "softcap": 5.0},
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_gqa_as_the_cpu_ep(ep_devices, case):
    model, feeds = gqa_case(**case)
    _check(model, feeds, case.get("dtype", np.float32))


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if "dtype" not in c and "softcap" not in c
                                  and "sink" not in c and "smooth_softmax" not in c])
def test_gqa_through_the_products_as_the_cpu_ep(ep_devices, monkeypatch, name):
    """The same cases with every query row count taken by attention.by_products (two products around the score
    rows' softmax), which real prompts of 32 rows a KV head and more take: windows, padded rows, biases, positions."""
    monkeypatch.setattr(attention, "PRODUCT_ROWS", 1)
    model, feeds = gqa_case(**CASES[name])
    _check(model, feeds)


# ---- a decoder layer as ORT GenAI's model builder exports it ------------------------------------------------

HIDDEN, HEADS, KV_HEADS, HEAD, FFN, VOCAB, MAX_POS = 64, 4, 2, 16, 128, 50, 32


def _nbits(name: str, k: int, n: int, rng, block: int = 32) -> tuple[list, list]:
    """A 4-bit MatMulNBits `name` (input name_in, output name_out) with random packed weights and zero points."""
    blocks = k // block
    inits = [helper.make_tensor(f"{name}_w", TensorProto.UINT8, [n, blocks, block // 2],
                                rng.integers(0, 256, n * blocks * block // 2).tolist()),
             helper.make_tensor(f"{name}_s", TensorProto.FLOAT, [n * blocks],
                                rng.uniform(0.002, 0.02, n * blocks).tolist()),
             helper.make_tensor(f"{name}_zp", TensorProto.UINT8, [n * ((blocks + 1) // 2)],
                                rng.integers(0, 256, n * ((blocks + 1) // 2)).tolist())]
    node = helper.make_node("MatMulNBits", [f"{name}_in", f"{name}_w", f"{name}_s", f"{name}_zp"], [f"{name}_out"],
                            domain=MS, K=k, N=n, bits=4, block_size=block)
    return [node], inits


def decoder_layer(seed: int = 0):
    """input_ids, attention_mask, past KV -> embeddings, RMSNorm, packed QKV (MatMulNBits), GQA with rotary and a
    KV cache (seqlens_k and total_sequence_length from attention_mask, as the model builder computes them),
    o_proj (MatMul), SkipSimplifiedLayerNormalization, SiLU-gated MLP (MatMulNBits), final norm, lm_head."""
    rng = np.random.default_rng(seed)
    f32 = TensorProto.FLOAT

    def weight(name: str, shape: list[int], scale: float = 0.1):
        return helper.make_tensor(name, f32, shape, (rng.standard_normal(shape) * scale).ravel().tolist())

    cos, sin = _caches(MAX_POS, HEAD, np.float32)
    qkv_nodes, qkv_inits = _nbits("qkv", HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD, rng)
    gate_nodes, gate_inits = _nbits("gate", HIDDEN, FFN, rng)
    up_nodes, up_inits = _nbits("up", HIDDEN, FFN, rng)
    inits = [weight("embed", [VOCAB, HIDDEN], 1.0), weight("ln1", [HIDDEN], 1.0), weight("ln2", [HIDDEN], 1.0),
             weight("ln3", [HIDDEN], 1.0), weight("o_w", [HEADS * HEAD, HIDDEN]), weight("down_w", [FFN, HIDDEN]),
             weight("lm_w", [HIDDEN, VOCAB]), helper.make_tensor("cos", f32, cos.shape, cos.ravel().tolist()),
             helper.make_tensor("sin", f32, sin.shape, sin.ravel().tolist()),
             helper.make_tensor("one", TensorProto.INT64, [], [1]),
             helper.make_tensor("axis1", TensorProto.INT64, [1], [1])] + qkv_inits + gate_inits + up_inits
    nodes = [
        helper.make_node("Gather", ["embed", "input_ids"], ["x"]),
        # seqlens_k = sum(attention_mask) - 1, total_sequence_length = attention_mask's length, as int32
        helper.make_node("ReduceSum", ["attention_mask", "axis1"], ["mask_sum"], keepdims=0),
        helper.make_node("Sub", ["mask_sum", "one"], ["seqlens_64"]),
        helper.make_node("Cast", ["seqlens_64"], ["seqlens_k"], to=TensorProto.INT32),
        helper.make_node("Shape", ["attention_mask"], ["mask_shape"], start=1, end=2),
        helper.make_node("Squeeze", ["mask_shape"], ["total_64"]),
        helper.make_node("Cast", ["total_64"], ["total"], to=TensorProto.INT32),
        helper.make_node("SimplifiedLayerNormalization", ["x", "ln1"], ["qkv_in"], epsilon=1e-6, axis=-1),
        *qkv_nodes,
        helper.make_node("GroupQueryAttention", ["qkv_out", "", "", "past_key", "past_value", "seqlens_k", "total",
                                                 "cos", "sin"], ["attn", "present_key", "present_value"], domain=MS,
                         num_heads=HEADS, kv_num_heads=KV_HEADS, do_rotary=1, local_window_size=-1),
        helper.make_node("MatMul", ["attn", "o_w"], ["attn_out"]),
        helper.make_node("SkipSimplifiedLayerNormalization", ["x", "attn_out", "ln2"],
                         ["gate_in", "", "", "residual"], domain=MS, epsilon=1e-6),
        helper.make_node("Identity", ["gate_in"], ["up_in"]),
        *gate_nodes, *up_nodes,
        helper.make_node("Sigmoid", ["gate_out"], ["gate_sig"]),
        helper.make_node("Mul", ["gate_out", "gate_sig"], ["gate_act"]),
        helper.make_node("Mul", ["gate_act", "up_out"], ["mlp_in"]),
        helper.make_node("MatMul", ["mlp_in", "down_w"], ["mlp_out"]),
        helper.make_node("SkipSimplifiedLayerNormalization", ["residual", "mlp_out", "ln3"], ["final"], domain=MS,
                         epsilon=1e-6),
        helper.make_node("MatMul", ["final", "lm_w"], ["logits"]),
    ]
    cache = ["batch", KV_HEADS, "past", HEAD]
    graph = helper.make_graph(
        nodes, "decoder", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
                           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]),
                           helper.make_tensor_value_info("past_key", f32, cache),
                           helper.make_tensor_value_info("past_value", f32, cache)],
        [helper.make_tensor_value_info("logits", f32, ["batch", "seq", VOCAB]),
         helper.make_tensor_value_info("present_key", f32, ["batch", KV_HEADS, "present", HEAD]),
         helper.make_tensor_value_info("present_value", f32, ["batch", KV_HEADS, "present", HEAD])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
                             ir_version=10)


@pytest.mark.parametrize("batch", [1, 2])
def test_decoder_layer_prompt_then_decode(ep_devices, batch):
    """A 5-token prompt, then 3 greedy decode steps feeding present back as past: every node on vkep, logits and
    the KV cache equal to the CPU EP's at each step."""
    model = decoder_layer()
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for _, _, ep in placed} == {VULKAN}, [p for p in placed if p[2] != VULKAN]
    cpu = runner.cpu_session(model)
    ids = np.random.default_rng(1).integers(0, VOCAB, (batch, 5))
    empty = np.zeros((batch, KV_HEADS, 0, HEAD), np.float32)
    caches = {"vkep": (empty, empty), "cpu": (empty, empty)}
    for step in range(4):
        feeds = {"input_ids": ids, "attention_mask": np.ones((batch, 5 + step), np.int64)}
        outs = {}
        for name, sess in (("vkep", session), ("cpu", cpu)):
            past_key, past_value = caches[name]
            outs[name] = sess.run(None, {**feeds, "past_key": past_key, "past_value": past_value})
            caches[name] = (outs[name][1], outs[name][2])
        for got, want, what in zip(outs["vkep"], outs["cpu"], ("logits", "present_key", "present_value"), strict=True):
            assert got.shape == want.shape, (step, what)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"step {step}: {what}")
        ids = outs["cpu"][0][:, -1:].argmax(-1)  # the next token


def test_shared_kv_cache_buffer(ep_devices):
    """ORT GenAI's past_present_share_buffer: past_key/present_key (past_value/present_value) bound to one
    OrtValue of the cache's maximum length in vkep memory; a prompt then decode steps write only their new rows,
    equal to the CPU EP's run over the same caches as separate tensors."""
    from vkep.gpu.device import physical_devices
    from vkep.ort.factory import shares_host_memory

    kind = "HOST_ACCESSIBLE" if shares_host_memory(physical_devices()[0]) else "DEFAULT"
    info = ep_devices[0].memory_info(getattr(ort.OrtDeviceMemoryType, kind))
    buffer = 10
    caches = {n: ort.OrtValue.ortvalue_from_shape_and_type([1, 2, buffer, 16], np.float32, memory_info=info)
              for n in ("key", "value")}
    for cache in caches.values():
        cache.update_inplace(np.zeros((1, 2, buffer, 16), np.float32))
    cpu_caches = {n: np.zeros((1, 2, buffer, 16), np.float32) for n in ("key", "value")}
    past = 0
    for step, seq in enumerate((4, 1, 1, 1)):
        model, feeds = gqa_case(seq=seq, past=past, buffer=buffer, rotary=True, seed=step)
        session = runner.vkep_session(model, disable_cpu_fallback=True)
        binding = session.io_binding()
        binding.bind_output("output", "cpu")
        for name, value in feeds.items():
            if not name.startswith("past_"):
                binding.bind_cpu_input(name, value)
        for n in ("key", "value"):
            binding.bind_ortvalue_input(f"past_{n}", caches[n])
            binding.bind_ortvalue_output(f"present_{n}", caches[n])
        session.run_with_iobinding(binding)
        want = runner.cpu_session(model).run(None, {**feeds, "past_key": cpu_caches["key"],
                                                    "past_value": cpu_caches["value"]})
        np.testing.assert_allclose(binding.get_outputs()[0].numpy(), want[0], rtol=1e-4, atol=1e-5)
        for n, w in zip(("key", "value"), want[1:], strict=True):
            np.testing.assert_allclose(caches[n].numpy(), w, rtol=1e-5, atol=1e-6, err_msg=f"step {step}: {n}")
            cpu_caches[n] = w
        past += seq


def _with_qk_output(model):
    node = model.graph.node[0]
    node.output.append("output_qk")
    model.graph.output.append(helper.make_tensor_value_info("output_qk", TensorProto.FLOAT, None))
    return model


def _with_norm_weights(model):
    node = model.graph.node[0]
    node.input.extend([""] * (14 - len(node.input)) + ["q_norm", "k_norm"])
    model.graph.initializer.extend([helper.make_tensor(n, TensorProto.FLOAT, [16], [1.0] * 16)
                                    for n in ("q_norm", "k_norm")])
    return model


DECLINED = {
    "qk_output": ({"seq": 3, "past": 2, "buffer": 2, "qk_output": 1}, _with_qk_output, True),
    "sliding_window_cache": ({"seq": 1, "past": 4, "buffer": 4, "local_window_size": 4, "sliding_window_cache": 1},
                             None, True),
    "q_norm_weight": ({"seq": 2}, _with_norm_weights, False),  # (the CPU EP refuses it at run time)
    "head_size_520": ({"seq": 2, "heads": 2, "kv_heads": 1, "head": 520}, None, True),  # (shared memory)
}


@pytest.mark.parametrize("case", DECLINED.values(), ids=DECLINED.keys())
def test_gqa_left_to_the_cpu_ep(ep_devices, case):
    """What vkep declines at GetCapability stays on the CPU EP (and the CPU EP's answer is the session's)."""
    kwargs, edit, runs = case
    model, feeds = gqa_case(**kwargs)
    model = edit(model) if edit else model
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    if runs:
        for got, want in zip(session.run(None, feeds), runner.cpu_session(model).run(None, feeds), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", [{"seq": 3, "past": 2, "buffer": 2, "rotary": True}, {"seq": 4, "packed": True},
                                  {"batch": 2, "seq": 1, "past": 3, "buffer": 3, "lengths": [4, 2]}],
                         ids=["continued", "prompt", "padded_decode"])
def test_gqa_without_present_outputs(ep_devices, case):
    """Without present_key / present_value outputs vkep keeps the cache in scratch memory: the output is the one
    the node gives with them (ORT's CPU EP then reads uninitialised memory for a past: its answers vary)."""
    model, feeds = gqa_case(**case)
    want = runner.cpu_session(model).run(None, feeds)[0]
    del model.graph.node[0].output[1:]
    del model.graph.output[1:]
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VULKAN}
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)


def test_prompt_over_a_long_cache_within_lavapipes_loop_count(ep_devices):
    """32 query rows over 125,032 keys: attention.by_products' weighted values are a product of K = the keys, which
    matmul.comp's tiled mode cut short past lavapipe's loop count (it counted 1 step a 16 of K, not 11: y 7 apart, the
    last cached key, which holds every weight, missed); such keys now take MODE 0. Equal to the CPU EP."""
    past = 125_000
    model, feeds = gqa_case(seq=32, heads=2, kv_heads=1, head=16, past=past, buffer=past)
    feeds["past_key"][0, 0, past - 1] = 30.0 * np.sign(feeds["query"][0, :, :16].sum(0))
    feeds["past_value"][0, 0, past - 1] = 7.0
    _check(model, feeds, runs=1)
