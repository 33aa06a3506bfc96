"""com.microsoft Attention (packed QKV weights, as ORT's transformer optimizer exports BERT) against ORT's CPU EP:
mask_index in each format, unidirectional, attention_bias, qkv_hidden_sizes, and what stays on the CPU EP."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vkep import runner

VKEP = "VulkanExecutionProvider"
MS = "com.microsoft"


def _model(batch: int, seq: int, hidden: int, heads: int, sizes: list[int] | None = None, mask: tuple | None = None,
           attn_bias: tuple | None = None, bias: bool = True, seed: int = 0, **attrs) -> tuple:
    """One Attention node: input (and mask_index, attention_bias) fed, weights and bias initializers."""
    rng = np.random.default_rng(seed)
    cols = sum(sizes) if sizes else 3 * hidden
    w = (rng.standard_normal((hidden, cols)) / np.sqrt(hidden)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array((rng.standard_normal(cols) * 0.1).astype(np.float32), "b"))
    names.append("b" if bias else "")
    feeds = {"x": rng.standard_normal((batch, seq, hidden)).astype(np.float32)}
    infos = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [batch, seq, hidden])]
    if mask is not None:
        kind, values = mask
        feeds["mask"] = np.asarray(values, np.int32)
        infos.append(helper.make_tensor_value_info("mask", onnx.TensorProto.INT32, feeds["mask"].shape))
    names.append("mask" if mask is not None else "")
    if attn_bias is not None:
        feeds["ab"] = rng.standard_normal(attn_bias).astype(np.float32)
        infos.append(helper.make_tensor_value_info("ab", onnx.TensorProto.FLOAT, attn_bias))
        names += ["", "ab"]
    if sizes:
        attrs["qkv_hidden_sizes"] = sizes
    node = helper.make_node("Attention", names, ["y"], domain=MS, num_heads=heads, **attrs)
    graph = helper.make_graph([node], "attention", infos, [onnx.ValueInfoProto(name="y")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=9)
    return model, feeds


def _check(model, feeds) -> None:
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    got, want = session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def _lengths(rng, batch: int, seq: int) -> np.ndarray:
    return rng.integers(1, seq + 1, batch)


@pytest.mark.parametrize("case", [
    dict(batch=2, seq=8, hidden=64, heads=4),  # no mask
    dict(batch=2, seq=8, hidden=64, heads=4, mask="raw2d"),  # BERT: the attention mask as int32
    dict(batch=3, seq=7, hidden=32, heads=2, mask="ends"),
    dict(batch=2, seq=6, hidden=32, heads=4, mask="ends_starts"),
    dict(batch=2, seq=5, hidden=32, heads=2, mask="raw3d"),
    dict(batch=2, seq=9, hidden=48, heads=3, unidirectional=1),
    dict(batch=2, seq=9, hidden=48, heads=3, unidirectional=1, mask="raw2d"),
    dict(batch=2, seq=5, hidden=48, heads=3, unidirectional=1, mask="raw3d"),  # rows masked by both
    dict(batch=2, seq=6, hidden=32, heads=4, attn_bias=(2, 4, 6, 6)),
    dict(batch=2, seq=6, hidden=32, heads=4, attn_bias=(1, 4, 6, 6), mask="raw2d"),
    dict(batch=1, seq=6, hidden=32, heads=2, sizes=[32, 32, 16], scale=0.3, bias=False),
    dict(batch=2, seq=4, hidden=32, heads=2, mask="raw2d", mask_filter_value=-1e4 * 2),
    dict(batch=1, seq=1, hidden=32, heads=2, unidirectional=1),
    dict(batch=1, seq=128, hidden=768, heads=12, mask="raw2d"),  # BERT-base shapes
])
def test_attention_matches_cpu_ep(ep_devices, case):
    case = dict(case)
    rng = np.random.default_rng(1)
    batch, seq = case["batch"], case["seq"]
    kind = case.pop("mask", None)
    mask = None
    if kind == "ends":
        mask = (kind, _lengths(rng, batch, seq))
    elif kind == "ends_starts":
        ends = _lengths(rng, batch, seq)
        mask = (kind, np.concatenate([ends, rng.integers(0, ends)]))
    elif kind == "raw2d":
        values = (np.arange(seq)[None, :] < _lengths(rng, batch, seq)[:, None]).astype(np.int32)
        mask = (kind, values)
    elif kind == "raw3d":
        mask = (kind, (rng.random((batch, seq, seq)) < 0.7).astype(np.int32))
    _check(*_model(mask=mask, **case))


def test_attention_fully_masked_rows(ep_devices):
    """A batch whose raw mask is all zeros: the CPU EP adds mask_filter_value to every score (a finite bias, so the
    row is the softmax of the unmasked scores), and so does vkep."""
    mask = np.ones((2, 6), np.int32)
    mask[1] = 0
    _check(*_model(2, 6, 32, 2, mask=("raw2d", mask)))


@pytest.mark.parametrize("mask", [("ends_starts", [6, 6, 0, 6]), ("raw2d", [[1] * 6, [0] * 6]), None])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_masked_rows_with_an_attention_bias(ep_devices, mask, unidirectional):
    """Rows the mask covers everywhere (batch 1: its keys start where they end, or its raw mask is all zeros), with
    an attention_bias: the CPU EP adds the score and the bias, then the mask, and at -10000 that sum rounds to 1e-3,
    so such a row is the softmax of those roundings. vkep adds the two in the same order (attention.comp's (bias,
    mask) pairs): within float noise of the CPU EP. Adding a merged bias + mask left them 5e-4 to 9e-4 apart (fuzz
    cases, seeds 81203 and 1296); without a mask, the causal frontier is the second term."""
    if mask is None and not unidirectional:
        pytest.skip("the attention_bias alone: one term")
    if mask is not None:
        mask = (mask[0], np.asarray(mask[1], np.int32))
    model, feeds = _model(2, 6, 32, 2, mask=mask, attn_bias=(2, 2, 6, 6), seed=3, unidirectional=unidirectional)
    feeds["ab"] *= 3.0
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    got, want = session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_attention_left_to_the_cpu_ep(ep_devices):
    """Weights that are not constant (vkep packs them per projection), do_rotary, a negative scale and
    past_sequence_length stay on the CPU EP."""
    model, _ = _model(1, 4, 32, 2)
    model.graph.input.append(helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [32, 96]))
    assert {ep for _, _, ep in runner.placement(runner.vkep_session(model))} == {"CPUExecutionProvider"}
    model, _ = _model(1, 4, 32, 2, do_rotary=1)
    assert {ep for _, _, ep in runner.placement(runner.vkep_session(model))} == {"CPUExecutionProvider"}
    model, feeds = _model(1, 4, 32, 2, scale=-0.5)
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"CPUExecutionProvider"}
    session.run(None, feeds)
    model, _ = _model(1, 4, 32, 2)
    node = model.graph.node[0]
    node.input.extend(["past", "", "past_len"])
    model.graph.input.append(helper.make_tensor_value_info("past", onnx.TensorProto.FLOAT, [2, 1, 2, 3, 16]))
    model.graph.input.append(helper.make_tensor_value_info("past_len", onnx.TensorProto.INT32, [1]))
    node.output.append("present")
    assert {ep for _, _, ep in runner.placement(runner.vkep_session(model))} == {"CPUExecutionProvider"}
    model, feeds = _model(1, 2, 32, 2)  # a past without the present output: the CPU EP fails the run
    _with_past(model, feeds, 6, present=False)
    assert {ep for _, _, ep in runner.placement(runner.vkep_session(model))} == {"CPUExecutionProvider"}


def _with_past(model: onnx.ModelProto, feeds: dict, past_len: int, present: bool, seed: int = 2) -> None:
    """The model's Attention node given `past` [2, B, heads, past_len, head size] (fed) and, where `present`,
    the output present [2, B, heads, past_len + S, head size]."""
    node = model.graph.node[0]
    batch, seq, hidden = feeds["x"].shape
    heads = next(a.i for a in node.attribute if a.name == "num_heads")
    while len(node.input) < 4:
        node.input.append("")
    node.input.insert(4, "past") if len(node.input) > 4 else node.input.append("past")
    shape = [2, batch, heads, past_len, hidden // heads]
    feeds["past"] = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    model.graph.input.append(helper.make_tensor_value_info("past", onnx.TensorProto.FLOAT, shape))
    if present:
        node.output.append("present")
        model.graph.output.append(onnx.ValueInfoProto(name="present"))


@pytest.mark.parametrize("batch,seq,past_len,heads,hidden,unidirectional,mask,present", [
    (1, 1, 7, 4, 64, 1, False, True),   # GPT-2 decoding: one new token over its cache
    (2, 1, 7, 4, 64, 1, True, True),    # batch of 2 with a [B, past + 1] attention mask (left padding)
    (2, 5, 3, 2, 32, 1, False, True),   # a prompt of 5 over a cache of 3
    (2, 5, 0, 2, 32, 1, True, True),    # the first step: an empty past, present = the prompt's keys and values
    (1, 3, 4, 2, 32, 0, False, True),   # bidirectional over the past
])
def test_attention_with_past_and_present(ep_devices, batch, seq, past_len, heads, hidden, unidirectional, mask,
                                         present):
    """GPT-2 as ORT's transformer optimizer fuses it: past's keys and values come before the new ones, a causal
    mask aligned to the end, and present holds both: every output equal to the CPU EP's."""
    values = None
    if mask:
        values = np.ones((batch, past_len + seq), np.int32)
        values[-1, :2] = 0  # (the last batch row left-padded)
    model, feeds = _model(batch, seq, hidden, heads, mask=None if values is None else ("raw2d", values),
                          unidirectional=unidirectional)
    _with_past(model, feeds, past_len, present)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    got, want = session.run(None, feeds), runner.cpu_session(model).run(None, feeds)
    assert len(got) == len(want) == 1 + present
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-5)


