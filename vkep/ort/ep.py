"""OrtEp: claims the nodes vkep has kernels for; serves the kernel registry generated from kernels.yaml."""

from __future__ import annotations

import itertools
import logging

from vkep.kernels import manifest
from vkep.kernels.base import Kernel, device_supports, implementation
from vkep.ort import api
from vkep.ort.api import status_callback
from vkep.ort.memory import ALLOCATORS

EPS: dict[int, Ep] = {}
EP_VERSION_WITH_DEFAULT_MEMORY_DEVICE = 27
# kernel-create state → (device, spec): what py_kernel_create needs to build a node's kernel
KERNEL_STATES: dict[int, tuple] = {}
_state_ids = itertools.count(1)
_registries: dict[int, tuple] = {}  # device index → (OrtKernelRegistry*, specs)
log = logging.getLogger(__name__)


def registry_for(device):
    """The OrtKernelRegistry of one device: every manifest entry × opset range, built once."""
    found = _registries.get(device.info.index)
    if found is None:
        found = _registries[device.info.index] = _build_registry(device)
    return found[0]


def _build_registry(device):
    lib, ffi = api.lib, api.ffi
    specs = manifest.load()
    out = ffi.new("OrtKernelRegistry**")
    api.check(lib.ep_CreateKernelRegistry(out))
    registry = out[0]
    features = device.info.features
    for spec in specs:
        # a type needing storage the device lacks is left out (views move bytes without a shader)
        types = {name: [t for t in allowed if not spec.shader or device_supports(features, t)]
                 for name, allowed in spec.types.items()}
        if not all(types.values()):
            continue
        state = next(_state_ids)
        KERNEL_STATES[state] = (device, spec)
        for start, end in spec.version_ranges():
            _add_kernel_def(registry, spec, types, start, end, state, _host_placed_inputs(spec, device))
    return registry, specs


def _host_placed_inputs(spec, device) -> list[int]:
    """The inputs ORT is told to keep in host memory (CPU_INPUT): the values a kernel reads on the host
    (`cpu_inputs`), and the inputs whose constants vkep packs on the host (docs/design.md, "Weights at
    session creation") so that ORT never copies a weight into vkep memory first. On a unified device
    every input of a vkep kernel is one: host and vkep memory are one kind to ORT there (no copy for a
    value that is not constant), and each constant input goes into vkep's shared weight cache as it is."""
    if implementation(spec).__name__ in ("If", "Loop", "Scan", "Memcpy"):  # ORT's kernels, or pure copies
        return list(spec.cpu_inputs)
    if device.shares_host_memory:
        return list(range(MAX_PACKED_INPUTS))
    return sorted(set(spec.cpu_inputs) | set(spec.prepack))


MAX_PACKED_INPUTS = 16  # the trampoline's VKEP_MAX_IO


def _add_kernel_def(registry, spec, types, start: int, end: int, state: int, host_inputs: list[int]) -> None:
    lib, ffi = api.lib, api.ffi
    out = ffi.new("OrtKernelDefBuilder**")
    api.check(lib.ep_CreateKernelDefBuilder(out))
    builder = out[0]
    try:
        api.check(lib.ep_KernelDefBuilder_SetOperatorType(builder, spec.op.encode()))
        api.check(lib.ep_KernelDefBuilder_SetDomain(builder, spec.domain.encode()))
        api.check(lib.ep_KernelDefBuilder_SetSinceVersion(builder, start, end))
        api.check(lib.ep_KernelDefBuilder_SetExecutionProvider(builder, api.EP_NAME.encode()))
        for index in host_inputs:
            api.check(lib.ep_KernelDefBuilder_SetInputMemType(builder, index, api.MEMTYPE_CPU_INPUT))
        for index in spec.cpu_outputs:
            api.check(lib.ep_KernelDefBuilder_SetOutputMemType(builder, index, api.MEMTYPE_CPU_OUTPUT))
        for name, allowed in types.items():
            codes = ffi.new("int[]", [api.ELEMENT_CODES[t] for t in allowed])
            api.check(lib.ep_KernelDefBuilder_AddTypeConstraint_types(builder, name.encode(), codes, len(allowed)))
        if spec.aliases:
            ins = ffi.new("int[]", [a for a, _ in spec.aliases])
            outs = ffi.new("int[]", [b for _, b in spec.aliases])
            api.check(lib.ep_KernelDefBuilder_AddInputOutputAliases(builder, ins, outs, len(spec.aliases)))
        kdef = ffi.new("OrtKernelDef**")
        api.check(lib.ep_KernelDefBuilder_Build(builder, kdef))
        try:
            api.check(lib.ep_KernelRegistry_AddKernel_py(registry, kdef[0], ffi.cast("void*", state)))
        finally:
            lib.ep_ReleaseKernelDef(kdef[0])
    finally:
        lib.ep_ReleaseKernelDefBuilder(builder)


