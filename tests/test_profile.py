"""ORT's own profiler records vkep's events (vkep/ort/profiler.py): each vkep node's GPU time beside ORT's node
event of the same execution, the device's host operations, `vkep run --profile`; a session that does not profile
is left as it was (no events, native replay)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import defaultdict

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_graph_capture import _bound

import vkep
from vkep import cli, models, runner
from vkep.run import profile

VKEP = "VulkanExecutionProvider"
CONV_FLOPS = 2 * 1 * 8 * 16 * 16 * 8 * 3 * 3  # N x Cout x H x W outputs, each Cin x 3 x 3 multiply-adds


def small_model() -> onnx.ModelProto:
    """Every node records GPU work: a Conv (Winograd: vkep packs its weight transformed), Relu, MatMul with a
    constant, Add."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "m"], ["p"], name="matmul"),
             helper.make_node("Add", ["p", "r"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "profiled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
        [numpy_helper.from_array(rng.random((8, 8, 3, 3), np.float32) * 0.1, "w"),
         numpy_helper.from_array(rng.random((16, 16), np.float32) * 0.1, "m")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", models.OPSET)], ir_version=models.IR_VERSION)


def profiled_session(model, prefix) -> ort.InferenceSession:
    return runner.vkep_session(model, disable_cpu_fallback=True, profile_prefix=str(prefix))


def feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((1, 8, 16, 16)).astype(np.float32)}


def test_trace_holds_each_vkep_nodes_gpu_time_beside_ort_s_node_event(ep_devices, tmp_path):
    session = profiled_session(small_model(), tmp_path / "trace")
    runs = 3
    for _ in range(runs):
        session.run(None, feeds())
    check_gpu_times_within_their_nodes(json.loads(open(session.end_profiling()).read()), runs)


def test_gpu_times_stay_within_their_nodes_when_the_wall_clock_is_set(ep_devices, tmp_path):
    """ORT's profiling clock is the wall clock (CLOCK_REALTIME), which NTP or an administrator may set while a
    session profiles; vkep's times are on the monotonic clock. Set on 20 ms between two runs, ORT's later events
    are 20 ms later: vkep's must move with them, or each would start before its node (a CI run put one 3.4 ms past
    its run's end). (Forward, not back: ORT's runs stay in order on its timeline, where each node event is matched
    with the run that holds it.) vkep reads both clocks as each host operation starts: a submit's GPU work may begin
    before vkQueueSubmit returns, and a reading taken after it mapped such work with the reading before the step
    (with a 5 ms sleep after each submit, this failed every time)."""
    session = profiled_session(small_model(), tmp_path / "trace")
    session.run(None, feeds())
    step = 0.02
    try:
        time.clock_settime(time.CLOCK_REALTIME, time.time() + step)
    except PermissionError:
        pytest.skip("setting the wall clock needs CAP_SYS_TIME")
    try:
        for _ in range(2):
            session.run(None, feeds())
    finally:
        time.clock_settime(time.CLOCK_REALTIME, time.time() - step)
    check_gpu_times_within_their_nodes(json.loads(open(session.end_profiling()).read()), 3)


def check_gpu_times_within_their_nodes(events: list[dict], runs: int) -> None:
    node_events = defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            node_events[e["name"]].append(e)
    assert {e["args"]["provider"] for evs in node_events.values() for e in evs} == {VKEP}
    model_runs = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    assert len(model_runs) == runs
    gpu = defaultdict(list)
    for e in events:
        if e.get("cat") == "Kernel" and "gpu_duration_ns" in e.get("args", {}):
            gpu[e["args"]["parent_name"]].append(e)
    assert set(gpu) == set(node_events) == {f"{n}_kernel_time" for n in ("conv", "relu", "matmul", "add")}
    for parent, evs in gpu.items():
        ort_evs = sorted(node_events[parent], key=lambda e: e["ts"])
        assert len(evs) == len(ort_evs) == runs, parent  # every execution of every vkep node
        for mine, theirs in zip(sorted(evs, key=lambda e: e["ts"]), ort_evs, strict=True):
            assert int(mine["args"]["gpu_duration_ns"]) > 0, mine
            assert mine["args"]["op_name"] == theirs["args"]["op_name"]
            assert mine["args"]["node_name"] + "_kernel_time" == parent
            # on ORT's profiling clock, the GPU ran the node's work after its Compute began and before its run
            # returned (the run waits for the graph's output)
            run = next(r for r in model_runs if r["ts"] <= theirs["ts"] <= r["ts"] + r["dur"])
            assert theirs["ts"] <= mine["ts"] <= mine["ts"] + mine["dur"] <= run["ts"] + run["dur"] + 2, (mine, run)
    # the host's operations of the device: submits and waits every run (timed on the host)
    names = [e["name"] for e in events if e.get("cat") == "Api"]
    assert names.count("submit") >= runs and names.count("wait") >= runs, names
    assert all(e["dur"] >= 0 for e in events if e.get("cat") == "Api")


def test_uploads_and_downloads_are_events_one_for_each_counted(tmp_path):
    """On the discrete path (forced) ORT moves the input in and the output out through vkep's data transfer:
    one upload and one download event each, as vkep.stats() counts them."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import vkep
        from test_profile import small_model, feeds, profiled_session
        vkep.register()
        vkep.reset_stats()
        session = profiled_session(small_model(), {str(tmp_path / "t")!r})
        for _ in range(2):
            session.run(None, feeds())
        path = session.end_profiling()
        print(json.dumps({{"path": path, "stats": vkep.stats()[0]}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VKEP_FORCE_DISCRETE": "1"})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    events = json.loads(open(result["path"]).read())
    api = defaultdict(list)
    for e in events:
        if e.get("cat") == "Api":
            api[e["name"]].append(e)
    stats = result["stats"]
    assert stats["uploads"] >= 2 and stats["downloads"] >= 2, stats
    assert len(api["upload"]) == stats["uploads"] and len(api["download"]) == stats["downloads"], {
        k: len(v) for k, v in api.items()}
    assert sum(int(e["args"]["bytes"]) for e in api["upload"]) == stats["upload_bytes"]
    assert sum(int(e["args"]["bytes"]) for e in api["download"]) == stats["download_bytes"]
    assert api["submit"] and api["wait"]


def test_a_session_that_does_not_profile_keeps_native_replay_and_records_nothing(ep_devices, tmp_path):
    from vkep.gpu.device import opened_devices
    from vkep.ort import ep as ep_module

    model = small_model()
    quiet = runner.vkep_session(model, disable_cpu_fallback=True)
    profiled = profiled_session(model, tmp_path / "trace")
    for session in (quiet, profiled):
        session.run(None, feeds())
    vkep.reset_stats()
    for _ in range(3):
        quiet.run(None, feeds())
    assert vkep.stats()["process"]["nodes_replayed_natively"] > 0
    vkep.reset_stats()
    for _ in range(3):
        profiled.run(None, feeds())
    assert vkep.stats()["process"]["nodes_replayed_natively"] == 0  # profiled: through Python, timed
    assert sum(1 for ep in ep_module.EPS.values() if ep.profilers) == 1  # only the profiled session's
    profiled.end_profiling()
    assert not any(ep.profilers for ep in ep_module.EPS.values())
    assert all(device.tracers == () for device in opened_devices())  # no hook hears anything
    vkep.reset_stats()
    for _ in range(3):
        profiled.run(None, feeds())  # profiling ended: plans again
    assert vkep.stats()["process"]["nodes_replayed_natively"] > 0


def test_vkep_run_profile_writes_the_trace_and_prints_the_table(ep_devices, tmp_path, capsys):
    path = tmp_path / "model.onnx"
    onnx.save(small_model(), path)
    trace = tmp_path / "out" / "trace.json"
    trace.parent.mkdir()
    assert cli.main(["run", str(path), "--profile", str(trace), "--runs", "2"]) == 0
    out, err = capsys.readouterr()
    assert "vkep: error" not in err, err
    assert list(trace.parent.iterdir()) == [trace]  # ORT's file, moved to the name asked for
    events = json.loads(trace.read_text())
    summary = profile.summarize(events, None)
    rows = {r["node"]: r for r in summary["nodes"]}
    assert set(rows) == {"conv", "relu", "matmul", "add"}
    assert all(r["clock"] == "gpu" and r["ms"] > 0 and r["executions"] == 3 for r in rows.values()), rows
    # the Conv's cost counts its packed weight (ORT's node event no longer lists it)
    conv = rows["conv"]
    assert conv["gflops"] * 1e9 * conv["ms"] / 1e3 == pytest.approx(CONV_FLOPS, rel=1e-9)
    assert rows["add"]["gbps"] is not None and rows["add"]["gflops"] is None
    assert f"profile: {trace}" in out and "device FMA ceiling" in out
    table = out[out.index("profile:"):].splitlines()
    assert table[2].split()[:2] == ["node", "op"]
    conv_line = next(line for line in table if line.split()[:2] == ["conv", "Conv"])
    assert conv_line.split()[-1].endswith("%"), conv_line  # its share of the FMA ceiling


@pytest.mark.parametrize("op,ins,outs,want", [
    ("Conv", [[1, 8, 16, 16], [4, 2, 3, 3]], [[1, 4, 14, 14]], 2 * 4 * 14 * 14 * 2 * 9),  # group 4: Cin/g = 2
    ("ConvTranspose", [[1, 3, 5, 5], [3, 6, 2, 2]], [[1, 6, 10, 10]], 2 * 3 * 5 * 5 * 6 * 4),
    ("MatMul", [[2, 7, 5], [5, 3]], [[2, 7, 3]], 2 * 2 * 7 * 3 * 5),
    ("Gemm", [[5, 7]], [[7, 3]], 2 * 7 * 3 * 5),  # transA: A is [K, M]; B packed (absent)
    ("QLinearConv", [[1, 2, 4, 4], [], [], [3, 2, 1, 1]], [[1, 3, 4, 4]], 2 * 3 * 16 * 2),
    ("Relu", [[4]], [[4]], None),
])
def test_flops_of_an_execution_from_its_shapes(op, ins, outs, want):
    assert profile.flops(op, ins, outs) == want


def test_a_profiled_resnet50_s_node_times_cover_the_gpu_s_busy_time(ep_devices, tmp_path):
    """vkep's kernel events account for the device's work: over a profiled light_resnet50 run the nodes' own GPU
    times sum to within 10% of the time its command buffers ran (vkep's `batch` events: a timestamp pair around
    each whole command buffer). The nodes' pairs are BOTTOM_OF_PIPE, so they partition the busy time; work outside
    any node's pair (a copy, a node without its pair) shows as less. A node whose pair straddles a submit (its work
    fills a batch) counts only the part batches ran, not the host's wait between them (which a loaded machine
    stretches)."""
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_resnet50.onnx")
    model = onnx.load(path)
    session = profiled_session(model, tmp_path / "trace")
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    session.run(None, {model.graph.input[0].name: x})
    summary = profile.summarize(json.loads(open(session.end_profiling()).read()), None)
    assert {r["ep"] for r in summary["nodes"]} == {VKEP}
    busy, kernels = summary["gpu_busy_ms"], summary["gpu_kernels_ms"]
    assert busy > 0 and abs(kernels - busy) <= 0.1 * busy, (kernels, busy)


def test_a_node_straddling_a_submit_counts_only_what_batches_ran():
    """Batches [0, 100] and [250, 400] (merged with one overlapping [90, 120]): a pair from 80 to 300 spans the
    host's wait from 120 to 250, which is not the node's; a pair no batch covers is taken whole."""
    from vkep.ort.profiler import busy_spans, busy_within

    spans = busy_spans([(250, 400), (0, 100), (90, 120)])
    assert spans == [(0, 120), (250, 400)]
    assert busy_within(80, 300, spans) == 40 + 50
    assert busy_within(260, 300, spans) == 40
    assert busy_within(500, 530, spans) == 30
    assert busy_within(0, 400, []) == 400


# -- graph capture (EP option enable_graph_capture): a replay runs no node, its command buffers hold the pairs --

CAPTURE = {"enable_graph_capture": "1"}
HOST_CLOCK_SLACK_US = 5000


def captured_profiled_session(model, prefix, ep_devices, inputs: dict[str, tuple], outputs: dict[str, tuple]):
    """A profiled session that captures its graph, and its binding: (session, binding, {name: OrtValue})."""
    session = runner.vkep_session(model, disable_cpu_fallback=True, profile_prefix=str(prefix), ep_options=CAPTURE)
    return session, *_bound(session, ep_devices, inputs, outputs)


def _replays(events: list[dict]) -> list[dict]:
    """ORT's model_run events of the runs that ran no node (ReplayGraph)."""
    node_times = [e["ts"] for e in events if e.get("cat") == "Node"]
    return [r for r in events if r.get("cat") == "Session" and r["name"] == "model_run"
            and not any(r["ts"] <= t <= r["ts"] + r["dur"] for t in node_times)]


