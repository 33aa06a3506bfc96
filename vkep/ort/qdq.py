"""QDQ groups at GetCapability and Compile: DequantizeLinear nodes -> Conv / MatMul / Gemm / Add / Mul / pools /
Sigmoid / LeakyRelu / Softmax / Concat -> QuantizeLinear, claimed as one fused node (ORT's Compile, as fusion.py's
groups) where ORT's CPU EP would fuse them into a QLinear kernel, and run with vkep's kernel of that QLinear op
(vkep/kernels/qdq.py). The CPU EP computes such a group in integers (QLinearConv: an int32 sum requantized);
the nodes one by one compute in float and single 8-bit values come out one step away.

Which groups: those ORT 1.32's QDQSelectorActionTransformer takes for the CPU EP on x86-64
(qdq_selector_action_transformer.cc, qdq_selectors.cc, node_unit.cc's CanCreateNodeGroup): every present input
of the op made by a DequantizeLinear whose one consumer is the op and which is no graph output; the op's one
consumer a QuantizeLinear (through a Relu or Clip that the Q makes redundant), the op's value no graph output;
8-bit types, the input's equal to the output's, as the selectors see them after QDQS8ToU8Transformer (_cpu_type);
int8 activations then only for the unary, binary, Concat and Gemm forms (QDQIsInt8Allowed is false on x86-64); Conv's and Gemm's bias an int32 DequantizeLinear whose integers are the
QLinear op's bias (Conv's scale x_scale * w_scale within 1% and its zero point 0, Gemm's unread, as ORT 1.32
checks them); Gemm's alpha and beta 1 with a bias, and no Q needed (QGemm then gives float32); a MatMul without
a Q (its value read by anything, a graph output too) becomes MatMulIntegerToFloat. vkep adds its own
conditions: every node claimed, float32 scales, weights per tensor or per output channel along the axis the
QLinear op reads, and the QLinear kernel planning the declared shapes.
Weight-only groups too: a DequantizeLinear of constant 4- or 8-bit weights [K, N] -> MatMul (or a Gemm that is
one), which ORT 1.32's CPU EP turns into MatMulNBits (accuracy_level from the session config `session.qdq_matmulnbits_accuracy_level`, 4 by
default: A quantized to int8 per block) where the weights are quantized per tensor, per column, or in blocks of a
power of two from 16 along K (a per-tensor or per-column scale in blocks of 32). At level 4 vkep runs the group as
its MatMulNBits kernel, with the weights re-laid as MatMulNBits' (kernels/contrib.nbits_from_dequantize).
docs/design.md, "QDQ groups: computed as the CPU EP computes them".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vkep.kernels import qdq
from vkep.kernels.base import implementation
from vkep.kernels.contrib import nbits_from_dequantize
from vkep.kernels.manifest import KernelSpec
from vkep.ort import api, declared
from vkep.ort.ep import MAX_PACKED_INPUTS, Ep, declined_kernel, node_attributes, refused_in_a_dry_run
from vkep.ort.graph_match import constant as _constant
from vkep.ort.graph_match import consumers as _consumers
from vkep.ort.graph_match import infos as _infos
from vkep.ort.graph_match import is_graph_output as _is_graph_output
from vkep.ort.graph_match import producer as _producer
from vkep.ort.graph_match import since as _since

MS = "com.microsoft"
# the op of a group → its QLinear op (domain, op) and the order of the QLinear op's inputs
QLINEAR = {"Conv": ("", "QLinearConv"), "MatMul": ("", "QLinearMatMul"), "Gemm": (MS, "QGemm"),
           "Add": (MS, "QLinearAdd"), "Mul": (MS, "QLinearMul"), "AveragePool": (MS, "QLinearAveragePool"),
           "GlobalAveragePool": (MS, "QLinearGlobalAveragePool"), "LeakyRelu": (MS, "QLinearLeakyRelu"),
           "Sigmoid": (MS, "QLinearSigmoid"), "Softmax": (MS, "QLinearSoftmax"), "Concat": (MS, "QLinearConcat")}
TO_FLOAT = (MS, "MatMulIntegerToFloat")  # a MatMul group's op where no QuantizeLinear follows
UNARY = ("AveragePool", "GlobalAveragePool", "LeakyRelu", "Sigmoid", "Softmax")
INT8_ACTIVATIONS = ("Add", "Mul", "Concat", "Gemm", *UNARY)  # (Conv and MatMul: not on x86-64)
EIGHT_BIT = ("uint8", "int8")
TYPE_RANGE = {"uint8": (0, 255), "int8": (-128, 127)}
# the kernel spec of every fused QDQ group: not a manifest entry (no ONNX op)
SPEC = KernelSpec(op="QdqGroup", domain="vkep", since=[1], types={}, impl="qdq.QdqGroup")


@dataclass
class Group:
    """A group ORT will hand to Compile: its nodes, and the QLinear op that runs it with the names of that op's
    inputs ("" for an absent one)."""

    members: list  # (GetCapability's nodes: not to be read after it)
    key: tuple[str, ...]  # the op's output names (unique in the graph): how Compile finds the plan
    made: frozenset  # the output names of every member (Compile checks that ORT fused just these)
    as_uint8: bool  # int8 activations the CPU EP computes as uint8 (_cpu_type)
    spec: KernelSpec
    version: int
    attrs: dict
    inputs: list[str]
    dequantized: tuple | None = None  # a weight-only group: (w, scale, zero point) names of its DequantizeLinear


def add_groups(ep: Ep, support_info, claimed: list) -> set[int]:
    """Hand ORT each QDQ group of claimed nodes to fuse; returns the addresses of the nodes they hold."""
    mine = {api.address(n) for n in claimed}
    held: set[int] = set()
    for node in claimed:
        group = find(node, ep, mine) or find_weight_only(node, ep, mine)
        if group is not None and not any(api.address(m) in held for m in group.members):
            held |= hand_over(ep, support_info, group)
    if held:
        ep.log.info(f"fuses {len(held)} nodes into QDQ groups, each run by a QLinear kernel")
    return held


def hand_over(ep: Ep, support_info, group: Group) -> set[int]:
    """Hand ORT the group to fuse, keep its plan for Compile (plan_of); returns the addresses of its nodes."""
    options = api.ffi.new("OrtNodeFusionOptions*")
    options.ort_version_supported = api.lib.vkep_api_version()
    options.drop_constant_initializers = True  # (Compile uploads them once: kernel)
    nodes = api.ffi.new("const OrtNode*[]", group.members)
    api.check(api.lib.ep_EpGraphSupportInfo_AddNodesToFuse(support_info, nodes, len(group.members), options))
    ep.qdq_plans[group.key] = group
    return {api.address(m) for m in group.members}


def find(target, ep: Ep, mine: set[int]) -> Group | None:
    """The group whose op is `target`, where the CPU EP's selectors would take it and vkep can run it, else
    None."""
    op = declared.op_type(target)
    if declared.domain(target) not in ("", "ai.onnx") or op not in QLINEAR:
        return None
    names = declared.names(target)
    dqs = []
    for name, info in zip(names, declared.value_infos(target), strict=True):
        if not name:
            continue
        dq = _producer(info)
        if dq is None or not _is_qdq(dq, "DequantizeLinear") or not _feeds_only(dq, target):
            return None  # (every present input from a DQ of its own, as CheckQDQNodes counts them)
        dqs.append(dq)
    if not dqs or len({api.address(d) for d in dqs}) != len(dqs):
        return None
    clip, qs = _clip_and_qs(target)
    if clip is not None and (len(qs) != 1 or not _redundant(clip, qs[0])):
        return None
    if not qs and op not in ("Gemm", "MatMul"):
        return None  # (Gemm without Q: QGemm's float output; MatMul: MatMulIntegerToFloat)
    if qs and (len(qs) != 1 or len(_consumers(target)) != 1 or _is_graph_output(target)):
        return None  # (the op's value goes elsewhere too)
    q = qs[0] if qs else None
    members = [*dqs, target, *([clip] if clip is not None else []), *([q] if q is not None else [])]
    if any(api.address(m) not in mine for m in members):
        return None
    if any(declared.attribute(d, "block_size", "int") for d in dqs):
        return None
    # (the types as the CPU EP's selectors see them, after its QDQS8ToU8Transformer: _cpu_type)
    types = [_cpu_type(declared.values(d)[0][1], d, q_side=False) for d in dqs]
    out_type = _cpu_type(declared.values(q, outputs=True)[0][1], q, q_side=True) if q is not None else None
    if not _types_fit(op, types, out_type):
        return None
    if any(declared.values(d, outputs=True)[0][1] != "float32" for d in dqs):
        return None
    as_uint8 = types[0] == "uint8" and declared.values(dqs[0])[0][1] == "int8"
    return _plan(op, target, dqs, clip, q, ep, as_uint8)



NBITS = {"int4": (4, True), "uint4": (4, False), "int8": (8, True), "uint8": (8, False)}
NBITS_BLOCK = 32  # the block the CPU EP gives a per-tensor or per-column scale


def find_weight_only(target, ep: Ep, mine: set[int]) -> Group | None:
    """DequantizeLinear(constant weights [K, N]) -> MatMul, or -> Gemm (not transposed, alpha 1, a bias [N] with
    beta 1 or none), as the MatMulNBits the CPU EP fuses it into, where the session's accuracy level is 4 (its
    int8 A) and A is float32; else None (the nodes run as they are)."""
    op = declared.op_type(target)
    if op not in ("MatMul", "Gemm") or declared.domain(target) not in ("", "ai.onnx") or ep.nbits_accuracy != 4:
        return None
    names, infos = list(declared.names(target)), list(declared.value_infos(target))
    if len(names) not in ((2,) if op == "MatMul" else (2, 3)) or not names[1]:
        return None
    bias = names[2] if len(names) == 3 else ""
    if op == "Gemm":
        def attr(name: str, default: float) -> float:
            value = declared.attribute(target, name, "float" if name in ("alpha", "beta") else "int")
            return default if value is None else value

        if attr("transA", 0) or attr("transB", 0) or attr("alpha", 1.0) != 1.0 or (bias and attr("beta", 1.0) != 1.0):
            return None
    dq, a_from = _producer(infos[1]), _producer(infos[0])
    if dq is None or not _is_qdq(dq, "DequantizeLinear") or not _feeds_only(dq, target):
        return None
    if a_from is not None and _is_qdq(a_from, "DequantizeLinear") and declared.values(a_from)[0][1] in EIGHT_BIT:
        return None  # (an 8-bit A: a QDQ MatMul, which the CPU EP fuses otherwise, or not at all; 16-bit: this)
    dq_names, dq_infos = list(declared.names(dq)) + ["", ""], list(declared.value_infos(dq)) + [None, None]
    (w_dims, w_type), (a_dims, a_type) = declared.declared(dq_infos[0]), declared.declared(infos[0])
    scale_dims, scale_type = declared.declared(dq_infos[1])
    if (w_type not in NBITS or a_type not in ("float32", "float16") or scale_type != a_type or w_dims is None
            or len(w_dims) != 2
            or scale_dims is None or not all(declared.is_constant(i) for i in dq_infos[:3] if i is not None)):
        return None
    k, n = w_dims
    block = declared.attribute(dq, "block_size", "int") or 0
    axis = declared.attribute(dq, "axis", "int")
    axis = 1 if axis is None else axis % 2
    if block:  # (blocks along K only, of a power of two from 16)
        if axis != 0 or block < 16 or block & (block - 1) or scale_dims != [-(-k // block), n]:
            return None
    elif scale_dims in ([], [1]):
        block = NBITS_BLOCK
    elif axis == 1 and scale_dims == [n]:
        block = NBITS_BLOCK
    else:
        return None
    if dq_names[2] and declared.declared(dq_infos[2]) != (scale_dims, w_type):
        return None
    if any(_readers(i) != 1 for i in dq_infos[:3] if i is not None):
        return None  # (a weight, scale or zero point another node reads too: the CPU EP keeps the nodes)
    if bias and declared.declared(infos[2]) != ([n], "float32"):
        return None
    if op == "Gemm" and (a_dims is None or len(a_dims) != 2 or a_type != "float32"):
        return None
    if api.address(dq) not in mine or api.address(target) not in mine:
        return None
    domain_specs = ep.specs.get((MS, "MatMulNBits"), ())
    if not domain_specs or a_dims is None or not a_dims or a_dims[-1] not in (k, -1):
        return None
    spec = domain_specs[0]
    bits = NBITS[w_type][0]
    attrs = {"K": k, "N": n, "bits": bits, "block_size": block, "accuracy_level": 4, "weight_prepacked": 0}
    why = declined_kernel(spec, spec.version_ranges()[0][0], attrs, [(a_dims, a_type)], max_inputs=6)
    if why:
        ep.log.info(f"leaves the DequantizeLinear -> MatMul node {declared.name(target)!r} as nodes: {why}")
        return None
    members = [dq, target]
    return Group(members, declared.output_names(target), frozenset(declared.output_names(m) for m in members),
                 False, spec, spec.version_ranges()[0][0], attrs, [names[0], "", "", "", "", bias],
                 dequantized=tuple(dq_names[:3]))

def _cpu_type(dtype: str | None, node, q_side: bool) -> str | None:
    """An activation's type as the CPU EP's selectors see it. On x86-64 ORT's QDQS8ToU8Transformer (level 2,
    before them) turns each int8 QuantizeLinear whose one consumer is a DequantizeLinear (its value no graph
    output), both with the same constant one-element int8 zero point, into a uint8 pair (zero point + 128): a
    group then sees uint8 there, and fuses where every value it reads and makes is seen so (the integers and
    their zero points move by 128 alike: a QLinear kernel over the int8 values computes the same). `node` is
    the group's DQ (q_side False: its producer may be that Q) or its Q (True: its consumer may be that DQ)."""
    if dtype != "int8":
        return dtype
    if q_side:
        q, consumers = node, _consumers(node)
        dq = consumers[0][0] if len(consumers) == 1 else None
    else:
        dq, q = node, _producer(declared.value_infos(node)[0])
        consumers = _consumers(q) if q is not None else []
    if (q is None or dq is None or not _is_qdq(q, "QuantizeLinear") or not _is_qdq(dq, "DequantizeLinear")
            or len(consumers) != 1 or _is_graph_output(q)):
        return dtype
    zps = [_constant(declared.value_infos(n)[2]) if len(declared.value_infos(n)) > 2 else None for n in (q, dq)]
    if any(z is None or z.size != 1 or z.dtype != np.int8 for z in zps) or zps[0].reshape(-1)[0] != zps[1].reshape(-1)[0]:
        return dtype
    return "uint8"


