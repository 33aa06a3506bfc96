"""vkep: a Vulkan execution provider for ONNX Runtime, loaded as a plugin EP.

    import vkep, onnxruntime as ort
    devices = vkep.register()
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, {})
    session = ort.InferenceSession("model.onnx", sess_options=so)
"""

from __future__ import annotations

from vkep.gpu.diagnose import VulkanUnavailable

__version__ = "0.1.0"

EP_NAME = "VulkanExecutionProvider"
REGISTRATION_NAME = "vkep"
__all__ = ["EP_NAME", "REGISTRATION_NAME", "VulkanUnavailable", "devices", "get_library_path", "register",
           "reset_stats", "stats", "unregister"]


def get_library_path() -> str:
    """Path of the plugin shared library ORT loads (only looked up: nothing is built)."""
    from vkep import _native

    return str(_native.loader_path())


def get_ep_name() -> str:
    """The EP name vkep registers (as ORT's plugin EP packages offer it)."""
    return EP_NAME


def get_ep_names() -> list[str]:
    """Every EP name the plugin library provides: one."""
    return [EP_NAME]


def register(name: str = REGISTRATION_NAME) -> list:
    """Register the plugin with ORT (once per process) and return vkep's `OrtEpDevice`s.

    Raises `VulkanUnavailable`, saying what is missing and how to install it, where vkep cannot run: no
    Vulkan loader, no driver, or no device with what vkep needs (ORT's own registration of the library
    fails with the same message)."""
    import onnxruntime as ort

    from vkep.gpu.device import usable_devices

    usable_devices()  # the same check the plugin makes, raised here as a Python exception of its own type
    if not any(d.ep_name == EP_NAME for d in ort.get_ep_devices()):
        ort.register_execution_provider_library(name, get_library_path())
    return devices()


def unregister(name: str = REGISTRATION_NAME) -> None:
    import onnxruntime as ort

    ort.unregister_execution_provider_library(name)


def devices() -> list:
    """vkep's `OrtEpDevice`s among ORT's registered devices."""
    import onnxruntime as ort

    return [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]


def stats() -> dict:
    """Counters per opened device: transfers, memory, commands recorded, allocator reuse."""
    import sys

    from vkep.gpu import device

    out = {}
    allocators = getattr(sys.modules.get("vkep.ort.memory"), "ALLOCATORS", {})
    for index, dev in list(device._devices.items()):
        with dev.streams_lock:
            commands = dev.retired_commands + sum(s.commands for s in dev.streams)
            rolled = sum(s.rec.rolls for s in dev.streams)  # full batches the native replay submitted
            # dispatches recorded for grids past the device's workgroup-count limit (recorder.c)
            pieces = dev.retired_pieces + sum(s.rec.pieces for s in dev.streams)
            submits = rolled + sum(s.submits for s in dev.streams)
        entry = {"device": dev.info.name, **dev.transfer_counts(), **dev.memory.stats(),
                 "commands_recorded": commands, "dispatch_pieces": pieces, "submits": submits, "submits_native": rolled,
                 "prepacked_bytes": dev.weights.packed_bytes,
                 "pipelines_built": dev.pipelines.built, "pipelines_warmed": dev.pipelines.warmed,
                 "pipelines_warming": dev.pipelines.warming}
        entry["allocators"] = {("host_accessible" if a.mem_type else "default"): a.stats()
                               for a in list(allocators.values()) if a.device.info.index == index}
        out[index] = entry
    plugin = sys.modules.get("vkep.ort.api")
    if plugin is not None and plugin.lib is not None:
        kernel = sys.modules.get("vkep.ort.kernel")
        out["process"] = {"nodes_replayed_natively": plugin.lib.vkep_fast_path_hits(),
                          "nodes_python_path": kernel.PYTHON_COMPUTES[0] if kernel else 0,
                          "nodes_with_scratch": kernel.SCRATCH_COMPUTES[0] if kernel else 0,
                          "replayed_waits_in_python": kernel.PYTHON_FINISHES[0] if kernel else 0}
    return out


def reset_stats() -> None:
    import sys

    from vkep.gpu import device

    for dev in list(device._devices.values()):
        dev.reset_transfer_counts()
        dev.retired_commands = dev.retired_pieces = 0
        with dev.streams_lock:
            for stream in dev.streams:
                stream.rec.total_commands = stream.rec.rolls = stream.rec.pieces = stream.submits = 0
        for pool in (dev.memory.device_pool, dev.memory.host_pool):
            pool.peak = pool.live
    plugin, kernel = sys.modules.get("vkep.ort.api"), sys.modules.get("vkep.ort.kernel")
    if plugin is not None and plugin.lib is not None:
        plugin.lib.vkep_reset_fast_path_hits()
    if kernel is not None:
        kernel.PYTHON_COMPUTES[0] = kernel.SCRATCH_COMPUTES[0] = kernel.PYTHON_FINISHES[0] = 0
