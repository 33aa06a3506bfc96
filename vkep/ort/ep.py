"""OrtEp: claims the nodes vkep has kernels for; serves the kernel registry generated from kernels.yaml."""

from __future__ import annotations

import itertools
import math
import re

from vkep import options
from vkep.gpu.device import SWITCHED_FEATURES
from vkep.gpu.stream import IndexOutOfRange, waiting
from vkep.kernels import manifest
from vkep.kernels.base import (
    DTYPE_FEATURES,
    MAX_ELEMENTS,
    Kernel,
    Tensor,
    UnsupportedError,
    device_supports,
    implementation,
)
from vkep.kernels.control_flow import ControlFlow
from vkep.ort import abi, api, capture, declared, ties, warmup
from vkep.ort.api import status_callback
from vkep.ort.log import INFO, VERBOSE, Logger
from vkep.ort.memory import allocators_of
from vkep.ort.subgraph_waits import ParentReads

EPS: dict[int, Ep] = {}
EP_VERSION_WITH_DEFAULT_MEMORY_DEVICE = 27
# kernel-create state → (device, spec): what py_kernel_create needs to build a node's kernel
KERNEL_STATES: dict[int, tuple] = {}
_state_ids = itertools.count(1)
# (device index, feature switches off, forced, fp16_accumulation) → (OrtKernelRegistry*, specs)
_registries: dict[tuple, tuple] = {}
SWITCH_OPTIONS = tuple(SWITCHED_FEATURES)  # the EP options that turn a device feature off (vkep.options)


def registry_for(device, off: frozenset = frozenset(), forced: frozenset = frozenset(),
                 fp16_accumulation: str = "float32") -> tuple:
    """(the OrtKernelRegistry, the manifest entries) of one device with the feature switches in `off` turned
    off (a session's EP options fp16=0, int8=0, subgroups=0), those in `forced` set to 1 and the session's
    fp16_accumulation (its kernels see them all in their device_info): every manifest entry × opset range,
    built once."""
    key = (device.info.index, frozenset(off), frozenset(forced), fp16_accumulation)
    if key not in _registries:
        _registries[key] = _build_registry(device, device.info.restricted(set(off), frozenset(forced),
                                                                          fp16_accumulation))
    return _registries[key]


def kernel_types(spec, info) -> dict[str, list[str]]:
    """A manifest entry's type constraints for a session on a device as `info` describes it (switches
    applied: PhysicalDeviceInfo.restricted). A type needing storage the device lacks is left out of kernels
    with a shader (views move bytes without one); a type a switch turned off is left out of every kernel,
    so with fp16=0 every float16 node stays on another EP."""
    switched_off = {f for switch in info.off for f in SWITCHED_FEATURES[switch]}
    return {name: [t for t in allowed if (not spec.shader or device_supports(info.features, t))
                   and not switched_off.intersection(DTYPE_FEATURES.get(t, ()))]
            for name, allowed in spec.types.items()}


def _build_registry(device, info):
    lib, ffi = api.lib, api.ffi
    specs = manifest.registered()
    out = ffi.new("OrtKernelRegistry**")
    api.check(lib.ep_CreateKernelRegistry(out))
    registry = out[0]
    for spec in specs:
        types = kernel_types(spec, info)
        if not all(types.values()):
            continue
        state = next(_state_ids)
        KERNEL_STATES[state] = (device, spec, info)
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
        return list(range(MAX_PACKED_INPUTS if implementation(spec).variadic else MAX_FIXED_INPUTS))
    return sorted(set(spec.cpu_inputs) | set(spec.prepack))


