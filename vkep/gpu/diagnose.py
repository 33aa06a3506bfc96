"""What is missing when vkep cannot run, and how to install it.

`vkep devices`, `vkep.register()` and ORT's registration of the plugin all report these same messages.
Nothing here touches Vulkan, so it works when the Vulkan loader itself is what is missing.
"""

from __future__ import annotations

import os


class VulkanUnavailable(RuntimeError):
    """vkep cannot run in this process: no Vulkan loader, no driver, or no device with what vkep needs."""


def _lines(title: str, rows: list[tuple[str, str]]) -> str:
    return title + "\n" + "\n".join(f"  {system}: {what}" for system, what in rows)


# What provides each missing piece, per system (package or driver names).
LOADER = [
    ("Debian/Ubuntu", "sudo apt install libvulkan1 mesa-vulkan-drivers"),
    ("Fedora", "sudo dnf install vulkan-loader mesa-vulkan-drivers"),
    ("Windows", "the loader (vulkan-1.dll) comes with the GPU driver: install the current NVIDIA, AMD or Intel "
                "driver"),
    ("macOS", "brew install vulkan-loader molten-vk (or the LunarG Vulkan SDK)"),
]
DRIVER = [
    ("Debian/Ubuntu", "sudo apt install mesa-vulkan-drivers (AMD, Intel, and lavapipe, a CPU driver); NVIDIA: "
                      "nvidia-driver (Debian) or nvidia-driver-<version> (Ubuntu)"),
    ("Fedora", "sudo dnf install mesa-vulkan-drivers; NVIDIA: akmod-nvidia from RPM Fusion"),
    ("Windows", "the current NVIDIA, AMD or Intel GPU driver"),
    ("macOS", "brew install molten-vk (MoltenVK runs Vulkan on Metal)"),
]
NEWER_DRIVER = [
    ("Debian/Ubuntu", "a newer mesa-vulkan-drivers (Debian: bookworm-backports) or NVIDIA driver"),
    ("Fedora", "sudo dnf upgrade mesa-vulkan-drivers (or a newer NVIDIA driver)"),
    ("Windows", "the current NVIDIA, AMD or Intel GPU driver"),
    ("macOS", "brew upgrade molten-vk"),
]
VALIDATION_LAYER = [
    ("Debian/Ubuntu", "sudo apt install vulkan-validationlayers"),
    ("Fedora", "sudo dnf install vulkan-validation-layers"),
    ("Windows/macOS", "the LunarG Vulkan SDK"),
]


def no_loader(detail: str) -> VulkanUnavailable:
    return VulkanUnavailable(_lines(
        f"vkep: the Vulkan loader (libvulkan) cannot be loaded ({detail}). Install it:", LOADER))


def _driver_search() -> str:
    """Where the loader was told to look for drivers, when an environment variable says so."""
    for name in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        if os.environ.get(name):
            return f" ({name}={os.environ[name]!r} limits the loader to those driver files)"
    return ""


def no_driver(detail: str) -> VulkanUnavailable:
    return VulkanUnavailable(_lines(
        f"vkep: no Vulkan driver: the Vulkan loader found no driver (ICD) it could use ({detail}){_driver_search()}. "
        "Install one:", DRIVER))


def no_usable_device(devices: list[tuple[str, list[str]]]) -> VulkanUnavailable:
    """`devices`: (name, what it lacks) of every Vulkan device, none of which vkep can use."""
    if not devices:
        return no_driver("no physical device")
    lacks = "; ".join(f"{name} lacks {', '.join(missing)}" for name, missing in devices)
    return VulkanUnavailable(_lines(
        f"vkep: no Vulkan device vkep can use: {lacks}. vkep needs Vulkan 1.2 with bufferDeviceAddress, "
        "timelineSemaphore, shaderInt64, a compute queue and 128 bytes of push constants. A newer driver may "
        "provide them:", NEWER_DRIVER))


def unusable_device(name: str, missing: list[str]) -> str:
    """One line for a device vkep leaves out (a log message; `vkep devices` shows the same)."""
    return f"{name} cannot run vkep: lacks {', '.join(missing)} (a newer driver may provide it)"


def no_validation_layer() -> VulkanUnavailable:
    return VulkanUnavailable(_lines(
        "vkep: VKEP_VALIDATION is set but the Vulkan validation layer (VK_LAYER_KHRONOS_validation) is not "
        "installed. Install it, or unset VKEP_VALIDATION:", VALIDATION_LAYER))
