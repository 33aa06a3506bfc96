"""com.microsoft ops that need more than the manifest's generated one-node tests (quantized weights)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

MS = "com.microsoft"


def _matmul_nbits(k: int, n: int, bits: int, block: int, zero_points: bool, bias: bool, a_shape, dtype, seed=0):
    """A MatMulNBits model with random quantized weights in ORT's packing, and its feeds."""
    rng = np.random.default_rng(seed)
    blocks = -(-k // block)
    b = rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    inits = [numpy_helper.from_array(b, "b"),
             numpy_helper.from_array((rng.uniform(0.01, 0.1, n * blocks)).astype(dtype), "scales")]
    names = ["a", "b", "scales"]
    if zero_points == "float":  # (ORT's HQQ quantizer: zero points of A's type, one a block, not integers)
        inits.append(numpy_helper.from_array(rng.uniform(0, 2**bits - 1, n * blocks).astype(dtype), "zp"))
        names.append("zp")
    elif zero_points:
        inits.append(numpy_helper.from_array(rng.integers(0, 256, (n, (blocks * bits + 7) // 8), dtype=np.uint8), "zp"))
        names.append("zp")
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(dtype), "bias"))
        names += [""] * (5 - len(names)) + ["bias"]
    node = helper.make_node("MatMulNBits", names, ["y"], domain=MS, K=k, N=n, bits=bits, block_size=block)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph([node], "mmnb", [helper.make_tensor_value_info("a", elem, a_shape)],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=8)
    return model, {"a": rng.standard_normal(a_shape).astype(dtype)}


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("block", [16, 32, 128])
@pytest.mark.parametrize("zero_points,bias", [(False, False), (True, False), (True, True), (False, True)])
@pytest.mark.parametrize("k,a_shape", [(64, [1, 64]), (40, [2, 3, 40]), (256, [5, 256])])
def test_matmul_nbits_as_the_cpu_ep(ep_devices, bits, block, zero_points, bias, k, a_shape):
    """(A bias without zero points: the absent zero points' type is "", which the float zero points' check first
    took for a float type: the shader read zero points from address 0 and crashed the process.)"""
    model, feeds = _matmul_nbits(k, 24, bits, block, zero_points, bias, a_shape, np.float32)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("block", [16, 32, 128])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("k,a_shape", [(64, [1, 64]), (40, [2, 3, 40]), (256, [5, 256])])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matmul_nbits_float_zero_points(ep_devices, block, bias, k, a_shape, dtype):
    """ORT's HQQ quantizer writes float zero points: the CPU EP dequantizes each weight as q * scale + (-scale *
    zp) and multiplies in float (whatever its accuracy_level); vkep follows (the tenth survey: every
    MatMulNBits of HQQ'd bert, gpt2, llama and t5 was left to the CPU EP)."""
    model, feeds = _matmul_nbits(k, 24, 4, block, "float", bias, a_shape, dtype)
    model.graph.node[0].attribute.append(helper.make_attribute("accuracy_level", 4))
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):  # (float16: both compute in float and round the output once; the sums' orders differ)
        np.testing.assert_allclose(session.run(None, feeds)[0].astype(np.float32), want.astype(np.float32),
                                   **(dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=2e-3, atol=2e-3)))


@pytest.mark.parametrize("bits,block", [(2, 16), (2, 32), (4, 16), (4, 32), (8, 32)])
@pytest.mark.parametrize("zero_points", [False, True])
@pytest.mark.parametrize("a_shape", [[1, 128], [7, 128], [2, 3, 128]])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_matmul_nbits_at_accuracy_level_4(ep_devices, bits, block, zero_points, a_shape, dtype):
    """float16 A at accuracy_level 4: the CPU EP converts A to float and quantizes it to int8 per block, as a float32
    A (the tenth survey's W-1: vkep multiplied float16 A unquantized, 0.02-0.066 off on |y| 4-10; float16 LLMs that
    ORT GenAI's builder writes with int4_accuracy_level=4 carry this); float32 A alike; 2 bits too, but for blocks of 16, which MLAS multiplies in float."""
    model, feeds = _matmul_nbits(128, 40, bits, block, zero_points, False, a_shape, dtype)
    model.graph.node[0].attribute.append(helper.make_attribute("accuracy_level", 4))
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(model).run(None, feeds)[0].astype(np.float32)
    tol = dict(rtol=1e-3, atol=4e-3) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-5)
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0].astype(np.float32), want, **tol)


