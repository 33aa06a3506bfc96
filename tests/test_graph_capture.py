"""Graph capture (EP option enable_graph_capture): ORT runs the graph until vkep has captured one run, then
calls ReplayGraph instead of running any node. Inputs and outputs bound with IOBinding in vkep memory,
refilled in place between runs, as ORT requires of CUDA graphs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import vkep
from vkep import models, runner
from vkep.models import add_chain

CAPTURE = {"enable_graph_capture": "1"}


def _memory_info(ep_devices):
    from vkep.gpu.device import physical_devices
    from vkep.ort.factory import shares_host_memory

    kind = "HOST_ACCESSIBLE" if shares_host_memory(physical_devices()[0]) else "DEFAULT"
    return ep_devices[0].memory_info(getattr(ort.OrtDeviceMemoryType, kind))


def _bound(session, ep_devices, shapes: dict[str, tuple], outputs: dict[str, tuple]):
    """An IOBinding over OrtValues in vkep memory: (binding, {name: OrtValue})."""
    info = _memory_info(ep_devices)
    values = {name: ort.OrtValue.ortvalue_from_shape_and_type(list(shape), np.float32, memory_info=info)
              for name, shape in {**shapes, **outputs}.items()}
    binding = session.io_binding()
    for name in shapes:
        binding.bind_ortvalue_input(name, values[name])
    for name in outputs:
        binding.bind_ortvalue_output(name, values[name])
    return binding, values


def _node_executions() -> int:
    stats = vkep.stats()["process"]
    return stats["nodes_replayed_natively"] + stats["nodes_python_path"]


@pytest.mark.parametrize("fuse", ["0", "1"])
@pytest.mark.parametrize("nodes", [3, 200])
def test_replays_run_no_node_and_follow_new_inputs(ep_devices, nodes, fuse):
    """(fuse=1: the Adds run as fused groups, nodes of their own to ORT, captured alike)"""
    model = add_chain(nodes, shape=(4, 16))
    session, cpu = runner.vkep_session(model, ep_options={**CAPTURE, "fuse": fuse}), runner.cpu_session(model)
    plain = runner.vkep_session(model, ep_options={"fuse": fuse})
    plain.run(None, {"x": np.zeros((4, 16), np.float32)})
    before = _node_executions()
    plain.run(None, {"x": np.zeros((4, 16), np.float32)})
    per_run = _node_executions() - before  # (nodes, or fused groups)
    assert per_run == nodes if fuse == "0" else per_run < nodes
    binding, values = _bound(session, ep_devices, {"x": (4, 16)}, {"y": (4, 16)})
    rng = np.random.default_rng(0)
    executed = []
    for _ in range(5):
        x = rng.standard_normal((4, 16)).astype(np.float32)
        values["x"].update_inplace(x)
        before = _node_executions()
        session.run_with_iobinding(binding)
        executed.append(_node_executions() - before)
        np.testing.assert_allclose(values["y"].numpy(), cpu.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    # the first Run holds ORT's internal runs: a warm-up run and the captured one; then replays only
    assert executed[0] == 2 * per_run and executed[1:] == [0, 0, 0, 0], executed


def test_graph_ids_capture_one_graph_each(ep_devices):
    """A run config entry gpu_graph_id captures one graph per id (here one per input shape); -1 runs the
    nodes every time."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                              "ids", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
                              [numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session, cpu = runner.vkep_session(model, ep_options=CAPTURE), runner.cpu_session(model)
    bindings = {rows: _bound(session, ep_devices, {"x": (rows, 8)}, {"y": (rows, 8)}) for rows in (2, 5)}
    rng = np.random.default_rng(1)
    for graph_id, rows in [(1, 2), (2, 5), (1, 2), (2, 5), (-1, 5), (-1, 2)]:
        options = ort.RunOptions()
        options.add_run_config_entry("gpu_graph_id", str(graph_id))
        binding, values = bindings[rows]
        x = rng.standard_normal((rows, 8)).astype(np.float32)
        values["x"].update_inplace(x)
        before = _node_executions()
        session.run_with_iobinding(binding, options)
        np.testing.assert_allclose(values["y"].numpy(), cpu.run(None, {"x": x})[0], rtol=1e-6)
        if graph_id == -1:
            assert _node_executions() - before == 1  # (Mul and Relu: one fused group)


def test_host_arrays_are_refused_with_a_clear_error(ep_devices):
    """A capture over host arrays could replay over memory the application has freed: it fails, saying
    how to bind vkep memory, and the same session then runs with proper bindings."""
    model = add_chain(4, shape=(4, 16))
    session = runner.vkep_session(model, ep_options=CAPTURE)
    x = np.ones((4, 16), np.float32)
    with pytest.raises(Exception, match="memory_info=ep_device.memory_info"):
        session.run(None, {"x": x})
    binding, values = _bound(session, ep_devices, {"x": (4, 16)}, {"y": (4, 16)})
    values["x"].update_inplace(x)
    for _ in range(3):
        session.run_with_iobinding(binding)
        np.testing.assert_allclose(values["y"].numpy(), x, atol=5e-3)


def test_nodes_off_vkep_make_ort_refuse_the_session(ep_devices):
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node(models.UNSUPPORTED_OP, ["a"], ["y"], domain=models.UNSUPPORTED_DOMAIN)]
    graph = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(models.UNSUPPORTED_DOMAIN, 1)], ir_version=8)
    with pytest.raises(Exception, match="graph capture"):
        runner.vkep_session(model, ep_options=CAPTURE)


