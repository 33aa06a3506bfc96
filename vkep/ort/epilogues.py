"""Fused epilogues at GetCapability and Compile: a group of elementwise nodes (fusion.py) takes the Conv, MatMul or
Gemm whose output feeds it alone, and its kernel (vkep/kernels/epilogue.py) is that node's kernel with the
group's steps in its last dispatch. docs/design.md, "Fused elementwise groups".

What a group reads from outside besides the producer's output: at most one tensor (the operand: a residual of
the output's shape, one value per channel or row or column, a scalar) and two scalar constants, which the
constants of the pipeline hold. Shapes must be declared in full wherever an operand is read, so the way it is
read (epilogue.operand_mode) is known here; any other group keeps its producer as a node of its own.
"""

from __future__ import annotations

import numpy as np

from vkep.kernels import epilogue, fused, tuning
from vkep.kernels.base import UnsupportedError, implementation
from vkep.kernels.manifest import KernelSpec
from vkep.ort import api, declared
from vkep.ort.ep import Ep, node_attributes, spec_of

# where tuning.json does not say otherwise for the device's class: producers take their groups
DEFAULT = {"use": True}
# the kernel spec of every fused producer: not a manifest entry (no ONNX op)
SPEC = KernelSpec(op="FusedEpilogue", domain="vkep", since=[1], types={}, impl="epilogue.FusedProducer")


def is_producer(node, ep: Ep) -> bool:
    """Whether a claimed node can take an epilogue: a float32 (float16 where the session takes it) Conv, or a
    MatMul or Gemm of 2-D or higher inputs, on a device that keeps NaN under the epilogue's float controls."""
    op = declared.op_type(node)
    if declared.domain(node) not in ("", "ai.onnx") or op not in epilogue.PRODUCERS:
        return False
    if spec_of(node, ep.specs)[0] is None or not ep.info.features.get("signedZeroInfNanPreserveFloat32", False):
        return False
    wanted = ep.settings["epilogues"]  # (auto: what tuning.json measured on the device's class)
    if wanted is False or wanted is None and not tuning.choice(ep.info, "epilogues", DEFAULT)["use"]:
        return False
    wanted = {"float32", "float16"} if ep.fp16 else {"float32"}
    inputs, outputs = declared.values(node), declared.values(node, outputs=True)
    dtypes = {v[1] for v in inputs + outputs if v is not None}
    if len(outputs) != 1 or len(dtypes) != 1 or not dtypes <= wanted:
        return False
    return op != "MatMul" or all(v is not None and v[0] is not None and len(v[0]) >= 2 for v in inputs[:2])


def take_producer(members: list, ep: Ep, producers: dict, absorbed: set, known: dict, only_feeds, producers_of):
    """The producer of a member that joins this group as its first step's source, or None."""
    if len(members) > epilogue.MAX_STEPS:
        return None
    for member in members:
        for node in producers_of(member):
            key = api.address(node)
            if key in producers and key not in absorbed and only_feeds(node, member):
                try:
                    plan(members + [node], node, ep, known)
                except (UnsupportedError, api.OrtError):
                    continue
                return node
    return None


