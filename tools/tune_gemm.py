"""Measure the kernel choices of vkep/kernels/tuning.json on this device, and print (or --write) its class's entry.

Today one choice: whether float16 MatMul and Gemm run on the device's cooperative matrices (matmul_coop.comp) and
with which block of matrices a subgroup computes, against matmul.comp's float16 GEMM, over a set of product
shapes, in one process. A device without cooperative matrices has nothing to tune. For Mesa 26 lavapipe:

    "$(tools/mesa_trixie.sh)" .venv/bin/python tools/tune_gemm.py [--runs 5] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time

import numpy as np
from onnx import TensorProto, helper

from vkep import resources, runner
from vkep.gpu import device
from vkep.kernels import coopmat, tuning

SHAPES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (128, 768, 768), (1024, 64, 1024)]
BLOCKS = [(1, 1), (2, 2), (2, 4), (4, 2), (4, 4)]


def product(m: int, k: int, n: int) -> bytes:
    f16 = TensorProto.FLOAT16
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="put the entry in vkep/kernels/tuning.json")
    args = ap.parse_args(argv)
    info = device.usable_devices()[0]
    cls = tuning.device_class(info)
    print(f"{info.name}, {info.driver_info} (class {cls}); cooperative matrices: {info.coopmat or 'none'}")
    if not (info.features.get("cooperativeMatrix") and coopmat.shader_compiles()):
        print("nothing to tune: no cooperative matrices (or no glslang >= 14 for matmul_coop.comp)")
        return 0
    ratios: dict[tuple[int, int], list[float]] = {b: [] for b in BLOCKS}
    print(f"{'m x k x n':>16}  {'matmul.comp':>11}  " + "  ".join(f"coop {b[0]}x{b[1]}" for b in BLOCKS) + "  (GFLOPS)")
    for shape in SHAPES:
        tiled = gflops(shape, "0", args.runs)
        row = []
        for block in BLOCKS:
            tuning.use_for_this_process(info, "coopmat", {"use": True, "blocks": list(block)})
            speed = gflops(shape, "1", args.runs)
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
    print(json.dumps({cls: {"coopmat": entry}}, indent=2))
    if args.write:
        doc = json.loads(resources.TUNING.read_text(encoding="utf-8"))
        doc.setdefault(cls, {})["coopmat"] = entry
        resources.TUNING.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {resources.TUNING}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
