"""com.microsoft MoE and QMoE on vkep against ORT's CPU EP: every activation (SwiGLU fused and interleaved, with
alpha, beta and limit), with and without biases, normalize on and off, k 1 and 2, 1 and 7 tokens (a 2-D and a 3-D
input), float16, QMoE 4 and 8 bits with a scale per row or per block, with and without zero points, the experts as
initializers (as exported) or as graph inputs; ties in the router; and what stays on the CPU EP."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from vkep import runner

MS = "com.microsoft"
VULKAN = "VulkanExecutionProvider"
CPU = "CPUExecutionProvider"


def quantize(w: np.ndarray, bits: int, block: int, zero_points: bool, rng) -> tuple:
    """(packed uint8 weights, scales, packed zero points or None) of float experts w [E, N, K], as ORT's
    quantize_matmul_{4,8}bits lays them out: a scale per row (block 0) or per block of K, 4-bit values two a byte."""
    e, n, k = w.shape
    size = block or k
    wb = w.reshape(e, n, k // size, size)
    top = (1 << bits) - 1
    if zero_points:
        lo, hi = wb.min(-1), wb.max(-1)
        scale = np.where(hi > lo, (hi - lo) / top, 1.0)
        zp = np.clip(np.round(-lo / scale), 0, top).astype(np.int32)
        zp = zp ^ rng.integers(0, 2, zp.shape)  # (some off by one: the zero point is read, not assumed)
    else:
        scale = np.abs(wb).max(-1) / (top // 2)
        zp = np.full(scale.shape, 1 << (bits - 1), np.int32)
    q = np.clip(np.round(wb / scale[..., None]) + zp[..., None], 0, top).astype(np.int32).reshape(e, n, k)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8) if bits == 4 else q.astype(np.uint8)
    scale = scale.astype(np.float32)
    if not block:
        scale, zp = scale[..., 0], zp[..., 0]
    packed_zp = None
    if zero_points:
        if bits == 8:
            packed_zp = zp.astype(np.uint8)
        else:
            zp = np.concatenate([zp, np.zeros(zp.shape[:-1] + (zp.shape[-1] % 2,), np.int32)], -1)
            packed_zp = (zp[..., 0::2] | (zp[..., 1::2] << 4)).astype(np.uint8)
    return packed, scale, packed_zp


def moe_case(hidden: int = 64, inter: int = 128, experts: int = 4, tokens: int = 7, k: int = 2,
             activation: str = "silu", bias: bool = True, bits: int = 0, block: int = 0, zero_points: bool = False,
             dtype=np.float32, batch3d: bool = False, initializers: bool = True, router=None, seed: int = 0, **attrs):
    """A one-node MoE (bits 0) or QMoE model and its feeds (input and router_probs; the experts initializers or
    inputs)."""
    rng = np.random.default_rng(seed)
    fusion = 2 if activation == "swiglu" else 1
    x = rng.standard_normal((tokens, hidden))
    r = rng.standard_normal((tokens, experts)) if router is None else np.asarray(router, np.float64)
    w1 = rng.standard_normal((experts, fusion * inter, hidden)) / np.sqrt(hidden)
    w2 = rng.standard_normal((experts, hidden, inter)) / np.sqrt(inter)
    consts: dict[str, np.ndarray] = {}
    if bits:
        q1, s1, z1 = quantize(w1, bits, block, zero_points, rng)
        q2, s2, z2 = quantize(w2, bits, block, zero_points, rng)
        consts.update(fc1=q1, fc1_scales=s1.astype(dtype), fc2=q2, fc2_scales=s2.astype(dtype))
        if zero_points:
            consts.update(fc1_zp=z1, fc2_zp=z2)
    else:
        consts.update(fc1=w1.astype(dtype), fc2=w2.astype(dtype))
    if bias:
        consts.update(fc1_bias=(0.5 * rng.standard_normal((experts, fusion * inter))).astype(dtype),
                      fc2_bias=(0.5 * rng.standard_normal((experts, hidden))).astype(dtype))
    if bits:
        names = ["input", "router_probs", "fc1", "fc1_scales", "fc1_bias", "fc2", "fc2_scales", "fc2_bias", "", "", "",
                 "fc1_zp", "fc2_zp"]
        attrs = {"expert_weight_bits": bits, **({"block_size": block} if block else {}), **attrs}
    else:
        names = ["input", "router_probs", "fc1", "fc1_bias", "fc2", "fc2_bias"]
    names = [n if n in consts or n in ("input", "router_probs") else "" for n in names]
    while names[-1] == "":
        names.pop()
    if activation == "swiglu":
        attrs = {"swiglu_fusion": 1, **attrs}
    node = helper.make_node("QMoE" if bits else "MoE", names, ["output"], domain=MS, k=k,
                            activation_type=activation, **attrs)
    feeds = {"input": x.reshape((1, tokens, hidden) if batch3d else (tokens, hidden)).astype(dtype),
             "router_probs": r.astype(dtype)}
    graph_inputs = dict(feeds) if initializers else {**feeds, **consts}
    if not initializers:
        feeds = graph_inputs
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in graph_inputs.items()]
    inits = [numpy_helper.from_array(a, n) for n, a in consts.items()] if initializers else []
    graph = helper.make_graph([node], "moe", infos, [helper.make_tensor_value_info("output", elem, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=8)
    return model, feeds


def _check(model, feeds, dtype=np.float32, runs: int = 2) -> None:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VULKAN}
    want = runner.cpu_session(model).run(None, feeds)[0]
    tol = {"rtol": 2e-3, "atol": 1e-4} if dtype == np.float16 else {"rtol": 1e-4, "atol": 2e-5}
    for _ in range(runs):
        got = session.run(None, feeds)[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **tol)


ACTIVATIONS = ["relu", "gelu", "silu", "identity", "swiglu"]

CASES = {
    **{f"{a}_k{k}_bias{int(b)}_norm{n}": {"activation": a, "k": k, "bias": b, "normalize_routing_weights": n}
       for a in ACTIVATIONS for k, b, n in ((1, True, 0), (2, False, 1), (2, True, 0))},
    "one_token": {"tokens": 1, "k": 2, "normalize_routing_weights": 1},
    "one_token_swiglu": {"tokens": 1, "activation": "swiglu", "experts": 8},
    "batch3d": {"batch3d": True, "activation": "gelu"},
    "wide": {"hidden": 256, "inter": 512, "experts": 8, "k": 2, "activation": "swiglu"},
    "swiglu_alpha_beta_limit": {"activation": "swiglu", "activation_alpha": 1.702, "activation_beta": 1.0,
                                "swiglu_limit": 0.7},
    "swiglu_limit_only": {"activation": "swiglu", "swiglu_limit": 0.3, "bias": True},
    "k_all_experts": {"k": 4, "experts": 4, "normalize_routing_weights": 1},
    "experts_as_inputs": {"initializers": False, "activation": "relu"},
    "float16": {"dtype": np.float16, "activation": "silu"},
    "float16_swiglu": {"dtype": np.float16, "activation": "swiglu", "tokens": 1, "normalize_routing_weights": 1},
    "float16_gelu_nobias": {"dtype": np.float16, "activation": "gelu", "bias": False},
    # equal logits: the CPU EP takes the higher expert index first
    "router_ties": {"k": 2, "experts": 6, "tokens": 3, "activation": "identity",
                    "router": [[1, 1, 1, 0, 0, 0], [0, 2, 0, 2, 0, 2], [0, 0, 0, 0, 0, 0]]},
    "router_ties_k1": {"k": 1, "experts": 4, "tokens": 2, "router": [[3, 0, 3, 0], [0, 0, 0, 0]]},
}

QCASES = {
    **{f"q{bits}_block{block}_zp{int(zp)}": {"bits": bits, "block": block, "zero_points": zp}
       for bits, block in ((4, 0), (4, 16), (4, 32), (4, 64), (8, 0)) for zp in (False, True)},
    **{f"q4_{a}": {"bits": 4, "block": 32, "activation": a, "bias": a != "relu"} for a in ACTIVATIONS},
    "q8_swiglu_one_token": {"bits": 8, "activation": "swiglu", "tokens": 1, "k": 1},
    "q4_swiglu_gptoss": {"bits": 4, "block": 32, "activation": "swiglu", "hidden": 128, "inter": 128, "experts": 8,
                         "activation_alpha": 1.702, "activation_beta": 1.0, "swiglu_limit": 7.0},
    "q8_wide": {"bits": 8, "zero_points": True, "hidden": 256, "inter": 256, "experts": 8},
    "q4_wide_zp": {"bits": 4, "block": 64, "zero_points": True, "hidden": 256, "inter": 512, "experts": 8},
    "q4_normalize_attribute_0": {"bits": 4, "normalize_routing_weights": 0},  # (QMoE normalizes regardless)
    "q4_per_row_accuracy_level4": {"bits": 4, "accuracy_level": 4},
    "q4_accuracy_level1": {"bits": 4, "block": 32, "accuracy_level": 1},
    "q4_as_inputs": {"bits": 4, "block": 16, "zero_points": True, "initializers": False},
    "q4_float16": {"bits": 4, "block": 32, "dtype": np.float16},
    "q8_float16_zp": {"bits": 8, "zero_points": True, "dtype": np.float16, "tokens": 1},
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_moe(case):
    params = CASES[case]
    model, feeds = moe_case(**params)
    _check(model, feeds, params.get("dtype", np.float32))


@pytest.mark.parametrize("case", list(QCASES), ids=list(QCASES))
def test_qmoe(case):
    params = QCASES[case]
    model, feeds = moe_case(**params)
    _check(model, feeds, params.get("dtype", np.float32))


@pytest.mark.parametrize("quantized", [False, True])
def test_zero_weight_choice_counts_nothing(quantized):
    """A choice whose softmax probability underflows to 0 adds nothing, even where its expert gives inf (the CPU EP
    skips it; 0 * inf would be NaN)."""
    params = {"bits": 4} if quantized else {}
    model, feeds = moe_case(experts=4, k=2, tokens=2, router=[[0, -200, -300, -400], [-300, -200, 0, -250]],
                            **params)
    for init in model.graph.initializer:
        if init.name == "fc2_bias":
            bias = numpy_helper.to_array(init).copy()
            bias[1, :] = np.inf
            init.CopyFrom(numpy_helper.from_array(bias, init.name))
    assert np.isfinite(runner.cpu_session(model).run(None, feeds)[0]).all()
    _check(model, feeds)


def _placement_or_failure(model, feeds):
    """The EP of every node, or None where ORT fails the session or the run (as the CPU EP alone does)."""
    try:
        session = runner.vkep_session(model)
        session.run(None, feeds)
    except (ort.capi.onnxruntime_pybind11_state.Fail, RuntimeError, ort.capi.onnxruntime_pybind11_state.NotImplemented):
        return None
    return {ep for _, _, ep in runner.placement(session)}


# nodes vkep leaves to the CPU EP: what it refuses (an error either way), and what vkep does not build
DECLINED = {
    "swiglu_not_interleaved": ({"activation": "swiglu", "swiglu_fusion": 0}, None),
    "swiglu_chunked": ({"activation": "swiglu", "swiglu_fusion": 2}, None),
    "unknown_activation": ({"activation": "relu2"}, None),
    "k_past_experts": ({"k": 5, "experts": 4}, None),
    "sparse_mixer": ({"k": 2, "use_sparse_mixer": 1}, {CPU}),
    "q2": ({"bits": 2, "block": 32}, {CPU}),
    # block-wise experts the CPU EP multiplies with int8-quantized activations
    "q8_blocks": ({"bits": 8, "block": 32}, {CPU}),
    "q8_blocks_zp": ({"bits": 8, "block": 16, "zero_points": True}, {CPU}),
    "q4_blocks_accuracy_level4": ({"bits": 4, "block": 32, "accuracy_level": 4}, {CPU}),
    "weights_prepacked_1": ({"bits": 4, "block": 32, "weights_prepacked": 1}, None),
    "q4_swiglu_chunked": ({"bits": 4, "activation": "swiglu", "swiglu_fusion": 2}, None),
}


@pytest.mark.parametrize("case", list(DECLINED), ids=list(DECLINED))
def test_declined(case):
    params, cpu_placement = DECLINED[case]
    if params.get("bits") == 2:  # (the helper packs 4 and 8 bits: 2-bit experts by hand)
        model, feeds = moe_case(bits=4, block=32)
        node = model.graph.node[0]
        node.attribute[[a.name for a in node.attribute].index("expert_weight_bits")].i = 2
        for init in model.graph.initializer:
            if init.name in ("fc1", "fc2"):
                arr = numpy_helper.to_array(init)
                init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(arr[..., : arr.shape[-1] // 2]), init.name))
    else:
        model, feeds = moe_case(**params)
    assert _placement_or_failure(model, feeds) == cpu_placement
    if cpu_placement is None:  # the CPU EP alone fails it too
        with pytest.raises(Exception):  # noqa: B017, PT011 — ORT's Fail or NotImplemented
            runner.cpu_session(model).run(None, feeds)


def moe_experts(rng):
    """A random MoE or QMoE node for tests/test_fuzz_ops.py (its `moe` family): any activation, k up to the experts,
    0 to 9 tokens, biases or none, float32 / float16, 4-bit (per row or blocks) or 8-bit (per row) experts with
    zero points or none, experts as initializers."""
    from fuzzing import Case

    bits = int(rng.choice([0, 4, 8]))
    block = int(rng.choice([0, 16, 32])) if bits == 4 else 0
    step = max(block, 2)
    experts = int(rng.integers(1, 9))
    params = {"hidden": step * int(rng.integers(1, 5)), "inter": step * int(rng.integers(1, 5)), "experts": experts,
              "tokens": int(rng.integers(0, 10)), "k": int(rng.integers(1, experts + 1)),
              "activation": str(rng.choice(ACTIVATIONS)), "bias": bool(rng.random() < 0.5), "bits": bits,
              "block": block, "zero_points": bits > 0 and bool(rng.random() < 0.5),
              "dtype": np.float16 if rng.random() < 0.3 else np.float32, "seed": int(rng.integers(0, 2**31))}
    attrs = {"normalize_routing_weights": int(rng.integers(0, 2))}
    if params["activation"] == "swiglu" and rng.random() < 0.5:
        attrs.update(activation_alpha=float(rng.uniform(0.5, 2.0)), activation_beta=float(rng.uniform(0, 1)),
                     swiglu_limit=float(rng.uniform(0.2, 3.0)))
    model, feeds = moe_case(**params, **attrs)
    node = model.graph.node[0]
    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    names = ["x0" if n == "input" else "x1" if n == "router_probs" else n for n in node.input]
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attributes = {n: v.decode() if isinstance(v, bytes) else v for n, v in attributes.items()}
    tol = {"rtol": 2e-3, "atol": 1e-4} if params["dtype"] == np.float16 else {"rtol": 1e-4, "atol": 2e-5}
    return Case(node.op_type, 1, [feeds["input"], feeds["router_probs"]], attributes, consts, names=names, domain=MS,
                tol=tol)
