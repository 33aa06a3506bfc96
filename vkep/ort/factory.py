"""OrtEpFactory: one per registration; offers one OrtEpDevice per usable Vulkan physical device.

Each OrtEpDevice says truthfully what its device is (docs/design.md, "Automatic device selection"): a GPU
is attached to the OrtHardwareDevice ORT discovered for it (matched by PCI vendor and device id), or to
one vkep creates where discovery missed it; a CPU-implemented device (lavapipe, SwiftShader) gets its own
OrtHardwareDevice of type CPU with the driver's vendor, never ORT's CPU device.
"""

from __future__ import annotations

import threading

from vkep import __version__, options
from vkep.gpu import device as gpu_device
from vkep.gpu import diagnose
from vkep.ort import api, log
from vkep.ort.api import callback, status_callback

HW_CPU, HW_GPU = 0, 1  # OrtHardwareDeviceType


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
        """The OrtEpDevice's ep_metadata (`os_driver_version` is ORT's own key)."""
        i = self.info
        return {"vulkan.device_name": i.name, "vulkan.device_index": str(i.index), "vulkan.device_type": i.device_type,
                "vulkan.device_uuid": i.uuid, "vulkan.vendor": i.vendor,
                "vulkan.driver": f"{i.driver_name} {i.driver_info}".strip(), "os_driver_version": i.driver_version_text,
                "vulkan.api_version": i.api_version,
                "vulkan.vendor_id": f"0x{i.vendor_id:04x}", "vulkan.device_id": f"0x{i.device_id:04x}",
                "vulkan.unified_memory": "1" if i.unified_memory else "0",
                "vulkan.fp16": "1" if i.features.get("fp16") else "0"}

    def hardware_metadata(self) -> dict[str, str]:
        """Metadata of an OrtHardwareDevice vkep creates; ORT's policies read `Discrete` (GPUs only)."""
        meta = {"Description": self.info.name}
        if not self.info.cpu_implemented:
            meta["Discrete"] = "1" if self.info.device_type == "discrete" else "0"
        return meta

    def describe(self) -> str:
        i = self.info
        return f"#{i.index} '{i.name}' ({i.device_type} device, {i.driver_info or i.driver_name})"

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
    return (info.unified_memory and not options.env("VKEP_FORCE_DISCRETE")
            and options.env("VKEP_DEFAULT_MEMORY") != "default")


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
        # VulkanUnavailable (no loader, driver or usable device) fails the registration with its message
        self.devices = [VulkanDevice(info) for info in gpu_device.usable_devices()]
        for info in gpu_device.physical_devices():
            if not info.usable:
                log.default.warning(diagnose.unusable_device(info.name, info.missing))
        self.hardware: dict[int, VulkanDevice] = {}  # OrtHardwareDevice address → device
        self.own_hardware: dict[int, object] = {}  # device index → OrtHardwareDevice* vkep created
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

    def hardware_for(self, dev: VulkanDevice, hw_devices, num_hw: int):
        """The OrtHardwareDevice that is `dev`: ORT's, for a GPU it discovered; else one vkep creates."""
        lib, ffi = api.lib, api.ffi
        info = dev.info
        if not info.cpu_implemented:
            for i in range(num_hw):
                hw = hw_devices[i]
                taken = self.hardware.get(api.address(hw))  # two identical GPUs: one hardware device each
                if (lib.ort_HardwareDevice_Type(hw) == HW_GPU and lib.ort_HardwareDevice_VendorId(hw) == info.vendor_id
                        and lib.ort_HardwareDevice_DeviceId(hw) == info.device_id and taken in (None, dev)):
                    return hw
        if info.index not in self.own_hardware:
            metadata = _kvp(dev.hardware_metadata())
            out = ffi.new("OrtHardwareDevice**")
            try:
                api.check(lib.ep_CreateHardwareDevice(HW_CPU if info.cpu_implemented else HW_GPU, info.vendor_id,
                                                      info.device_id, info.vendor.encode(), metadata, out))
            finally:
                lib.ort_ReleaseKeyValuePairs(metadata)
            self.own_hardware[info.index] = out[0]
        return self.own_hardware[info.index]

    def release(self) -> None:
        for dev in self.devices:
            dev.release()
        for hw in self.own_hardware.values():
            api.lib.ep_ReleaseHardwareDevice(hw)
        self.own_hardware.clear()


FACTORIES: dict[int, Factory] = {}


def factory_of(ptr) -> Factory:
    return FACTORIES[api.address(ptr)]


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
            log.set_default(logger)
            problem = api.unsupported_ort(ffi.string(api.lib.vkep_ort_version()).decode(), api.lib.vkep_api_version())
            if problem:
                raise api.OrtError(problem, api.ORT_FAIL)
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
        if count >= max_ep_devices:
            break
        hw = factory.hardware_for(dev, hw_devices, num_hw)
        metadata, ep_options = _kvp(dev.metadata()), _kvp(options.ep_option_defaults())
        out = ffi.new("OrtEpDevice**")
        try:
            api.check(lib.ep_CreateEpDevice(this, hw, metadata, ep_options, out))
        finally:
            lib.ort_ReleaseKeyValuePairs(metadata)
            lib.ort_ReleaseKeyValuePairs(ep_options)
        for info in dev.memory_infos.values():
            api.check(lib.ep_EpDevice_AddAllocatorInfo(out[0], info))
        factory.hardware[api.address(hw)] = dev
        factory.ep_devices[api.address(out[0])] = dev
        ep_devices[count] = out[0]
        count += 1
        log.default.info(f"offers {dev.describe()}"
                         + (": CPU-implemented, used only when a session asks (EP options device, allow_cpu_device)"
                            if dev.info.cpu_implemented else ""))
    num_ep_devices[0] = count


@status_callback("py_factory_create_ep")
def _create_ep(this, hw_devices, metadata, num_devices, session_options, logger, out):
    from vkep.ort.ep import Ep

    factory = factory_of(this)
    devices = [factory.hardware[api.address(hw_devices[i])] for i in range(num_devices)
               if api.address(hw_devices[i]) in factory.hardware]
    if not devices:
        raise api.OrtError("none of the devices ORT chose is a vkep device", api.ORT_INVALID_ARGUMENT)
    ep = Ep(factory, devices, session_options, log.Logger(logger))
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
    from vkep.ort.importer import create_importer

    device = factory_of(this).ep_devices.get(api.address(ep_device))
    if device is None:
        raise api.OrtError("not a vkep device", api.ORT_INVALID_ARGUMENT)
    out[0] = create_importer(device, ep_device)
