"""`vkep run`'s report as text (the same dict `--json` prints)."""

from __future__ import annotations

import textwrap
from typing import Any

EP_LABELS = {"vkep": "vkep", "cpu": "CPU EP"}


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def header(report: dict[str, Any]) -> str:
    """What is run: the model, the free dimensions and how each got its value, the inputs."""
    lines = [f"model: {report['model']}"]
    if report["dims"]:
        lines.append("free dimensions (set them with --dim NAME=VALUE or --shape INPUT=D0,D1,...):")
        rows = []
        for d in report["dims"]:
            how = d["how"]
            if how == "default":
                how = "default: nothing in the model says"
            rows.append((d["name"], str(d["value"]), how))
        lines += _table(rows)
    lines.append(f"inputs (generated with --seed {report['seed']} unless given):")
    lines += _table([(i["name"], i["dtype"], str(i["shape"]), i["how"]) for i in report["inputs"]])
    return "\n".join(lines)


def body(report: dict[str, Any]) -> str:
    """What happened: failures, placement, outputs, latency, and the verdict."""
    lines: list[str] = []
    for key, label in (("vkep_error", "vkep"), ("cpu_error", "CPU EP")):
        error = report.get(key)
        if error:
            stage = "creating the session" if error["stage"] == "session" else "running"
            lines.append(f"{label} failed {stage}:")
            lines += textwrap.indent(error["message"], "    ").splitlines()
    placement = report.get("placement")
    if placement:
        lines.append(f"placement: {placement['on_vkep']} / {placement['nodes']} nodes on vkep")
        for entry in placement["left_to_other_eps"]:
            ep = entry["ep"].replace("ExecutionProvider", " EP")
            for i, why in enumerate(entry["why"]):
                lead = f"{entry['count']:5d} {entry['op']} on the {ep}:" if i == 0 else " " * (len(entry["op"]) + 7)
                lines.append(f"  {lead} {why['reason']}" + (f" ({why['count']})" if len(entry["why"]) > 1 else ""))
    if report.get("outputs"):
        lines.append("outputs (difference from the CPU EP):")
        rows = []
        for o in report["outputs"]:
            if o["max_abs_diff"] is None:
                diff = f"CPU EP: {o['cpu_dtype']} {o['cpu_shape']}"
            else:
                diff = f"max abs {o['max_abs_diff']:.3g}, rel {o['max_rel_diff']:.3g}"
            rows.append((o["name"], o["dtype"], str(o["shape"]), diff, "ok" if o["matches"] else "DIFFERS"))
        lines += _table(rows)
    latency = report.get("latency", {})
    runs = max((t["warm_runs"] for t in latency.values()), default=0)
    if latency.get("vkep", {}).get("first_ms") is not None:  # beside a failed vkep run it says little
        lines.append(f"latency in ms (median and p90 of {runs} warm runs):")
        rows = [("", "session", "first run", "median", "p90")]
        for key, t in latency.items():
            if t["first_ms"] is not None:
                rows.append((EP_LABELS[key], *(_ms(t[f]) for f in ("session_ms", "first_ms", "median_ms", "p90_ms"))))
        lines += _table(rows)
    if report.get("stats") is not None:
        import json

        lines.append("vkep counters:")
        lines += textwrap.indent(json.dumps(report["stats"], indent=2, default=str), "  ").splitlines()
    lines.append(f"verdict: {report['message']}")
    if report.get("hint"):
        lines.append(f"  {report['hint']}")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