class Ep:
    def __init__(self, factory, device, session_options):
        lib, ffi = api.lib, api.ffi
        self.factory = factory
        self.device = device
        self.name = api.cstring(api.EP_NAME)
        self.wrapper = api.new_struct("vkep_ep")
        self.wrapper.name = self.name
        self.struct = s = ffi.cast("OrtEp*", self.wrapper)
        s.ort_version_supported = lib.vkep_api_version()
        s.GetName = ffi.cast("const char*(*)(const OrtEp*)", lib.vkep_ep_name_fn)
        s.GetCapability = lib.py_ep_get_capability
        s.GetKernelRegistry = lib.py_ep_get_kernel_registry
        s.IsConcurrentRunSupported = lib.py_ep_is_concurrent_run_supported
        # members up to GetDefaultMemoryDevice (ORT 1.27); the ones between stay NULL (optional)
        s.ort_version_supported = EP_VERSION_WITH_DEFAULT_MEMORY_DEVICE
        s.GetDefaultMemoryDevice = lib.py_ep_get_default_memory_device
        self.registry = registry_for(device)
        self.specs: dict[tuple[str, str], list] = {}
        for spec in _registries[device.info.index][1]:
            self.specs.setdefault((spec.domain, spec.op), []).append(spec)
        self.gpu = device.gpu  # open the logical device now, not inside the first run
        self.prepack_cache = session_option(session_options, "prepack_cache") or "vkep"
        if self.prepack_cache not in ("vkep", "ort"):
            raise api.OrtError(f"vkep: prepack_cache must be 'vkep' or 'ort', not {self.prepack_cache!r}",
                               api.ORT_INVALID_ARGUMENT)
        limit = session_option(session_options, "wait_limit_s")
        try:
            self.wait_limit = float(limit) if limit else None
        except ValueError:
            self.wait_limit = -1.0
        if self.wait_limit is not None and not self.wait_limit > 0:
            raise api.OrtError(f"vkep: wait_limit_s must be a number of seconds above 0, not {limit!r}",
                               api.ORT_INVALID_ARGUMENT)
        # names of values the host reads in place (see _note_host_readers)
        self.host_read_values: set[str] = set()
        # (node name, op type) → why GetCapability left the node to another EP (`vkep run` prints it)
        self.declined: dict[tuple[str, str], str] = {}
        EPS[api.address(s)] = self

    def release(self) -> None:
        EPS.pop(api.address(self.struct), None)
        self.device.gpu.pipelines.save()
        api.free_struct(self.struct)
        if not any(ep.device is self.device for ep in list(EPS.values())):
            # ORT keeps its allocators for the environment's life: with no session left on this device,
            # the chunks their C fronts keep for reuse go back to the pools
            for allocator in list(ALLOCATORS.values()):
                if allocator.device is self.device:
                    allocator.drain()


def session_option(session_options, name: str) -> str | None:
    """An EP option (`add_provider_for_devices(devices, {name: value})`), which ORT keeps in the session
    config as `ep.<ep name, lower case>.<name>`."""
    lib, ffi = api.lib, api.ffi
    if session_options == ffi.NULL:
        return None
    key = f"ep.{api.EP_NAME.lower()}.{name}".encode()
    has = ffi.new("int*")
    api.check(lib.ort_HasSessionConfigEntry(session_options, key, has))
    if not has[0]:
        return None
    size = ffi.new("size_t*", 0)
    status = lib.ort_GetSessionConfigEntry(session_options, key, ffi.NULL, size)  # asks for the size
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
    buf = ffi.new("char[]", max(size[0], 1))
    api.check(lib.ort_GetSessionConfigEntry(session_options, key, buf, size))
    return ffi.string(buf).decode()


def ep_of(ptr) -> Ep:
    return EPS[api.address(ptr)]


@status_callback("py_ep_get_capability")
def _get_capability(this, graph, support_info):
    lib, ffi = api.lib, api.ffi
    count = ffi.new("size_t*")
    api.check(lib.ort_Graph_GetNumNodes(graph, count))
    if count[0] == 0:
        return
    nodes = ffi.new("const OrtNode*[]", count[0])
    api.check(lib.ort_Graph_GetNodes(graph, nodes, count[0]))
    kdef = ffi.new("const OrtKernelDef**")
    ep = ep_of(this)
    claimed = []
    for i in range(count[0]):
        kdef[0] = ffi.NULL
        api.check(lib.ep_EpGraphSupportInfo_LookUpKernel(support_info, nodes[i], kdef))
        reason = _declined(nodes[i], ep.specs) if kdef[0] != ffi.NULL else _no_kernel(nodes[i], ep)
        if reason is None:
            api.check(lib.ep_EpGraphSupportInfo_AddSingleNode(support_info, nodes[i]))
            claimed.append(nodes[i])
        else:
            _note_declined(ep, nodes[i], reason)
    if ep.device.shares_host_memory:
        _note_host_readers(ep, claimed)


