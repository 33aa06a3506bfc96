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


def timestamp_support(info) -> tuple[int, float]:
    """(timestampValidBits of the compute queue family of a physical device (device.PhysicalDeviceInfo),
    timestampPeriod in ns per tick); 0 valid bits: the queue writes no timestamps."""
    abi, vk = _loader()
    count = ffi.new("uint32_t*")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(info.handle, count, ffi.NULL)
    families = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(info.handle, count, families)
    props = abi.new("VkPhysicalDeviceProperties*")
    vk.vkGetPhysicalDeviceProperties(_handle(abi, info.handle), props)
    return families[info.compute_queue_family].timestampValidBits, props.limits.timestampPeriod


class _TimestampPool:
    """A pool of `queries` timestamp queries on the device, where its compute queue writes timestamps (else
    `available` is False and `pool` None)."""

    def __init__(self, device, queries: int):
        self.device = device
        self.valid_bits, self.period_ns = timestamp_support(device.info)
        self.mask = (1 << self.valid_bits) - 1 if self.valid_bits < 64 else (1 << 64) - 1  # the ticks' valid bits
        self.pool = None
        if self.valid_bits:
            abi, vk = _loader()
            info = abi.new("VkQueryPoolCreateInfo*", {"sType": STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                                       "queryType": QUERY_TYPE_TIMESTAMP, "queryCount": queries})
            pool = abi.new("uint64_t*")
            check(vk.vkCreateQueryPool(_handle(abi, device.handle), info, abi.NULL, pool), "vkCreateQueryPool")
            self.pool = pool[0]

    @property
    def available(self) -> bool:
        return self.pool is not None

    def read_pairs(self, first: int, count: int) -> list[tuple[int, int] | None]:
        """The (begin, end) ns of `count` pairs of queries from query `first` as written last (None: a pair not
        both written); does not wait."""
        abi, vk = _loader()
        data = abi.new("uint64_t[]", 4 * count)  # (value, availability) per query
        result = vk.vkGetQueryPoolResults(_handle(abi, self.device.handle), self.pool, first, 2 * count, 32 * count,
                                          data, 16, RESULT_64 | RESULT_WITH_AVAILABILITY)
        if result < 0:
            check(result, "vkGetQueryPoolResults")
        mask, period = self.mask, self.period_ns
        return [(int((data[4 * k] & mask) * period), int((data[4 * k + 2] & mask) * period))
                if data[4 * k + 1] and data[4 * k + 3] else None for k in range(count)]

    def _destroy_pool(self) -> None:
        if self.pool is not None:
            abi, vk = _loader()
            vk.vkDestroyQueryPool(_handle(abi, self.device.handle), self.pool, abi.NULL)
            self.pool = None


class GpuTimer(_TimestampPool):
    """Two timestamps around work recorded on a stream: `time(stream, record)` returns the nanoseconds the
    device spent between them."""

    def __init__(self, device):
        super().__init__(device, 2)

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
        return ((ticks[1] - ticks[0]) & self.mask) * self.period_ns

    def destroy(self) -> None:
        self._destroy_pool()


RESULT_WITH_AVAILABILITY = 0x4


