"""An LLM end to end: a small int4 Llama decoder in the form ORT GenAI's model builder exports it
(tools/tiny_llm.py), a 16-token prompt then greedy decode steps with the KV cache kept in vkep memory through
IOBinding; every node on vkep, the tokens and logits the CPU EP's. And MatMulNBits' accuracy_level 4 (int8 A,
what the builder writes for the CPU EP) against the CPU EP."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper, numpy_helper

import vkep
from vkep import runner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import tiny_llm  # noqa: E402

VULKAN = "VulkanExecutionProvider"
STEPS = 16
FLIP = 0.12  # what an int8 rounding flip may move a logit by (0.07 seen), with logits spread ~4
FLIP16 = 0.35  # vkep's float16 logits against the CPU EP's (0.27 seen, logits spread ~4)
HOST_TRAFFIC = ("upload_bytes", "download_bytes", "staging_bytes", "device_copy_bytes")


def _host_traffic() -> int:
    stats = vkep.stats()[0]
    return sum(stats[k] for k in HOST_TRAFFIC)


# (seed: the weights' seed; for int8 activations one whose greedy choices have top-2 margins of at least
# 2 * FLIP on the CPU EP, so that a rounding flip cannot change a token on another machine either)
@pytest.mark.parametrize("packed,shared,batch,accuracy,seed,float16", [
    (True, True, 1, 4, 7, False), (False, False, 1, 4, 48, False), (True, False, 2, 4, 37, False),
    (False, True, 1, 0, 0, False), (True, True, 1, 4, 37, True)],
    ids=["packed_qkv-shared_buffer", "separate_qkv-present_as_past", "batch2", "float32_A", "float16"])
def test_tiny_llm_generates_the_cpu_eps_tokens(ep_devices, packed, shared, batch, accuracy, seed, float16):
    """accuracy_level 4 (the builder's for the CPU EP) quantizes activations to int8: where an activation
    lies within float32 rounding of a rounding boundary, vkep and the CPU EP may quantize it one step apart
    (one element of a block off by max|a| / 127), which moved a step's logits by up to 0.07 here (spread 4).
    So logits agree to 1e-4 at most steps and within FLIP at every step; the tokens agree exactly. With
    float32 activations (accuracy_level 0) every step agrees to 1e-4. float16 (the builder's GPU export):
    vkep's kernels and the CPU EP's round to float16 at other places (0.27 apart at most here): within
    FLIP16."""
    config = tiny_llm.Config(packed_qkv=packed, accuracy_level=accuracy, seed=seed, float16=float16)
    model = tiny_llm.build(config)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for _, _, ep in placed} == {VULKAN}, [p for p in placed if p[2] != VULKAN]
    ops = {op for _, op, _ in placed}
    assert {"MatMulNBits", "GroupQueryAttention", "SkipSimplifiedLayerNormalization",
            "SimplifiedLayerNormalization", "Gather", "Sigmoid"} <= ops, ops

    prompt = tiny_llm.prompt_tokens(config, batch=batch)
    generator = tiny_llm.Generator(session, config, tiny_llm.vkep_memory_info(ep_devices), shared=shared)
    before = _host_traffic()
    got = generator.generate(prompt, STEPS)
    moved = _host_traffic() - before
    cpu = tiny_llm.Generator(runner.cpu_session(model), config, shared=shared)
    want = cpu.generate(prompt, STEPS)
    close = 0
    bound = FLIP16 if float16 else FLIP if accuracy == 4 else 1e-4
    for step, (g, w) in enumerate(zip(generator.logits, cpu.logits, strict=True)):
        g, w = g.astype(np.float32), w.astype(np.float32)
        close += np.allclose(g, w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(g, w, rtol=0, atol=bound, err_msg=f"step {step}")
        top2 = np.sort(w, -1)[:, -2:]
        assert (top2[:, 1] - top2[:, 0]).min() > 2 * bound, f"step {step}: a near tie (seed {seed})"
    if not float16:
        assert close >= (STEPS * 3 // 4 if accuracy == 4 else STEPS), f"{close} of {STEPS} steps within 1e-4"
    np.testing.assert_array_equal(got, want)
    assert len(set(want.ravel().tolist())) > 3  # (a loop stuck on one token would prove little)
    # the KV cache stays in vkep memory: what crossed to or from the host is at most the token ids, the
    # attention mask and the logits of each step (nothing at all on a unified-memory device)
    io = sum(batch * 8 * (n + (prompt.shape[1] + step)) + batch * n * config.vocab * np.dtype(config.dtype).itemsize
             for step, n in enumerate([prompt.shape[1]] + [1] * (STEPS - 1)))
    assert moved <= io, (moved, io)


def _nbits_model(k: int, n: int, bits: int, block: int, zero_points: bool, accuracy_level: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    blocks = -(-k // block)
    inits = [numpy_helper.from_array(rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8), "b"),
             numpy_helper.from_array(rng.uniform(0.01, 0.1, (n, blocks)).astype(np.float32), "scales")]
    if zero_points:
        inits.append(numpy_helper.from_array(rng.integers(0, 256, (n, (blocks * bits + 7) // 8), dtype=np.uint8),
                                             "zp"))
    node = helper.make_node("MatMulNBits", ["a", "b", "scales"] + (["zp"] if zero_points else []), ["y"],
                            domain=tiny_llm.MS, K=k, N=n, bits=bits, block_size=block, accuracy_level=accuracy_level)
    graph = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("a", 1, ["m", k])],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(tiny_llm.MS, 1)],
                             ir_version=10)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("k,block,zero_points", [(64, 32, False), (40, 16, True), (256, 128, True)])
def test_matmul_nbits_int8_accuracy_as_the_cpu_ep(ep_devices, bits, k, block, zero_points):
    """accuracy_level 4: A quantized to int8 per block as ORT's CPU EP does (MLAS CompInt8), within float32
    rounding of the CPU EP's answer, and measurably off the float32 product (so that path really ran)."""
    model = _nbits_model(k, 48, bits, block, zero_points, accuracy_level=4)
    a = np.random.default_rng(1).standard_normal((5, k)).astype(np.float32)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VULKAN}
    got = session.run(None, {"a": a})[0]
    want = runner.cpu_session(model).run(None, {"a": a})[0]
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * scale)
    exact = runner.cpu_session(_nbits_model(k, 48, bits, block, zero_points, accuracy_level=0)).run(None, {"a": a})[0]
    assert np.abs(got - exact).max() > 1e-4 * scale


@pytest.mark.parametrize("accuracy,ep", [(4, "CPUExecutionProvider"), (0, VULKAN)])
def test_matmul_nbits_int8_accuracy_declines_past_the_loop_budget(ep_devices, accuracy, ep):
    """The int8 path reads each block of A twice: K = 32,768 passes one invocation's loop budget with it (lavapipe
    would end the loop early: a wrong answer), not without it. Declined at GetCapability, run by the CPU EP."""
    model = _nbits_model(32768, 8, 4, 32, False, accuracy_level=accuracy)
    session = runner.vkep_session(model)
    assert {e for _, _, e in runner.placement(session)} == {ep}
    if ep != VULKAN:
        a = np.random.default_rng(2).standard_normal((1, 32768)).astype(np.float32)
        np.testing.assert_array_equal(session.run(None, {"a": a})[0], runner.cpu_session(model).run(None, {"a": a})[0])
