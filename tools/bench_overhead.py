#!/usr/bin/env python3
"""Host overhead per node: a chain of tiny Adds (vkep.models.add_chain) on several EPs, or any model.

Each Add works on 16 floats, so the time per run is almost all per-node host cost (dispatch recording,
argument marshalling, ORT's own bookkeeping). With --model, the same comparison on a real model (e.g.
onnx's backend-test light models), where compute counts too. Reports the median over --runs timed runs
after --warmup untimed ones, for:

  cpu     ORT's CPU EP (reference floor)
  vkep    vkep in this process: vkep.register() + SessionOptions.add_provider_for_devices
  webgpu  ORT's WebGPU EP (Dawn on Vulkan), in its own virtualenv .venv-webgpu (created on first use,
          because the onnxruntime-webgpu wheel replaces the onnxruntime module), via a subprocess

    .venv/bin/python tools/bench_overhead.py [--nodes 512 | --model M.onnx] [--runs 200] [--warmup 20]
                                             [--no-webgpu] [--json]

With --json, the table goes to stderr and one JSON line to stdout. A benchmark, not a test: it asserts
nothing about speed. Figures on a 2-core machine are noisy; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from vkep.models import add_chain, random_inputs  # noqa: E402
from vkep.report import speed  # noqa: E402 — timing and placement as `vkep report` measures them

WEBGPU_VENV = ROOT / ".venv-webgpu"
WEBGPU_PACKAGES = ["onnxruntime-webgpu", "numpy", "onnx"]
WORKER = Path(__file__).resolve().parent / "_webgpu_worker.py"
ASSIGNMENT_CONFIG = "session.record_ep_graph_assignment_info"
NO_ADAPTER_HINT = (
    "Debian 12's lavapipe (Mesa 22.3) lacks features Dawn requires; Mesa 25 lavapipe from "
    'bookworm-backports works: eval "$(tools/mesa_backports.sh)" and run again.'
)
ENV_SHOWN = ("LP_NUM_THREADS", "VK_DRIVER_FILES", "VK_ICD_FILENAMES", "MESA_SHADER_CACHE_DISABLE")


def log(msg: str) -> None:
    print(f"bench_overhead: {msg}", file=sys.stderr, flush=True)


def result(ep: str, times: list[float] | None, nodes: int, **extra) -> dict:
    r: dict = {"ep": ep, "ok": times is not None}
    if times:
        med = statistics.median(times)
        r.update(ms_per_run=med * 1e3, us_per_node=med * 1e6 / nodes, min_ms_per_run=min(times) * 1e3)
    r.update(extra)
    return r


def max_abs_err(got: list[np.ndarray], ref: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - r))) for g, r in zip(got, ref, strict=True))


def bench_cpu(model_bytes, feeds, args) -> tuple[dict, list[np.ndarray]]:
    so = ort.SessionOptions()
    so.add_session_config_entry(ASSIGNMENT_CONFIG, "1")
    sess = ort.InferenceSession(model_bytes, sess_options=so, providers=["CPUExecutionProvider"])
    outputs, times = speed.time_runs(lambda: sess.run(None, feeds), args.runs, args.warmup)
    ref = [np.asarray(o, np.float64) for o in outputs]
    return result("cpu", times, args.nodes, nodes_by_ep=speed.nodes_by_ep(sess), ort_version=ort.__version__), ref


def bench_vkep(model_bytes, feeds, ref, args, fuse: str = "0") -> dict:
    """vkep node by node (fuse=0: the host cost of one node), or fused (fuse=1: elementwise groups run as one
    node each through ORT's Compile; the time per run is still divided by the graph's node count)."""
    name = "vkep" if fuse == "0" else "vkep-fused"
    try:
        import vkep
    except ImportError as e:
        return result(name, None, args.nodes, note=f"cannot import vkep: {e}")
    if not hasattr(vkep, "register"):
        return result(name, None, args.nodes, note="vkep.register() does not exist yet: skipped")
    try:
        devices = vkep.register()
        so = ort.SessionOptions()
        so.add_provider_for_devices(devices, {"allow_cpu_device": "1", "fuse": fuse})  # lavapipe too: asked for explicitly
        so.add_session_config_entry(ASSIGNMENT_CONFIG, "1")
        # enable_fallback=0: never let a silent retry on the CPU EP pass for vkep's time.
        sess = ort.InferenceSession(model_bytes, sess_options=so, enable_fallback=0)
        outputs, times = speed.time_runs(lambda: sess.run(None, feeds), args.runs, args.warmup)
    except Exception as e:
        return result(name, None, args.nodes, note=f"failed: {type(e).__name__}: {e}")
    return result(
        name, times, args.nodes, nodes_by_ep=speed.nodes_by_ep(sess), max_abs_err=max_abs_err(outputs, ref)
    )


def webgpu_python() -> Path:
    """The interpreter of .venv-webgpu, creating the virtualenv on first use."""
    py = WEBGPU_VENV / "bin" / "python"
    stamp = WEBGPU_VENV / ".vkep-webgpu-installed"
    if stamp.exists() and py.exists():
        return py
    if not py.exists():
        base = shutil.which("python3") or sys.executable
        log(f"creating {WEBGPU_VENV} with {base}")
        subprocess.run([base, "-m", "venv", str(WEBGPU_VENV)], check=True)
    log(f"installing {' '.join(WEBGPU_PACKAGES)} into {WEBGPU_VENV} (first use only)")
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--progress-bar", "off", *WEBGPU_PACKAGES],
        check=True,
        env=env,
    )
    stamp.write_text("\n".join(WEBGPU_PACKAGES) + "\n")
    return py


def bench_webgpu(model_bytes, feeds, ref, args) -> dict:
    try:
        py = webgpu_python()
    except (subprocess.CalledProcessError, OSError) as e:
        return result("webgpu", None, args.nodes, note=f"cannot set up {WEBGPU_VENV}: {e}")
    with tempfile.TemporaryDirectory(prefix="vkep-bench-") as tmp:
        model_path, inputs_path, outputs_path = (Path(tmp) / n for n in ("model.onnx", "in.npz", "out.npz"))
        model_path.write_bytes(model_bytes)
        np.savez(inputs_path, **feeds)
        cmd = [str(py), str(WORKER), str(model_path), str(inputs_path)]
        cmd += ["--runs", str(args.runs), "--warmup", str(args.warmup), "--outputs", str(outputs_path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
            return result("webgpu", None, args.nodes, note=f"worker exited {proc.returncode}: {tail}")
        data = json.loads(lines[-1])
        extra = {k: data[k] for k in ("ort_version", "nodes_by_ep", "nodes_by_ep_error") if k in data}
        extra["session_create_s"] = data.get("session_create_s")
        extra["first_run_s"] = data.get("first_run_s")
        if "error" in data or proc.returncode != 0:
            note = data.get("error", f"exit {proc.returncode}")
            if "No supported adapters" in note:
                dawn = [ln.strip() for ln in proc.stderr.splitlines() if "required" in ln]
                note = f"Dawn found no usable Vulkan adapter ({'; '.join(dawn) or 'no reason given'}). {NO_ADAPTER_HINT}"
            return result("webgpu", None, args.nodes, note=note, **extra)
        with np.load(outputs_path) as npz:
            extra["max_abs_err"] = max_abs_err([npz[n] for n in npz.files], ref)
    return result("webgpu", data["times_s"], args.nodes, **extra)


def print_table(results: list[dict], args, env: dict[str, str], out) -> None:
    vk = next((r for r in results if r["ep"] == "vkep" and r["ok"]), None)
    print(
        f"{args.label}: median of {args.runs} runs after {args.warmup} warm-ups; "
        "'x vkep' = EP time / vkep time",
        file=out,
    )
    print(
        "env: " + (" ".join(f"{k}={v}" for k, v in env.items()) or "(no Vulkan/lavapipe variables set)"),
        file=out,
    )
    print(f"{'EP':<8} {'ms/run':>9} {'us/node':>9} {'x vkep':>8}  nodes by EP / notes", file=out)
    for r in results:
        if not r["ok"]:
            print(f"{r['ep']:<8} {'-':>9} {'-':>9} {'-':>8}  {r.get('note', '')}", file=out)
            continue
        ratio = f"{r['ms_per_run'] / vk['ms_per_run']:.2f}" if vk else "n/a"
        notes = []
        if r.get("nodes_by_ep") is not None:
            notes.append(", ".join(f"{ep}: {n}" for ep, n in r["nodes_by_ep"].items()))
        elif r.get("nodes_by_ep_error"):
            notes.append(f"placement unknown ({r['nodes_by_ep_error']})")
        if "max_abs_err" in r:
            notes.append(f"max |err| vs cpu {r['max_abs_err']:.1e}")
        if r.get("first_run_s") is not None:
            notes.append(f"session {r['session_create_s']:.2f} s, first run {r['first_run_s']:.2f} s")
        print(
            f"{r['ep']:<8} {r['ms_per_run']:>9.3f} {r['us_per_node']:>9.2f} {ratio:>8}  {'; '.join(notes)}",
            file=out,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=512, help="Add nodes in the chain (default 512)")
    ap.add_argument("--runs", type=int, default=200, help="timed runs (default 200)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed runs first (default 20)")
    ap.add_argument("--no-webgpu", action="store_true", help="skip ORT's WebGPU EP")
    ap.add_argument(
        "--lp-threads",
        type=int,
        metavar="N",
        help="set LP_NUM_THREADS for every EP (lavapipe's worker threads; 0 runs dispatches inline, "
        "which leaves mostly host cost). Default: inherit the environment",
    )
    ap.add_argument("--model", type=Path, help="an ONNX model instead of the Add chain (inputs: random)")
    ap.add_argument("--json", action="store_true", help="one JSON line on stdout (table on stderr)")
    args = ap.parse_args(argv)
    if args.lp_threads is not None:
        # Before vkep (and so lavapipe) is loaded here; the WebGPU worker inherits it.
        os.environ["LP_NUM_THREADS"] = str(args.lp_threads)

    if args.model:
        import onnx

        model = onnx.load(str(args.model))
        args.nodes, args.label = len(model.graph.node), f"{args.model.name} ({len(model.graph.node)} nodes)"
    else:
        model, args.label = add_chain(args.nodes), f"add_chain({args.nodes})"
    model_bytes, feeds = model.SerializeToString(), random_inputs(model)

    cpu, ref = bench_cpu(model_bytes, feeds, args)
    results = [cpu, bench_vkep(model_bytes, feeds, ref, args), bench_vkep(model_bytes, feeds, ref, args, "1")]
    if not args.no_webgpu:
        results.append(bench_webgpu(model_bytes, feeds, ref, args))

    env = {k: os.environ[k] for k in ENV_SHOWN if k in os.environ}
    print_table(results, args, env, sys.stderr if args.json else sys.stdout)
    if args.json:
        doc = {"model": args.label, "runs": args.runs, "env": env, "results": results}
        print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
