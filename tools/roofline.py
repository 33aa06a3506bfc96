#!/usr/bin/env python3
"""Rooflines: what the device's own limits allow for the targets of issue 12 that lavapipe does not reach, beside
what vkep reaches, in one run.

Sections (all by default; --sections picks some):
  ceilings  the device's rates, each measured by a shader of nothing but one operation (vkep/gpu/ceiling.py):
            multiply-adds (GFLOPS) and lane loads (64-bit loads at per-invocation addresses; on a CPU device each
            is a scalar load of its own, whatever the addresses), and the CPU EP's own GEMM rate beside them
  gemm      matmul.comp's broadcast mode on 512^3 (the mode vkep runs float32 products in on lavapipe): its
            multiply-adds and lane loads, counted from its blocking (vkep/kernels/matmul.py), the time each ceiling
            allows for them, the bounds that follow (the roofline's: the slower of the two; and the sum, if they
            never overlap) and the measured rate
  model     light_resnet50: the FLOPs of its Conv and Gemm nodes and the time they take at the device's ceiling,
            against the CPU EP's measured time: the ratio to the CPU EP that no kernel on this device can beat,
            the share of the ceiling that a ratio of 4 needs, and what vkep reaches
  cold      each pipeline the model uses, created and compiled cold (tools/bench_cold.py): lavapipe compiles a
            pipeline at its first dispatch, on its one queue's thread, one after the other, so the sum of their
            compiles is the floor of a cold start on this driver; beside vkep's cold start (and the WebGPU EP's,
            on the same driver, with --webgpu)

    .venv/bin/python tools/roofline.py [--sections ceilings,gemm,model,cold] [--runs 10] [--webgpu]

A benchmark, not a test: it asserts nothing. On a loaded machine every rate falls: compare within one run.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, shape_inference

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from vkep import runner  # noqa: E402
from vkep.gpu import ceiling  # noqa: E402
from vkep.kernels import matmul  # noqa: E402
from vkep.run.profile import flops  # noqa: E402 — the FLOPs `vkep run --profile` counts per node

SECTIONS = ("ceilings", "gemm", "model", "cold")
GEMM_N = 512
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODEL = LIGHT / "light_resnet50.onnx"
TARGET_RATIO = 4.0  # issue 12: resnet50 within 4x the CPU EP's time


def log(message: str) -> None:
    print(f"roofline: {message}", file=sys.stderr, flush=True)


def timed(sessions: list, feeds: dict, runs: int, rounds: int = 3) -> list[tuple[float, float]]:
    """(median, fastest) seconds a run of each session: `rounds` rounds, each a block of runs per session after
    an untimed one, so a load on the machine that comes and goes weighs on each alike (blocks, not alternate
    runs: ORT's CPU threads spin on after a run and would slow the next session's). The ceilings are the fastest
    of theirs: the fastest run is what to set against them."""
    times: list[list[float]] = [[] for _ in sessions]
    for _ in range(rounds):
        for session, out in zip(sessions, times, strict=True):
            session.run(None, feeds)
            for _ in range(max(1, runs // rounds)):
                start = time.perf_counter()
                session.run(None, feeds)
                out.append(time.perf_counter() - start)
    return [(statistics.median(t), min(t)) for t in times]


def gemm_model(n: int) -> bytes:
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm",
                              [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, [n, n]) for x in "ab"],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def broadcast_counts(m: int, n: int, k: int, a_pairs: bool, b_pairs: bool) -> tuple[int, int]:
    """(FLOPs, lane loads) of matmul.comp's broadcast mode on an m x k by k x n product (see its broadcast()):
    a subgroup of 8 lanes computes BR rows x 8 BC columns; per 2 steps of K, lane l loads rows 8 g + l of A
    (BR / 8 loads a lane, twice without pairs) and its BC columns of B (BC loads, twice without pairs)."""
    rows, columns = matmul.BROADCAST_ROWS, matmul.BROADCAST_LANE_COLUMNS
    subgroups = math.ceil(m / rows) * math.ceil(n / (8 * columns))
    steps = math.ceil(k / 2)
    loads_per_lane = rows // 8 * (1 if a_pairs else 2) + columns * (1 if b_pairs else 2)
    return 2 * m * n * k, subgroups * steps * 8 * loads_per_lane


def ceilings(args, found: dict) -> None:
    print("\n## Device ceilings (shaders of nothing but one operation)")
    gflops, why = ceiling.fma_gflops()
    loads, why_loads = ceiling.lane_load_rate()
    found.update(fma=gflops, loads=loads)
    print(f"multiply-adds  {gflops:8.1f} GFLOPS" if gflops else f"multiply-adds  - ({why})")
    print(f"lane loads     {loads:8.2f} G/s" if loads else f"lane loads     - ({why_loads})")
    if gflops and loads:
        print(f"(a lane load costs the time of {gflops / 2 / loads:.0f} lane multiply-adds; "
              "lavapipe also lowers every fma() to a multiply and an add: gallivm's NIR options set lower_ffma32)")
    print("(each the fastest of 5 dispatches)")


def gemm(args, found: dict) -> None:
    fma, loads = found.get("fma"), found.get("loads")
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((GEMM_N, GEMM_N)).astype(np.float32) for x in "ab"}
    sessions = [runner.vkep_session(gemm_model(GEMM_N), disable_cpu_fallback=True), runner.cpu_session(gemm_model(GEMM_N))]
    flop, lane_loads = broadcast_counts(GEMM_N, GEMM_N, GEMM_N, True, True)
    (median, fastest), (cpu_median, cpu_fastest) = timed(sessions, feeds, args.runs)
    rate, best, cpu, cpu_best = (flop / t / 1e9 for t in (median, fastest, cpu_median, cpu_fastest))

    print(f"\n## GEMM {GEMM_N}^3 fp32, matmul.comp broadcast mode ({matmul.BROADCAST_ROWS} rows x "
          f"{8 * matmul.BROADCAST_LANE_COLUMNS} columns a subgroup, pair loads)")
    print(f"work: {flop / 1e9:.3f} GFLOP, {lane_loads / 1e6:.1f} M lane loads ({flop / lane_loads:.0f} FLOPs a lane "
          "load)")
    print(f"measured: vkep {rate:.1f} GFLOPS (median; fastest {best:.1f}), the CPU EP {cpu:.1f} (fastest {cpu_best:.1f}, "
          "MLAS: the CPU's own FMA instructions)")
    if not (fma and loads):
        return
    t_fma, t_loads = flop / fma / 1e9, lane_loads / loads / 1e9
    roof, serial = flop / max(t_fma, t_loads) / 1e9, flop / (t_fma + t_loads) / 1e9
    print(f"at the ceilings: multiply-adds {t_fma * 1e3:.1f} ms, lane loads {t_loads * 1e3:.1f} ms")
    print(f"bounds: roofline {roof:.1f} GFLOPS ({roof / fma:.0%} of the multiply-add ceiling), "
          f"{serial:.1f} if the two never overlap ({serial / fma:.0%})")
    print(f"vkep's fastest run: {best / fma:.0%} of the ceiling, {best / roof:.0%} of the roofline, {best / serial:.0%} "
          "of the serial bound")


def model_flops(model: onnx.ModelProto) -> int:
    """FLOPs of one run of the model's Conv, Gemm and MatMul nodes, from its inferred shapes."""
    inferred = shape_inference.infer_shapes(model)
    shapes = {t.name: list(t.dims) for t in inferred.graph.initializer}
    for value in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [d.dim_value if d.HasField("dim_value") else 1 for d in dims]
    total = 0
    for node in inferred.graph.node:
        count = flops(node.op_type, [shapes.get(x) for x in node.input], [shapes.get(y) for y in node.output])
        total += count or 0
    return total


