"""A device's fp32 FMA ceiling in GFLOPS, measured by a shader of nothing but FMAs (`tools/bench.py` prints it
beside the kernels' figures, `vkep run --profile` beside each node's).

The measurement runs in a child process (`python -m vkep.gpu.ceiling INDEX`) whose shader directory holds only
that shader: vkep reads its shader directory once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHADERS = Path(__file__).resolve().parent.parent / "shaders"

# nothing but FMAs on registers: 8 independent chains so the FMA units' latency is hidden
FMA_SHADER = """#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint ITERS = 4096;
layout(push_constant) uniform Push { uint64_t out_addr; } pc;
layout(buffer_reference, std430) buffer Out { float v[]; };
void main() {
    float x = float(gl_LocalInvocationID.x) * 1e-3, a[8];
    for (int c = 0; c < 8; ++c) a[c] = x + float(c);
    for (uint i = 0; i < ITERS; ++i)
        for (int c = 0; c < 8; ++c) a[c] = fma(a[c], 0.999999, 1e-7);
    float s = 0.0;
    for (int c = 0; c < 8; ++c) s += a[c];
    if (s == 12345.0) Out(pc.out_addr).v[0] = s;  // never true: keeps the loop alive
}
"""
ITERS, GROUPS, LOCAL_SIZE, CHAINS = 4096, 4096, 64, 8
METHOD = (f"one dispatch of {GROUPS} workgroups x {LOCAL_SIZE} invocations, each {ITERS} x {CHAINS} independent "
          "fp32 fma() (2 FLOPs each) on registers; the fastest of 5 dispatches, timed on the host from record to "
          "wait (vkep/gpu/ceiling.py)")


def fma_gflops(device_index: int | None = None, timeout: float = 600) -> tuple[float | None, str]:
    """(the ceiling in GFLOPS, or None; why not, when None) of Vulkan device `device_index` (default: the first
    usable one)."""
    with tempfile.TemporaryDirectory(prefix="vkep-ceiling-") as tmp:
        shaders = Path(tmp)
        (shaders / "common.glsl").write_text((SHADERS / "common.glsl").read_text())
        (shaders / "fma_peak.comp").write_text(FMA_SHADER)
        env = dict(os.environ, VKEP_SHADER_DIR=str(shaders), VKEP_CACHE_DIR=str(shaders / "cache"))
        args = [sys.executable, "-m", "vkep.gpu.ceiling"] + ([str(device_index)] if device_index is not None else [])
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
    return json.loads(done.stdout.strip().splitlines()[-1])["gflops"], ""


def _measure(device_index: int | None) -> float:
    from vkep.gpu import device as gd
    from vkep.gpu.stream import pack_spans

    index = device_index if device_index is not None else next(d.index for d in gd.physical_devices() if d.usable)
    dev = gd.open_device(index)
    pipeline = dev.pipelines.get("fma_peak.comp", {"DTYPE": 0}, {"iters": ITERS})
    out = dev.memory.device_pool.alloc(256)
    stream = dev.new_stream()
    push = dev.pipelines.push_layout(pipeline).pack({"out_addr": dev.memory.device_address(out)})

    def run() -> None:
        stream.dispatch(pipeline, push, (GROUPS, 1, 1),
                        pack_spans([], [(out, out + 4)]), 0, 1)
        stream.finish()

    run()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return GROUPS * LOCAL_SIZE * ITERS * CHAINS * 2 / min(times) / 1e9


if __name__ == "__main__":
    print(json.dumps({"gflops": _measure(int(sys.argv[1]) if len(sys.argv) > 1 else None)}))
