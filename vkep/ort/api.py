"""Access to the plugin module's ffi/lib, OrtStatus handling and the callback decorators.

`attach()` (called by the embedded interpreter when ORT loads the plugin) sets `ffi` and `lib`;
every other module in vkep.ort uses them from here.
"""

from __future__ import annotations

import functools
import sys

from vkep import options
from vkep.ort import interrupts

ffi = None
lib = None
_TRACE = bool(options.env("VKEP_TRACE_CALLBACKS"))

ORT_FAIL = 1
ORT_INVALID_ARGUMENT = 2
ORT_NOT_IMPLEMENTED = 9
ORT_EP_FAIL = 11

EP_NAME = "VulkanExecutionProvider"
EP_VENDOR = "vkep"

# The onnxruntime releases whose plugin API vkep implements: its ORT API version (ORT_API_VERSION in
# abi.py; ORT 1.N serves API N) and every later 1.x (ORT keeps older API versions working).
# pyproject.toml requires the same range (tests/test_wheel.py holds them equal).
SUPPORTED_ORT = "onnxruntime>=1.24,<2"


def unsupported_ort(version: str, api_version: int) -> str | None:
    """Why an ORT of this version cannot load vkep, or None when it can."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return None  # a development build: its API table was found, so try it
    if major == 1 and minor >= api_version:
        return None
    return (f"vkep: this is onnxruntime {version}; vkep supports {SUPPORTED_ORT} (ORT API version {api_version} "
            f"and later 1.x releases): pip install '{SUPPORTED_ORT}'")

# OrtDeviceMemoryType / OrtMemoryInfoDeviceType / OrtMemType
MEM_DEFAULT = 0
MEM_HOST_ACCESSIBLE = 5
DEVICE_CPU = 0
DEVICE_GPU = 1
MEMTYPE_CPU_INPUT = -2
MEMTYPE_CPU_OUTPUT = -1


class OrtError(RuntimeError):
    def __init__(self, message: str, code: int = ORT_FAIL):
        super().__init__(message)
        self.code = code


def bind(ffi_, lib_) -> None:
    global ffi, lib
    ffi, lib = ffi_, lib_


def check(status) -> None:
    """Raise OrtError for a non-NULL OrtStatus* (and release it)."""
    if status != ffi.NULL:
        code = lib.ort_GetErrorCode(status)
        message = ffi.string(lib.ort_GetErrorMessage(status)).decode(errors="replace")
        lib.ort_ReleaseStatus(status)
        raise OrtError(message, code)


def make_status(exc: BaseException):
    interrupts.hold(exc)
    code = getattr(exc, "code", ORT_EP_FAIL) if not isinstance(exc, interrupts.INTERRUPTS) else ORT_EP_FAIL
    text = str(exc) if not isinstance(exc, interrupts.INTERRUPTS) else f"interrupted ({type(exc).__name__})"
    message = f"vkep: {text}" if not text.startswith("vkep") else text
    return lib.ort_CreateStatus(code, message.encode(errors="replace"))


def _report(exc_type, exc, tb, finalizing=sys.is_finalizing) -> None:
    # (ORT may release sessions the application kept in globals after Python has torn vkep's modules down: their
    # callbacks fail on the cleared globals, and there is no one left to tell)
    if finalizing():
        return
    from vkep.ort import log

    if isinstance(exc, interrupts.INTERRUPTS):
        interrupts.hold(exc)
        return
    log.report_exception(exc_type, exc, tb)


def _status_on_error(exc_type, exc, tb, finalizing=sys.is_finalizing):
    """An exception raised before a status callback's own handler (an interrupt lands at a function's first
    instruction): the same status as any other. (None: cffi's default, NULL, as the interpreter shuts down.)"""
    return None if finalizing() else make_status(exc)


def status_callback(name: str):
    """Define an `extern "Python"` callback that returns OrtStatus*: exceptions become a status."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args):
            if _TRACE:
                sys.stderr.write(f"vkep: {name}\n")
            try:
                fn(*args)
                return ffi.NULL
            except BaseException as exc:  # noqa: BLE001 — nothing may cross into ORT
                return make_status(exc)

        ffi.def_extern(name=name, onerror=_status_on_error)(inner)
        return fn

    return wrap


def callback(name: str):
    """Define an `extern "Python"` callback with a plain return value (0/NULL if it raises)."""

    def wrap(fn):
        def traced(*args):
            sys.stderr.write(f"vkep: {name}\n")
            return fn(*args)

        ffi.def_extern(name=name, onerror=_report)(traced if _TRACE else fn)
        return fn

    return wrap


def address(ptr) -> int:
    return int(ffi.cast("uintptr_t", ptr))


def new_struct(ctype: str):
    """A zeroed C struct that Python's GC never frees: ORT may use it until its Release, even while
    the interpreter is finalizing. Free it with `free_struct` from that Release."""
    return ffi.cast(ctype + "*", lib.calloc(1, ffi.sizeof(ctype)))


def free_struct(ptr) -> None:
    lib.free(ffi.cast("void*", ptr))


def cstring(text: str):
    """A C string that lives for the whole process (ORT keeps raw pointers to the names we return)."""
    data = text.encode()
    buf = ffi.cast("char*", lib.calloc(1, len(data) + 1))
    ffi.memmove(buf, data, len(data))
    return buf
