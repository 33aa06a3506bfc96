"""Weights packed once at session creation: PrePackWeight into vkep's content-keyed cache, or into ORT's
shared pre-packed weight cache (EP option prepack_cache=ort) and back through SetSharedPrePackedWeight."""

from __future__ import annotations

import math

import numpy as np

from vkep.gpu import transfer
from vkep.gpu.external import HostMemoryImport
from vkep.kernels.base import NIBBLE_TYPES, Tensor, tensor_bytes
from vkep.ort import abi, api, warmup
from vkep.ort.api import status_callback
from vkep.ort.kernel import KERNELS, KernelInstance


def _layout(value) -> tuple[tuple[int, ...], str, int]:
    """A tensor's (shape, element type, data pointer) as ORT holds it."""
    ffi, lib = api.ffi, api.lib
    type_, rank, ptr = ffi.new("int*"), ffi.new("int*"), ffi.new("uint64_t*")
    dims = ffi.new("int64_t[8]")
    api.check(lib.vkep_tensor_info(value, type_, dims, rank, ptr))
    return tuple(dims[i] for i in range(rank[0])), abi.ELEMENT_TYPES[type_[0]], ptr[0]


def _host_array(kernel: KernelInstance, value) -> np.ndarray:
    """A constant tensor's values, wherever ORT placed it (CPU, or vkep memory); a 4-bit tensor as its bytes."""
    ffi, lib = api.ffi, api.lib
    shape, dtype, src = _layout(value)
    if dtype in NIBBLE_TYPES:
        out = np.empty((tensor_bytes(math.prod(shape), dtype),), np.uint8)
    else:
        out = np.empty(shape, np.dtype(dtype))
    if out.nbytes:
        dst = out.ctypes.data
        if (kernel.device.owns(lib.ep_Value_GetMemoryDevice(value)) is not None
                and kernel.gpu.memory.spans.find(src) is not None):  # (vkep-labeled may be host memory)
            transfer.download(kernel.gpu, kernel.gpu.memory.device_address(src), dst, out.nbytes)
        else:
            ffi.memmove(ffi.cast("void*", dst), ffi.cast("void*", src), out.nbytes)
    return out


@status_callback("py_kernel_prepack")
def _kernel_prepack(this, tensor, input_index, allocator, cache, is_packed):
    """Pack a constant input once (kernels.yaml `prepack`); ORT then frees its copy."""
    kernel = KERNELS[api.ffi.cast("vkep_kernel*", this).id]
    is_packed[0] = False
    if input_index in kernel.cpu_inputs or input_index >= 32:
        return
    if input_index in kernel.spec.prepack:
        original = _host_array(kernel, tensor)
        kernel.weight_shapes[input_index] = tuple(original.shape)
        packed, tag = kernel.impl.pack(input_index, original)
    elif kernel.device.shares_host_memory and all(a != input_index for a, _ in kernel.spec.aliases):
        # any other constant, as it is: ORT kept it on the host (ep._host_placed_inputs); one shared
        # device copy per content, at a fixed address (so a second session moves nothing, and native
        # replay needs no host import for it). An input an output may alias stays ORT's: ORT aliases
        # the value it holds, which packing would empty.
        packed, tag = _host_array(kernel, tensor), "as-is"
    else:  # on a discrete GPU ORT copied it into device memory already: that copy is its final place
        return
    packed = np.require(packed, requirements="C")  # (np.ascontiguousarray would make a scalar 1-D)
    shape, dtype = tuple(packed.shape), "bool" if packed.dtype == np.bool_ else str(packed.dtype)
    if tag == "as-is":  # (a 4-bit tensor's bytes keep its own shape and type)
        shape, dtype, _ = _layout(tensor)
    if kernel.prepack_cache == "ort" and cache != api.ffi.NULL:
        _share_through_ort(kernel, packed, allocator, cache)
        kernel.shared_layouts[input_index] = (shape, dtype)
    else:  # vkep's own cache: content-keyed, shared by every kernel and session of the process
        weight = kernel.gpu.weights.acquire(packed.tobytes(), f"{tag}:{dtype}:{shape}")
        kernel.packed[input_index] = (weight, Tensor(weight.address, shape, dtype, Tensor.PERSISTENT))
        if input_index in kernel.spec.prepack:  # (its plan final once the last such weight is packed)
            warmup.start_ahead(kernel)
    kernel.struct.packed_mask |= 1 << input_index
    is_packed[0] = True


def _share_through_ort(kernel: KernelInstance, packed: np.ndarray, allocator, cache) -> None:
    """Sharing mode of PrePackWeight: the packed bytes go into a buffer from ORT's `allocator` (host-
    accessible memory: ORT offers the cache only for that) and into ORT's cache, which hands each kernel
    packing the same bytes one buffer through SetSharedPrePackedWeight."""
    ffi, lib = api.ffi, api.lib
    nbytes = max(packed.nbytes, 1)
    pointer = allocator.Alloc(allocator, nbytes)
    if pointer == ffi.NULL:
        raise api.OrtError(f"vkep: no memory for a {nbytes}-byte packed weight", api.ORT_FAIL)
    source = api.address(ffi.from_buffer(packed))
    if kernel.gpu.memory.spans.find(api.address(pointer)):  # vkep memory: an upload, counted as one
        transfer.upload(kernel.gpu, source, api.address(pointer), packed.nbytes)
    else:  # an allocator the application registered: host memory
        ffi.memmove(pointer, ffi.cast("void*", source), packed.nbytes)
    api.check(lib.ep_SharedPrePackedWeightCache_StoreWeightData(cache, ffi.new("void*[]", [pointer]),
                                                                ffi.new("size_t[]", [nbytes]), 1))


@status_callback("py_kernel_set_shared")
def _kernel_set_shared(this, data, sizes, n, input_index):
    """ORT's shared pre-packed weight cache gives this kernel the buffer for a weight it packed."""
    kernel = KERNELS[api.ffi.cast("vkep_kernel*", this).id]
    if input_index not in kernel.shared_layouts or n != 1:
        raise api.OrtError(f"vkep: no shared weight was packed for input {input_index}", api.ORT_INVALID_ARGUMENT)
    shape, dtype = kernel.shared_layouts[input_index]
    pointer, nbytes = api.address(data[0]), sizes[0]
    found = kernel.gpu.memory.spans.find(pointer)
    if found:
        address = found[0].device_address + found[1]
    else:  # host memory from an allocator the application registered: read in place for the kernel's life
        imported = HostMemoryImport(kernel.gpu, pointer, nbytes)
        kernel.held_imports.append(imported)
        address = imported.address
    weight = kernel.gpu.weights.adopt(address, nbytes)
    kernel.packed[input_index] = (weight, Tensor(address, shape, dtype, Tensor.PERSISTENT))