def test_matmul_nbits_8_bits_with_float_zero_points_fail_as_on_the_cpu_ep(ep_devices):
    """8-bit weights with float zero points: the CPU EP refuses the session, and vkep leaves the node to it."""
    model, _ = _matmul_nbits(64, 8, 8, 32, "float", False, [1, 64], np.float32)
    with pytest.raises(Exception, match="does not support 8-bit weights with floating-point zero points"):
        runner.vkep_session(model)


def test_matmul_nbits_float16(ep_devices):
    """float16 activations and scales, against the CPU EP's float32 twin (its fp16 kernel rounds inside)."""
    model, feeds = _matmul_nbits(128, 32, 4, 32, True, True, [3, 128], np.float16)
    twin, _ = _matmul_nbits(128, 32, 4, 32, True, True, [3, 128], np.float32)
    got = runner.vkep_session(model, disable_cpu_fallback=True).run(None, feeds)[0]
    want = runner.cpu_session(twin).run(None, {"a": feeds["a"].astype(np.float32)})[0]
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=3e-2)


def test_matmul_nbits_declines_what_it_cannot_run(ep_devices):
    """Act-order (g_idx) stays on the CPU EP. (2-bit weights did too, until 2026-11-28.)"""
    model, feeds = _matmul_nbits(64, 8, 4, 32, False, False, [1, 64], np.float32)
    model.graph.node[0].input.extend(["", "g_idx"])
    model.graph.initializer.append(numpy_helper.from_array((np.arange(64) // 32).astype(np.int32), "g_idx"))
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])
    assert TensorProto.UINT8  # (the packing's byte type)


def _mha(q_len: int, kv_len: int, heads: int = 2, head_size: int = 8, attention_bias: bool = False, past: int = 0,
         unidirectional: int = 0, key_padding_mask: bool = False, dtype=np.float32, seed: int = 0,
         qkv_bias: bool = False):
    rng = np.random.default_rng(seed)
    hidden = heads * head_size
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    feeds = {"q": rng.standard_normal((2, q_len, hidden)).astype(dtype),
             "k": rng.standard_normal((2, kv_len, hidden)).astype(dtype),
             "v": rng.standard_normal((2, kv_len, hidden)).astype(dtype)}
    names = ["q", "k", "v", "", "", ""]
    if qkv_bias:  # (the bias input: query's, key's and value's, as ORT's optimizer writes for cross-attention)
        feeds["qkv_bias"] = rng.standard_normal(3 * hidden).astype(dtype)
        names[3] = "qkv_bias"
    if key_padding_mask:
        feeds["kpm"] = np.ones((2, kv_len), np.int32)
        names[4] = "kpm"
    if attention_bias:
        feeds["bias"] = rng.standard_normal((1, heads, q_len, past + kv_len)).astype(dtype)
        names[5] = "bias"
    outs = ["y"]
    if past:
        feeds["pk"] = rng.standard_normal((2, heads, past, head_size)).astype(dtype)
        feeds["pv"] = rng.standard_normal((2, heads, past, head_size)).astype(dtype)
        names += ["pk", "pv"]
        outs += ["present_k", "present_v"]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node("MultiHeadAttention", names, outs, domain=MS, num_heads=heads,
                            unidirectional=unidirectional)
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "kpm" else elem, feeds[n].shape)
              for n in names if n]
    graph = helper.make_graph([node], "mha", inputs, [helper.make_tensor_value_info(o, elem, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=8)
    return model, feeds


@pytest.mark.parametrize("case", [
    {"q_len": 5, "kv_len": 7},
    {"q_len": 5, "kv_len": 7, "attention_bias": True},
    {"q_len": 6, "kv_len": 6, "unidirectional": 1},
    {"q_len": 1, "kv_len": 1, "past": 9},
    {"q_len": 3, "kv_len": 3, "past": 4, "attention_bias": True},
    {"q_len": 4, "kv_len": 4, "heads": 4, "head_size": 16, "dtype": np.float16},
    {"q_len": 2, "kv_len": 2, "past": 3, "unidirectional": 1},
    {"q_len": 3, "kv_len": 3, "past": 4, "unidirectional": 1, "attention_bias": True},
    {"q_len": 5, "kv_len": 7, "qkv_bias": True},
    {"q_len": 1, "kv_len": 1, "past": 9, "qkv_bias": True, "attention_bias": True},
    {"q_len": 4, "kv_len": 6, "heads": 4, "head_size": 16, "dtype": np.float16, "qkv_bias": True},
], ids=["cross", "attention_bias", "causal", "decode_with_past", "past_and_bias", "float16", "causal_with_past",
        "causal_past_bias", "qkv_bias_cross", "qkv_bias_with_past", "qkv_bias_float16"])
def test_multi_head_attention_as_the_cpu_ep(ep_devices, case):
    model, feeds = _mha(**case)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    want = runner.cpu_session(model).run(None, feeds)
    tol = {"rtol": 2e-2, "atol": 2e-3} if case.get("dtype") == np.float16 else {"rtol": 1e-4, "atol": 1e-5}
    for _ in range(2):
        for got, w in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(got.astype(np.float32), w.astype(np.float32), **tol)


@pytest.mark.parametrize("case", [{"q_len": 4, "kv_len": 4, "key_padding_mask": True},
                                  {"q_len": 3, "kv_len": 5, "unidirectional": 1}],
                         ids=["key_padding_mask", "causal_shorter_query"])
def test_multi_head_attention_left_to_the_cpu_ep(ep_devices, case):
    model, feeds = _mha(**case)
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    for got, want in zip(session.run(None, feeds), runner.cpu_session(model).run(None, feeds), strict=True):
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("k,n,a_shape,block,bits,accuracy", [
    (512, 1, [1, 512], 32, 4, 0),  # N = 1: one column of 32 in the lanes' packing
    (96, 40, [17, 96], 32, 4, 4),  # N off 32, 17 rows: 3 workgroup rows of up to 8
    (40, 33, [2, 2, 40], 16, 4, 4),  # K off the block (padded weights past K), batch dimensions
    (40, 8, [3, 40], 32, 8, 0),  # 8-bit weights (8 per 64-bit load), A one element per load
    (33, 16, [1, 33], 16, 4, 0),  # K odd: A one element per load
    (4096, 8, [1, 4096], 32, 4, 4),  # N small, K long: split-K across the subgroups of a workgroup
    (2048, 64, [64, 2048], 128, 4, 0),  # prefill-sized: 64 rows
])
def test_matmul_nbits_lanes_boundaries(ep_devices, monkeypatch, k, n, a_shape, block, bits, accuracy):
    """The lanes mode of CPU devices (weights re-laid at prepack) at its boundaries, against the CPU EP; that it
    ran, and with which split, is read from its planner."""
    from vkep.kernels import contrib

    plans = []
    plan = contrib._lanes_plan
    monkeypatch.setattr(contrib, "_lanes_plan", lambda *args: plans.append(plan(*args)) or plans[-1])
    model, feeds = _matmul_nbits(k, n, bits, block, True, False, a_shape, np.float32, seed=k + n)
    model.graph.node[0].attribute.append(helper.make_attribute("accuracy_level", accuracy))
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        got = session.run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * max(1.0, np.abs(want).max() / 10))
    assert plans, "the lanes mode did not run"
    rows, split, _ = plans[-1]
    assert rows == min(8, int(np.prod(a_shape[:-1])))
    if n == 8 and k == 4096:
        assert split == 8


def test_matmul_nbits_lanes_with_scales_as_an_input(ep_devices):
    """Scales fed at run time (not a constant: not re-laid) with constant weights (re-laid): the lanes mode
    reads the scales as the node has them."""
    model, feeds = _matmul_nbits(64, 40, 4, 32, False, False, [3, 64], np.float32)
    scales = model.graph.initializer[1]
    feeds["scales"] = numpy_helper.to_array(scales)
    model.graph.input.append(helper.make_tensor_value_info("scales", TensorProto.FLOAT, list(scales.dims)))
    del model.graph.initializer[1]
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=2e-4, atol=2e-4)


