"""Where vkep's data lives: files inside the installed package, found through importlib.resources.

Everything a user needs at run time is package data, the same in a checkout, an editable install and a
wheel: the kernel manifest, the GLSL sources (for kernel authors and the SPIR-V cache key), the SPIR-V
compiled when the wheel was built, and the conformance expectations. Nothing is ever written here; what
vkep writes at run time goes below `cache_dir()`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from vkep import options

PACKAGE = Path(str(files("vkep")))
MANIFEST = PACKAGE / "kernels.yaml"
SHADER_DIR = PACKAGE / "shaders"
SPIRV_DIR = PACKAGE / "spirv"  # written by the wheel's build (vkep.build_spirv), absent in a plain checkout
EXPECTED_DIR = PACKAGE / "expected"
TUNING = PACKAGE / "kernels" / "tuning.json"  # measured kernel choices per device class (vkep.kernels.tuning)


def cache_dir() -> Path:
    """The per-user cache (VKEP_CACHE_DIR, else $XDG_CACHE_HOME/vkep, else ~/.cache/vkep), created on use."""
    base = options.env("VKEP_CACHE_DIR")
    if base is None:
        xdg = options.env("XDG_CACHE_HOME")
        base = (xdg if xdg and xdg.is_absolute() else Path.home() / ".cache") / "vkep"  # XDG: relative is ignored
    base.mkdir(parents=True, exist_ok=True)
    return base
