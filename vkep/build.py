"""Builds vkep's two native modules with cffi, rebuilding only what changed.

- `vkep._native._vk`: the Vulkan binding (gpu layer).
- `vkep._native._vkep_plugin`: the plugin library ORT loads (ort layer; cffi embedding).

`python -m vkep.build` is run by `./dev`; `ensure_built()` is also called lazily on import, so an
edited builder is picked up without a separate step (a kernel author's fast loop).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import sys
import sysconfig
from pathlib import Path

NATIVE_DIR = Path(__file__).resolve().parent / "_native"


def _builders():
    from vkep.gpu import _vk_build
    from vkep.ort import _plugin_build

    # a long-lived process may hold older builder code than the files the digest is taken of
    _vk_build, _plugin_build = importlib.reload(_vk_build), importlib.reload(_plugin_build)

    return {
        "_vk": (_vk_build, lambda: _vk_build.builder("vkep._native._vk")),
        "_vkep_plugin": (_plugin_build, lambda: _plugin_build.builder("_vkep_plugin")),
    }


def _digest(module) -> str:
    """Hash of the builder and the C files it compiles (its SOURCES), and of the Python it targets."""
    h = hashlib.sha256(sys.version.encode() + sysconfig.get_platform().encode())
    for path in [Path(module.__file__), *getattr(module, "SOURCES", [])]:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def module_path(name: str) -> Path:
    return NATIVE_DIR / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"


def ensure_built(names: tuple[str, ...] | None = None, verbose: bool = False) -> None:
    """Compile each module whose builder source changed since its last build."""
    NATIVE_DIR.mkdir(exist_ok=True)
    (NATIVE_DIR / "__init__.py").touch()
    builders = _builders()
    with open(NATIVE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, (source_module, make) in builders.items():
            if names and name not in names:
                continue
            stamp = NATIVE_DIR / f"{name}.stamp"
            digest = _digest(source_module)
            if module_path(name).exists() and stamp.exists() and stamp.read_text() == digest:
                continue
            if verbose:
                print(f"vkep: building {name}", flush=True)
            ffi = make()
            tmp = NATIVE_DIR / "build"
            built = ffi.compile(tmpdir=str(tmp), target=f"{name}.*", verbose=False)
            Path(built).replace(module_path(name))
            stamp.write_text(digest)


def load_vk():
    """The compiled Vulkan binding module (ffi, lib)."""
    ensure_built(("_vk",))
    return importlib.import_module("vkep._native._vk")


def main() -> int:
    ensure_built(verbose=True)
    print(f"vkep: native modules ready in {NATIVE_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
