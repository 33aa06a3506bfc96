"""vkep's events in ORT's own profile (`SessionOptions.enable_profiling`, ORT 1.25+: OrtEp::CreateProfiler).

ORT asks each session's EP for a profiler and drives it: StartProfiling when profiling begins, StartEvent and
StopEvent around each of its own events (a node's `_kernel_time` among them, on the thread that runs the node's
Compute), EndProfiling to collect what the EP saw, which ORT writes into its JSON trace beside its own events.

What vkep reports (docs/design.md, "Profiling"):
- `kernel` events: each vkep node's GPU time, from two timestamp queries around its recorded work
  (gpu.timing.TimestampRing), tagged with the ORT event the node ran under (`parent_name`, `op_name`,
  `correlation_id`): the ORT node event with that name is the same execution.
- `api` events: the device's uploads, downloads, staging copies, submits and waits, timed on the host (gpu.trace).

While a session profiles, its nodes take the Python path (no native replay: that is where the timestamps are
written); nothing of this runs, and no plan changes, in a session that does not profile.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import threading
import time

from vkep.gpu import trace
from vkep.gpu.capture import CaptureStream
from vkep.gpu.timing import TimestampRing
from vkep.ort import api
from vkep.ort.api import callback, status_callback

PROFILER_API_VERSION = 25  # OrtEpProfilerImpl came with ORT 1.25
CATEGORY_KERNEL, CATEGORY_API = 2, 3  # OrtProfilingEventCategory
PROFILERS: dict[int, Profiler] = {}  # OrtEpProfilerImpl* address -> its Profiler
GPU_THREAD = 0x7F000000  # the pseudo thread id of a device's queue in the trace (one track per device)


class Profiler:
    def __init__(self, ep):
        lib = api.lib
        self.ep = ep
        # (re-entrant: a node's first timestamp may open a command buffer, whose batch pair is begun inside)
        self.lock = threading.RLock()
        self.active = False
        self.ort_start_ns = 0  # ORT's profiling start on its clock (the host's wall clock, CLOCK_REALTIME)
        # (trace.now ns, wall clock minus trace.now) read together at StartProfiling and as each host operation
        # starts and ends: ORT's events are on the wall clock and vkep's on the monotonic clock, which differ by a
        # step whenever the wall clock is set (NTP does), so each of vkep's times is mapped with the reading nearest
        # before it. (Read at the start: a submit's GPU work, and the operation itself, begin before it returns.)
        self.wall_readings: list[tuple[int, int]] = []
        self.stacks = threading.local()  # per thread: the correlation ids of the ORT events open on it
        self.host_events: list[tuple] = []  # (name, thread id, start ns, end ns, args)
        self.node_records: list[tuple] = []  # (correlation id, node, op type, ticket, submit key, input shapes)
        self.parents: dict[int, tuple[str, str]] = {}  # correlation id -> (ORT event name, op_name)
        self.unnamed: set[int] = set()  # correlation ids of node records whose ORT event has not stopped yet
        self.submit_start: dict[tuple[int, int], int] = {}  # (stream id, timeline value) -> host ns at submit
        self.wait_ends: dict[int, list[tuple[int, int]]] = {}  # stream id -> (timeline value, host ns) per wait
        self.begin_keys: dict[int, tuple[int, int]] = {}  # ticket -> (stream id, the submit carrying its begin)
        self.open_batches: dict[int, tuple] = {}  # stream id -> (stream, ticket of the pair around its open buffer)
        self.batches: list[int] = []  # tickets of the pairs around whole command buffers (the device's busy time)
        # a captured graph's times, read by its own table (capture_timing.py): node records as above with the
        # ticket's place taken by (begin, end) device ns, and its command buffers' (begin, end)
        self.graph_nodes: list[tuple] = []
        self.graph_batches: list[tuple[int, int]] = []
        self.ring: TimestampRing | None = None
        self.struct = s = api.new_struct("OrtEpProfilerImpl")
        s.ort_version_supported = PROFILER_API_VERSION
        s.Release = lib.py_profiler_release
        s.StartProfiling = lib.py_profiler_start
        s.StartEvent = lib.py_profiler_start_event
        s.StopEvent = lib.py_profiler_stop_event
        s.EndProfiling = lib.py_profiler_end
        PROFILERS[api.address(s)] = self
        self.pid = os.getpid()

    # -- ORT's calls ------------------------------------------------------------------------------------
    def start(self, offset_ns: int) -> None:
        # (read first: the time between ORT reading its clock and this one shifts every host event earlier by as
        # much on ORT's clock; under load it reached a replay's submit, test_profile says)
        now = trace.now()
        wall = time.time_ns()
        ep = self.ep
        with self.lock:
            self.ort_start_ns = wall - offset_ns
            self.wall_readings = [(now, wall - now)]
            self.active = True
        ep.profilers.append(self)
        if ep.device is not None:
            trace.listen(ep.device.gpu, self)
            for kernel in list(ep.kernels):  # plans made before: the nodes' next runs write timestamps
                kernel.invalidate_plan()

    def stop(self) -> None:
        ep = self.ep
        with self.lock:
            was, self.active = self.active, False
        if not was:
            return
        if self in ep.profilers:
            ep.profilers.remove(self)
        if ep.device is not None:
            trace.stop_listening(ep.device.gpu, self)
        with self.lock:
            opened, self.open_batches = list(self.open_batches.values()), {}
        for stream, ticket in opened:  # its first timestamp sits in an open command buffer: submit that while
            self.ring.drop(ticket)  # the query pool lives (a later session's submit would write a freed pool)
            stream.flush()

    def stack(self) -> list[int]:
        found = getattr(self.stacks, "ids", None)
        if found is None:
            found = self.stacks.ids = []
        return found

    # -- what vkep records -------------------------------------------------------------------------------
    def node_begin(self, stream) -> int | None:
        """Before a node records its work on `stream`: the first timestamp of its pair (None: no timestamps)."""
        with self.lock:
            if self.ring is None:
                self.ring = TimestampRing(self.ep.device.gpu)
            if not self.ring.available:
                return None
            ticket = self.ring.begin(stream)
            self.begin_keys[ticket] = carrier(stream)
            return ticket

    def node_end(self, stream, ticket: int | None, recorded: bool, kernel, inputs: list) -> None:
        """After the node recorded its work: the pair's second timestamp, and the node's record (a node that
        recorded no command, a view, has no GPU time) with its inputs' shapes, packed weights' as the graph has
        them (ORT's own node event lists no input vkep packed)."""
        if ticket is None:
            return
        with self.lock:
            if not recorded:
                self.ring.drop(ticket)
                self.begin_keys.pop(ticket, None)
                return
            self.ring.end(stream, ticket)
            correlation = self.current_event(expect_name=True)
            key = (self.begin_keys.pop(ticket), carrier(stream))
            self.node_records.append((correlation, kernel.node_name, kernel.spec.op, ticket, key,
                                      input_shapes(kernel, inputs)))

    def current_event(self, expect_name: bool = False) -> int:
        """The correlation id of the ORT event open on this thread (0: none); `expect_name`: an event of vkep's
        is tied to it, so its name is read when it stops."""
        stack = self.stack()
        correlation = stack[-1] if stack else 0
        if expect_name:
            with self.lock:
                self.unnamed.add(correlation)
        return correlation

    def add_gpu_time(self, correlation: int, node: str, op: str, shapes: str, keys: tuple,
                     times: tuple[int, int] | None) -> None:
        """A node's GPU time read elsewhere (a captured graph's table); `keys`: the submits that carried its
        begin and end, for the clock's bounds."""
        if times is not None and self.active:
            with self.lock:
                self.graph_nodes.append(((correlation, node, op, None, keys, shapes), times))

    def add_batch_time(self, times: tuple[int, int] | None) -> None:
        if times is not None and self.active:
            with self.lock:
                self.graph_batches.append(times)

    def batch_opened(self, stream) -> None:
        """A pair around the whole command buffer: its span is the device's busy time for it, which the nodes'
        pairs inside should cover (`vkep run --profile` prints how much they do)."""
        with self.lock:
            if not self.active or self.ring is None or not self.ring.available or isinstance(stream, CaptureStream):
                return  # (a graph being captured times its command buffers with pairs of its own: capture_timing)
            self.open_batches[id(stream)] = (stream, self.ring.begin(stream))

    def batch_closing(self, stream) -> None:
        with self.lock:
            stream, ticket = self.open_batches.pop(id(stream), (stream, None))
            if ticket is not None and self.ring is not None:
                self.ring.end(stream, ticket)
                self.batches.append(ticket)

    def operation_starting(self) -> None:
        if self.active:
            self._read_wall()

    def _read_wall(self) -> None:
        now = trace.now()
        self.wall_readings.append((now, time.time_ns() - now))

    def host_event(self, name: str, start_ns: int, end_ns: int, args: dict[str, str]) -> None:
        if self.active:
            self._read_wall()
            self.host_events.append((name, threading.get_native_id(), start_ns, end_ns, args))

    def waited(self, stream, value: int, start_ns: int, end_ns: int) -> None:
        if self.active:
            self._read_wall()
            self.wait_ends.setdefault(id(stream), []).append((value, end_ns))
            self.host_events.append(("wait", threading.get_native_id(), start_ns, end_ns,
                                     {"timeline value": str(value)}))

    def submitted(self, stream, value: int, start_ns: int, end_ns: int) -> None:
        if self.active:
            self._read_wall()
            self.submit_start[(id(stream), value)] = start_ns
            self.host_events.append(("submit", threading.get_native_id(), start_ns, end_ns,
                                     {"timeline value": str(value)}))

    # -- the events ORT writes ----------------------------------------------------------------------------
    def events(self) -> list[tuple]:
        """(category, thread id, name, timestamp µs, duration µs, args) of everything recorded, on ORT's clock."""
        with self.lock:
            if self.ring is not None:
                self.ring.collect()
            self.wall_readings.sort()  # (threads append theirs)
            out = []
            for name, tid, start, end, args in self.host_events:
                out.append((CATEGORY_API, tid, name, self._us(start), (end - start) // 1000, args))
            timed = [(record, self.ring.results.get(record[3])) for record in self.node_records]
            timed = [(record, ns) for record, ns in timed if ns is not None] + self.graph_nodes
            offset = self._gpu_offset(timed)
            gpu_tid = GPU_THREAD + (self.ep.device.info.index if self.ep.device is not None else 0)
            pairs = [self.ring.results.get(ticket) for ticket in self.batches] if self.ring is not None else []
            batches = [pair for pair in [*pairs, *self.graph_batches] if pair is not None]
            busy = busy_spans(batches)
            for (correlation, node, op, _, _, shapes), (begin, end) in timed:
                parent, op_name = self.parents.get(correlation, ("", op))
                args = {"op_name": op_name or op, "parent_name": parent, "node_name": node,
                        "correlation_id": str(correlation), "gpu_duration_ns": str(busy_within(begin, end, busy)),
                        "device": self.ep.device.info.name, "input_shapes": shapes}
                out.append((CATEGORY_KERNEL, gpu_tid, f"{node}_gpu", self._us(begin + offset),
                            round((end - begin) / 1000), args))
            device = self.ep.device.info.name if self.ep.device is not None else ""
            for begin, end in batches:  # (on the GPU track: a batch the nodes inside cover)
                out.append((CATEGORY_API, gpu_tid, "batch", self._us(begin + offset), round((end - begin) / 1000),
                            {"gpu_duration_ns": str(end - begin), "device": device}))
            self.batches.clear()
            self.graph_nodes.clear()
            self.graph_batches.clear()
            self.host_events.clear()
            self.node_records.clear()
            self.parents.clear()
            self.submit_start.clear()
            self.wait_ends.clear()
            self.begin_keys.clear()
            if self.ring is not None:
                self.ring.results.clear()
            return out

    def _us(self, host_ns: int) -> int:
        """A trace.now time in µs since ORT's profiling start, on ORT's clock."""
        readings = self.wall_readings
        at = max(bisect.bisect_right(readings, (host_ns, math.inf)) - 1, 0)  # (the first for times before it)
        return (host_ns + readings[at][1] - self.ort_start_ns) // 1000 if readings else 0

    def _gpu_offset(self, timed: list) -> int:
        """Host ns minus device ns. A command buffer runs after the host submitted it and completes before a wait
        for it returns: each pair bounds the offset from below (its begin's submit) and above (the first wait
        that covered its end's submit). Where 0 is within every bound the device's clock is the host's (lavapipe
        timestamps with CLOCK_MONOTONIC): 0. Otherwise the lowest offset that keeps every pair after its submit
        (exact for a batch that found the queue idle, as a run's first does)."""
        lows, highs = [], []
        for record, (begin, end) in timed:
            begin_key, end_key = record[4]
            if begin_key in self.submit_start:
                lows.append(self.submit_start[begin_key] - begin)
            covered = [done for value, done in self.wait_ends.get(end_key[0], ()) if value >= end_key[1]]
            if covered:
                highs.append(min(covered) - end)
        low, high = max(lows, default=None), min(highs, default=None)
        if (low is None or low <= 0) and (high is None or high >= 0):
            return 0
        return low if low is not None else high


def busy_spans(batches: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The device's busy time as sorted, disjoint spans: the union of its command buffers' (begin, end) pairs."""
    spans: list[tuple[int, int]] = []
    for begin, end in sorted(batches):
        if spans and begin <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((begin, end))
    return spans


def busy_within(begin: int, end: int, spans: list[tuple[int, int]]) -> int:
    """A node's GPU time: the part of its pair's span that command buffers ran. A node whose pair straddles a
    submit (its begin written as one batch's last command, its work in the next) would otherwise count the idle
    wait between the two batches. A span no timed batch covers (none recorded) is taken whole."""
    covered = sum(max(0, min(end, hi) - max(begin, lo)) for lo, hi in spans[max(
        bisect.bisect_right(spans, (begin, math.inf)) - 1, 0):bisect.bisect_left(spans, (end, -math.inf)) + 1])
    return covered if covered > 0 else end - begin


def input_shapes(kernel, inputs: list) -> str:
    """A node execution's input shapes as JSON, a weight vkep packed with the shape the graph gives it."""
    return json.dumps([list(kernel.weight_shapes[i]) if i in kernel.weight_shapes
                       else list(t.shape) if t is not None else None for i, t in enumerate(inputs)])


def carrier(stream) -> tuple[int, int]:
    """(stream, timeline value) of the submit that will carry what is recorded now: the open command buffer is the
    stream's next submit."""
    return id(stream), stream.rec.submitted + 1


def _profiler(this) -> Profiler:
    return PROFILERS[api.address(this)]


@status_callback("py_ep_create_profiler")
def _create_profiler(this, out):
    from vkep.ort.ep import ep_of

    out[0] = Profiler(ep_of(this)).struct


@callback("py_profiler_release")
def _release(this):
    profiler = PROFILERS.pop(api.address(this), None)
    if profiler is not None:
        profiler.stop()
        if profiler.ring is not None:
            profiler.ring.destroy()
    api.free_struct(this)


@status_callback("py_profiler_start")
def _start(this, offset_ns):
    _profiler(this).start(offset_ns)


@status_callback("py_profiler_start_event")
def _start_event(this, correlation_id):
    _profiler(this).stack().append(correlation_id)


@status_callback("py_profiler_stop_event")
def _stop_event(this, correlation_id, ort_event):
    profiler = _profiler(this)
    stack = profiler.stack()
    if stack and stack[-1] == correlation_id:
        stack.pop()
    elif correlation_id in stack:
        stack.remove(correlation_id)
    # the ORT event's name and op, for vkep's events under it (read only for those: ORT's event lives only now)
    with profiler.lock:
        if correlation_id not in profiler.unnamed:
            return
        profiler.unnamed.discard(correlation_id)
    lib, ffi = api.lib, api.ffi
    name, op = ffi.new("const char**"), ffi.new("const char**")
    api.check(lib.ep_ProfilingEvent_GetName(ort_event, name))
    api.check(lib.ep_ProfilingEvent_GetArgValue(ort_event, b"op_name", op))
    profiler.parents[correlation_id] = (ffi.string(name[0]).decode(errors="replace"),
                                        ffi.string(op[0]).decode(errors="replace") if op[0] != ffi.NULL else "")


@status_callback("py_profiler_end")
def _end(this, container):
    lib, ffi = api.lib, api.ffi
    profiler = _profiler(this)
    events = profiler.events()
    profiler.stop()
    made = []
    try:
        for category, tid, name, ts, duration, args in events:
            keys = [ffi.new("char[]", k.encode()) for k in args]
            values = [ffi.new("char[]", v.encode(errors="replace")) for v in args.values()]
            out = ffi.new("OrtProfilingEvent**")
            api.check(lib.ep_CreateProfilingEvent(category, profiler.pid, tid, name.encode(errors="replace"), ts,
                                                  duration, ffi.new("const char*[]", keys),
                                                  ffi.new("const char*[]", values), len(keys), out))
            made.append(out[0])
        if made:
            api.check(lib.ep_ProfilingEventsContainer_AddEvents(container, ffi.new("const OrtProfilingEvent*[]", made),
                                                                len(made)))
    finally:
        for event in made:
            lib.ep_ReleaseProfilingEvent(event)
