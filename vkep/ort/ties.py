"""Nodes that must run on the same EP: a control-flow node (If, Loop, Scan) and the nodes that make its
subgraphs' outputs.

On a device that shares the host's memory, vkep's memory is declared to ORT as host memory of its own
(factory.memory_device_type). ORT 1.31 then loses a control-flow output whose shape is known only at run
time when the node and the subgraph node that makes the value run on different EPs (vkep and the CPU EP,
either way round): an If's output keeps whatever its memory held before, and so does the first
iteration's slice of a Scan output (docs/design.md, "Host access and reused memory", rule 5). So on such a
device vkep claims a node only if it would claim every node tied to it, the ties followed through nested
subgraphs both ways.
"""

from __future__ import annotations

from collections.abc import Callable

from vkep.ort import api, declared

CONTROL_FLOW = ("If", "Loop", "Scan")


def is_control_flow(node) -> bool:
    return declared.op_type(node) in CONTROL_FLOW and declared.domain(node) in ("", "ai.onnx")


def _runtime_shaped(info) -> bool:
    """Whether ORT knows a value's shape only at run time (then If allocates its output late: the case
    that loses it)."""
    dims, _ = declared.declared(info)
    return dims is None or any(d < 0 for d in dims)


def _makes_runtime_shaped_graph_output(node) -> bool:
    is_output = api.ffi.new("bool*")
    for value in declared.value_infos(node, outputs=True):
        if value != api.ffi.NULL:
            api.check(api.lib.ort_ValueInfo_IsGraphOutput(value, is_output))
            if is_output[0] and _runtime_shaped(value):
                return True
    return False


def _subgraphs(node) -> list:
    lib, ffi = api.lib, api.ffi
    count = ffi.new("size_t*")
    api.check(lib.ort_Node_GetNumSubgraphs(node, count))
    if count[0] == 0:
        return []
    graphs = ffi.new("const OrtGraph*[]", count[0])
    api.check(lib.ort_Node_GetSubgraphs(node, graphs, count[0], ffi.NULL))
    return [g for g in graphs if g != ffi.NULL]


def _output_makers(graph) -> list:
    """The nodes that make `graph`'s outputs of run-time shape (an output that no node makes, an initializer,
    ties nothing)."""
    lib, ffi = api.lib, api.ffi
    count = ffi.new("size_t*")
    api.check(lib.ort_Graph_GetNumOutputs(graph, count))
    outputs = ffi.new("const OrtValueInfo*[]", max(count[0], 1))
    api.check(lib.ort_Graph_GetOutputs(graph, outputs, count[0]))
    makers = []
    producer = ffi.new("const OrtNode**")
    for value in outputs[0:count[0]]:
        if not _runtime_shaped(value):
            continue
        producer[0] = ffi.NULL
        api.check(lib.ort_ValueInfo_GetValueProducer(value, producer, ffi.NULL))
        if producer[0] != ffi.NULL:
            makers.append(producer[0])
    return makers


def _graph_of(node):
    graph = api.ffi.new("const OrtGraph**")
    api.check(api.lib.ort_Node_GetGraph(node, graph))
    return graph[0] if graph[0] != api.ffi.NULL else None


def tied(node, graph) -> list | None:
    """Every node that must run on the same EP as `node` (of `graph`), `node` included; None when ORT cannot
    say (a parent graph it has not built yet, as while it partitions an inner subgraph)."""
    lib, ffi = api.lib, api.ffi
    found: dict[int, object] = {}
    todo = [(node, graph)]
    parent = ffi.new("const OrtNode**")
    while todo:
        current, where = todo.pop()
        if api.address(current) in found:
            continue
        found[api.address(current)] = current
        if _makes_runtime_shaped_graph_output(current):  # tied to the control-flow node whose subgraph `where` is
            where = where if where is not None else _graph_of(current)
            if where is None:
                return None
            parent[0] = ffi.NULL
            api.check(lib.ort_Graph_GetParentNode(where, parent))
            if parent[0] != ffi.NULL and is_control_flow(parent[0]):
                todo.append((parent[0], None))
        if is_control_flow(current):  # tied to the nodes that make its subgraphs' outputs
            for branch in _subgraphs(current):
                todo.extend((maker, branch) for maker in _output_makers(branch))
    return list(found.values())


def reason_to_decline(node, graph, claimable: Callable[[object], str | None]) -> str | None:
    """Why `node` stays off vkep for a node tied to it (`claimable` says why vkep would not claim a node,
    or None), or None when every tied node is claimable."""
    nodes = tied(node, graph)
    if nodes is None:
        return ("it makes an output of a subgraph whose control-flow node ORT has not shown yet, and vkep "
                "runs such a node only together with its control-flow node")
    for other in nodes:
        if api.address(other) == api.address(node):
            continue
        why = claimable(other)
        if why is not None:
            return (f"it must run on the same EP as {_describe(other)}, which vkep leaves to another EP "
                    f"({why}): ORT loses a control-flow output made on the other side of vkep's host memory")
    return None


def _describe(node) -> str:
    return f"{declared.op_type(node)} node {declared.name(node)!r}"
