"""A first run on a fresh machine: Mesa's shader cache off and an empty vkep cache, so lavapipe compiles
every pipeline when it first executes it. It must succeed, however long that takes (waits go in slices,
with no fixed limit), and that compile happens at session creation where the graph declares the shapes
(vkep.ort.warmup); timings are printed, not asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = textwrap.dedent("""
    import json, time
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    import vkep
    from vkep import runner
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 4, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 8, 3)).astype(np.float32), "w2")
    encoder = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1]), helper.make_node("Relu", ["c2"], ["enc"])],
        "encoder", [], [helper.make_tensor_value_info("enc", TensorProto.FLOAT, [1, 8, 32])])
    skip = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["same"], axis=1)], "skip", [],
                             [helper.make_tensor_value_info("same", TensorProto.FLOAT, [1, 8, 32])])
    graph = helper.make_graph(
        [helper.make_node("If", ["use_encoder"], ["y"], then_branch=encoder, else_branch=skip)], "cold",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 32]),
         helper.make_tensor_value_info("use_encoder", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    feeds = {"x": rng.standard_normal((1, 4, 32)).astype(np.float32), "use_encoder": np.array(True)}
    t = time.perf_counter()
    session = runner.vkep_session(model)
    created = time.perf_counter() - t
    before = vkep.stats()[0]
    t = time.perf_counter()
    got = session.run(None, feeds)[0]
    first = time.perf_counter() - t
    after = vkep.stats()[0]
    want = runner.cpu_session(model).run(None, feeds)[0]
    placed = sorted({ep for _, op, ep in runner.placement(session) if op in ("Conv", "Relu")})
    print(json.dumps({"session_s": created, "first_run_s": first, "max_abs": float(np.abs(got - want).max()),
                      "eps": placed, "warmed": before["pipelines_warmed"],
                      "built_in_first_run": after["pipelines_built"] - before["pipelines_built"]}))
""")


def test_cold_first_run_of_conv1d_in_an_if_branch_succeeds(tmp_path):
    env = dict(os.environ, MESA_SHADER_CACHE_DISABLE="true", VKEP_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"cold: session {result['session_s']:.2f} s, first run {result['first_run_s']:.2f} s")
    assert result["eps"] == ["VulkanExecutionProvider"], result
    assert result["max_abs"] < 1e-3, result
    # the branch's pipelines (shapes declared in full) were built and compiled at session creation
    # (vkep.ort.warmup): the first run builds none
    assert result["warmed"] >= 2 and result["built_in_first_run"] == 0, result


def test_pipelines_start_compiling_while_the_session_is_made(ep_devices, monkeypatch):
    """A kernel's pipelines start compiling in the background (gpu/ahead.py) as soon as its plan is final: a
    Relu when ORT creates its kernel, a Conv once its weight is packed (Winograd's pipelines, which only packing
    decides), before OnSessionInitializationEnd's warm-up; warm then waits for them, and the run agrees with
    the CPU EP."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from vkep import runner
    from vkep.gpu.ahead import Ahead
    from vkep.ort import warmup

    events: list[tuple[str, set]] = []
    start, warm = Ahead.start, warmup.warm

    def spy_start(self, keys):
        keys = list(keys)
        events.append(("start", {k[0] for k in keys}))
        return start(self, keys)

    def spy_warm(*args, **kwargs):
        events.append(("warm", set()))
        return warm(*args, **kwargs)

    monkeypatch.setattr(Ahead, "start", spy_start)
    monkeypatch.setattr(warmup, "warm", spy_warm)
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "ahead", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = runner.vkep_session(model, ep_options={"fuse": "0", "epilogues": "0"})
    before_warm = [shaders for kind, shaders in events[:[kind for kind, _ in events].index("warm")] if kind == "start"]
    started = set().union(*before_warm) if before_warm else set()
    assert "unary.comp" in started, events  # the Relu's, at its creation
    assert "winograd.comp" in started or "conv.comp" in started or "matmul.comp" in started, events
    feeds = {"x": rng.standard_normal((1, 16, 12, 12)).astype(np.float32)}
    np.testing.assert_allclose(session.run(None, feeds)[0], runner.cpu_session(model).run(None, feeds)[0],
                               rtol=1e-4, atol=1e-4)


def test_ahead_stream_is_not_one_an_upload_waits_for(ep_devices):
    """The ahead stream's zero dispatches touch no memory: Device.synchronize (which every upload makes) leaves
    it out, a pipeline starts once however often it is asked for, and its future's value can be waited for."""
    from vkep.gpu import device as gd

    dev = gd.open_device(next(d.index for d in gd.physical_devices() if d.usable))
    key = ("unary.comp", (("DTYPE", 0),), (("OP", 0),))
    first, second = dev.ahead.start([key]), dev.ahead.start([key])
    assert first[0] is second[0]
    dev.ahead.wait(first[0].result())
    assert dev.ahead._stream is not None and dev.ahead._stream not in dev.streams_snapshot()
