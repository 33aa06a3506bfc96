"""Graph capture (the EP option enable_graph_capture): a run's device work recorded once, then every run
is one submit of the recorded command buffers (docs/design.md, "Graph capture").

ORT drives it: it asks IsGraphCaptured before each run; until that says yes it runs the graph normally
(OnRunStart, the nodes, OnRunEnd), and from then on it calls ReplayGraph instead of running any node.
vkep captures the run after WARMUP_RUNS ordinary ones, into a stream of its own. For the captured
addresses to stay valid, the chunks ORT frees while the capture runs are held for the graph instead of
reused and scratch memory stays allocated, until the graph is released. Inputs and outputs must be vkep
memory: host memory the device would read in place may be gone by a replay (ORT hands ReplayGraph no
tensors to check), so a capture that meets it fails, naming how to bind vkep memory instead.
"""

from __future__ import annotations

from vkep.gpu import trace, transfer
from vkep.gpu.capture import CaptureStream
from vkep.ort import api
from vkep.ort.api import callback, status_callback
from vkep.ort.capture_timing import GraphTiming
from vkep.ort.memory import allocators_of

WARMUP_RUNS = 1  # ordinary runs before the one captured: plans, lazily made state, ORT's memory pattern
GRAPH_ID_KEY = b"gpu_graph_id"  # the run config entry ORT passes on as graph_annotation_id


class CaptureError(RuntimeError):
    """The captured run did something a replay would not repeat."""


# what a capture that met host memory says to do instead
HINT = ("bind every input and output with IOBinding to an OrtValue in vkep memory, e.g. "
        "OrtValue.ortvalue_from_shape_and_type(shape, dtype, memory_info=ep_device.memory_info("
        "OrtDeviceMemoryType.HOST_ACCESSIBLE)) (DEFAULT on a discrete GPU), refilled in place between runs. On a "
        "discrete GPU, a computed value at an input vkep packs (a MatMul's B) also passes through host memory, "
        "which no binding avoids")


class CapturedGraph:
    def __init__(self, ep):
        self.ep = ep
        self.gpu = ep.device.gpu
        self.stream = CaptureStream(self.gpu)
        with self.gpu.streams_lock:
            self.gpu.streams.add(self.stream)
        self.kept_chunks: list[tuple] = []  # (allocator, pointer, size) held from ORT's allocators
        self.problems: list[str] = []  # host memory the captured run met (see host_memory_used)
        self.timing: GraphTiming | None = None  # its timestamp pairs, when captured while ORT profiles the session

    def begin(self) -> None:
        self.gpu.synchronize()  # what other streams recorded before is submitted ahead of the graph
        if self.ep.profilers:
            timing = GraphTiming(self.gpu, self.stream, self.ep.profilers[0])
            if timing.available:
                self.timing = timing
                timing.start_capture()
            else:
                timing.destroy()
        recorder = api.ffi.cast("void*", self.stream.recorder_address)
        for kernel in self.ep.kernels:
            kernel.capture = self
            kernel.struct.capture_recorder = recorder
        for allocator in allocators_of(self.ep.device):
            allocator.hold(True)

    def end(self) -> None:
        try:
            if self.timing is not None:
                self.timing.end_capture()
            self.stream.finish()  # the captured run's own results
            if self.timing is not None:
                self.timing.report_capture_run()
        finally:
            for kernel in self.ep.kernels:
                kernel.capture = None
                kernel.struct.capture_recorder = api.ffi.NULL
            for allocator in allocators_of(self.ep.device):
                allocator.hold(False)
                self.kept_chunks.extend((allocator, pointer, size) for pointer, size in allocator.take_held())
        if self.problems:
            shown = list(dict.fromkeys(self.problems))
            more = f" (and {len(shown) - 3} more)" if len(shown) > 3 else ""
            raise CaptureError("vkep: cannot capture the graph (EP option enable_graph_capture): "
                               + "; ".join(shown[:3]) + more + f". To capture, {HINT}")

    def host_memory_used(self, what: str) -> None:
        self.problems.append(f"{what} reads or writes host memory that is not vkep's, which a replay may find "
                             "gone or changed")

    def replay(self) -> None:
        if self.timing is not None and self.ep.profilers:
            return self._replay_profiled(self.ep.profilers[0])
        self.stream.wait(self.stream.replay())

    def _replay_profiled(self, profiler) -> None:
        """A replay whose submit is an event, and whose pairs are read once it completed."""
        start = trace.operation_start(self.stream.device)
        value = self.stream.replay()
        profiler.submitted(self.stream, value, start, trace.now())
        self.stream.wait(value)
        self.timing.report_replay(profiler, (id(self.stream), value))

    def release(self) -> None:
        if not self.stream.destroyed:
            self.stream.destroy()  # waits for a replay still running
        if self.timing is not None:
            self.timing.destroy()
            self.timing = None
        for allocator, pointer, size in self.kept_chunks:
            allocator.give_back(pointer, size)
        self.kept_chunks.clear()


