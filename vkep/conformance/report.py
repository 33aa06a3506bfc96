"""Reports of `vkep conformance`: the summary, the JSON document, the markdown page, and a side-by-side
comparison of two JSON reports (e.g. vkep and ORT's WebGPU EP on the same machine).

The JSON document (`"format": "vkep-conformance/1"`):

    {"format", "ep", "created", "command", "versions": {onnxruntime, onnx, vkep, python},
     "devices": [vkep.gpu.device summaries], "manifest": [paths], "settings": {jobs, timeout_s, validation,
     filter}, "elapsed_s", "statuses": {status: meaning}, "summary": {total, by_status, by_op, off_ep_ops},
     "cases": [{name, op, status, nodes: {EP: count}, cpu_ops, message, max_abs, max_rel, mismatched,
                seconds, validation}]}

Statuses are the same for every EP: `pass-vkep` means "passed, every node on the EP under test" (the
report's "ep"; for ORT's CPU EP itself every pass is `pass-cpu`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

FORMAT = "vkep-conformance/1"
STATUSES = ["pass-vkep", "pass-partial", "pass-cpu", "wrong", "error", "skip-cpu"]
SHORT = {"pass-vkep": "all on EP", "pass-partial": "partial", "pass-cpu": "no node on EP", "wrong": "wrong",
         "error": "error", "skip-cpu": "skip-cpu"}
EP_SHORT = {"VulkanExecutionProvider": "vkep", "WebGpuExecutionProvider": "webgpu", "CPUExecutionProvider": "cpu"}


def meanings(ep: str) -> dict[str, str]:
    return {
        "pass-vkep": f"passed, every node on {ep}",
        "pass-partial": f"passed, some nodes on {ep} and some on ORT's CPU EP",
        "pass-cpu": f"passed, no node on {ep}",
        "wrong": "ran, but an output differs from the expected one (largest abs/rel error recorded)",
        "error": "an exception (session creation or run), a crashed worker or a timeout",
        "skip-cpu": "ORT's own CPU EP fails this case too (it is not counted against the EP)",
    }


def summarize(records: list[dict]) -> dict:
    by_status = Counter(r["status"] for r in records)
    by_op: dict[str, Counter] = {}
    for r in records:
        by_op.setdefault(r["op"], Counter())[r["status"]] += 1
    off_ep = Counter(op for r in records if r["status"] in ("pass-partial", "pass-cpu")
                     for op in r.get("cpu_ops", []))
    return {
        "total": len(records),
        "by_status": {s: by_status.get(s, 0) for s in STATUSES},
        "by_op": {op: {s: c[s] for s in STATUSES if c[s]} for op, c in sorted(by_op.items())},
        "off_ep_ops": dict(off_ep.most_common()),
    }


def write_json(report: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=1, allow_nan=False) + "\n")


def load(path: str | Path) -> dict:
    report = json.loads(Path(path).read_text())
    if report.get("format") != FORMAT:
        raise ValueError(f"{path}: not a vkep conformance report (format {report.get('format')!r})")
    return report


def _cell(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _table(header: list[str], rows: list[list], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |",
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def device_line(report: dict) -> str:
    devices = report.get("devices") or []
    if not devices:
        return "no Vulkan device listed"
    d = devices[0]
    return f"{d.get('name')} (driver {d.get('driver')}, {d.get('driver_info') or '?'}; Vulkan {d.get('api_version')})"


def _num(x) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) else str(x)


def detail(r: dict) -> str:
    text = r.get("message", "")
    if r["status"] == "wrong" and r.get("max_abs") is not None:
        text = f"max abs {_num(r['max_abs'])}, max rel {_num(r['max_rel'])}; {text}"
    return text


def markdown(report: dict) -> str:
    ep, s = report["ep"], report["summary"]
    v, st = report.get("versions", {}), report.get("settings", {})
    total = s["total"] or 1
    lines = [f"# ONNX backend node tests on {ep}", "",
             f"Device: {device_line(report)}.  ",
             f"onnxruntime {v.get('onnxruntime')}, onnx {v.get('onnx')}; {s['total']} cases"
             + (f" matching `{st['filter']}`" if st.get("filter") else "")
             + (f"; manifest: {', '.join(Path(p).name for p in report.get('manifest', []))}" if report.get("manifest")
                else "")
             + f"; {st.get('jobs')} workers, validation {'on' if st.get('validation') else 'off'}; "
             f"{report.get('elapsed_s', 0):.0f} s.", "", "## Totals", ""]
    rows = [[f"`{k}`", n, f"{100 * n / total:.1f}%", meanings(ep)[k]] for k, n in s["by_status"].items()]
    ran = s["total"] - s["by_status"].get("skip-cpu", 0)
    passed = sum(s["by_status"].get(k, 0) for k in ("pass-vkep", "pass-partial", "pass-cpu"))
    rows.append(["total", s["total"], "", f"{passed} of the {ran} cases that ORT's CPU EP passes pass here"])
    lines += _table(["status", "cases", "share", "meaning"], rows, "lrrl")
    if s.get("off_ep_ops"):
        lines += ["", "## Ops that keep passing cases off the EP", "",
                  "How many `pass-partial`/`pass-cpu` cases have at least one node of this op on the CPU EP.", ""]
        lines += _table(["op", "cases"], [[op, n] for op, n in list(s["off_ep_ops"].items())[:40]])
    lines += ["", "## Per op", "", "`(expanded)`: the op's function body as separate nodes.", ""]
    lines += _table(["op", "cases", *STATUSES],
                    [[op, sum(c.values()), *(c.get(k, "") for k in STATUSES)] for op, c in s["by_op"].items()])
    bad = [r for r in report["cases"] if r["status"] in ("wrong", "error")]
    lines += ["", f"## Wrong and error cases ({len(bad)})", ""]
    if bad:
        lines += _table(["case", "status", "detail"], [[r["name"], r["status"], _cell(detail(r))] for r in bad], "lll")
    else:
        lines.append("None.")
    flagged = [r for r in report["cases"] if r.get("validation")]
    if flagged:
        lines += ["", f"## Cases with Vulkan validation messages ({len(flagged)})", ""]
        lines += _table(["case", "messages", "first"],
                        [[r["name"], r["validation"]["count"], _cell(r["validation"]["first"])] for r in flagged],
                        "lrl")
    return "\n".join(lines) + "\n"


def label(report: dict) -> str:
    devices = report.get("devices") or [{}]
    return f"{EP_SHORT.get(report['ep'], report['ep'])}@{devices[0].get('driver', '?')}"


def compare(a: dict, b: dict) -> str:
    """One markdown page: totals and per-op counts of two reports side by side."""
    la, lb = label(a), label(b)
    if la == lb:
        la, lb = f"A {la}", f"B {lb}"
    lines = [f"# Conformance: {la} vs {lb}", "",
             f"A: {a['ep']} on {device_line(a)}, onnxruntime {a['versions'].get('onnxruntime')}  ",
             f"B: {b['ep']} on {device_line(b)}, onnxruntime {b['versions'].get('onnxruntime')}", "", "## Totals", ""]
    rows = [[f"`{k}`" + (f" ({SHORT[k]})" if SHORT[k] != k else ""), a["summary"]["by_status"].get(k, 0),
             b["summary"]["by_status"].get(k, 0)]
            for k in STATUSES]
    rows.append(["total", a["summary"]["total"], b["summary"]["total"]])
    lines += _table(["status", la, lb], rows)
    sa = {r["name"]: r["status"] for r in a["cases"]}
    sb = {r["name"]: r["status"] for r in b["cases"]}
    both = sa.keys() & sb.keys()
    only_a = sum(sa[n] == "pass-vkep" and sb[n] != "pass-vkep" for n in both)
    only_b = sum(sb[n] == "pass-vkep" and sa[n] != "pass-vkep" for n in both)
    lines += ["", f"Cases passing with every node on the EP: {only_a} on {la} only, {only_b} on {lb} only, "
              f"{sum(sa[n] == sb[n] == 'pass-vkep' for n in both)} on both.", "", "## Per op", "",
              "full = `pass-vkep` (every node on the EP), part = `pass-partial`, bad = `wrong` + `error`.", ""]
    ops = sorted(a["summary"]["by_op"].keys() | b["summary"]["by_op"].keys())
    rows = []
    for op in ops:
        ca, cb = a["summary"]["by_op"].get(op, {}), b["summary"]["by_op"].get(op, {})
        row = [op, sum(ca.values()) or sum(cb.values())]
        for c in (ca, cb):
            row += [c.get("pass-vkep", 0), c.get("pass-partial", 0), c.get("wrong", 0) + c.get("error", 0)]
        rows.append(row)
    lines += _table(["op", "cases", f"{la} full", "part", "bad", f"{lb} full", "part", "bad"], rows)
    return "\n".join(lines) + "\n"


def totals_text(report: dict) -> str:
    """A few plain lines for the terminal."""
    s = report["summary"]
    parts = [f"{k}{' (all on ' + EP_SHORT.get(report['ep'], 'EP') + ')' if k == 'pass-vkep' else ''} {n}"
             for k, n in s["by_status"].items()]
    return (f"{report['ep']} on {device_line(report)}: {s['total']} cases in {report.get('elapsed_s', 0):.0f} s\n  "
            + ", ".join(parts))