def test_matmul_nbits_weights_as_an_input(ep_devices):
    """B and scales fed at run time (not constants: nothing re-laid): the shader's general mode (not LANES)."""
    model, feeds = _matmul_nbits(64, 40, 4, 32, True, False, [3, 64], np.float32)
    for init in list(model.graph.initializer)[:2]:  # b, scales
        feeds[init.name] = numpy_helper.to_array(init)
        model.graph.input.append(helper.make_tensor_value_info(
            init.name, TensorProto.UINT8 if init.name == "b" else TensorProto.FLOAT, list(init.dims)))
        model.graph.initializer.remove(init)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=2e-4, atol=2e-4)


def _one_node(op: str, shapes: list[list[int]], dtype, seed: int = 0):
    """A one-node com.microsoft model over inputs of `shapes` (uniform in [-3, 3]) and its feeds."""
    rng = np.random.default_rng(seed)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    names = [f"in{i}" for i in range(len(shapes))]
    graph = helper.make_graph([helper.make_node(op, names, ["y"], domain=MS)], op,
                              [helper.make_tensor_value_info(n, elem, s) for n, s in zip(names, shapes, strict=True)],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=8)
    return model, {n: rng.uniform(-3, 3, s).astype(dtype) for n, s in zip(names, shapes, strict=True)}