def _types_fit(op: str, types: list, out_type: str | None) -> bool:
    """The CPU EP's type conditions (8-bit only: it takes no 16-bit here, and no 4-bit)."""
    x = types[0]
    if any(t not in (*EIGHT_BIT, "int32") for t in types) or out_type not in (*EIGHT_BIT, None):
        return False
    if op in ("Conv", "Gemm") and len(types) == 3 and types[2] != "int32":
        return False
    if "int32" in types[:2] or op not in ("Conv", "Gemm") and "int32" in types:
        return False
    if x == "int8" and op not in INT8_ACTIVATIONS:
        return False
    if op == "Gemm":
        return (x != "int8" or types[1] == "int8") and out_type in (x, None)
    if op == "MatMul" and out_type is None:  # (MatMulIntegerToFloat: any 8-bit B)
        return True
    if op in ("Conv", "MatMul"):
        return out_type == x
    return all(t == x for t in types) and out_type == x


def _plan(op: str, target, dqs: list, clip, q, ep: Ep, as_uint8: bool) -> Group | None:
    """The QLinear op's inputs and attributes, checked by its kernel planning the declared shapes."""
    domain, qop = QLINEAR[op] if op != "MatMul" or q is not None else TO_FLOAT
    specs = ep.specs.get((domain, qop), ())
    if not specs:
        return None
    spec = specs[0]
    version = spec.version_ranges()[0][0]
    attrs = node_attributes(target, spec)

    def triple(node) -> list[str]:
        ins = list(declared.names(node)) + [""] * 3
        return ins[:3]

    y = triple(q)[1:] if q is not None else ["", ""]
    if op == "Conv":
        if len(dqs) == 3 and not _bias_scale_fits(*dqs):
            return None
        bias = [declared.names(dqs[2])[0]] if len(dqs) == 3 else []
        inputs = triple(dqs[0]) + triple(dqs[1]) + y + bias
        if not _per_channel_fits(dqs[1], 0):
            return None
    elif op == "MatMul":
        (a, a_scale, a_zp), (b, b_scale, b_zp) = triple(dqs[0]), triple(dqs[1])
        inputs = [a, a_scale, a_zp, b, b_scale, b_zp, *y] if q is not None else [a, b, a_scale, b_scale, a_zp, b_zp]
        if not _per_channel_fits(dqs[1], -1):
            return None
    elif op == "Gemm":
        bias = declared.names(dqs[2])[0] if len(dqs) == 3 else ""
        beta, alpha = (declared.attribute(target, name, "float") for name in ("beta", "alpha"))
        if bias and (beta not in (None, 1.0) or alpha not in (None, 1.0)):
            return None  # (ORT 1.32 does not fuse alpha != 1 with a bias either: found by trying it)
        inputs = triple(dqs[0]) + triple(dqs[1]) + [bias] + y
        if not _per_channel_fits(dqs[1], 0 if attrs.get("transB") else 1):
            return None
    elif op == "Concat":
        inputs = y + [name for d in dqs for name in triple(d)]
    else:
        inputs = [name for d in dqs for name in triple(d)] + y
    if op == "Softmax":
        attrs["opset"] = _since(target)
    if op == "AveragePool" and any(d != 1 for d in declared.attribute(target, "dilations", "ints") or []):
        return None  # (QLinearAveragePool has no dilations)
    infos = _infos([*dqs, *([q] if q is not None else [])])
    if any(i in spec.constant_inputs and not declared.is_constant(infos[n]) for i, n in enumerate(inputs) if n):
        return None
    # (the fused node takes the values that are no constants: the native trampoline's limit is on those)
    varying = {n for n in inputs if n and not declared.is_constant(infos[n])}
    if len(varying) > MAX_PACKED_INPUTS:
        return None
    why = refused(ep, spec, version, attrs, inputs, infos)
    if why:
        ep.log.info(f"leaves the QDQ group of {op} node {declared.name(target)!r} as nodes: {why}")
        return None
    members = [*dqs, target, *([clip] if clip is not None else []), *([q] if q is not None else [])]
    return Group(members, declared.output_names(target), frozenset(declared.output_names(m) for m in members),
                 as_uint8, spec, version, attrs, inputs)


