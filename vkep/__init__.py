"""vkep: a Vulkan execution provider for ONNX Runtime, loaded as a plugin EP.

    import vkep, onnxruntime as ort
    devices = vkep.register()
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, {})
    session = ort.InferenceSession("model.onnx", sess_options=so)
"""

from __future__ import annotations

__version__ = "0.1.0"

EP_NAME = "VulkanExecutionProvider"
REGISTRATION_NAME = "vkep"


def get_library_path() -> str:
    """Path of the plugin shared library (built on first use if needed)."""
    from vkep import build

    build.ensure_built()
    return str(build.module_path("_vkep_plugin"))


def register(name: str = REGISTRATION_NAME) -> list:
    """Register the plugin with ORT (once per process) and return vkep's `OrtEpDevice`s."""
    import onnxruntime as ort

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