def test_replays_of_a_captured_graph_record_each_node_s_gpu_time(ep_devices, tmp_path):
    """The captured command buffers hold each node's timestamp pair: every replay reports every node's GPU time
    (tied to ORT's event around the replay, within it on ORT's clock), its command buffers' times and its submit
    and wait; the capture run's nodes are tied to their own ORT node events; the answers stay right, and after
    end_profiling the replays go on, reporting nothing."""
    from vkep.ort import ep as ep_module

    session, binding, values = captured_profiled_session(small_model(), tmp_path / "trace", ep_devices,
                                                         {"x": (1, 8, 16, 16)}, {"y": (1, 8, 16, 16)})
    cpu = runner.cpu_session(small_model())
    rng = np.random.default_rng(2)

    def run_and_check():
        x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
        values["x"].update_inplace(x)
        session.run_with_iobinding(binding)
        np.testing.assert_allclose(values["y"].numpy(), cpu.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)

    for _ in range(4):  # ORT's first Run: a warm-up run and the captured one; then three replays
        run_and_check()
    graphs = [g for ep in ep_module.EPS.values() for g in ep.graphs.values()]
    assert len(graphs) == 1 and graphs[0].timing is not None
    events = json.loads(open(session.end_profiling()).read())
    replays = _replays(events)
    assert len(replays) == 3, [e["name"] for e in events if e.get("cat") == "Session"]
    gpu = [e for e in events if e.get("cat") == "Kernel" and "gpu_duration_ns" in e.get("args", {})]
    names = {"conv", "relu", "matmul", "add"}
    for run in replays:
        inside = [e for e in gpu if run["ts"] <= e["ts"] <= e["ts"] + e["dur"] <= run["ts"] + run["dur"] + 2]
        assert sorted(e["args"]["node_name"] for e in inside) == sorted(names), (run, inside)
        assert all(e["args"]["parent_name"] == "model_run" and int(e["args"]["gpu_duration_ns"]) > 0
                   and e["args"]["op_name"] == {"conv": "Conv", "relu": "Relu", "matmul": "MatMul", "add": "Add"}[
                       e["args"]["node_name"]] for e in inside), inside
        # (vkep's host events are on ORT's clock through one offset read when profiling started, later than ORT
        # read its own: they may show earlier by that gap, a few ms on a loaded machine, never later)
        api = [e["name"] for e in events if e.get("cat") == "Api" and run["ts"] - HOST_CLOCK_SLACK_US <= e["ts"]
               <= run["ts"] + run["dur"]]
        assert api.count("batch") >= 1 and "submit" in api and "wait" in api, api
    # the warm-up run's and the captured run's nodes: their GPU times beside ORT's node events
    tied = [e for e in gpu if e["args"]["parent_name"].endswith("_kernel_time")]
    assert sorted(e["args"]["parent_name"] for e in tied) == sorted(f"{n}_kernel_time" for n in names for _ in range(2))
    assert len(gpu) == len(tied) + 3 * len(names)
    rows = profile.summarize(events, None)["nodes"]  # (vkep run --profile's table counts the replays' executions)
    assert {r["node"]: (r["clock"], r["executions"]) for r in rows} == {n: ("gpu", 5) for n in names}
    # not profiling any more: the graph still replays, and nothing is recorded
    assert not any(ep.profilers for ep in ep_module.EPS.values())
    for _ in range(2):
        run_and_check()


