"""Run a model on vkep beside ORT's CPU EP: placement, latency, largest difference.

Used by `vkep run` and by the tests, through ORT's ordinary Python API only.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort

import vkep


def session_options(disable_cpu_fallback: bool = False, threads: int = 0,
                    ep_options: dict[str, str] | None = None) -> ort.SessionOptions:
    """Session options with vkep; `ep_options` are vkep's EP options (README: EP options). vkep is asked for
    explicitly here, so it runs on a CPU-implemented device (lavapipe) too where there is no GPU."""
    so = ort.SessionOptions()
    so.add_provider_for_devices(vkep.register(), {"allow_cpu_device": "1", **(ep_options or {})})
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if disable_cpu_fallback:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if threads:
        so.intra_op_num_threads = threads
    return so


def vkep_session(model, disable_cpu_fallback: bool = False, threads: int = 0,
                 ep_options: dict[str, str] | None = None) -> ort.InferenceSession:
    """A session with vkep; enable_fallback=0 so an EP failure is an error, not a silent CPU rerun."""
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, sess_options=session_options(disable_cpu_fallback, threads, ep_options),
                                enable_fallback=0)


def cpu_session(model) -> ort.InferenceSession:
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def placement(session: ort.InferenceSession) -> list[tuple[str, str, str]]:
    """(node name, op type, EP) for every node, from ORT's own assignment record."""
    return [(node.name, node.op_type, sub.ep_name) for sub in session.get_provider_graph_assignment_info()
            for node in sub.get_nodes()]


@dataclass
class RunReport:
    nodes_per_ep: dict[str, int]
    latency_ms: float
    cpu_latency_ms: float
    max_abs_diff: float
    max_rel_diff: float
    outputs: list[np.ndarray] = field(repr=False, default_factory=list)
    reference: list[np.ndarray] = field(repr=False, default_factory=list)


def _time(session, feeds, runs: int) -> tuple[list, float]:
    outputs = session.run(None, feeds)  # warm-up: pipelines, allocations, plans
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        outputs = session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return outputs, statistics.median(times) * 1e3


def compare(model, feeds: dict, runs: int = 10, reference_model=None) -> RunReport:
    """Run `model` on vkep and on the CPU EP (or `reference_model`, e.g. the float32 twin of a float16
    model, fed the same values) and report both."""
    session = vkep_session(model)
    outputs, latency = _time(session, feeds, runs)
    ref_feeds = feeds
    if reference_model is not None:
        ref_feeds = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feeds.items()}
    reference, cpu_latency = _time(cpu_session(reference_model or model), ref_feeds, runs)
    abs_diff = rel_diff = 0.0
    for got, want in zip(outputs, reference, strict=True):
        got = np.asarray(got, dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        if got.size:
            d = np.abs(got - want)
            abs_diff = max(abs_diff, float(d.max()))
            rel_diff = max(rel_diff, float((d / np.maximum(np.abs(want), 1e-6)).max()))
    counts = Counter(ep for _, _, ep in placement(session))
    return RunReport(dict(counts), latency, cpu_latency, abs_diff, rel_diff, outputs, reference)
