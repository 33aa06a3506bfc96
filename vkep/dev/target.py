"""What `vkep dev KERNEL` works on: manifest entries, their shaders, the variants to compile, the files to watch."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from vkep.gpu import shaders
from vkep.kernels import manifest, variants

SHADER_SUFFIXES = (".comp", ".glsl")


@dataclass
class Target:
    """The manifest entries of one op (or of every op one shader serves), and their shaders."""

    name: str  # as the user gave it
    specs: list[manifest.KernelSpec]
    shaders: list[str] = field(default_factory=list)

    @property
    def variants(self) -> list[variants.Variant]:
        """The shader variants the entries use (one per element type): what a save recompiles."""
        return sorted({v for spec in self.specs for v in variants.of_spec(spec)})

    def watched(self) -> list[Path]:
        """The shaders, every file they include, and the manifest files."""
        files = {p.resolve() for shader in self.shaders for p in shaders.sources(shader)}
        files |= {Path(p).resolve() for p in manifest.manifest_paths()}
        return sorted(files)

    def reload(self) -> list[str]:
        """Read the manifest again; returns the entry fields that changed other than the test hints, which a
        running process cannot take (ORT's kernel registry is built once per process)."""
        fresh = resolve(self.name, specs=manifest.load()).specs
        changed = sorted({f for old, new in zip(self.specs, fresh, strict=False) for f in vars(old)
                          if f not in ("test", "index") and getattr(old, f) != getattr(new, f)})
        if len(fresh) != len(self.specs):
            changed.append("the number of entries")
        if not changed:
            self.specs = fresh
        return changed


def including(changed: list[Path]) -> set[str]:
    """The shaders (file names) that include one of the changed files: live nodes running them (fused.comp
    holds unary.comp's formulas, for one) take the edit too."""
    wanted = {p.resolve() for p in changed if p.suffix == ".glsl"}
    if not wanted:
        return set()
    return {path.name for path in Path(shaders.SHADER_DIR).glob("*.comp")
            if wanted & {p.resolve() for p in shaders.sources(path.name)}}


def resolve(kernel: str, specs: list[manifest.KernelSpec] | None = None) -> Target:
    """KERNEL is an op (Relu, com.microsoft.QuickGelu) or a shader file (unary.comp, or a path: its directory
    becomes the shader directory)."""
    specs = manifest.load() if specs is None else specs
    if kernel.endswith(SHADER_SUFFIXES):
        path = Path(kernel)
        if path.parent != Path(".") or path.exists():
            if not path.is_file():
                raise ValueError(f"vkep: no shader file {kernel}")
            if path.resolve().parent != Path(shaders.SHADER_DIR).resolve():
                shaders.set_shader_dir(path.resolve().parent)
        name = path.name
        found = [s for s in specs if s.shader == name]
        if not found:
            raise ValueError(f"vkep: no manifest entry uses the shader {name} (an include such as common.glsl: "
                             "name a kernel or the shader that includes it)")
        return Target(kernel, found, [name])
    found = [s for s in specs if kernel in (s.op, s.name)]
    if not found:
        near = sorted({s.name for s in specs if kernel.lower() in s.name.lower()})[:8]
        raise ValueError(f"vkep: no manifest entry for {kernel!r}" + (f"; did you mean {', '.join(near)}?"
                                                                          if near else ""))
    return Target(kernel, found, sorted({s.shader for s in found if s.shader}))


@dataclass
class Compiled:
    seconds: float
    compiled: int  # variants compiled (and validated by spirv-val) now
    reused: int  # variants whose sources were compiled before (SPIR-V from the wheel or the user cache)
    errors: list[str]  # the compiler's messages (file:line), one per distinct failure
    keys: list[str] = field(default_factory=list)  # the variants' SPIR-V keys (a change means a new source)


def compile_variants(target: Target) -> Compiled:
    """Compile and validate the target's variants in parallel (each glslangValidator + spirv-val run)."""
    start = time.perf_counter()
    todo = target.variants
    keys = [shaders.spirv_key(s, dict(d)) for s, d in todo]
    fresh = [not (shaders.shipped_path(s, k).exists() or shaders.cache_path(s, k).exists())
             for (s, _), k in zip(todo, keys, strict=True)]

    def one(variant) -> str | None:
        shader, defines = variant
        try:
            shaders.compile_shader(shader, dict(defines))
        except shaders.ShaderError as exc:
            return str(exc)
        return None

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [e for e in pool.map(one, todo) if e]
    errors = []
    seen: set[str] = set()
    for message in failures:
        detail = message.split("\n", 1)[-1]  # the same mistake fails every variant: show it once
        if detail not in seen:
            seen.add(detail)
            errors.append(message)
    return Compiled(time.perf_counter() - start, sum(fresh), len(todo) - sum(fresh), errors, keys)
