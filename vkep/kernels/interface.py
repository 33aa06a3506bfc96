"""A kernel's interface with its shader, read from the SPIR-V rather than written twice.

- **Specialization constants** are given by name, by the manifest (`constants: {op: 3}` names the shader's
  `layout(constant_id = N) const uint OP`, case aside) and by kernels at dispatch; vkep.gpu.pipeline matches
  the names to the SPIR-V's ids when it builds a pipeline. A name the shader lacks is an error: for the
  manifest's, one naming the file, entry and field, found here at build time.
- **Push constants** are filled by member name (vkep.gpu.push): the shader's block is the one declaration.
  Here, at build time, each block must be one vkep can fill: named members, tensor addresses first (a plan
  patches them there on replay), within the bytes the pipeline layout gives (less the group base).
- **Workgroup sizes.** Where Python sizes a grid by a module constant (`WORKGROUPS`), the shader's declared
  local size must equal it, or elements go unwritten (a larger shader size) or run twice (a smaller one).

`problems()` runs these checks over every variant the manifest needs (and the push constants of the float32
variant of every other shader, which kernels dispatch by name): `vkep shaders build` and a wheel's build
fail on any, and tests/test_interface.py runs it too. `push_layout` serves a dry run (vkep.ort.warmup), which
encodes a dispatch's push constants as a run would, without a device.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from vkep.gpu import shaders
from vkep.gpu.push import (
    GROUP_BASE_NAME,
    GROUP_BASE_OFFSET,
    PUSH_CONSTANT_BYTES,
    PushError,
    PushLayout,
    push_block,
)
from vkep.kernels import manifest

# shader → "module.NAME" of the vkep.kernels constant its grids are sized by (grid_1d(n, NAME))
WORKGROUPS = {
    "binary.comp": "elementwise.WORKGROUP", "unary.comp": "elementwise.WORKGROUP",
    "unary_mlas.comp": "elementwise.WORKGROUP",
    "where.comp": "elementwise.WORKGROUP",
    "strided_copy.comp": "movement.WG", "concat.comp": "movement.WG", "gather.comp": "movement.WG",
    "scatter.comp": "movement.WG", "fill.comp": "movement.WG", "resize.comp": "movement.WG",
    "pool.comp": "pool.WORKGROUP", "lrn.comp": "pool.WORKGROUP",
    "quantize.comp": "quantize.WG", "qlinear_binary.comp": "quantize.WG", "qlinear_lookup.comp": "quantize.WG",
    "qlinear_pool.comp": "quantize.WG",
    "grid_sample.comp": "grid_sample.WG", "affine_grid.comp": "grid_sample.WG", "rotary_embedding.comp": "rotary.WG",
    "conv_transpose.comp": "conv.WORKGROUP", "splitk.comp": "matmul.SPLIT_WG",
    "reverse_sequence.comp": "movement.WG", "roi_align.comp": "pool.WORKGROUP", "onehot.comp": "onehot.WG", "nonzero.comp": "nonzero.WG",
    "fft.comp": "spectral.WG", "random.comp": "random.WG",
    "ml_linear.comp": "ml_linear.WG",
    "unique.comp": "nonzero.UNIQUE_WG", "max_unpool.comp": "pool.UNPOOL_WG",
    "col2im.comp": "conv.COL2IM_WG", "tree_ensemble.comp": "trees.WG",
}

Defines = tuple[tuple[str, int], ...]
SpirvOf = Callable[[str, dict], bytes]  # (shader, defines) → its SPIR-V
_lock = threading.Lock()
_reflected: dict[str, dict[str, shaders.SpecConstant]] = {}  # SPIR-V key → its specialization constants
# (shader dir, shader, defines) → its push layout, for dry runs: one per node at GetCapability, and hashing a
# shader's sources for its SPIR-V key costs ~1 ms
_layouts: dict[tuple, PushLayout] = {}


def forget(shader: str) -> None:
    """Read `shader`'s push block afresh from now on (its source changed: vkep.ort.swap)."""
    with _lock:
        for key in [k for k in _layouts if k[1] == shader]:
            del _layouts[key]


def push_layout(shader: str, defines: dict) -> PushLayout:
    """The push-constant layout of one variant of `shader`, as its pipelines have it (for a dry run)."""
    key = (shaders.SHADER_DIR, shader, tuple(sorted(defines.items())))
    found = _layouts.get(key)
    if found is None:
        found = PushLayout(shader, push_block(_compiled(shader, defines)))
        with _lock:
            _layouts[key] = found
    return found


def _compiled(shader: str, defines: dict) -> bytes:
    return shaders.compile_shader(shader, defines)[1]


def shader_constants(shader: str, defines: Defines, spirv_of: SpirvOf = _compiled) -> dict[str, shaders.SpecConstant]:
    """The specialization constants of one variant, by name (read once per SPIR-V: an edited shader is new)."""
    key = shaders.spirv_key(shader, dict(defines))
    with _lock:
        found = _reflected.get(key)
    if found is None:
        found = shaders.specialization_constants(spirv_of(shader, dict(defines)))
        with _lock:
            _reflected[key] = found
    return found


def _variants(spec: manifest.KernelSpec) -> list[Defines]:
    from vkep.kernels import variants  # (imports kernels.base, which imports this module's callers)

    return [defines for _, defines in sorted(variants.of_spec(spec))] or [(("DTYPE", 0),)]


def _problem(spec: manifest.KernelSpec, field: str, text: str) -> str:
    return f"{spec.source}: entry {spec.index} ({spec.op}): {field}: {text}"


