"""GPU timestamps around recorded work (`vkep dev` times a kernel's dispatches with them).

vkep's compiled Vulkan binding (native/vk_cdef.h) declares only what the hot path needs; the few query-pool
calls used here are bound in cffi's ABI mode from the Vulkan loader, whose exported entry points dispatch on
the device and command-buffer handles the binding created. The one struct read from the driver
(VkPhysicalDeviceProperties, for limits.timestampPeriod) is checked against the compiled binding's layout.
"""

from __future__ import annotations

import ctypes.util
import functools

import cffi

from vkep.gpu.vk import check, ffi, lib

_CDEF = """
typedef struct { int sType; const void* pNext; uint32_t flags; int queryType; uint32_t queryCount;
                 uint32_t pipelineStatistics; } VkQueryPoolCreateInfo;
typedef struct { uint32_t _0[11]; uint64_t _1[2]; uint32_t _2[59]; size_t _3[1]; uint64_t _4[3]; uint32_t _5[22];
                 float timestampPeriod; uint32_t _6[12]; uint64_t _7[3]; } VkPhysicalDeviceLimits;
typedef struct { uint32_t apiVersion, driverVersion, vendorID, deviceID; int deviceType; char deviceName[256];
                 uint8_t pipelineCacheUUID[16]; VkPhysicalDeviceLimits limits; uint32_t sparse[5]; }
                 VkPhysicalDeviceProperties;
void vkGetPhysicalDeviceProperties(void* physicalDevice, VkPhysicalDeviceProperties* properties);
int vkCreateQueryPool(void* device, const VkQueryPoolCreateInfo* info, const void* allocator, uint64_t* pool);
void vkDestroyQueryPool(void* device, uint64_t pool, const void* allocator);
void vkCmdResetQueryPool(void* commandBuffer, uint64_t pool, uint32_t first, uint32_t count);
void vkCmdWriteTimestamp(void* commandBuffer, uint32_t stage, uint64_t pool, uint32_t query);
int vkGetQueryPoolResults(void* device, uint64_t pool, uint32_t first, uint32_t count, size_t dataSize, void* data,
                          uint64_t stride, uint32_t flags);
"""
QUERY_TYPE_TIMESTAMP = 2
STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO = 11
TOP_OF_PIPE, BOTTOM_OF_PIPE = 0x1, 0x2000
RESULT_64, RESULT_WAIT = 0x1, 0x2


@functools.cache
def _loader():
    abi = cffi.FFI()
    abi.cdef(_CDEF)
    vk = abi.dlopen(ctypes.util.find_library("vulkan") or "libvulkan.so.1")
    assert abi.sizeof("VkPhysicalDeviceProperties") == ffi.sizeof("VkPhysicalDeviceProperties"), \
        "VkPhysicalDeviceProperties layout differs from the compiled binding's"
    return abi, vk


def _handle(abi, value):
    return abi.cast("void*", int(ffi.cast("uintptr_t", value)))


def timestamp_support(device) -> tuple[int, float]:
    """(timestampValidBits of the device's compute queue family, timestampPeriod in ns per tick); 0 valid bits:
    the queue writes no timestamps."""
    abi, vk = _loader()
    count = ffi.new("uint32_t*")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(device.info.handle, count, ffi.NULL)
    families = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(device.info.handle, count, families)
    props = abi.new("VkPhysicalDeviceProperties*")
    vk.vkGetPhysicalDeviceProperties(_handle(abi, device.info.handle), props)
    return families[device.info.compute_queue_family].timestampValidBits, props.limits.timestampPeriod


class GpuTimer:
    """Two timestamps around work recorded on a stream: `time(stream, record)` returns the nanoseconds the
    device spent between them."""

    def __init__(self, device):
        self.device = device
        self.valid_bits, self.period_ns = timestamp_support(device)
        self.pool = None
        if self.valid_bits:
            abi, vk = _loader()
            info = abi.new("VkQueryPoolCreateInfo*", {"sType": STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                                       "queryType": QUERY_TYPE_TIMESTAMP, "queryCount": 2})
            pool = abi.new("uint64_t*")
            check(vk.vkCreateQueryPool(_handle(abi, device.handle), info, abi.NULL, pool), "vkCreateQueryPool")
            self.pool = pool[0]

    @property
    def available(self) -> bool:
        return self.pool is not None

    def time(self, stream, record) -> float:
        """Run `record()` (which records work on `stream`) between two timestamps, submit, wait, and return the
        device time in ns. `record` must stay within one batch (stream.BATCH_COMMANDS) to time only the device."""
        abi, vk = _loader()
        self.device.synchronize()
        stream.on_open_buffer(lambda cmd: (vk.vkCmdResetQueryPool(_handle(abi, cmd), self.pool, 0, 2),
                                           vk.vkCmdWriteTimestamp(_handle(abi, cmd), TOP_OF_PIPE, self.pool, 0)))
        before = stream.rec.total_commands
        record()
        recorded = stream.rec.total_commands - before
        if not recorded or not stream.rec.recording or stream.rec.commands < recorded:
            raise RuntimeError("vkep: the timed work was split over several batches (stream.BATCH_COMMANDS); time "
                               "fewer dispatches at once")
        stream.on_open_buffer(lambda cmd: vk.vkCmdWriteTimestamp(_handle(abi, cmd), BOTTOM_OF_PIPE, self.pool, 1))
        stream.finish()
        ticks = abi.new("uint64_t[2]")
        check(vk.vkGetQueryPoolResults(_handle(abi, self.device.handle), self.pool, 0, 2, 16, ticks, 8,
                                       RESULT_64 | RESULT_WAIT), "vkGetQueryPoolResults")
        mask = (1 << self.valid_bits) - 1 if self.valid_bits < 64 else (1 << 64) - 1
        return ((ticks[1] - ticks[0]) & mask) * self.period_ns

    def destroy(self) -> None:
        if self.pool is not None:
            abi, vk = _loader()
            vk.vkDestroyQueryPool(_handle(abi, self.device.handle), self.pool, abi.NULL)
            self.pool = None