def refused(ep: Ep, spec: KernelSpec, version: int, attrs: dict, inputs: list[str], infos: dict) -> str | None:
    """Why the kernel that would run a group refuses its inputs (named in `inputs`, "" absent; `infos` their
    value infos) as the graph declares them, planned dry now (declined_kernel, refused_in_a_dry_run), or None."""
    values = [declared.declared(infos[n]) if n else None for n in inputs]
    return declined_kernel(spec, version, attrs, values, max_inputs=len(values)) or refused_in_a_dry_run(
        ep, spec, version, attrs, values, 1, lambda i: declared.constant_bytes(infos[inputs[i]]),
        lambda i: declared.is_constant(infos[inputs[i]]))


def _bias_scale_fits(dq_x, dq_w, dq_bias) -> bool:
    """What the CPU EP (ORT 1.32) asks of a Conv's bias before it fuses: a zero point absent or 0, and a scale
    x_scale * w_scale within 1e-6 + 1e-2 of it (found by trying it: 1.5% off fuses where that product is
    about 2e-4, 2% where it is 1e-4), since QLinearConv reads the bias integers as of that scale."""
    infos = declared.value_infos(dq_bias)
    if len(infos) > 2 and infos[2] != api.ffi.NULL:
        zp = _constant(infos[2])
        if zp is None or np.any(zp != 0):
            return False
    scales = [_constant(declared.value_infos(d)[1]) for d in (dq_x, dq_w, dq_bias)]
    if any(s is None or s.dtype != np.float32 for s in scales):
        return False
    x, w, b = scales
    want = (x.reshape(-1)[0] * w.reshape(-1)).astype(np.float32)
    if b.size not in (1, want.size):
        return False
    return bool(np.all(np.abs(b.reshape(-1).astype(np.float64) - want) <= 1e-6 + 1e-2 * np.abs(want.astype(np.float64))))


