"""`vkep report`: one command a user with a GPU runs and sends back, one markdown file (README: "Sending a report").

    vkep report [--device N] [--out vkep-report.md] [--quick] [--filter REGEX]

Sections, in the order they run: the machine and versions; every Vulkan device (`vkep devices`); the device
reported on, with the limits, features and extensions vkep relies on (vkep.report.device); its speed: the
measured fp32 FMA ceiling (vkep.gpu.ceiling), GEMM and convolution GFLOPS and host time per node, vkep beside
ORT's CPU EP in the same run (vkep.report.speed, which tools/bench.py also uses); and ONNX's backend node tests
on it against the committed expectations of its driver (vkep.report.conformance).

A section that fails writes its error in its place and the report goes on; the file is rewritten after each
section, so an interrupted run leaves what it measured. Exit status 1 only when no section measured anything.
"""

from __future__ import annotations

import os
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vkep import options

PACKAGE = Path(__file__).resolve().parent.parent
# the environment that changes what the report measures
ENV_SHOWN = ("VK_DRIVER_FILES", "VK_ICD_FILENAMES", "LP_NUM_THREADS", "VKEP_VALIDATION", "VKEP_FORCE_DISCRETE",
             "VKEP_DEFAULT_MEMORY", "VKEP_MAX_WORKGROUP_COUNT", "VKEP_MANIFEST", "VKEP_SHADER_DIR")


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)  # printed on the terminal
    measured: bool = False  # it holds a figure from the device reported on (not only an error, versions, a list)
    error: str = ""


@dataclass
class Settings:
    device: int | None
    out: Path
    quick: bool
    filter: str | None  # --filter: the conformance cases to run (re.search on their names)
    jobs: int
    timeout: float

    @property
    def pattern(self) -> str | None:
        """The conformance cases run: --filter's, else with --quick the sample, else all (None)."""
        from vkep.report.conformance import QUICK

        return self.filter or (QUICK if self.quick else None)

    @property
    def runs(self) -> int:
        return 3 if self.quick else 10

    @property
    def overhead_runs(self) -> tuple[int, int]:
        """(timed runs, warm-up runs) of the Add chain"""
        return (10, 2) if self.quick else (100, 10)


def command(args) -> int:
    """`vkep report` (args from the parser in vkep.cli)."""
    out = Path(args.out).expanduser().resolve()
    if out.is_relative_to(PACKAGE):
        raise ValueError(f"vkep: --out {out} is inside the installed package ({PACKAGE}): write it elsewhere")
    out.parent.mkdir(parents=True, exist_ok=True)
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)  # not ORT's warnings about the EP options the report sets
    return write(Settings(args.device, out, args.quick, args.filter, args.jobs, args.timeout))


def write(settings: Settings) -> int:
    """Run every section, rewriting settings.out after each; print their summary lines."""
    started = time.monotonic()
    sections: list[Section] = []
    context: dict = {}
    steps: list[tuple[str, Callable[[Section, Settings, dict], None]]] = [
        ("Machine and versions", _machine), ("Vulkan devices", _devices), ("Device reported on", _device),
        ("Speed", _speed), ("Conformance", _conformance)]
    print(f"vkep report: writing {settings.out}" + (" (--quick)" if settings.quick else ""), flush=True)
    for title, step in steps:
        section = Section(title)
        sections.append(section)
        try:
            step(section, settings, context)
        except Exception as exc:  # noqa: BLE001 — the section says what failed; the others go on
            section.error = f"{type(exc).__name__}: {exc}"
            section.lines += ["", f"**This section failed**: {section.error}", "", "```",
                              *traceback.format_exc().strip().splitlines()[-12:], "```"]
            section.summary.append(f"{title}: FAILED: {' '.join(section.error.split())[:300]}")
        for line in section.summary:
            print(f"  {line}", flush=True)
        settings.out.write_text(_page(sections, settings, time.monotonic() - started), encoding="utf-8")
    measured = any(s.measured for s in sections)
    print(f"vkep report: {settings.out} in {time.monotonic() - started:.0f} s"
          + ("" if measured else ": nothing could be measured"), flush=True)
    return 0 if measured else 1