def _match(spec: manifest.KernelSpec, declared: dict[str, shaders.SpecConstant],
           defines: Defines) -> tuple[dict[int, int], list[str]]:
    """{constant_id: value} of the entry's constants in one variant of its shader, and what does not fit."""
    by_name = {name.lower(): c for name, c in declared.items()}
    values, problems = {}, []
    for name, value in spec.constants.items():
        found = by_name.get(name.lower())
        variant = f"{spec.shader} ({shaders.describe(dict(defines))})"
        if found is None:
            listed = ", ".join(sorted(declared)) or "none"
            problems.append(_problem(spec, f"constants.{name}", f"{variant} declares no specialization constant "
                                                                f"{name.upper()} (it declares: {listed})"))
        elif found.type == "float":
            problems.append(_problem(spec, f"constants.{name}", f"{variant} declares it a float; the manifest "
                                                                f"gives integers"))
        elif not 0 <= value < 2**32:
            problems.append(_problem(spec, f"constants.{name}", f"{value} does not fit a 32-bit constant"))
        else:
            values[found.id] = value
    return values, problems


def _constant_problems(spec: manifest.KernelSpec, spirv_of: SpirvOf) -> list[str]:
    if not spec.constants:
        return []
    if not spec.shader:
        return [_problem(spec, "constants", "an entry without a shader has none")]
    problems, first = [], None
    for defines in _variants(spec):
        values, found = _match(spec, shader_constants(spec.shader, defines, spirv_of), defines)
        if found:  # (one variant's is enough: the others would repeat it)
            return found
        if first is not None and values != first[1]:
            problems.append(_problem(spec, "constants", f"{spec.shader}'s constant ids differ between variants "
                                                        f"({shaders.describe(dict(first[0]))}: {first[1]}, "
                                                        f"{shaders.describe(dict(defines))}: {values})"))
        first = first or (defines, values)
    return problems


def _push_problems(variants: list[tuple[str, Defines]], spirv_of: SpirvOf) -> list[str]:
    problems = []
    for shader, defines in variants:
        where = f"{shaders.SHADER_DIR / shader} ({shaders.describe(dict(defines))})"
        try:
            members = push_block(spirv_of(shader, dict(defines)))
        except PushError as exc:
            problems.append(f"{where}: {exc}")
            continue
        kernel_members = [m for m in members if m.name != GROUP_BASE_NAME]
        unnamed = [m.name for m in kernel_members if m.name.startswith("member_")]
        if unnamed:
            problems.append(f"{where}: push-constant members without names ({', '.join(unnamed)}): the SPIR-V was "
                            "stripped of its names, which kernels fill the block by")
        layout = PushLayout(shader, members)
        late = [m.name for m in layout.scalars if m.format == "Q"]
        if late:
            problems.append(f"{where}: uint64_t push constant(s) {', '.join(late)} after other members: tensor "
                            "addresses lead the block (a replayed plan patches them there)")
        limit = GROUP_BASE_OFFSET if len(kernel_members) < len(members) else PUSH_CONSTANT_BYTES
        if layout.bytes > limit:
            problems.append(f"{where}: its push constants take {layout.bytes} bytes, past the {limit} a dispatch has")
    return problems


def workgroup_constant(shader: str) -> tuple[str, int] | None:
    """("module.NAME", value) of the Python constant `shader`'s grids are sized by, or None."""
    name = WORKGROUPS.get(shader)
    if name is None:
        return None
    module, attr = name.split(".")
    return name, getattr(importlib.import_module(f"vkep.kernels.{module}"), attr)


def _workgroup_problems(variants: list[tuple[str, Defines]], spirv_of: SpirvOf) -> list[str]:
    problems = []
    for shader, defines in variants:
        expected = workgroup_constant(shader)
        if expected is None:
            continue
        size = shaders.workgroup_size(spirv_of(shader, dict(defines)))
        if size != (expected[1], 1, 1):
            problems.append(f"{shaders.SHADER_DIR / shader} ({shaders.describe(dict(defines))}): workgroup size "
                            f"{size}, but vkep.kernels.{expected[0]} sizes its grids by {expected[1]}")
    return problems


def _compiles(shader: str, spirv_of: SpirvOf) -> bool:
    """Whether the float32 variant of a shader compiles (some serve other types only)."""
    try:
        spirv_of(shader, {"DTYPE": 0})
    except shaders.ShaderError:
        return False
    return True


def problems(specs: list[manifest.KernelSpec] | None = None, spirv_of: SpirvOf = _compiled) -> list[str]:
    """Every disagreement between the manifest or the kernels' workgroup constants and the compiled shaders
    (empty: none), over every variant the manifest needs, read by `spirv_of` (default: compiled as kernels
    compile them; a wheel's build passes the files it wrote)."""
    from vkep.kernels import variants

    specs = manifest.load() if specs is None else specs
    found = [p for spec in specs for p in _constant_problems(spec, spirv_of)]
    needed = sorted({v for spec in specs for v in variants.of_spec(spec)})
    needed += [(shader, (("DTYPE", 0),)) for shader in sorted(WORKGROUPS) if not any(s == shader for s, _ in needed)]
    # (helper shaders kernels dispatch by name, such as splitk.comp and recurrent_step.comp: their float32 variant)
    helpers = [(path.name, (("DTYPE", 0),)) for path in sorted(shaders.SHADER_DIR.glob("*.comp"))
               if not any(s == path.name for s, _ in needed) and _compiles(path.name, spirv_of)]
    blocks = needed + helpers + sorted(variants.epilogues()) if specs else []
    return found + _workgroup_problems(needed, spirv_of) + _push_problems(blocks, spirv_of)
