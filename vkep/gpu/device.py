"""Vulkan instance, physical-device discovery (with the reasons a device is unusable) and logical devices."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field

from vkep import options
from vkep.gpu import diagnose
from vkep.gpu.vk import VulkanError, check, cstr, driver_version_string, ffi, lib, new, version_string

VALIDATION_LAYER = b"VK_LAYER_KHRONOS_validation"
HOST_IMPORT_EXTENSION = "VK_EXT_external_memory_host"
DEVICE_TYPES = {
    lib.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other",
    lib.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated",
    lib.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete",
    lib.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual",
    lib.VK_PHYSICAL_DEVICE_TYPE_CPU: "cpu",
}
# PCI vendor ids, and Khronos-assigned ids (VkVendorId) for vendors without one
VENDORS = {0x1002: "AMD", 0x10DE: "NVIDIA", 0x8086: "Intel", 0x106B: "Apple", 0x13B5: "ARM",
           0x5143: "Qualcomm", 0x1010: "ImgTec", 0x1AE0: "Google", 0x10001: "Vivante", 0x10002: "VeriSilicon",
           0x10003: "Kazan", 0x10004: "Codeplay", 0x10005: "Mesa", 0x10006: "PoCL"}
# VkDriverId (VkPhysicalDeviceDriverProperties.driverID): which driver, whoever makes the hardware
DRIVER_IDS = {1: "AMD_PROPRIETARY", 2: "AMD_OPEN_SOURCE", 3: "MESA_RADV", 4: "NVIDIA_PROPRIETARY",
              5: "INTEL_PROPRIETARY_WINDOWS", 6: "INTEL_OPEN_SOURCE_MESA", 7: "IMAGINATION_PROPRIETARY",
              8: "QUALCOMM_PROPRIETARY", 9: "ARM_PROPRIETARY", 10: "GOOGLE_SWIFTSHADER", 11: "GGP_PROPRIETARY",
              12: "BROADCOM_PROPRIETARY", 13: "MESA_LLVMPIPE", 14: "MOLTENVK", 15: "COREAVI_PROPRIETARY",
              16: "JUICE_PROPRIETARY", 17: "VERISILICON_PROPRIETARY", 18: "MESA_TURNIP", 19: "MESA_V3DV",
              20: "MESA_PANVK", 21: "SAMSUNG_PROPRIETARY", 22: "MESA_VENUS", 23: "MESA_DOZEN", 24: "MESA_NVK",
              25: "IMAGINATION_OPEN_SOURCE_MESA", 26: "MESA_HONEYKRISP"}
# the optional features each feature switch (vkep.options: EP options fp16, int8, subgroups) turns off
SWITCHED_FEATURES = {"fp16": ("fp16", "storageBuffer16BitAccess", "shaderFloat16"),
                     "int8": ("storageBuffer8BitAccess", "shaderInt8"),
                     "subgroups": ("subgroupBallotCompute",),
                     "coopmat": ("cooperativeMatrix",),
                     "host_import": ("hostMemoryImport",)}
COOPMAT_EXTENSION = "VK_KHR_cooperative_matrix"
SUBGROUP_SIZE_EXTENSION = "VK_EXT_subgroup_size_control"
# VkComponentTypeKHR and VkScopeKHR values of the cooperative matrix sizes a device lists (PhysicalDeviceInfo.coopmat)
COMPONENT_TYPES = {0: "float16", 1: "float32", 2: "float64", 3: "int8", 4: "int16", 5: "int32", 6: "int64",
                   7: "uint8", 8: "uint16", 9: "uint32"}
SCOPE_SUBGROUP = 3


def validation_wanted() -> bool:
    return bool(options.env("VKEP_VALIDATION"))


@dataclass
class PhysicalDeviceInfo:
    """What vkep needs to know about one Vulkan physical device, read once."""

    index: int
    handle: object
    name: str
    vendor_id: int
    device_id: int
    device_type: str
    api_version: str
    driver_name: str
    driver_info: str
    driver_version: int
    driver_id: int  # VkDriverId
    uuid: str  # VkPhysicalDeviceIDProperties.deviceUUID, 32 hex digits
    pipeline_cache_uuid: bytes
    subgroup_size: int
    max_push_constants: int
    max_shared_memory: int
    max_workgroup_invocations: int
    max_workgroup_count: tuple[int, int, int]
    max_workgroup_size: tuple[int, int, int]
    unified_memory: bool
    memory_types: list[tuple[int, int]]  # (property flags, heap index)
    heap_sizes: list[int]
    features: dict[str, bool]
    compute_queue_family: int | None
    missing: list[str] = field(default_factory=list)
    # the cooperative matrix products the device runs at subgroup scope: (M, N, K, A, B, C, result) with the
    # types' names (COMPONENT_TYPES); empty without VK_KHR_cooperative_matrix
    coopmat: tuple[tuple, ...] = ()
    off: frozenset[str] = frozenset()  # the feature switches turned off in this view (restricted)
    forced: frozenset[str] = frozenset()  # ... and those set to 1 (a kernel then uses the feature where it can)
    # the session's EP option fp16_accumulation: the type float16 GEMM-like kernels sum in (vkep.options)
    fp16_accumulation: str = "float32"

    @property
    def usable(self) -> bool:
        return not self.missing

    @property
    def vendor(self) -> str:
        return VENDORS.get(self.vendor_id, f"0x{self.vendor_id:04x}")

    @property
    def cpu_implemented(self) -> bool:
        """A Vulkan device that runs on the host's CPU (lavapipe, SwiftShader): VK_PHYSICAL_DEVICE_TYPE_CPU."""
        return self.device_type == "cpu"

    @property
    def driver_version_text(self) -> str:
        return driver_version_string(self.vendor_id, self.driver_version)

    @property
    def driver_id_name(self) -> str:
        return DRIVER_IDS.get(self.driver_id, f"DRIVER_ID_{self.driver_id}")

    def has(self, switch: str) -> bool:
        """Whether the device has every feature a feature switch (SWITCHED_FEATURES) turns off."""
        return all(self.features.get(f, False) for f in SWITCHED_FEATURES[switch])

    def restricted(self, off: set[str], forced: frozenset[str] = frozenset(),
                   fp16_accumulation: str = "float32") -> PhysicalDeviceInfo:
        """This device as kernels see it with the feature switches in `off` (SWITCHED_FEATURES) turned off:
        those features read as absent, and with subgroups off the subgroup size reads 1 (kernels choose their
        subgroup variants from `subgroup_size` and `subgroupBallotCompute`). The logical device is the same.
        `forced`: the switches set to 1, which a kernel may read as "wherever it can, measured faster or not".
        `fp16_accumulation`: the session's EP option of that name, which GEMM-like kernels read."""
        if not off and not forced and fp16_accumulation == self.fp16_accumulation:
            return self
        features = dict(self.features)
        for switch in off:
            features.update(dict.fromkeys(SWITCHED_FEATURES[switch], False))
        return dataclasses.replace(self, features=features, off=self.off | frozenset(off),
                                   forced=self.forced | frozenset(forced), fp16_accumulation=fp16_accumulation,
                                   subgroup_size=1 if "subgroups" in off else self.subgroup_size)

    def summary(self) -> dict:
        return {
            "index": self.index, "name": self.name, "vendor": self.vendor, "vendor_id": self.vendor_id,
            "device_id": self.device_id, "type": self.device_type, "api_version": self.api_version,
            "driver": self.driver_name, "driver_info": self.driver_info,
            "driver_version": self.driver_version_text, "driver_id": self.driver_id,
            "driver_id_name": self.driver_id_name, "uuid": self.uuid, "unified_memory": self.unified_memory,
            "subgroup_size": self.subgroup_size, "fp16": self.features.get("fp16", False),
            "usable": self.usable, "missing": self.missing,
        }


