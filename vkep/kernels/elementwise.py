"""Elementwise ops: binary with full ONNX broadcasting (arithmetic, comparisons, logic, bitwise, Pow, Mod),
variadic folds (Min, Max, Sum, Mean), Where, and unary math, activations, Clip and Cast.

The op codes are the `op` specialization constant of shaders/binary.comp and shaders/unary.comp.
"""

from __future__ import annotations

import math
import struct

from vkep.kernels.base import (
    FLOAT64_SUFFIX,
    MAX_ELEMENTS,
    Kernel,
    Redirect,
    Tensor,
    UnsupportedError,
    declines_float64,
    fast_divisor,
    grid_1d,
    moved_dtype,
    moved_type,
    shader_dtype,
)

MAX_RANK = 6
# binary.comp, unary.comp and where.comp's local size (tests/test_gpu.py reads it back from the SPIR-V).
# lavapipe runs a workgroup's every invocation, out-of-range ones too, through the whole shader (masked
# SIMD): for a 16-element Add, 256 lanes cost it 24K instructions a dispatch, 64 lanes 10.6K, 16 lanes 7.3K
# (callgrind, Mesa 22.3); 64 costs large tensors 9% (more workgroups) and real GPUs nothing.
WORKGROUP = 64
CHUNK = 1024  # elements a workgroup of binary.comp and unary.comp covers over a large tensor (their WIDE)
WIDE_FROM = 4096  # elements from which they do (below, one element a lane costs lavapipe less)


def wide_grid(n: int) -> tuple[int, tuple[int, int, int]]:
    """(WIDE specialization constant, grid) of binary.comp or unary.comp over n elements."""
    wide = CHUNK if n >= WIDE_FROM else 0
    return wide, grid_1d(n, wide or WORKGROUP)


def dispatch_wide(call, shader: str, code: int, n: int, dtype, push: dict, reads: list, writes: list) -> None:
    """binary.comp's op `code` over n elements, its WIDE constant and grid from n."""
    wide, grid = wide_grid(n)
    call.dispatch(shader, dtype, {"op": code, "wide": wide}, push, grid, reads, writes)

# shaders/binary.comp op codes chosen at run time (the others come from the manifest)
OP_ADD, OP_FMOD, OP_MOD, OP_SHIFT_LEFT, OP_SHIFT_RIGHT, OP_FIRST, OP_ADD_SCALE, OP_ACCUMULATE = 0, 5, 6, 21, 22, 23, 24, 25
OP_SUB_LOG = 27  # (FLOAT64: a - log(fmax(b, 1e-20f)), float64 LogSoftmax's last step)
# shaders/unary.comp
OP_CAST = 42
# ONNX TensorProto element types → vkep dtype names (the ones the shaders have)
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
              11: "float64", 12: "uint32", 13: "uint64"}
FLOAT64 = "float64"
SIGNED_ZEROS = ("float64", "float32", "float16")  # the types Where gives the CPU EP's zeros (where.comp ZEROS)
UNSIGNED_WIDE = {"uint32", "uint64"}  # (no variants of their own: moved as int32 and int64)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        dims = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise UnsupportedError(f"shapes {shapes} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of `shape` read as `out` (0 along broadcast dimensions)."""
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    strides, step = [0] * len(out), 1
    for d in range(len(out) - 1, -1, -1):
        strides[d] = step if padded[d] != 1 else 0
        step *= padded[d]
    return strides


