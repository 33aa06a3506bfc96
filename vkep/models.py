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
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
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


def with_unsupported_op(dtype=np.float32) -> onnx.ModelProto:
    """MatMul -> Relu -> CumSum -> Add -> Softmax: CumSum is not in vkep's first op set, so the graph
    must be split between vkep and the CPU EP.

    Input x [2,16]; output y [2,32].
    """
    b = _Builder(dtype, seed=7)
    x = b.input("x", (2, 16))
    h = b.op("MatMul", [x, b.weight("w", (16, 32))])
    h = b.op("Relu", [h])
    h = b.op("CumSum", [h, b.ints("axis", 1)])  # 0-D int64 axis
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
