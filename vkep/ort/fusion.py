"""Elementwise nodes fused into one node through ORT's Compile (OrtEp::Compile): GetCapability hands ORT each
group with EpGraphSupportInfo_AddNodesToFuse, ORT replaces it with one node and gives it back to Compile, and
its kernel (vkep/kernels/fused.py) runs the group in one dispatch of fused.comp, replayed natively like any
node's (the C trampoline's Compute serves both). docs/design.md, "Fused elementwise groups".

A group is an in-tree: every member but its root has one consumer, a member, and is no graph output, so no
path leaves the group and comes back (ORT requires that) and the group has one output. Its members are float32
(or float16) unary and binary ops of unary.comp and binary.comp that fused.comp knows, of known rank <= 6. A group
may also take the Conv, MatMul or Gemm that feeds it (vkep/ort/epilogues.py): its kernel then runs the members as
that node's epilogue. Compile also builds the fused nodes of QDQ groups (vkep/ort/qdq.py), which GetCapability
hands ORT first.
"""

from __future__ import annotations

import numpy as np

from vkep.kernels import elementwise, fused
from vkep.kernels.base import UnsupportedError, implementation
from vkep.kernels.manifest import KernelSpec
from vkep.ort import abi, api, declared, epilogues, qdq, warmup
from vkep.ort.api import callback, status_callback
from vkep.ort.ep import EPS, Ep, node_attributes, spec_of
from vkep.ort.kernel import KernelInstance, release_kernel

MAX_STEPS = fused.MAX_STEPS  # nodes in one group (a long chain makes several)
_TAKES_TWO = (elementwise.Binary, elementwise.Pow, elementwise.Variadic)
# the kernel spec of every fused node: not a manifest entry (no ONNX op), the shader's name for pipelines
SPEC = KernelSpec(op="FusedElementwise", domain="vkep", since=[1], types={}, impl="fused.FusedElementwise",
                  shader=fused.SHADER)
COMPUTE_INFOS: dict[int, object] = {}  # OrtNodeComputeInfo address → its KernelInstance


def step(node, ep: Ep) -> fused.Step | None:
    """The node as a step of fused.comp (operands left to the caller), or None when it cannot be one."""
    spec, version = spec_of(node, ep.specs)
    if spec is None:
        return None
    cls = implementation(spec)
    # (one element type, known, for every present input and output)
    dtypes = {v[1] for v in declared.values(node) + declared.values(node, outputs=True) if v is not None}
    # fused.comp keeps NaN, infinities and signed zeros where the device promises it (it computes in float32)
    preserves = ep.info.features.get("signedZeroInfNanPreserveFloat32", False)
    wanted = set() if not preserves else {"float32", "float16"} if ep.fp16 else {"float32"}
    if len(dtypes) != 1 or not dtypes <= wanted:
        return None
    inputs = declared.values(node)
    if any(v is not None and (v[0] is None or len(v[0]) > fused.MAX_RANK) for v in inputs):
        return None  # (rank unknown or above the shader's: a broadcast might not fit)
    try:
        kernel = cls(spec, node_attributes(node, spec), version, [v[1] if v else "" for v in inputs])
    except UnsupportedError:
        return None
    code = kernel.constants.get("op")
    if cls in (elementwise.Unary, elementwise.Clip) and code in fused.UNARY:
        alpha, beta = kernel.params
        return fused.Step(fused.KIND_UNARY, code, (), alpha, beta)
    if cls is elementwise.Variadic and (spec.op not in ("Min", "Max", "Sum") or version < cls.BROADCAST_SINCE):
        return None  # (Mean scales its last step; a group would broadcast what those opsets refuse)
    if cls in _TAKES_TWO and code in fused.BINARY and len(inputs) == 2 and None not in inputs:
        return fused.Step(fused.KIND_BINARY, code, ())
    return None


