#!/usr/bin/env python3
"""Small-M matrix products (LLM decode and short prefill): MatMul with a float32 weight and MatMulNBits with
4-bit weights (accuracy_level 0: float32 A; 4: int8 A as ORT's CPU EP), M x K times K x N, on vkep and ORT's
CPU EP in one process, timed alternately (paired) so that the ratio holds on a shared, noisy machine.

    .venv/bin/python tools/bench_gemv.py [--shapes 1x512x4096,1x4096x4096] [--ops matmul,nbits,nbits4] [--runs N]

Prints GFLOPS (2 M K N per run) and GB/s of weights read (4 bytes per fp32 weight; half a byte plus the
scales per 4-bit weight), and vkep / CPU EP. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BLOCK = 32


def model(op: str, m: int, k: int, n: int):
    rng = np.random.default_rng(0)
    f32 = TensorProto.FLOAT
    if op == "matmul":
        w = rng.standard_normal((k, n)).astype(np.float32)
        node = helper.make_node("MatMul", ["a", "w"], ["y"])
        inits = [numpy_helper.from_array(w, "w")]
        opsets = [helper.make_opsetid("", 17)]
        weight_bytes = 4 * k * n
    else:
        blocks = -(-k // BLOCK)
        inits = [numpy_helper.from_array(rng.integers(0, 256, (n, blocks, BLOCK // 2), dtype=np.uint8), "b"),
                 numpy_helper.from_array(rng.uniform(0.01, 0.1, (n, blocks)).astype(np.float32), "s")]
        node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=k, N=n, bits=4,
                                block_size=BLOCK, accuracy_level=4 if op == "nbits4" else 0)
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
        weight_bytes = n * blocks * (BLOCK // 2 + 4)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("a", f32, [m, k])],
                              [helper.make_tensor_value_info("y", f32, None)], inits)
    return helper.make_model(graph, opset_imports=opsets, ir_version=8), weight_bytes


def measure(op: str, m: int, k: int, n: int, runs: int) -> dict:
    import onnxruntime as ort

    from vkep import runner

    onnx_model, weight_bytes = model(op, m, k, n)
    a = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    # (no spinning: ORT's idle intra-op threads would otherwise spin on the cores lavapipe's threads need)
    so = runner.session_options(with_vkep=False)
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sessions = {"vkep": runner.vkep_session(onnx_model, disable_cpu_fallback=True),
                "cpu": ort.InferenceSession(onnx_model.SerializeToString(), sess_options=so,
                                            providers=["CPUExecutionProvider"])}
    outs = {ep: s.run(None, {"a": a})[0] for ep, s in sessions.items()}  # warm-up (pipelines, packing)
    err = float(np.abs(outs["vkep"] - outs["cpu"]).max() / max(1e-30, np.abs(outs["cpu"]).max()))
    times: dict[str, list[float]] = {ep: [] for ep in sessions}
    for _ in range(runs):
        for ep, s in sessions.items():
            t = time.perf_counter()
            s.run(None, {"a": a})
            times[ep].append(time.perf_counter() - t)
    result = {"op": op, "m": m, "k": k, "n": n, "rel_err": err}
    for ep, ts in times.items():
        sec = statistics.median(ts)
        result[ep] = {"ms": sec * 1e3, "gflops": 2 * m * k * n / sec / 1e9, "weight_gb_s": weight_bytes / sec / 1e9}
    result["vkep_over_cpu"] = result["cpu"]["ms"] / result["vkep"]["ms"]
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x512x4096,1x4096x4096", help="MxKxN,...")
    ap.add_argument("--ops", default="matmul,nbits,nbits4")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.json:
        print(f"{'op':<8} {'M x K x N':<16} {'vkep ms':>9} {'GFLOPS':>7} {'GB/s w':>7} {'CPU ms':>8} {'GFLOPS':>7} "
              f"{'GB/s w':>7} {'vkep/CPU':>9} {'rel err':>8}")
    for shape in args.shapes.split(","):
        m, k, n = (int(x) for x in shape.split("x"))
        for op in args.ops.split(","):
            r = measure(op, m, k, n, args.runs)
            if args.json:
                print(json.dumps(r), flush=True)
                continue
            v, c = r["vkep"], r["cpu"]
            print(f"{op:<8} {shape:<16} {v['ms']:>9.3f} {v['gflops']:>7.2f} {v['weight_gb_s']:>7.2f} {c['ms']:>8.3f} "
                  f"{c['gflops']:>7.2f} {c['weight_gb_s']:>7.2f} {r['vkep_over_cpu']:>8.3f}x {r['rel_err']:>8.1e}",
                  flush=True)


if __name__ == "__main__":
    main()
