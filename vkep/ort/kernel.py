"""OrtKernelImpl: one per node. Compute enters Python once per node (see the C trampoline)."""

from __future__ import annotations

import itertools
import struct
import threading

from vkep.gpu.stream import pack_spans
from vkep.kernels.base import SHADER_DTYPE, Tensor, implementation
from vkep.ort import api
from vkep.ort.api import callback, status_callback
from vkep.ort.ep import KERNEL_STATES
from vkep.ort.memory import stream_of

KERNELS: dict[int, KernelInstance] = {}
_ids = itertools.count(1)
_ids_lock = threading.Lock()
RANK = 8  # VKEP_MAX_RANK of the trampoline's io struct


class KernelInstance:
    """The ORT-facing half of a node's kernel: its C struct, its device, its pipelines."""

    def __init__(self, device, spec, impl, node_name: str):
        lib, ffi = api.lib, api.ffi
        self.device = device
        self.gpu = device.gpu
        self.spec = spec
        self.impl = impl
        self.node_name = node_name
        self.cpu_inputs = frozenset(spec.cpu_inputs)
        self.pipelines: dict[tuple, object] = {}
        with _ids_lock:
            self.id = next(_ids)
        self.struct = api.new_struct("vkep_kernel")
        s = self.struct
        s.base.ort_version_supported = lib.vkep_api_version()
        s.base.flags = 0
        s.base.Compute = ffi.cast("OrtStatus*(*)(OrtKernelImpl*, OrtKernelContext*)", lib.vkep_compute_fn)
        s.base.Release = lib.py_kernel_release
        s.base.PrePackWeight = lib.py_kernel_prepack
        s.base.SetSharedPrePackedWeight = lib.py_kernel_set_shared
        s.id = self.id
        KERNELS[self.id] = self

    def pipeline(self, shader: str, dtype: str, constants: tuple[int, ...]):
        key = (shader, dtype, constants)
        found = self.pipelines.get(key)
        if found is None:
            found = self.pipelines[key] = self.gpu.pipelines.get(shader, {"DTYPE": SHADER_DTYPE[dtype]}, constants)
        return found


class KernelCall:
    """One execution of a node: what `vkep.kernels` sees as `Call`."""

    __slots__ = ("kernel", "ctx", "inputs", "stream")

    def __init__(self, kernel: KernelInstance, ctx, inputs, stream):
        self.kernel = kernel
        self.ctx = ctx
        self.inputs = inputs
        self.stream = stream

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        ffi = api.ffi
        ptr = ffi.new("uint64_t*")
        dims = struct.pack(f"<{len(shape)}q", *shape)
        api.check(api.lib.vkep_output(self.ctx, index, dims, len(shape), ptr))
        dtype = dtype or self.inputs[0].dtype
        addr = self.kernel.gpu.memory.device_address(ptr[0]) if ptr[0] else 0
        return Tensor(addr, tuple(shape), dtype)

    def dispatch(self, shader, dtype, constants, push, groups, reads, writes) -> None:
        pipeline = self.kernel.pipeline(shader, dtype, constants)
        spans = pack_spans([(t.addr, t.addr + t.nbytes) for t in reads], [(t.addr, t.addr + t.nbytes) for t in writes])
        self.stream.dispatch(pipeline, push, groups, spans, len(reads), len(writes))

    def copy(self, src: Tensor, dst: Tensor) -> None:
        if src.addr != dst.addr and src.nbytes:
            self.stream.copy(src.addr, dst.addr, src.nbytes)

    def read_host(self, tensor: Tensor) -> bytes:
        """The bytes of a CPU input (declared in `cpu_inputs`)."""
        return api.ffi.buffer(api.ffi.cast("char*", tensor.addr), tensor.nbytes)[:]