def _per_channel_fits(dq, axis: int) -> bool:
    """Whether a weight's DQ is per tensor, or per channel along `axis` of the weight (the one its QLinear op
    reads per channel)."""
    scale = declared.values(dq)[1]
    weight = declared.values(dq)[0]
    if scale is None or scale[0] is None or weight is None or weight[0] is None:
        return False
    if int(np.prod(scale[0])) == 1 and len(scale[0]) <= 1:
        return True
    given = declared.attribute(dq, "axis", "int")
    given = 1 if given is None else given
    rank = len(weight[0])
    return len(scale[0]) == 1 and given % rank == axis % rank


def _clip_and_qs(target) -> tuple:
    """(the Relu or Clip after the op or None, the QuantizeLinear nodes after it, or after the op) as the CPU
    EP's GetQDQSelection finds them: a Relu or Clip that is the op's one consumer, has one consumer and is no
    graph output is taken, and must then be made redundant by the one Q after it."""
    consumers = _consumers(target)
    clip = None
    if len(consumers) == 1 and _is(consumers[0][0], "Relu", "Clip"):
        if len(_consumers(consumers[0][0])) == 1 and not _is_graph_output(consumers[0][0]):
            clip = consumers[0][0]
    holder = clip if clip is not None else target
    return clip, [n for n, _ in _consumers(holder) if _is_qdq(n, "QuantizeLinear")]


