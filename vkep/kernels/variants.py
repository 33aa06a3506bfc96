"""Every shader variant a kernel can ask for: what a wheel's build compiles ahead of time.

Kernels pick a variant at run time from their tensors' element types (`base.variant`): one element type
(DTYPE), or an (input, output) pair (DTYPE_Y) in the shaders written for two types. `required()` are the
variants of the types the manifest lists: they must compile. `possible()` adds every other type and pair a
kernel could reach (helper shaders such as strided_copy.comp serve any type); those that do not compile are
types no kernel dispatches that shader with.
"""

from __future__ import annotations

import re

from vkep.gpu.shaders import SHADER_DIR
from vkep.kernels import manifest
from vkep.kernels.base import ACC16_SUFFIX, EPILOGUE_SUFFIX, FLOAT64_SUFFIX, SHADER_DTYPE, variant

Variant = tuple[str, tuple[tuple[str, int], ...]]  # (shader file, sorted -D defines)

# shaders a kernel uses where the compiler can build them (else it takes another path): what a build says when not
_COOPMAT = "float16 MatMul/Gemm on cooperative matrices: GL_KHR_cooperative_matrix needs glslang >= 14; without it " \
           "devices that have them compile it at run time if their glslang can, else use matmul.comp"
OPTIONAL = {("matmul_coop.comp", (("DTYPE", SHADER_DTYPE["float16"]),)): _COOPMAT,
            ("matmul_coop.comp", (("DTYPE", SHADER_DTYPE["float16"]), ("EPILOGUE", 1))): _COOPMAT}

_TWO_TYPES = re.compile(r"\bDTYPE_Y\b|\bTensorY\b|\bSTORE_Y\b")


def _key(shader: str, defines: dict[str, int]) -> Variant:
    return shader, tuple(sorted(defines.items()))


def of_spec(spec: manifest.KernelSpec) -> set[Variant]:
    """The variants of one manifest entry's shader for the types it lists."""
    if not spec.shader:
        return set()
    if not spec.types:  # (an op without type constraints, NonMaxSuppression: float32 tensors)
        return {_key(spec.shader, variant("float32"))}
    return {_key(spec.shader, variant(t)) for allowed in spec.types.values() for t in allowed if t in SHADER_DTYPE}


def epilogues() -> set[Variant]:
    """The EPILOGUE variants of the producers fused groups end in (vkep/kernels/epilogue.py), float types."""
    return {_key(path.name, variant(t + EPILOGUE_SUFFIX)) for path in sorted(SHADER_DIR.glob("*.comp"))
            if '#include "epilogue.glsl"' in path.read_text(encoding="utf-8") for t in ("float32", "float16")
            if path.name not in {shader for shader, _ in OPTIONAL}}


def accumulators() -> set[Variant]:
    """The ACC16 variants (float16 sums: EP option fp16_accumulation=float16) of the shaders that sum in MAC_T
    (common.glsl), with their EPILOGUE variants where they have one."""
    out = set()
    for path in sorted(SHADER_DIR.glob("*.comp")):
        text = path.read_text(encoding="utf-8")
        if "MAC_T" in text:
            out.add(_key(path.name, variant("float16" + ACC16_SUFFIX)))
            if '#include "epilogue.glsl"' in text:
                out.add(_key(path.name, variant("float16" + ACC16_SUFFIX + EPILOGUE_SUFFIX)))
    return out


def float64s() -> set[Variant]:
    """The FLOAT64 variants (double arithmetic for float64 tensors): float32's of the shaders written with one and of
    the shaders of the entries listing float64 whose kernels compute in double; bool's of the comparisons; int32's and
    int64's of Pow (its exponent's type); and for the elementwise kernels that convert (an entry of a Unary kernel with
    two type constraints, float64 among them: Cast, CastLike, IsNaN, IsInf) one per type it lists, the variant's DTYPE
    (elementwise.tensor_variant: unary.comp's float32 one among them)."""
    from vkep.kernels.base import implementation
    from vkep.kernels.elementwise import Compare, Pow, Unary

    out = {_key(path.name, variant("float32" + FLOAT64_SUFFIX)) for path in sorted(SHADER_DIR.glob("*.comp"))
           if "#ifdef FLOAT64" in path.read_text(encoding="utf-8")}
    for spec in manifest.load():
        if not spec.shader or not any("float64" in allowed for allowed in spec.types.values()):
            continue
        kind = implementation(spec)
        if kind.computes_float64:  # (unary_mlas.comp's Tanh: its shader has no FLOAT64 of its own text)
            out.add(_key(spec.shader, variant("float32" + FLOAT64_SUFFIX)))
        if issubclass(kind, Compare):  # float64 in, bool out
            out.add(_key(spec.shader, variant("bool" + FLOAT64_SUFFIX)))
        elif issubclass(kind, Pow):  # a float64 base, an integer exponent
            out |= {_key(spec.shader, variant(t + FLOAT64_SUFFIX)) for t in ("int32", "int64")}
        elif len(spec.types) == 2 and issubclass(kind, Unary):
            out |= {_key(spec.shader, variant(t + FLOAT64_SUFFIX)) for allowed in spec.types.values()
                    for t in allowed if t in SHADER_DTYPE}
    return out


def required() -> set[Variant]:
    return {v for spec in manifest.load() for v in of_spec(spec)} | epilogues() | accumulators() | float64s()


def possible() -> set[Variant]:
    codes = sorted(set(SHADER_DTYPE.values()))
    out = set(required()) | set(OPTIONAL)
    for path in sorted(SHADER_DIR.glob("*.comp")):
        out |= {_key(path.name, {"DTYPE": c}) for c in codes}
        if _TWO_TYPES.search(path.read_text(encoding="utf-8")):
            out |= {_key(path.name, {"DTYPE": x, "DTYPE_Y": y}) for x in codes for y in codes}
    return out