def groups(ep: Ep, claimed: list) -> list[list]:
    """The groups of claimed nodes to fuse (two nodes or more each), each in an order where producers come
    before their consumers."""
    known = {api.address(n): step(n, ep) for n in claimed}  # (each node's step, made once)
    fusable = {key for key, s in known.items() if s is not None}
    producers = {api.address(n) for n in claimed if epilogues.is_producer(n, ep)}
    absorbed: set[int] = set()
    order = {api.address(n): i for i, n in enumerate(claimed)}
    out = []
    for node in reversed(claimed):  # (ORT lists a graph's nodes producers first: roots come first here)
        key = api.address(node)
        if key not in fusable or key in absorbed:
            continue
        members, frontier = [node], [node]
        absorbed.add(key)
        while frontier and len(members) < MAX_STEPS:
            consumer = frontier.pop()
            for producer in _producers(consumer):
                pkey = api.address(producer)
                if (pkey in fusable and pkey not in absorbed and len(members) < MAX_STEPS
                        and _only_feeds(producer, consumer) and _fits(members + [producer], ep, known)):
                    members.append(producer)
                    frontier.append(producer)
                    absorbed.add(pkey)
        producer = epilogues.take_producer(members, ep, producers, absorbed, known, _only_feeds, _producers)
        if producer is not None:  # (its kernel applies the members as its epilogue: epilogues.py)
            members.append(producer)
            absorbed.add(api.address(producer))
        if len(members) > 1:
            out.append(sorted(members, key=lambda n: order[api.address(n)]))
    return out


def _fits(members: list, ep: Ep, known: dict) -> bool:
    """Whether fused.comp takes these nodes as one group (its inputs and registers suffice)."""
    try:
        _steps(members, ep, list(read_from_outside(members)), known=known)
    except (UnsupportedError, api.OrtError):
        return False
    return True


def read_from_outside(nodes: list, given: tuple[str, ...] = ()) -> dict:
    """name → value info of each value the nodes read that none of them makes and that is not in `given`, in
    the order they read them: a group's inputs (or, past the fused node's own inputs, its constants)."""
    made = {n for node in nodes for n in declared.output_names(node)}
    out: dict = {}
    for node in nodes:
        for name, info in zip(declared.names(node), declared.value_infos(node), strict=True):
            if name and name not in made and name not in given:
                out.setdefault(name, info)
    return out


def _producers(node) -> list:
    lib, ffi = api.lib, api.ffi
    out = []
    producer, index = ffi.new("const OrtNode**"), ffi.new("size_t*")
    for info in declared.value_infos(node):
        if info == ffi.NULL:
            continue
        status = lib.ort_ValueInfo_GetValueProducer(info, producer, index)
        if status != ffi.NULL:
            lib.ort_ReleaseStatus(status)
            continue
        if producer[0] != ffi.NULL:
            out.append(producer[0])
    return out


def _only_feeds(producer, consumer) -> bool:
    """Whether the producer's one output goes to `consumer` alone and is no graph output."""
    lib, ffi = api.lib, api.ffi
    outputs = declared.value_infos(producer, outputs=True)
    if len(outputs) != 1 or outputs[0] == ffi.NULL:
        return False
    is_output, count = ffi.new("bool*"), ffi.new("size_t*")
    api.check(lib.ort_ValueInfo_IsGraphOutput(outputs[0], is_output))
    api.check(lib.ort_ValueInfo_GetValueNumConsumers(outputs[0], count))
    if is_output[0] or count[0] == 0:
        return False
    n = count[0]
    consumers, indices = ffi.new("const OrtNode*[]", n), ffi.new("int64_t[]", n)
    api.check(lib.ort_ValueInfo_GetValueConsumers(outputs[0], consumers, indices, n))
    return all(api.address(consumers[k]) == api.address(consumer) and indices[k] >= 0 for k in range(n))


