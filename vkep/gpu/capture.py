"""A stream whose command buffers are kept once submitted, to be submitted again: a captured graph.

Recording is the ordinary stream's (hazard-tracked barriers, a full barrier at the start of each
command buffer, so a replay is ordered after whatever the queue ran before it). Scratch memory the
recorded work uses is kept until the stream goes, since every replay uses it again.
"""

from __future__ import annotations

from vkep.gpu.stream import Stream
from vkep.gpu.vk import check, ffi, lib, new


class CaptureStream(Stream):
    def __init__(self, device):
        super().__init__(device)
        self.rec.reusable = 1
        self.captured: list = []  # command buffers, in submission order
        self._kept: list[tuple] = []  # (pool, address) of scratch memory the recorded work uses

    def _reclaim_or_allocate(self):
        # never a command buffer that was submitted: each one is part of the graph
        info = new("VkCommandBufferAllocateInfo", sType=lib.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                   commandPool=self.pool, level=lib.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        out = ffi.new("VkCommandBuffer*")
        check(lib.vkAllocateCommandBuffers(self.device.handle, info, out), "vkAllocateCommandBuffers")
        return out[0]

    def _flush_locked(self) -> int:
        before, cmd = self.rec.submitted, self.rec.cmd if self.rec.recording else None
        value = super()._flush_locked()
        if cmd is not None and value != before:
            self.captured.append(cmd)
        self._in_flight.clear()  # nothing goes back for reuse
        return value

    def release_after(self, pool, address: int) -> None:
        with self.lock:
            self._kept.append((pool, address))

    def replay(self) -> int:
        """Submit the captured command buffers again; returns the timeline value of their completion."""
        with self.lock:
            self.wait(self.rec.submitted)  # a command buffer is submitted again only once it completed
            value = self.rec.submitted + 1
            buffers = ffi.new("VkCommandBuffer[]", self.captured)
            check(lib.vkep_submit_again(self.rec, buffers, len(self.captured), value), "vkQueueSubmit")
            self.submits += 1
            return value

    def destroy(self) -> None:
        with self.lock:
            if self.destroyed:
                return
            super().destroy()
            for pool, address in self._kept:
                pool.free(address)
            self._kept.clear()
