"""External GPU memory and timeline semaphores imported into a vkep device, and host memory the device uses
in place (the gpu layer of interop: ORT's importer is vkep/ort/importer.py, the Python API vkep/interop.py).

Imported memory becomes one VkBuffer with a device address, registered in the device's span table,
so a tensor placed in it is read and written by kernels like any vkep tensor (no copy). What can be
imported is whatever the device reports (`vkGetPhysicalDeviceExternal*Properties`), never assumed.
"""

from __future__ import annotations

import os
import threading

from vkep.gpu import transfer
from vkep.gpu.memory import Block
from vkep.gpu.vk import check, ffi, lib, new

MEMORY_HANDLE_TYPES = {
    "opaque_fd": lib.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
    "opaque_win32": lib.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_BIT,
    "d3d12_heap": lib.VK_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_HEAP_BIT,
    "d3d12_resource": lib.VK_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_RESOURCE_BIT,
}
SEMAPHORE_HANDLE_TYPES = {
    "opaque_fd": lib.VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
    "opaque_win32": lib.VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32_BIT,
    "d3d12_fence": lib.VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D12_FENCE_BIT,
}


class InteropError(ValueError):
    """An external handle that cannot be imported (invalid, unsupported, out of range, released twice)."""


def can_import_memory(info, kind: str) -> bool:
    if kind not in MEMORY_HANDLE_TYPES or not info.usable:
        return False
    features = lib.vkep_external_memory_features(info.handle, MEMORY_HANDLE_TYPES[kind])
    return bool(features & lib.VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT)


def can_import_semaphore(info, kind: str) -> bool:
    if kind not in SEMAPHORE_HANDLE_TYPES or not info.usable:
        return False
    features = lib.vkep_external_semaphore_features(info.handle, SEMAPHORE_HANDLE_TYPES[kind])
    return bool(features & lib.VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT)


def _split_handle(kind: str, handle: int) -> tuple[int, object]:
    """(fd, win32 handle) for the C side: exactly one is meaningful."""
    if kind == "opaque_fd":
        try:
            os.fstat(handle)
        except (OSError, OverflowError, TypeError):
            raise InteropError(f"{handle!r} is not an open file descriptor") from None
        return handle, ffi.NULL
    if not handle:
        raise InteropError("a NULL Windows handle")
    return -1, ffi.cast("void*", handle)


class _External:
    """A buffer over external (or exportable) memory, registered so vkep addresses resolve into it."""

    def __init__(self, device, kind: str, size: int, fd: int, win32, export: bool, host_memory: int = 0):
        self.device = device
        self.kind = kind
        self.size = size
        self._lock = threading.Lock()
        buf, mem, type_index = ffi.new("VkBuffer*"), ffi.new("VkDeviceMemory*"), ffi.new("uint32_t*")
        preferred = device.memory.device_pool.type_index
        if host_memory:
            result = lib.vkep_import_host_memory(device.handle, ffi.cast("void*", host_memory), size, preferred, buf,
                                                 mem, type_index)
        else:
            result = lib.vkep_external_memory(device.handle, MEMORY_HANDLE_TYPES[kind], size, preferred, fd, win32,
                                              int(export), buf, mem, type_index)
        if result != lib.VK_SUCCESS:
            raise InteropError(f"Vulkan refused the {kind} memory ({size} bytes): VkResult {result}")
        self.buffer, self.memory = buf[0], mem[0]
        # on a unified device the host may see it too: then ORT can treat it as HOST_ACCESSIBLE memory
        # (host memory imported is the host's already: its host range is not published as vkep memory)
        host = 0
        flags = device.info.memory_types[type_index[0]][0]
        if not host_memory and device.memory.unified and flags & lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT:
            ptr = ffi.new("void**")
            if lib.vkMapMemory(device.handle, mem[0], 0, size, 0, ptr) == lib.VK_SUCCESS:
                host = int(ffi.cast("uintptr_t", ptr[0]))
        bda = new("VkBufferDeviceAddressInfo", sType=lib.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, buffer=buf[0])
        self.block = Block(memory=mem[0], buffer=buf[0], size=size, device_address=lib.vkGetBufferDeviceAddress(
            device.handle, bda), host_address=host, pool=None, free=[])
        device.memory.spans.add(self.block, publish=not host_memory)
        self.released = False

    def release(self) -> None:
        with self._lock:
            if self.released:
                raise InteropError(f"{self.kind} memory released twice")
            self.released = True
        self.device.synchronize()  # nothing recorded may still use it
        self.device.memory.spans.remove(self.block)
        if self.block.host_address:
            lib.vkUnmapMemory(self.device.handle, self.memory)
        lib.vkDestroyBuffer(self.device.handle, self.buffer, ffi.NULL)
        lib.vkFreeMemory(self.device.handle, self.memory, ffi.NULL)


