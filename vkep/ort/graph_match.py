"""Walking an OrtGraph as ORT's graph_utils and optimizer_utils walk a Graph: producers and consumers of values,
constants, and the checks ORT's fusions make (single readers, constant scalars, first child or parent of a type).
The QDQ groups (qdq.py) and the CPU EP's fusions (cpu_fusions.py) match node patterns with them."""

from __future__ import annotations

import numpy as np

from vkep.ort import api, declared

FLOATS = ("float32",)


def since(node) -> int:
    version = api.ffi.new("int*")
    api.check(api.lib.ort_Node_GetSinceVersion(node, version))
    return version[0]


def infos(nodes: list) -> dict:
    """name → OrtValueInfo of every input of the nodes."""
    out = {}
    for node in nodes:
        for name, info in zip(declared.names(node), declared.value_infos(node), strict=True):
            if name:
                out[name] = info
    return out


def constant(info) -> np.ndarray | None:
    data = declared.constant_bytes(info)
    shape, dtype = declared.declared(info)
    if data is None or shape is None or dtype is None:
        return None
    return np.frombuffer(data, np.dtype(dtype)).reshape(shape)


def producer(info):
    lib, ffi = api.lib, api.ffi
    if info == ffi.NULL:
        return None
    producer, index = ffi.new("const OrtNode**"), ffi.new("size_t*")
    status = lib.ort_ValueInfo_GetValueProducer(info, producer, index)
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
        return None
    return producer[0] if producer[0] != ffi.NULL else None


def consumers(node) -> list[tuple]:
    """(node, input index) of every consumer of every output of `node` (ORT's output edges; index -1: a
    subgraph's implicit input)."""
    lib, ffi = api.lib, api.ffi
    out = []
    count = ffi.new("size_t*")
    for info in declared.value_infos(node, outputs=True):
        if info == ffi.NULL:
            continue
        api.check(lib.ort_ValueInfo_GetValueNumConsumers(info, count))
        n = count[0]
        nodes, indices = ffi.new("const OrtNode*[]", max(n, 1)), ffi.new("int64_t[]", max(n, 1))
        api.check(lib.ort_ValueInfo_GetValueConsumers(info, nodes, indices, n))
        out += [(nodes[k], indices[k]) for k in range(n)]
    return out


def is_graph_output(node) -> bool:
    flag = api.ffi.new("bool*")
    for info in declared.value_infos(node, outputs=True):
        if info != api.ffi.NULL:
            api.check(api.lib.ort_ValueInfo_IsGraphOutput(info, flag))
            if flag[0]:
                return True
    return False


def is_op(node, op: str, versions: tuple[int, ...]) -> bool:
    return (node is not None and declared.domain(node) in ("", "ai.onnx") and declared.op_type(node) == op
            and since(node) in versions)


def floats(node, first: int | None = None) -> bool:
    """IsSupportedDataType, as it holds on the CPU EP: the node's (first) present inputs float32."""
    values = declared.values(node)[:first]
    return all(v is None or v[1] in FLOATS for v in values) and values[:1] != [None]


def edges(node, count: int) -> bool:
    """CheckOutputEdges: `count` consumer inputs and no graph output."""
    return len(consumers(node)) == count and not is_graph_output(node)


def only_child(node):
    readers = consumers(node)
    return readers[0][0] if readers else None


def first_child(node, op: str):
    """FirstChildByType, where one child has that op (several: None, ORT's pick is its node order)."""
    found = {api.address(n): n for n, _ in consumers(node) if declared.op_type(n) == op}
    return next(iter(found.values())) if len(found) == 1 else None


def first_parent(node, op: str):
    """FirstParentByType, where one parent has that op (as _first_child)."""
    found = {}
    for info in declared.value_infos(node):
        made_by = producer(info)
        if made_by is not None and declared.op_type(made_by) == op:
            found[api.address(made_by)] = made_by
    return next(iter(found.values())) if len(found) == 1 else None


def scalar_close(info, value: float) -> bool:
    """IsInitializerWithExpectedValue: a constant float32 scalar (or [1]) within 1e-8 + 1e-5 |value|."""
    if info == api.ffi.NULL or not declared.is_constant(info):
        return False
    c = constant(info)
    if c is None or c.dtype != np.float32 or c.size != 1 or c.ndim > 1 or not np.isfinite(c).all():
        return False
    return abs(float(c.reshape(-1)[0]) - value) <= 1e-8 + 1e-5 * abs(value)
