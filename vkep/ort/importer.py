"""OrtExternalResourceImporterImpl: an application's GPU memory and timeline semaphores, imported into vkep.

ORT's handle types map to Vulkan's (see ../shared/design.md, Interop):

    memory   D3D12_RESOURCE / D3D12_HEAP   -> D3D12_RESOURCE_BIT / D3D12_HEAP_BIT   (external_memory_win32)
             VK_MEMORY_WIN32               -> OPAQUE_WIN32_BIT                      (external_memory_win32)
             VK_MEMORY_OPAQUE_FD           -> OPAQUE_FD_BIT                         (external_memory_fd)
    semaphore D3D12_FENCE                  -> D3D12_FENCE_BIT, timeline             (external_semaphore_win32)
             VK_TIMELINE_SEMAPHORE_WIN32 / _OPAQUE_FD -> OPAQUE_WIN32_BIT / OPAQUE_FD_BIT, timeline

A file descriptor travels in `native_handle` as its integer value; on success its ownership passes to
Vulkan. Capability answers come from the device (`vkGetPhysicalDeviceExternal*Properties`).
"""

from __future__ import annotations

import itertools

from vkep.gpu import external
from vkep.ort import abi, api
from vkep.ort.api import callback, status_callback
from vkep.ort.memory import stream_of

# ORT's OrtExternalMemoryHandleType / OrtExternalSemaphoreType codes → vkep.gpu.external kinds
MEMORY_KINDS = {code: abi.VULKAN_KINDS.get(name, name) for name, code in abi.MEMORY_HANDLE_TYPES.items()}
SEMAPHORE_KINDS = {code: abi.VULKAN_KINDS.get(name, name) for name, code in abi.SEMAPHORE_TYPES.items()}

IMPORTERS: dict[int, object] = {}  # importer struct address → VulkanDevice
MEMORY: dict[int, external.ImportedMemory] = {}  # handle id → import
SEMAPHORES: dict[int, external.ImportedSemaphore] = {}
_ids = itertools.count(1)


def translate_memory(desc) -> tuple[str, int, int, int]:
    """(kind, handle, size, offset) of an OrtExternalMemoryDescriptor, validated."""
    kind = MEMORY_KINDS.get(desc.handle_type)
    if kind is None:
        raise api.OrtError(f"unknown external memory handle type {desc.handle_type}", api.ORT_INVALID_ARGUMENT)
    handle = int(api.ffi.cast("intptr_t", desc.native_handle))
    return kind, handle, desc.size_bytes, desc.offset_bytes


def translate_semaphore(desc) -> tuple[str, int]:
    kind = SEMAPHORE_KINDS.get(desc.type)
    if kind is None:
        raise api.OrtError(f"unknown external semaphore type {desc.type}", api.ORT_INVALID_ARGUMENT)
    return kind, int(api.ffi.cast("intptr_t", desc.native_handle))


def create_importer(device, ep_device):
    lib = api.lib
    imp = api.new_struct("vkep_importer")
    s = imp.base
    s.ort_version_supported = lib.vkep_api_version()
    s.CanImportMemory = lib.py_importer_can_import_memory
    s.ImportMemory = lib.py_importer_import_memory
    s.ReleaseMemory = lib.py_importer_release_memory
    s.CreateTensorFromMemory = lib.py_importer_create_tensor
    s.CanImportSemaphore = lib.py_importer_can_import_semaphore
    s.ImportSemaphore = lib.py_importer_import_semaphore
    s.ReleaseSemaphore = lib.py_importer_release_semaphore
    s.WaitSemaphore = lib.py_importer_wait_semaphore
    s.SignalSemaphore = lib.py_importer_signal_semaphore
    s.Release = lib.py_importer_release
    imp.id = next(_ids)
    IMPORTERS[api.address(imp)] = (device, ep_device)
    return api.ffi.cast("OrtExternalResourceImporterImpl*", imp)


def _device(this):
    return IMPORTERS[api.address(this)][0]


@callback("py_importer_can_import_memory")
def _can_import_memory(this, handle_type):
    kind = MEMORY_KINDS.get(handle_type)
    return kind is not None and external.can_import_memory(_device(this).info, kind)


@callback("py_importer_can_import_semaphore")
def _can_import_semaphore(this, kind_code):
    kind = SEMAPHORE_KINDS.get(kind_code)
    return kind is not None and external.can_import_semaphore(_device(this).info, kind)


def _fail(exc: external.InteropError):
    raise api.OrtError(str(exc), api.ORT_INVALID_ARGUMENT) from None


def _handle(kind: str, ep_device, desc, imported, registry: dict):
    """An ORT handle (vkep_memory_handle / vkep_semaphore_handle) for an import, its id in `registry`."""
    h = api.new_struct(f"vkep_{kind}_handle")
    h.base.version = api.lib.vkep_api_version()
    h.base.ep_device = ep_device
    h.base.descriptor = desc[0]
    h.base.Release = getattr(api.lib, f"py_{kind}_handle_release")
    h.id = next(_ids)
    registry[h.id] = imported
    return h


