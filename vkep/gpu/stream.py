"""A stream: dispatches recorded into one open command buffer, submitted only at sync points.

Each submit signals the stream's timeline semaphore with the next value; waiting for work means
waiting for a value. Command buffers are recycled once the semaphore has passed their value.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque

from vkep.gpu import hazards, trace
from vkep.gpu.vk import DeviceLost, check, ffi, lib, new

# What the thread is waiting for, set by the caller (a node's Compute): a limit in seconds (None: no
# limit) and a label for messages. Per thread, because one stream serves every session of a device.
waiting = threading.local()


class WaitLimitExceeded(TimeoutError):
    """The work did not complete within the limit the application set (a provider option)."""


class GridTooLarge(ValueError):
    """A dispatch wider than the device allows, of a shader that cannot be recorded in pieces (a kernel that
    should have declined the node)."""


class IndexOutOfRange(IndexError):
    """A shader met an index out of range (it clamped it); the run fails as on ORT's CPU EP."""

# A wait returns to Python this often (signals such as Ctrl-C are handled there, and the caller's limit
# is checked): slow work is never a failure by itself, however long a cold driver compiles.
WAIT_SLICE_NS = 100 * 10**6
# Submit after this many recorded commands so the device starts while the host records the rest:
# still one submit per batch, never one per node. Natively replayed nodes submit a full batch themselves
# (recorder.c vkep_roll) into one of up to SPARE_COMMAND_BUFFERS command buffers kept ready here.
BATCH_COMMANDS = 64
SPARE_COMMAND_BUFFERS = 8  # (at most recorder.c VKEP_SPARE)


