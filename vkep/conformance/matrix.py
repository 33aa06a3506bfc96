"""`vkep conformance --device all`: the corpus on every Vulkan driver and device present, under each feature switch.

    vkep conformance --device all [--switches all|default|NAME,...] [--filter REGEX] [--json M.json]
                     [--markdown M.md] [--update-expectations]

Drivers: every ICD file the Vulkan loader would read (ICD_DIRS), plus Mesa 25 lavapipe from Debian's
bookworm-backports where `tools/mesa_backports.sh` has unpacked it into `.cache/`. The loader reads
VK_DRIVER_FILES once, at process start, so each driver is probed (`python -m vkep.conformance.matrix
--probe`) and run in worker processes of its own, started with VK_DRIVER_FILES naming its ICD alone. A driver
whose probe finds no usable device (its hardware is not here) is listed in the report as absent, with the
reason; it is not an error.

Switches (vkep.options.FEATURE_SWITCHES: each setting with a `switch_off` value) turn one optional device
feature off. EP options (fp16, int8, subgroups, coopmat, host_import) go to every session of the run; the
process-wide one (VKEP_FORCE_DISCRETE) into the environment of the run's own workers. Each target (driver x
device) x switch is one pool run of `vkep.conformance.pool`.

The report (JSON format FORMAT, and a markdown page) has every run's records and the cells op x dtype x
target x switch: cases, passes, failures, the largest absolute and relative error. Expectations: one file per
driver under vkep/expected/, named and keyed by what the driver reports (vendor, VkDriverId, driver version):
`vkep.conformance.expectations`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from vkep import options
from vkep.conformance import expectations as expect
from vkep.conformance import report as report_mod
from vkep.conformance.pool import Case, Progress, run_cases, worker_command
from vkep.conformance.worker import VULKAN, first_line

FORMAT = "vkep-conformance-matrix/1"
ROOT = Path(__file__).resolve().parents[2]
ICD_DIRS = [Path("/usr/share/vulkan/icd.d"), Path("/usr/local/share/vulkan/icd.d"), Path("/etc/vulkan/icd.d")]
BACKPORTS_ICD = ROOT / ".cache" / "mesa-backports" / "lvp_icd.json"  # tools/mesa_backports.sh
# tools/mesa_trixie.sh: Mesa 26 lavapipe in a trixie root, whose programs run through its wrapper (trixie's loader)
TRIXIE_RUN = ROOT / ".cache" / "trixie" / "run"
TRIXIE_ICD = ROOT / ".cache" / "trixie" / "root" / "usr" / "share" / "vulkan" / "icd.d" / "lvp_icd.json"
DEFAULT = "default"
# the cases the test suite runs under each switch (tests/test_conformance.py; `--filter` takes it too): a few
# of each kind a switch touches (float16, int8/uint8/bool, MatMul/Gemm/Conv) and common float ops
SWITCH_SAMPLE = (
    r"^test_(add|add_bcast|add_int8|add_uint8|mul|mul_int8|mul_uint8|matmul_[234]d|gemm_default_.*|basic_conv_.*"
    r"|conv_with_strides_padding|relu|cast_FLOAT16_to_FLOAT|cast_FLOAT_to_FLOAT16|castlike_FLOAT16_to_FLOAT"
    r"|castlike_FLOAT_to_FLOAT16|equal|equal_bcast|greater|less|where_example|and2d|or2d|not_2d|isnan_float16"
    r"|isinf_float16|max_float16|min_float16|max_int8|min_uint8|softmax_example|transpose_default|concat_1d_axis_0"
    r"|gather_0|attention_4d_fp16|reshape_reordered_all_dims|range_float_type_positive_delta_expanded)$")


# ---- drivers and devices --------------------------------------------------------------------------


@dataclass
class Driver:
    """One ICD file, and what its probe found."""

    icd: Path
    env: dict[str, str]
    launcher: tuple[str, ...] = ()  # what its processes start through (TRIXIE_RUN), before the interpreter
    devices: list[dict] = field(default_factory=list)  # PhysicalDeviceInfo.summary() of each
    absent: str = ""  # why it offers no usable device here ("" when it does)

    def worker_command(self) -> list[str]:
        return [*self.launcher, *worker_command(VULKAN)]


@dataclass
class Target:
    """One device of one driver: what a matrix column is run on."""

    driver: Driver
    device: dict

    @property
    def key(self) -> dict:
        return expect.key_of(self.device)

    @property
    def label(self) -> str:
        """driver name and version, and the device's index where the driver offers more than one"""
        several = len(self.driver.devices) > 1
        return f"{self.device['driver']} {self.key['driver_version']}" + (f" #{self.device['index']}" if several else "")

    @property
    def ep_options(self) -> dict[str, str]:
        return {"device": str(self.device["index"])}


