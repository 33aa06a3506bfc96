"""Measure the kernel choices of vkep/kernels/tuning.json on this device, and print (or --write) its class's entry.

Two choices: whether float16 MatMul and Gemm run on the device's cooperative matrices (matmul_coop.comp) and
with which block of matrices a subgroup computes, against matmul.comp's float16 GEMM, over a set of product
shapes, in one process (a device without cooperative matrices has nothing to tune there); and whether float32
products of few tiles and a long K are split for speed (split-K: matmul.py), each product split and whole in
sessions side by side, timed alternately. For Mesa 26 lavapipe:

    "$(tools/mesa_trixie.sh)" .venv/bin/python tools/tune_gemm.py [--runs 5] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time

import numpy as np
from onnx import TensorProto, helper

from vkep import resources, runner
from vkep.gpu import device
from vkep.kernels import coopmat, matmul, tuning

SHAPES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (128, 768, 768), (1024, 64, 1024)]
BLOCKS = [(1, 1), (2, 2), (2, 4), (4, 2), (4, 4)]


def product(m: int, k: int, n: int, elem: int = TensorProto.FLOAT16) -> bytes:
    f16 = elem
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm",
                              [helper.make_tensor_value_info("a", f16, [m, k]),
                               helper.make_tensor_value_info("b", f16, [k, n])],
                              [helper.make_tensor_value_info("y", f16, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def gflops(shape: tuple[int, int, int], coop: str, runs: int) -> float:
    """The best of `runs` timed runs (after a first one), in GFLOPS."""
    m, k, n = shape
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((m, k)).astype(np.float16), "b": rng.standard_normal((k, n)).astype(np.float16)}
    session = runner.vkep_session(product(m, k, n), disable_cpu_fallback=True, ep_options={"coopmat": coop})
    session.run(None, feeds)
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        best = min(best, time.perf_counter() - start)
    return 2 * m * k * n / best / 1e9


SPLIT_SHAPES = [(64, 65536, 64), (32, 16384, 48), (48, 32768, 40)]  # one 64 x 64 tile of y each, K long


def split_speedups(info, tiles: int, runs: int) -> list[float]:
    """Each SPLIT_SHAPES product's time whole over its time split for speed below `tiles` tiles (median of `runs`
    alternated runs; each session plans its product under its own setting)."""
    out = []
    for m, k, n in SPLIT_SHAPES:
        rng = np.random.default_rng(0)
        feeds = {"a": rng.standard_normal((m, k)).astype(np.float32), "b": rng.standard_normal((k, n)).astype(np.float32)}
        sessions = {}
        for name, setting in (("whole", 0), ("split", tiles)):
            tuning.use_for_this_process(info, "splitk", {"tiles": setting})
            sessions[name] = runner.vkep_session(product(m, k, n, TensorProto.FLOAT), disable_cpu_fallback=True)
            sessions[name].run(None, feeds)  # (plans the product under this setting)
        times: dict[str, list[float]] = {"whole": [], "split": []}
        for _ in range(runs):
            for name, session in sessions.items():
                start = time.perf_counter()
                session.run(None, feeds)
                times[name].append(time.perf_counter() - start)
        whole, split = (sorted(times[name])[len(times[name]) // 2] for name in ("whole", "split"))
        print(f"split-K {m}x{k}x{n}: whole {1e3 * whole:.1f} ms, split {1e3 * split:.1f} ms: {whole / split:.2f}x",
              flush=True)
        out.append(whole / split)
    return out


def tune_splitk(info, runs: int) -> dict:
    tiles = (os.cpu_count() or 2) if info.device_type == "cpu" else matmul.SPLIT_K["tiles"]
    speedups = split_speedups(info, tiles, max(runs, 7))
    geomean = math.exp(sum(map(math.log, speedups)) / len(speedups))
    return {"tiles": tiles if geomean >= 1.1 else 0,
            "measured": f"tools/tune_gemm.py, {info.driver_info}, {info.name}, {platform.machine()}, "
                        f"{datetime.date.today()}: products of one 64 x 64 tile and a long K split below {tiles} tiles "
                        f"ran {min(speedups):.2f}-{max(speedups):.2f}x (geomean {geomean:.2f}x) their time whole over "
                        f"{len(speedups)} products (split for speed where >= 1.1x)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="put the entry in vkep/kernels/tuning.json")
    args = ap.parse_args(argv)
    info = device.usable_devices()[0]
    cls = tuning.device_class(info)
    print(f"{info.name}, {info.driver_info} (class {cls}); cooperative matrices: {info.coopmat or 'none'}")
    entries = {"splitk": tune_splitk(info, args.runs)}
    if info.features.get("cooperativeMatrix") and coopmat.shader_compiles():
        entries["coopmat"] = tune_coopmat(info, args.runs)
    else:
        print("cooperative matrices: nothing to tune (none, or no glslang >= 14 for matmul_coop.comp)")
    print(json.dumps({cls: entries}, indent=2))
    if args.write:
        doc = json.loads(resources.TUNING.read_text(encoding="utf-8"))
        doc.setdefault(cls, {}).update(entries)
        resources.TUNING.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {resources.TUNING}")
    return 0


def tune_coopmat(info, runs: int) -> dict:
    ratios: dict[tuple[int, int], list[float]] = {b: [] for b in BLOCKS}
    print(f"{'m x k x n':>16}  {'matmul.comp':>11}  " + "  ".join(f"coop {b[0]}x{b[1]}" for b in BLOCKS) + "  (GFLOPS)")
    for shape in SHAPES:
        tiled = gflops(shape, "0", runs)
        row = []
        for block in BLOCKS:
            tuning.use_for_this_process(info, "coopmat", {"use": True, "blocks": list(block)})
            speed = gflops(shape, "1", runs)
            ratios[block].append(speed / tiled)
            row.append(f"{speed:9.2f}")
        print(f"{'x'.join(map(str, shape)):>16}  {tiled:11.2f}  " + "  ".join(row), flush=True)
    geomean = {b: math.exp(sum(map(math.log, r)) / len(r)) for b, r in ratios.items()}
    best = max(geomean, key=geomean.get)
    low, high = min(ratios[best]), max(ratios[best])
    print("geomean of coop / matmul.comp: " + ", ".join(f"{b[0]}x{b[1]} {g:.2f}x" for b, g in geomean.items()))
    entry = {"use": geomean[best] > 1.0, "blocks": list(best),
             "measured": f"tools/tune_gemm.py, {info.driver_info}, {info.name}, {platform.machine()}, "
                         f"{datetime.date.today()}: the best block ({best[0]}x{best[1]} matrices a subgroup) reached "
                         f"{low:.2f}-{high:.2f}x matmul.comp's float16 GFLOPS (geomean {geomean[best]:.2f}x) over "
                         f"{len(SHAPES)} products of 64-1024"}
    return entry


if __name__ == "__main__":
    sys.exit(main())
