#!/usr/bin/env python3
"""The benchmark command: vkep beside its peers on the same Vulkan driver, in one run, as ratios.

Sections (all by default; --sections picks some; the kernels' and the overhead's figures are measured by
vkep/report/speed.py, as `vkep report` measures them):
  kernels   GEMM 512^3 (both operands computed, and B a weight vkep packs) and a 3x3 convolution 64->64
            channels over 56x56, fp32: GFLOPS of vkep, ORT's CPU EP and ncnn's Vulkan back end (from its own
            virtualenv .venv-ncnn, `pip install ncnn`, made on first use), beside the device's FMA ceiling
            measured by a shader of nothing but FMAs (vkep/gpu/ceiling.py)
  overhead  host time per node on a chain of 512 tiny Adds (tools/bench_overhead.py; WebGPU with --webgpu)
  capture   per-run host time with graph capture at 10, 100 and 1,000 nodes (tools/bench_capture.py)
  models    time per run of onnx's light models on vkep and the CPU EP (WebGPU with --webgpu)
  cold      cold session creation + first run of light_resnet50 (tools/bench_cold.py; WebGPU with --webgpu)
  recurrent RNN, GRU and LSTM both of vkep's ways and the CPU EP (tools/bench_recurrent.py)

    .venv/bin/python tools/bench.py [--sections kernels,overhead,...] [--webgpu] [--runs N]

ORT's WebGPU EP needs Mesa 25 lavapipe here: eval "$(tools/mesa_backports.sh)" first. A benchmark, not a
test: it asserts nothing; machines differ from one session to the next, so compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from vkep.report.speed import CONV, GEMM_N, kernel_gflops  # noqa: E402 — the kernels vkep report measures too

NCNN_VENV = ROOT / ".venv-ncnn"
SECTIONS = ("kernels", "overhead", "capture", "models", "cold", "recurrent")

_NCNN_CHILD = r"""
import json, sys, tempfile, time
import numpy as np, ncnn
n, (batch, cin, h, w, cout, k), runs = int(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
def net_of(param, weights=b""):
    net = ncnn.Net()
    net.opt.use_vulkan_compute = True
    for key in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic", "use_bf16_storage"):
        setattr(net.opt, key, False)  # fp32 throughout, as vkep's and the CPU EP's figures
    net.load_param_mem(param)
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(weights); f.flush()
        net.load_model(f.name)
    return net
def median_seconds(fn):
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]
rng = np.random.default_rng(0)
a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
gemm = net_of(f"7767517\n3 3\nInput a 0 1 a 0={n} 1={n}\nInput b 0 1 b 0={n} 1={n}\nGemm g 2 1 a b y\n")
def run_gemm():
    ex = gemm.create_extractor(); ex.input("a", ncnn.Mat(a)); ex.input("b", ncnn.Mat(b)); return ex.extract("y")[1]
err = float(np.abs(np.array(run_gemm()) - a @ b).max() / np.abs(a @ b).max())
x = rng.random((cin, h, w), np.float32)
weights = rng.random(cout * cin * k * k, np.float32) * 0.01
conv = net_of(f"7767517\n2 2\nInput x 0 1 x 0={w} 1={h} 2={cin}\n"
              f"Convolution c 1 1 x y 0={cout} 1={k} 4={k // 2} 5=0 6={weights.size}\n",
              np.zeros(1, np.uint32).tobytes() + weights.tobytes())  # a weight blob: flag 0 (float32), data
def run_conv():
    ex = conv.create_extractor(); ex.input("x", ncnn.Mat(x)); return ex.extract("y")[1]
print(json.dumps({"gemm": 2 * n ** 3 / median_seconds(run_gemm) / 1e9, "gemm_rel_err": err,
                  "conv": 2 * batch * cout * h * w * cin * k * k / median_seconds(run_conv) / 1e9}))
