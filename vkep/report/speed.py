"""Speed figures, measured the same way by `vkep report` and by tools/bench.py and tools/bench_overhead.py:

- GFLOPS of one-node GEMM and convolution models on vkep and on ORT's CPU EP (`kernel_gflops`);
- host time per node on a chain of tiny Adds, vkep and the CPU EP (`host_time_per_node`);
- the device's fp32 FMA ceiling (vkep.gpu.ceiling), the "peak" the others are set beside: a driver does not
  report FLOPS, so it is measured.

Medians of warm runs; figures, not assertions (a benchmark compares ratios of one run).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

GEMM_N = 512
CONV = (1, 64, 56, 56, 64, 3)  # batch, in channels, height, width, out channels, kernel
KERNELS = {"gemm": f"GEMM {GEMM_N}³, B an input", "gemm_packed_b": f"GEMM {GEMM_N}³, B a weight",
           "conv": f"Conv {CONV[5]}×{CONV[5]}, {CONV[1]}→{CONV[4]}, {CONV[2]}×{CONV[3]}"}


def median_seconds(run: Callable[[], object], runs: int, warmup: int = 0) -> float:
    """The median time of `runs` calls of `run` after one call and `warmup` more untimed ones."""
    return statistics.median(time_runs(run, runs, warmup)[1])


def time_runs(run: Callable[[], object], runs: int, warmup: int = 0) -> tuple[object, list[float]]:
    """(what a first, untimed call of `run` returned, the times in seconds of `runs` calls after `warmup` more
    untimed ones)."""
    first = run()
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return first, times


def nodes_by_ep(session) -> dict[str, int]:
    """How many nodes ORT placed on each EP (the session needs session.record_ep_graph_assignment_info=1)."""
    counts: dict[str, int] = {}
    for subgraph in session.get_provider_graph_assignment_info() or []:
        counts[subgraph.ep_name] = counts.get(subgraph.ep_name, 0) + len(subgraph.get_nodes())
    return counts


def kernel_models() -> dict[str, tuple[object, dict[str, np.ndarray], int]]:
    """name -> (one-node fp32 model, its feeds, its FLOPs): GEMM 512³ with both operands inputs, with B a weight
    (which vkep packs), and a 3x3 convolution 64->64 channels over 56x56."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    n, (batch, cin, h, w, cout, k) = GEMM_N, CONV
    f32 = TensorProto.FLOAT
    a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    x = rng.random((batch, cin, h, w), np.float32)
    graphs = {
        "gemm": (helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm",
                                   [helper.make_tensor_value_info("a", f32, [n, n]),
                                    helper.make_tensor_value_info("b", f32, [n, n])],
                                   [helper.make_tensor_value_info("y", f32, None)]), {"a": a, "b": b}, 2 * n ** 3),
        "gemm_packed_b": (helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm_w",
                                            [helper.make_tensor_value_info("a", f32, [n, n])],
                                            [helper.make_tensor_value_info("y", f32, None)],
                                            [numpy_helper.from_array(b, "b")]), {"a": a}, 2 * n ** 3),
        "conv": (helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[k // 2] * 4)], "conv",
                                   [helper.make_tensor_value_info("x", f32, list(x.shape))],
                                   [helper.make_tensor_value_info("y", f32, None)],
                                   [numpy_helper.from_array(rng.random((cout, cin, k, k), np.float32) * 0.01, "w")]),
                 {"x": x}, 2 * batch * cout * h * w * cin * k * k),
    }
    return {name: (helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), feeds, flops)
            for name, (graph, feeds, flops) in graphs.items()}


def kernel_gflops(runs: int, ep_options: dict[str, str] | None = None) -> dict[str, dict]:
    """name -> {"vkep": GFLOPS, "cpu": GFLOPS, "vkep_nodes": nodes by EP} for each of `kernel_models`, warm,
    the median of `runs`. vkep's session fails rather than fall back to the CPU EP (runner.vkep_session)."""
    from vkep import runner

    out: dict[str, dict] = {}
    for name, (model, feeds, flops) in kernel_models().items():
        vk = runner.vkep_session(model, disable_cpu_fallback=True, ep_options=ep_options)
        for ep, session in (("vkep", vk), ("cpu", runner.cpu_session(model))):
            seconds = median_seconds(lambda s=session, f=feeds: s.run(None, f), runs)
            out.setdefault(name, {})[ep] = flops / seconds / 1e9
        out[name]["vkep_nodes"] = nodes_by_ep(vk)
    return out


def host_time_per_node(nodes: int = 512, runs: int = 100, warmup: int = 10,
                       ep_options: dict[str, str] | None = None) -> dict[str, dict]:
    """ep -> {"ms_per_run", "us_per_node", "nodes_by_ep"} on vkep.models.add_chain(nodes) (each Add on 16 floats,
    so a run is almost all per-node host cost), for ORT's CPU EP, vkep node by node ("vkep": fuse=0, the cost of
    one node) and vkep as it runs by default ("vkep fused": the Adds fused into groups of one dispatch each, per
    node of the graph); vkep's outputs are checked against the CPU EP's ("max_abs_err")."""
    from vkep import runner
    from vkep.models import add_chain, random_inputs

    model = add_chain(nodes)
    feeds = random_inputs(model)
    out: dict[str, dict] = {}
    reference = None
    options = dict(ep_options or {})
    sessions = (("cpu", lambda: runner.cpu_session(model)),
                ("vkep", lambda: runner.vkep_session(model, disable_cpu_fallback=True,
                                                     ep_options={**options, "fuse": "0"})),
                ("vkep fused", lambda: runner.vkep_session(model, disable_cpu_fallback=True,
                                                           ep_options={**options, "fuse": "1"})))
    for ep, make in sessions:
        session = make()
        outputs, times = time_runs(lambda s=session: s.run(None, feeds), runs, warmup)
        seconds = statistics.median(times)
        out[ep] = {"ms_per_run": seconds * 1e3, "us_per_node": seconds * 1e6 / nodes, "nodes_by_ep": nodes_by_ep(session)}
        if reference is None:
            reference = outputs
        else:
            out[ep]["max_abs_err"] = max(float(np.max(np.abs(np.asarray(g, np.float64) - r)))
                                         for g, r in zip(outputs, reference, strict=True))
    return out