def _page(sections: list[Section], settings: Settings, elapsed: float) -> str:
    failed = [s.title for s in sections if s.error]
    lines = ["# vkep report", "",
             f"`vkep report{' --quick' if settings.quick else ''}"
             + (f" --device {settings.device}" if settings.device is not None else "")
             + (f" --filter '{settings.filter}'" if settings.filter else "")
             + f"`, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {elapsed:.0f} s."
             + (f" Failed sections: {', '.join(failed)}." if failed else "")]
    for s in sections:
        lines += ["", f"## {s.title}", "", *s.lines]
    return "\n".join(lines) + "\n"


# ---- the sections -----------------------------------------------------------------------------------


def _machine(section: Section, settings: Settings, context: dict) -> None:
    from importlib.metadata import PackageNotFoundError, version

    import vkep

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    env = options.raw_environment(ENV_SHOWN)
    section.lines += [
        f"- vkep {vkep.__version__}, onnxruntime {installed('onnxruntime')}, onnx {installed('onnx')}, "
        f"numpy {installed('numpy')}, Python {platform.python_version()}",
        f"- {platform.platform()}, {os.cpu_count()} CPUs ({_cpu_model()})",
        "- environment: " + (", ".join(f"`{k}={v}`" for k, v in env.items()) or "no Vulkan or vkep variables set"),
    ]
    section.summary.append(f"vkep {vkep.__version__}, onnxruntime {installed('onnxruntime')}, "
                           f"{platform.system()} {platform.machine()}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _devices(section: Section, settings: Settings, context: dict) -> None:
    from vkep.gpu.device import physical_devices

    found = [d.summary() for d in physical_devices()]
    section.lines += ["As `vkep devices --json` lists them.", "",
                      "| # | device | type | vendor | driver | Vulkan | unified | fp16 | usable by vkep |",
                      "|---|---|---|---|---|---|---|---|---|"]
    for d in found:
        usable = "yes" if d["usable"] else "no: lacks " + ", ".join(d["missing"])
        section.lines.append(f"| {d['index']} | {d['name']} | {d['type']} | {d['vendor']} | "
                             f"{d['driver_info'] or d['driver']} | {d['api_version']} | "
                             f"{'yes' if d['unified_memory'] else 'no'} | {'yes' if d['fp16'] else 'no'} | {usable} |")
    section.summary.append("devices: " + "; ".join(f"#{d['index']} {d['name']}" for d in found))


def _device(section: Section, settings: Settings, context: dict) -> None:
    from vkep.report import device

    info = device.choose(settings.device)
    if not info.usable:
        raise RuntimeError(f"vkep cannot use device #{info.index} {info.name}: it lacks {', '.join(info.missing)}")
    facts = device.describe(info)
    context["device"] = facts["summary"]
    section.title = f"Device reported on: #{info.index} {info.name}"
    section.lines += device.markdown(facts)
    section.measured = True
    section.summary.append(f"device #{info.index}: {info.name}, {info.driver_name} {facts['summary']['driver_info']}")


def _speed(section: Section, settings: Settings, context: dict) -> None:
    """The ceiling, the kernels and the host time per node, each on its own: one that fails leaves the others."""
    from vkep.gpu import ceiling

    chosen = context.get("device")
    if chosen is None:
        raise RuntimeError("no device to measure (see the sections above)")
    ep_options = {"device": str(chosen["index"])}
    validation = bool(options.env("VKEP_VALIDATION"))
    section.lines += ["vkep beside ORT's CPU EP on this machine's CPU, in the same run: medians of warm runs."
                      + (" The Vulkan validation layer is on (VKEP_VALIDATION): vkep's figures are slower than "
                         "without it." if validation else "")]
    gflops, why = ceiling.fma_gflops(chosen["index"])
    section.lines += ["", "### Device ceiling", ""]
    if gflops is None:
        section.lines.append(f"fp32 FMA ceiling: not measured ({why}).")
        section.summary.append(f"FMA ceiling: not measured: {why}")
    else:
        section.lines.append(f"fp32 FMA ceiling: **{gflops:.1f} GFLOPS**, measured (a Vulkan driver does not report "
                             f"a peak): {ceiling.METHOD}.")
        section.summary.append(f"FMA ceiling: {gflops:.1f} GFLOPS")
        section.measured = True
    _part(section, "Kernels (fp32)", lambda: _kernels(section, settings, ep_options, gflops))
    _part(section, "Host time per node", lambda: _overhead(section, settings, ep_options))
    if validation:
        from vkep.gpu.device import validation_messages

        count, text = validation_messages()
        section.lines += ["", f"Vulkan validation messages in this process: {count}"
                          + (f"; the first: {' '.join(text.split())[:400]}" if count else ".")]
        section.summary.append(f"Vulkan validation messages: {count}")


def _part(section: Section, title: str, body: Callable[[], None]) -> None:
    section.lines += ["", f"### {title}", ""]
    try:
        body()
    except Exception as exc:  # noqa: BLE001 — this part says what failed; the next one runs
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:600]}"
        section.lines.append(f"**Failed**: {error}")
        section.summary.append(f"{title}: FAILED: {error[:300]}")
        section.error = section.error or error


