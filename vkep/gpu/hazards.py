"""Debug mode for memory hazards between the host and recorded GPU work (`VKEP_DEBUG_HAZARDS=1`).

The rules it checks (docs/design.md, "Host access and reused memory"): a value the host reads is complete
when its producer's Compute returns, and the host writes vkep memory only after the GPU work that may
still touch it has completed. In debug mode every stream keeps the address ranges of the commands it
recorded until their submission completes, native replay is off (so every command passes here), and
each host access vkep makes or lets ORT make is checked against them *before* any wait that would hide
a violation: a conflict raises HazardError naming the access and the command's label.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

from vkep import options

ENABLED = bool(options.env("VKEP_DEBUG_HAZARDS"))


class HazardError(RuntimeError):
    """A host access to memory that recorded GPU work still reads or writes."""


@dataclass
class Access:
    value: int  # the stream's timeline value that marks the command complete (0: not yet submitted)
    reads: list[tuple[int, int]]
    writes: list[tuple[int, int]]
    label: str


class PendingLog:
    """The ranges of one stream's commands that may not have completed yet."""

    def __init__(self):
        self.entries: list[Access] = []
        self.lock = threading.Lock()
        self.label = ""  # what is recording now (a node's name), for messages

    def record(self, spans: bytes, nreads: int, nwrites: int) -> None:
        flat = struct.unpack(f"<{2 * (nreads + nwrites)}Q", spans[: 16 * (nreads + nwrites)])
        pairs = [(flat[2 * i], flat[2 * i + 1]) for i in range(nreads + nwrites)]
        with self.lock:
            self.entries.append(Access(0, pairs[:nreads], pairs[nreads:], self.label))

    def submitted(self, value: int) -> None:
        with self.lock:
            for entry in self.entries:
                if not entry.value:
                    entry.value = value

    def conflict(self, lo: int, hi: int, write: bool, completed: int) -> Access | None:
        with self.lock:
            self.entries = [e for e in self.entries if not e.value or e.value > completed]
            for entry in self.entries:
                spans = entry.writes + (entry.reads if write else [])
                if any(a < hi and lo < b for a, b in spans):
                    return entry
        return None


def check_host_access(device, address: int, nbytes: int, write: bool, what: str) -> None:
    """Raise HazardError if recorded GPU work that has not completed conflicts with a host read
    (`write` False: pending writes) or write (pending reads and writes) of [address, address+nbytes).
    `address` is a host pointer or a device address of vkep memory; other memory is not tracked."""
    if not ENABLED or nbytes <= 0:
        return
    memory = device.memory
    found = memory.spans.find(address)
    if found is None:
        return
    lo = found[0].device_address + found[1]
    for stream in device.streams_snapshot():
        log = stream.pending_log
        if log is None:
            continue
        entry = log.conflict(lo, lo + nbytes, write, stream.completed_value())
        if entry is not None:
            kind = "write" if write else "read"
            raise HazardError(f"vkep hazard: host {kind} of {nbytes} bytes at {address:#x} ({what}) while "
                              f"GPU work recorded by {entry.label or 'an unnamed command'} that "
                              f"{'reads or writes' if write else 'writes'} it has not completed")
