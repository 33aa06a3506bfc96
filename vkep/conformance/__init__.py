"""`vkep conformance`: every ONNX backend node test case of the installed onnx package through ORT, on one EP.

    vkep conformance [--filter REGEX] [--json OUT.json] [--markdown OUT.md] [--jobs N] [--timeout S]
                     [--validation] [--ep VulkanExecutionProvider|WebGpuExecutionProvider|CPUExecutionProvider]
    vkep conformance --update-expectations        # rewrite vkep/expected/expected-<driver>.json
    vkep conformance --compare A.json B.json      # two reports side by side

The corpus is `onnx.backend.test.case.node.collect_testcases()` (1,884 cases in onnx 1.23), checked with the
tolerances of onnx's backend test runner. Each case runs in a worker process (`vkep.conformance.worker`)
from a pool of N (`vkep.conformance.pool`); a worker that crashes or hangs (a driver bug) is replaced and
its case recorded as `error`. Statuses, the JSON format and the markdown page: `vkep.conformance.report`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from vkep import resources
from vkep.conformance import report as report_mod
from vkep.conformance.pool import Case, Progress, WorkerStartError, run_cases
from vkep.conformance.worker import VULKAN, WEBGPU

__all__ = ["Case", "corpus", "run", "run_cases", "Progress", "WorkerStartError", "expectations_path",
           "load_expectations", "update_expectations", "main"]

ROOT = Path(__file__).resolve().parents[2]
EXPECTATIONS_DIR = resources.EXPECTED_DIR
EXPANDED = re.compile(r"_expanded(_ver\d+)?$")
REGENERATE = "vkep conformance --update-expectations"


def _numpy(value):
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        return [_numpy(v) for v in value]
    return value


def corpus(pattern: str | None = None, names: set[str] | None = None) -> list[Case]:
    """The node test cases of the installed onnx, optionally those whose name matches `pattern` (re.search)
    or is in `names`."""
    import warnings

    import numpy as np

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        cases = collect_testcases()
    ops = {}
    for c in cases:
        if not EXPANDED.search(c.name):
            node = c.model.graph.node[0]
            ops[c.name] = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
    rx = re.compile(pattern) if pattern else None
    out = []
    for c in cases:
        if (rx and not rx.search(c.name)) or (names is not None and c.name not in names):
            continue
        base = EXPANDED.sub("", c.name)
        op = ops.get(c.name) or (f"{ops[base]} (expanded)" if base in ops else base)
        data = [(_numpy(list(i)), _numpy(list(o))) for i, o in c.data_sets]
        out.append(Case(c.name, op, c.model.SerializeToString(), data, float(c.rtol), float(c.atol)))
    return out


# ---- one run, as a report -------------------------------------------------------------------------


def devices() -> list[dict]:
    try:
        from vkep.gpu.device import physical_devices

        return [d.summary() for d in physical_devices()]
    except Exception as exc:  # noqa: BLE001 — no Vulkan here: the report says so
        return [{"error": f"no Vulkan devices: {exc}"}]


def run(ep: str = VULKAN, pattern: str | None = None, names: set[str] | None = None, jobs: int = 2,
        timeout: float = 60.0, validation: bool = False, cmd: list[str] | None = None, quiet: bool = False,
        command: list[str] | None = None, versions: dict | None = None, optimization: str = "default",
        mem_reuse: bool = True) -> dict:
    """Run the corpus (or part of it) on `ep` and return the report (see `vkep.conformance.report`).
    `optimization` (worker.OPTIMIZATION_LEVELS) and `mem_reuse` set up every session, the
    CPU EP's reference included: at "disable_all" ORT folds nothing, so every node of a case runs."""
    import onnx

    start = time.monotonic()
    cases = corpus(pattern, names)
    progress = None if quiet else Progress(len(cases), label=report_mod.EP_SHORT.get(ep, "EP"))
    session = {"optimization": optimization, "mem_reuse": mem_reuse}
    records, info = run_cases(cases, ep, jobs, timeout, validation, cmd=cmd, progress=progress, session=session)
    import vkep

    doc = {
        "format": report_mod.FORMAT, "ep": ep, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command or ["vkep", "conformance"],
        "versions": {"onnxruntime": info.get("onnxruntime"), "onnx": onnx.__version__, "vkep": vkep.__version__,
                     "python": info.get("python"), **(versions or {})},
        "devices": devices(), "manifest": info.get("manifest", []),
        "settings": {"jobs": jobs, "timeout_s": timeout, "validation": validation, "filter": pattern,
                     "optimization": optimization, "mem_reuse": mem_reuse},
        "elapsed_s": round(time.monotonic() - start, 1), "statuses": report_mod.meanings(ep),
        "summary": report_mod.summarize(records), "cases": records,
    }
    return doc