_RELEASE_PROBE = textwrap.dedent("""
    import gc, json
    import numpy as np, onnxruntime as ort, vkep
    from vkep import runner
    from vkep.models import add_chain
    from tests.test_graph_capture import _bound
    devices = vkep.register()
    start = vkep.stats()[0]["live_bytes"]
    session = runner.vkep_session(add_chain(50, shape=(64, 64)), ep_options={"enable_graph_capture": "1"})
    binding, values = _bound(session, devices, {"x": (64, 64)}, {"y": (64, 64)})
    for _ in range(3):
        session.run_with_iobinding(binding)
    during = vkep.stats()[0]["live_bytes"]
    del binding, values, session
    gc.collect()
    print(json.dumps({"start": start, "during": during, "end": vkep.stats()[0]["live_bytes"]}))
""")


def test_released_graph_gives_its_memory_back():
    """The chunks a captured graph holds go back when its session goes: device memory returns to its start."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _RELEASE_PROBE], cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    live = json.loads(done.stdout.strip().splitlines()[-1])
    assert live["during"] > live["start"] and live["end"] == live["start"], live


def test_captured_graph_holds_the_chunks_it_replays_over(ep_devices):
    """Out of memory, vkep gives every cached chunk back to the pools (alloc_from); the chunks the captured
    run freed are held by the graph instead, so no drain or other session takes them from under a replay."""
    from vkep.ort.ep import EPS
    from vkep.ort.memory import ALLOCATORS

    model = add_chain(20, shape=(32, 64))
    session, cpu = runner.vkep_session(model, ep_options=CAPTURE), runner.cpu_session(model)
    binding, values = _bound(session, ep_devices, {"x": (32, 64)}, {"y": (32, 64)})
    session.run_with_iobinding(binding)
    graph = next(g for ep in list(EPS.values()) for g in ep.graphs.values())
    assert graph.kept_chunks, "the captured run freed chunks (its intermediate values): the graph holds them"
    assert not any(api_cache_has(allocator, pointer) for allocator, pointer, _ in graph.kept_chunks)
    for allocator in list(ALLOCATORS.values()):
        allocator.drain()  # what alloc_from does when a pool is exhausted
    x = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    values["x"].update_inplace(x)
    session.run_with_iobinding(binding)
    np.testing.assert_allclose(values["y"].numpy(), cpu.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def api_cache_has(allocator, pointer: int) -> bool:
    """Whether `pointer` waits in the allocator's cache of freed chunks (a drain would take it)."""
    from vkep.ort import api

    ptrs, sizes = api.ffi.new("uint64_t[4096]"), api.ffi.new("uint64_t[4096]")
    n = api.lib.vkep_alloc_cache_drain(allocator.struct.cache, ptrs, sizes, 4096)
    cached = [(ptrs[i], sizes[i]) for i in range(n)]
    for p, size in cached:  # (put back as they were)
        api.lib.vkep_alloc_cache_put(allocator.struct.cache, p, size)
    return any(p == pointer for p, _ in cached)


@pytest.mark.parametrize("name", ["all_ops", "bert_encoder"])
def test_models_replay_as_the_cpu_ep_runs_them(ep_devices, name):
    """vkep's default model (convolution, pooling, matmul, normalisation, softmax, reshapes) and a BERT-style
    encoder, captured, then replayed over new inputs written in place. On a discrete GPU their computed MatMul
    operands pass through host memory (ORT moves a value at an input vkep packs there: docs/design.md,
    "Weights at session creation"), and the capture says so rather than replaying stale data."""
    from vkep import models
    from vkep.gpu.device import physical_devices
    from vkep.ort.factory import shares_host_memory

    model = getattr(models, name)()
    session, cpu = runner.vkep_session(model, ep_options=CAPTURE), runner.cpu_session(model)
    info = _memory_info(ep_devices)
    feeds = (models.bert_inputs if name == "bert_encoder" else models.random_inputs)(model)
    wanted = cpu.run(None, feeds)
    binding = session.io_binding()
    inputs = {k: ort.OrtValue.ortvalue_from_shape_and_type(list(v.shape), v.dtype, memory_info=info)
              for k, v in feeds.items()}
    outputs = [ort.OrtValue.ortvalue_from_shape_and_type(list(w.shape), w.dtype, memory_info=info) for w in wanted]
    for k, v in inputs.items():
        binding.bind_ortvalue_input(k, v)
    for o, v in zip(session.get_outputs(), outputs, strict=True):
        binding.bind_ortvalue_output(o.name, v)
    for k, v in feeds.items():
        inputs[k].update_inplace(v)
    if not shares_host_memory(physical_devices()[0]):
        with pytest.raises(Exception, match="a MatMul's B"):
            session.run_with_iobinding(binding)
        return
    for seed in range(3):
        feeds = (models.bert_inputs if name == "bert_encoder" else models.random_inputs)(model, seed=seed)
        for k, v in feeds.items():
            inputs[k].update_inplace(v)
        session.run_with_iobinding(binding)
        for got, want in zip(outputs, cpu.run(None, feeds), strict=True):
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-3, atol=2e-4)
