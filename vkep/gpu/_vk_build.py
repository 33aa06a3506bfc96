"""cffi (API mode) binding of the Vulkan subset vkep uses, plus a few lines of C for the hot path.

Compiled against the system's <vulkan/vulkan.h>, so every struct layout in native/vk_cdef.h is checked by the C
compiler; only the members vkep touches are declared (`...;`).  Built by `python -m vkep.build`.
"""

from __future__ import annotations

from pathlib import Path

import cffi

NATIVE = Path(__file__).resolve().parent / "native"
SOURCES = sorted(NATIVE.glob("*.[ch]"))  # a change to any of these rebuilds the module (vkep/build.py)


def builder(module_name: str) -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef((NATIVE / "vk_cdef.h").read_text())
    source = "".join((NATIVE / name).read_text() for name in ("recorder.c", "interop.c", "coopmat.c"))
    ffi.set_source(module_name, source, libraries=["vulkan"], extra_compile_args=["-O2", "-g0"])  # -g0: no path of this machine in the binary
    return ffi
