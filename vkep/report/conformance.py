"""The conformance section of `vkep report`: ONNX's backend node tests on one device (vkep.conformance's worker
pool, ORT's default optimizations, memory reuse on), checked against the committed expectations of that
device's driver (vkep/expected/, vkep.conformance.expectations) where there are some; else pass/fail counts
only."""

from __future__ import annotations

import time

from vkep import conformance
from vkep.conformance import expectations
from vkep.conformance import report as conformance_report
from vkep.conformance.matrix import SWITCH_SAMPLE

# --quick: a few cases of each kind (float32, float16, 8-bit, MatMul/Gemm/Conv), the conformance matrix's
# per-switch sample
QUICK = SWITCH_SAMPLE


def run(device: dict, pattern: str | None, jobs: int, timeout: float) -> dict:
    """Run the cases matching `pattern` (all where None) on `device` (a PhysicalDeviceInfo.summary()):
    {"cases", "elapsed_s", "summary" (by status), "expectations": file name or None, and, with a file,
    "expected" (cases of this run it expects all on vkep), "kept" (of those, still all on vkep),
    "regressions" (lines), "new" (all on vkep, not expected)}, "bad" (wrong and error cases)."""
    start = time.monotonic()
    cases = conformance.corpus(pattern)
    if not cases:
        raise ValueError(f"no ONNX backend node test case matches {pattern!r}")
    session = {"optimization": "default", "mem_reuse": True, "ep_options": {"device": str(device["index"])}}
    records, info = conformance.run_cases(cases, jobs=jobs, timeout=timeout, session=session)
    seen = info.get("devices") or []
    if len(seen) <= device["index"] or expectations.key_of(seen[device["index"]]) != expectations.key_of(device):
        raise RuntimeError(f"the conformance workers did not see {device['name']} as device #{device['index']}")
    path = expectations.path_for(expectations.key_of(device))
    doc = expectations.load(path)
    out: dict = {"cases": len(records), "pattern": pattern, "elapsed_s": round(time.monotonic() - start, 1),
                 "summary": conformance_report.summarize(records)["by_status"],
                 "expectations": path.name if doc else None, "expectations_missing": None if doc else path.name,
                 "bad": [(r["name"], r["status"], conformance_report.detail(r)) for r in records
                         if r["status"] in ("wrong", "error")]}
    want = expectations.expected(doc) if doc else None
    if want is not None:
        all_on = want[0]
        ran = {r["name"]: r["status"] for r in records}
        expected = [n for n in ran if n in all_on]
        out.update(expected=len(expected), kept=sum(ran[n] == "pass-vkep" for n in expected),
                   regressions=expectations.regressions(doc, records),
                   new=sorted(n for n, s in ran.items() if s == "pass-vkep" and n not in all_on))
    return out


def markdown(result: dict) -> list[str]:
    if result["pattern"] == QUICK:
        which = f"the {result['cases']} cases of the quick sample (vkep.conformance.matrix.SWITCH_SAMPLE)"
    elif result["pattern"]:
        which = f"the {result['cases']} cases matching `{result['pattern']}`"
    else:
        which = f"all {result['cases']} cases"
    lines = [f"ONNX backend node tests, {which}, in {result['elapsed_s']:.0f} s "
             "(ORT's default optimizations; `pass-vkep`: passed with every node on vkep).", ""]
    lines += ["| status | cases |", "|---|---:|", *(f"| `{k}` | {n} |" for k, n in result["summary"].items())]
    lines.append("")
    if result["expectations"] is None:
        lines.append(f"No expectation file for this driver (`vkep/expected/{result['expectations_missing']}` does "
                     "not exist): pass/fail counts only. A run of `vkep conformance --update-expectations` on this "
                     "driver writes one.")
    else:
        lines.append(f"Against `vkep/expected/{result['expectations']}`: {result['kept']} of the {result['expected']} "
                     f"cases it expects all on vkep still are; {len(result['regressions'])} regressions; "
                     f"{len(result['new'])} cases all on vkep that it does not expect.")
        if result["regressions"]:
            lines += ["", "Regressions:", "", *(f"- {line}" for line in result["regressions"][:100])]
        if result["new"]:
            lines += ["", "Not expected, now all on vkep: " + ", ".join(f"`{n}`" for n in result["new"][:100])]
    if result["bad"]:
        lines += ["", "| wrong or error case | status | detail |", "|---|---|---|"]
        lines += [f"| {name} | {status} | {conformance_report._cell(detail, 200)} |"
                  for name, status, detail in result["bad"][:100]]
    return lines


def summary_line(result: dict) -> str:
    s = result["summary"]
    text = f"conformance: {result['cases']} cases, {s['pass-vkep']} all on vkep, {s['wrong']} wrong, {s['error']} error"
    if result["expectations"] is None:
        return text + f" (no expectation file for this driver: {result['expectations_missing']})"
    return (text + f"; {result['kept']}/{result['expected']} expected cases kept, {len(result['regressions'])} "
            f"regressions ({result['expectations']})")