def _release(kind: str, handle, registry: dict) -> None:
    # The small handle struct itself is kept (not freed) so that a second release is reported, not a crash.
    imported = registry.pop(api.ffi.cast(f"vkep_{kind}_handle*", handle).id, None)
    if imported is None:
        raise external.InteropError(f"external {kind} handle released twice")
    imported.release()


@status_callback("py_importer_import_memory")
def _import_memory(this, desc, out):
    device, ep_device = IMPORTERS[api.address(this)]
    kind, handle, size, offset = translate_memory(desc)
    try:
        imported = external.ImportedMemory(device.gpu, kind, handle, size, offset)
    except external.InteropError as exc:
        _fail(exc)
    out[0] = api.ffi.cast("OrtExternalMemoryHandle*", _handle("memory", ep_device, desc, imported, MEMORY))


@callback("py_importer_release_memory")
def _importer_release_memory(this, handle):
    _release("memory", handle, MEMORY)


@callback("py_memory_handle_release")
def _memory_handle_release(handle):
    _release("memory", handle, MEMORY)


@status_callback("py_importer_create_tensor")
def _create_tensor(this, handle, desc, out):
    """A tensor over the imported memory at desc.offset_bytes: a view, no copy."""
    from vkep.kernels.base import ITEMSIZE

    device = _device(this)
    imported = MEMORY.get(api.ffi.cast("vkep_memory_handle*", handle).id)
    if imported is None:
        raise api.OrtError("the external memory handle was released", api.ORT_INVALID_ARGUMENT)
    dtype = abi.ELEMENT_TYPES.get(desc.element_type)
    if dtype is None or dtype not in ITEMSIZE:
        raise api.OrtError(f"element type {desc.element_type} is not supported", api.ORT_INVALID_ARGUMENT)
    shape = [desc.shape[i] for i in range(desc.rank)]
    if any(d < 0 for d in shape):
        raise api.OrtError(f"shape {shape} has a negative dimension", api.ORT_INVALID_ARGUMENT)
    nbytes = ITEMSIZE[dtype]
    for d in shape:
        nbytes *= d
    start = imported.offset + desc.offset_bytes
    if start + nbytes > imported.size:
        raise api.OrtError(f"a {nbytes}-byte tensor at offset {start} exceeds the {imported.size}-byte allocation",
                           api.ORT_INVALID_ARGUMENT)
    dims = api.ffi.new("int64_t[]", shape or [0])
    # in the EP's default memory where possible, so ORT reads and writes it in place (no copy)
    block = imported.block
    if device.default_mem_type == api.MEM_HOST_ACCESSIBLE and block.host_address:
        info, base = device.memory_infos[api.MEM_HOST_ACCESSIBLE], block.host_address
    else:
        info, base = device.memory_infos[api.MEM_DEFAULT], block.device_address
    address = api.ffi.cast("void*", base + start)
    api.check(api.lib.ort_CreateTensorWithDataAsOrtValue(info, address, nbytes, dims, len(shape),
                                                         desc.element_type, out))


@status_callback("py_importer_import_semaphore")
def _import_semaphore(this, desc, out):
    device, ep_device = IMPORTERS[api.address(this)]
    kind, handle = translate_semaphore(desc)
    try:
        imported = external.ImportedSemaphore(device.gpu, kind, handle)
    except external.InteropError as exc:
        _fail(exc)
    out[0] = api.ffi.cast("OrtExternalSemaphoreHandle*", _handle("semaphore", ep_device, desc, imported, SEMAPHORES))


@callback("py_importer_release_semaphore")
def _importer_release_semaphore(this, handle):
    _release("semaphore", handle, SEMAPHORES)


@callback("py_semaphore_handle_release")
def _semaphore_handle_release(handle):
    _release("semaphore", handle, SEMAPHORES)


def _stream_and_semaphore(this, handle, stream):
    device = _device(this)
    imported = SEMAPHORES.get(api.ffi.cast("vkep_semaphore_handle*", handle).id)
    if imported is None:
        raise api.OrtError("the external semaphore handle was released", api.ORT_INVALID_ARGUMENT)
    gpu_stream = None
    if stream != api.ffi.NULL:
        impl = api.lib.ep_SyncStream_GetImpl(stream)
        gpu_stream = stream_of(impl) if impl != api.ffi.NULL else None
    return gpu_stream or device.gpu.default_stream(), imported


@status_callback("py_importer_wait_semaphore")
def _wait_semaphore(this, handle, stream, value):
    gpu_stream, imported = _stream_and_semaphore(this, handle, stream)
    gpu_stream.wait_external(imported.semaphore, value)  # a GPU-side wait: the host never blocks


@status_callback("py_importer_signal_semaphore")
def _signal_semaphore(this, handle, stream, value):
    gpu_stream, imported = _stream_and_semaphore(this, handle, stream)
    gpu_stream.signal_external(imported.semaphore, value)


@callback("py_importer_release")
def _importer_release(this):
    if IMPORTERS.pop(api.address(this), None) is not None:
        api.free_struct(this)