def _redundant(clip, q) -> bool:
    """IsClipMadeRedundantByQ: Q's scalar scale and zero point (constants) clamp at least as tightly."""
    infos = declared.value_infos(q)
    scale = _constant(infos[1]) if len(infos) > 1 else None
    if scale is None or scale.ndim != 0 or scale.dtype != np.float32:
        return False
    if len(infos) > 2 and infos[2] != api.ffi.NULL:
        zp = _constant(infos[2])
        if zp is None or zp.ndim != 0 or str(zp.dtype) not in TYPE_RANGE:
            return False
        lo, hi = TYPE_RANGE[str(zp.dtype)]
        zp_value = int(zp)
    else:
        lo, hi = TYPE_RANGE["uint8"]  # (no output_dtype read: vkep's Q takes none without a zero point)
        zp_value = 0
    if declared.op_type(clip) == "Relu":
        return zp_value == lo
    bounds = []
    clip_infos = declared.value_infos(clip)
    for k, default in ((1, -np.inf), (2, np.inf)):
        if len(clip_infos) > k and clip_infos[k] != api.ffi.NULL:
            value = _constant(clip_infos[k])
            if value is None:
                return False
            bounds.append(float(value.reshape(-1)[0]))
        else:
            attr = declared.attribute(clip, "min" if k == 1 else "max", "float")
            bounds.append(default if attr is None else attr)
    with np.errstate(all="ignore"):
        q_lo, q_hi = (np.rint(np.float32(b) / scale) for b in bounds)
    return bool(q_lo + zp_value <= lo and q_hi + zp_value >= hi)


