"""GPU times of a captured graph (vkep/ort/capture.py) for ORT's profiler (vkep/ort/profiler.py).

A graph captured while ORT profiles its session records timestamp pairs into its command buffers, as the
uncaptured path does around each node and each command buffer, but at fixed queries of a table of its own
(gpu.timing.TimestampTable): every replay resets and writes the same pairs again, and a profiled replay reads
them back once its wait returned. The capture run itself gives its nodes' times tied to ORT's node events;
a replay runs no node, so its nodes' times are tied to the ORT event around the replay (`model_run`).

A graph captured while the session does not profile records no timestamps (its replays are left exactly as
they were); one captured while profiling keeps its pairs after profiling ends, and then its replays only
write them (the device's cost: two timestamps a node, nothing read on the host).
"""

from __future__ import annotations

from dataclasses import dataclass

from vkep.gpu import trace
from vkep.gpu.timing import TimestampTable
from vkep.ort.profiler import carrier, input_shapes


@dataclass
class TimedNode:
    node: str
    op: str
    shapes: str  # its inputs' shapes as JSON (packed weights as the graph has them)
    pair: int  # its pair in the table
    correlation: int  # the ORT event it ran under in the capture run
    keys: tuple  # (stream, timeline value) of the submits carrying its begin and end in the capture run


class GraphTiming:
    """The timestamp pairs of one captured graph: its nodes' and its command buffers'. While the graph is being
    captured it listens to the device (gpu.trace) for its own stream's command buffers."""

    def __init__(self, gpu, stream, profiler):
        self.gpu = gpu
        self.stream = stream
        self.profiler = profiler  # the one profiling when the capture ran (a replay reports to the one active then)
        self.table = TimestampTable(gpu)
        self.nodes: list[TimedNode] = []
        self.batches: list[int] = []  # the pair of each command buffer
        self.open_batch: int | None = None  # the pair of the command buffer being recorded
        self.open_batch_commands = 0  # that buffer's commands once its first timestamp was written
        self.begin_keys: dict[int, tuple] = {}  # pair -> the capture run's submit carrying its begin
        self.capturing = False

    @property
    def available(self) -> bool:
        return self.table.available

    def start_capture(self) -> None:
        self.capturing = True
        trace.listen(self.gpu, self)

    def end_capture(self) -> None:
        """Before the capture's last flush: the open command buffer's pair ends in it; no later command buffer of
        the stream gets a pair (one opened after the last flush stays empty and is never submitted)."""
        stream = self.stream
        if self.open_batch is not None and stream.rec.commands == self.open_batch_commands:
            # a buffer opened after the run's last flush holds only the pair's first timestamp: left out of the
            # graph (never submitted: the stream records nothing more), as it is when not profiling
            stream.rec.commands = 0
            self.table.drop_last(self.open_batch)
            self.open_batch = None
        elif self.open_batch is not None:
            self.batch_closing(stream)
        self.capturing = False
        trace.stop_listening(self.gpu, self)

    # -- the nodes (kernel.py calls these as it does the profiler's) ----------------------------------------
    def node_begin(self, stream) -> int | None:
        if not self.capturing or stream is not self.stream:
            return None
        pair = self.table.begin(stream)
        self.begin_keys[pair] = carrier(stream)
        return pair

    def node_end(self, stream, pair: int | None, recorded: bool, kernel, inputs: list) -> None:
        if pair is None:
            return
        self.table.end(stream, pair)  # (a node that recorded nothing, a view: an empty pair, not reported)
        begin_key = self.begin_keys.pop(pair)
        if not recorded:
            return
        correlation = self.profiler.current_event(expect_name=True)
        self.nodes.append(TimedNode(kernel.node_name, kernel.spec.op, input_shapes(kernel, inputs), pair, correlation,
                                    (begin_key, carrier(stream))))

    # -- gpu.trace's listener: the graph's command buffers --------------------------------------------------
    def batch_opened(self, stream) -> None:
        if self.capturing and stream is self.stream:
            self.open_batch = self.table.begin(stream)
            self.open_batch_commands = stream.rec.commands

    def batch_closing(self, stream) -> None:
        if stream is self.stream and self.open_batch is not None:
            self.table.end(stream, self.open_batch)
            self.batches.append(self.open_batch)
            self.open_batch = None

    def operation_starting(self) -> None:
        pass

    def host_event(self, name, start_ns, end_ns, args) -> None:
        pass

    def submitted(self, stream, value, start_ns, end_ns) -> None:
        pass

    def waited(self, stream, value, start_ns, end_ns) -> None:
        pass

    # -- reporting ------------------------------------------------------------------------------------------
    def report_capture_run(self) -> None:
        """After the capture run completed: its nodes' and command buffers' times, each node tied to ORT's event
        of its execution, to the profiler that was profiling it."""
        times = self.table.read()
        profiler = self.profiler
        for n in self.nodes:
            profiler.add_gpu_time(n.correlation, n.node, n.op, n.shapes, n.keys, times[n.pair])
        for pair in self.batches:
            profiler.add_batch_time(times[pair])

    def report_replay(self, profiler, key: tuple[int, int]) -> None:
        """After a replay's wait (`key`: its stream and timeline value): every node's time, tied to the ORT event
        open around the replay."""
        times = self.table.read()
        correlation = profiler.current_event(expect_name=True)
        for n in self.nodes:
            profiler.add_gpu_time(correlation, n.node, n.op, n.shapes, (key, key), times[n.pair])
        for pair in self.batches:
            profiler.add_batch_time(times[pair])

    def destroy(self) -> None:
        """(after the graph's stream is destroyed: no submit writes the pairs any more)"""
        if self.capturing:
            self.capturing = False
            trace.stop_listening(self.gpu, self)
        self.table.destroy()
