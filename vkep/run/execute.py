"""One model, one set of inputs, one EP: session, placement, timed runs, and what failed where."""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort

import vkep
from vkep.run import progress

SESSION_LOG_SEVERITY = 3  # errors only: GetCapability errors still show; ORT's placement warning does not
# ORT logs a failing node at error level and raises the same text: vkep run reports it once, itself
_RUN_OPTIONS = ort.RunOptions()
_RUN_OPTIONS.log_severity_level = 4

_RUNNING = re.compile(r"running (\S+) node\. Name:'([^']*)'")
_NODE_OP = re.compile(r"Node \(([^)]*)\) Op \(([^)]*)\)")


@dataclass
class Failure:
    stage: str  # "session" (creating it) or "run"
    message: str
    node: str | None = None
    op: str | None = None
    node_ep: str | None = None  # the EP ORT placed the failing node on (when the session was created)

    @classmethod
    def of(cls, stage: str, exc: BaseException) -> Failure:
        message = str(exc).strip()
        found = _RUNNING.search(message)
        if found:
            return cls(stage, message, node=found.group(2), op=found.group(1))
        found = _NODE_OP.search(message)
        if found:
            return cls(stage, message, node=found.group(1), op=found.group(2))
        return cls(stage, message)

    def where(self) -> str:
        if self.node is None:
            return "creating the session" if self.stage == "session" else "running the model"
        on = f", on {self.node_ep}" if self.node_ep else ""
        return f"{self.op} node {self.node!r}{on}"

    def as_dict(self) -> dict:
        return {"stage": self.stage, "message": self.message, "node": self.node, "op": self.op,
                "node_ep": self.node_ep}


@dataclass
class Timing:
    session_ms: float | None = None  # None: no session
    first_ms: float | None = None  # the first run: pipelines, allocations, plans
    warm_ms: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        warm = np.asarray(self.warm_ms)
        return {"session_ms": self.session_ms, "first_ms": self.first_ms,
                "median_ms": float(np.median(warm)) if warm.size else None,
                "p90_ms": float(np.percentile(warm, 90)) if warm.size else None, "warm_runs": int(warm.size)}


@dataclass
class Attempt:
    """What happened when one EP ran the model."""

    ep: str
    timing: Timing = field(default_factory=Timing)
    outputs: list[np.ndarray] | None = None
    output_names: list[str] = field(default_factory=list)
    placement: list[tuple[str, str, str]] = field(default_factory=list)  # (node name, op type, EP)
    declined: dict[tuple[str, str], str] = field(default_factory=dict)  # why vkep left a node to another EP
    failure: Failure | None = None
    profile_file: str | None = None  # the JSON trace ORT's profiler wrote (a session made with profiling on)

    @property
    def ok(self) -> bool:
        return self.failure is None


def attempt(ep: str, make_session: Callable[[], ort.InferenceSession], feeds: dict[str, np.ndarray],
            runs: int) -> Attempt:
    """Create a session, record placement, run once (timed) and then `runs` more times."""
    result = Attempt(ep)
    eps_before = _live_eps()
    start = time.perf_counter()
    try:
        with _phase(ep, "creating the session", "loading shaders, creating pipelines, prepacking"):
            session = make_session()
    except Exception as exc:  # noqa: BLE001 — any failure is reported, with the node ORT names
        result.failure = Failure.of("session", exc)
        return result
    result.timing.session_ms = (time.perf_counter() - start) * 1e3
    result.placement = [(node.name, node.op_type, sub.ep_name) for sub in session.get_provider_graph_assignment_info()
                        for node in sub.get_nodes()]
    # the reasons recorded by the EP this session created (vkep makes one OrtEp per session)
    result.declined = {key: reason for e in _live_eps() if not any(e is b for b in eps_before)
                       for key, reason in e.declined.items()}
    result.output_names = [o.name for o in session.get_outputs()]
    try:
        start = time.perf_counter()
        with _phase(ep, "first run", "a cold driver compiles each shader the first time it runs it"):
            result.outputs = session.run(None, feeds, _RUN_OPTIONS)
        result.timing.first_ms = (time.perf_counter() - start) * 1e3
        for _ in range(runs):
            start = time.perf_counter()
            session.run(None, feeds, _RUN_OPTIONS)
            result.timing.warm_ms.append((time.perf_counter() - start) * 1e3)
    except Exception as exc:  # noqa: BLE001
        result.failure = Failure.of("run", exc)
        result.failure.node_ep = next((e for n, _, e in result.placement if n == result.failure.node), None)
    if session.get_session_options().enable_profiling:
        result.profile_file = session.end_profiling()
    return result


