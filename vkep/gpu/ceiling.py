"""A device's ceilings, each measured by a shader of nothing but one operation: its fp32 FMA rate in GFLOPS
(`tools/bench.py` prints it beside the kernels' figures, `vkep run --profile` beside each node's), and its rate
of lane loads, 64-bit loads whose address differs per invocation, from a buffer small enough for a CPU's L1
cache (on a CPU device such as lavapipe each is a scalar load of its own: `tools/roofline.py` sets kernels
against both).

A measurement runs in a child process (`python -m vkep.gpu.ceiling PROBE_JSON [INDEX]`) whose shader directory holds
only that probe's shader: vkep reads its shader directory once per process.
"""

from __future__ import annotations

import dataclasses
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
# nothing but 64-bit loads at per-invocation addresses (consecutive words across a workgroup, as matmul.comp's
# pair loads), 4 independent sums, from 32 rows of 64 words (16 KiB)
LOAD_SHADER = """#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint ITERS = 512;
layout(push_constant) uniform Push { uint64_t src; uint64_t out_addr; } pc;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Words { uint64_t v[]; };
layout(buffer_reference, std430) buffer Out { uint v[]; };
void main() {
    uint lane = gl_LocalInvocationID.x;
    uint64_t s[4] = uint64_t[4](0, 0, 0, 0);
    for (uint i = 0; i < ITERS; ++i)
        for (uint c = 0; c < 4; ++c) s[c] += Words(pc.src).v[((i * 4 + c) & 31u) * 64 + lane];
    uint64_t t = s[0] ^ s[1] ^ s[2] ^ s[3];
    if (t == 12345) Out(pc.out_addr).v[0] = uint(t);  // (all but never true: keeps the loop alive)
}
"""
GROUPS, LOCAL_SIZE = 4096, 64  # (at most: a dispatch is sized to take about TARGET_SECONDS)
TARGET_SECONDS = 0.25


@dataclasses.dataclass(frozen=True)
class Probe:
    """A shader of nothing but one operation (`what`), and how many of it one dispatch does (per invocation:
    iters x per_iter; `scale`: what one operation counts, e.g. 2 FLOPs an FMA)."""

    shader: str
    source: str
    iters: int
    per_iter: int
    scale: int
    what: str
    src_bytes: int = 0  # a source buffer, for probes that read one

    @property
    def count(self) -> int:
        return GROUPS * LOCAL_SIZE * self.iters * self.per_iter * self.scale

    @property
    def method(self) -> str:
        return (f"one dispatch of {GROUPS} workgroups x {LOCAL_SIZE} invocations, each {self.iters} x "
                f"{self.per_iter} independent {self.what} (fewer workgroups where that "
                f"takes over {TARGET_SECONDS} s); the fastest of 5 dispatches, "
                "timed on the host from record to wait (vkep/gpu/ceiling.py)")


PROBES = {"fma": Probe("fma_peak.comp", FMA_SHADER, 4096, 8, 2, "fp32 fma() (2 FLOPs each) on registers"),
          "lane_loads": Probe("lane_loads.comp", LOAD_SHADER, 512, 4, 1, "64-bit loads at per-invocation addresses",
                              src_bytes=32 * 64 * 8)}
METHOD = PROBES["fma"].method  # (how the FMA ceiling is measured: `vkep report` says it)


def fma_gflops(device_index: int | None = None, timeout: float = 600) -> tuple[float | None, str]:
    """(the ceiling in GFLOPS, or None; why not, when None) of Vulkan device `device_index` (default: the first
    usable one)."""
    return measure("fma", device_index, timeout)


def lane_load_rate(device_index: int | None = None, timeout: float = 600) -> tuple[float | None, str]:
    """(billions of lane loads a second, or None; why not) of Vulkan device `device_index`."""
    return measure("lane_loads", device_index, timeout)


def measure(probe: str | Probe, device_index: int | None = None, timeout: float = 600) -> tuple[float | None, str]:
    """(the rate of probe `probe` (a name in PROBES, or a Probe) in its unit, or None; why not, when None),
    measured in a child process."""
    probe = PROBES[probe] if isinstance(probe, str) else probe
    with tempfile.TemporaryDirectory(prefix="vkep-ceiling-") as tmp:
        shaders = Path(tmp)
        (shaders / "common.glsl").write_text((SHADERS / "common.glsl").read_text())
        (shaders / probe.shader).write_text(probe.source)
        env = dict(os.environ, VKEP_SHADER_DIR=str(shaders), VKEP_CACHE_DIR=str(shaders / "cache"))
        args = [sys.executable, "-m", "vkep.gpu.ceiling", json.dumps(dataclasses.asdict(probe))] + (
            [str(device_index)] if device_index is not None else [])
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
    return json.loads(done.stdout.strip().splitlines()[-1])["rate"], ""


def _measure(probe: Probe, device_index: int | None) -> float:
    from vkep.gpu import device as gd
    from vkep.gpu.stream import pack_spans

    index = device_index if device_index is not None else next(d.index for d in gd.physical_devices() if d.usable)
    dev = gd.open_device(index)
    pipeline = dev.pipelines.get(probe.shader, {"DTYPE": 0}, {"iters": probe.iters})
    out = dev.memory.device_pool.alloc(256)
    members = {"out_addr": dev.memory.device_address(out)}
    reads = []
    if probe.src_bytes:
        src = dev.memory.device_pool.alloc(probe.src_bytes)
        members["src"] = dev.memory.device_address(src)
        reads = [(src, src + probe.src_bytes)]
    stream = dev.new_stream()
    push = dev.pipelines.push_layout(pipeline).pack(members)

    def run(groups: int) -> float:
        start = time.perf_counter()
        stream.dispatch(pipeline, push, (groups, 1, 1), pack_spans(reads, [(out, out + 4)]), len(reads), 1)
        stream.finish()
        return time.perf_counter() - start

    run(1)  # (the driver may compile here)
    # as many workgroups as take about TARGET_SECONDS, at most GROUPS: drivers' rates differ tenfold
    sample = max(1, GROUPS // 64)
    groups = max(1, min(GROUPS, round(sample * TARGET_SECONDS / max(run(sample), 1e-6))))
    return probe.count * groups / GROUPS / min(run(groups) for _ in range(5)) / 1e9


if __name__ == "__main__":
    print(json.dumps({"rate": _measure(Probe(**json.loads(sys.argv[1])), int(sys.argv[2]) if len(sys.argv) > 2
                                       else None)}))
