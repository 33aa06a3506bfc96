"""Weights cross to the device once (docs/design.md, "Weights at session creation").

A model with prepacked weights (MatMul, Gemm, Conv, ConvTranspose) and constants that are not prepacked
(an Add's and a Mul's), run in a fresh process per memory path and prepack cache, reading vkep.stats():
- first session: no download, uploads at most 1.05x the weights' bytes;
- a second session of the same model: nothing moved at all;
- peak device memory while the first session is created: at most the weights (each block rounded to the
  allocation granularity) plus the largest single weight (the one staging buffer in flight);
- once both are released: live device memory back where it started;
- outputs equal to ORT's CPU EP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def weights_model() -> tuple[bytes, int]:
    """(model, bytes of its initializers)."""
    model, sizes = _weights_model()
    return model, sum(sizes)


def _weights_model() -> tuple[bytes, list[int]]:
    """(model, the byte size of each initializer)."""
    rng = np.random.default_rng(3)
    f = np.float32
    inits = {
        "w_mm": rng.standard_normal((64, 96)).astype(f), "w_gemm": rng.standard_normal((96, 48)).astype(f),
        "b_gemm": rng.standard_normal(48).astype(f), "w_conv": rng.standard_normal((8, 3, 3, 3)).astype(f),
        "b_conv": rng.standard_normal(8).astype(f), "w_convt": rng.standard_normal((8, 4, 2, 2)).astype(f),
        "c_add": rng.standard_normal((4, 48)).astype(f), "c_mul": rng.standard_normal((1, 4, 1, 1)).astype(f),
        "c_scale": np.array(0.5, f),  # a 0-d constant stays 0-d when packed as it is
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w_mm"], ["h1"]),
        helper.make_node("Gemm", ["h1", "w_gemm", "b_gemm"], ["h2"]),
        helper.make_node("Add", ["h2", "c_add"], ["y"]),
        helper.make_node("Conv", ["img", "w_conv", "b_conv"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["c1", "w_convt"], ["c2"], strides=[2, 2]),
        helper.make_node("Mul", ["c2", "c_mul"], ["c3"]),
        helper.make_node("Mul", ["c3", "c_scale"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64]),
         helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 48]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 20, 20])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString(), [v.nbytes for v in inits.values()]


_PROBE = textwrap.dedent("""
    import gc, json, sys
    import numpy as np, onnxruntime as ort, vkep
    from tests.test_weights import weights_model
    model, _ = weights_model()
    devices = vkep.register()
    moved = ("uploads", "upload_bytes", "downloads", "download_bytes", "staging_copies", "staging_bytes")

    def session():
        so = ort.SessionOptions()
        so.add_provider_for_devices(devices, {"prepack_cache": sys.argv[1], "allow_cpu_device": "1"})
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        return ort.InferenceSession(model, sess_options=so, enable_fallback=0)

    def counters():
        stats = vkep.stats()[0]
        return {k: stats[k] for k in moved}, stats["live_bytes"], stats["peak_bytes"]

    _, start_live, _ = counters()
    vkep.reset_stats()
    first = session()
    first_moved, _, first_peak = counters()
    vkep.reset_stats()
    second = session()
    second_moved, _, _ = counters()
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 64)).astype(np.float32),
             "img": rng.standard_normal((1, 3, 10, 10)).astype(np.float32)}
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    worst = 0.0
    for s in (first, second):
        for got, want in zip(s.run(None, feeds), ref):
            worst = max(worst, float(np.max(np.abs(got - want) / (np.abs(want) + 1e-3))))
    placed = {sub.ep_name for sub in first.get_provider_graph_assignment_info()}
    del first, second, s, got, want  # (outputs may be views of vkep memory)
    gc.collect()
    _, end_live, _ = counters()
    print(json.dumps({"first": first_moved, "second": second_moved, "start_live": start_live,
                      "end_live": end_live, "first_peak": first_peak, "worst_rel": worst,
                      "eps": sorted(placed)}))
""")


@pytest.mark.parametrize("cache", ["vkep", "ort"])
@pytest.mark.parametrize("path", ["unified", "discrete"])
def test_weights_cross_once(path, cache):
    from vkep.gpu.memory import ALIGNMENT

    _, sizes = _weights_model()
    weight_bytes = sum(sizes)
    env = dict(os.environ, VKEP_FORCE_DISCRETE="1" if path == "discrete" else "0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _PROBE, cache], env=env, cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["eps"] == ["VulkanExecutionProvider"], r
    assert r["worst_rel"] < 1e-3, r
    first, second = r["first"], r["second"]
    assert first["downloads"] == 0 and first["download_bytes"] == 0, first
    assert 0 < first["upload_bytes"] <= 1.05 * weight_bytes, (first, weight_bytes)
    if path == "unified":
        assert first["staging_copies"] == 0, first  # device memory is host-visible: written in place
    else:
        assert first["staging_bytes"] <= 1.05 * weight_bytes, (first, weight_bytes)
    if cache == "vkep" and path == "unified":  # ORT 1.31 shares its pre-packed cache within a session only
        assert all(v == 0 for v in second.values()), second
    elif cache == "vkep":
        # device-only memory: ORT copies the constants that are not prepacked (the Add's and the Muls',
        # 788 bytes) into it for each session; every packed weight comes from the cache
        assert second["download_bytes"] == 0 and second["upload_bytes"] <= 788, second
    blocks = sum(-(-n // ALIGNMENT) * ALIGNMENT for n in sizes)
    assert r["first_peak"] - r["start_live"] <= blocks + max(sizes), (r, blocks, max(sizes))
    assert r["end_live"] <= r["start_live"], r