class ImportedMemory(_External):
    """Memory another API or process allocated (`size` = its whole allocation); `address` is the device
    address at `offset`."""

    def __init__(self, device, kind: str, handle: int, size: int, offset: int = 0):
        if kind not in MEMORY_HANDLE_TYPES:
            raise InteropError(f"unknown memory handle type {kind!r}")
        if not can_import_memory(device.info, kind):
            raise InteropError(f"{device.info.name} cannot import {kind} memory")
        if size <= 0 or not 0 <= offset < size:
            raise InteropError(f"offset {offset} is outside an allocation of {size} bytes")
        fd, win32 = _split_handle(kind, handle)
        super().__init__(device, kind, size, fd, win32, export=False)
        self.offset = offset
        self.address = self.block.device_address + offset


class HostMemoryImport(_External):
    """Host memory vkep does not own (a numpy array ORT feeds, a CPU-EP node's output), read or written
    by the device in place through VK_EXT_external_memory_host: the pages holding [host, host + size)
    become one buffer; `address` is the device address of `host`. The caller keeps the memory alive,
    and waits for the device's work on it, until `release`."""

    def __init__(self, device, host: int, size: int):
        align = device.host_import_alignment
        if not align:
            raise InteropError(f"{device.info.name} cannot read host memory in place")
        start = host - host % align
        end = -(-(host + max(size, 1)) // align) * align
        super().__init__(device, "host_allocation", end - start, -1, None, export=False, host_memory=start)
        self.address = self.block.device_address + (host - start)


# host tensors a dispatch only reads, up to this many bytes, are copied into staging memory rather than imported:
# the copy needs no wait before Compute returns (an import does: the host may reuse its memory then), and a wait is
# the cost of a small model's run on lavapipe (each one a submit handed to its queue thread)
STAGE_BELOW = 64 << 10


class InPlace:
    """Device addresses for one piece of work over vkep memory and host memory the device uses in place.

    Host memory is imported on first use (a host input the device cannot import is staged instead);
    `done` waits for the work recorded on `stream` (the host may read the results, or reuse the memory,
    as soon as the caller returns) and releases the imports."""

    def __init__(self, device, import_host: bool = True):
        self.device = device
        self.import_host = import_host  # False: a session's host_import=0 (staged, as on a device without it)
        self.imports: list[HostMemoryImport] = []
        self.staged = 0  # host tensors copied to the device instead (small ones, or memory it cannot import)
        self.staging: list[int] = []  # their staging chunks, until the work reading them is recorded

    def address(self, pointer: int, nbytes: int, stream=None) -> int:
        """The device address of `pointer`; for host memory only read, pass the `stream` that may then
        read a staged copy where the device refuses to import it."""
        found = self.device.memory.spans.find(pointer)
        mine = found is not None and any(found[0] is imported.block for imported in self.imports)
        if found and not mine:
            return found[0].device_address + found[1]  # vkep memory
        if mine and found[1] + nbytes <= found[0].size:  # (where device addresses are host addresses)
            transfer.count_elided(self.device, nbytes)
            return found[0].device_address + found[1]
        if stream is not None and nbytes <= STAGE_BELOW:  # (a copy costs less than an import and its wait)
            return self._stage(pointer, nbytes, True)
        try:
            if not self.import_host:
                raise InteropError("the session reads host memory through staging (EP option host_import=0)")
            imported = HostMemoryImport(self.device, pointer, nbytes)
        except InteropError:
            if stream is None:
                raise
            return self._stage(pointer, nbytes, False)
        transfer.count_elided(self.device, nbytes)
        self.imports.append(imported)
        return imported.address

    def _stage(self, pointer: int, nbytes: int, small: bool) -> int:
        chunk, address = transfer.stage(self.device, pointer, nbytes, small)
        self.staged += 1
        self.staging.append(chunk)
        return address

    def recorded(self, stream) -> None:
        """The work that reads the staged copies is recorded on `stream`: their chunks go back once it completes
        (not before: a submit between the copy and the dispatch reading it would have given them back too soon)."""
        for chunk in self.staging:
            stream.release_after(self.device.memory.staging_pool, chunk)
        self.staging.clear()

    def done(self, stream) -> None:
        self.recorded(stream)
        stream.finish()
        for imported in self.imports:
            imported.release()
        self.imports.clear()


class ExportableMemory(_External):
    """Memory vkep allocates for another process or API to import (the producer side of a share)."""

    def __init__(self, device, size: int, kind: str = "opaque_fd"):
        super().__init__(device, kind, size, -1, ffi.NULL, export=True)
        self.address = self.block.device_address

    def export_fd(self) -> int:
        fd = ffi.new("int*")
        check(lib.vkep_memory_fd(self.device.handle, self.memory, MEMORY_HANDLE_TYPES[self.kind], fd),
              "vkGetMemoryFdKHR")
        return fd[0]


class ImportedSemaphore:
    """A timeline semaphore another API signals or waits on."""

    def __init__(self, device, kind: str, handle: int):
        if kind not in SEMAPHORE_HANDLE_TYPES:
            raise InteropError(f"unknown semaphore type {kind!r}")
        if not can_import_semaphore(device.info, kind):
            raise InteropError(f"{device.info.name} cannot import {kind} timeline semaphores")
        fd, win32 = _split_handle(kind, handle)
        out = ffi.new("VkSemaphore*")
        result = lib.vkep_import_semaphore(device.handle, SEMAPHORE_HANDLE_TYPES[kind], fd, win32, out)
        if result != lib.VK_SUCCESS:
            raise InteropError(f"Vulkan refused the {kind} semaphore: VkResult {result}")
        self.device = device
        self.semaphore = out[0]
        self.released = False

    def release(self) -> None:
        if self.released:
            raise InteropError("semaphore released twice")
        self.released = True
        self.device.synchronize()
        lib.vkDestroySemaphore(self.device.handle, self.semaphore, ffi.NULL)


class ExportableSemaphore:
    """A timeline semaphore vkep creates for another process or API to import (the producer side)."""

    def __init__(self, device, kind: str = "opaque_fd"):
        out = ffi.new("VkSemaphore*")
        check(lib.vkep_exportable_semaphore(device.handle, SEMAPHORE_HANDLE_TYPES[kind], out), "vkCreateSemaphore")
        self.device, self.kind, self.semaphore = device, kind, out[0]

    def export_fd(self) -> int:
        fd = ffi.new("int*")
        check(lib.vkep_semaphore_fd(self.device.handle, self.semaphore, SEMAPHORE_HANDLE_TYPES[self.kind], fd),
              "vkGetSemaphoreFdKHR")
        return fd[0]

    def signal(self, value: int) -> None:
        """Signal from the host."""
        check(lib.vkep_signal_semaphore(self.device.handle, self.semaphore, value), "vkSignalSemaphore")

    def value(self) -> int:
        out = ffi.new("uint64_t*")
        check(lib.vkGetSemaphoreCounterValue(self.device.handle, self.semaphore, out), "vkGetSemaphoreCounterValue")
        return out[0]

    def release(self) -> None:
        lib.vkDestroySemaphore(self.device.handle, self.semaphore, ffi.NULL)
