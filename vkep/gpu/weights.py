"""Packed weights on the device: uploaded once, shared by every kernel (and session) that packs the same
bytes the same way, freed when the last one lets go."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from vkep.gpu import transfer
from vkep.gpu.vk import ffi


@dataclass
class PackedWeight:
    address: int  # device address
    nbytes: int
    key: tuple
    users: int = 0
    owned: bool = True  # False: memory ORT owns (its shared pre-packed weight cache), only counted here


class WeightCache:
    def __init__(self, device):
        self.device = device
        self._entries: dict[tuple, PackedWeight] = {}
        self._lock = threading.RLock()
        self.packed_bytes = 0

    def acquire(self, data: bytes, tag: str) -> PackedWeight:
        """The device copy of `data` packed as `tag`, uploading it only if no one has it yet."""
        key = (hashlib.sha256(data).digest(), tag, len(data))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                pool = self.device.memory.device_pool
                address = pool.alloc(len(data))
                buf = ffi.from_buffer(data)
                transfer.upload(self.device, int(ffi.cast("uintptr_t", buf)), address, len(data))
                entry = self._entries[key] = PackedWeight(address, len(data), key)
                self.packed_bytes += len(data)
            entry.users += 1
            return entry

    def adopt(self, address: int, nbytes: int) -> PackedWeight:
        """A packed weight in memory someone else owns and frees (ORT's shared pre-packed weight cache
        hands every kernel that packs the same bytes one buffer): counted once, never freed here."""
        with self._lock:
            key = ("adopted", address)
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = PackedWeight(address, nbytes, key, owned=False)
                self.packed_bytes += nbytes
            entry.users += 1
            return entry

    def release(self, entry: PackedWeight) -> None:
        with self._lock:
            entry.users -= 1
            if entry.users == 0 and self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
                self.packed_bytes -= entry.nbytes
                if entry.owned:
                    self.device.synchronize()  # no recorded work may still read it
                    self.device.memory.device_pool.free(entry.address)
