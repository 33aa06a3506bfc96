"""OrtEpFactory: one per registration; offers one OrtEpDevice per usable Vulkan physical device."""

from __future__ import annotations

import os
import threading

from vkep import __version__
from vkep.gpu import device as gpu_device
from vkep.ort import api
from vkep.ort.api import callback, status_callback

HW_CPU, HW_GPU = 0, 1


class VulkanDevice:
    """A Vulkan physical device as ORT sees it: memory infos, and the logical device opened on first use."""

    def __init__(self, info: gpu_device.PhysicalDeviceInfo):
        self.info = info
        self.shares_host_memory = shares_host_memory(info)
        self.memory_infos = {}
        for mem_type, suffix in ((api.MEM_DEFAULT, ""), (api.MEM_HOST_ACCESSIBLE, "_HostAccessible")):
            out = api.ffi.new("OrtMemoryInfo**")
            name = api.cstring(f"Vulkan{info.index}{suffix}")
            api.check(api.lib.ort_CreateMemoryInfo_V2(name, self.memory_device_type(mem_type), info.vendor_id,
                                                      info.index, mem_type, 256, 0, out))
            self.memory_infos[mem_type] = out[0]

    def memory_device_type(self, mem_type: int) -> int:
        """The OrtDevice type of one of this device's memories.

        Where the device shares the host's memory, its HOST_ACCESSIBLE memory is declared as host (CPU)
        memory, the way ORT asks for memory that is not tied to one accelerator: ORT then runs vkep like
        a CPU-based EP. It inserts no Memcpy nodes at the boundaries with CPU-EP nodes, copies no graph
        input or output, and hands vkep host tensors as they are; vkep reads those in place (host-pointer
        import) and waits for its work before a host consumer runs (see kernel.py, ep.py)."""
        if mem_type == api.MEM_HOST_ACCESSIBLE and self.shares_host_memory:
            return api.DEVICE_CPU
        return api.DEVICE_GPU

    @property
    def default_mem_type(self) -> int:
        """Where this device's tensors live by default (see ep.py, GetDefaultMemoryDevice): HOST_ACCESSIBLE
        where the device shares the host's memory, else DEFAULT."""
        return api.MEM_HOST_ACCESSIBLE if self.shares_host_memory else api.MEM_DEFAULT

    @property
    def gpu(self) -> gpu_device.Device:
        return gpu_device.open_device(self.info.index)

    def metadata(self) -> dict[str, str]:
        i = self.info
        return {"vulkan.device_name": i.name, "vulkan.device_index": str(i.index), "vulkan.device_type": i.device_type,
                "vulkan.driver": f"{i.driver_name} {i.driver_info}".strip(), "vulkan.api_version": i.api_version,
                "vulkan.vendor_id": f"0x{i.vendor_id:04x}", "vulkan.device_id": f"0x{i.device_id:04x}",
                "vulkan.unified_memory": "1" if i.unified_memory else "0",
                "vulkan.fp16": "1" if i.features.get("fp16") else "0"}

    def owns(self, memory_device) -> int | None:
        """The ORT memory type if `memory_device` is this device's memory, else None."""
        lib = api.lib
        mem_type = lib.ep_MemoryDevice_GetMemoryType(memory_device)
        if (mem_type in self.memory_infos
                and lib.ep_MemoryDevice_GetDeviceType(memory_device) == self.memory_device_type(mem_type)
                and lib.ep_MemoryDevice_GetVendorId(memory_device) == self.info.vendor_id
                and lib.ep_MemoryDevice_GetDeviceId(memory_device) == self.info.index):
            return mem_type
        return None

    def release(self) -> None:
        for info in self.memory_infos.values():
            api.lib.ort_ReleaseMemoryInfo(info)
        self.memory_infos.clear()


def shares_host_memory(info: gpu_device.PhysicalDeviceInfo) -> bool:
    """True for a unified-memory device run as one (every device-local memory type is host-visible, and
    neither VKEP_FORCE_DISCRETE=1 nor VKEP_DEFAULT_MEMORY=default asks for the discrete-GPU path)."""
    forced = os.environ.get("VKEP_FORCE_DISCRETE", "0") not in ("", "0")
    chosen = os.environ.get("VKEP_DEFAULT_MEMORY", "host_accessible").lower()
    return info.unified_memory and not forced and chosen != "default"