def plan(nodes: list, producer, ep: Ep, known: dict | None = None) -> tuple[epilogue.Epilogue, str | None]:
    """(the group's epilogue, the name of the value it reads as its operand or None)."""
    from vkep.ort.fusion import read_from_outside, step  # (fusion imports this module)

    members = [n for n in nodes if n is not producer]
    made = declared.output_names(producer)[0]
    out_shape = declared.values(producer, outputs=True)[0][0]
    value = {made: epilogue.VALUE}
    constants: list[float] = []
    operand = None
    for name, info in read_from_outside(members).items():
        if name == made:
            continue
        shape = declared.declared(info)[0]
        scalar = _scalar_constant(info)
        if scalar is not None and len(constants) < 2:
            value[name] = epilogue.CONSTANT_0 + len(constants)
            constants.append(scalar)
            continue
        if operand is not None:
            raise UnsupportedError("an epilogue reads one tensor from outside")
        known_shapes = shape is not None and out_shape is not None and min(shape + out_shape + [0]) >= 0
        if not known_shapes:
            raise UnsupportedError("an epilogue operand needs shapes declared in full")
        mode = epilogue.operand_mode(out_shape, shape, declared.op_type(producer))
        if mode is None:
            raise UnsupportedError(f"an epilogue operand {shape} for an output {out_shape}")
        value[name], operand = epilogue.OPERAND, (name, mode)
    steps = []
    pending = list(members)
    while pending:  # producers before consumers (the group's root, which every other member feeds, comes last)
        ready = [n for n in pending if all(not name or name in value for name in declared.names(n))]
        if not ready:
            raise UnsupportedError("an epilogue reads a value it neither makes nor takes")
        for node in ready:
            s = known[api.address(node)] if known else step(node, ep)
            if s is None:
                raise UnsupportedError(f"{declared.op_type(node)} cannot be an epilogue step")
            operands = tuple(value[n] if n else None for n in declared.names(node))
            steps.append(fused.Step(s.kind, s.op, operands, s.alpha, s.beta))
            value[declared.output_names(node)[0]] = epilogue.INPUTS + len(steps) - 1
            pending.remove(node)
    mode = operand[1] if operand else epilogue.MODE_NONE
    padded = (constants + [0.0, 0.0])[:2]
    return epilogue.Epilogue(steps, mode, (padded[0], padded[1])), operand[0] if operand else None


def _scalar_constant(info) -> float | None:
    """The value of a one-element float constant initializer, else None."""
    shape, dtype = declared.declared(info)
    if shape is None or any(d != 1 for d in shape) or dtype not in ("float32", "float16"):
        return None
    data = declared.constant_bytes(info)
    return None if data is None else float(np.frombuffer(data, np.dtype(dtype))[0])


def kernel(graph_nodes: list, fused_node, ep: Ep, initializer) -> tuple[epilogue.FusedProducer, list]:
    """(the fused node's kernel, the constants it uploads as (array, tag)) from the graph ORT compiles."""
    producer = next(n for n in graph_nodes if is_producer(n, ep))
    input_names = list(declared.names(fused_node))
    ep_plan, operand_name = plan(graph_nodes, producer, ep)
    spec, version = spec_of(producer, ep.specs)
    inputs = declared.values(producer)
    impl = implementation(spec)(spec, node_attributes(producer, spec), version, [v[1] if v else "" for v in inputs])
    impl.output_count, impl.device_info = 1, ep.info
    impl.declared_inputs = [(tuple(v[0]), v[1]) if v and v[0] is not None and min(v[0] + [0]) >= 0 else (None, "")
                            for v in inputs]
    uploads: list = []  # (array, tag, index in `sources` or "operand")
    sources: list = []
    for index, name in enumerate(declared.names(producer)):
        if not name:
            sources.append(None)
        elif name in input_names:
            sources.append(input_names.index(name))
        else:  # a constant ORT dropped from the fused node: packed as PrePackWeight would, then uploaded
            array = initializer(declared.value_infos(producer)[index])
            packed, tag = impl.pack(index, array) if index in spec.prepack else (array, "as-is")
            sources.append(None)  # (its tensor: place_constants)
            uploads.append((np.require(packed, requirements="C"), tag, index))
    operand = None
    if operand_name is not None and operand_name in input_names:
        operand = input_names.index(operand_name)
    elif operand_name is not None:
        info = next(i for n in graph_nodes for name, i in zip(declared.names(n), declared.value_infos(n), strict=True)
                    if name == operand_name)
        uploads.append((np.require(initializer(info), requirements="C"), "as-is", "operand"))
    dtype = declared.values(producer, outputs=True)[0][1]
    fused_kernel = epilogue.FusedProducer(SPEC, impl, sources, ep_plan, operand, dtype)
    return fused_kernel, uploads


def place_constants(fused_kernel: epilogue.FusedProducer, uploads: list, kernel_instance) -> None:
    """Upload the group's constants once into vkep's content-keyed weight cache (as PrePackWeight does) and put
    them where the kernel reads them."""
    tensors = [kernel_instance.hold_constant(k, array, tag) for k, (array, tag, _) in enumerate(uploads)]
    for k, (_, _, where) in enumerate(uploads):
        if where == "operand":
            fused_kernel.operand = tensors[k]
        else:
            fused_kernel.sources[where] = tensors[k]
