"""Moving bytes between host memory and a device: the copy plan, decided from the memory's kind.

- Host-visible device memory (unified devices, ReBAR): the host writes it directly, after the GPU work
  that may touch it has completed, and reads it directly where it is the host's memory (unified).
- Device-only memory: through a staging buffer in host memory and a recorded buffer copy.
Every transfer is counted in the device's `stats`.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from vkep.gpu.trace import host_operation
from vkep.gpu.vk import ffi


@dataclass
class TransferStats:
    uploads: int = 0
    upload_bytes: int = 0
    downloads: int = 0
    download_bytes: int = 0
    device_copies: int = 0
    device_copy_bytes: int = 0
    staging_copies: int = 0
    staging_bytes: int = 0
    small_copies: int = 0  # small host tensors copied by choice (external.STAGE_BELOW), not for want of an import
    small_bytes: int = 0
    elided_copies: int = 0  # host tensors read or written in place where the discrete path would copy
    elided_bytes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


_lock = threading.RLock()


def _memmove(dst: int, src: int, n: int) -> None:
    ffi.memmove(ffi.cast("void*", dst), ffi.cast("void*", src), n)


def _count(device, count: str, nbytes: str, n: int) -> None:
    with _lock:
        stats = device.transfer_stats
        setattr(stats, count, getattr(stats, count) + 1)
        setattr(stats, nbytes, getattr(stats, nbytes) + n)


def _settle(device) -> None:
    """Wait for the GPU work that may touch the memory: any stream's, as freed memory is reused
    across streams."""
    device.synchronize()


def count_elided(device, n: int) -> None:
    """A copy the discrete path makes that the unified path planned away: a host tensor the device read
    or wrote in place, or a device tensor the host read in place."""
    _count(device, "elided_copies", "elided_bytes", n)


@host_operation("upload", 2)
def upload(device, host_src: int, dst: int, n: int) -> None:
    """Host memory → vkep memory at `dst`."""
    if n == 0:
        return
    _count(device, "uploads", "upload_bytes", n)
    host = device.memory.host_pointer(dst)
    _settle(device)  # the GPU may still use this memory from before it was reused
    if host:
        _memmove(host, host_src, n)
        return
    _through_staging(device, n, lambda staging: _memmove(staging, host_src, n), staging_to=dst)


@host_operation("download", 2)
def download(device, src: int, host_dst: int, n: int) -> None:
    """vkep memory at `src` → host memory."""
    if n == 0:
        return
    _count(device, "downloads", "download_bytes", n)
    _settle(device)
    host = device.memory.host_pointer(src)
    # read in place where the memory is the host's; device-local memory that is merely mapped (ReBAR on
    # a discrete GPU) reads slowly across the bus: a device copy into host memory is faster
    block, _ = device.memory.resolve(src)
    if host and (device.memory.unified or block.pool is device.memory.host_pool):
        _memmove(host_dst, host, n)
        return
    _through_staging(device, n, None, staging_from=src, after=lambda staging: _memmove(host_dst, staging, n))


def read(device, src: int, n: int) -> bytes:
    """The bytes of vkep memory at `src`, once the device's work has completed (`download` into new memory)."""
    out = bytearray(n)
    if n:
        download(device, src, int(ffi.cast("uintptr_t", ffi.from_buffer(out))), n)
    return bytes(out)


@host_operation(lambda args: args[3][:-1], 2)
def host_copy(device, host_src: int, host_dst: int, n: int, count: str) -> None:
    """Host memory → host memory, where vkep memory is host memory (a unified device): counted as
    `count` ("uploads" or "downloads"), after the device's work that may touch either side."""
    if n == 0:
        return
    _count(device, count, count[:-1] + "_bytes", n)
    _settle(device)
    _memmove(host_dst, host_src, n)


STAGING_SLACK = 256  # (see stage)


@host_operation("staging copy", 1)
def stage(device, host_src: int, n: int, small: bool = False) -> tuple[int, int]:
    """A device copy of host memory vkep does not own: (the staging pool's chunk, its device address). The
    caller gives the chunk back through its stream's release_after once the work that reads it is recorded,
    so that it returns only when that work completed; hence no wait here. `small`: a copy by choice
    (external.STAGE_BELOW), counted apart."""
    _count(device, *(("small_copies", "small_bytes") if small else ("staging_copies", "staging_bytes")), n)
    # (STAGING_SLACK bytes of the chunk on each side: a shader whose compiler hoists a load above its bounds test
    # reads a little before or past a tensor, which a chunk at the start or end of a block would turn into a fault,
    # as Mesa 26 did with nms.comp)
    staging = device.memory.staging_pool.alloc(n + 2 * STAGING_SLACK)
    if n:
        _memmove(device.memory.host_pointer(staging) + STAGING_SLACK, host_src, n)
    return staging, device.memory.device_address(staging) + STAGING_SLACK


def device_copy(device, src: int, dst: int, n: int, stream=None) -> None:
    """vkep memory → vkep memory, recorded on `stream` (or done now on a private stream)."""
    if n == 0 or src == dst:
        return
    _count(device, "device_copies", "device_copy_bytes", n)
    if stream is not None:
        stream.copy(src, dst, n)
        return
    own = device.default_stream()
    own.copy(src, dst, n)
    own.finish()


def _through_staging(device, n: int, before, staging_to: int = 0, staging_from: int = 0, after=None) -> None:
    _count(device, "staging_copies", "staging_bytes", n)
    pool = device.memory.host_pool
    staging = pool.alloc(n)
    try:
        if before:
            before(staging)
        stream = device.default_stream()
        if staging_to:
            stream.copy(staging, staging_to, n)
        else:
            stream.copy(staging_from, staging, n)
        stream.finish()
        if after:
            after(staging)
    finally:
        pool.free(staging)