class Instance:
    """The process-wide VkInstance (with the validation layer when VKEP_VALIDATION is set)."""

    _lock = threading.Lock()
    _instance: Instance | None = None

    @classmethod
    def get(cls) -> Instance:
        with cls._lock:
            if cls._instance is None:
                cls._instance = Instance(validation_wanted())
            return cls._instance

    def __init__(self, validation: bool):
        layers, extensions = [], []
        self.validation = validation and self._has_layer(VALIDATION_LAYER)
        if validation and not self.validation:
            raise diagnose.no_validation_layer()
        if self.validation:
            layers.append(VALIDATION_LAYER)
            extensions.append(b"VK_EXT_debug_utils")
        self._keep = [ffi.new("char[]", s) for s in layers + extensions]
        layer_ptrs = ffi.new("const char*[]", self._keep[: len(layers)]) if layers else ffi.NULL
        ext_ptrs = ffi.new("const char*[]", self._keep[len(layers):]) if extensions else ffi.NULL
        self._app_name = ffi.new("char[]", b"vkep")
        app = new("VkApplicationInfo", sType=lib.VK_STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName=self._app_name,
                  pEngineName=self._app_name, apiVersion=lib.VK_API_VERSION_1_3)
        info = new("VkInstanceCreateInfo", sType=lib.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app,
                   enabledLayerCount=len(layers), ppEnabledLayerNames=layer_ptrs,
                   enabledExtensionCount=len(extensions), ppEnabledExtensionNames=ext_ptrs)
        out = ffi.new("VkInstance*")
        try:
            check(lib.vkCreateInstance(info, ffi.NULL, out), "vkCreateInstance")
        except VulkanError as exc:  # the loader found no driver that can make a Vulkan 1.3 instance
            if exc.result in (lib.VK_ERROR_INCOMPATIBLE_DRIVER, lib.VK_ERROR_INITIALIZATION_FAILED):
                raise diagnose.no_driver(str(exc)) from exc
            raise
        self.handle = out[0]
        self.messenger = None
        if self.validation:
            messenger = ffi.new("VkDebugUtilsMessengerEXT*")
            check(lib.vkep_install_messenger(self.handle, messenger), "vkCreateDebugUtilsMessengerEXT")
            self.messenger = messenger[0]
        self._physical: list[PhysicalDeviceInfo] | None = None

    @staticmethod
    def _has_layer(name: bytes) -> bool:
        count = ffi.new("uint32_t*")
        lib.vkEnumerateInstanceLayerProperties(count, ffi.NULL)
        props = ffi.new("VkLayerProperties[]", count[0])
        lib.vkEnumerateInstanceLayerProperties(count, props)
        return any(ffi.string(props[i].layerName) == name for i in range(count[0]))

    def physical_devices(self) -> list[PhysicalDeviceInfo]:
        if self._physical is None:
            count = ffi.new("uint32_t*")
            check(lib.vkEnumeratePhysicalDevices(self.handle, count, ffi.NULL), "vkEnumeratePhysicalDevices")
            handles = ffi.new("VkPhysicalDevice[]", count[0])
            check(lib.vkEnumeratePhysicalDevices(self.handle, count, handles), "vkEnumeratePhysicalDevices")
            self._physical = [_describe(i, handles[i], self.handle) for i in range(count[0])]
        return self._physical