def _bert_as_exporters_write_it() -> onnx.ModelProto:
    """vkep.models.bert_encoder with the two patterns ORT's BERT fusion looks for: the scores divided by
    sqrt(head size), and the mask unsqueezed to [B, 1, 1, S] before (1 - mask) * -10000."""
    from vkep import models

    model = models.bert_encoder(np.float32, batch=2)
    graph = model.graph
    graph.initializer.extend([numpy_helper.from_array(np.array(4.0, np.float32), "sqrt_head"),
                              numpy_helper.from_array(np.array([1], np.int64), "axis1"),
                              numpy_helper.from_array(np.array([2], np.int64), "axis2")])
    nodes = []
    for node in graph.node:
        if node.op_type == "Mul" and "attention_scale" in node.input:
            node = helper.make_node("Div", [node.input[0], "sqrt_head"], list(node.output))
        elif node.op_type == "Sub" and "one" in node.input:
            nodes += [helper.make_node("Unsqueeze", ["attention_mask", "axis1"], ["mask1"]),
                      helper.make_node("Unsqueeze", ["mask1", "axis2"], ["mask2"]),
                      helper.make_node("Sub", ["one", "mask2"], ["inverted"])]
            continue
        elif node.op_type == "Mul" and "mask_value" in node.input:
            continue
        elif node.op_type == "Unsqueeze" and "mask_axes" in node.input:
            node = helper.make_node("Mul", ["inverted", "mask_value"], list(node.output))
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def test_bert_fused_by_orts_transformer_optimizer(ep_devices, tmp_path):
    """A 2-layer BERT encoder fused by onnxruntime.transformers.optimizer (Attention with a ReduceSum mask_index,
    SkipLayerNormalization, BiasGelu): every node on vkep, outputs as the CPU EP's (padded tokens included)."""
    from onnxruntime.transformers.optimizer import optimize_model

    from vkep import models

    src = tmp_path / "bert.onnx"
    onnx.save(_bert_as_exporters_write_it(), src)
    optimized = optimize_model(str(src), model_type="bert", num_heads=4, hidden_size=64, opt_level=0)
    assert optimized.get_fused_operator_statistics()["Attention"] == 2
    model = optimized.model
    feeds = models.bert_inputs(model, seed=1)
    assert feeds["attention_mask"].min() == 0  # (padding to mask)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    want = runner.cpu_session(model).run(None, feeds)[0]
    for _ in range(2):
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-3, atol=1e-5)