def _phase(ep: str, label: str, why: str):
    """Progress of a slow vkep phase on stderr (vkep's counters mean nothing for the CPU EP)."""
    return progress.phase(label, why) if ep == "vkep" else contextlib.nullcontext()


def _live_eps() -> list:
    """vkep's live `Ep` objects (vkep.ort.ep is importable only once ORT loaded the plugin)."""
    ep_module = sys.modules.get("vkep.ort.ep")
    return list(ep_module.EPS.values()) if ep_module is not None else []


def placement_summary(result: Attempt) -> dict:
    """Nodes per EP, and for the op types left to another EP, how many and why vkep declined them."""
    per_ep = Counter(ep for _, _, ep in result.placement)
    left: dict[str, dict] = {}
    for name, op, ep in result.placement:
        if ep == vkep.EP_NAME:
            continue
        entry = left.setdefault(op, {"op": op, "count": 0, "ep": ep, "why": Counter(), "nodes": []})
        entry["count"] += 1
        entry["why"][result.declined.get((name, op)) or _ORT_PLACED] += 1
        if len(entry["nodes"]) < 5:
            entry["nodes"].append(name)
    ops = sorted(left.values(), key=lambda e: (-e["count"], e["op"]))
    for e in ops:
        e["why"] = [{"reason": reason, "count": n} for reason, n in e["why"].most_common()]
    return {"nodes": len(result.placement), "on_vkep": per_ep.get(vkep.EP_NAME, 0), "per_ep": dict(per_ep),
            "left_to_other_eps": ops}


# a node vkep did not decline but that ORT placed elsewhere: ORT keeps shape computations on the CPU
_ORT_PLACED = "vkep did not decline it: ORT placed it there (ORT keeps small shape computations on the CPU)"


def tolerance(dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing an output with the CPU EP's."""
    if dtype == np.float16:
        return 1e-2, 1e-2
    if dtype.kind in "fc":
        return 1e-3, 1e-4
    return 0.0, 0.0


def _values(output) -> np.ndarray:
    """An output as an array; a sequence of maps (ZipMap's) as its values, a row per map in the order of its keys,
    when every map has the same keys (else an object array, compared as it is)."""
    if isinstance(output, list) and output and all(isinstance(m, dict) for m in output):
        keys = list(output[0])
        if all(list(m) == keys for m in output):
            return np.array([[m[k] for k in keys] for m in output], np.float32)
    return np.asarray(output)


def compare(result: Attempt, reference: Attempt) -> list[dict]:
    """Per output: shape, dtype and difference from the reference's."""
    rows = []
    for name, got, want in zip(result.output_names, result.outputs or [], reference.outputs or [], strict=False):
        got, want = _values(got), _values(want)
        row = {"name": name, "shape": list(got.shape), "dtype": str(got.dtype), "cpu_shape": list(want.shape),
               "cpu_dtype": str(want.dtype), "max_abs_diff": None, "max_rel_diff": None, "matches": False}
        if got.shape == want.shape and got.dtype.kind in "fciub" and want.dtype.kind in "fciub":
            a, b = got.astype(np.float64), want.astype(np.float64)
            same = np.isclose(a, b, *tolerance(got.dtype), equal_nan=True)
            d = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.abs(a - b))  # equal infinities: 0
            row["max_abs_diff"] = float(d.max()) if d.size else 0.0
            row["max_rel_diff"] = float((d / np.maximum(np.abs(b), 1e-6)).max()) if d.size else 0.0
            row["matches"] = bool(same.all())
        elif got.shape == want.shape:
            row["matches"] = bool(np.array_equal(got, want))
        rows.append(row)
    return rows
