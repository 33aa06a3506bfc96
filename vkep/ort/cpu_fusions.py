"""Node groups that ORT's CPU EP fuses into one kernel, claimed as one fused node and run by vkep's kernel of the
same op, so that vkep computes them as the CPU EP does: ORT's level-2 fusions (on at its default level, for the
CPU EP's nodes only), which vkep's nodes never see. Node by node the values are an ulp or two apart in half the
elements (another summation order, a division where the fused kernel multiplies), which a DynamicQuantizeLinear
downstream turns into whole steps. They run in ORT's order:

- GeluFusion (gelu_fusion.cc): x / sqrt(2) -> Erf -> + 1 -> times x -> times 0.5 (or x * 0.5 times the sum) into
  com.microsoft Gelu.
- LayerNormFusion (layer_norm_fusion.cc): ReduceMean -> Sub -> Pow -> ReduceMean -> Add -> Sqrt -> Div -> Mul -> Add
  (one or two Subs) into LayerNormalization; SimplifiedLayerNormFusion: Pow -> ReduceMean -> Add -> Sqrt -> Div ->
  Mul into SimplifiedLayerNormalization. The forms with Casts stay nodes (vkep declines to guess them).
- SkipLayerNormFusion (skip_layer_norm_fusion.cc): Add (-> Add of a bias) -> LayerNormalization (a node, or one just
  fused) into com.microsoft SkipLayerNormalization, which sums in Welford's loop and adds the bias after the skip.
- MatMulScaleFusion (matmul_scale_fusion.cc): Mul or Div by constant scalars on a MatMul's inputs or its output into
  com.microsoft FusedMatMul's alpha (alpha times the product, where the graph scales an input, or divides).

The conditions are ORT 1.32's (named at each finder); vkep adds its own: every node claimed, float32 (ORT's fusions
take float16 too, but the CPU EP has no float16 Add or Erf: such a model's nodes run in float32 between Casts,
which part them), norms over the last axis with 1-D parameters. docs/design.md, "ORT's CPU fusions, followed".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vkep.ort import api, declared, qdq
from vkep.ort.ep import Ep
from vkep.ort.graph_match import (
    constant,
    consumers,
    edges,
    first_child,
    first_parent,
    floats,
    infos,
    is_graph_output,
    is_op,
    only_child,
    producer,
    scalar_close,
    since,
)

MS = "com.microsoft"
ADD = MUL = DIV = SUB = (7, 13, 14)
REDUCE_MEAN = (1, 11, 13, 18)
POW = (7, 12, 13, 15)
SQRT = (6, 13)
ERF = (9, 13)
NORM = (1, 17)
MATMUL = (9, 13)
LAYER_NORM_EPSILON = 1e-5  # layer_norm_fusion.cc DEFAULT_LAYERNORM_EPSILON (no constant epsilon found)
SKIP_EPSILON = 1e-12  # contrib_defs.h kDefaultSkipLayerNormEpsilon (a LayerNormalization without epsilon)
SQRT2 = (1.4142099618911743, float(np.sqrt(2.0)))  # (the first: "some Bert model uses this approximation")


@dataclass
class Norm:
    """A LayerNormalization as SkipLayerNormFusion sees it: a node, or the nodes LayerNormFusion fuses into one."""

    members: list
    x: str
    x_info: object
    scale: str
    bias: str
    epsilon: float | None  # (None: a node without the attribute)
    outputs: tuple[str, ...]


def add_groups(ep: Ep, support_info, claimed: list) -> set[int]:
    """Hand ORT each group of claimed nodes the CPU EP would fuse; returns the addresses of the nodes they hold."""
    mine = {api.address(n) for n in claimed}
    held: set[int] = set()

    def hand_over(group: qdq.Group | None) -> bool:
        nonlocal held
        if group is None or any(api.address(m) not in mine or api.address(m) in held for m in group.members):
            return False
        held |= qdq.hand_over(ep, support_info, group)
        return True

    for node in claimed:  # (in ORT's order: Gelu, LayerNormalization with its skip, SimplifiedLayerNormalization, scales)
        hand_over(_gelu(node, ep))
    norms = [n for n in (_layer_norm(node) for node in claimed) if n is not None]
    norms += [_as_norm(node) for node in claimed if is_op(node, "LayerNormalization", NORM) and floats(node)]
    for norm in norms:
        if not hand_over(_skip(norm, ep)):
            hand_over(_norm_alone(norm, ep))
    for node in claimed:
        hand_over(_simplified_norm(node, ep))
    for node in claimed:
        hand_over(_matmul_scale(node, ep))
    if held:
        ep.log.info(f"fuses {len(held)} nodes into the groups the CPU EP fuses (Gelu, norms, scaled products), "
                    "computed as it computes them")
    return held


def _group(ep: Ep, members: list, op: tuple[str, str], attrs: dict, inputs: list[str],
           outputs: tuple[str, ...]) -> qdq.Group | None:
    """A group run by vkep's kernel of `op` (domain, op type) at its first version, where that kernel plans the
    declared shapes (else its nodes stay nodes, rather than fail a run)."""
    specs = ep.specs.get(op, ())
    if not specs:
        return None
    spec, version = specs[0], specs[0].version_ranges()[0][0]
    why = qdq.refused(ep, spec, version, attrs, inputs, infos(members))
    if why:
        ep.log.info(f"leaves the {op[1]} group of {declared.name(members[-1])!r} as nodes: {why}")
        return None
    return qdq.Group(members, outputs, frozenset(declared.output_names(m) for m in members), False, spec, version,
                     attrs, inputs)


# GeluFusion

def _gelu(div, ep: Ep) -> qdq.Group | None:
    """Pattern 1: Mul(x, 0.5) times (Erf(x / sqrt 2) + 1); pattern 2: (x times (Erf(x / sqrt 2) + 1)) times 0.5."""
    if not is_op(div, "Div", DIV) or not floats(div) or not edges(div, 1):
        return None
    x, sqrt2 = declared.names(div)
    if not any(scalar_close(declared.value_infos(div)[1], value) for value in SQRT2):
        return None
    erf = only_child(div)
    if not is_op(erf, "Erf", ERF) or not floats(erf) or not edges(erf, 1):
        return None
    add = only_child(erf)
    if not is_op(add, "Add", ADD) or not floats(add) or not edges(add, 1):
        return None
    add_in = declared.names(add)
    if not scalar_close(declared.value_infos(add)[1 if add_in[0] == declared.output_names(erf)[0] else 0], 1.0):
        return None
    mul = only_child(add)
    if not is_op(mul, "Mul", MUL) or not floats(mul):
        return None
    mul2 = first_parent(mul, "Mul")
    if mul2 is not None:  # pattern 1
        if not is_op(mul2, "Mul", MUL) or not edges(mul2, 1) or not floats(mul2) or x not in declared.names(mul2):
            return None
        half = declared.value_infos(mul2)[1 if declared.names(mul2)[0] == x else 0]
        members, last = [div, erf, add, mul2, mul], mul
    else:  # pattern 2
        if not edges(mul, 1) or x not in declared.names(mul):
            return None
        mul2 = only_child(mul)
        if not is_op(mul2, "Mul", MUL):
            return None
        half = declared.value_infos(mul2)[1 if declared.names(mul2)[0] == declared.output_names(mul)[0] else 0]
        members, last = [div, erf, add, mul, mul2], mul2
    if not scalar_close(half, 0.5):
        return None
    return _group(ep, members, (MS, "Gelu"), {}, [x], declared.output_names(last))


# LayerNormFusion and SimplifiedLayerNormFusion

def _layer_norm(mean) -> Norm | None:
    """ReduceMean (of x) -> Sub (x - mean, once or twice) -> Pow -> ReduceMean -> Add (epsilon) -> Sqrt -> Div ->
    Mul (scale) -> Add (bias), as LayerNormFusion matches it without Casts."""
    if not is_op(mean, "ReduceMean", REDUCE_MEAN) or is_graph_output(mean) or not floats(mean, 1):
        return None
    x = declared.names(mean)[0]
    subs = [n for n, _ in consumers(mean)]
    if len(subs) not in (1, 2) or not all(is_op(s, "Sub", SUB) and floats(s) for s in subs):
        return None
    made = declared.output_names(mean)[0]
    if any([n for n in declared.names(s) if n != made][:1] != [x] for s in subs):
        return None  # (each Sub's other input x)
    source = producer(declared.value_infos(mean)[0])
    if source is not None and declared.op_type(source) == "Cast":
        return None  # (a leading Cast ORT may fuse: a form vkep does not follow)
    sub = subs[0]
    if len(subs) == 1 and edges(sub, 1) and declared.op_type(only_child(sub)) == "Cast":
        return None
    if not edges(sub, 2 if len(subs) == 1 else 1):
        return None
    div = first_child(sub, "Div") or (first_child(subs[1], "Div") if len(subs) == 2 else None)
    if div is None or not is_op(div, "Div", DIV) or not edges(div, 1) or not floats(div):
        return None
    sqrt = first_parent(div, "Sqrt")
    if sqrt is None or not is_op(sqrt, "Sqrt", SQRT) or not edges(sqrt, 1) or not floats(sqrt):
        return None
    add = producer(declared.value_infos(sqrt)[0])
    if add is None or not is_op(add, "Add", ADD) or not edges(add, 1) or not floats(add):
        return None
    mean2 = first_parent(add, "ReduceMean")
    if mean2 is None or not is_op(mean2, "ReduceMean", REDUCE_MEAN) or not edges(mean2, 1) or not floats(mean2, 1):
        return None
    pow_ = producer(declared.value_infos(mean2)[0])
    if pow_ is None or not is_op(pow_, "Pow", POW) or not edges(pow_, 1) or not floats(pow_):
        return None
    sub_of_pow = first_parent(pow_, "Sub")
    if first_parent(pow_, "Cast") is not None or sub_of_pow is None \
            or api.address(sub_of_pow) not in {api.address(s) for s in subs}:
        return None
    mul = only_child(div)
    if not is_op(mul, "Mul", MUL) or not edges(mul, 1) or not floats(mul):
        return None
    last = only_child(mul)
    if not is_op(last, "Add", ADD) or not floats(last):
        return None
    if not _last_axis(mean, x) or _axes(mean) != _axes(mean2):
        return None
    scale, bias = _rank_one_input(mul), _rank_one_input(last)
    if not scale or not bias or _dim0(mul, scale) != _dim0(last, bias):
        return None
    members = [mean, *subs, div, sqrt, add, mean2, pow_, mul, last]
    return Norm(members, x, declared.value_infos(mean)[0], scale, bias, _epsilon(add), declared.output_names(last))


def _simplified_norm(pow_, ep: Ep) -> qdq.Group | None:
    """Pow (of x) -> ReduceMean -> Add (epsilon) -> Sqrt -> Div (x by it) -> Mul (scale), as
    SimplifiedLayerNormFusion matches it on the CPU EP (no Casts)."""
    if not is_op(pow_, "Pow", POW) or not edges(pow_, 1) or not floats(pow_):
        return None
    x = declared.names(pow_)[0]
    mean = first_child(pow_, "ReduceMean")
    if mean is None or not is_op(mean, "ReduceMean", REDUCE_MEAN) or not edges(mean, 1) or not floats(mean, 1):
        return None
    add = first_child(mean, "Add")
    if add is None or not is_op(add, "Add", ADD) or not edges(add, 1) or not floats(add):
        return None
    sqrt = first_child(add, "Sqrt")
    if sqrt is None or not is_op(sqrt, "Sqrt", SQRT) or not edges(sqrt, 1) or not floats(sqrt):
        return None
    div = first_child(sqrt, "Div")
    if div is None or not is_op(div, "Div", DIV) or not edges(div, 1) or not floats(div):
        return None
    if declared.names(div)[0] != x:
        return None
    mul = only_child(div)
    if not is_op(mul, "Mul", MUL) or not floats(mul) or not _last_axis(mean, x):
        return None
    scale = _rank_one_input(mul)
    if not scale:
        return None
    epsilon = _epsilon(add)
    return _group(ep, [pow_, mean, add, sqrt, div, mul], ("", "SimplifiedLayerNormalization"),
                  {"axis": -1, "epsilon": epsilon, "stash_type": 1}, [x, scale], declared.output_names(mul))


def _as_norm(node) -> Norm:
    names = list(declared.names(node)) + ["", ""]
    return Norm([node], names[0], declared.value_infos(node)[0], names[1], names[2],
                declared.attribute(node, "epsilon", "float"), declared.output_names(node))


def _norm_alone(norm: Norm, ep: Ep) -> qdq.Group | None:
    """A fused LayerNormalization no Add feeds (a LayerNormalization node needs no group)."""
    if len(norm.members) == 1:
        return None
    attrs = {"axis": -1, "epsilon": norm.epsilon, "stash_type": 1}
    return _group(ep, norm.members, ("", "LayerNormalization"), attrs, [norm.x, norm.scale, norm.bias], norm.outputs)


# SkipLayerNormFusion

def _skip(norm: Norm, ep: Ep) -> qdq.Group | None:
    """Format 3: Add(input, skip) -> the norm; formats 1 and 2: where that Add's input 0 (else 1) is an Add of a
    constant 1-D bias, (input + skip) + bias."""
    first = producer(norm.x_info)
    if first is None or not _first_add(first, norm):
        return None
    x, skip = declared.names(first)
    members, bias = [first], ""
    for side in (0, 1):  # (format 1, then format 2)
        second = producer(declared.value_infos(first)[side])
        if second is not None and _second_add(second, first, side):
            members.append(second)
            value, bias = declared.names(second)
            x, skip = (value, skip) if side == 0 else (x, value)
            break
    if not _skip_shapes(norm):
        return None
    epsilon = SKIP_EPSILON if norm.epsilon is None else norm.epsilon
    return _group(ep, members + norm.members, (MS, "SkipLayerNormalization"), {"epsilon": epsilon},
                  [x, skip, norm.scale, norm.bias, bias], norm.outputs[:1])


def _first_add(add, norm: Norm) -> bool:
    """CheckFirstAdd, its value the norm's input alone: two 3-D inputs of equal declared dims (dim 0 may be one
    symbolic name in both)."""
    # (after LayerNormFusion a norm it made reads the Add once, as input 0: here every reader is the norm's)
    readers = consumers(add)
    if not is_op(add, "Add", ADD) or not floats(add) or not readers or is_graph_output(add):
        return False
    inside = {api.address(m) for m in norm.members}
    if any(api.address(n) not in inside for n, _ in readers) or declared.output_names(add)[0] != norm.x:
        return False
    if len(norm.members) == 1 and (len(readers) != 1 or readers[0][1] != 0):
        return False
    values = declared.value_infos(add)
    (a, _), (b, _) = declared.declared(values[0]), declared.declared(values[1])
    if a is None or b is None or len(a) != 3 or len(b) != 3:
        return False
    if a[1:] != b[1:] or min(a[1:] + b[1:]) < 0:
        return False
    if a[0] >= 0 and a[0] == b[0]:
        return True
    names_a, names_b = declared.dim_params(values[0]), declared.dim_params(values[1])
    return a[0] < 0 and b[0] < 0 and bool(names_a and names_b and names_a[0]) and names_a[0] == names_b[0]


def _second_add(add, first, side: int) -> bool:
    """CheckSecondAdd, its value the first Add's input `side` alone: a 3-D value plus a constant 1-D bias as long as
    its last dim."""
    if not is_op(add, "Add", ADD) or not floats(add) or not edges(add, 1) or consumers(add)[0][1] != side:
        return False
    values = declared.value_infos(add)
    if not declared.is_constant(values[1]):
        return False
    (a, _), (b, _) = declared.declared(values[0]), declared.declared(values[1])
    return a is not None and b is not None and len(a) == 3 and len(b) == 1 and a[2] >= 0 and a[2] == b[0]


def _skip_shapes(norm: Norm) -> bool:
    """The norm over the last axis of its 3-D input with a 1-D scale (and bias) as long, only its output read."""
    x = declared.declared(norm.x_info)[0]
    if x is None or len(x) != 3:
        return False
    if len(norm.members) == 1:
        axis = declared.attribute(norm.members[0], "axis", "int")
        if (-1 if axis is None else axis) not in (-1, 2):
            return False
    by_name = infos(norm.members)
    params = [declared.declared(by_name[n])[0] for n in (norm.scale, norm.bias) if n]
    if any(p is None or len(p) != 1 or p[0] != x[2] for p in params):
        return False
    return all(not name for name in norm.outputs[1:])


# MatMulScaleFusion

def _matmul_scale(matmul, ep: Ep) -> qdq.Group | None:
    """A MatMul (or FusedMatMul) with Muls or Divs by constant scalars on its inputs (leading) or its one output
    (trailing) as FusedMatMul with alpha their product, as MatMulScaleFusion makes it. ORT also merges a leading
    scale that other nodes read (keeping it for them); vkep keeps such a group as nodes."""
    fused = declared.domain(matmul) == MS and declared.op_type(matmul) == "FusedMatMul" and since(matmul) == 1
    if not (is_op(matmul, "MatMul", MATMUL) or fused) or not floats(matmul):
        return None
    inputs, leading, scales = list(declared.names(matmul)), [], []
    for index, info in enumerate(declared.value_infos(matmul)[:2]):
        scale_node = producer(info)
        found = _scale_of(scale_node) if scale_node is not None else None
        if found is None:
            continue
        scale, at = found
        unscaled = declared.value_infos(scale_node)[1 - at]
        dims = declared.declared(unscaled)[0]
        if dims is None or not dims:
            continue  # (GetInputNodeMerges: the scaled value must have a shape of rank 1 or more)
        if not edges(scale_node, 1):
            return None  # (ORT merges it and keeps the node for its other readers: not a Compile group)
        leading.append(scale_node)
        scales.append(scale)
        inputs[index] = declared.names(scale_node)[1 - at]
    trailing = only_child(matmul) if edges(matmul, 1) else None
    found = _scale_of(trailing) if trailing is not None else None
    if found is not None:
        scales.append(found[0])
    else:
        trailing = None
    if not scales:
        return None
    attrs = {"alpha": 1.0, "transA": 0, "transB": 0, "transBatchA": 0, "transBatchB": 0}
    if fused:
        attrs.update({k: v for k in attrs if (v := declared.attribute(matmul, k, "float" if k == "alpha" else "int"))
                      is not None})
    alpha = np.float32(attrs["alpha"])
    for scale in scales:  # (in float32, inputs first: ORT's order)
        alpha = np.float32(alpha * np.float32(scale))
    attrs["alpha"] = float(alpha)
    last = trailing if trailing is not None else matmul
    return _group(ep, [*leading, matmul, *([trailing] if trailing is not None else [])], (MS, "FusedMatMul"), attrs,
                  inputs[:2], declared.output_names(last))


def _scale_of(node) -> tuple[float, int] | None:
    """GetScaleFromNode: (the scale, the index of its input) of a Mul by a constant scalar or a Div by one (its
    reciprocal in float32), the scalar of no rank above the other input's; float32 only."""
    values = declared.value_infos(node)
    if len(values) != 2:
        return None
    if is_op(node, "Div", DIV):
        divisor = _scalar(values[1], values[0])
        return None if divisor is None else (float(np.float32(1.0) / np.float32(divisor)), 1)
    if is_op(node, "Mul", MUL):
        for at in (0, 1):
            multiplier = _scalar(values[at], values[1 - at])
            if multiplier is not None:
                return float(multiplier), at
    return None