MAX_PACKED_INPUTS = 256  # the trampoline's VKEP_MAX_IO
# the inputs of an op of fixed inputs, at most (com.microsoft QEmbedLayerNormalization: 18); fewer memory types
# to register for each of the thousands of KernelDefs (64 each added 0.15 s to a process's first session)
MAX_FIXED_INPUTS = 24


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
            codes = ffi.new("int[]", [abi.ELEMENT_CODES[t] for t in allowed])
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
    """One session's EP. `given`: the vkep devices ORT created it for (the OrtEpDevices the application
    passed to add_provider_for_devices, or the one a selection policy chose); it runs on one of them
    (EP option `device`), or on none, claiming no node (choose_device)."""

    def __init__(self, factory, given: list, session_options, logger: Logger):
        lib, ffi = api.lib, api.ffi
        self.factory = factory
        self.log = logger
        self.given = given
        config = session_config(session_options)
        given_options = ep_options_of(config)
        # DequantizeLinear -> MatMul as the CPU EP's MatMulNBits computes it (qdq.find_weight_only)
        self.nbits_accuracy = int(config.get("session.qdq_matmulnbits_accuracy_level", "4") or 4)
        try:  # what can fail comes before the struct ORT will own
            self.settings = options.parse_session(given_options)
            self.device, why = choose_device(given, factory.devices, self.settings)
        except options.OptionError as exc:
            raise api.OrtError(str(exc), api.ORT_INVALID_ARGUMENT) from None
        self.prepack_cache = self.settings["prepack_cache"]
        self.budget = self.settings["memory_budget_mb"]
        self.wait_limit: float | None = self.settings["wait_limit_s"]
        self.fp16 = False  # whether this session's kernels take float16
        self.info = None  # the device as this session's kernels see it (feature switches applied)
        self.registry = ffi.NULL  # a NULL registry: an EP that claims no node
        self.specs: dict[tuple[str, str], list] = {}
        # names of values the host reads in place (see _note_host_readers): during the run, and (the main graph's
        # outputs that nothing else reads on the host) only after it, which OnRunEnd waits for
        self.host_read_values: set[str] = set()
        self.run_end_values: set[str] = set()
        self.parent_reads = ParentReads()  # subgraphs' outputs that their If, Loop or Scan reads
        # a node's output names → its STRINGS attributes, which ORT's kernel info cannot read (see _refused)
        self.node_strings: dict[tuple[str, ...], dict[str, list[str] | None]] = {}
        # (node name, op type) → why GetCapability left the node to another EP (`vkep run` prints it)
        self.declined: dict[tuple[str, str], str] = {}
        self.qdq_plans: dict[tuple[str, ...], object] = {}  # a QDQ group's op output names → qdq.Group (qdq.py)
        self.kernels: list = []  # every kernel of this session (warmed at its initialization's end; a captured
        # graph redirects them)
        self.graphs: dict[int, object] = {}  # graph annotation id → capture.CapturedGraph
        self.runs_before_capture: dict[int, int] = {}
        self.capturing = None  # the CapturedGraph of the run now being captured
        self.states_before_capture: dict[int, bytes] = {}  # Call.state memory (address → bytes) before ORT's warm-ups
        self.profilers: list = []  # ORT's profilers of this session that are profiling now (profiler.py)
        if self.device is not None:
            forced = frozenset(s for s in SWITCH_OPTIONS if self.settings[s] is True)
            self.info = self.device.info.restricted(self._switched_off(self.device.info), forced,
                                                    self.settings["fp16_accumulation"])
            self.fp16 = self.info.has("fp16")
            self.registry, specs = registry_for(self.device, self.info.off, self.info.forced,
                                                self.info.fp16_accumulation)
            for spec in specs:
                self.specs.setdefault((spec.domain, spec.op), []).append(spec)
            self.gpu = self.device.gpu  # open the logical device now, not inside the first run
        self.name = api.cstring(api.EP_NAME)
        self.wrapper = api.new_struct("vkep_ep")
        self.wrapper.name = self.name
        self.struct = s = ffi.cast("OrtEp*", self.wrapper)
        s.ort_version_supported = lib.vkep_api_version()
        s.GetName = ffi.cast("const char*(*)(const OrtEp*)", lib.vkep_ep_name_fn)
        s.GetCapability = lib.py_ep_get_capability
        s.GetKernelRegistry = lib.py_ep_get_kernel_registry
        s.Compile = ffi.cast("void*", lib.py_ep_compile)  # (fused elementwise groups: fusion.py)
        s.ReleaseNodeComputeInfos = ffi.cast("void*", lib.py_ep_release_node_compute_infos)
        s.IsConcurrentRunSupported = lib.py_ep_is_concurrent_run_supported
        # members up to GetDefaultMemoryDevice (ORT 1.27); the ones between stay NULL (optional)
        s.ort_version_supported = EP_VERSION_WITH_DEFAULT_MEMORY_DEVICE
        s.GetDefaultMemoryDevice = lib.py_ep_get_default_memory_device
        s.OnSessionInitializationEnd = lib.py_ep_on_session_initialization_end
        # ORT 1.25+ (ORT 1.24 reads no member past Sync): ORT's profiling records vkep's events too
        s.CreateProfiler = ffi.cast("void*", lib.py_ep_create_profiler)
        EPS[api.address(s)] = self
        if self.device is not None and self.settings["enable_graph_capture"]:
            capture.enable(self)
        if self.device is not None:
            s.OnRunEnd = ffi.cast("void*", lib.py_ep_on_run_end)
        if self.device is None:
            # ORT's selection policies offer vkep a CPU-implemented device, which ORT's CPU EP outruns
            self.log.warning(why)
        else:
            _apply_budget(self.device)
            self.log.info(f"runs on {self.device.describe()} ({why}); options: "
                          + ", ".join(f"{k}={v}" for k, v in sorted(given_options.items())))

    def note_host_reads(self, kernel, names: tuple[str, ...], makers) -> None:
        """Which of a kernel's outputs (by `names`) the host reads during the run (its Compute waits for them) and
        after it (OnRunEnd waits); of the former, those a subgraph's If, Loop or Scan reads, which only their last
        producer waits for once known (subgraph_waits.py; `makers()[j]`: the input names of the node that makes
        output j, asked only where needed). A `cpu_outputs` output is host memory on every device: nothing to wait
        for or to count."""
        cpu_outputs = kernel.cpu_outputs
        during = frozenset(j for j, name in enumerate(names) if name in self.host_read_values) - cpu_outputs
        during |= self.parent_reads.join(kernel, names, makers)
        kernel.host_read_outputs = during
        kernel.run_end_outputs = frozenset(
            j for j, name in enumerate(names) if name in self.run_end_values) - cpu_outputs - during

    def _switched_off(self, info) -> set[str]:
        """The feature switches (EP options fp16, int8, subgroups) this session sets to 0. (At auto, a device
        without the feature already reads as such; set to 1 on such a device, session creation fails.)"""
        off = set()
        for switch in SWITCH_OPTIONS:
            wanted = self.settings[switch]
            if wanted and not info.has(switch):
                needs = ", ".join(f for f in SWITCHED_FEATURES[switch] if not info.features.get(f))
                raise api.OrtError(f"vkep: EP option {switch}=1, but {self.device.describe()} lacks {needs}; use "
                                   f"{switch}=auto or 0", api.ORT_INVALID_ARGUMENT)
            if wanted is False:
                off.add(switch)
        return off

    def release(self) -> None:
        capture.release_all(self)
        EPS.pop(api.address(self.struct), None)
        api.free_struct(self.struct)
        if self.device is None:
            return
        self.device.gpu.pipelines.save()
        _apply_budget(self.device)
        if not any(ep.device is self.device for ep in list(EPS.values())):
            # ORT keeps its allocators for the environment's life: with no session left on this device,
            # the chunks their C fronts keep for reuse go back to the pools, and what the pools then hold
            # unused (a large intermediate's block among it) to the driver, not kept for runs that may
            # never come
            for allocator in allocators_of(self.device):
                allocator.drain()
            gpu = self.device.gpu
            gpu.synchronize()
            for pool in gpu.memory.pools:
                pool.trim()


