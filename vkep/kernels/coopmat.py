"""MatMul and Gemm on the device's matrix units: VK_KHR_cooperative_matrix (shaders/matmul_coop.comp).

Where a device lists a float16 x float16 product with float32 sums at subgroup scope (`PhysicalDeviceInfo.coopmat`:
16x16x16 on NVIDIA's tensor cores and AMD's WMMA, 8x8x8 on Mesa 26's lavapipe), float16 products with more rows than
matmul.comp's few-rows mode takes run there: that is where GPUs reach their peak. The float32 products stay on
matmul.comp (a float16 product would round their operands). Whether to, and the block a subgroup computes, come
from tuning.json for the device's class (lavapipe emulates the matrices, slower than matmul.comp: not used there
unless `coopmat=1`). The EP option `coopmat=0` turns it off; a glslang too old for GL_KHR_cooperative_matrix
(before 14) leaves the shader uncompiled and the products on matmul.comp.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from vkep.gpu import shaders
from vkep.kernels import tuning
from vkep.kernels.base import Kernel, variant

SHADER = "matmul_coop.comp"
# where tuning.json does not say otherwise for the device's class: use the matrix units (what they are built for),
# a subgroup holding 2 x 2 cooperative matrices of y (matmul_coop.comp's RM x RN: each loaded matrix of A and B
# serves two products)
DEFAULT = {"use": True, "blocks": [2, 2]}
log = logging.getLogger("vkep")


def product(kernel: Kernel) -> tuple[int, int, int] | None:
    """(TM, TN, TK) of the float16 product with float32 sums this kernel's device lists (the largest), or None:
    also where tuning.json measured them slower than matmul.comp on this device's class, unless `coopmat=1`."""
    info = kernel.device_info
    if info is None or not info.features.get("cooperativeMatrix") or not shader_compiles():
        return None
    if not tuning.choice(info, "coopmat", DEFAULT)["use"] and "coopmat" not in info.forced:
        return None
    sizes = [p[:3] for p in info.coopmat if p[3:] == ("float16", "float16", "float32", "float32")]
    return max(sizes, key=lambda s: s[0] * s[1] * s[2], default=None)


@functools.cache
def shader_compiles() -> bool:
    """Whether matmul_coop.comp's SPIR-V is shipped or compiles here (GL_KHR_cooperative_matrix: glslang >= 14)."""
    try:
        shaders.compile_shader(SHADER, variant("float16"))
    except shaders.ShaderError as exc:
        log.info("vkep: float16 products stay on matmul.comp: %s", str(exc).splitlines()[-1])
        return False
    return True


def dispatch(call, kernel: Kernel, size: tuple[int, int, int], push: Mapping[str, object], batches: int,
             reads: list) -> None:
    """One dispatch of matmul_coop.comp over y's [batches, M, N], `push` matmul.comp's push members by name
    (tensors a, b, c or None, y, and matmul.product_members)."""
    tm, tn, tk = size
    rm, rn = tuning.choice(kernel.device_info, "coopmat", DEFAULT)["blocks"]
    groups = (-(-push["N"] // (rn * tn)), -(-push["M"] // (rm * tm)), batches)  # (past the device's limit: in pieces)
    constants = {"local_size_x": kernel.device_info.subgroup_size, "tm": tm, "tn": tn, "tk": tk, "rm": rm, "rn": rn}
    call.dispatch(SHADER, "float16", constants, push, groups, reads, [push["y"]])
