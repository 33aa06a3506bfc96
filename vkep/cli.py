"""The `vkep` command: devices, run, shaders build, dev, conformance, report.

(vkep's counters belong to a process that runs models: `vkep run --stats`, or `vkep.stats()` in Python.)"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _devices(args) -> int:
    from vkep.gpu.diagnose import VulkanUnavailable, no_usable_device

    try:
        from vkep.gpu.device import physical_devices

        found = physical_devices()
    except VulkanUnavailable as exc:  # no loader or no driver: what is missing, what to install
        print(exc, file=sys.stderr)
        return 1
    infos = [d.summary() for d in found]
    if args.json:
        print(json.dumps(infos, indent=2))
    else:
        rows = [("#", "device", "type", "vendor", "driver", "Vulkan", "unified", "fp16", "uuid", "usable by vkep")]
        for d in infos:
            usable = "yes" if d["usable"] else "no: lacks " + ", ".join(d["missing"])
            rows.append((str(d["index"]), d["name"], d["type"], d["vendor"], d["driver_info"] or d["driver"],
                         d["api_version"], "yes" if d["unified_memory"] else "no", "yes" if d["fp16"] else "no",
                         d["uuid"], usable))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
        if any(d.cpu_implemented and d.usable for d in found):
            print("\nA cpu device (lavapipe, SwiftShader) runs Vulkan on the CPU, where ORT's CPU EP is faster: vkep "
                  "runs on one only when a session asks (EP option device=<#, name or uuid>, or allow_cpu_device=1).")
    if not any(d.usable for d in found):
        print(no_usable_device([(d.name, d.missing) for d in found]), file=sys.stderr)
        return 1
    return 0


def _run(args) -> int:
    from vkep import run

    return run.command(args)


def _shaders_build(args) -> int:
    from vkep.gpu import shaders
    from vkep.kernels import variants

    if args.out:
        return _shaders_ship(Path(args.out), args.verbose)
    built = cached = failed = 0
    required = variants.required()
    for shader, defines in sorted(required):
        key = shaders.spirv_key(shader, dict(defines))
        fresh = not (shaders.shipped_path(shader, key).exists() or shaders.cache_path(shader, key).exists())
        try:
            shaders.compile_shader(shader, dict(defines))
        except shaders.ShaderError as exc:
            failed += 1
            print(exc, file=sys.stderr)
            continue
        built += fresh
        cached += not fresh
        if args.verbose or fresh:
            print(f"{'built ' if fresh else 'cached'}  {shader} {shaders.describe(dict(defines))}")
    print(f"{len(required)} variants: {built} built, {cached} unchanged, {failed} failed")
    return 1 if failed or _interface_problems() else 0


def _interface_problems(spirv_of=None) -> int:
    """Print where the manifest's constants or the kernels' workgroup sizes disagree with the SPIR-V; how many."""
    from vkep.gpu import shaders
    from vkep.kernels import interface

    try:
        found = interface.problems(spirv_of=spirv_of) if spirv_of else interface.problems()
    except shaders.ShaderError as exc:  # (a variant that failed to compile is reported above)
        found = [f"kernel interfaces not checked: {str(exc).splitlines()[0]}"]
    for problem in found:
        print(problem, file=sys.stderr)
    return len(found)


def _shaders_ship(out: Path, verbose: bool) -> int:
    """Compile every variant a kernel can ask for into `out` (a wheel's vkep/spirv), with an index."""
    from vkep.gpu import shaders
    from vkep.kernels import variants

    required = variants.required()
    out.mkdir(parents=True, exist_ok=True)
    index, failed = {}, 0
    for shader, defines in sorted(variants.possible()):
        key = shaders.spirv_key(shader, dict(defines))
        target = out / f"{Path(shader).stem}-{key}.spv"
        try:
            shaders.compile_to(shaders.SHADER_DIR / shader, dict(defines), target)
        except shaders.ShaderError as exc:
            if (shader, defines) in required:
                failed += 1
                print(exc, file=sys.stderr)
            elif (shader, defines) in variants.OPTIONAL:
                print(f"not shipped: {shader} {shaders.describe(dict(defines))} ({variants.OPTIONAL[shader, defines]})")
            elif verbose:
                print(f"skipped {shader} {shaders.describe(dict(defines))}: does not compile (no kernel uses it)")
            continue
        index[target.name] = {"shader": shader, "defines": dict(defines)}
    (out / "index.json").write_text(json.dumps({"compiler": shaders.compiler_version(),
                                                "target_env": shaders.TARGET_ENV, "variants": index}, indent=1))
    print(f"{len(index)} SPIR-V variants in {out} ({len(required)} required, {failed} failed)")
    if failed:
        return 1
    written = {(v["shader"], tuple(sorted(v["defines"].items()))): out / name for name, v in index.items()}

    def shipped(shader: str, defines: dict) -> bytes:  # (the files just written, not the user's cache)
        path = written.get((shader, tuple(sorted(defines.items()))))
        if path is None:  # (a variant that did not compile here: interface.problems skips it)
            raise shaders.ShaderError(f"{shader} {shaders.describe(defines)} is not shipped")
        return path.read_bytes()

    return 1 if _interface_problems(shipped) else 0


def _conformance(args) -> int:
    from vkep import conformance

    return conformance.main(args)


def _report(args) -> int:
    from vkep import report

    return report.command(args)


def _dev(args) -> int:
    from vkep import dev

    return dev.command(args)


def _version_text() -> str:
    """vkep's version and the onnxruntime it runs in (the plugin ABI it uses is ORT's)."""
    from importlib.metadata import PackageNotFoundError, version

    from vkep import __version__

    try:
        ort = version("onnxruntime")
    except PackageNotFoundError:
        ort = "not installed"
    return f"vkep {__version__} (onnxruntime {ort})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vkep", description="Vulkan execution provider for ONNX Runtime")
    parser.add_argument("--version", action="version", version=_version_text())
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("devices", help="list Vulkan devices and whether vkep can use them")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_devices)
    p = sub.add_parser("run", help="run a model on vkep and compare with the CPU EP",
                       description="Run a model on vkep and on ORT's CPU EP with the same inputs: placement, "
                                   "outputs, latency, and a verdict (exit status 1 when either EP fails).")
    p.add_argument("model", nargs="?", help="an .onnx file (default: a model using every vkep op)")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="the value of a free dimension, by name (ORT's free-dimension override); repeatable")
    p.add_argument("--shape", action="append", metavar="INPUT=D0,D1,...",
                   help="the shape of one input (sets its free dimensions); repeatable")
    p.add_argument("--inputs", action="extend", nargs="+", metavar="FILE",
                   help="FILE.npz (arrays by input name) or NAME=FILE.npy per input; the others are generated")
    p.add_argument("--runs", type=int, default=10, help="warm runs timed after the first (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs")
    p.add_argument("--fp16", action="store_true", help="the default model in float16")
    p.add_argument("--stats", action="store_true", help="print vkep's transfer and memory counters")
    p.add_argument("--profile", metavar="TRACE.json",
                   help="profile vkep's runs with ORT's profiler into TRACE.json (vkep's GPU times, uploads, "
                        "submits and waits beside ORT's events) and print a per-node table")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON (for scripts and CI)")
    p.set_defaults(fn=_run)
    p = sub.add_parser("shaders", help="shader tools")
    shaders = p.add_subparsers(dest="action", required=True)
    b = shaders.add_parser("build", help="compile and validate every shader variant in kernels.yaml")
    b.add_argument("-v", "--verbose", action="store_true")
    b.add_argument("--out", metavar="DIR", help="compile every variant a kernel can ask for into DIR, with an "
                                                "index (what a wheel ships in vkep/spirv)")
    b.set_defaults(fn=_shaders_build)
    p = sub.add_parser("dev", help="a live shader loop: recompile, check, time on every save of a kernel's shader",
                       description="Watch a kernel's shader, its includes and the manifest; on every save recompile "
                                   "its variants (spirv-val validated), swap them into live sessions, run its "
                                   "generated reference cases against the CPU EP and time it, beside the previous "
                                   "save's figures. README: \"Live shader loop\".")
    p.add_argument("kernel", help="an op of the manifest (Relu) or a shader file (unary.comp, or a path to a copy)")
    p.add_argument("--model", metavar="MODEL.onnx", help="also rerun this model in one live session after each save")
    p.add_argument("--shader-dir", metavar="DIR", help="compile shaders from DIR (a copy of vkep/shaders) instead "
                                                       "of the package's (as VKEP_SHADER_DIR)")
    p.add_argument("--once", action="store_true", help="run one cycle and exit (status 1: compile error or a "
                                                       "reference case outside tolerance)")
    p.set_defaults(fn=_dev)
    p = sub.add_parser("conformance", help="run the ONNX backend node tests through ORT on vkep (or another EP)")
    p.add_argument("--filter", metavar="REGEX", help="only the cases whose name matches (re.search)")
    p.add_argument("--json", metavar="OUT.json", help="write every case's record, the summary and device info")
    p.add_argument("--markdown", metavar="OUT.md", help="write the summary as markdown")
    p.add_argument("--ep", default="VulkanExecutionProvider",
                   choices=["VulkanExecutionProvider", "WebGpuExecutionProvider", "CPUExecutionProvider"],
                   help="the EP under test (WebGPU: runs tools/conformance_webgpu.py)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="worker processes (default: CPUs)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case before its worker is killed")
    p.add_argument("--validation", action="store_true", help="Vulkan validation layer on in the workers")
    p.add_argument("--optimization", default="default", choices=["default", "basic", "extended", "disable_all"],
                   help="ORT's graph optimization level for every session (disable_all: every node runs)")
    p.add_argument("--no-mem-reuse", action="store_true", help="sessions with ORT's memory reuse off")
    p.add_argument("--device", default="default", choices=["default", "all"],
                   help="all: the matrix over every Vulkan driver and device present (VK_DRIVER_FILES per driver) "
                        "and every feature switch (--switches)")
    p.add_argument("--switches", default="all", metavar="all|NAME,...",
                   help="with --device all: the feature switches to run (default, fp16, int8, subgroups, "
                        "coopmat, host_import, VKEP_FORCE_DISCRETE; default: all)")
    p.add_argument("--driver", metavar="TEXT",
                   help="with --device all: only the drivers whose ICD file or driver info contains TEXT (e.g. 26.1)")
    p.add_argument("--corpus", default="onnx", choices=["onnx", "kernels", "all"],
                   help="ONNX's backend node tests, the manifest's generated reference cases, or both")
    p.add_argument("--update-expectations", action="store_true",
                   help="rewrite vkep/expected/expected-<driver key>.json from this run (the cases tests run)")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="print two reports side by side")
    p.set_defaults(fn=_conformance)
    p = sub.add_parser("report", help="one markdown file to send back: devices, features, conformance, speed",
                       description="Write one markdown file about a Vulkan device: every device and driver, the "
                                   "limits, features and extensions vkep relies on, GEMM/convolution GFLOPS and host "
                                   "time per node beside the measured FMA ceiling and ORT's CPU EP, and ONNX's "
                                   "backend node tests against the committed expectations of the device's driver. "
                                   "README: \"Sending a report\".")
    p.add_argument("--device", type=int, metavar="N", help="the device's index in `vkep devices` (default: the "
                                                           "first usable GPU, else the first usable device)")
    p.add_argument("--out", default="vkep-report.md", metavar="FILE", help="where to write it (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="a 45-case conformance sample and fewer timed runs (on "
                                                        "lavapipe here: 20 s instead of 75 s)")
    p.add_argument("--filter", metavar="REGEX", help="only the conformance cases whose name matches (re.search)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="conformance worker processes")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per conformance case")
    p.set_defaults(fn=_report)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except Exception as exc:  # noqa: BLE001 — a command-line tool reports, it does not dump a traceback
        text = str(exc)
        print(text if text.startswith("vkep:") else f"vkep: error: {text}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