def _apply_budget(device) -> None:
    """The device's memory cap: the smallest memory_budget_mb of the sessions on it (one device serves them
    all, so each session's cap holds for the device while the session lives)."""
    budgets = [ep.budget for ep in list(EPS.values()) if ep.device is device and ep.budget]
    device.gpu.memory.budget = min(budgets, default=0)


def session_config(session_options) -> dict[str, str]:
    """The session's config entries (its options as key-value pairs)."""
    lib, ffi = api.lib, api.ffi
    if session_options == ffi.NULL:
        return {}
    entries = ffi.new("OrtKeyValuePairs**")
    api.check(lib.ort_GetSessionOptionsConfigEntries(session_options, entries))
    try:
        keys, values, count = ffi.new("const char* const**"), ffi.new("const char* const**"), ffi.new("size_t*")
        lib.ort_GetKeyValuePairs(entries[0], keys, values, count)
        return {ffi.string(keys[0][i]).decode(errors="replace"): ffi.string(values[0][i]).decode(errors="replace")
                for i in range(count[0])}
    finally:
        lib.ort_ReleaseKeyValuePairs(entries[0])


def ep_options_of(config: dict[str, str]) -> dict[str, str]:
    """The EP options of a session, given as `add_provider_for_devices(devices, {name: value})` (or published
    defaults): ORT keeps them in the session config as `ep.<ep name, lower case>.<name>`."""
    prefix = f"ep.{api.EP_NAME.lower()}."
    return {key[len(prefix):]: value for key, value in config.items() if key.startswith(prefix)}