def add_groups(ep: Ep, support_info, claimed: list) -> set[int]:
    """Hand ORT the groups to fuse; returns the addresses of the nodes they hold."""
    options = api.ffi.new("OrtNodeFusionOptions*")
    options.ort_version_supported = api.lib.vkep_api_version()
    options.drop_constant_initializers = True  # (Compile uploads them once: see program)
    held: set[int] = set()
    for members in groups(ep, claimed):
        nodes = api.ffi.new("const OrtNode*[]", members)
        api.check(api.lib.ep_EpGraphSupportInfo_AddNodesToFuse(support_info, nodes, len(members), options))
        held |= {api.address(n) for n in members}
    if held:
        ep.log.info(f"fuses {len(held)} elementwise nodes into groups of one dispatch each")
    return held


def program(graph, fused_node, ep: Ep) -> tuple[fused.Program, str, list[str], list[np.ndarray]]:
    """(the group's program, its element type, the fused node's output names, the constants it reads) from the
    graph ORT compiles. Its inputs are the fused node's, then the constants: ORT passes none of them
    (drop_constant_initializers), so they are uploaded once into vkep's weight cache, which every session
    shares, as a node's prepacked constants are."""
    nodes = _nodes(graph)
    input_names, output_names = list(declared.names(fused_node)), list(declared.output_names(fused_node))
    constants = {name: _initializer(info) for name, info in read_from_outside(nodes, tuple(input_names)).items()}
    prog, _ = _steps(nodes, ep, input_names + list(constants), output_names)
    dtype = declared.values(nodes[0], outputs=True)[0][1]  # (a group whose value no one reads has no output)
    return prog, dtype, output_names, list(constants.values())


def _nodes(graph) -> list:
    """The nodes of a graph ORT compiles."""
    lib, ffi = api.lib, api.ffi
    count = ffi.new("size_t*")
    api.check(lib.ort_Graph_GetNumNodes(graph, count))
    buf = ffi.new("const OrtNode*[]", max(count[0], 1))
    api.check(lib.ort_Graph_GetNodes(graph, buf, count[0]))
    return list(buf[0:count[0]])


def _initializer(info) -> np.ndarray:
    """The values of a constant initializer the graph holds (host memory at Compile)."""
    lib, ffi = api.lib, api.ffi
    value = ffi.new("const OrtValue**")
    api.check(lib.ort_ValueInfo_GetInitializerValue(info, value))
    if value[0] == ffi.NULL:
        raise api.OrtError("vkep: a fused group reads a value that is neither an input nor a constant",
                           api.ORT_FAIL)
    type_, rank, ptr, dims = ffi.new("int*"), ffi.new("int*"), ffi.new("uint64_t*"), ffi.new("int64_t[8]")
    api.check(lib.vkep_tensor_info(value[0], type_, dims, rank, ptr))
    array = np.empty(tuple(dims[0:rank[0]]), np.dtype(abi.ELEMENT_TYPES[type_[0]]))
    if array.nbytes:
        ffi.memmove(ffi.cast("void*", array.ctypes.data), ffi.cast("void*", ptr[0]), array.nbytes)
    return array


def _steps(nodes: list, ep: Ep, input_names: list[str], output_names: list[str] | None = None,
           known: dict | None = None) -> tuple[fused.Program, dict[str, int]]:
    """The program of a group whose inputs are `input_names` (outputs: `output_names`, default its one value
    no member reads), and the value number of each name."""
    value = {name: k for k, name in enumerate(input_names)}
    steps, read = [], set()
    reads = {api.address(n): declared.names(n) for n in nodes}
    pending = list(nodes)
    while pending:  # producers before consumers, whatever order the nodes come in
        ready = [n for n in pending if all(name in value or not name for name in reads[api.address(n)])]
        if not ready:
            raise api.OrtError("vkep: a fused group reads a value it neither makes nor takes", api.ORT_FAIL)
        for node in ready:
            s = known[api.address(node)] if known else step(node, ep)
            if s is None:
                raise api.OrtError(f"vkep: {declared.op_type(node)} cannot be fused", api.ORT_FAIL)
            names = reads[api.address(node)]
            read |= set(names)
            steps.append(fused.Step(s.kind, s.op, tuple(value[n] if n else None for n in names), s.alpha, s.beta))
            value[declared.output_names(node)[0]] = len(input_names) + len(steps) - 1
            pending.remove(node)
    if output_names is None:
        output_names = [n for n, v in value.items() if v >= len(input_names) and n not in read]
    return fused.Program(len(input_names), steps, [value[n] for n in output_names]), value


