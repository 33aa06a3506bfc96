"""The com.microsoft ops of ORT's dynamically quantized transformers on vkep against ORT's CPU EP: one-node
MatMulIntegerToFloat, DynamicQuantizeMatMul, QAttention and QEmbedLayerNormalization over BERT-like shapes, and a
tiny BERT in the transformers optimizer's form quantized by `quantize_dynamic` in the test.

Tolerances. The integer sums are exact on both EPs, and the scale-bias step (a float32 product, then the bias)
is the CPU EP's, so the integer GEMMs compare bit for bit. Where the int8 operand pairs with uint8, it is kept in
[-64, 63] (what quantize_dynamic's reduce_range gives QAttention's weights): ORT's AVX2 kernels without VNNI (this
machine class) saturate pairs of uint8 x int8 products at int16, vkep keeps the exact sums (tests/test_qlinear.py).
QAttention's softmax and weighted sum are ContribAttention's (exp and the order of sums differ from MLAS's):
rtol 1e-4 / atol 1e-5 there, as tests/test_contrib_attention.py allows. QEmbedLayerNormalization dequantizes its
tables exactly as the CPU EP does (float(q - zp) * scale) and normalizes in its order: bit for bit. The whole
model: most outputs agree to ~1e-6, but a dynamically quantized activation lands one step off where a float
before it (an attention output) differs in its last bit, and that step (1/255 of the activation's range)
propagates through the layers: up to ~0.025 seen here; atol 0.05 on LayerNorm outputs of magnitude ~1-4."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from vkep import runner

VKEP = "VulkanExecutionProvider"
MS = "com.microsoft"


def _model(op: str, inputs: dict[str, np.ndarray | None], consts: dict[str, np.ndarray | None],
           outputs: int = 1, **attrs) -> onnx.ModelProto:
    """One com.microsoft node over `inputs` (graph inputs) then `consts` (initializers), in that order; None:
    an absent input."""
    both = {**inputs, **consts}
    names = [name if v is not None else "" for name, v in both.items()]
    while names and names[-1] == "":
        names.pop()
    outs = ["y", "y1"][:outputs]
    node = helper.make_node(op, names, outs, domain=MS, **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                     for k, v in inputs.items() if v is not None],
        [onnx.ValueInfoProto(name=n) for n in outs],
        [numpy_helper.from_array(v, k) for k, v in consts.items() if v is not None])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                             ir_version=10)


def _compare(model, feeds: dict, *more_feeds: dict, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Every node on vkep (ORT's record), every output equal to the CPU EP's (within rtol / atol), for `feeds`
    and then each of `more_feeds` in the same session (the same shapes: a replayed plan)."""
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    assert {ep for _, _, ep in runner.placement(session)} == {VKEP}
    cpu = runner.cpu_session(model)
    for f in (feeds, *more_feeds):
        for g, w in zip(session.run(None, f), cpu.run(None, f), strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            if rtol or atol:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
            else:
                np.testing.assert_array_equal(g, w)


def _ints(rng, shape, dtype, low: int | None = None, high: int | None = None) -> np.ndarray:
    info = np.iinfo(dtype)
    lo = info.min if low is None else max(low, info.min)
    hi = info.max if high is None else min(high, info.max)
    return np.asarray(rng.integers(lo, hi + 1, shape), dtype)


def _weights(rng, shape, dtype) -> np.ndarray:
    """B's bytes: int8 in [-64, 63] (no pair saturates on the CPU EP), uint8 over its range."""
    return _ints(rng, shape, dtype, -64, 63) if dtype == np.int8 else _ints(rng, shape, dtype)


def _column_params(rng, n: int, per_column: bool, dtype, zero_point: bool):
    scale = rng.uniform(0.001, 0.02, n if per_column else ()).astype(np.float32)
    zp = _ints(rng, n if per_column else (), dtype, -8, 8) if dtype == np.int8 else \
        _ints(rng, n if per_column else (), dtype, 120, 136)
    return scale, zp if zero_point else None


# (A's shape, K, N): BERT's projections and FFN (hidden 64-768), batch 1-2, seq 1-128
SHAPES = [((1, 1, 64), 64, 192), ((2, 7, 64), 64, 256), ((1, 128, 128), 128, 384), ((2, 16, 768), 768, 96),
          ((5, 64), 64, 48)]


@pytest.mark.parametrize("a_shape,k,n", SHAPES)
@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column,zero_points,bias", [(False, True, True), (True, True, False),
                                                         (True, False, True), (False, False, False)])