# ---- expectations ---------------------------------------------------------------------------------


def driver_name() -> str:
    from vkep.gpu.device import physical_devices

    found = physical_devices()
    if not found:
        raise RuntimeError("no Vulkan physical device")
    return found[0].driver_name


def expectations_path(driver: str | None = None) -> Path:
    return EXPECTATIONS_DIR / f"expected-{re.sub(r'[^A-Za-z0-9_.-]+', '_', driver or driver_name())}.json"


def load_expectations(path: Path | None = None) -> dict | None:
    path = path or expectations_path()
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def expectations_key(optimization: str = "default") -> str:
    """The list of an expectations file that holds the passes at one optimization level."""
    return "pass_vkep" if optimization == "default" else f"pass_vkep_{optimization}"


def update_expectations(doc: dict, path: Path | None = None) -> tuple[Path, int, int]:
    """Write the cases that passed with every node on vkep at the run's optimization level; with a
    filter, only those cases are replaced. Returns (path, cases before, cases after)."""
    path = path or expectations_path()
    old = load_expectations(path) or {}
    settings = doc["settings"]
    if not settings.get("mem_reuse", True):
        raise RuntimeError("expectations are recorded with ORT's memory reuse on (drop --no-mem-reuse)")
    key = expectations_key(settings.get("optimization", "default"))
    keep = set(old.get(key, []))
    pattern = doc["settings"].get("filter")
    ran = {r["name"] for r in doc["cases"]}
    if pattern:
        keep -= ran
    else:
        keep = set()
    keep |= {r["name"] for r in doc["cases"] if r["status"] == "pass-vkep"}
    dev = doc["devices"][0] if doc.get("devices") else {}
    lists = {k: v for k, v in old.items() if k.startswith("pass_vkep")}
    lists[key] = sorted(keep)
    out = {
        "driver": dev.get("driver"), "device": dev.get("name"), "driver_info": dev.get("driver_info"),
        "onnx": doc["versions"]["onnx"], "onnxruntime": doc["versions"]["onnxruntime"],
        "manifest": [os.path.relpath(p, ROOT) if p.startswith(str(ROOT)) else p for p in doc.get("manifest", [])],
        "regenerate": REGENERATE,
        "note": "ONNX backend node test cases that pass with every node on VulkanExecutionProvider, at ORT's "
                "default graph optimizations (pass_vkep) and with every optimization off (pass_vkep_disable_all); "
                "tests/test_conformance.py runs exactly these.",
        **dict(sorted(lists.items())),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    return path, len(old.get(key, [])), len(keep)


# ---- the command ----------------------------------------------------------------------------------


def main(args) -> int:
    """`vkep conformance` (args from the parser in vkep.cli)."""
    if args.compare:
        a, b = (report_mod.load(p) for p in args.compare)
        print(report_mod.compare(a, b), end="")
        return 0
    if args.ep == WEBGPU:
        tool = ROOT / "tools" / "conformance_webgpu.py"
        if not tool.exists():
            raise RuntimeError(f"{tool} is not here: the WebGPU run needs vkep's source checkout")
        argv = [sys.executable, str(tool), "--jobs", str(args.jobs), "--timeout", str(args.timeout)]
        for flag, value in (("--filter", args.filter), ("--json", args.json), ("--markdown", args.markdown)):
            if value:
                argv += [flag, value]
        return subprocess.call(argv)
    if args.update_expectations and (args.ep != VULKAN):
        raise RuntimeError("--update-expectations records vkep's passes: use it with the default --ep")
    doc = run(args.ep, args.filter, jobs=args.jobs, timeout=args.timeout, validation=args.validation,
              command=["vkep", "conformance", *sys.argv[2:]], optimization=args.optimization,
              mem_reuse=not args.no_mem_reuse)
    finish(doc, args.json, args.markdown)
    if args.update_expectations:
        path, before, after = update_expectations(doc)
        print(f"wrote {path}: {after} cases pass with every node on vkep at optimization level "
              f"{args.optimization} (was {before})")
    return 0


def finish(doc: dict, json_path: str | None, markdown_path: str | None) -> None:
    if json_path:
        report_mod.write_json(doc, json_path)
    if markdown_path:
        Path(markdown_path).write_text(report_mod.markdown(doc))
    print(report_mod.totals_text(doc))
