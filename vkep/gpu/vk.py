"""The compiled Vulkan binding and its error type."""

from __future__ import annotations

from vkep import _native
from vkep.gpu.diagnose import no_loader

try:
    _mod = _native.load("_vk")
except ImportError as exc:  # the binding links libvulkan: without the loader it cannot load
    if "vulkan" not in str(exc).lower():
        raise
    raise no_loader(str(exc)) from exc
ffi = _mod.ffi
lib = _mod.lib

_NAMES = {
    lib.VK_ERROR_OUT_OF_HOST_MEMORY: "VK_ERROR_OUT_OF_HOST_MEMORY",
    lib.VK_ERROR_OUT_OF_DEVICE_MEMORY: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    lib.VK_ERROR_DEVICE_LOST: "VK_ERROR_DEVICE_LOST",
    lib.VK_ERROR_INITIALIZATION_FAILED: "VK_ERROR_INITIALIZATION_FAILED",
    lib.VK_ERROR_INCOMPATIBLE_DRIVER: "VK_ERROR_INCOMPATIBLE_DRIVER",
    lib.VK_ERROR_LAYER_NOT_PRESENT: "VK_ERROR_LAYER_NOT_PRESENT",
    lib.VK_ERROR_EXTENSION_NOT_PRESENT: "VK_ERROR_EXTENSION_NOT_PRESENT",
    lib.VK_TIMEOUT: "VK_TIMEOUT",
}


def result_name(result: int) -> str:
    return _NAMES.get(result, f"VkResult {result}")


class VulkanError(RuntimeError):
    def __init__(self, what: str, result: int):
        self.result = result
        super().__init__(f"{what} failed: {result_name(result)}")


class OutOfDeviceMemory(VulkanError, MemoryError):
    pass


class DeviceLost(VulkanError):
    """VK_ERROR_DEVICE_LOST: the device (or its driver) failed; nothing more can run on it."""


def check(result: int, what: str) -> None:
    if result < 0 or result == lib.VK_TIMEOUT:
        if result in (lib.VK_ERROR_OUT_OF_DEVICE_MEMORY, lib.VK_ERROR_OUT_OF_HOST_MEMORY):
            raise OutOfDeviceMemory(what, result)
        if result == lib.VK_ERROR_DEVICE_LOST:
            raise DeviceLost(what, result)
        raise VulkanError(what, result)


def cstr(array) -> str:
    return ffi.string(array).decode(errors="replace")


def new(ctype: str, **fields):
    """A zero-initialised Vulkan struct with the given fields; sType is filled in from the name."""
    obj = ffi.new(ctype + "*")
    for key, value in fields.items():
        setattr(obj, key, value)
    return obj


def version_string(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def driver_version_string(vendor_id: int, v: int) -> str:
    """VkPhysicalDeviceProperties.driverVersion as the vendor writes it (the encoding is vendor-specific)."""
    if vendor_id == 0x10DE:  # NVIDIA: 10.8.8.6 bits
        return f"{v >> 22}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF}.{v & 0x3F}"
    return version_string(v)  # Mesa, AMD, Intel on Linux, MoltenVK: Vulkan's version encoding
