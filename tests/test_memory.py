"""Where tensors live and what it costs to move them, asserted with vkep's counters."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnxruntime as ort
import pytest
from conftest import tolerance

import vkep
from vkep import models, runner


def _counts(device_stats: dict) -> dict:
    return {k: device_stats[k] for k in ("uploads", "downloads", "staging_copies")}


def _shares_host_memory() -> bool:
    """Whether vkep runs this device as unified memory (vkep.ort.factory.shares_host_memory)."""
    from vkep.gpu.device import open_device

    return open_device(0).memory.unified and os.environ.get("VKEP_DEFAULT_MEMORY", "") != "default"


def test_host_accessible_iobinding_moves_no_bytes(ep_devices):
    device = ep_devices[0]
    host = device.memory_info(ort.OrtDeviceMemoryType.HOST_ACCESSIBLE)
    model = models.add_chain(8)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    x = ort.OrtValue.ortvalue_from_shape_and_type([1, 16], np.float32, memory_info=host)
    y = ort.OrtValue.ortvalue_from_shape_and_type([1, 16], np.float32, memory_info=host)
    view = x.numpy()  # a view of vkep's memory, not a copy
    view[:] = np.linspace(-1, 1, 16, dtype=np.float32)
    assert x.numpy()[0, 3] == view[0, 3]
    binding = session.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    session.run_with_iobinding(binding)
    vkep.reset_stats()
    for _ in range(5):
        session.run_with_iobinding(binding)
    assert _counts(vkep.stats()[0]) == {"uploads": 0, "downloads": 0, "staging_copies": 0}
    want = runner.cpu_session(model).run(None, {"x": view.copy()})[0]
    np.testing.assert_allclose(y.numpy(), want, **tolerance(np.float32))


def test_unified_graph_outputs_are_read_in_place(ep_devices):
    """On a unified device ORT reads a graph output in vkep's memory: no download, no staging."""
    if not _shares_host_memory():
        pytest.skip("not the unified HOST_ACCESSIBLE path")
    model = models.add_chain(8)
    session = runner.vkep_session(model)
    feeds = models.random_inputs(model)
    session.run(None, feeds)
    vkep.reset_stats()
    got = session.run(None, feeds)[0]
    stats = vkep.stats()[0]
    assert stats["downloads"] == 0 and stats["staging_copies"] == 0, stats
    np.testing.assert_allclose(got, runner.cpu_session(model).run(None, feeds)[0], **tolerance(np.float32))


def _outputs_model(with_gather: bool = False):
    """x -> Relu -> four branches, each a graph output (Neg, Sigmoid, Abs, and Mul or a Gather of a constant table
    at the doubled feed `i`)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["a"]),
             helper.make_node("Sigmoid", ["r"], ["b"]), helper.make_node("Abs", ["r"], ["c"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])]
    inits = []
    if with_gather:
        nodes += [helper.make_node("Add", ["i", "i"], ["i2"]), helper.make_node("Gather", ["table", "i2"], ["d"])]
        inputs.append(helper.make_tensor_value_info("i", TensorProto.INT64, [2]))
        inits.append(numpy_helper.from_array(np.arange(15, dtype=np.float32).reshape(5, 3), "table"))
    else:
        nodes.append(helper.make_node("Mul", ["r", "r"], ["d"]))
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in "abcd"]
    graph = helper.make_graph(nodes, "outputs", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_graph_outputs_complete_once_at_the_end_of_the_run(ep_devices):
    """The main graph's outputs that only the application reads are not waited for by their producers, each a
    submit and a wait: OnRunEnd waits once for all of them (ep._note_host_readers)."""
    if not _shares_host_memory():
        pytest.skip("not the unified HOST_ACCESSIBLE path")
    model = _outputs_model()
    session = runner.vkep_session(model, disable_cpu_fallback=True, ep_options={"fuse": "0"})
    cpu = runner.cpu_session(model)
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)}
    session.run(None, feeds)
    for _ in range(3):
        vkep.reset_stats()
        for got, want in zip(session.run(None, feeds), cpu.run(None, feeds), strict=True):
            np.testing.assert_allclose(got, want, **tolerance(np.float32))
        # (the Relu reads the feed in place and waits for its work; the run's end waits once more)
        assert vkep.stats()[0]["submits"] + vkep.stats()[0]["submits_native"] <= 2, vkep.stats()[0]


def test_an_index_error_found_at_the_end_of_the_run(ep_devices):
    """An index out of range in a node whose output only the application reads is found by the run's last wait:
    the run fails with vkep's message, and the session runs again."""
    model = _outputs_model(with_gather=True)
    session = runner.vkep_session(model, disable_cpu_fallback=True)
    x = np.ones((4, 3), np.float32)
    assert session.run(None, {"x": x, "i": np.array([0, 2])})[3][:, 0].tolist() == [0.0, 12.0]
    with pytest.raises(Exception, match="an index was out of range in a Gather"):
        session.run(None, {"x": x, "i": np.array([1, 4])})
    assert session.run(None, {"x": x, "i": np.array([1, 2])})[3][:, 0].tolist() == [6.0, 12.0]