def test_weights_that_are_not_constant_are_declined_with_symbolic_shapes(ep_devices):
    """The weights are packed per projection, so a W fed at run time cannot be run: with symbolic input shapes
    (no dry run at GetCapability) the node was accepted and failed its run; the manifest's constant_inputs
    declines it instead, and the CPU EP runs it."""
    f = TensorProto.FLOAT
    node = helper.make_node("Attention", ["x", "w", "b"], ["y"], domain="com.microsoft", num_heads=2)
    graph = helper.make_graph([node], "attention_w_fed",
                              [helper.make_tensor_value_info("x", f, ["n", "s", 8]),
                               helper.make_tensor_value_info("w", f, [8, 24]), helper.make_tensor_value_info("b", f, [24])],
                              [helper.make_tensor_value_info("y", f, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    session = runner.vkep_session(model)
    assert [ep for _, _, ep in runner.placement(session)] == ["CPUExecutionProvider"]
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 3, 8)).astype(np.float32), "w": rng.standard_normal((8, 24)).astype(np.float32),
             "b": np.zeros(24, np.float32)}
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0], rtol=1e-6)


def _as_float16(model: onnx.ModelProto, feeds: dict) -> tuple[onnx.ModelProto, dict]:
    """The model with its float32 inputs, initializers and outputs float16 (what the transformers optimizer's
    --float16 writes)."""
    for init in model.graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    for info in model.graph.input:
        if info.type.tensor_type.elem_type == TensorProto.FLOAT:
            info.type.tensor_type.elem_type = TensorProto.FLOAT16
    return model, {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feeds.items()}


