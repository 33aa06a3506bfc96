"""Small ONNX models for tests, benchmarks and `vkep run`, built with `onnx.helper`.

Every builder returns an `onnx.ModelProto` (opset 21, IR version 10, static shapes) that passes
`onnx.checker.check_model(model, full_check=True)`. Weights are deterministic; graph inputs come from
`random_inputs`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 21
IR_VERSION = 10

__all__ = [
    "OPSET",
    "IR_VERSION",
    "add_chain",
    "all_ops",
    "with_unsupported_op",
    "random_inputs",
    "default_model",
    "bert_encoder",
    "bert_inputs",
    "float32_twin",
]


class _Builder:
    """Collects nodes, initializers and graph inputs/outputs for one graph of one float dtype."""

    def __init__(self, dtype, seed: int = 1234):
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float16, np.float64):
            raise ValueError(f"unsupported float dtype {self.dtype}")
        self.elem = helper.np_dtype_to_tensor_dtype(self.dtype)
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._counts: dict[str, int] = {}

    def input(self, name: str, shape: Sequence[int]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, self.elem, list(shape)))
        return name

    def output(self, name: str, shape: Sequence[int]) -> str:
        self.outputs.append(helper.make_tensor_value_info(name, self.elem, list(shape)))
        return name

    def const(self, name: str, value) -> str:
        """A float initializer in the graph's dtype."""
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=self.dtype), name))
        return name

    def ints(self, name: str, value) -> str:
        """An int64 initializer (shapes, axes)."""
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.int64), name))
        return name

    def weight(self, name: str, shape: Sequence[int], fan_in: int | None = None) -> str:
        """Uniform weights scaled by 1/sqrt(fan_in), so activations stay O(1)."""
        scale = 1.0 / np.sqrt(fan_in if fan_in else shape[0])
        return self.const(name, self.rng.uniform(-scale, scale, size=tuple(shape)))

    def op(self, op_type: str, inputs: Sequence[str], out: str | None = None, **attrs) -> str:
        n = self._counts.get(op_type, 0)
        self._counts[op_type] = n + 1
        out = out or f"{op_type.lower()}_{n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=f"{op_type}_{n}", **attrs))
        return out

    def model(self, graph_name: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs, initializer=self.inits)
        domains = sorted({n.domain for n in self.nodes if n.domain not in ("", "ai.onnx")})
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, 1) for d in domains],
            ir_version=IR_VERSION,
            producer_name="vkep.models",
        )
        onnx.checker.check_model(model, full_check=True)
        return model