class Factory:
    def __init__(self, registered_name: str):
        ffi, lib = api.ffi, api.lib
        self.registered_name = registered_name
        self.name = api.cstring(api.EP_NAME)
        self.vendor = api.cstring(api.EP_VENDOR)
        self.version = api.cstring(__version__)
        self.wrapper = api.new_struct("vkep_factory")
        self.wrapper.name, self.wrapper.vendor, self.wrapper.version = self.name, self.vendor, self.version
        self.struct = s = ffi.cast("OrtEpFactory*", self.wrapper)
        s.ort_version_supported = lib.vkep_api_version()
        s.GetName = ffi.cast("const char*(*)(const OrtEpFactory*)", lib.vkep_factory_name_fn)
        s.GetVendor = ffi.cast("const char*(*)(const OrtEpFactory*)", lib.vkep_factory_vendor_fn)
        s.GetSupportedDevices = lib.py_factory_get_supported_devices
        s.CreateEp = lib.py_factory_create_ep
        s.ReleaseEp = lib.py_factory_release_ep
        s.GetVendorId = lib.py_factory_get_vendor_id
        s.GetVersion = ffi.cast("const char*(*)(const OrtEpFactory*)", lib.vkep_factory_version_fn)
        s.CreateAllocator = lib.py_factory_create_allocator
        s.ReleaseAllocator = lib.py_factory_release_allocator
        s.CreateDataTransfer = lib.py_factory_create_data_transfer
        s.IsStreamAware = lib.py_factory_is_stream_aware
        s.CreateSyncStreamForDevice = lib.py_factory_create_stream
        s.CreateExternalResourceImporterForDevice = lib.py_factory_create_importer
        self.devices = [VulkanDevice(info) for info in gpu_device.physical_devices() if info.usable]
        self.hardware: dict[int, VulkanDevice] = {}  # OrtHardwareDevice address → device
        self.ep_devices: dict[int, VulkanDevice] = {}  # OrtEpDevice address → device
        self.eps: dict[int, object] = {}
        self.allocators: dict[int, object] = {}
        self.data_transfer = None
        self.lock = threading.Lock()

    def device_for_memory(self, memory_device) -> tuple[VulkanDevice, int] | None:
        for dev in self.devices:
            mem_type = dev.owns(memory_device)
            if mem_type is not None:
                return dev, mem_type
        return None

    def release(self) -> None:
        for dev in self.devices:
            dev.release()


FACTORIES: dict[int, Factory] = {}


def factory_of(ptr) -> Factory:
    return FACTORIES[api.address(ptr)]


def _match(dev: VulkanDevice, hw) -> bool:
    lib = api.lib
    kind = lib.ort_HardwareDevice_Type(hw)
    if dev.info.device_type == "cpu":
        return kind == HW_CPU
    return (kind == HW_GPU and lib.ort_HardwareDevice_VendorId(hw) == dev.info.vendor_id
            and lib.ort_HardwareDevice_DeviceId(hw) == dev.info.device_id)


def _kvp(pairs: dict[str, str]):
    out = api.ffi.new("OrtKeyValuePairs**")
    api.lib.ort_CreateKeyValuePairs(out)
    for k, v in pairs.items():
        api.lib.ort_AddKeyValuePair(out[0], k.encode(), v.encode())
    return out[0]


def define_entry_points() -> None:
    ffi = api.ffi

    @ffi.def_extern(name="vkep_py_create_factories")
    def create_factories(registered_name, base, logger, factories, max_factories, num_factories):
        try:
            num_factories[0] = 0
            if max_factories < 1:
                raise api.OrtError("no room for a factory", api.ORT_INVALID_ARGUMENT)
            factory = Factory(ffi.string(registered_name).decode())
            FACTORIES[api.address(factory.struct)] = factory
            factories[0] = factory.struct
            num_factories[0] = 1
            return ffi.NULL
        except BaseException as exc:  # noqa: BLE001
            return api.make_status(exc)

    @ffi.def_extern(name="vkep_py_release_factory")
    def release_factory(ptr):
        try:
            factory = FACTORIES.pop(api.address(ptr), None)
            if factory:
                factory.release()
            return ffi.NULL
        except BaseException as exc:  # noqa: BLE001
            return api.make_status(exc)