_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")


def choose_device(given: list, every: list, settings: dict) -> tuple[object | None, str]:
    """(the device of `given` the session runs on, or None: no node on vkep; why, for the log).

    `device=auto` takes the first GPU of `given`. A CPU-implemented device (lavapipe, SwiftShader) is taken
    only when the session asks: by naming it in `device`, or with allow_cpu_device=1. ORT's selection
    policies hand vkep such a device whenever one exists (it sorts every non-default CPU-type device
    before ORT's CPU EP), and an EP cannot tell that from add_provider_for_devices: without an ask,
    vkep leaves the nodes to the CPU EP (docs/design.md, "Automatic device selection")."""
    wanted = settings["device"]
    if wanted.lower() == "auto":
        gpus = [d for d in given if not d.info.cpu_implemented]
        if gpus:
            return gpus[0], "device=auto: the first GPU of the session"
        if settings["allow_cpu_device"]:
            return given[0], "device=auto, allow_cpu_device=1"
        names = ", ".join(d.describe() for d in given)
        return None, (f"claims no node: {names} is a CPU-implemented Vulkan device, where ORT's CPU EP is "
                      "faster, and ORT's automatic device selection offers vkep such a device whenever there "
                      "is one. To run on it anyway, give the session the EP option device="
                      f"{given[0].info.index} (its index, name or UUID) or allow_cpu_device=1")
    key = wanted.lower()
    if key.isdigit():
        matches = [d for d in every if d.info.index == int(key)]
    elif _UUID.match(key):
        matches = [d for d in every if d.info.uuid == key.replace("-", "")]
    else:
        matches = [d for d in every if key in d.info.name.lower()]
    listing = "; ".join(f"#{d.info.index} {d.info.name} (UUID {d.info.uuid})" for d in every)
    if not matches:
        raise options.OptionError(f"vkep: EP option device={wanted!r} matches no Vulkan device vkep can use; "
                                  f"they are: {listing}")
    mine = [d for d in matches if d in given]
    if not mine:
        names = "; ".join(d.describe() for d in given)
        raise options.OptionError(f"vkep: EP option device={wanted!r} is {matches[0].describe()}, which is not "
                                  f"among the devices this session was given ({names}): pass its OrtEpDevice to "
                                  "add_provider_for_devices")
    if len(mine) > 1:
        raise options.OptionError(f"vkep: EP option device={wanted!r} matches {len(mine)} devices: "
                                  + "; ".join(d.describe() for d in mine) + ". Name one by index or UUID")
    return mine[0], f"device={wanted}"


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
    ep = ep_of(this)
    if ep.device is None:  # see choose_device (the reason went to the log when the EP was created)
        return
    kdef = ffi.new("const OrtKernelDef**")
    decided: dict[int, tuple[str | None, int]] = {}

    def declined(node) -> tuple[str | None, int]:
        """(why vkep leaves `node` to another EP or None, the log severity of that), each node once."""
        key = api.address(node)
        if key not in decided:
            kdef[0] = ffi.NULL
            api.check(lib.ep_EpGraphSupportInfo_LookUpKernel(support_info, node, kdef))
            decided[key] = (_no_kernel(node, ep), VERBOSE) if kdef[0] == ffi.NULL else (_refused(node, ep), INFO)
        return decided[key]

    claimed = []
    for i in range(count[0]):
        reason, severity = declined(nodes[i])
        if reason is None and ep.device.shares_host_memory:
            reason = ties.reason_to_decline(nodes[i], graph, lambda node: declined(node)[0])
        if reason is None:
            claimed.append(nodes[i])
        else:
            _note_declined(ep, nodes[i], reason, severity)
    fused: set[int] = set()
    if ep.settings["qdq"]:  # (first: the float ops of a QDQ group are no elementwise or epilogue members)
        from vkep.ort import qdq  # (it imports this module)

        fused = qdq.add_groups(ep, support_info, claimed)
    if ep.settings["cpu_fusions"]:  # (before the elementwise groups, which would take their nodes)
        from vkep.ort import cpu_fusions  # (it imports this module)

        fused |= cpu_fusions.add_groups(ep, support_info, [n for n in claimed if api.address(n) not in fused])
    if ep.settings["fuse"]:
        from vkep.ort import fusion  # (it imports this module)

        fused |= fusion.add_groups(ep, support_info, [n for n in claimed if api.address(n) not in fused])
    for node in claimed:
        if api.address(node) not in fused:
            api.check(lib.ep_EpGraphSupportInfo_AddSingleNode(support_info, node))
    ep.log.info(f"claims {len(claimed)} of {count[0]} nodes for {ep.device.info.name}")
    if ep.device.shares_host_memory:
        parent = ffi.new("const OrtNode**")
        api.check(lib.ort_Graph_GetParentNode(graph, parent))
        _note_host_readers(ep, claimed, main_graph=parent[0] == ffi.NULL)