def _scalar(info, other) -> float | None:
    """GetScalarConstantInitializer: a constant of one element whose rank is at most the other operand's."""
    if info == api.ffi.NULL or not declared.is_constant(info):
        return None
    c = constant(info)
    other_dims = declared.declared(other)[0] if other != api.ffi.NULL else None
    if c is None or c.dtype != np.float32 or c.size != 1 or c.ndim > len(other_dims or []):
        return None
    return float(c.reshape(-1)[0])


# helpers of the norms' patterns

def _axes(mean) -> list[int] | None:
    """A ReduceMean's axes, from its attribute or its constant input (None: neither)."""
    axes = declared.attribute(mean, "axes", "ints")
    if axes is None and len(declared.value_infos(mean)) > 1:
        c = constant(declared.value_infos(mean)[1])
        axes = None if c is None else [int(a) for a in c.reshape(-1)]
    return list(axes) if axes else None


def _last_axis(mean, x: str) -> bool:
    """CheckAxesOnReduceMean with one axis: the last of x's (its rank declared where the axis is positive)."""
    axes = _axes(mean)
    if axes is None or len(axes) != 1:
        return False
    if axes[0] < 0:
        return axes[0] == -1
    dims = declared.declared(declared.value_infos(mean)[0])[0]
    return dims is not None and axes[0] == len(dims) - 1


def _rank_one_input(node) -> str:
    """The last input of the node declared 1-D ("" if none): LayerNormFusion's scale or bias."""
    out = ""
    for name, info in zip(declared.names(node), declared.value_infos(node), strict=True):
        dims = declared.declared(info)[0] if info != api.ffi.NULL else None
        if dims is not None and len(dims) == 1:
            out = name
    return out


def _dim0(node, name: str) -> int:
    info = dict(zip(declared.names(node), declared.value_infos(node), strict=True))[name]
    return max(declared.declared(info)[0][0], 0)  # (ORT compares dim_value: 0 where symbolic)


def _epsilon(add) -> float:
    """The epsilon LayerNormFusion reads: the Add's constant float32 input (input 1 first; ORT 1.32 also takes an
    Add(epsilon, variance), measured), else its default."""
    for info in reversed(declared.value_infos(add)[:2]):
        c = constant(info) if declared.is_constant(info) else None
        if c is not None and c.dtype == np.float32 and c.size:
            return float(c.reshape(-1)[0])
    return LAYER_NORM_EPSILON