def _graph_id(run_options) -> int:
    if run_options == api.ffi.NULL:
        return 0
    value = api.lib.ort_GetRunConfigEntry(run_options, GRAPH_ID_KEY)
    if value == api.ffi.NULL:
        return 0
    text = api.ffi.string(value).decode()
    try:
        return int(text)
    except ValueError:
        raise api.OrtError(f"vkep: run config entry gpu_graph_id={text!r} is not an integer",
                           api.ORT_INVALID_ARGUMENT) from None


def enable(ep) -> None:
    """Give ORT the graph-capture entry points of `ep` (its option enable_graph_capture=1)."""
    s, lib, ffi = ep.struct, api.lib, api.ffi
    s.OnRunStart = ffi.cast("void*", lib.py_ep_on_run_start)  # (OnRunEnd is the EP's: ep.py calls end_run)
    s.IsGraphCaptureEnabled = ffi.cast("void*", lib.py_ep_is_graph_capture_enabled)
    s.IsGraphCaptured = ffi.cast("void*", lib.py_ep_is_graph_captured)
    s.ReplayGraph = ffi.cast("void*", lib.py_ep_replay_graph)
    s.ReleaseCapturedGraph = ffi.cast("void*", lib.py_ep_release_captured_graph)


def release_all(ep) -> None:
    for graph in list(ep.graphs.values()):
        graph.release()
    ep.graphs.clear()


def _ep(this):
    from vkep.ort.ep import ep_of

    return ep_of(this)


@status_callback("py_ep_on_run_start")
def _on_run_start(this, run_options):
    ep = _ep(this)
    graph_id = _graph_id(run_options)
    if graph_id == -1 or graph_id in ep.graphs or ep.device is None:
        return
    runs = ep.runs_before_capture.get(graph_id, 0)
    _rewind_states(ep, first=runs == 0)
    if runs < WARMUP_RUNS:
        ep.runs_before_capture[graph_id] = runs + 1
        return
    ep.capturing = CapturedGraph(ep)
    ep.capturing.begin()


def _rewind_states(ep, first: bool) -> None:
    """ORT runs a graph it captures WARMUP_RUNS + 1 times within the application's first Run, and returns the last:
    memory that kernels carry from run to run (a random engine's draws, Call.state) goes back, before each of those
    runs but the first, to what it held before the first, so that the run the application sees continues from
    where its previous Run left it (the CPU EP runs once)."""
    states = [state for k in ep.kernels if k.impl.draws_on for state in k.states()]
    if ep.device is None:
        return
    gpu = ep.gpu
    if first:
        ep.states_before_capture = {address: transfer.read(gpu, address, nbytes) for address, nbytes in states}
        return
    for address, nbytes in states:  # (one made since: zeroed, as a first run finds it)
        data = ep.states_before_capture.get(address, bytes(nbytes))
        transfer.upload(gpu, int(api.ffi.cast("uintptr_t", api.ffi.from_buffer(data))), address, nbytes)


def end_run(ep, run_options) -> None:
    """The end of a run (ep.py's OnRunEnd): the graph it captured, if any, is ready to replay."""
    graph, ep.capturing = ep.capturing, None
    if graph is None:
        return
    try:
        graph.end()
    except BaseException:
        graph.release()
        raise
    ep.graphs[_graph_id(run_options)] = graph
    ep.log.info(f"captured a graph of {len(graph.stream.captured)} command buffer(s) "
                f"({graph.stream.commands} commands); later runs replay it")


@callback("py_ep_is_graph_capture_enabled")
def _is_graph_capture_enabled(this):
    return bool(_ep(this).settings["enable_graph_capture"])


@callback("py_ep_is_graph_captured")
def _is_graph_captured(this, graph_id):
    return graph_id in _ep(this).graphs


@status_callback("py_ep_replay_graph")
def _replay_graph(this, graph_id):
    graph = _ep(this).graphs.get(graph_id)
    if graph is None:
        raise api.OrtError(f"vkep: no captured graph {graph_id} to replay", api.ORT_INVALID_ARGUMENT)
    graph.replay()


@status_callback("py_ep_release_captured_graph")
def _release_captured_graph(this, graph_id):
    graph = _ep(this).graphs.pop(graph_id, None)
    if graph is not None:
        graph.release()