def _note_host_readers(ep: Ep, claimed: list, main_graph: bool) -> None:
    """Which values of claimed nodes the host reads in place (vkep memory is host memory to ORT here):
    graph outputs, and the values that a consumer reads with the CPU (_read_on_host), also through Casts
    (_host_reads). ORT gives such an EP no stream: the producer of each one waits for its GPU work before its
    Compute returns (docs/design.md, "Host access and reused memory"), but for the main graph's outputs that
    nothing else reads on the host: ORT hands those to the application after the run, and OnRunEnd waits once
    for all of them; and a subgraph's outputs, which its If, Loop or Scan reads once the subgraph has run: their
    last producer waits (subgraph_waits.py)."""
    lib, ffi = api.lib, api.ffi
    mine = {api.address(n) for n in claimed}
    name = ffi.new("const char**")
    read_by_parent: set[tuple[str, tuple[str, ...]]] = set()  # (output name, its producer's input names)
    for node in claimed:
        flows = ties.is_control_flow(node)
        for value in declared.value_infos(node, outputs=True):
            if value == ffi.NULL:
                continue
            api.check(lib.ort_GetValueInfoName(value, name))
            if _consumers_read(value, mine, ep.specs):
                ep.host_read_values.add(ffi.string(name[0]).decode())
            elif _is_graph_output(value):
                # (an If, Loop or Scan node's outputs: its own subgraph's producers waited for them)
                if main_graph or flows:
                    (ep.run_end_values if main_graph else ep.host_read_values).add(ffi.string(name[0]).decode())
                else:
                    read_by_parent.add((ffi.string(name[0]).decode(), declared.names(node)))
    ep.parent_reads.add_graph(read_by_parent)


def _is_graph_output(value) -> bool:
    is_output = api.ffi.new("bool*")
    api.check(api.lib.ort_ValueInfo_IsGraphOutput(value, is_output))
    return bool(is_output[0])


def _host_reads(value, mine: set[int], specs, depth: int = 0) -> bool:
    """Whether the host may read `value` in place: it is a graph output, a consumer reads it with the CPU, or
    it feeds a Cast whose result the host may read (_consumers_read)."""
    return _is_graph_output(value) or _consumers_read(value, mine, specs, depth)


