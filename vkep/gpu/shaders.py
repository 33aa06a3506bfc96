"""GLSL → SPIR-V through the glslang executable, validated by spirv-val, cached by content hash."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

from vkep import options

ROOT = Path(__file__).resolve().parents[2]
SHADER_DIR = options.env("VKEP_SHADER_DIR") or ROOT / "shaders"
TARGET_ENV = "vulkan1.2"


def cache_dir() -> Path:
    base = options.env("VKEP_CACHE_DIR") or Path.home() / ".cache" / "vkep"
    base.mkdir(parents=True, exist_ok=True)
    return base


class ShaderError(RuntimeError):
    """A shader failed to compile or validate; the message carries the compiler's file:line output."""


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise ShaderError(f"none of {', '.join(names)} is installed (Debian: apt-get install glslang-tools spirv-tools)")


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
    for name in _INCLUDE.findall(path.read_text()):
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
    """(key, SPIR-V words) for `shaders/<shader>` with the given -D defines; compiled at most once."""
    defines = defines or {}
    key = spirv_key(shader, defines)
    with _lock:
        if key in _memory:
            return key, _memory[key]
    out = cache_dir() / "spirv" / f"{Path(shader).stem}-{key}.spv"
    if not out.exists():
        _compile_to(SHADER_DIR / shader, defines, out)
    code = out.read_bytes()
    with _lock:
        _memory[key] = code
    return key, code


def _compile_to(path: Path, defines: dict[str, object], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    cmd = [_tool("glslangValidator"), "-V", "--target-env", TARGET_ENV, "-I" + str(SHADER_DIR),
           *[f"-D{k}={v}" for k, v in sorted(defines.items())], "-o", str(tmp), str(path)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        tmp.unlink(missing_ok=True)
        detail = "\n".join(_diagnostics(res.stdout + res.stderr, path))
        raise ShaderError(f"shader {path.name} failed to compile with {_fmt(defines)}:\n{detail}")
    val = subprocess.run([_tool("spirv-val"), "--target-env", TARGET_ENV, str(tmp)], capture_output=True, text=True)
    if val.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ShaderError(f"shader {path.name} ({_fmt(defines)}) produced invalid SPIR-V:\n{val.stdout}{val.stderr}")
    tmp.replace(out)


_NOISE = ("compilation terminated", "compilation errors.", "SPIR-V is not generated", "Linking compute stage")


def _diagnostics(output: str, path: Path) -> list[str]:
    """glslang's file:line messages, without its summary lines."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and ln.strip() != str(path)]
    kept = [ln.removeprefix("ERROR: ") for ln in lines if not any(noise in ln for noise in _NOISE)]
    return kept or lines


def _fmt(defines: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(defines.items())) or "no defines"