def _note_host_readers(ep: Ep, claimed: list) -> None:
    """Which values of claimed nodes the host reads in place (vkep memory is host memory to ORT here):
    graph outputs (read after the run, or by a control-flow kernel) and the values that a consumer reads
    with the CPU (_read_on_host). ORT gives such an EP no stream, so no run-end hook: the producer of each
    one waits for its GPU work before its Compute returns (docs/design.md, "Host access and reused memory")."""
    lib, ffi = api.lib, api.ffi
    mine = {api.address(n) for n in claimed}
    count, name, is_output = ffi.new("size_t*"), ffi.new("const char**"), ffi.new("bool*")
    for node in claimed:
        api.check(lib.ort_Node_GetNumOutputs(node, count))
        outputs = ffi.new("const OrtValueInfo*[]", max(count[0], 1))
        api.check(lib.ort_Node_GetOutputs(node, outputs, count[0]))
        for value in outputs[0:count[0]]:
            if value == ffi.NULL:
                continue
            api.check(lib.ort_GetValueInfoName(value, name))
            value_name = ffi.string(name[0]).decode()
            api.check(lib.ort_ValueInfo_IsGraphOutput(value, is_output))
            if is_output[0]:
                ep.host_read_values.add(value_name)
                continue
            api.check(lib.ort_ValueInfo_GetValueNumConsumers(value, count))
            n = count[0]
            consumers, indices = ffi.new("const OrtNode*[]", max(n, 1)), ffi.new("int64_t[]", max(n, 1))
            api.check(lib.ort_ValueInfo_GetValueConsumers(value, consumers, indices, n))
            if any(_read_on_host(consumers[k], indices[k], mine, ep.specs) for k in range(n)):
                ep.host_read_values.add(value_name)


def _read_on_host(consumer, index: int, mine: set[int], specs) -> bool:
    """Whether `consumer` reads its input `index` with the CPU: another EP's node; a subgraph's implicit
    input (index -1: its nodes may run anywhere); a CPU input of a vkep node, which ORT's own control-flow
    kernels (If's condition, Loop's trip count) read without entering vkep."""
    if api.address(consumer) not in mine or index < 0:
        return True
    spec, _ = _spec_of(consumer, specs)
    return spec is None or index in spec.cpu_inputs


_ATTR_TYPES = {"int": (1, "int64_t"), "ints": (2, "int64_t"), "float": (3, "float"), "floats": (4, "float"),
               "string": (5, "char")}


