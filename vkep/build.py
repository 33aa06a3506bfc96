"""Builds vkep's native modules with cffi: at a wheel's build (setup.py), or in a checkout by `./dev`.

- `vkep._native._vk`: the Vulkan binding (gpu layer).
- `vkep._native._vkep_plugin`: the plugin module (ort layer; cffi embedding), loaded by
- `vkep/_native/libvkep_ep.so`: the library ORT loads (vkep/ort/native/loader.c).

Nothing is built at import or run time: `vkep._native.load` only looks the modules up. In a checkout,
`python -m vkep.build` rebuilds what changed since the last build (a digest of each builder and its C).

The binaries name no path of the build machine: the Python interpreter's own run path (pyenv's
`-Wl,-rpath`) is left out of the link, and the plugin library is not linked to libpython, whose
symbols the host process provides (see vkep/ort/_plugin_build.py).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from contextlib import contextmanager
from pathlib import Path

from vkep import _native


def _builders() -> dict:
    from vkep.gpu import _vk_build
    from vkep.ort import _plugin_build

    return {"_vk": _vk_build, "_vkep_plugin": _plugin_build}


def _digest(module) -> str:
    """Hash of the builder and the C files it compiles (its SOURCES), and of the Python it targets."""
    h = hashlib.sha256(sys.version.encode() + sysconfig.get_platform().encode())
    for path in [Path(module.__file__), *getattr(module, "SOURCES", [])]:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@contextmanager
def _link_without_rpath():
    """The interpreter's LDSHARED, less any -rpath: a run path would be an absolute path of this machine."""
    words = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
    kept = [w for w in words if not (w.startswith("-Wl,-rpath") or w.startswith("-Wl,-R"))]
    old = os.environ.get("LDSHARED")
    os.environ["LDSHARED"] = shlex.join(kept)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LDSHARED", None)
        else:
            os.environ["LDSHARED"] = old


def build(target: Path = _native.DIR, only_changed: bool = True, verbose: bool = False) -> list[Path]:
    """Compile both modules into `target` (a package's vkep/_native); returns the files written."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, builder in _builders().items():
        out = target / _native.filename(name)
        stamp = target / f"{name}.stamp"
        digest = _digest(builder)
        if only_changed and out.exists() and stamp.exists() and stamp.read_text() == digest:
            continue
        if verbose:
            print(f"vkep: building {name}", flush=True)
        ffi = builder.builder(name if name == "_vkep_plugin" else f"vkep._native.{name}")
        with tempfile.TemporaryDirectory(prefix="vkep-build-") as tmp, _link_without_rpath():
            built = ffi.compile(tmpdir=tmp, target=f"{name}.*", verbose=False)
            Path(built).replace(out)
        written.append(out)
        if only_changed:  # a checkout's record of what was built; a wheel has none
            stamp.write_text(digest)
    written += _build_loader(target, only_changed, verbose)
    return written


def _build_loader(target: Path, only_changed: bool, verbose: bool) -> list[Path]:
    """The small library ORT loads (vkep/ort/native/loader.c): plain C, no Python, so not a cffi module."""
    from vkep.ort import _plugin_build

    libpython = sysconfig.get_config_var("INSTSONAME") or ""
    if not libpython.startswith("libpython"):  # a static interpreter: the name its shared library would have
        libpython = f"libpython{sys.version_info.major}.{sys.version_info.minor}{sys.abiflags}.so.1.0"
    source, header = _plugin_build.NATIVE / "loader.c", _plugin_build.NATIVE / "ort_abi.h"
    out, stamp = target / _native.LOADER_FILE, target / "loader.stamp"
    cmd = [*shlex.split(sysconfig.get_config_var("CC") or "cc"), "-shared", "-fPIC", "-O2", "-g0",
           f'-DVKEP_PLUGIN_FILE="{_native.filename("_vkep_plugin")}"', f'-DVKEP_LIBPYTHON="{libpython}"',
           str(source), "-o", str(out), "-ldl", "-lpthread"]
    digest = hashlib.sha256(source.read_bytes() + header.read_bytes() + " ".join(cmd).encode()).hexdigest()[:16]
    if only_changed and out.exists() and stamp.exists() and stamp.read_text() == digest:
        return []
    if verbose:
        print("vkep: building the loader", flush=True)
    subprocess.run(cmd, check=True)
    if only_changed:
        stamp.write_text(digest)
    return [out]


def main() -> int:
    build(verbose=True)
    importlib.invalidate_caches()
    print(f"vkep: native modules ready in {_native.DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