def test_a_captured_graph_past_one_query_pool_times_every_node(ep_devices, tmp_path):
    """300 nodes (fuse=0: one kernel each) and their command buffers need more pairs than one pool of a graph's
    TimestampTable holds: every replay still reports every node once."""
    from vkep.gpu.timing import TimestampTable
    from vkep.models import add_chain

    nodes = 300
    assert nodes > TimestampTable.POOL_PAIRS
    model = add_chain(nodes, shape=(4, 16))
    session = runner.vkep_session(model, disable_cpu_fallback=True, profile_prefix=str(tmp_path / "trace"),
                                  ep_options={**CAPTURE, "fuse": "0"})
    binding, values = _bound(session, ep_devices, {"x": (4, 16)}, {"y": (4, 16)})
    x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
    values["x"].update_inplace(x)
    for _ in range(3):
        session.run_with_iobinding(binding)
    np.testing.assert_allclose(values["y"].numpy(), runner.cpu_session(model).run(None, {"x": x})[0], rtol=1e-5,
                               atol=1e-5)
    events = json.loads(open(session.end_profiling()).read())
    replays = _replays(events)
    assert len(replays) == 2
    for run in replays:
        inside = [e["args"]["node_name"] for e in events if e.get("cat") == "Kernel" and e.get("args", {}).get(
            "parent_name") == "model_run" and run["ts"] <= e["ts"] <= run["ts"] + run["dur"]]
        assert len(inside) == len(set(inside)) == nodes


