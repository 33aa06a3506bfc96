"""Device memory: big blocks (VkDeviceMemory + one VkBuffer with a device address), sub-allocated.

Every pointer vkep hands out is either a buffer device address (DEFAULT memory) or a mapped host
pointer (HOST_ACCESSIBLE memory); both survive the pointer arithmetic ORT does, and `resolve()` maps
any address inside a block back to (block, offset) through one sorted span table.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

from vkep import options
from vkep.gpu.vk import OutOfDeviceMemory, check, ffi, lib, new

ALIGNMENT = 256
BLOCK_SIZE = 64 << 20
STAGING_BLOCK = 1 << 20  # (the staging pool's blocks: small host tensors)
DEDICATED_THRESHOLD = 16 << 20


def _align(n: int, a: int = ALIGNMENT) -> int:
    return (n + a - 1) // a * a


@dataclass(eq=False)
class Block:
    memory: object
    buffer: object
    size: int
    device_address: int
    host_address: int  # 0 when not host-visible
    pool: MemoryPool
    free: list  # sorted [offset, size] runs
    used: int = 0

    def address(self, offset: int) -> int:
        """The address ORT sees for `offset` in this block: host pointer for host pools, else device."""
        return (self.host_address if self.pool.host_pointers else self.device_address) + offset


_tables: list[SpanTable] = []
_tables_lock = threading.Lock()


class SpanTable:
    """Sorted address ranges → block, for both device addresses and host pointers. Readers take no lock
    (every node's addresses are found here): writers build a new table and swap it in whole, so a reader
    sees the old table or the new, never a half-inserted one (that read as 'not vkep memory', or as
    another block's range)."""

    def __init__(self):
        self._table: tuple[list[int], list[tuple[int, int, Block]]] = ([], [])  # (starts, entries), one swap
        self._private: set[int] = set()  # ids of blocks not published to native code
        self._lock = threading.RLock()
        with _tables_lock:
            _tables.append(self)

    @property
    def _entries(self) -> list[tuple[int, int, Block]]:
        return self._table[1]

    def add(self, block: Block, publish: bool = True) -> None:
        """Register `block`; `publish=False` keeps it from native code (memory ORT never addresses:
        host memory imported for one call), which spares republishing the table for it."""
        with self._lock:
            starts, entries = list(self._table[0]), list(self._table[1])
            for base in {block.device_address, block.host_address} - {0}:
                i = bisect.bisect(starts, base)
                starts.insert(i, base)
                entries.insert(i, (base, base + block.size, block))
            self._table = (starts, entries)
            if not publish:
                self._private.add(id(block))
            else:
                self._publish()

    def remove(self, block: Block) -> None:
        with self._lock:
            keep = [(s, e) for s, e in zip(*self._table, strict=True) if e[2] is not block]
            self._table = ([s for s, _ in keep], [e for _, e in keep])
            if id(block) in self._private:
                self._private.discard(id(block))
            else:
                self._publish()

    def _publish(self) -> None:
        """Give native code every range of vkep memory with what turns an address in it into a device
        address (0 for device addresses; device - host for mapped host pointers). An address in none of
        them is not vkep memory: native code leaves such a node to Python, which imports or stages it."""
        with _tables_lock:  # (held through the swap: two pools publishing at once must not store out of order)
            entries = [e for table in _tables for e in table._entries if id(e[2]) not in table._private]
            moved = list(dict.fromkeys((lo, hi, b.device_address - lo) for lo, hi, b in entries))
            lib.vkep_set_translations([m[0] for m in moved], [m[1] for m in moved], [m[2] for m in moved],
                                      len(moved))

    def find(self, address: int) -> tuple[Block, int] | None:
        starts, entries = self._table
        i = bisect.bisect(starts, address) - 1
        if i >= 0:
            base, end, block = entries[i]
            if address < end:
                return block, address - base
        return None


class MemoryPool:
    """One kind of memory (one Vulkan memory type), sub-allocated with exact-size reuse and coalescing."""

    def __init__(self, manager: MemoryManager, name: str, type_index: int, host_visible: bool, host_pointers: bool,
                 block_size: int = BLOCK_SIZE):
        self.manager = manager
        self.block_size = block_size
        self.name = name
        self.type_index = type_index
        self.host_visible = host_visible
        self.host_pointers = host_pointers
        self.blocks: list[Block] = []
        self.chunks: dict[int, tuple[Block, int, int]] = {}  # address → (block, offset, size)
        self.cached: dict[int, list[tuple[Block, int]]] = {}  # size → freed chunks kept for reuse
        self.live = 0
        self.peak = 0
        self.reserved = 0
        self.lock = threading.RLock()

    # -- allocation -------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        size = _align(max(nbytes, 1))
        with self.lock:
            reuse = self.cached.get(size)
            if reuse:
                block, offset = reuse.pop()
            else:
                block, offset = self._carve(size)
            address = block.address(offset)
            self.chunks[address] = (block, offset, size)
            self.live += size
            self.peak = max(self.peak, self.live)
            return address

    def free(self, address: int) -> None:
        with self.lock:
            block, offset, size = self.chunks.pop(address)
            self.live -= size
            self.cached.setdefault(size, []).append((block, offset))

    def _carve(self, size: int) -> tuple[Block, int]:
        for block in self.blocks:
            got = _take(block, size)
            if got is not None:
                return block, got
        want = max(size, self.block_size) if size < DEDICATED_THRESHOLD else size
        budget = self.manager.budget
        if budget:  # under a budget: blocks of at most an eighth of it, and a smaller one rather than none
            room = min(budget // 8, budget - self.manager.reserved()) // ALIGNMENT * ALIGNMENT
            want = max(size, min(want, room))
        try:
            block = self._new_block(want)
        except OutOfDeviceMemory:
            self._trim_locked()
            for block in self.blocks:
                got = _take(block, size)
                if got is not None:
                    return block, got
            raise
        return block, _take(block, size)

    def _trim_locked(self) -> None:
        """Give cached chunks back to their blocks and release blocks that became empty."""
        for size, chunks in self.cached.items():
            for block, offset in chunks:
                _give(block, offset, size)
        self.cached.clear()
        for block in [b for b in self.blocks if b.used == 0]:
            self._destroy_block(block)

    def trim(self) -> None:
        with self.lock:
            self._trim_locked()

    # -- blocks -----------------------------------------------------------------------------------
    def _new_block(self, size: int) -> Block:
        budget = self.manager.budget
        if budget and self.manager.reserved() + size > budget:
            raise OutOfDeviceMemory(f"a {size}-byte block ({self.name}) past vkep's budget of {budget} bytes "
                                    f"(EP option memory_budget_mb)", lib.VK_ERROR_OUT_OF_DEVICE_MEMORY)
        dev = self.manager.device.handle
        usage = (lib.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | lib.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | lib.VK_BUFFER_USAGE_TRANSFER_DST_BIT | lib.VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT)
        info = new("VkBufferCreateInfo", sType=lib.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size, usage=usage,
                   sharingMode=lib.VK_SHARING_MODE_EXCLUSIVE)
        buf = ffi.new("VkBuffer*")
        check(lib.vkCreateBuffer(dev, info, ffi.NULL, buf), "vkCreateBuffer")
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(dev, buf[0], req)
        flags = new("VkMemoryAllocateFlagsInfo", sType=lib.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                    flags=lib.VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT)
        alloc = new("VkMemoryAllocateInfo", sType=lib.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, pNext=flags,
                    allocationSize=req.size, memoryTypeIndex=self.type_index)
        info = self.manager.device.info
        heap = info.heap_sizes[info.memory_types[self.type_index][1]]
        if req.size > heap:  # Vulkan forbids asking for more than the heap holds: out of memory, said so
            lib.vkDestroyBuffer(dev, buf[0], ffi.NULL)
            raise OutOfDeviceMemory(f"a {req.size}-byte block ({self.name}) is larger than its memory heap "
                                    f"({heap} bytes)", lib.VK_ERROR_OUT_OF_DEVICE_MEMORY)
        mem = ffi.new("VkDeviceMemory*")
        result = lib.vkAllocateMemory(dev, alloc, ffi.NULL, mem)
        if result != lib.VK_SUCCESS:
            lib.vkDestroyBuffer(dev, buf[0], ffi.NULL)
            check(result, f"vkAllocateMemory({size} bytes, {self.name})")
        check(lib.vkBindBufferMemory(dev, buf[0], mem[0], 0), "vkBindBufferMemory")
        host = 0
        if self.host_visible:
            ptr = ffi.new("void**")
            check(lib.vkMapMemory(dev, mem[0], 0, size, 0, ptr), "vkMapMemory")
            host = int(ffi.cast("uintptr_t", ptr[0]))
        bda = new("VkBufferDeviceAddressInfo", sType=lib.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, buffer=buf[0])
        address = lib.vkGetBufferDeviceAddress(dev, bda)
        block = Block(memory=mem[0], buffer=buf[0], size=size, device_address=address, host_address=host, pool=self,
                      free=[[0, size]])
        self.blocks.append(block)
        self.reserved += size
        self.manager.spans.add(block)
        return block

    def _destroy_block(self, block: Block) -> None:
        dev = self.manager.device.handle
        self.manager.spans.remove(block)
        self.blocks.remove(block)
        self.reserved -= block.size
        lib.vkDestroyBuffer(dev, block.buffer, ffi.NULL)
        lib.vkFreeMemory(dev, block.memory, ffi.NULL)

    def destroy(self) -> None:
        with self.lock:
            for block in list(self.blocks):
                self._destroy_block(block)
            self.chunks.clear()
            self.cached.clear()


def _take(block: Block, size: int) -> int | None:
    for run in block.free:
        if run[1] >= size:
            offset = run[0]
            run[0] += size
            run[1] -= size
            if run[1] == 0:
                block.free.remove(run)
            block.used += size
            return offset
    return None


def _give(block: Block, offset: int, size: int) -> None:
    runs = block.free
    i = bisect.bisect(runs, [offset, size])
    runs.insert(i, [offset, size])
    block.used -= size
    # coalesce with the neighbours
    if i + 1 < len(runs) and runs[i][0] + runs[i][1] == runs[i + 1][0]:
        runs[i][1] += runs.pop(i + 1)[1]
    if i > 0 and runs[i - 1][0] + runs[i - 1][1] == runs[i][0]:
        runs[i - 1][1] += runs.pop(i)[1]


class MemoryManager:
    """The device's pools: `device` (ORT DEFAULT memory) and `host` (ORT HOST_ACCESSIBLE memory)."""

    def __init__(self, device):
        self.device = device
        self.spans = SpanTable()
        info = device.info
        local = lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        visible = lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
        coherent = lib.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        cached = lib.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
        device_type = _pick(info.memory_types, [local | visible | coherent, local])
        host_type = _pick(info.memory_types, [visible | coherent | cached | local, visible | coherent | cached,
                                               visible | coherent])
        # VKEP_FORCE_DISCRETE=1 runs a unified device the way a discrete GPU is run: device memory is
        # never touched by the host; transfers go through staging buffers and copy commands
        forced = options.env("VKEP_FORCE_DISCRETE")
        device_visible = bool(info.memory_types[device_type][0] & visible) and not forced
        self.unified = info.unified_memory and not forced
        self.device_pool = MemoryPool(self, "device", device_type, device_visible, host_pointers=False)
        self.host_pool = MemoryPool(self, "host", host_type, True, host_pointers=True)
        # copies of small host tensors a dispatch reads (transfer.stage): a chunk goes back only once the work that
        # read it completed (Stream.release_after), so a new one needs no wait, as a freed host_pool chunk would
        self.staging_pool = MemoryPool(self, "staging", host_type, True, host_pointers=True, block_size=STAGING_BLOCK)
        # an optional cap in bytes on what vkep reserves on this device (sharing a GPU; testing out-of-memory):
        # set from the sessions' EP option memory_budget_mb (vkep/ort/ep.py); 0: none
        self.budget = 0

    last_failure = ""  # the last allocation that failed where ORT could not be told (ort/memory.py _alloc)

    def reserved(self) -> int:
        return sum(pool.reserved for pool in self.pools)

    @property
    def pools(self) -> tuple[MemoryPool, ...]:
        return self.device_pool, self.host_pool, self.staging_pool

    def largest_block(self) -> int:
        """The most bytes one tensor may take: a tensor is one block of the pool ORT's allocator serves (the
        host pool on a unified device, else the device pool), and Vulkan allows no allocation larger than its
        memory heap (lavapipe's heap is 2 GiB)."""
        info, pool = self.device.info, self.host_pool if self.unified else self.device_pool
        return info.heap_sizes[info.memory_types[pool.type_index][1]]

    def resolve(self, address: int) -> tuple[Block, int]:
        found = self.spans.find(address)
        if found is None:
            if address == 0 and self.last_failure:  # an allocation ORT made without checking it failed
                failure, self.last_failure = self.last_failure, ""
                raise MemoryError(failure)
            raise ValueError(f"address 0x{address:x} is not vkep memory on {self.device.info.name}")
        return found

    def device_address(self, address: int) -> int:
        block, offset = self.resolve(address)
        return block.device_address + offset

    def host_pointer(self, address: int) -> int:
        """A host pointer for `address`, or 0 when its memory is not mapped."""
        block, offset = self.resolve(address)
        return block.host_address + offset if block.host_address else 0

    def stats(self) -> dict:
        pools = self.pools
        return {"live_bytes": sum(p.live for p in pools), "peak_bytes": sum(p.peak for p in pools),
                "reserved_bytes": sum(p.reserved for p in pools)}

    def destroy(self) -> None:
        for pool in self.pools:
            pool.destroy()


def _pick(types: list[tuple[int, int]], preferences: list[int]) -> int:
    for wanted in preferences:
        for i, (flags, _heap) in enumerate(types):
            if flags & wanted == wanted:
                return i
    raise RuntimeError("no suitable Vulkan memory type")
