#!/usr/bin/env python3
"""Cold start, per pipeline: what each of a model's Vulkan pipelines costs to create and to compile.

Runs the model once on vkep to learn which pipelines it uses (shader, variant, specialization constants),
then, in a child process with cold caches (MESA_SHADER_CACHE_DISABLE=true, an empty VKEP_CACHE_DIR), times
for each: vkCreateComputePipelines, and the driver's own compile where it defers it to the pipeline's
first execution (lavapipe does): a dispatch of zero workgroups runs no invocation, so it costs exactly that
compile. The cold caches hold the shaders' SPIR-V, as a wheel ships it (vkep/spirv), unless --checkout-spirv:
a checkout compiles GLSL on the way (a first session's cache provides it). Also times the model's cold session creation and first run beside a warm run, and with --webgpu
the same for ORT's WebGPU EP (Dawn on Vulkan) on the same driver, from its own virtualenv (tools/
bench_overhead.py makes it; Debian 12's lavapipe is too old for Dawn: eval "$(tools/mesa_backports.sh)").

    .venv/bin/python tools/bench_cold.py [MODEL.onnx ...] [--webgpu] [--checkout-spirv] [--json]   (default: light_resnet50)

A benchmark, not a test: it asserts nothing; compare figures within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, sys, time
from vkep.gpu import device as gd
dev = gd.open_device(next(d.index for d in gd.physical_devices() if d.usable))
stream = dev.default_stream()
out = []
for shader, defines, constants in json.loads(sys.argv[1]):
    start = time.perf_counter()
    pipeline = dev.pipelines.get(shader, dict(defines), dict(constants))
    created = time.perf_counter()
    stream.dispatch(pipeline, bytes(116 if dev.pipelines.splits(pipeline) else 128), (0, 0, 0), b"", 0, 0)  # (116: the group base)
    stream.finish()
    out.append([shader, defines, constants, created - start, time.perf_counter() - created])
print(json.dumps(out))
"""

_MODEL = r"""
import json, sys, time
import numpy as np
from vkep import runner
from vkep.gpu import device as gd
model = sys.argv[1]
start = time.perf_counter()
session = runner.vkep_session(model)
created = time.perf_counter()
feeds = {i.name: np.random.default_rng(0).uniform(-1, 1, [d if isinstance(d, int) else 1 for d in i.shape])
         .astype(np.float32) for i in session.get_inputs()}
session.run(None, feeds)
first = time.perf_counter()
session.run(None, feeds)
warm = time.perf_counter()
keys = sorted({(k[0], k[1], k[2]) for d in gd._devices.values() for k in d.pipelines._pipelines})
print(json.dumps({"session_s": created - start, "first_run_s": first - created, "warm_run_s": warm - first,
                  "pipelines": keys}))
"""


def _python(code: str, *args: str, cold: bool, spirv: Path | None = None) -> dict | list:
    """Run `code` in a child; cold: no Mesa shader cache and an empty vkep cache, but for `spirv` (a folder of
    SPIR-V compiled from the shaders, copied in: what a wheel ships, so a cold start compiles no GLSL)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="vkep-cold-") as cache:
        if cold:
            env.update(MESA_SHADER_CACHE_DISABLE="true", VKEP_CACHE_DIR=cache)
            if spirv is not None:
                shutil.copytree(spirv, Path(cache) / "spirv")
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                              timeout=3600)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _webgpu_cold(model: str) -> dict:
    """ORT's WebGPU EP on the same model and driver, cold: its session creation and first run."""
    import numpy as np
    import onnxruntime as ort
    from bench_overhead import WORKER, webgpu_python

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.random.default_rng(0).uniform(-1, 1, [d if isinstance(d, int) else 1 for d in i.shape])
             .astype(np.float32) for i in session.get_inputs()}
    with tempfile.TemporaryDirectory(prefix="vkep-cold-") as tmp:
        inputs = Path(tmp) / "inputs.npz"
        np.savez(inputs, **feeds)
        env = dict(os.environ, MESA_SHADER_CACHE_DISABLE="true", HOME=tmp, XDG_CACHE_HOME=tmp)  # Dawn's cache too
        done = subprocess.run([str(webgpu_python()), str(WORKER), model, str(inputs), "--runs", "1", "--warmup", "0"],
                              capture_output=True, text=True, env=env, timeout=3600)
    result = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {"error": done.stderr[-500:]}
    if "error" in result:
        return {"error": result["error"]}
    return {"session_s": result["session_create_s"], "first_run_s": result["first_run_s"],
            "warm_run_s": result["times_s"][0], "nodes_by_ep": result.get("nodes_by_ep")}