def _node_attribute(node, name: str, kind: str):
    """An attribute of a graph node (None when absent or of a kind not read here)."""
    lib, ffi = api.lib, api.ffi
    attr = ffi.new("const OrtOpAttr**")
    status = lib.ort_Node_GetAttributeByName(node, name.encode(), attr)
    if status != ffi.NULL:  # not set on this node
        lib.ort_ReleaseStatus(status)
        return None
    if attr[0] == ffi.NULL or kind not in _ATTR_TYPES:
        return None
    code, ctype = _ATTR_TYPES[kind]
    size = ffi.new("size_t*")
    status = lib.ort_ReadOpAttr(attr[0], code, ffi.NULL, 0, size)  # asks for the size
    if status != ffi.NULL:
        lib.ort_ReleaseStatus(status)
    n = max(size[0] // ffi.sizeof(ctype), 1)
    buf = ffi.new(f"{ctype}[]", n)
    api.check(lib.ort_ReadOpAttr(attr[0], code, buf, n * ffi.sizeof(ctype), size))
    if kind == "string":
        return ffi.string(buf, size[0]).decode()
    return list(buf)[: size[0] // ffi.sizeof(ctype)] if kind in ("ints", "floats") else buf[0]


def _spec_of(node, specs) -> tuple:
    """(the manifest entry that serves this node or None, the node's opset version)."""
    lib, ffi = api.lib, api.ffi
    out, version = ffi.new("const char**"), ffi.new("int*")
    api.check(lib.ort_Node_GetOperatorType(node, out))
    op = ffi.string(out[0]).decode()
    api.check(lib.ort_Node_GetDomain(node, out))
    domain = ffi.string(out[0]).decode()
    api.check(lib.ort_Node_GetSinceVersion(node, version))
    v = version[0]
    return next((s for s in specs.get((domain, op), ()) if any(a <= v <= b for a, b in s.version_ranges())), None), v


def _declined(node, specs) -> str | None:
    """Why the node's kernel cannot run these attributes (it then stays on another EP), or None."""
    spec, version = _spec_of(node, specs)
    if spec is None:
        return None
    cls = implementation(spec)
    if cls.declines.__func__ is Kernel.declines.__func__:
        return None
    attrs = {a.name: a.default for a in spec.attributes}
    for a in spec.attributes:
        value = _node_attribute(node, a.name, a.kind)
        if value is not None:
            attrs[a.name] = value
    return cls.declines(spec, attrs, version, *_inputs(node))


def _no_kernel(node, ep: Ep) -> str:
    """Why ORT's kernel lookup found no vkep kernel for the node: op, opset version or element types."""
    lib, ffi = api.lib, api.ffi
    out = ffi.new("const char**")
    api.check(lib.ort_Node_GetOperatorType(node, out))
    op = ffi.string(out[0]).decode()
    api.check(lib.ort_Node_GetDomain(node, out))
    domain = ffi.string(out[0]).decode()
    qualified = f"{domain}::{op}" if domain not in ("", "ai.onnx") else op
    candidates = ep.specs.get((domain, op), ())
    if not candidates:
        return f"vkep has no {qualified} kernel"
    spec, version = _spec_of(node, ep.specs)
    if spec is None:
        ranges = ", ".join(f"{a}-{b}" if b < manifest.MAX_VERSION else f"{a}+"
                           for s in candidates for a, b in s.version_ranges())
        return f"vkep's {qualified} covers opset versions {ranges}, not {version}"
    ins, outs = ([t or "?" for t in _inputs(node, outputs)[1]] for outputs in (False, True))
    features = ep.device.info.features  # the types this device can run (as in _build_registry)
    allowed = sorted({t for ts in spec.types.values() for t in ts if not spec.shader or device_supports(features, t)})
    return (f"no vkep {qualified} kernel for types ({', '.join(ins)}) -> ({', '.join(outs)}) "
            f"(it takes {', '.join(allowed)})")


def _note_declined(ep: Ep, node, reason: str) -> None:
    lib, ffi = api.lib, api.ffi
    out = ffi.new("const char**")
    api.check(lib.ort_Node_GetName(node, out))
    name = ffi.string(out[0]).decode()
    api.check(lib.ort_Node_GetOperatorType(node, out))
    op = ffi.string(out[0]).decode()
    ep.declined[(name, op)] = reason
    log.info("vkep declines %s node %r: %s", op, name, reason)


def _inputs(node, outputs: bool = False) -> tuple[list[int | None], list[str | None]]:
    """The rank and element type of each input (or output) as the graph knows them: None for an absent
    optional input; rank -1 and type None where unknown."""
    lib, ffi = api.lib, api.ffi
    count = ffi.new("size_t*")
    api.check((lib.ort_Node_GetNumOutputs if outputs else lib.ort_Node_GetNumInputs)(node, count))
    infos = ffi.new("const OrtValueInfo*[]", max(count[0], 1))
    api.check((lib.ort_Node_GetOutputs if outputs else lib.ort_Node_GetInputs)(node, infos, count[0]))
    ranks: list[int | None] = []
    types: list[str | None] = []
    for i in range(count[0]):
        if infos[i] == ffi.NULL:
            ranks.append(None)
            types.append(None)
            continue
        type_info, tensor_info = ffi.new("const OrtTypeInfo**"), ffi.new("const OrtTensorTypeAndShapeInfo**")
        rank, elem = ffi.new("size_t*"), ffi.new("int*")
        status = lib.ort_GetValueInfoTypeInfo(infos[i], type_info)
        if status == ffi.NULL:
            status = lib.ort_CastTypeInfoToTensorInfo(type_info[0], tensor_info)
        if status == ffi.NULL and tensor_info[0] != ffi.NULL:
            status = lib.ort_GetDimensionsCount(tensor_info[0], rank)
            if status == ffi.NULL:
                status = lib.ort_GetTensorElementType(tensor_info[0], elem)
        if status != ffi.NULL or tensor_info[0] == ffi.NULL:
            if status != ffi.NULL:
                lib.ort_ReleaseStatus(status)
            ranks.append(-1)
            types.append(None)
        else:
            ranks.append(rank[0])
            types.append(api.ELEMENT_TYPES.get(elem[0]))
    return ranks, types


@status_callback("py_ep_get_kernel_registry")
def _get_kernel_registry(this, out):
    out[0] = ep_of(this).registry


@status_callback("py_ep_is_concurrent_run_supported")
def _is_concurrent_run_supported(this, out):
    out[0] = True


@status_callback("py_ep_get_default_memory_device")
def _get_default_memory_device(this, out):
    """On unified memory, HOST_ACCESSIBLE memory declared as host memory (factory.memory_device_type): ORT
    then copies nothing between CPU and vkep memory. Elsewhere DEFAULT."""
    device = ep_of(this).device
    out[0] = api.lib.ep_MemoryInfo_GetMemoryDevice(device.memory_infos[device.default_mem_type])
