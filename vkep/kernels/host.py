"""What the host's processor offers, and how ORT's CPU EP uses it: ORT picks its kernels (MLAS's) by the processor's
features and splits its work by its cores, and so its last bits, which vkep's kernels follow where a model's answer
hinges on them (quantize.cpu_ep_saturates, norm.layer_norm_order, the MLAS order of matmul.py)."""

from __future__ import annotations

import functools
import os
import platform
import re
from pathlib import Path

from vkep import options


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The x86-64 feature flags of /proc/cpuinfo ("avx2", "fma", "avx512_vnni", ...); empty on other machines and
    where they cannot be read (then vkep follows the CPU EP's portable code)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    found = re.search(r"^flags\s*:(.*)$", text, re.M)
    return frozenset(found.group(1).split()) if found else frozenset()


def mlas_avx512f() -> bool:
    """Whether ORT's CPU EP takes MLAS's AVX-512F kernels where it has them (its softmax's sum of exps: sixteen lanes,
    not the FMA3 kernel's eight)."""
    return "avx512f" in cpu_flags()


def mlas_fma3() -> bool:
    """Whether ORT's CPU EP runs MLAS's AVX2 / FMA3 kernels here (x86-64 with AVX2 and FMA): the SGEMM, softmax and
    LayerNorm orders vkep follows bit for bit (mlas_gemm, softmax.mlas_order, norm.layer_norm_order)."""
    return {"avx2", "fma"} <= cpu_flags()


@functools.cache
def cpu_ep_threads() -> int:
    """The intra-op threads of an ORT CPU EP session with default options (VKEP_CPU_EP_THREADS overrides): one per
    physical core the process may run on (ORT's GetDefaultThreadAffinities: one per (package, core) pair of the
    logical processors), and its thread pool's degree of parallelism is that count. How ORT splits a GEMM, an LSTM's
    batch or a tree ensemble's sums follows it, and with it some of its answers' last bits."""
    given = options.env("VKEP_CPU_EP_THREADS")
    if given:
        return given
    cores = set()
    for cpu in sorted(os.sched_getaffinity(0)):
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(tuple((topology / f).read_text().strip() for f in ("physical_package_id", "core_id")))
        except OSError:
            cores.add(("cpu", str(cpu)))
    return max(1, len(cores))


SGEMM_THREAD_WORK = 64 * 1024  # MLAS_SGEMM_THREAD_COMPLEXITY: multiply-adds a thread of an SGEMM takes at least
SGEMM_COLUMN_ALIGN = 16  # MLAS_SGEMM_STRIDEN_THREAD_ALIGN: columns are shared among threads in blocks of this many


def sgemm_threads(m: int, n: int, k: int, batches: int = 1) -> tuple[int, int]:
    """(threads over the rows, threads over the columns) among which MLAS's MlasGemmBatch splits each of `batches`
    float32 products of m x k by k x n in a CPU EP session (cpu_ep_threads): a thread's share is its own SGEMM,
    whose K blocks and kernel (one row: the M1 kernels) follow its size (shaders/mlas_sgemm.glsl)."""
    target = min(m * n * k // SGEMM_THREAD_WORK + 1, cpu_ep_threads())
    per_gemm = -(-target // max(batches, 1))
    if n > m:
        return 1, max(1, min(per_gemm, -(-n // SGEMM_COLUMN_ALIGN)))
    return max(1, min(per_gemm, m)), 1