def model(args, found: dict) -> None:
    fma = found.get("fma")
    proto = onnx.load(str(MODEL))
    total = model_flops(proto)
    cpu_session = runner.cpu_session(str(MODEL))
    feeds = {i.name: np.random.default_rng(0).uniform(-1, 1, [d if isinstance(d, int) else 1 for d in i.shape])
             .astype(np.float32) for i in cpu_session.get_inputs()}
    vkep_session = runner.vkep_session(str(MODEL), disable_cpu_fallback=True)
    (vkep, vkep_best), (cpu, cpu_best) = timed([vkep_session, cpu_session], feeds, args.runs)
    print(f"\n## {MODEL.stem}: {total / 1e9:.2f} GFLOP in its Conv, Gemm and MatMul nodes")
    print(f"median run (fastest): CPU EP {cpu * 1e3:.1f} ms ({cpu_best * 1e3:.1f}; {total / cpu / 1e9:.1f} GFLOPS), vkep "
          f"{vkep * 1e3:.1f} ms ({vkep_best * 1e3:.1f}): {vkep / cpu:.2f}x the CPU EP's time ({vkep_best / cpu_best:.2f}x "
          f"fastest to fastest), {total / vkep / 1e9:.1f} GFLOPS over the whole run")
    if not fma:
        return
    floor = total / fma / 1e9  # (the fastest runs: a machine's load only slows a run, and the ceiling is a fastest)
    share = total / (TARGET_RATIO * cpu_best) / 1e9 / fma
    print(f"at the device's multiply-add ceiling ({fma:.1f} GFLOPS) those nodes alone take {floor * 1e3:.1f} ms: "
          f"{floor / cpu_best:.2f}x the CPU EP's fastest run, the ratio no kernel on this device beats")
    print(f"{TARGET_RATIO:g}x the CPU EP's fastest run ({TARGET_RATIO * cpu_best * 1e3:.1f} ms) needs them at "
          f"{share:.0%} of the ceiling with every other node free; vkep's fastest run reaches "
          f"{total / vkep_best / 1e9 / fma:.0%} of it over the whole run")