def _consumers_read(value, mine: set[int], specs, depth: int = 0) -> bool:
    """Whether a consumer of `value` reads it with the CPU, or it feeds a Cast whose result the host may read.
    ORT partitions first and then removes Cast pairs that undo each other, whatever their EPs
    (RemoveDuplicateCastTransformer, after InsertCastTransformer put float32 Casts around a float16 node no EP
    took): the consumers of the second Cast then read the first one's input, which a vkep node made and no
    longer knows a CPU node reads (tests/test_memory_reuse.py)."""
    lib, ffi = api.lib, api.ffi
    count = ffi.new("size_t*")
    api.check(lib.ort_ValueInfo_GetValueNumConsumers(value, count))
    n = count[0]
    consumers, indices = ffi.new("const OrtNode*[]", max(n, 1)), ffi.new("int64_t[]", max(n, 1))
    api.check(lib.ort_ValueInfo_GetValueConsumers(value, consumers, indices, n))
    for k in range(n):
        if _read_on_host(consumers[k], indices[k], mine, specs):
            return True
        if (depth < 8 and declared.op_type(consumers[k]) == "Cast" and declared.domain(consumers[k]) in ("", "ai.onnx")
                and any(v != ffi.NULL and _host_reads(v, mine, specs, depth + 1)
                        for v in declared.value_infos(consumers[k], outputs=True))):
            return True
    return False


def _read_on_host(consumer, index: int, mine: set[int], specs) -> bool:
    """Whether `consumer` reads its input `index` with the CPU: another EP's node; a subgraph's implicit
    input (index -1: its nodes may run anywhere); a CPU input of a vkep node, which ORT's own control-flow
    kernels (If's condition, Loop's trip count) read without entering vkep."""
    if api.address(consumer) not in mine or index < 0:
        return True
    spec, _ = spec_of(consumer, specs)
    return spec is None or index in spec.cpu_inputs


def spec_of(node, specs) -> tuple:
    """(the manifest entry that serves this node or None, the node's opset version)."""
    version = api.ffi.new("int*")
    api.check(api.lib.ort_Node_GetSinceVersion(node, version))
    v = version[0]
    candidates = specs.get((declared.domain(node), declared.op_type(node)), ())
    return next((s for s in candidates if any(a <= v <= b for a, b in s.version_ranges())), None), v


def node_attributes(node, spec) -> dict:
    """The attributes the manifest entry names, as the graph node sets them (else their defaults)."""
    attrs = {a.name: a.default for a in spec.attributes}
    as_array = implementation(spec).array_attributes
    for a in spec.attributes:
        value = declared.attribute(node, a.name, a.kind, as_array)
        if value is not None:
            attrs[a.name] = value
    return attrs


def _refused(node, ep: Ep) -> str | None:
    """Why vkep leaves a node it has a kernel for to another EP, or None: what the graph declares of its
    tensors, its attributes, or planning it (each read once per node)."""
    inputs, outputs = declared.values(node), declared.values(node, outputs=True)
    too_large = _too_large(inputs + outputs)
    spec, version = spec_of(node, ep.specs)
    if too_large or spec is None:
        return too_large
    attrs = node_attributes(node, spec)
    strings = {a.name: attrs[a.name] for a in spec.attributes if a.kind == "strings"}
    if strings:  # for the kernel's creation: ORT's OrtKernelInfo has no reader of STRINGS attributes
        ep.node_strings[declared.output_names(node)] = strings
    infos = declared.value_infos(node)
    varying = [i for i in spec.constant_inputs if i >= len(infos) or not declared.is_constant(infos[i])]
    if varying:
        return f"{spec.op}: input {varying[0]} is not a constant initializer (the kernel packs it)"
    cls = implementation(spec)
    return declined_kernel(spec, version, attrs, inputs) or cls.declines_on(
        ep.info, attrs, _ranks_and_types(inputs)[1]) or cls.declines_dims(
        attrs, [tuple(v[0]) if v and v[0] is not None else None for v in inputs]) or refused_in_a_dry_run(
        ep, spec, version, attrs, inputs, len(outputs), lambda i: declared.constant_bytes(infos[i]),
        lambda i: declared.is_constant(infos[i]))


