#!/usr/bin/env python3
"""Session creation: time and bytes moved, for vkep beside ORT's CPU EP, in one run.

For each model: a first vkep session, a second one of the same model in the same process (whose packed
weights vkep's shared cache already holds), and ORT's CPU EP session, each timed; for vkep, the bytes
it moved (uploads, downloads, staging) and the device memory's peak while the first session was
created, read from vkep.stats(). Models: onnx's light_resnet50 (its weights are made by ConstantOfShape
nodes that ORT folds at creation) and, with --big-mb N, a chain of MatMuls with N MB of float32 weights
built here with onnx.helper (default 1024).

    .venv/bin/python tools/bench_session.py [--big-mb 1024] [--model M.onnx ...] [--json]

A benchmark, not a test: it asserts nothing. Run it again with VKEP_FORCE_DISCRETE=1 for the
discrete-GPU path (staging copies). Compare figures within one run only.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import vkep

MOVED = ("uploads", "upload_bytes", "downloads", "download_bytes", "staging_copies", "staging_bytes")


def big_model(path: Path, megabytes: int) -> int:
    """A chain of 1024x1024 float32 MatMuls holding about `megabytes` MB of weights; its weight bytes."""
    n, width = max(1, megabytes // 4), 1024
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i in range(n):
        w = (rng.standard_normal((width, width), dtype=np.float32) * (width ** -0.5)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]))
        x = f"h{i}"
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(path), save_as_external_data=True, location=path.name + ".data")
    return n * width * width * 4


def _vkep_session(path: str, devices):
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, {"allow_cpu_device": "1"})  # lavapipe too: asked for explicitly
    return ort.InferenceSession(path, sess_options=so, enable_fallback=0)


def _moved() -> dict:
    stats = vkep.stats()[0]
    return {k: stats[k] for k in MOVED} | {"peak_bytes": stats["peak_bytes"]}


def measure(path: str, devices) -> dict:
    from vkep.gpu.device import open_device

    memory = open_device(0).memory
    start_live = memory.stats()["live_bytes"]
    vkep.reset_stats()
    t = time.perf_counter()
    first = _vkep_session(path, devices)
    row = {"vkep_first_s": time.perf_counter() - t, "first": _moved()}
    vkep.reset_stats()
    t = time.perf_counter()
    second = _vkep_session(path, devices)
    row |= {"vkep_second_s": time.perf_counter() - t, "second": _moved()}
    del first, second
    gc.collect()
    row["live_after_release"] = memory.stats()["live_bytes"] - start_live
    t = time.perf_counter()
    cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    row["cpu_s"] = time.perf_counter() - t
    del cpu
    return row


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big-mb", type=int, default=1024, help="weights of the generated MatMul chain (0: none)")
    ap.add_argument("--model", action="append", default=[], help="more models to measure")
    ap.add_argument("--json", action="store_true", help="one JSON line on stdout")
    args = ap.parse_args()
    ort.set_default_logger_severity(3)
    devices = vkep.register()
    models = {"light_resnet50": str(Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx")}
    models |= {Path(m).stem: m for m in args.model}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.big_mb:
            path = Path(tmp) / "big.onnx"
            weights = big_model(path, args.big_mb)
            models[f"matmul_chain_{weights // 2**20}MiB"] = str(path)
        for name, path in models.items():
            rows[name] = measure(path, devices)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'model':28} {'vkep 1st':>9} {'vkep 2nd':>9} {'CPU EP':>8}  first session moved / peak; second moved")
    for name, r in rows.items():
        f, s = r["first"], r["second"]
        print(f"{name:28} {r['vkep_first_s']:8.2f}s {r['vkep_second_s']:8.2f}s {r['cpu_s']:7.2f}s  "
              f"up {_mb(f['upload_bytes'])}, down {_mb(f['download_bytes'])}, staging {_mb(f['staging_bytes'])}"
              f" / peak {_mb(f['peak_bytes'])}; up {_mb(s['upload_bytes'])}, down {_mb(s['download_bytes'])}, "
              f"staging {_mb(s['staging_bytes'])}; live after release {_mb(r['live_after_release'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