class Stream:
    def __init__(self, device):
        self.device = device
        dev = device.handle
        pinfo = new("VkCommandPoolCreateInfo", sType=lib.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                    flags=lib.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                    queueFamilyIndex=device.info.compute_queue_family)
        pool = ffi.new("VkCommandPool*")
        check(lib.vkCreateCommandPool(dev, pinfo, ffi.NULL, pool), "vkCreateCommandPool")
        self.pool = pool[0]
        tinfo = new("VkSemaphoreTypeCreateInfo", sType=lib.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                    semaphoreType=lib.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
        sinfo = new("VkSemaphoreCreateInfo", sType=lib.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, pNext=tinfo)
        sem = ffi.new("VkSemaphore*")
        check(lib.vkCreateSemaphore(dev, sinfo, ffi.NULL, sem), "vkCreateSemaphore")
        self.timeline = sem[0]
        rec = ffi.new("vkep_recorder*")
        rec.device = dev
        rec.queue = device.queue
        rec.layout = device.pipelines.layout
        rec.timeline = self.timeline
        rec.batch_limit = BATCH_COMMANDS
        self.max_groups = device.info.max_workgroup_count
        rec.max_groups = list(self.max_groups)
        rec.queue_mutex = device.queue_mutex
        lib.vkep_recorder_init(rec)
        self.rec = rec
        self._idle: list = []
        self._in_flight: deque = deque()  # (value, command buffer)
        self.lock = threading.RLock()
        self.destroyed = False
        self._to_free: list = []  # [timeline value or None (not yet submitted), pool, address]
        self.submits = 0
        # debug mode only: the ranges of commands not yet known complete (see gpu.hazards)
        self.pending_log = hazards.PendingLog() if hazards.ENABLED else None

    # -- recording --------------------------------------------------------------------------------
    def _open(self) -> None:
        rec = self.rec
        begun = False
        lib.vkep_lock(rec)  # the native path begins command buffers of the same pool (external sync)
        try:
            self._take_retired()
            if not rec.recording:
                cmd = self._idle.pop() if self._idle else self._reclaim_or_allocate()
                check(lib.vkep_begin(rec, cmd), "vkBeginCommandBuffer")
                begun = True
            if not self.reusable:
                while rec.n_spare < SPARE_COMMAND_BUFFERS:
                    rec.spare[rec.n_spare] = self._idle.pop() if self._idle else self._reclaim_or_allocate()
                    rec.n_spare += 1
        finally:
            lib.vkep_unlock(rec)
        if begun and self.device.tracers:  # (a profiler times the batch: after the lock, it records)
            trace.batch_opened(self)

    def _take_retired(self) -> None:
        """Batches the native path submitted (vkep_roll) join the ones Python submitted."""
        rec = self.rec
        for i in range(rec.n_retired):
            self._in_flight.append((rec.retired_value[i], rec.retired[i]))
        rec.n_retired = 0

    @property
    def reusable(self) -> bool:
        return bool(self.rec.reusable)

    def _reclaim_or_allocate(self):
        if self._in_flight:
            done = self.completed_value()
            while self._in_flight and self._in_flight[0][0] <= done:
                self._idle.append(self._in_flight.popleft()[1])
            if self._idle:
                return self._idle.pop()
        info = new("VkCommandBufferAllocateInfo", sType=lib.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                   commandPool=self.pool, level=lib.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        out = ffi.new("VkCommandBuffer*")
        check(lib.vkAllocateCommandBuffers(self.device.handle, info, out), "vkAllocateCommandBuffers")
        return out[0]

    def dispatch(self, pipeline, push: bytes, groups: tuple[int, int, int], spans: bytes, nreads: int,
                 nwrites: int) -> None:
        """Record one dispatch. `spans` packs (lo, hi) address ranges: the reads, then the writes. A grid past
        the device's workgroup-count limit is recorded in pieces when the shader reads the group base."""
        if any(g > m for g, m in zip(groups, self.max_groups, strict=True)) and not self.device.pipelines.splits(pipeline):
            raise GridTooLarge(f"vkep: a grid of {groups} workgroups is past the device's limit {self.max_groups} "
                               "and its shader cannot be split (it does not read GROUP_BASE, common.glsl)")
        want = self.device.pipelines.push_bytes(pipeline)
        if want is not None and len(push) != want and all(groups):
            raise ValueError(f"vkep: {len(push)} bytes of push constants for a shader whose push-constant block "
                             f"asks for {want} (the kernel's packing and the shader disagree)")
        with self.lock:
            if not self.rec.recording:
                self._open()
            result = lib.vkep_dispatch(self.rec, pipeline, push, len(push), groups[0], groups[1], groups[2], spans,
                                       nreads, nwrites)
            if result:
                raise RuntimeError(f"vkep: could not record a dispatch (code {result})")
            if self.pending_log is not None:
                self.pending_log.record(spans, nreads, nwrites)
            if self.rec.commands >= BATCH_COMMANDS:
                self.flush()

    def on_open_buffer(self, record) -> None:
        """Call `record(command buffer)` on the open command buffer, to record a command the recorder does not
        know (a timestamp: gpu.timing). It counts as a command: the next flush submits it."""
        with self.lock:
            if not self.rec.recording:
                self._open()
            lib.vkep_lock(self.rec)  # the native replay path records into the same command buffer
            try:
                record(self.rec.cmd)
                self.rec.commands += 1  # (the buffer is submitted at the next flush, dispatch or not)
            finally:
                lib.vkep_unlock(self.rec)

    def copy(self, src: int, dst: int, nbytes: int) -> None:
        """Record a device copy between two vkep addresses."""
        memory = self.device.memory
        sblock, soff = memory.resolve(src)
        dblock, doff = memory.resolve(dst)
        src_addr, dst_addr = sblock.device_address + soff, dblock.device_address + doff
        with self.lock:
            self._open()
            lib.vkep_copy(self.rec, sblock.buffer, soff, dblock.buffer, doff, nbytes, src_addr, dst_addr)
            if self.pending_log is not None:
                self.pending_log.record(pack_spans([(src_addr, src_addr + nbytes)], [(dst_addr, dst_addr + nbytes)]), 1, 1)

    # -- synchronisation --------------------------------------------------------------------------
    def flush(self) -> int:
        """Submit what was recorded; returns the timeline value that marks its completion."""
        with self.lock:
            rec = self.rec
            lib.vkep_lock(rec)  # hold off the native replay path between the check and the submit
            try:
                value = self._flush_locked()
                if not self.destroyed and not rec.recording:
                    # the next command buffer is open at once: the native replay records only into an
                    # open one, and would hand the next node to Python to open it
                    self._open()
                return value
            finally:
                lib.vkep_unlock(rec)

    def _flush_locked(self) -> int:
        rec = self.rec
        self._take_retired()  # (first: _in_flight stays in timeline order)
        if (rec.recording and rec.commands) or rec.n_ext_signal:
            value = rec.submitted + 1
            cmd = rec.cmd if rec.recording else None
            start = trace.operation_start(self.device) if self.device.tracers else 0
            if start and cmd is not None:
                trace.batch_closing(self)
            check(lib.vkep_submit(rec, value), "vkQueueSubmit")
            if start:
                trace.submitted(self, value, start)
            for entry in self._to_free:
                if entry[0] is None:
                    entry[0] = value
            if cmd is not None:
                self._in_flight.append((value, cmd))
            if self.pending_log is not None:
                self.pending_log.submitted(value)
            self.submits += 1
        return rec.submitted

    def wait_external(self, semaphore, value: int) -> None:
        """Work recorded from now on starts once another API's timeline semaphore reaches `value` (a GPU
        wait: the host does not block)."""
        with self.lock:
            self.flush()  # what is already recorded does not wait
            check(lib.vkep_add_external(self.rec, semaphore, value, 0), "too many external waits")

    def signal_external(self, semaphore, value: int) -> None:
        """Another API's timeline semaphore reaches `value` once the work recorded so far has completed."""
        with self.lock:
            check(lib.vkep_add_external(self.rec, semaphore, value, 1), "too many external signals")
            self.flush()

    @property
    def recorder_address(self) -> int:
        """Address of the C recorder, for native code that records on this stream (see vkep_ready)."""
        return int(ffi.cast("uintptr_t", self.rec))

    @property
    def commands(self) -> int:
        return self.rec.total_commands

    def busy(self) -> bool:
        """True while something is recorded or submitted and not yet known to be complete."""
        with self.lock:
            if self.destroyed:
                return False
            rec = self.rec
            if rec.recording and rec.commands:
                return True
            return rec.submitted > self.completed_value()  # (batches the native path submitted included)

    def completed_value(self) -> int:
        out = ffi.new("uint64_t*")
        check(lib.vkGetSemaphoreCounterValue(self.device.handle, self.timeline, out), "vkGetSemaphoreCounterValue")
        return out[0]

    def wait(self, value: int, errors: bool = True) -> None:
        """Block until the timeline reaches `value`, in slices; fails only on device loss or past the
        limit the caller set in `waiting` (then naming what it waited for, and for how long). `errors`: also
        take the device's error word (a kernel's index check); False for work that sets none (gpu/ahead.py),
        so that a run's error is left to the run's own wait."""
        if not self.device.tracers or not value:
            return self._wait(value, errors)
        start = trace.operation_start(self.device)
        try:
            return self._wait(value, errors)
        finally:
            trace.waited(self, value, start)

    def _wait(self, value: int, errors: bool = True) -> None:
        if value:
            if self.device.lost:
                raise DeviceLost(f"vkep: the device was lost earlier ({self.device.lost}); waiting", -4)
            limit = getattr(waiting, "limit", None)
            start = time.monotonic()
            while True:
                result = lib.vkep_wait(self.device.handle, self.timeline, value, WAIT_SLICE_NS)
                if result != lib.VK_TIMEOUT:
                    break
                waited = time.monotonic() - start
                if limit is not None and waited > limit:
                    label = getattr(waiting, "label", None) or "recorded work"
                    raise WaitLimitExceeded(f"vkep: {label} did not complete within the wait limit of {limit:g} s "
                                            f"(waited {waited:.2f} s; the limit is the provider option wait_limit_s)")
            try:
                check(result, "vkWaitSemaphores")
            except DeviceLost as exc:
                self.device.lost = str(exc)
                raise
        self._release_done(value)
        if value and errors and self.device.take_errors():
            label = getattr(waiting, "label", None)
            raise IndexOutOfRange("vkep: an index was out of range in a Gather, GatherElements, GatherND, "
                                  "ScatterElements, ScatterND, MaxUnpool, EmbedLayerNormalization or ArrayFeatureExtractor "
                                  "node, a sequence length in an RNN, GRU, LSTM or ReverseSequence node, a NaN "
                                  "in a Binarizer node, or an unknown category in a OneHotEncoder node with zeros=0" + (f" (found when {label} waited)" if label else ""))

    def release_after(self, pool, address: int) -> None:
        """Free `address` once the work recorded so far has completed."""
        with self.lock:
            self._to_free.append([None, pool, address])

    def _release_done(self, done: int) -> None:
        with self.lock:
            keep = []
            for entry in self._to_free:
                if entry[0] is not None and entry[0] <= done:
                    entry[1].free(entry[2])
                else:
                    keep.append(entry)
            self._to_free = keep

    def finish(self) -> None:
        """Submit and wait: everything recorded so far has completed when this returns."""
        with self.lock:
            if not self.destroyed:
                self.wait(self.flush())

    def destroy(self) -> None:
        with self.lock:
            if self.destroyed:
                return
            self.destroyed = True
            if self.rec.recording and not self.device.lost:
                self.flush()
            if not self.device.lost:
                try:
                    self.wait(self.rec.submitted)
                except IndexOutOfRange:
                    pass  # the stream goes: nothing runs on to be failed
            dev = self.device.handle
            self.device.retired_commands += self.rec.total_commands
            self.device.retired_pieces += self.rec.pieces
            lib.vkDestroyCommandPool(dev, self.pool, ffi.NULL)
            lib.vkDestroySemaphore(dev, self.timeline, ffi.NULL)
            lib.vkep_recorder_destroy(self.rec)
            self.device.forget_stream(self)


def pack_spans(reads: list[tuple[int, int]], writes: list[tuple[int, int]]) -> bytes:
    flat = [x for span in reads + writes for x in span]
    return struct.pack(f"<{len(flat)}Q", *flat)
