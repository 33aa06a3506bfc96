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

import re
import subprocess
import sys
import time
from pathlib import Path

from vkep.conformance import expectations
from vkep.conformance import report as report_mod
from vkep.conformance.pool import Case, Progress, WorkerStartError, run_cases
from vkep.conformance.worker import VULKAN, WEBGPU

__all__ = ["Case", "corpus", "run", "run_cases", "Progress", "WorkerStartError", "expectations_path",
           "load_expectations", "update_expectations", "main", "run_all"]

ROOT = Path(__file__).resolve().parents[2]
EXPANDED = re.compile(r"_expanded(_ver\d+)?$")
REGENERATE = expectations.REGENERATE


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
        out.append(Case(c.name, op, c.model.SerializeToString(), data, float(c.rtol), float(c.atol),
                        case_dtype(c.model.graph)))
    return out


def kernel_cases(pattern: str | None = None, names: set[str] | None = None) -> list[Case]:
    """The manifest's generated one-node cases (vkep.conformance.generated: every entry x type x opset
    range, as tests/test_manifest_ops.py runs them), named `kernel_<Op>-<opset>-<type>`, their expected
    outputs computed now by ORT's CPU EP (float16 cases from their float32 twin) and held to the tolerances
    of that test. A case whose reference the CPU EP cannot run is left out."""
    import numpy as np

    from vkep import runner
    from vkep.conformance import generated

    rx = re.compile(pattern) if pattern else None
    out = []
    for c in generated.cases():
        name = f"kernel_{c.name}"
        if (rx and not rx.search(name)) or (names is not None and name not in names):
            continue
        spec = c.spec
        model = generated.one_node_model(spec, c.opset, c.dtype, c.constraint)
        feeds = generated.feeds_for(model, spec, c.dtype)
        try:
            ref = runner.cpu_session(generated.reference_model(c), log_severity=4)
            want = ref.run(None, generated.reference_feeds(feeds))
        except Exception:  # noqa: BLE001 — nothing to compare with (as test_manifest_ops skips it)
            continue
        types = generated.output_types(c)
        want = [np.asarray(w).astype(t) for w, t in zip(want, types, strict=True)]
        tol = generated.tolerance(types[0])
        op = f"{spec.domain}.{spec.op}" if spec.domain not in ("", "ai.onnx") else spec.op
        inputs = [feeds[vi.name] for vi in model.graph.input]
        out.append(Case(name, op, model.SerializeToString(), [(inputs, want)], float(tol["rtol"]),
                        float(tol["atol"]), c.dtype))
    return out


def cases_of(source: str = "onnx", pattern: str | None = None, names: set[str] | None = None) -> list[Case]:
    """The cases of a corpus: "onnx" (ONNX's backend node tests), "kernels" (the manifest's generated
    reference cases) or "all"."""
    return ([*(corpus(pattern, names) if source in ("onnx", "all") else []),
             *(kernel_cases(pattern, names) if source in ("kernels", "all") else [])])


def case_dtype(graph) -> str:
    """The element type a case is about: its first input's (else its first output's), as onnx names it
    in lower case (float, float16, int8, bool, ...); "sequence"/"optional"/"map" for those kinds."""
    from onnx import TensorProto

    for value in [*graph.input, *graph.output]:
        kind = value.type.WhichOneof("value")
        if kind in ("tensor_type", "sparse_tensor_type"):
            elem = getattr(value.type, kind).elem_type
            if elem:
                return TensorProto.DataType.Name(elem).lower()
        elif kind:
            return kind.removesuffix("_type")
    return "none"


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
        mem_reuse: bool = True, source: str = "onnx") -> dict:
    """Run the corpus (or part of it) on `ep` and return the report (see `vkep.conformance.report`).
    `optimization` (worker.OPTIMIZATION_LEVELS) and `mem_reuse` set up every session, the
    CPU EP's reference included: at "disable_all" ORT folds nothing, so every node of a case runs."""
    import onnx

    start = time.monotonic()
    cases = cases_of(source, pattern, names)
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
        "settings": {"jobs": jobs, "timeout_s": timeout, "validation": validation, "filter": pattern, "corpus": source,
                     "optimization": optimization, "mem_reuse": mem_reuse},
        "elapsed_s": round(time.monotonic() - start, 1), "statuses": report_mod.meanings(ep),
        "summary": report_mod.summarize(records), "cases": records,
    }
    return doc


