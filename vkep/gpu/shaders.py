"""GLSL → SPIR-V: the SPIR-V a wheel ships, else compiled by glslang and validated by spirv-val into the user's
cache. Both are found by a key of the sources' content and the defines, so an edited shader never meets stale code.

A wheel's build compiles every variant into the package (`vkep shaders build --out`, run by setup.py), so a user
never needs the shader tools; they are a build and kernel-author dependency. SPIR-V compiled at run time (a kernel
author's edit, a variant the wheel lacks) is keyed by the compiler's version too: a new glslang recompiles.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import struct
import subprocess
import threading
from pathlib import Path
from typing import NamedTuple

from vkep import options, resources

SHADER_DIR = options.env("VKEP_SHADER_DIR") or resources.SHADER_DIR
TARGET_ENV = "vulkan1.2"


def set_shader_dir(path: Path) -> None:
    """Compile shaders from `path` from now on (`vkep dev --shader-dir`: a kernel author's copy). Pipelines
    built already keep their SPIR-V until they are swapped (vkep.ort.swap)."""
    global SHADER_DIR
    SHADER_DIR = Path(path).resolve()


def sources(shader: str) -> list[Path]:
    """`shaders/<shader>` and every file it includes, recursively (what a change to must recompile it)."""
    return _sources(SHADER_DIR / shader)


class ShaderError(RuntimeError):
    """A shader failed to compile or validate; the message carries the compiler's file:line output."""


TOOLS_HINT = ("Debian/Ubuntu: apt-get install glslang-tools spirv-tools; Fedora: dnf install glslang spirv-tools; "
              "macOS: brew install glslang spirv-tools; Windows: the Vulkan SDK")


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise ShaderError(f"none of {', '.join(names)} is installed ({TOOLS_HINT})")


@functools.cache
def compiler_version() -> str:
    """glslangValidator's version line (part of the key of SPIR-V compiled at run time)."""
    res = subprocess.run([_tool("glslangValidator"), "--version"], capture_output=True, text=True)
    return next((ln.strip() for ln in res.stdout.splitlines() if ln.strip()), "glslangValidator (unknown version)")


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_lock = threading.Lock()
_memory: dict[str, bytes] = {}


def _sources(path: Path, seen: set[Path] | None = None) -> list[Path]:
    """The shader and every file it includes, recursively."""
    seen = seen if seen is not None else set()
    if path in seen:
        return []
    seen.add(path)
    out = [path]
    for name in _INCLUDE.findall(path.read_text(encoding="utf-8")):
        inc = (path.parent / name) if (path.parent / name).exists() else SHADER_DIR / name
        if inc.exists():
            out += _sources(inc, seen)
    return out


def spirv_key(shader: str, defines: dict[str, object]) -> str:
    path = SHADER_DIR / shader
    h = hashlib.sha256()
    for src in _sources(path):
        h.update(src.name.encode())
        h.update(src.read_bytes())
    for k in sorted(defines):
        h.update(f"-D{k}={defines[k]}".encode())
    h.update(TARGET_ENV.encode())
    return h.hexdigest()[:24]


def compile_shader(shader: str, defines: dict[str, object] | None = None) -> tuple[str, bytes]:
    """(key, SPIR-V words) for `shaders/<shader>` with the given -D defines: the wheel's, else compiled once."""
    defines = defines or {}
    key = spirv_key(shader, defines)
    with _lock:
        if key in _memory:
            return key, _memory[key]
    out = shipped_path(shader, key)
    if not out.exists():
        out = cache_path(shader, key)
        if not out.exists():
            compile_to(SHADER_DIR / shader, defines, out)
    code = out.read_bytes()
    with _lock:
        _memory[key] = code
    return key, code


class SpecConstant(NamedTuple):
    """A specialization constant a SPIR-V module declares: its constant_id, type ('uint', 'int', 'float' or
    'bool') and default value."""

    id: int
    type: str
    default: int | float | bool


def _words(spirv: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(spirv) // 4}I", spirv)


def _instructions(words: tuple[int, ...]):
    """(opcode, operands) of each instruction after the header."""
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        yield opcode, words[i + 1:i + count]
        i += max(count, 1)


def _string(operands: tuple[int, ...]) -> str:
    """A SPIR-V literal string (UTF-8, NUL-terminated, padded to words)."""
    raw = struct.pack(f"<{len(operands)}I", *operands)
    return raw[:raw.index(0)].decode() if 0 in raw else raw.decode()


_LOCAL_SIZE_NAMES = ("local_size_x", "local_size_y", "local_size_z")  # (GLSL's local_size_x_id names nothing)


def _reflect(spirv: bytes) -> tuple[dict[str, SpecConstant], tuple]:
    """(specialization constants by name, workgroup size) of a SPIR-V module: see the two functions below."""
    names: dict[int, str] = {}
    spec_ids: dict[int, int] = {}
    types: dict[int, str] = {}
    literals: dict[int, int] = {}  # OpConstant id → its (first) word
    values: dict[int, tuple[str, int | float | bool]] = {}  # spec constant id → (type, default)
    workgroup_builtin = None
    composites: dict[int, tuple[int, ...]] = {}
    local_size: tuple = (1, 1, 1)
    for opcode, ops in _instructions(_words(spirv)):
        if opcode == 5:  # OpName <id> "name"
            names[ops[0]] = _string(ops[1:])
        elif opcode == 71 and ops[1] == 1:  # OpDecorate <id> SpecId <n>
            spec_ids[ops[0]] = ops[2]
        elif opcode == 71 and ops[1] == 11 and ops[2] == 25:  # OpDecorate <id> BuiltIn WorkgroupSize
            workgroup_builtin = ops[0]
        elif opcode == 20:  # OpTypeBool
            types[ops[0]] = "bool"
        elif opcode == 21:  # OpTypeInt <width> <signed>
            types[ops[0]] = "int" if ops[2] else "uint"
        elif opcode == 22:  # OpTypeFloat
            types[ops[0]] = "float"
        elif opcode == 43:  # OpConstant <type> <id> <value>
            literals[ops[1]] = ops[2]
        elif opcode in (48, 49):  # OpSpecConstantTrue / False <type> <id>
            values[ops[1]] = ("bool", opcode == 48)
        elif opcode == 50:  # OpSpecConstant <type> <id> <value>
            kind = types.get(ops[0], "uint")
            word = ops[2]
            default = (struct.unpack("<f", struct.pack("<I", word))[0] if kind == "float"
                       else word - (1 << 32) if kind == "int" and word >= 1 << 31 else word)
            values[ops[1]] = (kind, default)
        elif opcode == 51:  # OpSpecConstantComposite <type> <id> <constituents>
            composites[ops[1]] = ops[2:]
        elif opcode == 16 and ops[1] == 17:  # OpExecutionMode <entry> LocalSize x y z
            local_size = tuple(ops[2:5])
    if workgroup_builtin in composites:  # the builtin overrides LocalSize; its parts may be spec constants
        parts = composites[workgroup_builtin]
        for axis, part in enumerate(parts):
            if part in values and part not in names:
                names[part] = _LOCAL_SIZE_NAMES[axis]
        local_size = tuple(names[p] if p in values else literals[p] for p in parts)
    constants = {names.get(i, f"constant_{spec_ids[i]}"): SpecConstant(spec_ids[i], *values[i])
                 for i in values if i in spec_ids}
    return constants, local_size


def specialization_constants(spirv: bytes) -> dict[str, SpecConstant]:
    """The specialization constants a SPIR-V module declares (`layout(constant_id = N) const uint NAME`), by name
    (an unnamed one: local_size_x/y/z where GLSL's local_size_x_id made it, else constant_N): what the values a
    pipeline is built with are matched to (vkep.kernels.interface)."""
    return _reflect(spirv)[0]


def workgroup_size(spirv: bytes) -> tuple[int | str, int | str, int | str]:
    """The workgroup size a SPIR-V module declares (the WorkgroupSize builtin, else OpExecutionMode LocalSize):
    each dimension a number, or the name of the specialization constant that sets it (local_size_x_id). What
    Python's grids must agree with."""
    return _reflect(spirv)[1]


# OpCapability values of subgroup operations: GroupNonUniform .. GroupNonUniformQuad, and cooperative matrices
# (whose scope is the subgroup)
SUBGROUP_CAPABILITIES = frozenset(range(61, 69)) | {6022}


def uses_subgroups(spirv: bytes) -> bool:
    """Whether the module declares a subgroup capability: its lanes then depend on the subgroup size it runs at."""
    return any(opcode == 17 and ops[0] in SUBGROUP_CAPABILITIES for opcode, ops in _instructions(_words(spirv)))


def local_size(spirv: bytes) -> tuple[int, int, int] | None:
    """The workgroup size as numbers, or None where a specialization constant sets it."""
    size = workgroup_size(spirv)
    return size if all(isinstance(n, int) for n in size) else None


def shipped_path(shader: str, key: str) -> Path:
    """Where a wheel holds the SPIR-V of this key (compiled when it was built)."""
    return resources.SPIRV_DIR / f"{Path(shader).stem}-{key}.spv"


def cache_path(shader: str, key: str) -> Path:
    """Where SPIR-V compiled here lives: the key of the sources, with the compiler's version."""
    ckey = hashlib.sha256(f"{key} {compiler_version()}".encode()).hexdigest()[:24]
    return resources.cache_dir() / "spirv" / f"{Path(shader).stem}-{ckey}.spv"


def compile_to(path: Path, defines: dict[str, object], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    cmd = [_tool("glslangValidator"), "-V", "--target-env", TARGET_ENV, "-I" + str(SHADER_DIR),
           *[f"-D{k}={v}" for k, v in sorted(defines.items())], "-o", str(tmp), str(path)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        tmp.unlink(missing_ok=True)
        detail = "\n".join(_diagnostics(res.stdout + res.stderr, path))
        raise ShaderError(f"shader {path.name} failed to compile with {describe(defines)}:\n{detail}")
    val = subprocess.run([_tool("spirv-val"), "--target-env", TARGET_ENV, str(tmp)], capture_output=True, text=True)
    if val.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ShaderError(f"shader {path.name} ({describe(defines)}) produced invalid SPIR-V:\n{val.stdout}{val.stderr}")
    tmp.replace(out)


_NOISE = ("compilation terminated", "compilation errors.", "SPIR-V is not generated", "Linking compute stage")


def _diagnostics(output: str, path: Path) -> list[str]:
    """glslang's file:line messages, without its summary lines."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and ln.strip() != str(path)]
    kept = [ln.removeprefix("ERROR: ") for ln in lines if not any(noise in ln for noise in _NOISE)]
    return kept or lines


def describe(defines: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(defines.items())) or "no defines"