def test_default_memory_option_keeps_device_memory():
    code = textwrap.dedent("""
        import numpy as np, vkep
        from vkep import models, runner
        model = models.add_chain(4)
        session = runner.vkep_session(model)
        feeds = models.random_inputs(model)
        session.run(None, feeds)
        vkep.reset_stats()
        ok = np.allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0])
        s = vkep.stats()[0]
        print("result", ok, s["uploads"], s["downloads"], s["staging_copies"])
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VKEP_DEFAULT_MEMORY": "default", "VKEP_FORCE_DISCRETE": "0"})
    assert proc.returncode == 0, proc.stderr
    assert "result True 1 1 0" in proc.stdout, proc.stdout


def test_forced_discrete_path_gives_identical_outputs():
    code = textwrap.dedent("""
        import json, numpy as np, vkep
        from vkep import models, runner
        model = models.with_unsupported_op(np.float32)
        feeds = models.random_inputs(model, seed=5)
        session = runner.vkep_session(model)
        session.run(None, feeds)
        vkep.reset_stats()
        out = session.run(None, feeds)[0]
        print(json.dumps({"out": out.tolist(), "stats": vkep.stats()[0]}))
    """)
    results = {}
    for mode in ("0", "1"):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "VKEP_FORCE_DISCRETE": mode})
        assert proc.returncode == 0, proc.stderr
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results["0"]["out"] == results["1"]["out"]  # bit-identical
    assert results["0"]["stats"]["staging_copies"] == 0
    assert results["1"]["stats"]["staging_copies"] >= 2  # the input upload and the CPU-boundary copies


def test_memory_returns_after_release_and_does_not_grow(ep_devices):
    from vkep.gpu.device import open_device

    memory = open_device(0).memory
    model = models.all_ops(np.float32)
    feeds = models.random_inputs(model)
    start_live = memory.stats()["live_bytes"]
    session = runner.vkep_session(model)

    def held() -> int:  # bytes handed to ORT and not yet freed, over vkep's allocators
        return sum(a["live_bytes"] for a in vkep.stats()[0]["allocators"].values())

    for _ in range(50):
        session.run(None, feeds)
    warm, warm_held = memory.stats(), held()
    for _ in range(1000):
        session.run(None, feeds)
    assert memory.stats()["reserved_bytes"] == warm["reserved_bytes"]
    assert memory.stats()["live_bytes"] == warm["live_bytes"]
    assert held() == warm_held
    del session
    gc.collect()
    assert memory.stats()["live_bytes"] <= start_live


def test_a_large_intermediate_goes_back_to_the_driver_with_the_last_session(ep_devices):
    """An 80 MB intermediate (Expand, then ReduceSum to 4 bytes) takes a block of its own; the freed chunk is
    kept for the session's next runs, and when the device's last session goes, the pools give what they
    hold unused back to the driver: reserved memory returns to within one standard block of its start while
    the 4-byte output is still held. (It stayed reserved for the process's life.)"""
    import onnx
    from onnx import TensorProto, helper

    from vkep.gpu.device import open_device
    from vkep.gpu.memory import BLOCK_SIZE

    memory = open_device(0).memory
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "s"], ["big"]), helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0)],
        "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.array([20_000_000], np.int64), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    gc.collect()
    start = memory.stats()["reserved_bytes"]
    session = runner.vkep_session(model)
    assert {ep for _, _, ep in runner.placement(session)} == {"VulkanExecutionProvider"}
    y = session.run(None, {"x": np.ones(1, np.float32)})[0]
    assert memory.stats()["reserved_bytes"] >= start + 80_000_000
    del session
    gc.collect()
    assert float(y) == 2e7
    assert memory.stats()["reserved_bytes"] <= start + BLOCK_SIZE