@pytest.mark.parametrize("case", [
    dict(batch=2, seq=8, hidden=64, heads=4),
    dict(batch=2, seq=8, hidden=64, heads=4, mask=True),
    dict(batch=2, seq=9, hidden=48, heads=3, unidirectional=1, mask=True),
    dict(batch=2, seq=6, hidden=32, heads=4, attn_bias=(2, 4, 6, 6)),
    dict(batch=2, seq=1, hidden=64, heads=4, unidirectional=1, past=7),  # GPT-2 decoding over its cache
    dict(batch=2, seq=5, hidden=32, heads=2, unidirectional=1, past=3, mask=True),
])
def test_float16_attention_matches_cpu_ep(ep_devices, case):
    """float16 Attention (ORT's transformers optimizer with --float16; survey 7: bert, distilbert, whisper encoder)
    on vkep, computed in float32 between Casts (the packed weights float32): output and present within float16
    rounding of the CPU EP's float16 kernel."""
    case = dict(case)
    batch, seq = case["batch"], case["seq"]
    past = case.pop("past", 0)
    mask = None
    if case.pop("mask", False):
        values = np.ones((batch, past + seq), np.int32)
        values[-1, :2] = 0
        mask = ("raw2d", values)
    model, feeds = _model(mask=mask, **case)
    if past:
        _with_past(model, feeds, past, present=True)
    model, feeds = _as_float16(model, feeds)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    got, want = session.run(None, feeds), runner.cpu_session(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == np.float16 and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=5e-3, atol=2e-3)