def test_matmul_integer_to_float(ep_devices, a_shape, k, n, b_type, per_column, zero_points, bias):
    rng = np.random.default_rng(k + n)
    a = _ints(rng, a_shape, np.uint8)
    b = _weights(rng, (k, n), b_type)
    b_scale, bzp = _column_params(rng, n, per_column, b_type, zero_points)
    consts = {"b": b, "a_scale": np.float32(0.0173), "b_scale": b_scale,
              "a_zero_point": np.uint8(131) if zero_points else None, "b_zero_point": bzp,
              "bias": rng.standard_normal(n).astype(np.float32) if bias else None}
    _compare(_model("MatMulIntegerToFloat", {"a": a}, consts), {"a": a})


@pytest.mark.parametrize("a_shape,k,n", SHAPES)
@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column,zero_point,bias", [(False, True, True), (True, False, True),
                                                        (True, True, False)])
def test_dynamic_quantize_matmul(ep_devices, a_shape, k, n, b_type, per_column, zero_point, bias):
    rng = np.random.default_rng(k * n)
    b = _weights(rng, (k, n), b_type)
    b_scale, bzp = _column_params(rng, n, per_column, b_type, zero_point)
    consts = {"b": b, "b_scale": b_scale, "b_zero_point": bzp,
              "bias": rng.standard_normal(n).astype(np.float32) if bias else None}
    a = (rng.standard_normal(a_shape) * 3 + 0.5).astype(np.float32)
    _compare(_model("DynamicQuantizeMatMul", {"a": a}, consts), {"a": a}, {"a": np.abs(a)})  # (then zero point 0)


def _mask_index(rng, kind: str | None, batch: int, seq: int) -> np.ndarray | None:
    """mask_index in the formats ORT's Attention takes: right-padding ends, ends + starts, raw 2-D / 3-D masks."""
    ends = rng.integers(1, seq + 1, batch)
    if kind == "ends":
        return ends.astype(np.int32)
    if kind == "ends_starts":
        return np.concatenate([ends, rng.integers(0, ends)]).astype(np.int32)
    if kind == "raw2d":
        return (np.arange(seq)[None, :] < ends[:, None]).astype(np.int32)
    if kind == "raw3d":
        return (rng.random((batch, seq, seq)) < 0.7).astype(np.int32)
    return None


def _qattention(rng, batch: int, seq: int, hidden: int, heads: int, w_type=np.int8, per_column: bool = False,
                zero_points: bool = True, mask: str | None = None, unidirectional: int = 0):
    """A one-node QAttention model (weights as quantize_dynamic writes them: initializers) and its feeds."""
    x = _ints(rng, (batch, seq, hidden), np.uint8)
    w = _weights(rng, (hidden, 3 * hidden), w_type)
    w_scale, wzp = _column_params(rng, 3 * hidden, per_column, w_type, zero_points)
    # (Q, K and V of magnitude ~1, as a trained model's: the scores stay where a softmax is not a max)
    w_scale = (w_scale / np.float32(0.01 * 48 * np.sqrt(hidden))).astype(np.float32)
    inputs = {"x": x}
    consts = {"w": w, "bias": (rng.standard_normal(3 * hidden) * 0.1).astype(np.float32),
              "x_scale": np.float32(0.02), "w_scale": w_scale}
    mask_value = _mask_index(rng, mask, batch, seq)
    inputs["mask"] = mask_value
    model_inputs = {"x": x, "w": None, "bias": None, "x_scale": None, "w_scale": None, "mask": mask_value}
    consts = {**consts, "xzp": np.uint8(128) if zero_points else None, "wzp": wzp}
    # (inputs in the schema's order: input, weight, bias, input_scale, weight_scale, mask_index, input_zero_point,
    # weight_zero_point; the graph inputs are x and mask)
    names = [k if (model_inputs.get(k) is not None or consts.get(k) is not None) else ""
             for k in ("x", "w", "bias", "x_scale", "w_scale", "mask", "xzp", "wzp")]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("QAttention", names, ["y"], domain=MS, num_heads=heads, unidirectional=unidirectional)
    graph = helper.make_graph(
        [node], "qattention", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                               for k, v in inputs.items() if v is not None],
        [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(v, k) for k, v in consts.items() if v is not None])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=10)
    return model, {k: v for k, v in inputs.items() if v is not None}