def add_chain(n: int = 512, shape: Sequence[int] = (1, 16), dtype=np.float32) -> onnx.ModelProto:
    """x -> Add(x, c_0) -> Add(., c_1) -> ... -> y: n Add nodes, each with its own tiny constant.

    The constants are distinct (so no optimizer can share or fold them into one) and in
    [-1e-3, 1e-3], so y stays close to x. Made for measuring host overhead per node.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    b = _Builder(dtype, seed=0)
    shape = tuple(int(d) for d in shape)
    cur = b.input("x", shape)
    for i in range(n):
        c = b.const(f"c_{i}", b.rng.uniform(-1e-3, 1e-3, size=shape))
        cur = b.op("Add", [cur, c], out="y" if i == n - 1 else f"t_{i}")
    b.output("y", shape)
    return b.model(f"add_chain_{n}")


def all_ops(dtype=np.float32) -> onnx.ModelProto:
    """One graph that uses every op of vkep's first set at least once, with realistic shapes.

    Ops: Add, Sub, Mul, Div (with broadcasting on either side), Relu, Sigmoid, Tanh, MatMul (3-D x 2-D
    and batched x batched with broadcast batch dims), Gemm (alpha/beta/transB/C[N]; transA without C),
    Softmax (last axis and axis 1), Reshape (with 0 and -1), Flatten, Squeeze, Unsqueeze, Identity.

    Inputs:  x [2,3,4], a [2,8,16], ba [2,1,4,16], bb [1,3,16,8], q [8,1,2]
    Outputs: y_gemm [2,16], y_attn [2,8,32], y_flat [2,96]

    The Identity's input has a second consumer, so ORT's basic optimizer (EliminateIdentity) keeps it.
    """
    b = _Builder(dtype, seed=21)
    x = b.input("x", (2, 3, 4))
    a = b.input("a", (2, 8, 16))
    ba = b.input("ba", (2, 1, 4, 16))
    bb = b.input("bb", (1, 3, 16, 8))
    q = b.input("q", (8, 1, 2))
    axes_1 = b.ints("axes_1", [1])

    # Element-wise with broadcasting: [2,3,4] op [4], op [3,1], op [1], and [3,1] op [2,3,4].
    h = b.op("Add", [x, b.const("bias_4", b.rng.uniform(-0.5, 0.5, size=(4,)))])
    h = b.op("Mul", [h, b.const("scale_3x1", b.rng.uniform(0.5, 1.5, size=(3, 1)))])
    den = b.op("Add", [b.op("Sigmoid", [x]), b.const("one", [1.0])])  # in (1, 2): a safe divisor
    h = b.op("Div", [h, den])
    h = b.op("Sub", [b.const("shift_3x1", b.rng.uniform(-0.5, 0.5, size=(3, 1))), h])
    h = b.op("Add", [b.op("Relu", [h]), b.op("Tanh", [h])])
    h = b.op("Softmax", [h], axis=1)  # [2,3,4], over the middle axis

    # Reshape [2,3,4] -> [2,12] (0 copies the batch dim, -1 infers the rest), then two Gemms.
    h = b.op("Reshape", [h, b.ints("shape_0_m1", [0, -1])])
    g1 = b.op(
        "Gemm",
        [
            h,
            b.weight("gemm1_w", (16, 12), fan_in=12),
            b.const("gemm1_c", b.rng.uniform(-0.1, 0.1, size=(16,))),
        ],
        alpha=0.5,
        beta=2.0,
        transB=1,
    )  # 0.5 * [2,12] x [16,12]^T + 2 * C[16] -> [2,16]
    qs = b.op("Squeeze", [q, axes_1])  # [8,1,2] -> [8,2]
    g2 = b.op("Gemm", [qs, b.weight("gemm2_w", (8, 16))], transA=1)  # [8,2]^T x [8,16] -> [2,16]
    g = b.op("Add", [g1, g2])
    b.op("Identity", [g], out="y_gemm")
    b.output("y_gemm", (2, 16))

    # [2,8,16] + Unsqueeze([2,16]) = [2,8,16] + [2,1,16]; 3-D x 2-D MatMul [2,8,16] x [16,32];
    # Softmax over the last axis.
    m = b.op("Add", [a, b.op("Unsqueeze", [g, axes_1])])
    m = b.op("MatMul", [m, b.weight("mm_w", (16, 32))])
    b.op("Softmax", [m], out="y_attn", axis=-1)
    b.output("y_attn", (2, 8, 32))

    # Batched x batched with broadcast batch dims: [2,1,4,16] x [1,3,16,8] -> [2,3,4,8] -> [2,96].
    p = b.op("MatMul", [ba, bb])
    b.op("Flatten", [p], out="y_flat", axis=1)
    b.output("y_flat", (2, 96))
    return b.model("all_ops")


# an op ORT's CPU EP runs and vkep has no kernel for (com.microsoft ScaledSiLU, float32: a new output, no alias)
UNSUPPORTED_OP, UNSUPPORTED_DOMAIN = "ScaledSiLU", "com.microsoft"


def with_unsupported_op(dtype=np.float32) -> onnx.ModelProto:
    """MatMul -> Relu -> ScaledSiLU -> Add -> Softmax: vkep has no kernel for UNSUPPORTED_OP, so the graph must be
    split between vkep and the CPU EP (pick another op there if vkep gains this one).

    Input x [2,16]; output y [2,32].
    """
    b = _Builder(dtype, seed=7)
    x = b.input("x", (2, 16))
    h = b.op("MatMul", [x, b.weight("w", (16, 32))])
    h = b.op("Relu", [h])
    h = b.op(UNSUPPORTED_OP, [h], domain=UNSUPPORTED_DOMAIN)
    h = b.op("Add", [h, b.const("bias", b.rng.uniform(-0.5, 0.5, size=(32,)))])
    b.op("Softmax", [h], out="y", axis=-1)
    b.output("y", (2, 32))
    return b.model("with_unsupported_op")


def default_model() -> onnx.ModelProto:
    """The model `vkep run` uses when none is given."""
    return all_ops(np.float32)


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for every graph input of `model` (initializers excluded).

    Floats are uniform in [-1, 1]; integers in {-1, 0, 1}; bools random. Symbolic dims become 1.
    """
    rng = np.random.default_rng(seed)
    init_names = {t.name for t in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        if vi.name in init_names:
            continue
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input {vi.name!r}: only tensor inputs are supported")
        tt = vi.type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim)
        if dtype.kind == "f":
            value = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        elif dtype.kind in "iu":
            low = -1 if dtype.kind == "i" else 0
            value = rng.integers(low, 2, size=shape).astype(dtype)
        elif dtype.kind == "b":
            value = rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise ValueError(f"input {vi.name!r}: unsupported element type {dtype}")
        feeds[vi.name] = value
    return feeds


