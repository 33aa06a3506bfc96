#!/usr/bin/env python3
"""Where light_resnet50's time goes on vkep: every distinct Conv/Gemm of the model timed as a one-node session
(constant weights, so vkep packs them as in the model), times its count in the model, grouped by kind, beside
the whole model's time per run. The rest of the model (BatchNormalization, Relu, Sum, pooling) is the whole
minus the parts.

    .venv/bin/python tools/bench_resnet_ops.py [--runs N] [--json] [--off] [--model-only]

--off also times everything with matmul.BROADCAST off (the GEMMs as they were before the broadcast modes),
alternating the two run by run in this process.

A benchmark, not a test: it asserts nothing; compare figures within one run only.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from vkep import runner  # noqa: E402
from vkep.kernels import matmul  # noqa: E402

MODEL = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"


def _kind(op: str, w: tuple[int, ...], strides: tuple[int, ...]) -> str:
    if op != "Conv":
        return op
    k = "x".join(map(str, w[2:]))
    s = max(strides or (1,))
    return f"Conv {k}" + (f" stride {s}" if s > 1 else "")


def distinct_nodes(model: onnx.ModelProto) -> dict[tuple, int]:
    """(op, input shape, weight shape, attributes) -> how many nodes of the model have it."""
    inferred = onnx.shape_inference.infer_shapes(model)
    values = list(inferred.graph.value_info) + list(inferred.graph.input)
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in values}
    weights = {i.name: tuple(i.dims) for i in model.graph.initializer}
    for node in model.graph.node:  # light models make weights with ConstantOfShape
        if node.op_type == "ConstantOfShape":
            shape = shapes.get(node.output[0])
            if shape:
                weights[node.output[0]] = shape
    count: dict[tuple, int] = collections.Counter()
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm"):
            continue
        attrs = tuple(sorted((a.name, tuple(helper.get_attribute_value(a)) if a.ints else helper.get_attribute_value(a))
                             for a in node.attribute))
        w = weights.get(node.input[1]) or shapes[node.input[1]]
        count[(node.op_type, shapes[node.input[0]], w, len(node.input) > 2, attrs)] += 1
    return count


def one_node(op: str, xs: tuple, ws: tuple, bias: bool, attrs: tuple) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-0.1, 0.1, ws).astype(np.float32), "w")]
    if bias:
        n = ws[0]
        inits.append(numpy_helper.from_array(rng.uniform(-0.1, 0.1, (n,)).astype(np.float32), "b"))
    node = helper.make_node(op, ["x", "w"] + (["b"] if bias else []), ["y"], **dict(attrs))
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", 1, xs)],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def per_run(make, feeds: dict, runs: int, settings: tuple[bool, ...]) -> list[float]:
    """Median time per run of the session make() gives, for each setting of matmul.BROADCAST (each session made
    and run under its own; their runs alternate)."""
    sessions = []
    for on in settings:
        matmul.BROADCAST = on
        sessions.append(make())
        sessions[-1].run(None, feeds)
    times: list[list[float]] = [[] for _ in settings]
    for _ in range(runs):
        for on, session, spent in zip(settings, sessions, times, strict=True):
            matmul.BROADCAST = on
            t = time.perf_counter()
            session.run(None, feeds)
            spent.append(time.perf_counter() - t)
    matmul.BROADCAST = True
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--off", action="store_true", help="also time with matmul.BROADCAST off, alternated")
    parser.add_argument("--model-only", action="store_true", help="the whole model only, not each node")
    args = parser.parse_args()
    settings = (True, False) if args.off else (True,)
    model = onnx.load(str(MODEL))
    rows = []
    for (op, xs, ws, bias, attrs), n in ({} if args.model_only else distinct_nodes(model)).items():
        m = one_node(op, xs, ws, bias, attrs)
        x = {"x": np.random.default_rng(1).uniform(-1, 1, xs).astype(np.float32)}
        vk = per_run(lambda m=m: runner.vkep_session(m, disable_cpu_fallback=True), x, args.runs, settings)
        (cpu,) = per_run(lambda m=m: runner.cpu_session(m), x, args.runs, (True,))
        strides = dict(attrs).get("strides", ())
        rows.append({"kind": _kind(op, ws, strides), "x": xs, "w": ws, "count": n, "vkep_ms": [t * 1e3 for t in vk],
                     "cpu_ms": cpu * 1e3})
    x = {model.graph.input[0].name: np.random.default_rng(1).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)}
    whole = [t * 1e3 for t in per_run(lambda: runner.vkep_session(str(MODEL)), x, max(2, args.runs // 2), settings)]
    (whole_cpu,) = per_run(lambda: runner.cpu_session(str(MODEL)), x, args.runs, (True,))
    if args.json:
        print(json.dumps({"nodes": rows, "model_ms": whole, "model_cpu_ms": whole_cpu * 1e3}))
        return
    heads = ["vkep ms"] + (["off ms"] if args.off else [])
    for r in rows:
        times = "  ".join(f"{t:8.2f}" for t in r["vkep_ms"])
        print(f"{r['kind']:18} x{str(r['x']):20} w{str(r['w']):22} n={r['count']:2}  {times}  cpu {r['cpu_ms']:6.2f}")
    kinds: dict[str, list] = collections.defaultdict(lambda: [[0.0] * len(settings), 0.0, 0])
    for r in rows:
        k = kinds[r["kind"]]
        k[0] = [a + t * r["count"] for a, t in zip(k[0], r["vkep_ms"], strict=True)]
        k[1] += r["cpu_ms"] * r["count"]
        k[2] += r["count"]
    print(f"\n{'kind':18} {'nodes':>5} " + " ".join(f"{h:>9}" for h in heads) + f" {'share':>6} {'CPU EP ms':>10}")
    for kind, (vk, cpu, n) in sorted(kinds.items(), key=lambda kv: -kv[1][0][0]):
        print(f"{kind:18} {n:5d} " + " ".join(f"{t:9.1f}" for t in vk) + f" {vk[0] / whole[0]:6.0%} {cpu:10.1f}")
    rest = [w - sum(v[0][i] for v in kinds.values()) for i, w in enumerate(whole)]
    if rows:
        print(f"{'rest of the model':18} {'':5} " + " ".join(f"{t:9.1f}" for t in rest) + f" {rest[0] / whole[0]:6.0%}")
    print(f"{'whole model':18} {'':5} " + " ".join(f"{t:9.1f}" for t in whole) + f" {'':6} {whole_cpu * 1e3:10.1f}")


if __name__ == "__main__":
    main()
