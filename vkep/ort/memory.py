"""ORT memory plumbing: allocators, the data transfer for every direction, and sync streams."""

from __future__ import annotations

import threading

from vkep.gpu import transfer
from vkep.gpu.stream import Stream
from vkep.ort import api
from vkep.ort.api import callback, status_callback

ALLOCATORS: dict[int, Allocator] = {}
STREAMS: dict[int, SyncStream] = {}
NOTIFICATIONS: dict[int, Notification] = {}
TRANSFERS: dict[int, DataTransfer] = {}


class Allocator:
    """OrtAllocator over one of the device's pools (DEFAULT → device addresses, HOST_ACCESSIBLE → host pointers)."""

    def __init__(self, device, mem_type: int):
        lib = api.lib
        self.device = device
        self.mem_type = mem_type
        self.struct = api.new_struct("vkep_allocator")
        s = self.struct
        s.base.version = 14  # Alloc/Free/Info only: ORT reads nothing past what we fill in
        # the C front keeps freed chunks per size; only a miss enters Python (py_alloc below)
        s.base.Alloc = api.ffi.cast("void*(*)(OrtAllocator*, size_t)", lib.vkep_alloc_fn)
        s.base.Free = api.ffi.cast("void(*)(OrtAllocator*, void*)", lib.vkep_free_fn)
        s.cache = lib.vkep_alloc_cache_new()
        s.base.Info = api.ffi.cast("const OrtMemoryInfo*(*)(const OrtAllocator*)", lib.vkep_alloc_info_fn)
        s.info = device.memory_infos[mem_type]
        memory = device.gpu.memory
        self.pool = memory.host_pool if mem_type == api.MEM_HOST_ACCESSIBLE else memory.device_pool
        # other threads reach an allocator while ORT releases it (vkep.stats(), the out-of-memory drain of
        # every allocator, a captured graph giving chunks back): its C front goes under this lock
        self._lock = threading.RLock()
        self.released = False
        ALLOCATORS[api.address(self.struct)] = self

    def drain(self) -> None:
        """Give the chunks the C front keeps back to the device pool."""
        with self._lock:
            if not self.released:
                for pointer, _ in self._taken(api.lib.vkep_alloc_cache_drain):
                    self.pool.free(pointer)

    def hold(self, on: bool) -> None:
        """While on, chunks ORT frees are held (for a graph being captured) instead of cached for reuse."""
        with self._lock:
            if not self.released:
                api.lib.vkep_alloc_cache_hold(self.struct.cache, int(on))

    def take_held(self) -> list[tuple[int, int]]:
        """(pointer, size) of the chunks held since `hold(True)`; the taker gives each back (`give_back`)."""
        with self._lock:
            return [] if self.released else list(self._taken(api.lib.vkep_alloc_cache_take_held))

    def give_back(self, pointer: int, size: int) -> None:
        """A chunk taken from this allocator, for reuse; to the pool where ORT has released the allocator."""
        with self._lock:
            if not self.released:
                api.lib.vkep_alloc_cache_put(self.struct.cache, pointer, size)
                return
        self.pool.free(pointer)  # (its C front is gone)

    def owns(self, pointer: int) -> bool:
        """Whether `pointer` is a chunk this allocator handed out (False once released)."""
        with self._lock:
            return not self.released and bool(api.lib.vkep_alloc_cache_owns(self.struct.cache, pointer))

    def reserve(self, nbytes: int, what: str) -> None:
        """A chunk of `nbytes` kept ready in the C front for ORT's next request of that size (ORT does not
        check an allocator's result: out of memory has to surface before, as an error)."""
        with self._lock:
            if self.released or api.lib.vkep_alloc_cache_count(self.struct.cache, nbytes):
                return
        size = -(-nbytes // 256) * 256
        pointer = alloc_from(self, size, what)  # (outside the lock: out of memory drains every allocator)
        self.give_back(pointer, size)

    def take(self, nbytes: int, what: str) -> int:
        """A chunk of `nbytes`, live until `free` (scratch memory of a kernel call); 0 once released."""
        while True:
            self.reserve(nbytes, what)
            with self._lock:
                if self.released:
                    return 0
                pointer = api.lib.vkep_alloc_cache_take(self.struct.cache, nbytes)
            if pointer:  # (else another thread took the chunk reserved for us: again)
                return pointer

    def free(self, pointer: int) -> None:
        """A chunk from `take` back for reuse."""
        with self._lock:
            if not self.released:
                api.lib.vkep_alloc_cache_free(self.struct.cache, pointer)
                return
        self.pool.free(pointer)

    def _taken(self, take):
        ffi = api.ffi
        ptrs, sizes = ffi.new("uint64_t[256]"), ffi.new("uint64_t[256]")
        while n := take(self.struct.cache, ptrs, sizes, 256):
            yield from ((ptrs[i], sizes[i]) for i in range(n))

    def stats(self) -> dict:
        out = api.ffi.new("uint64_t[5]")
        with self._lock:
            if not self.released:
                api.lib.vkep_alloc_cache_stats(self.struct.cache, out)
        return {"live_bytes": out[0], "peak_bytes": out[1], "cached_bytes": out[2], "pool_allocations": out[3],
                "live_chunks": out[4]}

    def release(self) -> None:
        with self._lock:
            self.drain()
            self.released = True
            ALLOCATORS.pop(api.address(self.struct), None)
            api.lib.vkep_alloc_cache_delete(self.struct.cache)
            api.free_struct(self.struct)


def allocators_of(device) -> list[Allocator]:
    """The allocators ORT created over `device`'s memory, oldest first."""
    return [a for a in list(ALLOCATORS.values()) if a.device is device]


def default_allocator(device) -> Allocator | None:
    """The most recent allocator ORT created for `device`'s default memory."""
    found = [a for a in allocators_of(device) if a.mem_type == device.default_mem_type]
    return found[-1] if found else None


def alloc_from(allocator: Allocator, size: int, what: str = "a tensor") -> int:
    """A chunk of `allocator`'s pool; out of memory, every cache vkep holds on the device (each
    allocator's freed chunks, both pools' cached chunks and empty blocks) is given back first, and the
    error says what was asked, the budget and what is in use."""
    try:
        return allocator.pool.alloc(size)
    except MemoryError:
        device = allocator.device
        device.gpu.synchronize()  # chunks freed while work was pending are safe to give back after this
        for other in allocators_of(device):
            other.drain()
        memory = device.gpu.memory
        for pool in (memory.device_pool, memory.host_pool):
            pool.trim()
        try:
            return allocator.pool.alloc(size)
        except MemoryError as exc:
            stats = memory.stats()
            budget = f"{memory.budget} bytes (EP option memory_budget_mb)" if memory.budget else "none set"
            raise MemoryError(f"vkep: out of device memory for {what} of {size} bytes on {device.info.name}: "
                              f"{stats['live_bytes']} bytes in use, {stats['reserved_bytes']} reserved after "
                              f"freeing every cache; budget {budget} ({exc})") from None


@callback("py_alloc")
def _alloc(this, size):
    allocator = ALLOCATORS[api.address(this)]
    try:
        return api.ffi.cast("void*", alloc_from(allocator, size))
    except MemoryError as exc:
        # ORT does not check an allocator's result: the copy or kernel that gets the NULL reports this
        allocator.device.gpu.memory.last_failure = str(exc)
        return api.ffi.NULL


class SyncStream:
    """OrtSyncStreamImpl over the device's gpu Stream; its handle is what kernels get as their compute stream.

    Every ORT stream of a device records into the device's one gpu stream: memory that one run frees
    and another reuses is then ordered by the recorder's hazard tracking, which separate command
    buffers on one queue would not give. (Separate recorders need stream-aware allocation first.)
    """

    def __init__(self, device):
        lib = api.lib
        self.device = device
        self.stream: Stream = device.gpu.default_stream()
        self.struct = api.new_struct("vkep_stream")
        self.struct.recorder = api.ffi.cast("void*", self.stream.recorder_address)
        s = self.struct.base
        s.ort_version_supported = lib.vkep_api_version()
        s.Release = lib.py_stream_release
        s.GetHandle = lib.py_stream_get_handle
        s.CreateNotification = lib.py_stream_create_notification
        s.Flush = lib.py_stream_flush
        s.OnSessionRunEnd = lib.py_stream_on_run_end
        STREAMS[api.address(self.struct)] = self


def stream_of(handle) -> Stream | None:
    found = STREAMS.get(api.address(handle))
    return found.stream if found else None


@callback("py_stream_release")
def _stream_release(this):
    sync = STREAMS.pop(api.address(this), None)
    if sync is not None:
        sync.stream.finish()
        api.free_struct(this)


@callback("py_stream_get_handle")
def _stream_get_handle(this):
    return api.ffi.cast("void*", this)


@status_callback("py_stream_flush")
def _stream_flush(this):
    # ORT's contract: when Flush returns, the work submitted to the stream has completed (ORT may then
    # read HOST_ACCESSIBLE memory with the CPU, e.g. between Loop iterations)
    STREAMS[api.address(this)].stream.finish()


@status_callback("py_stream_on_run_end")
def _stream_on_run_end(this):
    STREAMS[api.address(this)].stream.finish()


class Notification:
    """Activate submits the producer's work; waiting means waiting for its timeline value."""

    def __init__(self, sync: SyncStream):
        lib = api.lib
        self.stream = sync.stream
        self.value = 0
        self.struct = api.new_struct("vkep_notification")
        s = self.struct.base
        s.ort_version_supported = lib.vkep_api_version()
        s.Release = lib.py_notification_release
        s.Activate = lib.py_notification_activate
        s.WaitOnDevice = lib.py_notification_wait_on_device
        s.WaitOnHost = lib.py_notification_wait_on_host
        NOTIFICATIONS[api.address(self.struct)] = self


@status_callback("py_stream_create_notification")
def _create_notification(this, out):
    note = Notification(STREAMS[api.address(this)])
    out[0] = api.ffi.cast("OrtSyncNotificationImpl*", note.struct)


@callback("py_notification_release")
def _notification_release(this):
    if NOTIFICATIONS.pop(api.address(this), None) is not None:
        api.free_struct(this)


@status_callback("py_notification_activate")
def _notification_activate(this):
    note = NOTIFICATIONS[api.address(this)]
    note.value = note.stream.flush()


@status_callback("py_notification_wait_on_device")
def _notification_wait_on_device(this, consumer):
    # Every vkep stream of a device shares one queue, and each command buffer starts with a full
    # barrier, so work submitted after Activate is ordered after the producer's: no wait needed there.
    note = NOTIFICATIONS[api.address(this)]
    impl = api.lib.ep_SyncStream_GetImpl(consumer) if consumer != api.ffi.NULL else api.ffi.NULL
    consumer_stream = stream_of(impl) if impl != api.ffi.NULL else None
    if consumer_stream is None or consumer_stream.device is not note.stream.device:
        note.stream.wait(note.value)


@status_callback("py_notification_wait_on_host")
def _notification_wait_on_host(this):
    note = NOTIFICATIONS[api.address(this)]
    note.stream.wait(note.value)


class DataTransfer:
    """Copies between CPU memory and a vkep device's DEFAULT / HOST_ACCESSIBLE memory, in every direction."""

    def __init__(self, factory):
        lib = api.lib
        self.factory = factory
        self.struct = api.new_struct("OrtDataTransferImpl")
        s = self.struct
        s.ort_version_supported = lib.vkep_api_version()
        s.Release = lib.py_transfer_release
        s.CanCopy = lib.py_transfer_can_copy
        s.CopyTensors = lib.py_transfer_copy
        self.lock = threading.Lock()
        TRANSFERS[api.address(self.struct)] = self

    def side(self, memory_device):
        """(VulkanDevice, memory type) for vkep memory, None for the CPU; raises for anything else."""
        found = self.factory.device_for_memory(memory_device)
        if found is not None:
            return found
        if api.lib.ep_MemoryDevice_GetDeviceType(memory_device) == api.DEVICE_CPU:
            return None
        raise api.OrtError("vkep cannot copy to or from that device", api.ORT_INVALID_ARGUMENT)

    def copy(self, src_value, dst_value, sync_stream) -> None:
        lib, ffi = api.lib, api.ffi
        src_side = self.side(lib.ep_Value_GetMemoryDevice(src_value))
        dst_side = self.side(lib.ep_Value_GetMemoryDevice(dst_value))
        size = ffi.new("size_t*")
        api.check(lib.ort_GetTensorSizeInBytes(src_value, size))
        src_ptr, dst_ptr = ffi.new("void**"), ffi.new("void**")
        api.check(lib.ort_GetTensorMutableData(ffi.cast("OrtValue*", src_value), src_ptr))
        api.check(lib.ort_GetTensorMutableData(dst_value, dst_ptr))
        stream = None
        if sync_stream != ffi.NULL:
            impl = lib.ep_SyncStream_GetImpl(sync_stream)
            stream = stream_of(impl) if impl != ffi.NULL else None
        src, dst, n = api.address(src_ptr[0]), api.address(dst_ptr[0]), size[0]
        if src_side is None and dst_side is None:
            raise api.OrtError("CPU to CPU copy asked of vkep", api.ORT_INVALID_ARGUMENT)
        # where vkep memory is host memory, ORT's CPU kernels also make host tensors under vkep's label
        src_dev, dst_dev = _holder(src_side, src), _holder(dst_side, dst)
        _note_copy_while_capturing((src_side or dst_side)[0])
        if src_dev is None and dst_dev is None:
            transfer.host_copy((src_side or dst_side)[0].gpu, src, dst, n, "uploads" if dst_side else "downloads")
        elif src_dev is None:
            transfer.upload(dst_dev.gpu, src, dst, n)
        elif dst_dev is None:
            transfer.download(src_dev.gpu, src, dst, n)
        elif src_dev is dst_dev:
            transfer.device_copy(src_dev.gpu, src, dst, n, stream)
        else:
            raise api.OrtError("copies between two Vulkan devices are not supported yet", api.ORT_NOT_IMPLEMENTED)


def _note_copy_while_capturing(device) -> None:
    """ORT copies a run's host inputs and outputs to and from device memory; a replay would not."""
    from vkep.ort.ep import EPS

    for ep in list(EPS.values()):
        if ep.capturing is not None and ep.device is device:
            ep.capturing.host_memory_used("ORT's copy of a graph input or output")


def _holder(side, pointer: int):
    """The VulkanDevice whose memory `pointer` is in, or None for host memory: vkep-labeled tensors are
    host memory too where the device shares the host's (see factory.memory_device_type)."""
    if side is None or (side[0].shares_host_memory and side[0].gpu.memory.spans.find(pointer) is None):
        return None
    return side[0]


@callback("py_transfer_release")
def _transfer_release(this):
    pass  # the factory owns its one data transfer


@callback("py_transfer_can_copy")
def _transfer_can_copy(this, src, dst):
    transfer = TRANSFERS[api.address(this)]
    try:
        return (transfer.side(src) is not None) or (transfer.side(dst) is not None)
    except api.OrtError:
        return False


@status_callback("py_transfer_copy")
def _transfer_copy(this, src, dst, streams, n):
    transfer = TRANSFERS[api.address(this)]
    for i in range(n):
        transfer.copy(src[i], dst[i], streams[i] if streams != api.ffi.NULL else api.ffi.NULL)