define_entry_points()


@callback("py_factory_get_vendor_id")
def _get_vendor_id(this):
    return 0


@status_callback("py_factory_get_supported_devices")
def _get_supported_devices(this, hw_devices, num_hw, ep_devices, max_ep_devices, num_ep_devices):
    factory = factory_of(this)
    lib, ffi = api.lib, api.ffi
    count = 0
    for dev in factory.devices:
        hw = next((hw_devices[i] for i in range(num_hw) if _match(dev, hw_devices[i])), None)
        if hw is None or count >= max_ep_devices:
            continue
        metadata = _kvp(dev.metadata())
        out = ffi.new("OrtEpDevice**")
        try:
            api.check(lib.ep_CreateEpDevice(this, hw, metadata, ffi.NULL, out))
        finally:
            lib.ort_ReleaseKeyValuePairs(metadata)
        for info in dev.memory_infos.values():
            api.check(lib.ep_EpDevice_AddAllocatorInfo(out[0], info))
        factory.hardware[api.address(hw)] = dev
        factory.ep_devices[api.address(out[0])] = dev
        ep_devices[count] = out[0]
        count += 1
    num_ep_devices[0] = count


@status_callback("py_factory_create_ep")
def _create_ep(this, hw_devices, metadata, num_devices, session_options, logger, out):
    from vkep.ort.ep import Ep

    factory = factory_of(this)
    devices = [factory.hardware[api.address(hw_devices[i])] for i in range(num_devices)
               if api.address(hw_devices[i]) in factory.hardware]
    if not devices:
        raise api.OrtError("none of the devices ORT chose is a vkep device", api.ORT_INVALID_ARGUMENT)
    ep = Ep(factory, devices[0], session_options)
    factory.eps[api.address(ep.struct)] = ep
    out[0] = ep.struct


@callback("py_factory_release_ep")
def _release_ep(this, ep_ptr):
    ep = factory_of(this).eps.pop(api.address(ep_ptr), None)
    if ep is not None:
        ep.release()


@status_callback("py_factory_create_allocator")
def _create_allocator(this, memory_info, options, out):
    from vkep.ort.memory import Allocator

    factory = factory_of(this)
    found = factory.device_for_memory(api.lib.ep_MemoryInfo_GetMemoryDevice(memory_info))
    if found is None:
        raise api.OrtError("memory info is not vkep memory", api.ORT_INVALID_ARGUMENT)
    dev, mem_type = found
    allocator = Allocator(dev, mem_type)
    factory.allocators[api.address(allocator.struct)] = allocator
    out[0] = api.ffi.cast("OrtAllocator*", allocator.struct)


@callback("py_factory_release_allocator")
def _release_allocator(this, allocator):
    found = factory_of(this).allocators.pop(api.address(allocator), None)
    if found is not None:
        found.release()


@status_callback("py_factory_create_data_transfer")
def _create_data_transfer(this, out):
    from vkep.ort.memory import DataTransfer

    factory = factory_of(this)
    if factory.data_transfer is None:
        factory.data_transfer = DataTransfer(factory)
    out[0] = factory.data_transfer.struct


@callback("py_factory_is_stream_aware")
def _is_stream_aware(this):
    return True


@status_callback("py_factory_create_stream")
def _create_stream(this, memory_device, options, out):
    from vkep.ort.memory import SyncStream

    factory = factory_of(this)
    found = factory.device_for_memory(memory_device)
    if found is None:
        raise api.OrtError("not a vkep memory device", api.ORT_INVALID_ARGUMENT)
    stream = SyncStream(found[0])
    out[0] = api.ffi.cast("OrtSyncStreamImpl*", stream.struct)


@status_callback("py_factory_create_importer")
def _create_importer(this, ep_device, out):
    from vkep.ort.interop import create_importer

    device = factory_of(this).ep_devices.get(api.address(ep_device))
    if device is None:
        raise api.OrtError("not a vkep device", api.ORT_INVALID_ARGUMENT)
    out[0] = create_importer(device, ep_device)