def _spirv(model: str, into: Path) -> Path:
    """The SPIR-V of every shader variant a session of `model` compiles, in `into` (a first session's cache)."""
    env = dict(os.environ, VKEP_CACHE_DIR=str(into))
    subprocess.run([sys.executable, "-c", _MODEL, model], capture_output=True, env=env, timeout=3600, check=True)
    return into / "spirv"


def measure(model: str, webgpu: bool = False, shipped_spirv: bool = True) -> tuple[dict, list, dict | None]:
    """(vkep's cold session and first run, each of its pipelines' cold create and compile times, slowest first,
    and WebGPU's cold figures or None) for `model`. shipped_spirv: as installed from a wheel, which ships the
    shaders' SPIR-V (vkep/spirv: `vkep shaders build --out`); else as a checkout, which compiles GLSL on the
    way (glslangValidator, about 0.1 s a variant)."""
    with tempfile.TemporaryDirectory(prefix="vkep-spirv-") as tmp:
        spirv = _spirv(model, Path(tmp)) if shipped_spirv else None
        run = _python(_MODEL, model, cold=True, spirv=spirv)
        per = _python(_CHILD, json.dumps(run["pipelines"]), cold=True, spirv=spirv)
    per.sort(key=lambda p: -(p[3] + p[4]))
    return run, per, _webgpu_cold(model) if webgpu else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--webgpu", action="store_true", help="also ORT's WebGPU EP, cold, on the same driver")
    parser.add_argument("--checkout-spirv", action="store_true",
                        help="compile the shaders' GLSL in the cold run, as a checkout does (default: the SPIR-V a "
                             "wheel ships is there)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    report = []
    for model in args.models or [str(light / "light_resnet50.onnx")]:
        run, per, webgpu = measure(model, args.webgpu, not args.checkout_spirv)
        report.append({"model": model, **{k: v for k, v in run.items() if k != "pipelines"},
                       "pipelines": [{"shader": s, "defines": dict(d), "constants": c, "create_s": a,
                                      "first_dispatch_compile_s": b} for s, d, c, a, b in per], "webgpu": webgpu})
        if args.json:
            continue
        if webgpu and "error" not in webgpu:
            ours, theirs = run["session_s"] + run["first_run_s"], webgpu["session_s"] + webgpu["first_run_s"]
            print(f"{Path(model).name}: cold session + first run: vkep {ours:.2f} s, WebGPU EP {theirs:.2f} s "
                  f"(session {webgpu['session_s']:.2f} s, first run {webgpu['first_run_s']:.2f} s, then "
                  f"{webgpu['warm_run_s']:.3f} s; nodes {webgpu['nodes_by_ep']}): vkep takes {ours / theirs:.2f}x")
        elif webgpu:
            print(f"{Path(model).name}: WebGPU EP: {webgpu['error']}")
        print(f"{Path(model).name}: cold session {run['session_s']:.2f} s, cold first run {run['first_run_s']:.2f} s, "
              f"warm run {run['warm_run_s']:.3f} s; {len(per)} pipelines, compiled cold one by one:")
        print(f"  {'create':>7} {'compile':>8}  pipeline")
        for shader, defines, constants, create, compile_s in per:
            print(f"  {create:6.2f}s {compile_s:7.2f}s  {shader} {dict(defines)} {tuple(constants)}")
        print(f"  {sum(p[3] for p in per):6.2f}s {sum(p[4] for p in per):7.2f}s  in all")
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"(bench_cold: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    raise SystemExit(code)
