"""Add (-> Add) -> LayerNormalization claimed as one node where ORT's CPU EP fuses the nodes into com.microsoft
SkipLayerNormalization, and run by vkep's SkipLayerNormalization kernel. The fused kernel sums the row in another
order than LayerNormalization's (Welford's loop against MLAS's AVX2 kernel, a bias added after the skip), so node
by node an ulp or two moves in half the values, and a DynamicQuantizeLinear downstream turns a few into whole steps.

Which groups: those ORT 1.32's SkipLayerNormFusion (skip_layer_norm_fusion.cc, a level-2 optimisation: on at ORT's
default level) makes for the CPU EP. A LayerNormalization (ONNX domain, version 1 or 17, float16 / float32 inputs)
whose input 0 is made by an Add (versions 7, 13, 14) whose inputs are both 3-D of the same declared dims (dim 0 may
be one symbolic name), whose value goes to that input alone and is no graph output (format 3: input, skip). Where
that Add's input 0 (format 1) or else its input 1 (format 2) is made by a second Add of a 3-D value and a constant
1-D bias as long as the last dim, itself read once and no graph output, the bias joins: the fused node adds
(input + skip) + bias. The LayerNormalization's epsilon carries over (without one: SkipLayerNormalization's default
1e-12, not LayerNormalization's 1e-5). vkep adds its own conditions: every node claimed, the norm over the last axis
with a 1-D scale and bias (SkipLayerNormalization's; ORT fuses other axes too, and its kernel then refuses the
scale), one output read. docs/design.md, "Add -> LayerNormalization as the CPU EP's SkipLayerNormalization".
"""

from __future__ import annotations

from vkep.ort import api, declared, qdq
from vkep.ort.ep import Ep

MS = "com.microsoft"
ADD_VERSIONS = (7, 13, 14)
NORM_VERSIONS = (1, 17)
# ORT's fusion takes float16 and bfloat16 too, but the CPU EP has no float16 Add: a float16 model's Adds run in
# float32 between Casts there, and the Casts part them from the norm before the fusion looks
FLOATS = ("float32",)
DEFAULT_EPSILON = 1e-12  # contrib_defs.h kDefaultSkipLayerNormEpsilon


def add_groups(ep: Ep, support_info, claimed: list) -> set[int]:
    """Hand ORT each Add (-> Add) -> LayerNormalization group of claimed nodes to fuse; returns the addresses of
    the nodes they hold."""
    mine = {api.address(n) for n in claimed}
    held: set[int] = set()
    for node in claimed:
        group = find(node, ep, mine)
        if group is not None and not any(api.address(m) in held for m in group.members):
            held |= qdq.hand_over(ep, support_info, group)
    if held:
        ep.log.info(f"fuses {len(held)} nodes into SkipLayerNormalization groups, as the CPU EP fuses them")
    return held


def find(norm, ep: Ep, mine: set[int]) -> qdq.Group | None:
    """The group whose LayerNormalization is `norm`, where ORT would fuse it for the CPU EP and vkep can run it."""
    if not _is(norm, "LayerNormalization", NORM_VERSIONS) or not _floats(norm):
        return None
    first = qdq._producer(declared.value_infos(norm)[0])
    if first is None or not _first_add(first, norm):
        return None
    x, skip = declared.names(first)
    members, bias = [first], ""
    for side in (0, 1):  # (format 1, then format 2)
        second = qdq._producer(declared.value_infos(first)[side])
        if second is not None and _second_add(second, first, side):
            members.append(second)
            value, bias = declared.names(second)
            x, skip = (value, skip) if side == 0 else (x, value)
            break
    members.append(norm)
    if any(api.address(m) not in mine for m in members):
        return None
    scale, beta = (list(declared.names(norm)) + [""])[1:3]
    if not _over_last_axis(norm):
        return None
    specs = [s for s in ep.specs.get((MS, "SkipLayerNormalization"), ()) if any(a <= 1 <= b for a, b in s.version_ranges())]
    if not specs:
        return None
    epsilon = declared.attribute(norm, "epsilon", "float")
    attrs = {"epsilon": DEFAULT_EPSILON if epsilon is None else epsilon}
    return qdq.Group(members, declared.output_names(norm), frozenset(declared.output_names(m) for m in members),
                     False, specs[0], 1, attrs, [x, skip, scale, beta, bias])


def _is(node, op: str, versions: tuple[int, ...]) -> bool:
    return declared.domain(node) in ("", "ai.onnx") and declared.op_type(node) == op and qdq._since(node) in versions


def _floats(node) -> bool:
    """IsSupportedDataType, as it holds on the CPU EP: every input of the node float32."""
    return all(v is not None and v[1] in FLOATS for v in declared.values(node) if v is not None)


def _read_once_by(node, consumer) -> bool:
    """GetOutputEdgesCount() == 1 with that edge to `consumer`, and the value no graph output."""
    consumers = qdq._consumers(node)
    return (len(consumers) == 1 and api.address(consumers[0][0]) == api.address(consumer)
            and not qdq._is_graph_output(node))


def _first_add(add, norm) -> bool:
    """CheckFirstAdd, its value read by the norm's input 0 alone: two 3-D inputs of equal dims (dim 0 may be one
    symbolic name in both)."""
    if not _is(add, "Add", ADD_VERSIONS) or not _floats(add) or not _read_once_by(add, norm):
        return False
    if qdq._consumers(add)[0][1] != 0 or declared.output_names(add)[0] != declared.names(norm)[0]:
        return False
    infos = declared.value_infos(add)
    (a, _), (b, _) = declared.declared(infos[0]), declared.declared(infos[1])
    if a is None or b is None or len(a) != 3 or len(b) != 3:
        return False
    if a[1:] != b[1:] or min(a[1:] + b[1:]) < 0:
        return False
    if a[0] >= 0 and a[0] == b[0]:
        return True
    names_a, names_b = declared.dim_params(infos[0]), declared.dim_params(infos[1])
    return a[0] < 0 and b[0] < 0 and bool(names_a and names_b and names_a[0]) and names_a[0] == names_b[0]


def _second_add(add, first, side: int) -> bool:
    """CheckSecondAdd, its value read by the first Add's input `side` alone: a 3-D value plus a constant 1-D bias
    as long as its last dim."""
    if not _is(add, "Add", ADD_VERSIONS) or not _floats(add) or not _read_once_by(add, first):
        return False
    if qdq._consumers(add)[0][1] != side:
        return False
    infos = declared.value_infos(add)
    if not declared.is_constant(infos[1]):
        return False
    (a, _), (b, _) = declared.declared(infos[0]), declared.declared(infos[1])
    return a is not None and b is not None and len(a) == 3 and len(b) == 1 and a[2] >= 0 and a[2] == b[0]


def _over_last_axis(norm) -> bool:
    """The norm normalises the last axis with a 1-D scale (and bias) as long, and only its output is read."""
    infos = declared.value_infos(norm)
    x = declared.declared(infos[0])[0]
    if x is None or len(x) != 3:
        return False
    axis = declared.attribute(norm, "axis", "int")
    if (-1 if axis is None else axis) not in (-1, 2):
        return False
    params = [declared.declared(i)[0] for i in infos[1:] if i != api.ffi.NULL]
    if any(p is None or len(p) != 1 or p[0] != x[2] for p in params):
        return False
    return all(not name for name in declared.output_names(norm)[1:])