def icd_files() -> list[Path]:
    found = sorted({p.resolve() for d in ICD_DIRS if d.is_dir() for p in d.glob("*.json")})
    if BACKPORTS_ICD.exists():
        found.append(BACKPORTS_ICD)
    if TRIXIE_RUN.exists() and TRIXIE_ICD.exists():
        found.append(TRIXIE_ICD)
    return found


def launcher(icd: Path) -> tuple[str, ...]:
    return (str(TRIXIE_RUN),) if icd == TRIXIE_ICD else ()


def driver_env(icd: Path) -> dict[str, str]:
    """The environment that gives a process this driver alone: VK_DRIVER_FILES (VK_ICD_FILENAMES for older
    loaders), and the directory of a library the ICD names by absolute path first on LD_LIBRARY_PATH (the
    backports lavapipe's libdrm lies beside it)."""
    env = {"VK_DRIVER_FILES": str(icd), "VK_ICD_FILENAMES": str(icd)}
    try:
        library = Path(json.loads(icd.read_text())["ICD"]["library_path"])
    except (OSError, ValueError, KeyError, TypeError):
        return env
    if library.is_absolute() and library.parent.is_dir():
        rest = os.environ.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = str(library.parent) + (os.pathsep + rest if rest else "")
    return env


def probe(icd: Path, timeout: float = 120.0) -> Driver:
    """Ask a process that sees only this driver which devices it offers."""
    env = driver_env(icd)
    driver = Driver(icd, env, launcher(icd))
    try:
        out = subprocess.run([*driver.launcher, sys.executable, "-m", "vkep.conformance.matrix", "--probe"],
                             env={**os.environ, **env},
                             capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        driver.absent = f"its probe gave no answer within {timeout:g} s"
        return driver
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    answer = json.loads(lines[-1]) if lines else {"error": (out.stderr.strip().splitlines() or ["no answer"])[-1]}
    if answer.get("error"):
        driver.absent = answer["error"]
        return driver
    driver.devices = [d for d in answer["devices"] if d.get("usable")]
    unusable = [f"{d['name']}: lacks {', '.join(d['missing'])}" for d in answer["devices"] if not d.get("usable")]
    if not driver.devices:
        driver.absent = "; ".join(unusable) or "no Vulkan device"
    return driver


def _probe_main() -> int:
    """`python -m vkep.conformance.matrix --probe`: one JSON line, the devices this process sees."""
    try:
        from vkep.gpu.device import physical_devices

        print(json.dumps({"devices": [d.summary() for d in physical_devices()]}))
    except Exception as exc:  # noqa: BLE001 — no device of this driver here: the matrix lists it as absent
        print(json.dumps({"error": " ".join(str(exc).split())[:400] or type(exc).__name__}))
    return 0


def drivers() -> list[Driver]:
    return [probe(icd) for icd in icd_files()]


def targets(found: list[Driver]) -> list[Target]:
    return [Target(d, dev) for d in found for dev in d.devices]


# ---- feature switches -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Switch:
    name: str  # "default", "fp16=0", "VKEP_FORCE_DISCRETE=1"
    ep_options: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    meaning: str = ""


def switches() -> list[Switch]:
    """The default (every feature the device has) and one switch per optional feature, off."""
    out = [Switch(DEFAULT, meaning="every optional feature the device has")]
    for s in options.FEATURE_SWITCHES:
        pair = ((s.name, s.switch_off),)
        scope = "EP option" if s.scope == options.SESSION else "environment variable (process-wide)"
        out.append(Switch(f"{s.name}={s.switch_off}", pair if s.scope == options.SESSION else (),
                          pair if s.scope == options.PROCESS else (), f"{scope}: {s.meaning.split('. ')[0]}"))
    return out


def choose_switches(spec: str) -> list[Switch]:
    every = switches()
    if spec == "all":
        return every
    names = [n.strip() for n in spec.split(",") if n.strip()]
    by_name = {s.name: s for s in every} | {s.name.split("=")[0]: s for s in every}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown switch(es) {', '.join(unknown)}; they are: {', '.join(s.name for s in every)}")
    return [by_name[n] for n in names]


# ---- the run --------------------------------------------------------------------------------------


def run_matrix(cases: list[Case], found: list[Driver], chosen: list[Switch], jobs: int = 2, timeout: float = 60.0,
               validation: bool = False, quiet: bool = False, command: list[str] | None = None) -> dict:
    """Every case on every target under every switch: the matrix report."""
    import onnx

    import vkep

    start = time.monotonic()
    runs = []
    versions: dict = {}
    manifest: list[str] = []
    for target in targets(found):
        for switch in chosen:
            label = f"{target.label} {switch.name}"
            progress = None if quiet else Progress(len(cases), label=label)
            session = {"optimization": "default", "mem_reuse": True,
                       "ep_options": {**target.ep_options, **dict(switch.ep_options)}}
            began = time.monotonic()
            run = {"target": target.label, "key": target.key, "device": target.device, "switch": switch.name}
            try:
                records, info = run_cases(cases, jobs=jobs, timeout=timeout, validation=validation,
                                          progress=progress, session=session, cmd=target.driver.worker_command(),
                                          env={**target.driver.env, **dict(switch.env)})
            except Exception as exc:  # noqa: BLE001 — a switch this device cannot run: that run's error
                records, info = [], {}
                run["error"] = first_line(exc)
            ran_on = (info.get("devices") or [{}])[int(target.device["index"])] if info.get("devices") else {}
            if ran_on and expect.key_of(ran_on) != target.key:  # the workers saw another driver than the probe
                run["error"] = f"the workers ran on {ran_on.get('driver')} {ran_on.get('driver_version')}"
            versions = versions or {k: info.get(k) for k in ("onnxruntime", "vkep") if info.get(k)}
            manifest = manifest or info.get("manifest", [])
            run["process_switches"] = info.get("process_switches", {})
            run.update(elapsed_s=round(time.monotonic() - began, 1), summary=report_mod.summarize(records),
                       cases=records)
            runs.append(run)
    return {
        "format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command or ["vkep", "conformance", "--device", "all"],
        "versions": {"onnx": onnx.__version__, "vkep": vkep.__version__, "python": sys.version.split()[0],
                     **versions},
        "manifest": manifest, "settings": {"jobs": jobs, "timeout_s": timeout, "validation": validation, "cases": len(cases)},
        "drivers": [{"icd": str(d.icd), "devices": d.devices, "absent": d.absent} for d in found],
        "switches": [{"name": s.name, "ep_options": dict(s.ep_options), "env": dict(s.env), "meaning": s.meaning}
                     for s in chosen],
        "statuses": report_mod.meanings(VULKAN),
        "elapsed_s": round(time.monotonic() - start, 1),
        "runs": runs, "cells": cells(runs),
    }


PASSING = ("pass-vkep", "pass-partial", "pass-cpu")


def _largest(values: list) -> float | str | None:
    """The largest of the records' errors (numbers, or "inf"/"nan" as the worker writes them), JSON-safe."""
    nums = [float(v) for v in values if v is not None]
    if not nums:
        return None
    if any(n != n for n in nums):
        return "nan"
    top = max(nums)
    return top if top != float("inf") else "inf"


def cells(runs: list[dict]) -> list[dict]:
    """op x dtype x target x switch: cases, passes (any pass status), all on vkep, failures (wrong or error),
    the largest absolute and relative error over the cell's cases that ran on the EP."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        for r in run["cases"]:
            groups.setdefault((r["op"], r.get("dtype", ""), run["target"], run["switch"]), []).append(r)
    out = []
    for (op, dtype, target, switch), records in sorted(groups.items()):
        status = [r["status"] for r in records]
        out.append({"op": op, "dtype": dtype, "target": target, "switch": switch, "cases": len(records),
                    "pass": sum(s in PASSING for s in status), "pass_vkep": status.count("pass-vkep"),
                    "fail": sum(s in ("wrong", "error") for s in status), "skip_cpu": status.count("skip-cpu"),
                    "max_abs": _largest([r.get("max_abs") for r in records]),
                    "max_rel": _largest([r.get("max_rel") for r in records])})
    return out


# ---- the markdown page ----------------------------------------------------------------------------


def _cell_text(c: dict | None) -> str:
    if c is None:
        return ""
    ran = c["cases"] - c["skip_cpu"]
    if not ran:
        return "skip"
    text = f"{c['pass']}/{ran}" + ("" if c["pass_vkep"] == c["pass"] else f" ({c['pass_vkep']} on vkep)")
    if c["fail"]:
        text = f"**{text} FAIL**"
    if c["max_abs"]:
        text += f" ≤{report_mod._num(c['max_abs'])}"
    return text


def markdown(doc: dict) -> str:
    lines = ["# vkep conformance matrix", "",
             f"{doc['settings']['cases']} ONNX backend node test cases; onnx {doc['versions'].get('onnx')}, "
             f"onnxruntime {doc['versions'].get('onnxruntime')}; {doc['elapsed_s']:.0f} s.", "", "## Drivers", ""]
    rows = []
    for d in doc["drivers"]:
        devs = "; ".join(f"#{x['index']} {x['name']} ({x['vendor']}, {x['driver_id_name']} {x['driver_version']})"
                         for x in d["devices"])
        rows.append([f"`{d['icd']}`", devs or "absent: " + report_mod._cell(d["absent"], 160)])
    lines += report_mod._table(["ICD", "devices"], rows, "ll")
    lines += ["", "## Switches", ""]
    lines += report_mod._table(["switch", "what it turns off"], [[f"`{s['name']}`", s["meaning"]]
                                                                  for s in doc["switches"]], "ll")
    lines += ["", "## Totals", ""]
    rows = [[r["target"], f"`{r['switch']}`", *(r["summary"]["by_status"].get(k, 0) for k in report_mod.STATUSES),
             f"{r['elapsed_s']:.0f}", r.get("error", "")] for r in doc["runs"]]
    lines += report_mod._table(["target", "switch", *report_mod.STATUSES, "s", "error"], rows, "llrrrrrrrl")
    columns = [(r["target"], r["switch"]) for r in doc["runs"]]
    by_key = {(c["op"], c["dtype"], c["target"], c["switch"]): c for c in doc["cells"]}
    ops = sorted({(c["op"], c["dtype"]) for c in doc["cells"]})
    lines += ["", "## Op x dtype", "",
              "passed/ran (cases ORT's CPU EP fails are not counted); `(n on vkep)` where some passes had nodes on "
              "the CPU EP; `≤x`: the largest absolute error; **FAIL**: a wrong or error case.", ""]
    head = ["op", "dtype", *(f"{t} `{s}`" for t, s in columns)]
    lines += report_mod._table(head, [[op, dt, *(_cell_text(by_key.get((op, dt, t, s))) for t, s in columns)]
                                      for op, dt in ops], "ll" + "l" * len(columns))
    changed = []
    for run in doc["runs"]:
        if run["switch"] == DEFAULT:
            continue
        base = next((r for r in doc["runs"] if r["target"] == run["target"] and r["switch"] == DEFAULT), None)
        if base is None:
            continue
        before = {r["name"]: r["status"] for r in base["cases"]}
        changed += [[run["target"], f"`{run['switch']}`", r["name"], before.get(r["name"], ""), r["status"],
                     report_mod._cell(report_mod.detail(r), 160)]
                    for r in run["cases"] if before.get(r["name"]) not in (None, r["status"])]
    lines += ["", f"## Cases a switch changes ({len(changed)})", ""]
    lines += (report_mod._table(["target", "switch", "case", "default", "switched", "detail"], changed, "llllll")
              if changed else ["None."])
    bad = [[run["target"], f"`{run['switch']}`", r["name"], r["status"], report_mod._cell(report_mod.detail(r))]
           for run in doc["runs"] for r in run["cases"] if r["status"] in ("wrong", "error")]
    lines += ["", f"## Wrong and error cases ({len(bad)})", ""]
    lines += report_mod._table(["target", "switch", "case", "status", "detail"], bad, "lllll") if bad else ["None."]
    return "\n".join(lines) + "\n"


def write(doc: dict, json_path: str | None, markdown_path: str | None) -> None:
    if json_path:
        Path(json_path).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    if markdown_path:
        Path(markdown_path).write_text(markdown(doc))


def totals_text(doc: dict) -> str:
    lines = [f"{len(doc['runs'])} runs ({doc['settings']['cases']} cases each) in {doc['elapsed_s']:.0f} s"]
    for d in doc["drivers"]:
        if d["absent"]:
            lines.append(f"  absent: {d['icd']}: {' '.join(d['absent'].split())[:140]}")
    for r in doc["runs"]:
        s = r["summary"]["by_status"]
        lines.append(f"  {r['target']:<28} {r['switch']:<24} " + ", ".join(f"{k} {s.get(k, 0)}"
                                                                            for k in report_mod.STATUSES)
                     + (f"  ERROR {r['error']}" if r.get("error") else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        raise SystemExit(_probe_main())
    print("usage: python -m vkep.conformance.matrix --probe (vkep conformance --device all runs the matrix)",
          file=sys.stderr)
    raise SystemExit(2)
