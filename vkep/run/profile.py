"""`vkep run --profile TRACE.json`: the per-node table, read from the JSON trace ORT's profiler wrote.

The trace holds ORT's events (a `model_run` per run, a `<node>_kernel_time` per node execution with the node's
op, EP, input and output shapes and byte sizes) and vkep's (vkep/ort/profiler.py: a `<node>_gpu` kernel event per
execution of a vkep node with its GPU time, and the host's uploads, downloads, submits and waits). Per node: the
median time of an execution (the GPU's for a vkep node that recorded work; ORT's kernel time otherwise, marked
`host`), its share of the median run, and what it achieved where its cost is known: GFLOPS for Conv,
ConvTranspose, MatMul and Gemm and their integer forms (beside the device's FMA ceiling, gpu/ceiling.py), GB/s of its inputs and outputs
for the others.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from typing import Any

from vkep.run.render import _table

VKEP_EP = "VulkanExecutionProvider"
ROWS = 25  # nodes shown, slowest first; the rest are summed in one line
HOST_OPERATIONS = ("upload", "download", "staging copy", "submit", "wait")


def _shapes(args: dict, key: str) -> list[list[int]]:
    return [dims for entry in args.get(key) or [] for dims in entry.values()]


def flops(op: str, ins: list, outs: list) -> int | None:
    """Multiply-adds x 2 of one execution from its input and output shapes (None: an absent input); None where
    vkep does not count them."""
    if not outs or not ins or ins[0] is None:
        return None
    y = math.prod(outs[0])
    at = 3 if op == "QLinearConv" else 1  # the weight's input
    weight = ins[at] if len(ins) > at and ins[at] is not None and len(ins[at]) >= 3 else None
    if op in ("Conv", "ConvInteger", "QLinearConv") and weight:
        return 2 * y * math.prod(weight[1:])  # each output: Cin/group x kernel taps
    if op == "ConvTranspose" and weight:
        return 2 * math.prod(ins[0]) * math.prod(weight[1:])  # each input: Cout/group x kernel taps
    if op in ("MatMul", "MatMulInteger", "QLinearMatMul") and ins[0]:
        return 2 * y * ins[0][-1]  # (a 1-D A: its one dimension is K too)
    if op == "Gemm" and len(outs[0]) == 2 and outs[0][0]:
        return 2 * y * (math.prod(ins[0]) // outs[0][0])  # A is [M, K] or [K, M]
    return None


def moved_bytes(args: dict) -> int | None:
    sizes = [args.get(k) for k in ("activation_size", "parameter_size", "output_size")]
    return sum(int(s) for s in sizes if s is not None) if any(s is not None for s in sizes) else None


def summarize(events: list[dict], ceiling_gflops: float | None) -> dict[str, Any]:
    """The table's data from the trace's events (as json.load gives them)."""
    runs = [e["dur"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    nodes: dict[str, dict] = {}
    host_times: dict[str, list[int]] = defaultdict(list)
    gpu_times: dict[str, list[int]] = defaultdict(list)
    input_shapes: dict[str, list] = {}
    operations: dict[str, list] = defaultdict(lambda: [0, 0, 0])  # name -> [count, µs, bytes]
    busy_ns = 0  # the device's busy time: its command buffers' spans (vkep's `batch` events)
    for e in events:
        cat, name, args = e.get("cat"), e.get("name", ""), e.get("args") or {}
        if cat == "Node" and name.endswith("_kernel_time"):
            node = name[: -len("_kernel_time")]
            nodes.setdefault(node, args)
            host_times[node].append(e["dur"])
        elif cat == "Kernel" and "gpu_duration_ns" in args:
            gpu_times[args.get("node_name", "")].append(int(args["gpu_duration_ns"]))
            if "input_shapes" in args:  # ORT's node event lists no input vkep packed: vkep's own event does
                shapes = args["input_shapes"]  # (ORT writes a value that reads as JSON as JSON)
                input_shapes[args.get("node_name", "")] = json.loads(shapes) if isinstance(shapes, str) else shapes
        elif cat == "Api" and name == "batch" and "gpu_duration_ns" in args:
            busy_ns += int(args["gpu_duration_ns"])
        elif cat == "Api" and name in HOST_OPERATIONS:
            entry = operations[name]
            entry[0] += 1
            entry[1] += e.get("dur", 0)
            entry[2] += int(args.get("bytes", 0))
    run_us = statistics.median(runs) if runs else None
    rows = []
    for node, args in nodes.items():
        op, ep = args.get("op_name", "?"), args.get("provider", "?")
        if gpu_times.get(node):
            seconds, clock = statistics.median(gpu_times[node]) / 1e9, "gpu"
        else:
            seconds, clock = statistics.median(host_times[node]) / 1e6, "host"
        outs = _shapes(args, "output_type_shape")
        work, moved = flops(op, input_shapes.get(node) or _shapes(args, "input_type_shape"), outs), moved_bytes(args)
        # (a captured graph's replays run no node: its nodes have GPU events without ORT node events)
        executions = len(gpu_times[node]) if clock == "gpu" else len(host_times[node])
        row = {"node": node, "op": op, "ep": ep, "clock": clock, "ms": seconds * 1e3, "executions": executions,
               "share": seconds * 1e6 / run_us if run_us else None, "gflops": None, "gbps": None, "of_ceiling": None}
        if seconds > 0 and work:
            row["gflops"] = work / seconds / 1e9
            if ceiling_gflops and ep == VKEP_EP:
                row["of_ceiling"] = row["gflops"] / ceiling_gflops
        elif seconds > 0 and moved:
            row["gbps"] = moved / seconds / 1e9
        rows.append(row)
    rows.sort(key=lambda r: -r["ms"])
    kernels_ns = sum(sum(times) for times in gpu_times.values())
    return {"runs": len(runs), "run_ms": run_us / 1e3 if run_us is not None else None,
            "ceiling_gflops": ceiling_gflops, "nodes": rows, "gpu_busy_ms": busy_ns / 1e6,
            "gpu_kernels_ms": kernels_ns / 1e6,
            "host_operations": {k: {"count": v[0], "ms": v[1] / 1e3, "bytes": v[2]} for k, v in operations.items()}}


def render(summary: dict[str, Any], path: str) -> str:
    ceiling = summary["ceiling_gflops"]
    lines = [f"profile: {path} (ORT's JSON trace with vkep's events; open it in ui.perfetto.dev or chrome://tracing)",
             f"per node: median of {summary['runs']} profiled runs (median run {_num(summary['run_ms'])} ms; "
             "every vkep node through Python, where its GPU time is measured); device FMA ceiling "
             + (f"{ceiling:.1f} GFLOPS" if ceiling else "not measured")]
    rows = [("node", "op", "EP", "time ms", "clock", "share", "GFLOPS", "GB/s", "of ceiling")]
    shown = summary["nodes"][:ROWS]
    for r in shown:
        rows.append((r["node"], r["op"], r["ep"].replace("ExecutionProvider", ""), f"{r['ms']:.3f}", r["clock"],
                     _pct(r["share"]), _num(r["gflops"]), _num(r["gbps"]), _pct(r["of_ceiling"])))
    rest = summary["nodes"][ROWS:]
    if rest:
        rows.append((f"({len(rest)} more)", "", "", f"{sum(r['ms'] for r in rest):.3f}", "",
                     _pct(sum(r["share"] or 0 for r in rest) if summary["run_ms"] else None), "", "", ""))
    lines += _table(rows)
    if summary.get("gpu_busy_ms"):
        lines.append(f"GPU: its command buffers ran {summary['gpu_busy_ms']:.3f} ms over all profiled runs; the nodes' "
                     f"own GPU times sum to {summary['gpu_kernels_ms']:.3f} ms "
                     f"({summary['gpu_kernels_ms'] / summary['gpu_busy_ms']:.1%} of it)")
    ops = summary["host_operations"]
    if ops:
        lines.append("host operations over all profiled runs: " + ", ".join(
            f"{name} {ops[name]['count']}x {ops[name]['ms']:.3f} ms"
            + (f" {ops[name]['bytes'] / 2**20:.2f} MB" if ops[name]["bytes"] else "")
            for name in HOST_OPERATIONS if name in ops))
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