@pytest.mark.parametrize("case", [
    dict(batch=1, seq=8, hidden=64, heads=2),
    dict(batch=2, seq=16, hidden=64, heads=4, mask="raw2d"),  # BERT: the attention mask (ReduceSum form: ends)
    dict(batch=2, seq=7, hidden=64, heads=4, mask="ends", per_column=True),
    dict(batch=2, seq=6, hidden=96, heads=3, mask="ends_starts", w_type=np.uint8),
    dict(batch=2, seq=5, hidden=64, heads=2, mask="raw3d", zero_points=False),
    dict(batch=2, seq=9, hidden=64, heads=4, unidirectional=1, per_column=True, w_type=np.uint8),
    dict(batch=1, seq=1, hidden=64, heads=2),
    dict(batch=1, seq=128, hidden=768, heads=12, mask="raw2d"),  # BERT-base
])
def test_qattention(ep_devices, case):
    model, feeds = _qattention(np.random.default_rng(case["hidden"] + case["seq"]), **case)
    _compare(model, feeds, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("batch,seq,past_len,mask", [(1, 1, 7, False), (2, 4, 3, True), (2, 3, 0, False)])
def test_qattention_with_past_and_present(ep_devices, batch, seq, past_len, mask):
    """GPT-2 as ORT fuses and quantize_dynamic quantizes it: QAttention (unidirectional) reads `past` [2, B, heads,
    P, head size] and writes present: both outputs as the CPU EP's."""
    rng = np.random.default_rng(past_len + seq)
    hidden, heads = 64, 2
    model, feeds = _qattention(rng, batch, seq, hidden, heads, unidirectional=1)
    node = model.graph.node[0]
    node.input.extend([""] * (8 - len(node.input)) + ["past"])
    if mask:
        node.input[5] = "mask"
        feeds["mask"] = np.ones((batch, past_len + seq), np.int32)
        feeds["mask"][-1, :2] = 0
        model.graph.input.append(helper.make_tensor_value_info("mask", onnx.TensorProto.INT32, feeds["mask"].shape))
    shape = [2, batch, heads, past_len, hidden // heads]
    feeds["past"] = rng.standard_normal(shape).astype(np.float32)
    model.graph.input.append(helper.make_tensor_value_info("past", onnx.TensorProto.FLOAT, shape))
    node.output.append("present")
    model.graph.output.append(onnx.ValueInfoProto(name="present"))
    _compare(model, feeds, rtol=1e-3, atol=1e-5)


def _qembed(rng, batch: int, seq: int, hidden: int, words: int = 50, segments: bool = True, mask: bool = True,
            dtype=np.uint8):
    """A one-node QEmbedLayerNormalization model as quantize_dynamic writes it (8-bit tables with per-tensor
    scales and zero points) and its feeds."""
    tables = {"word": (words, hidden), "position": (max(seq, 16), hidden), "segment": (2, hidden),
              "gamma": (hidden,), "beta": (hidden,)}
    if not segments:
        del tables["segment"]
    consts = {k: _ints(rng, shape, dtype) for k, shape in tables.items()}
    for k in tables:
        consts[k + "_scale"] = np.float32(rng.uniform(0.002, 0.05))
    for k in tables:
        consts[k + "_zp"] = _ints(rng, (), dtype, -20, 20) if dtype == np.int8 else _ints(rng, (), dtype, 100, 150)
    feeds = {"ids": rng.integers(0, words, (batch, seq)).astype(np.int32)}
    if segments:
        feeds["seg"] = rng.integers(0, 2, (batch, seq)).astype(np.int32)
    if mask:
        feeds["mask"] = (np.arange(seq)[None, :] < rng.integers(1, seq + 1, batch)[:, None]).astype(np.int32)
    order = ["ids", "seg", "word", "position", "segment", "gamma", "beta", "mask"]
    order += [k + "_scale" for k in ("word", "position", "segment", "gamma", "beta")]
    order += [k + "_zp" for k in ("word", "position", "segment", "gamma", "beta")]
    names = [k if k in feeds or k in consts else "" for k in order]
    node = helper.make_node("QEmbedLayerNormalization", names, ["y", "mask_index"], domain=MS, epsilon=1e-12)
    graph = helper.make_graph(
        [node], "qembed", [helper.make_tensor_value_info(k, onnx.TensorProto.INT32, v.shape) for k, v in feeds.items()],
        [onnx.ValueInfoProto(name="y"), onnx.ValueInfoProto(name="mask_index")],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=10)
    return model, feeds


@pytest.mark.parametrize("case", [
    dict(batch=2, seq=11, hidden=64),
    dict(batch=1, seq=1, hidden=96, segments=False, mask=False),  # DistilBERT: no segments
    dict(batch=2, seq=128, hidden=768, words=300),
    dict(batch=2, seq=7, hidden=64, dtype=np.int8),
])
def test_qembed_layer_norm(ep_devices, case):
    model, feeds = _qembed(np.random.default_rng(case["seq"]), **case)
    rng = np.random.default_rng(1)
    again = {k: (rng.permutation(v.ravel()).reshape(v.shape) if k == "ids" else v) for k, v in feeds.items()}
    _compare(model, feeds, again)


def test_qembed_layer_norm_index_out_of_range_fails_the_run(ep_devices):
    """An id past its table fails the run on the CPU EP and on vkep, and the session stays usable."""
    model, feeds = _qembed(np.random.default_rng(3), 1, 5, 64)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    bad = dict(feeds, ids=np.full_like(feeds["ids"], 50))
    with pytest.raises(Exception, match="out of range"):
        runner.cpu_session(model).run(None, bad)
    with pytest.raises(Exception, match="QEmbedLayerNormalization"):
        session.run(None, bad)
    _compare(model, feeds)


def _tiny_bert(layers: int = 2, hidden: int = 64, heads: int = 4, seq: int = 16, words: int = 100,
               ffn: int = 256) -> onnx.ModelProto:
    """A BERT encoder in the form onnxruntime.transformers.optimizer writes: EmbedLayerNormalization, then per
    layer Attention, MatMul + SkipLayerNormalization (its bias), MatMul + FastGelu (its bias), MatMul +
    SkipLayerNormalization. Weights of a trained model's magnitudes (random, scaled by 1 / sqrt(fan-in))."""
    rng = np.random.default_rng(7)
    inits: list[onnx.TensorProto] = []

    def weight(name: str, *shape: int, scale: float | None = None) -> str:
        value = rng.standard_normal(shape) * (scale if scale is not None else 1 / np.sqrt(shape[0]))
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def gamma(name: str) -> str:
        inits.append(numpy_helper.from_array(rng.uniform(0.8, 1.2, hidden).astype(np.float32), name))
        return name

    nodes = [helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "segment_ids", weight("word", words, hidden, scale=0.5), weight("position", seq, hidden, scale=0.5),
         weight("segment", 2, hidden, scale=0.5), gamma("emb_gamma"), weight("emb_beta", hidden, scale=0.1),
         "input_mask"], ["emb", "mask_index"], domain=MS, epsilon=1e-12)]
    x = "emb"
    for i in range(layers):
        p = f"l{i}_"
        nodes += [
            helper.make_node("Attention", [x, weight(p + "qkv_w", hidden, 3 * hidden),
                                           weight(p + "qkv_b", 3 * hidden, scale=0.1), "mask_index"],
                             [p + "attn"], domain=MS, num_heads=heads),
            helper.make_node("MatMul", [p + "attn", weight(p + "o_w", hidden, hidden)], [p + "o"]),
            helper.make_node("SkipLayerNormalization", [p + "o", x, gamma(p + "ln1_g"), weight(p + "ln1_b", hidden,
                                                                                               scale=0.1),
                                                        weight(p + "o_b", hidden, scale=0.1)],
                             [p + "ln1"], domain=MS, epsilon=1e-12),
            helper.make_node("MatMul", [p + "ln1", weight(p + "ff1_w", hidden, ffn)], [p + "ff1"]),
            helper.make_node("FastGelu", [p + "ff1", weight(p + "ff1_b", ffn, scale=0.1)], [p + "gelu"], domain=MS),
            helper.make_node("MatMul", [p + "gelu", weight(p + "ff2_w", ffn, hidden)], [p + "ff2"]),
            helper.make_node("SkipLayerNormalization", [p + "ff2", p + "ln1", gamma(p + "ln2_g"),
                                                        weight(p + "ln2_b", hidden, scale=0.1),
                                                        weight(p + "ff2_b", hidden, scale=0.1)],
                             [p + "out"], domain=MS, epsilon=1e-12)]
        x = p + "out"
    graph = helper.make_graph(
        nodes, "tiny_bert",
        [helper.make_tensor_value_info(n, onnx.TensorProto.INT32, ["batch", seq])
         for n in ("input_ids", "segment_ids", "input_mask")],
        [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, ["batch", seq, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                             ir_version=10)


def _bert_feeds(batch: int, seq: int = 16, words: int = 100, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq // 2, seq + 1, batch)
    return {"input_ids": rng.integers(0, words, (batch, seq)).astype(np.int32),
            "segment_ids": (np.arange(seq)[None, :] >= lengths[:, None] // 2).astype(np.int32),
            "input_mask": (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)}


@pytest.fixture(scope="module")
def quantized_bert(tmp_path_factory) -> tuple[bytes, bytes]:
    """The tiny BERT quantized by quantize_dynamic (as saved), and as ORT's level-2 optimizer saves it for the
    CPU EP (its MatMulInteger + scale Muls fused into DynamicQuantizeMatMul / MatMulIntegerToFloat)."""
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    folder = tmp_path_factory.mktemp("bert")
    # (the types of the fused ops' outputs, as the optimizer's saved models carry them: quantize_dynamic needs them)
    onnx.save(SymbolicShapeInference.infer_shapes(_tiny_bert()), folder / "bert.onnx")
    # (reduce_range: 7-bit weights, ORT's advice for x86-64 without VNNI, where its MatMulInteger saturates pairs of
    # uint8 x int8 products: with 8-bit weights the CPU EP's sums are off here and vkep's are exact)
    quantize_dynamic(folder / "bert.onnx", folder / "bert_int8.onnx", reduce_range=True)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(folder / "bert_int8_optimized.onnx")
    ort.InferenceSession(str(folder / "bert_int8.onnx"), so, providers=["CPUExecutionProvider"])
    return (folder / "bert_int8.onnx").read_bytes(), (folder / "bert_int8_optimized.onnx").read_bytes()


@pytest.mark.parametrize("optimized", [False, True])
def test_tiny_bert_quantized_by_quantize_dynamic(ep_devices, quantized_bert, optimized):
    model = onnx.load_from_string(quantized_bert[optimized])
    ops = {node.op_type for node in model.graph.node}
    assert {"QAttention", "QEmbedLayerNormalization"} <= ops, ops
    if optimized:
        assert {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"} & ops, ops
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    placed = runner.placement(session)
    assert {ep for _, _, ep in placed} == {VKEP}, placed
    cpu = runner.cpu_session(model)
    for batch in (1, 2):
        feeds = _bert_feeds(batch, seed=batch)
        got, want = session.run(None, feeds)[0], cpu.run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=0.05)