def device_extensions(handle) -> set[str]:
    """The names of the extensions a physical device offers."""
    count = ffi.new("uint32_t*")
    lib.vkEnumerateDeviceExtensionProperties(handle, ffi.NULL, count, ffi.NULL)
    props = ffi.new("VkExtensionProperties[]", count[0])
    lib.vkEnumerateDeviceExtensionProperties(handle, ffi.NULL, count, props)
    return {cstr(props[i].extensionName) for i in range(count[0])}


def workgroup_count_limit(device: tuple[int, int, int]) -> tuple[int, int, int]:
    """The workgroups one dispatch may have in each dimension: the device's maxComputeWorkGroupCount, or
    VKEP_MAX_WORKGROUP_COUNT where that is lower (wider grids are split: gpu/native/recorder.c)."""
    cap = options.env("VKEP_MAX_WORKGROUP_COUNT")
    return device if cap is None else tuple(min(n, cap) for n in device)


def _coopmat(instance, handle, extensions: set[str]) -> tuple[bool, tuple[tuple, ...]]:
    """Whether the device offers VK_KHR_cooperative_matrix's feature, and the products it lists at subgroup scope."""
    if COOPMAT_EXTENSION not in extensions:
        return False, ()
    feature = new("vkep_coopmat_features", sType=lib.VKEP_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR)
    feats = new("VkPhysicalDeviceFeatures2", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=feature)
    lib.vkGetPhysicalDeviceFeatures2(handle, feats)
    listed = ffi.new("vkep_coopmat_properties[]", 64)
    count = lib.vkep_coopmat_list(instance, handle, listed, 64)
    names = [COMPONENT_TYPES.get(t, str(t)) for p in listed[0:count] for t in (p.AType, p.BType, p.CType, p.ResultType)]
    products = tuple((p.MSize, p.NSize, p.KSize, *names[4 * i: 4 * i + 4]) for i, p in enumerate(listed[0:count])
                     if p.scope == SCOPE_SUBGROUP and not p.saturatingAccumulation)
    return bool(feature.cooperativeMatrix), products