def _run_on_vkep(model, feeds) -> np.ndarray:
    """The node on vkep (ORT's record), run twice (the second replays its plan): the output."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    first = session.run(None, feeds)[0]
    second = session.run(None, feeds)[0]
    np.testing.assert_array_equal(first, second)
    return second


# float16 tolerance: each result is rounded to float16 (half an ulp: 1e-3 at |y| in [2, 4)) after an
# intermediate rounded to float16 too (X + bias), against float64 arithmetic on the same float16 inputs
FP16_TOL = {"rtol": 2e-3, "atol": 2e-3}
FP32_TOL = {"rtol": 1e-5, "atol": 1e-6}
# float32 Gelu(b) = 0.5 b (1 + erf(b / sqrt 2)) for b << 0: 1 + erf cancels to within float32's ulp of 1 (2^-24
# after halving), so a * Gelu(b) is off by up to |a| |b| 2^-23 in absolute terms (4.3e-6 at |a|, |b| <= 6; seen
# 2.2e-6), as ORT's own float Gelu is
GELU_FP32_TOL = {"rtol": 1e-5, "atol": 5e-6}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n,s,c", [(1, 1, 1), (2, 3, 5), (2, 64, 40)])
def test_bias_add(ep_devices, dtype, n, s, c):
    """Y = X + bias + skip. ORT 1.32's CPU EP has no BiasAdd kernel (only CUDA and ROCm do): the reference
    is numpy in float64 over the same inputs."""
    model, feeds = _one_node("BiasAdd", [[n, s, c], [c], [n, s, c]], dtype)
    x, bias, skip = (v.astype(np.float64) for v in feeds.values())
    got = _run_on_vkep(model, feeds)
    assert got.dtype == dtype and got.shape == (n, s, c)
    np.testing.assert_allclose(got.astype(np.float64), x + bias + skip,
                               **(FP32_TOL if dtype == np.float32 else FP16_TOL))


def _gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n,s,d", [(1, 1, 1), (2, 3, 5), (2, 40, 64)])
def test_bias_split_gelu(ep_devices, dtype, n, s, d):
    """Y = a * Gelu(b) (erf), a and b the halves of X + bias along the last axis. ORT 1.32's CPU EP has no
    BiasSplitGelu kernel (only CUDA and ROCm do): the reference is numpy in float64 over the same inputs."""
    model, feeds = _one_node("BiasSplitGelu", [[n, s, 2 * d], [2 * d]], dtype)
    total = feeds["in0"].astype(np.float64) + feeds["in1"].astype(np.float64)
    want = total[..., :d] * _gelu(total[..., d:])
    got = _run_on_vkep(model, feeds)
    assert got.dtype == dtype and got.shape == (n, s, d)
    np.testing.assert_allclose(got.astype(np.float64), want, **(GELU_FP32_TOL if dtype == np.float32 else FP16_TOL))


def test_bias_split_gelu_odd_width_is_declined(ep_devices):
    """A last axis that does not split in two halves stays off vkep (GetCapability's dry run), so ORT assigns
    the node to the CPU EP, which has no kernel for it."""
    model, _ = _one_node("BiasSplitGelu", [[1, 2, 7], [7]], np.float32)
    with pytest.raises(Exception, match="assigned to the default CPU EP"):
        runner.vkep_session(model, disable_cpu_fallback=True)
