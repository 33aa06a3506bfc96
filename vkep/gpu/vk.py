"""The compiled Vulkan binding and its error type."""

from __future__ import annotations

from vkep.build import load_vk

_mod = load_vk()
ffi = _mod.ffi
lib = _mod.lib

_NAMES = {
    lib.VK_ERROR_OUT_OF_HOST_MEMORY: "VK_ERROR_OUT_OF_HOST_MEMORY",
    lib.VK_ERROR_OUT_OF_DEVICE_MEMORY: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    lib.VK_ERROR_DEVICE_LOST: "VK_ERROR_DEVICE_LOST",
    lib.VK_TIMEOUT: "VK_TIMEOUT",
}


class VulkanError(RuntimeError):
    def __init__(self, what: str, result: int):
        self.result = result
        super().__init__(f"{what} failed: {_NAMES.get(result, f'VkResult {result}')}")


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
