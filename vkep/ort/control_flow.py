"""If / Loop / Scan through ORT's own control-flow kernels, with vkep's device helpers for Loop and Scan."""

from __future__ import annotations

import math

from vkep.gpu import transfer
from vkep.gpu.external import InPlace, InteropError
from vkep.kernels import manifest
from vkep.kernels.base import ITEMSIZE, Tensor, encode_dispatch, implementation, variant
from vkep.ort import abi, api
from vkep.ort.api import callback, status_callback
from vkep.ort.memory import stream_of

# helper struct address → (VulkanDevice, whether its session reads host memory in place: EP option host_import)
HELPERS: dict[int, tuple] = {}


def control_flow_kernel(device, spec, info, import_host: bool):
    """ORT's kernel for an If/Loop/Scan node (ORT owns it from here on); `import_host`: its session reads host
    memory in place (EP option host_import)."""
    lib, ffi = api.lib, api.ffi
    out = ffi.new("OrtKernelImpl**")
    if spec.op == "If":
        api.check(lib.ep_CreateIfKernel(info, out))
    elif spec.op == "Loop":
        helper = _helper("vkep_loop_helper", (device, import_host), lib.py_loop_helper_release, ConcatOutput=lib.py_loop_concat)
        api.check(lib.ep_CreateLoopKernel(info, ffi.cast("OrtLoopKernelHelper*", helper), out))
    elif spec.op == "Scan":
        helper = _helper("vkep_scan_helper", (device, import_host), lib.py_scan_helper_release, Transpose=lib.py_scan_transpose)
        api.check(lib.ep_CreateScanKernel(info, ffi.cast("OrtScanKernelHelper*", helper), out))
    else:
        raise api.OrtError(f"no control-flow kernel for {spec.op}", api.ORT_NOT_IMPLEMENTED)
    return out[0]


def _helper(ctype: str, owner: tuple, release, **methods):
    """A Loop/Scan helper struct for ORT (which releases it), remembering its (device, import_host)."""
    helper = api.new_struct(ctype)
    helper.base.ort_version_supported = api.lib.vkep_api_version()
    helper.base.Release = release
    for name, fn in methods.items():
        setattr(helper.base, name, fn)
    HELPERS[api.address(helper)] = owner
    return helper


def _release(this) -> None:
    if HELPERS.pop(api.address(this), None) is not None:
        api.free_struct(this)


@callback("py_loop_helper_release")
def _loop_release(this):
    _release(this)


@callback("py_scan_helper_release")
def _scan_release(this):
    _release(this)


def _data(value) -> tuple[int, int]:
    ffi, lib = api.ffi, api.lib
    ptr, size = ffi.new("void**"), ffi.new("size_t*")
    api.check(lib.ort_GetTensorMutableData(ffi.cast("OrtValue*", value), ptr))
    api.check(lib.ort_GetTensorSizeInBytes(value, size))
    return api.address(ptr[0]), size[0]


@status_callback("py_loop_concat")
def _loop_concat(this, stream_handle, values, n, output, output_size):
    """Loop's scan outputs: each iteration's tensor, end to end in the output buffer, on the device."""
    device, import_host = HELPERS[api.address(this)]
    gpu = device.gpu
    stream = (stream_of(stream_handle) if stream_handle != api.ffi.NULL else None) or gpu.default_stream()
    pieces = [_data(values[i]) for i in range(n)]
    if sum(size for _, size in pieces) > output_size:
        raise api.OrtError("Loop outputs exceed the concatenated buffer", api.ORT_INVALID_ARGUMENT)
    host = InPlace(gpu, import_host)  # on a unified device ORT may hand over host memory as it is
    try:
        dst, offset = host.address(api.address(output), output_size), 0
        for src, size in pieces:
            transfer.device_copy(gpu, host.address(src, size), dst + offset, size, stream)
            offset += size
    except InteropError:
        # host memory the device cannot use in place (EP option host_import=0, or a driver without
        # VK_EXT_external_memory_host): that happens only on a unified device, where every pointer here is one
        # the host can read and write, so the host concatenates once the device's work on them is done
        gpu.synchronize()
        _concat_on_host(api.address(output), pieces)
    finally:
        host.done(stream)


def _concat_on_host(dst: int, pieces: list[tuple[int, int]]) -> None:
    ffi, offset = api.ffi, 0
    for src, size in pieces:
        ffi.memmove(ffi.cast("char*", dst + offset), ffi.cast("char*", src), size)
        offset += size


class _DeviceCall:
    """A kernel `Call` outside any node: given input and output tensors, recorded on a stream."""

    def __init__(self, gpu, stream, inputs: list[Tensor], outputs: list[Tensor]):
        self.gpu, self.stream, self.inputs, self.outputs = gpu, stream, inputs, outputs

    def output(self, index: int, shape, dtype=None) -> Tensor:
        out = self.outputs[index]
        if tuple(shape) != out.shape:
            raise api.OrtError(f"transpose to {tuple(shape)} into a tensor of shape {out.shape}")
        return out

    def error_word(self) -> Tensor:
        return Tensor(self.gpu.error_word, (1,), "int32", Tensor.PERSISTENT)

    def read_device(self, tensor: Tensor) -> bytes:
        return transfer.read(self.gpu, tensor.addr, tensor.nbytes)

    def begin_loop(self) -> None:
        pass  # (no plan outside a node: the loop's steps are recorded as they come)

    def end_loop(self, times: int, counter: str) -> None:
        pass

    def dispatch(self, shader, dtype, constants, push, groups, reads, writes) -> None:
        pipeline = self.gpu.pipelines.get(shader, variant(dtype), constants)
        _, push, spans = encode_dispatch(self.gpu.pipelines.push_layout(pipeline), push, reads, writes)
        self.stream.dispatch(pipeline, push, groups, spans, len(reads), len(writes))


def _tensor(host: InPlace, value) -> Tensor:
    ffi = api.ffi
    type_, rank, ptr = ffi.new("int*"), ffi.new("int*"), ffi.new("uint64_t*")
    dims = ffi.new("int64_t[8]")
    api.check(api.lib.vkep_tensor_info(value, type_, dims, rank, ptr))
    shape, dtype = tuple(dims[i] for i in range(rank[0])), abi.ELEMENT_TYPES.get(type_[0], "?")
    return Tensor(host.address(ptr[0], math.prod(shape) * ITEMSIZE.get(dtype, 1)), shape, dtype)


@status_callback("py_scan_transpose")
def _scan_transpose(this, permutation, n, value, stream, output):
    """Scan's scan_input_axes / scan_output_axes: the Transpose kernel, run on the given stream."""
    device, import_host = HELPERS[api.address(this)]
    gpu = device.gpu
    impl = api.lib.ep_SyncStream_GetImpl(stream) if stream != api.ffi.NULL else api.ffi.NULL
    gpu_stream = (stream_of(impl) if impl != api.ffi.NULL else None) or gpu.default_stream()
    host = InPlace(gpu, import_host)  # on a unified device ORT may hand over host memory as it is
    try:
        x, y = _tensor(host, value), _tensor(host, output)
        spec = next(s for s in manifest.registered() if s.op == "Transpose")
        kernel = implementation(spec)(spec, {"perm": [permutation[i] for i in range(n)]}, spec.since[-1], [x.dtype])
        kernel.compute(_DeviceCall(gpu, gpu_stream, [x], [y]))
    finally:
        host.done(gpu_stream)