@status_callback("py_ep_compile")
def _compile(this, graphs, fused_nodes, count, node_compute_infos, ep_context_nodes):
    lib, ffi = api.lib, api.ffi
    ep = EPS[api.address(this)]
    for i in range(count):
        nodes = _nodes(graphs[i])
        outputs = list(declared.output_names(fused_nodes[i]))
        group = qdq.plan_of(nodes, ep)
        if group is not None:  # DQ -> op -> Q, run by the QLinear op's kernel (qdq.py)
            impl, uploads = qdq.kernel(group, nodes, fused_nodes[i], ep, _initializer)
            kernel = KernelInstance(ep.device, qdq.SPEC, impl, declared.name(fused_nodes[i]))
            qdq.place_constants(impl, uploads, kernel)
        elif any(epilogues.is_producer(n, ep) for n in nodes):  # a Conv, MatMul or Gemm with an epilogue
            impl, uploads = epilogues.kernel(nodes, fused_nodes[i], ep, _initializer)
            kernel = KernelInstance(ep.device, epilogues.SPEC, impl, declared.name(fused_nodes[i]))
            epilogues.place_constants(impl, uploads, kernel)
        else:
            prog, dtype, outputs, constants = program(graphs[i], fused_nodes[i], ep)
            impl = fused.FusedElementwise(SPEC, prog, dtype)
            kernel = KernelInstance(ep.device, SPEC, impl, declared.name(fused_nodes[i]))
            impl.constant_tensors.extend(kernel.hold_constant(k, array, dtype=dtype) for k, array in enumerate(constants))
        impl.output_count, impl.device_info = len(outputs), ep.info
        impl.declared_inputs = _declared(declared.values(fused_nodes[i]))
        def makers(nodes=nodes, outputs=outputs) -> list:  # (the input names of each output's node)
            made_by = {name: declared.names(node) for node in nodes for name in declared.output_names(node)}
            return [made_by.get(name) for name in outputs]
        ep.note_host_reads(kernel, outputs, makers)
        kernel.wait_limit, kernel.ep = ep.wait_limit, ep
        ep.kernels.append(kernel)
        warmup.start_ahead(kernel)
        info = api.new_struct("vkep_compute_info")
        info.base.ort_version_supported = lib.vkep_api_version()
        info.base.CreateState = ffi.cast("OrtStatus*(*)(OrtNodeComputeInfo*, OrtNodeComputeContext*, void**)",
                                         lib.vkep_fused_create_state_fn)
        info.base.Compute = ffi.cast("OrtStatus*(*)(OrtNodeComputeInfo*, void*, OrtKernelContext*)",
                                     lib.vkep_fused_compute_fn)
        info.base.ReleaseState = ffi.cast("void(*)(OrtNodeComputeInfo*, void*)", lib.vkep_fused_release_state_fn)
        info.kernel = ffi.cast("void*", kernel.struct)
        COMPUTE_INFOS[api.address(info)] = kernel
        node_compute_infos[i] = ffi.cast("OrtNodeComputeInfo*", info)


def _declared(values: list) -> list[tuple] | None:
    """(shape, dtype) of each input where the graph declares every one in full, else None (warmup.py)."""
    if any(v is None or v[0] is None or any(d < 0 for d in v[0]) for v in values):
        return None
    return [(tuple(v[0]), v[1]) for v in values]


@callback("py_ep_release_node_compute_infos")
def _release_node_compute_infos(this, infos, count):
    for i in range(count):
        kernel = COMPUTE_INFOS.pop(api.address(infos[i]), None)
        if kernel is not None:
            release_kernel(kernel.struct)
        api.free_struct(infos[i])