def _is(node, *ops: str) -> bool:
    return declared.domain(node) in ("", "ai.onnx") and declared.op_type(node) in ops


def _is_qdq(node, op: str) -> bool:
    """A QuantizeLinear or DequantizeLinear of ONNX's or com.microsoft's (ORT's quantizer with UseQDQContribOps):
    the CPU EP's selectors take both."""
    return declared.domain(node) in ("", "ai.onnx", MS) and declared.op_type(node) == op


def _readers(info) -> int:
    """How many node inputs read the value."""
    count = api.ffi.new("size_t*")
    api.check(api.lib.ort_ValueInfo_GetValueNumConsumers(info, count))
    return count[0]


def _feeds_only(dq, target) -> bool:
    """Whether the DQ's value goes to `target` alone, once, and is no graph output (CanCreateNodeGroup)."""
    consumers = _consumers(dq)
    return (len(consumers) == 1 and api.address(consumers[0][0]) == api.address(target) and consumers[0][1] >= 0
            and not _is_graph_output(dq))


def plan_of(nodes: list, ep: Ep) -> Group | None:
    """The group GetCapability planned for the nodes ORT compiles, or None (another kind of fused node)."""
    made = {declared.output_names(node) for node in nodes}
    for key in made:
        group = ep.qdq_plans.get(key)
        if group is not None and made == group.made:
            return group
    return None