def test_a_graph_captured_unprofiled_has_no_pairs(ep_devices, tmp_path):
    """Profiling adds nothing to a graph captured in a session that does not profile (its replay is left as it
    was), and the profiled capture adds no command buffer to the graph."""
    from vkep.ort import ep as ep_module

    shapes = ({"x": (1, 8, 16, 16)}, {"y": (1, 8, 16, 16)})
    quiet = runner.vkep_session(small_model(), disable_cpu_fallback=True, ep_options=CAPTURE)
    quiet.run_with_iobinding(_bound(quiet, ep_devices, *shapes)[0])
    profiled, pbinding, _ = captured_profiled_session(small_model(), tmp_path / "trace", ep_devices, *shapes)
    profiled.run_with_iobinding(pbinding)
    graphs = {bool(ep.profilers): list(ep.graphs.values()) for ep in ep_module.EPS.values() if ep.graphs}
    assert set(graphs) == {False, True}
    assert graphs[False][0].timing is None
    assert graphs[True][0].timing is not None
    assert len(graphs[True][0].stream.captured) == len(graphs[False][0].stream.captured)
    profiled.end_profiling()


def test_a_profiled_captured_resnet50_s_node_times_cover_the_gpu_s_busy_time(ep_devices, tmp_path):
    """As test_a_profiled_resnet50_s_node_times_cover_the_gpu_s_busy_time, with the graph captured: the replays'
    node pairs, written by the captured command buffers, sum to within 10% of those command buffers' time."""
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_resnet50.onnx")
    model = onnx.load(path)

    def dims(value_info):
        return tuple(d.dim_value for d in value_info.type.tensor_type.shape.dim)

    x_name, y_name = model.graph.input[0].name, model.graph.output[0].name
    session, binding, values = captured_profiled_session(
        model, tmp_path / "trace", ep_devices, {x_name: dims(model.graph.input[0])}, {y_name: dims(model.graph.output[0])})
    x = np.random.default_rng(0).standard_normal(dims(model.graph.input[0])).astype(np.float32)
    values[x_name].update_inplace(x)
    for _ in range(3):  # the warm-up and captured runs, then two replays
        session.run_with_iobinding(binding)
    np.testing.assert_allclose(values[y_name].numpy(), runner.cpu_session(model).run(None, {x_name: x})[0],
                               rtol=1e-3, atol=1e-4)
    events = json.loads(open(session.end_profiling()).read())
    replays = _replays(events)
    assert len(replays) == 2
    in_replays = [e for e in events if any(r["ts"] <= e["ts"] <= r["ts"] + r["dur"] for r in replays)]
    summary = profile.summarize(in_replays, None)
    kernels, busy = summary["gpu_kernels_ms"], summary["gpu_busy_ms"]
    vkep_nodes = {r["node"] for r in profile.summarize(events, None)["nodes"] if r["clock"] == "gpu"}
    replayed = [e for e in in_replays if e.get("cat") == "Kernel" and "gpu_duration_ns" in e.get("args", {})]
    assert sorted(e["args"]["node_name"] for e in replayed) == sorted(list(vkep_nodes) * 2)
    assert busy > 0 and abs(kernels - busy) <= 0.1 * busy, (kernels, busy)
