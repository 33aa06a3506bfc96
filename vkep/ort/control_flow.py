"""If / Loop / Scan through ORT's own control-flow kernels, with vkep's device helpers for Loop and Scan."""

from __future__ import annotations

from vkep.gpu import transfer
from vkep.ort import api
from vkep.ort.api import callback, status_callback
from vkep.ort.memory import stream_of

HELPERS: dict[int, object] = {}  # helper struct address → VulkanDevice


def control_flow_kernel(device, spec, info):
    """ORT's kernel for an If/Loop/Scan node (ORT owns it from here on)."""
    lib, ffi = api.lib, api.ffi
    out = ffi.new("OrtKernelImpl**")
    if spec.op == "If":
        api.check(lib.ep_CreateIfKernel(info, out))
    elif spec.op == "Loop":
        helper = _helper("vkep_loop_helper", device, lib.py_loop_helper_release, ConcatOutput=lib.py_loop_concat)
        api.check(lib.ep_CreateLoopKernel(info, ffi.cast("OrtLoopKernelHelper*", helper), out))
    elif spec.op == "Scan":
        helper = _helper("vkep_scan_helper", device, lib.py_scan_helper_release, Transpose=lib.py_scan_transpose)
        api.check(lib.ep_CreateScanKernel(info, ffi.cast("OrtScanKernelHelper*", helper), out))
    else:
        raise api.OrtError(f"no control-flow kernel for {spec.op}", api.ORT_NOT_IMPLEMENTED)
    return out[0]


def _helper(ctype: str, device, release, **methods):
    """A Loop/Scan helper struct for ORT (which releases it), remembering its device."""
    helper = api.new_struct(ctype)
    helper.base.ort_version_supported = api.lib.vkep_api_version()
    helper.base.Release = release
    for name, fn in methods.items():
        setattr(helper.base, name, fn)
    HELPERS[api.address(helper)] = device
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
    gpu = HELPERS[api.address(this)].gpu
    stream = stream_of(stream_handle) if stream_handle != api.ffi.NULL else None
    memory = gpu.memory
    dst = memory.device_address(api.address(output))
    offset = 0
    for i in range(n):
        src, size = _data(values[i])
        if offset + size > output_size:
            raise api.OrtError("Loop outputs exceed the concatenated buffer", api.ORT_INVALID_ARGUMENT)
        transfer.device_copy(gpu, memory.device_address(src), dst + offset, size, stream)
        offset += size


@status_callback("py_scan_transpose")
def _scan_transpose(this, permutation, n, value, stream, output):
    perm = [permutation[i] for i in range(n)]
    if perm != sorted(perm):
        raise api.OrtError("vkep: Scan with non-zero scan axes needs a device transpose, not available yet",
                           api.ORT_NOT_IMPLEMENTED)
    gpu = HELPERS[api.address(this)].gpu
    src, size = _data(value)
    dst, _ = _data(output)
    impl = api.lib.ep_SyncStream_GetImpl(stream) if stream != api.ffi.NULL else api.ffi.NULL
    gpu_stream = stream_of(impl) if impl != api.ffi.NULL else None
    transfer.device_copy(gpu, gpu.memory.device_address(src), gpu.memory.device_address(dst), size, gpu_stream)