def bert_encoder(dtype=np.float32, layers: int = 2, hidden: int = 64, heads: int = 4, seq: int = 16,
                 vocab: int = 100, batch: int = 1) -> onnx.ModelProto:
    """A BERT-style encoder, as exporters write it (no fused contrib ops).

    Embeddings: Gather(word_embeddings, input_ids) + Gather(position_embeddings, position_ids), then
    LayerNormalization. Attention mask: (1 - attention_mask) * -10000, Unsqueeze to [B,1,1,S], added to
    the scores. Per layer: Q/K/V MatMul + Add bias, Reshape [B,S,heads,hidden/heads] + Transpose to heads
    (K transposed for Q x K^T), MatMul scores * 1/sqrt(head size), + mask, Softmax, MatMul with V,
    Transpose + Reshape back, output projection, residual Add, LayerNormalization, FFN (MatMul + Add,
    Gelu, MatMul + Add), residual Add, LayerNormalization (epsilon 1e-5, safe in float16).

    Inputs:  input_ids int64 [batch, seq]; attention_mask [batch, seq] in `dtype` (1 = token, 0 = padding)
    Output:  last_hidden_state [batch, seq, hidden] in `dtype`; weights and embeddings in `dtype`.
    Feed it with `bert_inputs`.
    """
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if layers < 1:
        raise ValueError("layers must be >= 1")
    b = _Builder(dtype, seed=2024)
    head = hidden // heads
    b.inputs.append(helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]))
    mask = b.input("attention_mask", (batch, seq))

    def layer_norm(x: str, name: str, out: str | None = None) -> str:
        gamma = b.const(f"{name}_gamma", b.rng.uniform(0.8, 1.2, size=(hidden,)))
        beta = b.const(f"{name}_beta", b.rng.uniform(-0.1, 0.1, size=(hidden,)))
        return b.op("LayerNormalization", [x, gamma, beta], out=out, axis=-1, epsilon=1e-5)

    def dense(x: str, name: str, n_in: int, n_out: int) -> str:
        y = b.op("MatMul", [x, b.weight(f"{name}_w", (n_in, n_out))])
        return b.op("Add", [y, b.const(f"{name}_b", b.rng.uniform(-0.1, 0.1, size=(n_out,)))])

    words = b.weight("word_embeddings", (vocab, hidden), fan_in=1)
    positions = b.weight("position_embeddings", (seq, hidden), fan_in=1)
    emb = b.op("Add", [b.op("Gather", [words, "input_ids"]),
                       b.op("Gather", [positions, b.ints("position_ids", np.arange(seq))])])
    h = layer_norm(emb, "embeddings")

    additive = b.op("Mul", [b.op("Sub", [b.const("one", 1.0), mask]), b.const("mask_value", -10000.0)])
    additive = b.op("Unsqueeze", [additive, b.ints("mask_axes", [1, 2])])  # [B,1,1,S]
    scale = b.const("attention_scale", 1.0 / np.sqrt(head))
    to_heads = b.ints("heads_shape", [0, 0, heads, head])
    from_heads = b.ints("hidden_shape", [0, 0, hidden])

    for i in range(layers):
        p = f"layer{i}"

        def split(x: str, perm: list[int]) -> str:
            return b.op("Transpose", [b.op("Reshape", [x, to_heads])], perm=perm)

        q = split(dense(h, f"{p}_query", hidden, hidden), [0, 2, 1, 3])  # [B,heads,S,head]
        k = split(dense(h, f"{p}_key", hidden, hidden), [0, 2, 3, 1])  # [B,heads,head,S]
        v = split(dense(h, f"{p}_value", hidden, hidden), [0, 2, 1, 3])  # [B,heads,S,head]
        scores = b.op("Add", [b.op("Mul", [b.op("MatMul", [q, k]), scale]), additive])
        probs = b.op("Softmax", [scores], axis=-1)
        context = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])  # [B,S,heads,head]
        context = b.op("Reshape", [context, from_heads])
        h = layer_norm(b.op("Add", [dense(context, f"{p}_attention_output", hidden, hidden), h]), f"{p}_ln1")
        ffn = b.op("Gelu", [dense(h, f"{p}_intermediate", hidden, 4 * hidden)])
        ffn = dense(ffn, f"{p}_output", 4 * hidden, hidden)
        h = layer_norm(b.op("Add", [ffn, h]), f"{p}_ln2", out="last_hidden_state" if i == layers - 1 else None)
    b.output("last_hidden_state", (batch, seq, hidden))
    return b.model(f"bert_encoder_{layers}x{hidden}")