def _describe(index: int, handle, instance) -> PhysicalDeviceInfo:
    floats = new("VkPhysicalDeviceFloatControlsProperties",
                 sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES)
    ids = new("VkPhysicalDeviceIDProperties", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, pNext=floats)
    driver = new("VkPhysicalDeviceDriverProperties", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
                 pNext=ids)
    subgroup = new("VkPhysicalDeviceSubgroupProperties", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                   pNext=driver)
    props2 = new("VkPhysicalDeviceProperties2", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=subgroup)
    lib.vkGetPhysicalDeviceProperties2(handle, props2)
    p = props2.properties
    extensions = device_extensions(handle)
    # subgroup size control (Vulkan 1.3, or its extension): a pipeline can require the subgroup size vkep planned for
    size_control = p.apiVersion >= lib.VK_API_VERSION_1_3 or SUBGROUP_SIZE_EXTENSION in extensions
    sizes = new("VkPhysicalDeviceSubgroupSizeControlProperties",
                sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES)
    size_features = new("VkPhysicalDeviceSubgroupSizeControlFeatures",
                        sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES)
    if size_control:
        props2.pNext = sizes
        lib.vkGetPhysicalDeviceProperties2(handle, props2)
    f12 = new("VkPhysicalDeviceVulkan12Features", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)
    f11 = new("VkPhysicalDeviceVulkan11Features", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
              pNext=f12)
    feats = new("VkPhysicalDeviceFeatures2", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=f11)
    api_ok = p.apiVersion >= lib.VK_API_VERSION_1_2
    if api_ok:
        f12.pNext = size_features if size_control else ffi.NULL
        lib.vkGetPhysicalDeviceFeatures2(handle, feats)
    features = {
        "bufferDeviceAddress": bool(f12.bufferDeviceAddress),
        "timelineSemaphore": bool(f12.timelineSemaphore),
        "shaderInt64": bool(feats.features.shaderInt64),
        "storageBuffer16BitAccess": bool(f11.storageBuffer16BitAccess),
        "shaderFloat16": bool(f12.shaderFloat16),
        "storageBuffer8BitAccess": bool(f12.storageBuffer8BitAccess),
        "shaderInt8": bool(f12.shaderInt8),
        "shaderInt16": bool(feats.features.shaderInt16),
        # float64 arithmetic in shaders (tree_ensemble.comp's FLOAT64 variant: double trees)
        "shaderFloat64": bool(feats.features.shaderFloat64),
    }
    features["fp16"] = features["storageBuffer16BitAccess"]
    # shaders that keep NaN, infinities and signed zeros whatever the compiler sees (fused.comp declares it)
    features["signedZeroInfNanPreserveFloat32"] = bool(floats.shaderSignedZeroInfNanPreserveFloat32)
    # subgroupBroadcast in compute shaders (winograd.comp shares loads across a subgroup's lanes)
    features["subgroupBallotCompute"] = bool(subgroup.supportedOperations & 0x8 and subgroup.supportedStages & 0x20)
    # matrix units (matmul_coop.comp: float16 MatMul and Gemm)
    # (glslang declares the Vulkan memory model in shaders that use cooperative matrices: the device must enable it)
    features["vulkanMemoryModel"] = bool(f12.vulkanMemoryModel)
    # with the memory model enabled, Device scope (atomics and barriers on buffers across workgroups: max_unpool.comp)
    # needs this one enabled too
    features["vulkanMemoryModelDeviceScope"] = bool(f12.vulkanMemoryModelDeviceScope)
    # compute pipelines that use subgroup operations run at `subgroup_size` (pipeline.py: the grids and lane counts
    # kernels plan with), with full subgroups where the workgroup's width allows
    features["subgroupSizeControl"] = bool(size_control and size_features.subgroupSizeControl
                                           and sizes.requiredSubgroupSizeStages & 0x20
                                           and sizes.minSubgroupSize <= subgroup.subgroupSize <= sizes.maxSubgroupSize)
    features["computeFullSubgroups"] = bool(features["subgroupSizeControl"] and size_features.computeFullSubgroups)
    features["cooperativeMatrix"], coopmat = _coopmat(instance, handle, extensions) if api_ok else (False, ())
    # host memory ORT hands over, read and written in place (external.HostMemoryImport)
    features["hostMemoryImport"] = HOST_IMPORT_EXTENSION in extensions
    # (enabling the memory model for them makes Device scope need its own feature, which other shaders use)
    features["cooperativeMatrix"] &= features["vulkanMemoryModel"] and features["vulkanMemoryModelDeviceScope"]
    mem = ffi.new("VkPhysicalDeviceMemoryProperties*")
    lib.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    types = [(mem.memoryTypes[i].propertyFlags, mem.memoryTypes[i].heapIndex) for i in range(mem.memoryTypeCount)]
    heaps = [mem.memoryHeaps[i].size for i in range(mem.memoryHeapCount)]
    local = lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
    visible = lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
    unified = all(flags & visible for flags, _ in types if flags & local)
    qcount = ffi.new("uint32_t*")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(handle, qcount, ffi.NULL)
    qprops = ffi.new("VkQueueFamilyProperties[]", qcount[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(handle, qcount, qprops)
    compute = [i for i in range(qcount[0]) if qprops[i].queueFlags & lib.VK_QUEUE_COMPUTE_BIT]
    # prefer a compute queue without graphics (async compute), else any compute queue
    dedicated = [i for i in compute if not qprops[i].queueFlags & lib.VK_QUEUE_GRAPHICS_BIT]
    family = (dedicated or compute or [None])[0]
    info = PhysicalDeviceInfo(
        index=index, handle=handle, name=cstr(p.deviceName), vendor_id=p.vendorID, device_id=p.deviceID,
        device_type=DEVICE_TYPES.get(p.deviceType, "other"), api_version=version_string(p.apiVersion),
        driver_name=cstr(driver.driverName), driver_info=cstr(driver.driverInfo), driver_version=p.driverVersion,
        driver_id=driver.driverID, uuid=bytes(ffi.buffer(ids.deviceUUID, 16)).hex(),
        pipeline_cache_uuid=bytes(ffi.buffer(p.pipelineCacheUUID, 16)), subgroup_size=subgroup.subgroupSize,
        max_push_constants=p.limits.maxPushConstantsSize, max_shared_memory=p.limits.maxComputeSharedMemorySize,
        max_workgroup_invocations=p.limits.maxComputeWorkGroupInvocations,
        max_workgroup_count=workgroup_count_limit(tuple(p.limits.maxComputeWorkGroupCount)),
        max_workgroup_size=tuple(p.limits.maxComputeWorkGroupSize), unified_memory=unified,
        memory_types=types, heap_sizes=heaps, features=features, compute_queue_family=family, coopmat=coopmat,
    )
    if not api_ok:
        info.missing.append(f"Vulkan 1.2 (device has {info.api_version})")
    for need in ("bufferDeviceAddress", "timelineSemaphore", "shaderInt64"):
        if api_ok and not features[need]:
            info.missing.append(need)
    if family is None:
        info.missing.append("a compute queue")
    if info.max_push_constants < 128:
        info.missing.append("128 bytes of push constants")
    return info


def physical_devices() -> list[PhysicalDeviceInfo]:
    """Every Vulkan physical device, usable by vkep or not (raises VulkanUnavailable without loader or driver)."""
    return Instance.get().physical_devices()


def usable_devices() -> list[PhysicalDeviceInfo]:
    """The devices vkep can run on; VulkanUnavailable, saying what is missing, when there is none."""
    infos = physical_devices()
    usable = [d for d in infos if d.usable]
    if not usable:
        raise diagnose.no_usable_device([(d.name, d.missing) for d in infos])
    return usable


class Device:
    """A logical device on one physical device: one compute queue, the memory pools, pipelines, streams."""

    def __init__(self, info: PhysicalDeviceInfo):
        if not info.usable:
            raise RuntimeError("vkep: " + diagnose.unusable_device(info.name, info.missing))
        self.info = info
        self.instance = Instance.get()
        f = info.features
        f12 = new("VkPhysicalDeviceVulkan12Features", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                  bufferDeviceAddress=1, timelineSemaphore=1, storageBuffer8BitAccess=f["storageBuffer8BitAccess"],
                  shaderInt8=f["shaderInt8"], shaderFloat16=f["shaderFloat16"],
                  vulkanMemoryModel=f.get("cooperativeMatrix", False),
                  vulkanMemoryModelDeviceScope=f.get("cooperativeMatrix", False))
        f11 = new("VkPhysicalDeviceVulkan11Features", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                  pNext=f12, storageBuffer16BitAccess=f["storageBuffer16BitAccess"])
        feats = new("VkPhysicalDeviceFeatures2", sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=f11)
        if f.get("cooperativeMatrix"):
            self._coopmat = new("vkep_coopmat_features", cooperativeMatrix=1,
                                sType=lib.VKEP_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR)
            f12.pNext = self._coopmat
        if f.get("subgroupSizeControl"):
            self._size_control = new("VkPhysicalDeviceSubgroupSizeControlFeatures", subgroupSizeControl=1,
                                     computeFullSubgroups=f["computeFullSubgroups"], pNext=f12.pNext,
                                     sType=lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES)
            f12.pNext = self._size_control
        feats.features.shaderInt64 = 1
        feats.features.shaderInt16 = f["shaderInt16"]
        feats.features.shaderFloat64 = f.get("shaderFloat64", False)
        priority = ffi.new("float*", 1.0)
        queue_info = new("VkDeviceQueueCreateInfo", sType=lib.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                         queueFamilyIndex=info.compute_queue_family, queueCount=1, pQueuePriorities=priority)
        self._ext_names = [ffi.new("char[]", e.encode()) for e in self._wanted_extensions(info)]
        ext_ptrs = ffi.new("const char*[]", self._ext_names) if self._ext_names else ffi.NULL
        create = new("VkDeviceCreateInfo", sType=lib.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=feats,
                     queueCreateInfoCount=1, pQueueCreateInfos=queue_info,
                     enabledExtensionCount=len(self._ext_names), ppEnabledExtensionNames=ext_ptrs)
        out = ffi.new("VkDevice*")
        check(lib.vkCreateDevice(info.handle, create, ffi.NULL, out), "vkCreateDevice")
        self.handle = out[0]
        queue = ffi.new("VkQueue*")
        lib.vkGetDeviceQueue(self.handle, info.compute_queue_family, 0, queue)
        self.queue = queue[0]
        # vkQueueSubmit needs external synchronisation: one mutex, taken in C around every submit (recorder.c),
        # Python's flushes and the native path's alike
        self.queue_mutex = lib.vkep_queue_mutex_new()
        # host memory the device can read in place (0: it cannot; see external.HostMemoryImport)
        self.host_import_alignment = (lib.vkep_host_import_alignment(info.handle)
                                      if HOST_IMPORT_EXTENSION.encode() in [ffi.string(e) for e in self._ext_names]
                                      else 0)

        from vkep.gpu.ahead import Ahead
        from vkep.gpu.memory import MemoryManager
        from vkep.gpu.pipeline import PipelineCache
        from vkep.gpu.weights import WeightCache

        self.memory = MemoryManager(self)
        self.pipelines = PipelineCache(self)
        self.ahead = Ahead(self)  # pipelines compiled in the background, ahead of their first run
        self.weights = WeightCache(self)
        self.streams: set = set()
        # re-entrant, like the memory and weight locks: a session that a GC pass releases while one is
        # held frees its weights, which synchronizes the device, on the same thread
        self.streams_lock = threading.RLock()
        self.lost = ""  # why the device was lost (VK_ERROR_DEVICE_LOST): no more work runs on it
        self._error_word: tuple[int, int] | None = None  # (host pointer, device address), made on first use
        # where native code finds the error word's host pointer (0 until it is made): the replay's check
        self._error_slot = ffi.new("uint64_t[1]")
        # outputs that natively replayed nodes let the host read in place: (copies, bytes) elided, counted in C
        self._native_elided = ffi.new("uint64_t[2]")
        self._default_stream = None
        from vkep.gpu.transfer import TransferStats

        self.transfer_stats = TransferStats()
        self.retired_commands = 0  # recorded by streams since destroyed
        self.retired_pieces = 0  # (their dispatch pieces, vkep.stats)
        self.tracers: tuple = ()  # who hears of its host operations while a profiler runs (gpu.trace)

    @staticmethod
    def _wanted_extensions(info: PhysicalDeviceInfo) -> list[str]:
        available = device_extensions(info.handle)
        # (a session's EP option host_import=0 leaves VK_EXT_external_memory_host unused: its kernels stage)
        wanted = ["VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd", HOST_IMPORT_EXTENSION]
        if info.features.get("cooperativeMatrix"):
            wanted.append(COOPMAT_EXTENSION)
        if info.features.get("subgroupSizeControl"):  # (core in Vulkan 1.3; enabling it there too is valid)
            wanted.append(SUBGROUP_SIZE_EXTENSION)
        return [e for e in wanted if e in available]

    def new_stream(self):
        from vkep.gpu.stream import Stream

        stream = Stream(self)
        with self.streams_lock:
            self.streams.add(stream)
        return stream

    def default_stream(self):
        """A stream for work outside any ORT stream (staging copies, tests)."""
        with self.streams_lock:
            if self._default_stream is None:
                from vkep.gpu.stream import Stream

                self._default_stream = Stream(self)
                self.streams.add(self._default_stream)
            return self._default_stream

    def forget_stream(self, stream) -> None:
        with self.streams_lock:
            self.streams.discard(stream)
            if stream is self._default_stream:
                self._default_stream = None

    @property
    def error_word(self) -> int:
        """Device address of a word shaders set when they meet an index out of range (shaders/common.glsl
        report_index_error); the host checks it after each wait (take_errors)."""
        with self.streams_lock:
            if self._error_word is None:
                host = self.memory.host_pool.alloc(4)
                ffi.cast("uint32_t*", host)[0] = 0
                self._error_word = (host, self.memory.device_address(host))
                self._error_slot[0] = host
            return self._error_word[1]

    @property
    def native_elided_address(self) -> int:
        """Address of the two uint64 counters (copies, bytes) the native replay adds its elided copies to."""
        return int(ffi.cast("uintptr_t", self._native_elided))

    def transfer_counts(self) -> dict:
        """The transfer counters (gpu.transfer.TransferStats), with the native replay's elided copies."""
        counts = self.transfer_stats.as_dict()
        counts["elided_copies"] += self._native_elided[0]
        counts["elided_bytes"] += self._native_elided[1]
        return counts

    def reset_transfer_counts(self) -> None:
        from vkep.gpu.transfer import TransferStats

        self.transfer_stats = TransferStats()
        self._native_elided[0] = self._native_elided[1] = 0

    @property
    def error_word_slot(self) -> int:
        """Address of a uint64 holding the error word's host pointer once it is made (0 before: no shader can
        have reported anything), for the native replay's check after it waits."""
        return int(ffi.cast("uintptr_t", self._error_slot))

    def take_errors(self) -> int:
        """The error word's value, cleared (0: nothing reported since the last call)."""
        if self._error_word is None:
            return 0
        word = ffi.cast("uint32_t*", self._error_word[0])
        value = word[0]
        if value:
            word[0] = 0
        return value

    def streams_snapshot(self) -> list:
        with self.streams_lock:
            return list(self.streams)

    def synchronize(self) -> None:
        """Submit and wait for everything recorded on every stream of this device (not the ahead stream's zero
        dispatches, which touch no memory: gpu/ahead.py)."""
        for stream in self.streams_snapshot():
            if stream.busy():
                stream.finish()

    def close(self) -> None:
        self.ahead.close()
        lib.vkDeviceWaitIdle(self.handle)
        for stream in list(self.streams):
            stream.destroy()
        self.pipelines.destroy()
        self.memory.destroy()
        lib.vkDestroyDevice(self.handle, ffi.NULL)
        lib.vkep_queue_mutex_free(self.queue_mutex)
        self.handle = None


_devices: dict[int, Device] = {}
_devices_lock = threading.Lock()


def open_device(index: int) -> Device:
    """The process-wide logical device for physical device `index` (created on first use)."""
    with _devices_lock:
        if index not in _devices:
            _devices[index] = Device(physical_devices()[index])
        return _devices[index]


def opened_devices() -> list[Device]:
    """The logical devices this process has created so far."""
    with _devices_lock:
        return list(_devices.values())


def validation_messages() -> tuple[int, str]:
    """(count, text) of validation-layer messages since the last call; clears them."""
    buf = ffi.new("char[]", 65536)
    count = lib.vkep_validation_take(buf, 65536)
    return count, ffi.string(buf).decode(errors="replace")