def collapse(out: tuple[int, ...], *operand_strides: list[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous for every operand."""
    dims: list[int] = []
    strides: list[list[int]] = [[] for _ in operand_strides]
    for d, size in enumerate(out):
        if size == 1:
            continue
        if dims and all(s[-1] == st[d] * size for s, st in zip(strides, operand_strides, strict=False)):
            dims[-1] *= size
            for s, st in zip(strides, operand_strides, strict=False):
                s[-1] = st[d]
            continue
        dims.append(size)
        for s, st in zip(strides, operand_strides, strict=False):
            s.append(st[d])
    return dims or [1], [s or [1] for s in strides]


def broadcast_plan(shapes: list[tuple[int, ...]], out: tuple[int, ...] | None = None, max_rank: int = MAX_RANK,
                   names: tuple[str, ...] = ("a", "b"), divisor: bool = False) -> tuple[tuple[int, ...], int, dict]:
    """(output shape, element count, push members n, rank, shape and stride_<name> per operand, and with `divisor`
    binary.comp's inner_divisor) for reading every operand broadcast to `out` (default: their common shape)."""
    out = broadcast_shape(*shapes) if out is None else out
    n = math.prod(out)
    if n > MAX_ELEMENTS:
        raise UnsupportedError(f"{out} has {n} elements; shaders index at most {MAX_ELEMENTS}")
    dims, strides = collapse(out, *(broadcast_strides(s, out) for s in shapes))
    if len(dims) > max_rank:
        raise UnsupportedError(f"broadcast of {shapes} needs rank {len(dims)} > {max_rank}")
    return out, n, broadcast_members(n, dims, strides, names, divisor)


def broadcast_members(n: int, dims, strides: list, names: tuple[str, ...] = ("a", "b"), divisor: bool = False) -> dict:
    """The push members of binary.comp (and where.comp) that say how to read broadcast operands: n, rank,
    shape, and each operand's element strides over that shape (stride_<name>); the output is contiguous. With
    `divisor` (binary.comp), inner_divisor: the innermost dimension's (magic, shift) for fast_div."""
    members = {"n": n, "rank": len(dims), "shape": dims,
               **{f"stride_{k}": s for k, s in zip(names, strides, strict=True)}}
    if divisor:
        members["inner_divisor"] = list(fast_divisor(dims[-1] if dims else 1))
    return members


def variant(x: str, y: str) -> str | tuple[str, str]:
    """The shader variant reading `x` and writing `y` (one name when they are the same)."""
    return x if x == y else (x, y)


def tensor_variant(x: Tensor, y: Tensor) -> str | tuple[str, str]:
    """binary.comp's or unary.comp's variant reading `x` and writing `y`: where either is float64 (Add, Sub, Mul,
    Div, Neg, Abs; Cast) a FLOAT64 variant, whose DTYPE is the other side's type in a Cast, else the tensors' own
    types."""
    if FLOAT64 in (x.dtype, y.dtype):
        other = y.dtype if x.dtype == FLOAT64 else x.dtype
        return ("float32" if other == FLOAT64 else other) + FLOAT64_SUFFIX
    return variant(shader_dtype(x), shader_dtype(y))


def float64_side(x: str, y: str) -> int:
    """unary.comp's F64 (its FLOAT64 variant): 1 float64 in, 2 float64 out, 3 both."""
    return (1 if x == FLOAT64 else 0) | (2 if y == FLOAT64 else 0)


def declines_rank(spec, input_ranks, max_rank: int) -> str | None:
    """Inputs of rank above `max_rank`: their broadcast may not collapse to the shader's rank (the
    graph gives ranks, not the sizes that would tell), so the node stays on another EP."""
    if any((r or 0) > max_rank for r in input_ranks):
        return f"{spec.op} of rank {max(r or 0 for r in input_ranks)}: broadcasts above rank {max_rank} are not supported"
    return None


class Binary(Kernel):
    """y = a OP b, broadcast (Add, Sub, Mul, Div, PRelu, BitwiseAnd/Or/Xor; the manifest's `op`)."""

    out_dtype: str | None = None  # None: the inputs' type
    computes_float64 = True

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        return declines_rank(spec, input_ranks, MAX_RANK)

    def plan(self, sa: tuple[int, ...], sb: tuple[int, ...], out: tuple[int, ...] | None = None,
             scale: float = 1.0) -> tuple:
        """(output shape, element count, push members but the tensors) of a OP b, broadcast to `out` (default:
        their shape)."""
        def make():
            shape, n, members = broadcast_plan([sa, sb], out, divisor=True)
            return shape, n, {**members, "scale": scale}

        return self.planned((sa, sb, out, scale), make)

    def shader_variant(self, a: Tensor, b: Tensor, y: Tensor) -> str | tuple[str, str]:
        return tensor_variant(a, y)

    def push(self, members: dict) -> dict:
        """Push members a subclass sets beside the broadcast plan's."""
        return {}

    def compute(self, call) -> None:
        a, b = call.inputs[:2]
        out, n, members = self.plan(a.shape, b.shape)
        y = call.output(0, out, self.out_dtype or a.dtype)
        if n:
            dispatch_wide(call, self.spec.shader, self.constants["op"], n, self.shader_variant(a, b, y),
                          {**members, **self.push(members), "a": a, "b": b, "y": y}, [a, b], [y])


class Compare(Binary):
    """Equal, Greater, Less, GreaterOrEqual, LessOrEqual, And, Or, Xor: bool results."""

    out_dtype = "bool"


class Pow(Binary):
    """The exponent may have another type than the base: the variant reads it as DTYPE and the base
    (and y) as DTYPE_Y. A float64 base: the FLOAT64 variant, its DTYPE the exponent's type (float32's for a float64
    exponent; int32, int64)."""

    FLOAT64_EXPONENTS = {FLOAT64: "float32", "int32": "int32", "int64": "int64"}

    def shader_variant(self, a: Tensor, b: Tensor, y: Tensor) -> str | tuple[str, str]:
        if a.dtype == FLOAT64:
            return self.FLOAT64_EXPONENTS[b.dtype] + FLOAT64_SUFFIX
        return variant(shader_dtype(b), shader_dtype(a))

    def push(self, members: dict) -> dict:
        # ORT's double Pow takes x * x and x * x * x for the exponents 2 and 3 where its broadcast loop sees the
        # exponent as one value for a row of the base (its innermost dim broadcast, the base's not); std::pow elsewhere
        return {"scale": float(members["stride_b"][-1] == 0 and members["stride_a"][-1] != 0)}

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        base, exponent = (list(input_types) + [None, None])[:2]
        if base and exponent and base.startswith("int") and exponent.startswith("float"):
            # the CPU EP takes the power in double precision; the shader in float32 would lose digits
            return f"Pow of an {base} base with a {exponent} exponent"
        if base and exponent and (exponent not in cls.FLOAT64_EXPONENTS if base == FLOAT64 else exponent == FLOAT64):
            return f"Pow of a {base} base with a {exponent} exponent"  # (no variant reads the pair)
        return declines_rank(spec, input_ranks, MAX_RANK)


class Mod(Binary):
    """fmod=1: C's fmod (the sign of the dividend); fmod=0: numpy's mod (the sign of the divisor). ONNX
    before opset 28 (and ORT's CPU EP) reject fmod=0 for floats; vkep computes it as opset 28 defines."""

    def __init__(self, *args):
        super().__init__(*args)
        self.constants = {"op": OP_FMOD if self.attrs["fmod"] else OP_MOD}


class BitShift(Binary):
    """Unsigned shifts; uint32 and uint64 in binary.comp's int32 and int64 variants (their shifts are unsigned)."""

    def shader_variant(self, a: Tensor, b: Tensor, y: Tensor) -> str | tuple[str, str]:
        return moved_dtype(a)

    def __init__(self, *args):
        super().__init__(*args)
        direction = self.attrs["direction"]
        if direction not in ("LEFT", "RIGHT"):
            raise UnsupportedError(f"BitShift: direction must be LEFT or RIGHT, not {direction!r}")
        self.constants = {"op": OP_SHIFT_LEFT if direction == "LEFT" else OP_SHIFT_RIGHT}


class Variadic(Binary):
    """Min, Max, Sum, Mean of 1..N broadcast inputs: y = x0 OP x1, then y = y OP xk in place (N - 1
    dispatches; replayable up to 5 inputs), the order of ORT's CPU EP. Mean scales in its last step. float64 Min, Max
    and Sum in double (the CPU EP has no float64 Mean)."""

    variadic = True

    BROADCAST_SINCE = 8  # (opsets 6-7 broadcast nothing: ORT's CPU EP fails inputs of two shapes)

    def compute(self, call) -> None:
        xs = [x for x in call.inputs if x is not None]
        shapes = tuple(x.shape for x in xs)
        if self.since_version < self.BROADCAST_SINCE and len(set(shapes)) > 1:
            raise UnsupportedError(f"{self.spec.op} {self.since_version}: inputs of shapes {shapes} (one shape)")
        out = broadcast_shape(*shapes)
        y = call.output(0, out)
        if not y.size:
            return
        if len(xs) == 1:  # (a copy: float64 moves as int64)
            _, n, members = self.plan(out, out)
            dispatch_wide(call, self.spec.shader, OP_FIRST, n, moved_dtype(xs[0]),
                          {**members, "a": xs[0], "b": xs[0], "y": y}, [xs[0]], [y])
            return
        dtype = tensor_variant(xs[0], y)
        mean = self.spec.op == "Mean"
        # float16 Sum and Mean of three or more inputs add in float32 and round once, as ORT's CPU EP does
        # (rounding after every add loses a small term beside a large one that a later one cancels)
        wide = dtype == "float16" and len(xs) > 2 and self.spec.op in ("Sum", "Mean")
        acc = call.scratch(out, "float32") if wide else y
        for k in range(1, len(xs)):
            a = xs[0] if k == 1 else acc  # acc = x0 OP x1 first, then acc = acc OP xk in place
            last = k == len(xs) - 1
            # (float64: each step in its two inputs' broadcast shape, as ORT's: min_max_double's ties follow its spans)
            step = broadcast_shape(a.shape, xs[k].shape) if y.dtype == FLOAT64 and not last else out
            if y.dtype == FLOAT64:
                acc = y if step == out else call.scratch(step, FLOAT64)
            _, n, members = self.plan(a.shape, xs[k].shape, step, 1.0 / len(xs) if mean and last else 1.0)
            if wide:  # (x0 + x1 of float16 is exact in float32)
                code, types = (OP_ADD if k == 1 else OP_ACCUMULATE), ("float16", "float32")
            else:
                code, types = (OP_ADD_SCALE if mean and last else self.constants["op"]), dtype
            dispatch_wide(call, self.spec.shader, code, n, types, {**members, "a": a, "b": xs[k], "y": acc},
                          [a, xs[k]], [acc])
        if wide:
            dispatch_unary(call, "unary.comp", {"op": OP_CAST}, acc, y, (0.0, 0.0))


class Where(Kernel):
    """y = c ? a : b over three broadcast inputs (shaders/where.comp: rank <= 5 after collapsing in its push block,
    rank 6 from a persistent table). A select: float64 moves as int64."""

    PUSH_RANK, TABLE_RANK = 5, 6  # (where.comp's)

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        return declines_rank(spec, input_ranks, cls.TABLE_RANK)

    def compute(self, call) -> None:
        c, a, b = call.inputs
        key = (c.shape, a.shape, b.shape)
        out, n, members = self.planned(key, lambda: broadcast_plan(list(key), max_rank=self.TABLE_RANK,
                                                                    names=("c", "a", "b")))
        y = call.output(0, out, a.dtype)
        if not n:
            return
        table = None
        if members["rank"] > self.PUSH_RANK:
            sets = [members["shape"], members["stride_c"], members["stride_a"], members["stride_b"]]
            table = call.persistent(struct.pack(f"<{4 * self.TABLE_RANK}I", *[v for s in sets for v in s]))
            members = {**members, **{k: [] for k in ("shape", "stride_c", "stride_a", "stride_b")}}
        zeros = self.planned(("zeros", *key), lambda: self.cpu_ep_zeros(*key)) if a.dtype in SIGNED_ZEROS else 0
        self.dispatch_1d(call, n, WORKGROUP, variant(shader_dtype(c), moved_dtype(a)),
                         {**members, "c": c, "a": a, "b": b, "y": y, "table": table}, [c, a, b], [y],
                         constants={"table": int(table is not None), "zeros": zeros})

    @staticmethod
    def cpu_ep_zeros(c: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]) -> int:
        """where.comp's ZEROS for float64, float32 and float16: ORT 1.32's CPU EP selects X' = c ? X : 0 and Y' = c ? 0 : Y, then merges
        them by X' != 0 ? X' : Y' over spans of their broadcast, so a -0 from X gives +0 (1); but where Y' is one value
        a span of that merge and X' is not, by Y' != 0 ? Y' : X', so a -0 from Y does instead (2)."""
        xs, ys = broadcast_shape(c, a), broadcast_shape(c, b)
        out = broadcast_shape(xs, ys)
        _, (sx, sy) = collapse(out, broadcast_strides(xs, out), broadcast_strides(ys, out))
        return 2 if sy[-1] == 0 and sx[-1] != 0 else 1


# string attributes passed to the shader as numbers
STRING_PARAMS = {"none": 0.0, "tanh": 1.0}


def _param(value) -> float:
    if isinstance(value, str):
        if value not in STRING_PARAMS:
            raise UnsupportedError(f"unsupported attribute value {value!r}")
        return STRING_PARAMS[value]
    return float(value)


class Unary(Kernel):
    """y = f(x) per element (the manifest's `op` constant picks f). The first two attributes declared in
    the manifest become the shader's alpha and beta."""

    out_dtype: str | None = None  # None: the input's type
    computes_float64 = True

    def __init__(self, *args):
        super().__init__(*args)
        params = [_param(self.attrs[a.name]) for a in self.spec.attributes] + [0.0, 0.0]
        self.params = (params[0], params[1])  # (alpha, beta)

    def compute(self, call) -> None:
        self.run(call)

    def run(self, call, lo: Tensor | None = None, hi: Tensor | None = None) -> None:
        """One dispatch; `lo`/`hi` are Clip's bounds, read by the shader from the device."""
        x = call.inputs[0]
        y = call.output(0, x.shape, self.out_dtype or x.dtype)
        n = x.size
        if n > MAX_ELEMENTS:
            raise UnsupportedError(f"{x.shape} has {n} elements; shaders index at most {MAX_ELEMENTS}")
        if n:
            dispatch_unary(call, self.spec.shader, self.constants, x, y, self.params, lo, hi)


def dispatch_unary(call, shader: str, constants: dict[str, int], x: Tensor, y: Tensor, params: tuple[float, float],
                   lo: Tensor | None = None, hi: Tensor | None = None) -> None:
    """y = f(x) in one dispatch of unary.comp, `params` its alpha and beta."""
    reads = [x] + [t for t in (lo, hi) if t is not None]
    wide, grid = wide_grid(x.size)
    push = {"x": x, "y": y, "lo": lo, "hi": hi, "n": x.size, "alpha": params[0], "beta": params[1]}
    if FLOAT64 in (x.dtype, y.dtype):
        constants = {**constants, "f64": float64_side(x.dtype, y.dtype)}
    call.dispatch(shader, tensor_variant(x, y), {**constants, "wide": wide}, push, grid, reads, [y])


def dispatch_binary(call, code: int, a: Tensor, b: Tensor, y: Tensor, scale: float = 1.0) -> None:
    """y = a OP b (binary.comp's op `code`; `scale` its parameter), broadcast to y's shape, in one dispatch."""
    _, n, members = broadcast_plan([a.shape, b.shape], y.shape, divisor=True)
    dispatch_wide(call, "binary.comp", code, n, tensor_variant(a, y),
                  {**members, "scale": scale, "a": a, "b": b, "y": y}, [a, b], [y])


class ImageScaler(Kernel):
    """ImageScaler (opsets 1-9; ORT keeps it for old models): y = scale * x + bias[c] over [N, C, H, W], in the
    order ORT computes it (binary.comp's OP_SCALE_ADD, the biases a persistent [C, 1, 1] tensor)."""

    def compute(self, call) -> None:
        x = call.inputs[0]
        bias = [float(b) for b in self.attrs["bias"]]
        if len(x.shape) != 4 or len(bias) != x.shape[1]:  # (ORT's CPU EP fails such a node)
            raise UnsupportedError(f"ImageScaler: X {x.shape} with {len(bias)} biases, not [N, C, H, W] with C")
        y = call.output(0, x.shape)
        if y.size:
            table = call.persistent(struct.pack(f"<{len(bias)}f", *bias))
            dispatch_binary(call, self.constants["op"], x, Tensor(table.addr, (len(bias), 1, 1), "float32", table.io),
                            y, float(self.attrs["scale"]))


class Predicate(Unary):
    """IsNaN, IsInf: bool results."""

    out_dtype = "bool"


class Clip(Unary):
    """Opset 6: min/max attributes; opset 11+: optional scalar inputs, read by the shader on the device."""

    def __init__(self, *args):
        super().__init__(*args)
        self.params = (float(self.attrs.get("min", -math.inf)), float(self.attrs.get("max", math.inf)))

    def compute(self, call) -> None:
        bounds = list(call.inputs[1:3]) + [None, None]
        for t in bounds[:2]:
            if t is not None and t.size != 1:
                raise UnsupportedError(f"Clip: min and max must be scalars, not {t.shape}")
        self.run(call, bounds[0], bounds[1])


class Cast(Unary):
    """Cast to the `to` type (saturate only concerns float8 types, which vkep has not); uint32 and uint64 only to
    and from their signed twins (the same bits: torch's exports wrap an unsigned shift of int64 in such Casts)."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        x, y = (list(input_types) + [None])[0], ONNX_TYPES.get(attrs.get("to"))
        if {x, y} & UNSIGNED_WIDE and x != y and moved_type(x) != moved_type(y):
            return f"Cast from {x} to {y} (uint32 and uint64 only to and from int32 and int64)"
        return None

    def compute(self, call) -> None:
        x = call.inputs[0]
        if {x.dtype, self.out_dtype} & UNSIGNED_WIDE:  # (the same bits, copied in the signed twin's variant)
            y = call.output(0, x.shape, self.out_dtype)
            if x.size:
                twin = moved_type(x.dtype)
                dispatch_unary(call, self.spec.shader, self.constants, x.view(0, x.shape, twin),
                               y.view(0, y.shape, twin), self.params)
            return
        self.run(call)

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types) -> str | None:
        return declines_float64(info, input_types, ONNX_TYPES.get(attrs.get("to")))

    def __init__(self, *args):
        super().__init__(*args)
        to = self.attrs["to"]
        if to not in ONNX_TYPES:
            raise UnsupportedError(f"Cast: no shader variant for element type {to}")
        self.out_dtype = ONNX_TYPES[to]
        self.constants = {"op": OP_CAST, "bool_out": int(self.out_dtype == "bool")}


class CastLike(Unary):
    """Cast to the element type of the second input, whose values are not read."""

    def compute(self, call) -> None:
        self.out_dtype = call.inputs[1].dtype  # fixed for the node: its type constraint T2
        self.constants = {"op": OP_CAST, "bool_out": int(self.out_dtype == "bool")}
        self.run(call)


def as_float32(call, t: Tensor | None) -> Tensor | None:
    """A float16 tensor as float32 scratch memory (others as they are)."""
    if t is None or t.dtype != "float16":
        return t
    wide = call.scratch(t.shape, "float32")
    if t.size:
        dispatch_unary(call, "unary.comp", {"op": OP_CAST}, t, wide, (0.0, 0.0))
    return wide


class Float32Outputs(Redirect):
    """A float16 node's call whose outputs a float32 computation writes into scratch memory; finish() casts them
    into the node's outputs."""

    def __init__(self, call):
        super().__init__(call, call.inputs)
        self.wide: dict[int, Tensor] = {}

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        if index not in self.wide:
            self.wide[index] = self.call.scratch(tuple(shape), "float32")
        return self.wide[index]

    def finish(self) -> None:
        for index, wide in self.wide.items():
            y = self.call.output(index, wide.shape)
            if y.size:
                dispatch_unary(self.call, "unary.comp", {"op": OP_CAST}, wide, y, (0.0, 0.0))