def declined_kernel(spec, version: int, attrs: dict, inputs: list, max_inputs: int = 0) -> str | None:
    """Why the node's kernel cannot run these attributes, ranks or types (Kernel.declines), or None.
    `max_inputs`: the inputs ORT passes it at most (default MAX_PACKED_INPUTS; a fused node's kernel passes its
    own)."""
    if len(inputs) > (max_inputs or MAX_PACKED_INPUTS):  # the native trampoline fails such a run
        return f"{spec.op} with {len(inputs)} inputs (at most {MAX_PACKED_INPUTS})"
    for a in spec.attributes:  # shaders take window and layout attributes as 32-bit parameters
        if a.name in GEOMETRY_ATTRIBUTES:
            values = attrs.get(a.name)
            values = values if isinstance(values, list) else [values]
            if any(isinstance(v, int) and not -(2**31) <= v < 2**31 for v in values):
                return f"{spec.op}: attribute {a.name}={attrs[a.name]} is beyond the shaders' 32-bit parameters"
    cls = implementation(spec)
    if cls.declines.__func__ is Kernel.declines.__func__:
        return None
    return cls.declines(spec, attrs, version, *_ranks_and_types(inputs))


def refused_in_a_dry_run(ep: Ep, spec, version: int, attrs: dict, inputs: list, output_count: int,
                          constants, is_constant=lambda i: False) -> str | None:
    """Why the node's kernel would refuse its inputs at run time (a limit of a shader or of the device), found
    by planning it now, where the graph declares every input's shape: the kernel runs dry (warmup.DryCall,
    no memory touched, CPU inputs read where the graph holds them as constants: `constants(i)`), and the node
    stays on another EP instead of failing its run. None when it plans (or needs a value only a run has)."""
    cls = implementation(spec)
    if issubclass(cls, ControlFlow):
        return None
    tensors = []
    for i, value in enumerate(inputs):
        if value is None:
            tensors.append(None)
            continue
        dims, dtype = value
        if dims is None or any(d < 0 for d in dims) or dtype is None:
            return None  # a shape known only at run time: the run decides
        tensors.append(Tensor(0, tuple(dims), dtype, i))
    try:
        kernel = cls(spec, attrs, version, [v[1] or "" if v else "" for v in inputs])
        kernel.output_count, kernel.device_info = output_count, ep.info
        kernel.compute(warmup.DryCall(tensors, constants, is_constant, ep.gpu.memory.largest_block(),
                                      frozenset(spec.cpu_outputs)))
    except UnsupportedError as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 — a value only the run has (warmup.NeedsRunValue), or anything else: the run decides
        return None
    return None


def _too_large(values: list) -> str | None:
    """A tensor whose declared shape has more elements than a shader can index (MAX_ELEMENTS)."""
    for value in values:
        dims = value[0] if value else None
        if dims and math.prod(d for d in dims if d > 0) > MAX_ELEMENTS:
            return f"a tensor of shape {dims} has more elements than vkep's shaders index (32-bit signed indices)"
    return None


def _ranks_and_types(values: list) -> tuple[list[int | None], list[str | None]]:
    """The rank and element type of each value, as Kernel.declines takes them: None for an absent optional
    one; rank -1 where unknown."""
    ranks = [None if v is None else (len(v[0]) if v[0] is not None else -1) for v in values]
    return ranks, [None if v is None else v[1] for v in values]


# window and layout attributes that go to shaders as 32-bit values (sentinel-free: INT64_MAX is never a
# meaningful value of these, unlike Slice's ends)
GEOMETRY_ATTRIBUTES = {"strides", "dilations", "pads", "kernel_shape", "output_padding", "output_shape", "group",
                       "size", "blocksize"}