def kernel(group: Group, nodes: list, fused_node, ep: Ep, initializer) -> tuple[qdq.QdqGroup, list]:
    """(the fused node's kernel, the constants it uploads as (array, index of the QLinear op's input))."""
    types = [_dtype(n, nodes) for n in group.inputs]
    a_type = types[0]
    if group.dequantized is not None:  # (MatMulNBits' own types, A in float32: B and zero points uint8)
        types = ["float32", "uint8", "float32", "uint8", "", types[5]]
    impl = implementation(group.spec)(group.spec, dict(group.attrs), group.version, types)
    impl.output_count, impl.device_info = 1, ep.info
    if group.as_uint8 and hasattr(impl, "as_uint8"):  # (QLinearAdd, QLinearMul, QLinearAveragePool: float steps
        # that see the shift; QLinearConv, QLinearMatMul, QGemm: int16 pair sums that saturate where the CPU EP's do;
        # the others add the zero point after rounding)
        impl.as_uint8 = True
    fused_inputs = list(declared.names(fused_node))
    infos = _infos(nodes)
    sources: list = []
    uploads: list = []
    if group.dequantized is not None:  # (B, scales and zero points made from the DequantizeLinear's constants)
        sources, uploads = _nbits_inputs(group, impl, infos, initializer, fused_inputs)
        if a_type == "float16":  # (computed in float32 between Casts, as the CPU EP's graph does)
            impl = qdq.Float32Product(impl)
    for index, name in enumerate(group.inputs if group.dequantized is None else ()):
        if not name:
            sources.append(None)
        elif name in fused_inputs:
            sources.append(fused_inputs.index(name))
        else:  # a constant ORT dropped from the fused node: packed as PrePackWeight would, then uploaded
            array = initializer(infos[name])
            if index in group.spec.prepack:
                array, _ = impl.pack(index, array)
            sources.append(None)
            uploads.append((np.require(array, requirements="C"), index))
    if group.dequantized is not None:
        shapes = [declared.declared(infos[group.inputs[0]])] + [(None, "")] * 5
    else:
        shapes = [declared.declared(infos[n]) if n else (None, "") for n in group.inputs]
    impl.declared_inputs = [(tuple(d), t) if d is not None and min(d + [0]) >= 0 else (None, "") for d, t in shapes]
    return qdq.QdqGroup(SPEC, impl, sources), uploads



def _nbits_inputs(group: Group, impl, infos: dict, initializer, fused_inputs: list) -> tuple[list, list]:
    """(sources, uploads) of a weight-only group's MatMulNBits: A the fused node's input, then B, scales and zero
    points re-laid from the DequantizeLinear's weights, scale and zero point (broadcast to blocks of rows)."""
    w_name, s_name, z_name = group.dequantized
    k, n, bits, block = (int(group.attrs[key]) for key in ("K", "N", "bits", "block_size"))
    blocks = -(-k // block)
    w = _integers(infos[w_name], initializer)
    signed = NBITS[declared.declared(infos[w_name])[1]][1]

    def per_block(values: np.ndarray) -> np.ndarray:
        return np.broadcast_to(values.reshape(-1, n) if values.size > 1 else values.reshape(1, 1), (blocks, n))

    scale = per_block(initializer(infos[s_name]).astype(np.float32))
    zp = per_block(_integers(infos[z_name], initializer)) if z_name else None
    b, scales, zps = nbits_from_dequantize(w.reshape(k, n), scale, zp, bits, block, signed)
    sources: list = [fused_inputs.index(group.inputs[0]), None, None, None, None, None]
    arrays = [(1, b), (2, scales), (3, zps)]
    bias = group.inputs[5]
    if bias and bias in fused_inputs:
        sources[5] = fused_inputs.index(bias)
    elif bias:  # (a constant ORT dropped from the fused node)
        arrays.append((5, initializer(infos[bias]).astype(np.float32)))
    uploads = []
    for index, array in arrays:
        if index in group.spec.prepack:
            array, _ = impl.pack(index, array)
        uploads.append((np.require(array, requirements="C"), index))
    return sources, uploads


def _integers(info, initializer) -> np.ndarray:
    """A constant integer initializer's values as int64 (4-bit ones unpacked: two a byte, the low nibble first)."""
    dims, dtype = declared.declared(info)
    if dtype not in ("int4", "uint4"):
        return initializer(info).astype(np.int64)
    raw = np.frombuffer(declared.constant_bytes(info, limit=None), np.uint8)
    values = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(-1)[:int(np.prod(dims or [1]))].astype(np.int64)
    return np.where(values > 7, values - 16, values) if dtype == "int4" else values


def _dtype(name: str, nodes: list) -> str:
    if not name:
        return ""
    return declared.declared(_infos(nodes)[name])[1] or ""


def place_constants(impl: qdq.QdqGroup, uploads: list, kernel_instance) -> None:
    """Upload the group's constants once into vkep's content-keyed weight cache (as PrePackWeight does) and put
    them where the QLinear kernel reads them."""
    for k, (array, index) in enumerate(uploads):
        impl.sources[index] = kernel_instance.hold_constant(k, array)