def _light(name: str):
    import onnx

    return onnx.load(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", name))


def test_resnet50_weights_are_packed_once_and_shared(ep_devices):
    """Weights are prepacked at session creation; later runs upload only the graph input; a second
    session of the same model holds no second copy."""
    from onnx import helper, numpy_helper

    from vkep.gpu.device import open_device
    from vkep.kernels import winograd

    model = _light("light_resnet50.onnx")
    feeds = models.random_inputs(model)
    session = runner.vkep_session(model)
    session.run(None, feeds)
    packed = vkep.stats()[0]["prepacked_bytes"]
    packed_inputs = {"Conv": (1, 2), "Gemm": (1, 2), "MatMul": (1,)}  # kernels.yaml `prepack`
    packed_names = {n.input[i] for n in model.graph.node for i in packed_inputs.get(n.op_type, ())
                    if i < len(n.input)}
    # the light models build their weights with ConstantOfShape: count them from the node shapes
    shapes = {n.output[0]: numpy_helper.to_array(n.input and next(
        i for i in model.graph.initializer if i.name == n.input[0])) for n in model.graph.node
        if n.op_type == "ConstantOfShape" and n.output[0] in packed_names}
    # every weight of these models is filled with one value, so equal shapes mean equal bytes, which the
    # content-keyed weight cache stores once per packing: as they are, or as Winograd's U ([16][M][C], C
    # rounded up to 4) for the 3x3 convs that take it
    info = open_device(0).info
    packings = set()
    for n in model.graph.node:
        for i in packed_inputs.get(n.op_type, ()):
            if i < len(n.input) and n.input[i] in shapes:
                shape = tuple(int(d) for d in shapes[n.input[i]])
                attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
                tile = n.op_type == "Conv" and i == 1 and winograd.choose_tile(attrs, shape, info)
                packings.add((shape, bool(tile)))
    weight_bytes = sum((16 * s[0] * -(-s[1] // 4) * 4 if tile else int(np.prod(s))) * 4 for s, tile in packings)
    assert weight_bytes and 0.9 * weight_bytes <= packed <= 1.1 * weight_bytes, (packed, weight_bytes)
    vkep.reset_stats()
    for _ in range(10):
        session.run(None, feeds)
    stats = vkep.stats()[0]
    input_bytes = feeds[model.graph.input[0].name].nbytes
    if _shares_host_memory():  # the device reads the feed where numpy holds it, and ORT the output
        output_bytes = 4 * 1000
        assert stats["uploads"] == 0 and stats["staging_copies"] == 0 and stats["downloads"] == 0, stats
        assert stats["elided_copies"] == 20 and stats["elided_bytes"] == 10 * (input_bytes + output_bytes), stats
    else:
        assert stats["uploads"] == 10 and stats["upload_bytes"] == 10 * input_bytes, stats
    second = runner.vkep_session(model)
    second.run(None, feeds)
    assert vkep.stats()[0]["prepacked_bytes"] == packed  # one packed copy for both sessions


def test_resnet50_with_host_accessible_binding_uploads_nothing(ep_devices):
    model = _light("light_resnet50.onnx")
    feeds = models.random_inputs(model)
    name, value = next(iter(feeds.items()))
    session = runner.vkep_session(model)
    host = ep_devices[0].memory_info(ort.OrtDeviceMemoryType.HOST_ACCESSIBLE)
    x = ort.OrtValue.ortvalue_from_shape_and_type(list(value.shape), np.float32, memory_info=host)
    x.numpy()[...] = value
    binding = session.io_binding()
    binding.bind_ortvalue_input(name, x)
    for out in session.get_outputs():
        binding.bind_output(out.name, "cpu")
    session.run_with_iobinding(binding)
    vkep.reset_stats()
    for _ in range(3):
        session.run_with_iobinding(binding)
    stats = vkep.stats()[0]
    assert stats["uploads"] == 0, stats
    if _shares_host_memory():  # (a discrete device reads the output back through staging)
        assert stats["staging_copies"] == 0 and stats["downloads"] == 0, stats
    want = runner.cpu_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], want, **tolerance(np.float32))


def test_cpu_ep_boundaries_and_feeds_cost_no_copy(ep_devices, monkeypatch):
    """Unified path: a graph split between vkep and the CPU EP moves no bytes. The host feed and the CPU
    EP's output are read in place by vkep (tensors past external.STAGE_BELOW: the test lowers it to 0), vkep's
    output is read in place by the CPU EP, and ORT reads the graph output in place; each of those four is counted
    as an elided copy."""
    from vkep.gpu import external

    if not _shares_host_memory():
        pytest.skip("not the unified path")
    monkeypatch.setattr(external, "STAGE_BELOW", 0)
    model = models.with_unsupported_op(np.float32)
    session = runner.vkep_session(model)
    eps = {op: ep for _, op, ep in runner.placement(session)}
    assert eps[models.UNSUPPORTED_OP] == "CPUExecutionProvider" and eps["MatMul"] == "VulkanExecutionProvider"
    feeds = models.random_inputs(model)
    session.run(None, feeds)
    vkep.reset_stats()
    for _ in range(5):  # the same feeds: a result one run late would still compare equal, so vary them
        feeds = {k: v * np.float32(1.5) for k, v in feeds.items()}
        want = runner.cpu_session(model).run(None, feeds)[0]
        np.testing.assert_allclose(session.run(None, feeds)[0], want, **tolerance(np.float32))
    stats = vkep.stats()[0]
    moved = {k: stats[k] for k in ("uploads", "downloads", "staging_copies", "device_copies")}
    assert moved == {"uploads": 0, "downloads": 0, "staging_copies": 0, "device_copies": 0}, stats
    # x [2,16], Relu's output and ScaledSiLU's [2,32], y [2,32] (float32), five runs
    assert stats["elided_copies"] == 5 * 4 and stats["elided_bytes"] == 5 * 4 * (32 + 64 + 64 + 64), stats


def test_ort_shared_prepack_cache_option(ep_devices):
    """EP option prepack_cache=ort: weights are packed into ORT's shared pre-packed weight cache and
    reach the kernels through SetSharedPrePackedWeight; same outputs as vkep's own cache, equal weights
    stored once within the session, nothing left counted after release."""
    if not _shares_host_memory():
        pytest.skip("ORT offers its cache for host-accessible memory only (vkep's cache is used then)")
    model = _light("light_squeezenet.onnx")
    feeds = models.random_inputs(model)
    want = runner.cpu_session(model).run(None, feeds)[0]
    gc.collect()
    start = vkep.stats()[0]["prepacked_bytes"]
    session = runner.vkep_session(model, ep_options={"prepack_cache": "ort"})
    shared = vkep.stats()[0]["prepacked_bytes"] - start
    own = runner.vkep_session(model)
    packed_by_vkep = vkep.stats()[0]["prepacked_bytes"] - start - shared
    assert 0.9 * packed_by_vkep <= shared <= packed_by_vkep, (shared, packed_by_vkep)
    got = session.run(None, feeds)[0]
    np.testing.assert_array_equal(got, own.run(None, feeds)[0])
    np.testing.assert_allclose(got, want, **tolerance(np.float32))
    del session, own
    gc.collect()
    assert vkep.stats()[0]["prepacked_bytes"] == start


def test_bad_prepack_cache_option_is_a_clear_error(ep_devices):
    with pytest.raises(Exception, match="EP option prepack_cache='sometimes' is not valid: expected 'vkep' or 'ort'"):
        runner.vkep_session(models.add_chain(2), ep_options={"prepack_cache": "sometimes"})


def test_ort_prepacked_weights_container_sessions(tmp_path):
    """Through ORT's C API: two sessions given one OrtPrepackedWeightsContainer, prepack_cache=ort. Both
    compute the CPU EP's result, and the packed weights are released with the sessions. (ORT 1.31.1
    shares a plugin EP's packed weights within a session, not across sessions: the figure is printed.)"""
    code = textwrap.dedent("""
        import gc, os, sys, numpy as np, onnx, vkep
        from vkep import interop, models, runner
        model = onnx.load(sys.argv[1])
        feeds = models.random_inputs(model)
        want = runner.cpu_session(model).run(None, feeds)[0]
        rt = interop.Runtime()
        box = rt.weights_container()
        name = model.graph.output[0].name
        sessions = [rt.session(model.SerializeToString(), ep_options={"prepack_cache": "ort"}, weights=box)
                    for _ in range(2)]
        packed = vkep.stats()[0]["prepacked_bytes"]
        diffs = [float(np.abs(s.run(feeds, [name])[name] - want).max()) for s in sessions]
        del sessions
        gc.collect()
        print("result", packed, max(diffs), vkep.stats()[0]["prepacked_bytes"])
    """)
    path = os.path.join(os.path.dirname(__import__("onnx").__file__), "backend", "test", "data", "light",
                        "light_squeezenet.onnx")
    proc = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("result"))
    _, packed, diff, left = line.split()
    print(f"two sessions, one container: {int(packed):,} packed bytes")
    assert int(packed) > 0 and float(diff) <= 1e-5 and int(left) == 0, line


def test_without_host_import_host_tensors_are_staged(ep_devices, monkeypatch):
    """A unified device without VK_EXT_external_memory_host: host tensors ORT hands over are staged
    (counted as staging copies; the test makes every tensor one the device would import) and the outputs are the
    same."""
    from vkep.gpu import external
    from vkep.gpu.device import open_device

    if not _shares_host_memory():
        pytest.skip("not the unified path")
    monkeypatch.setattr(external, "STAGE_BELOW", 0)
    model = models.with_unsupported_op(np.float32)
    feeds = models.random_inputs(model, seed=3)
    session = runner.vkep_session(model)
    in_place = session.run(None, feeds)[0]
    monkeypatch.setattr(open_device(0), "host_import_alignment", 0)
    vkep.reset_stats()
    staged = session.run(None, feeds)[0]
    stats = vkep.stats()[0]
    np.testing.assert_array_equal(staged, in_place)
    assert stats["staging_copies"] == 2 and stats["elided_copies"] == 2, stats  # x and LpNorm's output staged


def test_host_import_0_stages_host_tensors_for_its_session_only(ep_devices, monkeypatch):
    """The EP option host_import=0: this session's kernels stage the host memory ORT hands over (x and the output
    of the node before the CPU EP's), as on a device without VK_EXT_external_memory_host, with the same outputs;
    a session beside it on the same device still reads it in place (the test makes every tensor one the device
    would import)."""
    from vkep.gpu import external

    if not _shares_host_memory():
        pytest.skip("not the unified path")
    monkeypatch.setattr(external, "STAGE_BELOW", 0)
    model = models.with_unsupported_op(np.float32)
    feeds = models.random_inputs(model, seed=3)
    staged_session = runner.vkep_session(model, ep_options={"host_import": "0"})
    in_place_session = runner.vkep_session(model)
    counts = {}
    for name, session in (("staged", staged_session), ("in_place", in_place_session)):
        vkep.reset_stats()
        counts[name] = (session.run(None, feeds)[0], vkep.stats()[0])
    np.testing.assert_array_equal(counts["staged"][0], counts["in_place"][0])
    assert counts["staged"][1]["staging_copies"] == 2, counts["staged"][1]
    assert counts["in_place"][1]["staging_copies"] == 0, counts["in_place"][1]


def test_small_host_tensors_are_copied_without_a_wait(ep_devices):
    """Host tensors a node only reads, up to external.STAGE_BELOW bytes (a feed, a CPU-EP node's output), are
    copied into staging memory whose chunks come back once the work that read them completed: no import, and no
    wait before Compute returns. A run of the split model then submits twice (before the CPU EP's node reads
    vkep's output, and at the run's end), where it submitted four times importing them."""
    from vkep.gpu import external

    if not _shares_host_memory():
        pytest.skip("not the unified path")
    model = models.with_unsupported_op(np.float32)
    session = runner.vkep_session(model)
    feeds = models.random_inputs(model)
    session.run(None, feeds)
    for _ in range(3):
        feeds = {k: v * np.float32(1.5) for k, v in feeds.items()}
        vkep.reset_stats()
        np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0],
                                   **tolerance(np.float32))
        stats = vkep.stats()[0]
        assert stats["small_copies"] == 2 and stats["small_bytes"] == 4 * (32 + 64), stats  # x, ScaledSiLU's output
        assert stats["staging_copies"] == 0 and stats["submits"] <= 2, stats
    assert 4 * 64 <= external.STAGE_BELOW