def _no_kernel(node, ep: Ep) -> str:
    """Why ORT's kernel lookup found no vkep kernel for the node: op, opset version or element types."""
    op, domain = declared.op_type(node), declared.domain(node)
    qualified = f"{domain}::{op}" if domain not in ("", "ai.onnx") else op
    candidates = ep.specs.get((domain, op), ())
    if not candidates:
        return f"vkep has no {qualified} kernel"
    spec, version = spec_of(node, ep.specs)
    if spec is None:
        ranges = ", ".join(f"{a}-{b}" if b < manifest.MAX_VERSION else f"{a}+"
                           for s in candidates for a, b in s.version_ranges())
        return f"vkep's {qualified} covers opset versions {ranges}, not {version}"
    # (a type vkep has no tensors of: string, or not a tensor at all, a sequence or a map)
    ins, outs = ([t or "string or non-tensor" for t in _ranks_and_types(declared.values(node, outputs))[1]]
                 for outputs in (False, True))
    allowed = sorted({t for ts in kernel_types(spec, ep.info).values() for t in ts})  # (as in _build_registry)
    return (f"no vkep {qualified} kernel for types ({', '.join(ins)}) -> ({', '.join(outs)}) "
            f"(it takes {', '.join(allowed)})")


def _note_declined(ep: Ep, node, reason: str, severity: int) -> None:
    """Record why a node stays on another EP (`vkep run` prints it) and say so in the session's log: at
    INFO where a kernel declined it, at VERBOSE where vkep has no kernel for it."""
    name, op = declared.name(node), declared.op_type(node)
    ep.declined[(name, op)] = reason
    ep.log.log(severity, f"declines {op} node {name!r}: {reason}", 2)


@status_callback("py_ep_get_kernel_registry")
def _get_kernel_registry(this, out):
    out[0] = ep_of(this).registry  # NULL for an EP that claims no node (ORT allows it)


@status_callback("py_ep_on_run_end")
def _on_run_end(this, run_options, sync_stream):
    """The end of a run: a graph being captured ends (capture.end_run), and the main graph's outputs that only the
    application reads, which their producers did not wait for, are complete (_note_host_readers). With
    sync_stream false (the run option disable_synchronize_execution_providers) too: ORT hands the application those
    outputs as host memory."""
    ep = ep_of(this)
    capture.end_run(ep, run_options)
    if ep.run_end_values and ep.device is not None:
        waiting.limit, waiting.label = ep.wait_limit, "the run's end"
        try:
            ep.gpu.default_stream().finish()
        except IndexOutOfRange as exc:  # (named here, not on every run: the session's nodes that check indices)
            reporters = [k.label for k in ep.kernels if k.reports_errors]
            if not reporters:
                raise
            more = ", ..." if len(reporters) > 4 else ""
            raise IndexOutOfRange(f"{exc}; nodes that check their indices: {', '.join(reporters[:4])}{more}") from None
        finally:
            waiting.limit = waiting.label = None


@status_callback("py_ep_is_concurrent_run_supported")
def _is_concurrent_run_supported(this, out):
    out[0] = True


@status_callback("py_ep_on_session_initialization_end")
def _on_session_initialization_end(this):
    ep = ep_of(this)
    kernels = ep.kernels
    if ep.device is None:  # (claims no node: no kernel)
        return
    packed = [tensor for kernel in kernels for _, tensor in kernel.packed.values()]
    if packed:  # one line per stage of session creation: the weights, then the pipelines (warmup.py)
        ep.log.info(f"the session's {len(packed)} prepacked weights ({sum(t.nbytes for t in packed) / 2**20:.1f} MB) "
                    "are on the device")
    try:
        warmup.warm(kernels, ep.gpu, ep.log)
    except Exception as exc:  # noqa: BLE001 — compiling ahead is a head start: the first run does it otherwise
        ep.log.warning(f"could not build the session's pipelines before its first run: {exc}")


@status_callback("py_ep_get_default_memory_device")
def _get_default_memory_device(this, out):
    """On unified memory, HOST_ACCESSIBLE memory declared as host memory (factory.memory_device_type): ORT
    then copies nothing between CPU and vkep memory. Elsewhere DEFAULT."""
    ep = ep_of(this)
    device = ep.device or ep.given[0]  # the chosen one among several OrtEpDevices
    out[0] = api.lib.ep_MemoryInfo_GetMemoryDevice(device.memory_infos[device.default_mem_type])