"""


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _fma_ceiling() -> float | None:
    from vkep.gpu.ceiling import fma_gflops

    gflops, why = fma_gflops()
    if gflops is None:
        log(f"FMA ceiling: {why}")
    return gflops


def _ncnn(runs: int) -> dict | None:
    python = NCNN_VENV / "bin" / "python"
    if not python.exists():
        log(f"creating {NCNN_VENV} (pip install ncnn numpy)")
        made = subprocess.run([sys.executable, "-m", "venv", str(NCNN_VENV)], capture_output=True, text=True)
        got = made.returncode == 0 and subprocess.run([str(python), "-m", "pip", "install", "-q", "ncnn", "numpy"],
                                                      capture_output=True, text=True).returncode == 0
        if not got:
            log("ncnn could not be installed: its figures are left out")
            return None
    done = subprocess.run([str(python), "-c", _NCNN_CHILD, str(GEMM_N), json.dumps(CONV), str(runs)],
                          capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        log(f"ncnn failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '?'}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernels(args) -> None:
    ort = kernel_gflops(args.runs)
    ceiling, ncnn = _fma_ceiling(), _ncnn(args.runs)
    print(f"\n## Kernels (fp32 GFLOPS; device FMA ceiling {ceiling:.1f})" if ceiling else "\n## Kernels (fp32 GFLOPS)")
    print(f"{'kernel':<16} {'vkep':>8} {'CPU EP':>8} {'ncnn':>8} {'vkep/ncnn':>10} {'vkep/ceiling':>13}")
    for name, figures in ort.items():
        peer = (ncnn or {}).get("conv" if name == "conv" else "gemm")
        ratio = f"{figures['vkep'] / peer:.2f}x" if peer else "-"
        share = f"{figures['vkep'] / ceiling:.0%}" if ceiling else "-"
        print(f"{name:<16} {figures['vkep']:>8.2f} {figures['cpu']:>8.1f} {peer or 0:>8.2f} {ratio:>10} {share:>13}")
    if ncnn:
        print(f"(ncnn: both GEMM operands as inputs, fp32; its result's relative error {ncnn['gemm_rel_err']:.1e})")


def _tool(script: str, *argv: str) -> None:
    done = subprocess.run([sys.executable, str(TOOLS / script), *argv], capture_output=True, text=True, timeout=3600)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "onnxruntime:" not in line]
    print("\n".join(lines[-40:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated: " + ", ".join(SECTIONS))
    parser.add_argument("--webgpu", action="store_true", help="also ORT's WebGPU EP (needs Mesa 25 lavapipe)")
    parser.add_argument("--runs", type=int, default=10, help="timed runs per kernel figure (median)")
    args = parser.parse_args()
    import vkep

    devices = vkep.register()
    meta = devices[0].ep_metadata
    print(f"# vkep benchmarks: {meta.get('vulkan.device_name')}, {meta.get('vulkan.driver')}, "
          f"{os.cpu_count()} CPUs, LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS', 'default')}")
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    webgpu = [] if args.webgpu else ["--no-webgpu"]
    for section in wanted:
        if section == "kernels":
            kernels(args)
        elif section == "overhead":
            print("\n## Host time per node (512 tiny Adds)")
            _tool("bench_overhead.py", "--nodes", "512", "--runs", "100", *webgpu)
        elif section == "capture":
            print("\n## Per-run host time, graph capture off and on")
            _tool("bench_capture.py")
        elif section == "models":
            import onnx

            light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
            for path in sorted(light.glob("light_*.onnx")):
                print(f"\n## {path.stem}")
                _tool("bench_overhead.py", "--model", str(path), "--runs", "5", "--warmup", "2", *webgpu)
        elif section == "cold":
            print("\n## Cold start (empty caches)")
            _tool("bench_cold.py", *(["--webgpu"] if args.webgpu else []))
        elif section == "recurrent":
            print("\n## RNN, GRU and LSTM (ms a run)")
            _tool("bench_recurrent.py", "--runs", "5")
        else:
            parser.error(f"unknown section {section!r}")


if __name__ == "__main__":
    main()