def _read_attributes(info, spec) -> dict:
    lib, ffi = api.lib, api.ffi
    attrs = {}
    for attr in spec.attributes:
        name = attr.name.encode()
        try:
            if attr.kind == "int":
                out = ffi.new("int64_t*")
                api.check(lib.ort_KernelInfoGetAttribute_int64(info, name, out))
                value = out[0]
            elif attr.kind == "float":
                out = ffi.new("float*")
                api.check(lib.ort_KernelInfoGetAttribute_float(info, name, out))
                value = out[0]
            elif attr.kind == "string":
                size = ffi.new("size_t*", 0)
                api.check(lib.ort_KernelInfoGetAttribute_string(info, name, ffi.NULL, size))
                buf = ffi.new("char[]", size[0])
                api.check(lib.ort_KernelInfoGetAttribute_string(info, name, buf, size))
                value = ffi.string(buf).decode()
            else:
                fn = (lib.ort_KernelInfoGetAttributeArray_int64 if attr.kind == "ints"
                      else lib.ort_KernelInfoGetAttributeArray_float)
                ctype = "int64_t[]" if attr.kind == "ints" else "float[]"
                size = ffi.new("size_t*", 0)
                api.check(fn(info, name, ffi.NULL, size))
                buf = ffi.new(ctype, size[0])
                api.check(fn(info, name, buf, size))
                value = list(buf)
        except api.OrtError:
            if attr.default is None:
                raise api.OrtError(f"{spec.op}: required attribute {attr.name!r} is missing",
                                   api.ORT_INVALID_ARGUMENT) from None
            value = attr.default
        attrs[attr.name] = value
    return attrs


def _node_name(info) -> str:
    ffi = api.ffi
    size = ffi.new("size_t*", 0)
    api.check(api.lib.ort_KernelInfo_GetNodeName(info, ffi.NULL, size))
    buf = ffi.new("char[]", size[0])
    api.check(api.lib.ort_KernelInfo_GetNodeName(info, buf, size))
    return ffi.string(buf).decode()


@status_callback("py_kernel_create")
def _kernel_create(state, info, out):
    lib, ffi = api.lib, api.ffi
    device, spec = KERNEL_STATES[api.address(state)]
    since = ffi.new("int*")
    api.check(lib.ort_KernelInfo_GetOperatorSinceVersion(info, since))
    count = ffi.new("size_t*")
    api.check(lib.ort_KernelInfo_GetInputCount(info, count))
    input_types = [api.ELEMENT_TYPES.get(lib.ort_KernelInfo_InputElementType(info, i), "") for i in range(count[0])]
    impl = implementation(spec)(spec, _read_attributes(info, spec), since[0], input_types)
    kernel = KernelInstance(device, spec, impl, _node_name(info))
    out[0] = ffi.cast("OrtKernelImpl*", kernel.struct)


@status_callback("py_kernel_compute")
def _kernel_compute(kernel_id, ctx, io):
    kernel = KERNELS[kernel_id]
    ffi = api.ffi
    memory = kernel.gpu.memory
    inputs = []
    types, ranks, ptrs, dims = io.types, io.ranks, io.ptrs, io.dims
    element_types = api.ELEMENT_TYPES
    for i in range(io.n_inputs):
        code = types[i]
        if code == 0:
            inputs.append(None)
            continue
        ptr = ptrs[i]
        shape = tuple(ffi.unpack(dims + i * RANK, ranks[i]))
        if ptr and i not in kernel.cpu_inputs:
            ptr = memory.device_address(ptr)
        inputs.append(Tensor(ptr, shape, element_types.get(code, "?")))
    stream = stream_of(io.stream) if io.stream != ffi.NULL else None
    if stream is None:
        stream = kernel.gpu.default_stream()
    kernel.impl.compute(KernelCall(kernel, ctx, inputs, stream))


@callback("py_kernel_release")
def _kernel_release(this):
    KERNELS.pop(api.ffi.cast("vkep_kernel*", this).id, None)
    api.free_struct(this)


@status_callback("py_kernel_prepack")
def _kernel_prepack(this, tensor, input_index, allocator, cache, is_packed):
    is_packed[0] = False


@status_callback("py_kernel_set_shared")
def _kernel_set_shared(this, data, sizes, n, input_index):
    raise api.OrtError("vkep does not use ORT's shared pre-packed weight cache", api.ORT_NOT_IMPLEMENTED)