def cold(args, found: dict) -> None:
    import bench_cold

    run, per, webgpu = bench_cold.measure(str(MODEL), args.webgpu)
    compile_s, create_s = sum(p[4] for p in per), sum(p[3] for p in per)
    ours = run["session_s"] + run["first_run_s"]
    print(f"\n## Cold start, {MODEL.stem} (empty caches, MESA_SHADER_CACHE_DISABLE=true)")
    print(f"{len(per)} pipelines: create {create_s:.2f} s, the driver's compile at first dispatch {compile_s:.2f} s "
          f"(the slowest: {per[0][0]} {per[0][4]:.2f} s)")
    print(f"vkep: session {run['session_s']:.2f} s + first run {run['first_run_s']:.2f} s = {ours:.2f} s, of which "
          f"the serial compile floor is {compile_s / ours:.0%}")
    if webgpu and "error" not in webgpu:
        theirs = webgpu["session_s"] + webgpu["first_run_s"]
        print(f"WebGPU EP: {theirs:.2f} s; vkep takes {ours / theirs:.2f}x; a third of it ({theirs / 3:.2f} s) "
              f"{'is above' if theirs / 3 > compile_s else 'is below'} the compile floor alone ({compile_s:.2f} s)")
    elif webgpu:
        print(f"WebGPU EP: {webgpu['error']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated: " + ", ".join(SECTIONS))
    parser.add_argument("--runs", type=int, default=10, help="timed runs per figure (median)")
    parser.add_argument("--webgpu", action="store_true", help="the cold section also times ORT's WebGPU EP")
    args = parser.parse_args()
    import vkep

    meta = vkep.register()[0].ep_metadata
    print(f"# rooflines: {meta.get('vulkan.device_name')}, {meta.get('vulkan.driver')}, {os.cpu_count()} CPUs")
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    found: dict = {}
    if {"gemm", "model"} & set(wanted) and "ceilings" not in wanted:
        wanted.insert(0, "ceilings")  # (their bounds are the ceilings')
    for section in wanted:
        if section not in SECTIONS:
            parser.error(f"unknown section {section!r}")
        globals()[section](args, found)


if __name__ == "__main__":
    main()