def bert_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for a `bert_encoder` model: token ids in [0, vocab); a mask of ones with some trailing padding
    (each sequence keeps at least half its tokens)."""
    rng = np.random.default_rng(seed)
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in model.graph.input}
    mask_type = next(vi.type.tensor_type.elem_type for vi in model.graph.input if vi.name == "attention_mask")
    vocab = next(t.dims[0] for t in model.graph.initializer if t.name == "word_embeddings")
    batch, seq = shapes["input_ids"]
    mask = np.ones((batch, seq), dtype=helper.tensor_dtype_to_np_dtype(mask_type))
    for row in range(batch):
        pad = int(rng.integers(0, seq // 2 + 1))
        if pad:
            mask[row, seq - pad:] = 0
    return {"input_ids": rng.integers(0, vocab, size=(batch, seq)).astype(np.int64), "attention_mask": mask}


def float32_twin(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model in float32: float16 initializers, Constant values, graph inputs/outputs/value_info and
    Cast targets become float32 (exactly: every float16 value is a float32 value). A reference for
    comparing a float16 model on vkep with ORT's CPU EP."""
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    f16, f32 = TensorProto.FLOAT16, TensorProto.FLOAT
    g = twin.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == f16:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for vi in [*g.input, *g.output, *g.value_info]:
        if vi.type.tensor_type.elem_type == f16:
            vi.type.tensor_type.elem_type = f32
    for node in g.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == f16:
                attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float32)))
            elif node.op_type == "Cast" and attr.name == "to" and attr.i == f16:
                attr.i = f32
    onnx.checker.check_model(twin, full_check=True)
    return twin