class TimestampRing(_TimestampPool):
    """Pairs of timestamp queries around pieces of work recorded on streams (a profiled session's nodes): `begin`
    writes the first of a pair into the stream's open command buffer, `end` the second, and `results` holds each
    pair's (begin, end) in device nanoseconds once `collect` read it. Both timestamps are BOTTOM_OF_PIPE: a pair
    spans from the completion of the work recorded before it to the completion of the work between, so pairs
    in a row partition the queue's busy time instead of overlapping. When every pair is in use, `begin` waits for
    the device and collects first. A timestamp counts as a command of the stream (its next flush submits it); a pair
    whose results are not available is reported as None, never waited for."""

    def __init__(self, device, pairs: int = 1024):
        super().__init__(device, 2 * pairs)
        self.pairs = pairs
        self.tickets = 0  # pairs handed out; pair k sits at queries 2 * (k % pairs), +1
        self.in_flight: dict[int, int] = {}  # ticket -> query index, written and not yet collected
        self.results: dict[int, tuple[int, int] | None] = {}

    def begin(self, stream) -> int:
        """Write the first timestamp of a new pair on `stream`; returns the pair's ticket."""
        ticket = self.tickets
        query = 2 * (ticket % self.pairs)
        if ticket - self.pairs in self.in_flight:  # the pair's last user, not read yet
            self.collect()
        self.tickets += 1
        self.in_flight[ticket] = query
        abi, vk = _loader()
        stream.on_open_buffer(lambda cmd: (vk.vkCmdResetQueryPool(_handle(abi, cmd), self.pool, query, 2),
                                           vk.vkCmdWriteTimestamp(_handle(abi, cmd), BOTTOM_OF_PIPE, self.pool, query)))
        return ticket

    def end(self, stream, ticket: int) -> None:
        query = 2 * (ticket % self.pairs) + 1  # (its pair may have been read already: a collect waited meanwhile)
        abi, vk = _loader()
        stream.on_open_buffer(lambda cmd: vk.vkCmdWriteTimestamp(_handle(abi, cmd), BOTTOM_OF_PIPE, self.pool, query))

    def drop(self, ticket: int) -> None:
        """Forget a pair whose `end` will not come (the work between recorded no command)."""
        self.in_flight.pop(ticket, None)

    def collect(self) -> None:
        """Wait for the device, then read every pair in flight into `results`."""
        if not self.in_flight:
            return
        # the pairs to read are those begun before the wait: synchronize's flushes open new command buffers, where
        # a profiler begins new pairs, whose reset is not submitted yet (reading such a query is invalid usage)
        reading, self.in_flight = self.in_flight, {}
        self.device.synchronize()
        for ticket, query in reading.items():
            self.results[ticket] = self.read_pairs(query, 1)[0]

    def destroy(self) -> None:
        if self.pool is not None:
            self.device.synchronize()  # (pairs may still be written by submitted work)
        self._destroy_pool()


class TimestampTable:
    """Pairs of timestamp queries at fixed places, for work recorded once and submitted many times (a captured
    graph, vkep/ort/capture_timing.py): pair k keeps its two queries for the table's life, so every submit of
    the recorded commands writes the same pairs again, and `read` after each submit's completion gives each pair's
    (begin, end) in device nanoseconds. `begin` records a reset of the pair before its first timestamp, so the
    reset is part of the recorded work and runs again with each submit. Pools of POOL_PAIRS pairs are added as
    pairs are handed out (a table never wraps: a wrapped pair would be overwritten within one submit)."""

    POOL_PAIRS = 256

    def __init__(self, device):
        self.device = device
        self.pools = [_TimestampPool(device, 2 * self.POOL_PAIRS)]
        self.pairs = 0

    @property
    def available(self) -> bool:
        return bool(self.pools) and self.pools[0].available

    def _query(self, pair: int) -> tuple[_TimestampPool, int]:
        return self.pools[pair // self.POOL_PAIRS], 2 * (pair % self.POOL_PAIRS)

    def begin(self, stream) -> int:
        """Record the reset of a new pair and its first timestamp on `stream`; returns the pair's index."""
        pair = self.pairs
        if pair // self.POOL_PAIRS == len(self.pools):
            self.pools.append(_TimestampPool(self.device, 2 * self.POOL_PAIRS))
        self.pairs += 1
        pool, query = self._query(pair)
        abi, vk = _loader()
        stream.on_open_buffer(lambda cmd: (vk.vkCmdResetQueryPool(_handle(abi, cmd), pool.pool, query, 2),
                                           vk.vkCmdWriteTimestamp(_handle(abi, cmd), BOTTOM_OF_PIPE, pool.pool, query)))
        return pair

    def drop_last(self, pair: int) -> None:
        """Forget the pair handed out last, whose commands will never be submitted (`read` would read queries
        never reset)."""
        assert pair == self.pairs - 1, (pair, self.pairs)
        self.pairs -= 1

    def end(self, stream, pair: int) -> None:
        pool, query = self._query(pair)
        abi, vk = _loader()
        stream.on_open_buffer(lambda cmd: vk.vkCmdWriteTimestamp(_handle(abi, cmd), BOTTOM_OF_PIPE, pool.pool,
                                                                 query + 1))

    def read(self) -> list[tuple[int, int] | None]:
        """Each pair's (begin, end) ns as the last completed submit wrote it (None: not written). Call it once the
        work is known complete; it does not wait."""
        out: list[tuple[int, int] | None] = []
        for index, pool in enumerate(self.pools):
            count = min(self.POOL_PAIRS, self.pairs - index * self.POOL_PAIRS)
            if count <= 0:
                break
            out.extend(pool.read_pairs(0, count))
        return out

    def destroy(self) -> None:
        """(after the last submit that writes the pairs has completed)"""
        for pool in self.pools:
            pool._destroy_pool()
        self.pools.clear()