def _kernels(section: Section, settings: Settings, ep_options: dict, ceiling: float | None) -> None:
    from vkep.report import speed

    figures = speed.kernel_gflops(settings.runs, ep_options)
    section.lines += [f"GFLOPS, median of {settings.runs} warm runs of a one-node model fed and read as host arrays "
                      "(on a discrete GPU the copies count).", "",
                      "| kernel | vkep GFLOPS | CPU EP GFLOPS | vkep / CPU EP | vkep share of the FMA ceiling |",
                      "|---|---:|---:|---:|---:|"]
    for name, f in figures.items():
        share = f"{f['vkep'] / ceiling:.0%}" if ceiling else "-"
        section.lines.append(f"| {speed.KERNELS[name]} | {f['vkep']:.2f} | {f['cpu']:.2f} | "
                             f"{f['vkep'] / f['cpu']:.2f}x | {share} |")
        section.summary.append(f"{speed.KERNELS[name]}: vkep {f['vkep']:.2f} GFLOPS, CPU EP {f['cpu']:.2f}")
    section.measured = True


def _overhead(section: Section, settings: Settings, ep_options: dict) -> None:
    from vkep.report import speed

    runs, warmup = settings.overhead_runs
    nodes = 512
    figures = speed.host_time_per_node(nodes, runs, warmup, ep_options)
    section.lines += [f"A chain of {nodes} Adds of 16 floats (vkep.models.add_chain): a run is almost all per-node "
                      f"host cost. Median of {runs} runs after {warmup} warm-ups.", "",
                      "| EP | ms per run | µs per node | nodes by EP |", "|---|---:|---:|---|"]
    for ep, f in figures.items():
        placed = ", ".join(f"{name}: {n}" for name, n in f["nodes_by_ep"].items())
        label = {"cpu": "CPU EP", "vkep": "vkep, node by node (fuse=0)", "vkep fused": "vkep, fused (default)"}[ep]
        section.lines.append(f"| {label} | {f['ms_per_run']:.3f} | {f['us_per_node']:.2f} | {placed} |")
    vk, fused = figures["vkep"], figures["vkep fused"]
    section.lines += ["", f"vkep's outputs against the CPU EP's: max |error| {vk['max_abs_err']:.1e} node by node, "
                      f"{fused['max_abs_err']:.1e} fused. Fused, the Adds run as groups of one dispatch each (ORT's "
                      "Compile); the time is still divided by the graph's node count."]
    section.summary.append(f"host time per node: vkep {vk['us_per_node']:.2f} µs (fused {fused['us_per_node']:.2f}), "
                           f"CPU EP {figures['cpu']['us_per_node']:.2f} µs")
    section.measured = True


def _conformance(section: Section, settings: Settings, context: dict) -> None:
    from vkep.report import conformance

    chosen = context.get("device")
    if chosen is None:
        raise RuntimeError("no device to run on (see the sections above)")
    result = conformance.run(chosen, settings.pattern, settings.jobs, settings.timeout)
    section.lines += conformance.markdown(result)
    section.summary.append(conformance.summary_line(result))
    section.measured = result["cases"] > 0