# ---- expectations (vkep.conformance.expectations) ------------------------------------------------


def expectations_path(key: dict | None = None) -> Path:
    """The expectations file of a driver (by its key), or of the driver this process runs on."""
    return expectations.path_for(key or expectations.this_driver_key())


def load_expectations(path: Path | None = None) -> dict | None:
    return expectations.load(path or expectations_path())


def update_expectations(doc: dict, path: Path | None = None) -> tuple[Path, int, int]:
    """Write the cases of a single-driver run that passed with every node on vkep at the run's optimization
    level; with a filter, only those cases are replaced. Returns (path, cases before, cases after)."""
    settings = doc["settings"]
    if not settings.get("mem_reuse", True):
        raise RuntimeError("expectations are recorded with ORT's memory reuse on (drop --no-mem-reuse)")
    device = expectations.default_device(doc["devices"])
    path = path or expectations.path_for(expectations.key_of(device))
    before, after = expectations.update(path, device, doc["cases"], doc["versions"], doc.get("manifest", []),
                                       optimization=settings.get("optimization", "default"),
                                       filtered=bool(settings.get("filter")))
    return path, before, after


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
    if args.update_expectations and args.corpus != "onnx":
        raise RuntimeError("expectations hold ONNX backend node test cases: use --update-expectations with "
                           "--corpus onnx")
    if args.device == "all":
        return run_all(args)
    doc = run(args.ep, args.filter, jobs=args.jobs, timeout=args.timeout, validation=args.validation,
              command=["vkep", "conformance", *sys.argv[2:]], optimization=args.optimization,
              mem_reuse=not args.no_mem_reuse, source=args.corpus)
    finish(doc, args.json, args.markdown)
    if args.update_expectations:
        path, before, after = update_expectations(doc)
        print(f"wrote {path}: {after} cases pass with every node on vkep at optimization level "
              f"{args.optimization} (was {before})")
    return 0


def run_all(args) -> int:
    """`vkep conformance --device all`: the matrix (vkep.conformance.matrix) over every driver and device
    present and the switches asked for; with --update-expectations, each target's file gets its runs."""
    from vkep.conformance import matrix

    if args.ep != VULKAN or args.optimization != "default" or args.no_mem_reuse:
        raise RuntimeError("--device all runs vkep at ORT's default optimizations with memory reuse on")
    chosen = matrix.choose_switches(args.switches)
    cases = cases_of(args.corpus, args.filter)
    found = [d for d in matrix.drivers() if not args.driver or args.driver in str(d.icd)
             or any(args.driver in dev.get("driver_info", "") for dev in d.devices)]
    doc = matrix.run_matrix(cases, found, chosen, jobs=args.jobs, timeout=args.timeout, validation=args.validation,
                            command=["vkep", "conformance", *sys.argv[2:]])
    matrix.write(doc, args.json, args.markdown)
    print(matrix.totals_text(doc))
    regressed = 0
    for run_ in doc["runs"]:  # against the expectations as they were before this run
        expected = expectations.load(expectations.path_for(run_["key"]))
        found = expectations.regressions(expected, run_["cases"], run_["switch"]) if expected else []
        regressed += len(found)
        for line in found:
            print(f"REGRESSION {run_['target']} [{run_['switch']}]: {line}")
    if args.update_expectations:
        for run_ in doc["runs"]:
            if run_.get("error"):
                print(f"not recorded: {run_['target']} {run_['switch']}: {run_['error']}")
                continue
            path = expectations.path_for(run_["key"])
            before, after = expectations.update(path, run_["device"], run_["cases"], doc["versions"],
                                                doc.get("manifest", []), switch=run_["switch"],
                                                filtered=bool(args.filter))
            print(f"wrote {path.name} [{run_['switch']}]: {after} cases pass with every node on vkep (was {before})")
    return 1 if regressed and not args.update_expectations else 0


def finish(doc: dict, json_path: str | None, markdown_path: str | None) -> None:
    if json_path:
        report_mod.write_json(doc, json_path)
    if markdown_path:
        Path(markdown_path).write_text(report_mod.markdown(doc))
    print(report_mod.totals_text(doc))
