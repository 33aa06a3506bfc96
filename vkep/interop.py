"""Zero-copy interop for Python applications: ORT's C interop API (`OrtInteropApi`), which ORT's Python
binding does not expose, reached through the C API of the `libonnxruntime` in the installed wheel.

    rt = vkep.interop.Runtime()                      # an OrtEnv of the C API with vkep registered
    session = rt.session(model_bytes)                # a session on vkep
    importer = rt.importer()                         # OrtExternalResourceImporter for vkep's device
    memory = importer.import_memory("opaque_fd", fd, size)      # another process' / API's GPU memory
    x = importer.tensor(memory, np.float32, [1, 256])            # a view of it, no copy
    y = importer.tensor(memory, np.float32, [1, 256], offset=1024)
    session.run({"x": x}, outputs={"y": y})          # reads x and writes y in place

What a C or C++ application does, from Python. The runtime here is separate from `onnxruntime`'s
Python module (each has its own environment); vkep serves both.
"""

from __future__ import annotations

from pathlib import Path

import cffi
import numpy as np

import vkep
from vkep.ort import abi

_ffi = cffi.FFI()
# ORT's structs as the plugin declares them (OrtApiBase, the external-resource descriptors), and the one export
_ffi.cdef(abi.HEADER.read_text() + "const OrtApiBase* OrtGetApiBase(void);")


def _with_vulkan_kinds(types: dict[str, int]) -> dict[str, int]:
    """ORT's names of its handle types, and vkep's short names of the Vulkan ones (opaque_fd, opaque_win32)."""
    return {**types, **{abi.VULKAN_KINDS[name]: code for name, code in types.items() if name in abi.VULKAN_KINDS}}


def _numpy_dtypes(types: dict[int, str]) -> dict[np.dtype, int]:
    """The element types numpy has (not bfloat16, int4, uint4)."""
    found = {}
    for code, name in types.items():
        try:
            found[np.dtype(name)] = code
        except TypeError:
            continue
    return found


API_VERSION = abi.ORT_API_VERSION
MEMORY_TYPES = _with_vulkan_kinds(abi.MEMORY_HANDLE_TYPES)
SEMAPHORE_TYPES = _with_vulkan_kinds(abi.SEMAPHORE_TYPES)
ELEMENT_CODES = _numpy_dtypes(abi.ELEMENT_TYPES)
DTYPES = {code: dtype for dtype, code in ELEMENT_CODES.items()}

# C signatures of the OrtApi functions used here (their slots: abi.ORT_API)
_API = {
    "GetErrorMessage": "const char*(*)(void*)",
    "ReleaseStatus": "void(*)(void*)",
    "CreateEnv": "void*(*)(int, const char*, void**)",
    "ReleaseEnv": "void(*)(void*)",
    "RegisterExecutionProviderLibrary": "void*(*)(void*, const char*, const char*)",
    "GetEpDevices": "void*(*)(void*, void***, size_t*)",
    "EpDevice_EpName": "const char*(*)(void*)",
    "CreateSessionOptions": "void*(*)(void**)",
    "ReleaseSessionOptions": "void(*)(void*)",
    "AddSessionConfigEntry": "void*(*)(void*, const char*, const char*)",
    "SessionOptionsAppendExecutionProvider_V2": "void*(*)(void*, void*, void**, size_t, const char**, const char**, "
                                                "size_t)",
    "CreateSessionFromArray": "void*(*)(void*, const void*, size_t, void*, void**)",
    "ReleaseSession": "void(*)(void*)",
    "Run": "void*(*)(void*, void*, const char**, void**, size_t, const char**, size_t, void**)",
    "CreateCpuMemoryInfo": "void*(*)(int, int, void**)",
    "ReleaseMemoryInfo": "void(*)(void*)",
    "CreateTensorWithDataAsOrtValue": "void*(*)(void*, void*, size_t, int64_t*, size_t, int, void**)",
    "ReleaseValue": "void(*)(void*)",
    "GetTensorMutableData": "void*(*)(void*, void**)",
    "GetTensorTypeAndShape": "void*(*)(void*, void**)",
    "GetTensorElementType": "void*(*)(void*, int*)",
    "GetDimensionsCount": "void*(*)(void*, size_t*)",
    "GetDimensions": "void*(*)(void*, int64_t*, size_t)",
    "ReleaseTensorTypeAndShapeInfo": "void(*)(void*)",
    "GetInteropApi": "void*(*)(void)",
    "CreatePrepackedWeightsContainer": "void*(*)(void**)",
    "ReleasePrepackedWeightsContainer": "void(*)(void*)",
    "CreateSessionFromArrayWithPrepackedWeightsContainer": "void*(*)(void*, const void*, size_t, void*, void*, void**)",
}
# C signatures of the OrtInteropApi functions (their slots: abi.INTEROP_API)
_INTEROP = {
    "CreateExternalResourceImporterForDevice": "void*(*)(void*, void**)",
    "ReleaseExternalResourceImporter": "void(*)(void*)",
    "CanImportMemory": "void*(*)(void*, int, _Bool*)",
    "ImportMemory": "void*(*)(void*, OrtExternalMemoryDescriptor*, void**)",
    "ReleaseExternalMemoryHandle": "void(*)(void*)",
    "CreateTensorFromMemory": "void*(*)(void*, void*, OrtExternalTensorDescriptor*, void**)",
    "CanImportSemaphore": "void*(*)(void*, int, _Bool*)",
    "ImportSemaphore": "void*(*)(void*, OrtExternalSemaphoreDescriptor*, void**)",
    "ReleaseExternalSemaphoreHandle": "void(*)(void*)",
}


class InteropError(RuntimeError):
    """An error status from ORT's C API (its message)."""


def library_path() -> str:
    """libonnxruntime.so of the installed onnxruntime wheel."""
    import onnxruntime

    capi = Path(onnxruntime.__file__).parent / "capi"
    found = sorted(capi.glob("libonnxruntime.so*")) + sorted(capi.glob("onnxruntime.dll"))
    if not found:
        raise InteropError(f"no libonnxruntime shared library in {capi}")
    return str(found[0])


class _Table:
    """The functions of one of ORT's function tables, by member name."""

    def __init__(self, table, slots: dict[str, int], signatures: dict[str, str]):
        entries = _ffi.cast("void**", table)
        self._fns = {name: _ffi.cast(sig, entries[slots[name]]) for name, sig in signatures.items()}

    def __getattr__(self, name):
        return self._fns[name]


class Runtime:
    """An OrtEnv of ORT's C API with vkep registered; owns the sessions and importers made from it."""

    def __init__(self, library: str | None = None):
        self._lib = _ffi.dlopen(library or library_path())
        base = self._lib.OrtGetApiBase()
        api = base.GetApi(API_VERSION)
        if api == _ffi.NULL:
            raise InteropError(f"this libonnxruntime does not offer API version {API_VERSION}")
        self.api = _Table(api, abi.ORT_API, _API)
        self.interop = _Table(self.api.GetInteropApi(), abi.INTEROP_API, _INTEROP)
        env = _ffi.new("void**")
        self.check(self.api.CreateEnv(2, b"vkep.interop", env))
        self.env = env[0]
        self.check(self.api.RegisterExecutionProviderLibrary(self.env, b"vkep", vkep.get_library_path().encode()))
        devices, count = _ffi.new("void***"), _ffi.new("size_t*")
        self.check(self.api.GetEpDevices(self.env, devices, count))
        self.devices = [devices[0][i] for i in range(count[0])
                        if _ffi.string(self.api.EpDevice_EpName(devices[0][i])) == vkep.EP_NAME.encode()]
        if not self.devices:
            raise InteropError("vkep registered no device")
        info = _ffi.new("void**")
        self.check(self.api.CreateCpuMemoryInfo(0, 0, info))
        self.cpu_memory = info[0]

    def check(self, status) -> None:
        if status != _ffi.NULL:
            message = _ffi.string(self.api.GetErrorMessage(status)).decode(errors="replace")
            self.api.ReleaseStatus(status)
            raise InteropError(message)

    def session(self, model: bytes, config: dict[str, str] | None = None, device: int = 0,
                ep_options: dict[str, str] | None = None, weights: WeightsContainer | None = None) -> Session:
        """A session on vkep; sessions given one `weights` container share their pre-packed weights
        through ORT (with ep_options {"prepack_cache": "ort"})."""
        # the application chose vkep and this device: run on it even where it is CPU-implemented (lavapipe)
        chosen = {"allow_cpu_device": "1", **(ep_options or {})}
        return Session(self, model, config or {}, self.devices[device], chosen, weights)

    def weights_container(self) -> WeightsContainer:
        return WeightsContainer(self)

    def importer(self, device: int = 0) -> Importer:
        return Importer(self, self.devices[device])

    def cpu_tensor(self, array: np.ndarray) -> Tensor:
        """A tensor over a numpy array's memory (kept alive by the tensor)."""
        array = np.ascontiguousarray(array)
        shape = _ffi.new("int64_t[]", list(array.shape) or [0])
        out = _ffi.new("void**")
        self.check(self.api.CreateTensorWithDataAsOrtValue(self.cpu_memory, _ffi.from_buffer(array), array.nbytes,
                                                           shape, array.ndim, ELEMENT_CODES[array.dtype], out))
        return Tensor(self, out[0], keep=array)


class Tensor:
    """An OrtValue of the C API (released with the object)."""

    def __init__(self, runtime: Runtime, value, keep=None):
        self.runtime, self.value, self._keep = runtime, value, keep

    def numpy(self) -> np.ndarray:
        """A copy of a CPU tensor's values."""
        api, check = self.runtime.api, self.runtime.check
        info = _ffi.new("void**")
        check(api.GetTensorTypeAndShape(self.value, info))
        try:
            code, rank = _ffi.new("int*"), _ffi.new("size_t*")
            check(api.GetTensorElementType(info[0], code))
            check(api.GetDimensionsCount(info[0], rank))
            dims = _ffi.new("int64_t[]", max(rank[0], 1))
            check(api.GetDimensions(info[0], dims, rank[0]))
        finally:
            api.ReleaseTensorTypeAndShapeInfo(info[0])
        data = _ffi.new("void**")
        check(api.GetTensorMutableData(self.value, data))
        dtype, shape = DTYPES[code[0]], tuple(dims[i] for i in range(rank[0]))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return np.frombuffer(_ffi.buffer(data[0], nbytes), dtype=dtype).reshape(shape).copy()

    def __del__(self):
        if self.value is not None:
            self.runtime.api.ReleaseValue(self.value)
            self.value = None


class WeightsContainer:
    """An OrtPrepackedWeightsContainer: ORT's store of pre-packed weights shared by the sessions given it."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        out = _ffi.new("void**")
        runtime.check(runtime.api.CreatePrepackedWeightsContainer(out))
        self.container = out[0]

    def __del__(self):
        if getattr(self, "container", None) is not None:
            self.runtime.api.ReleasePrepackedWeightsContainer(self.container)
            self.container = None


class Session:
    def __init__(self, runtime: Runtime, model: bytes, config: dict[str, str], device,
                 ep_options: dict[str, str], weights: WeightsContainer | None):
        api, check = runtime.api, runtime.check
        self.runtime = runtime
        self.weights = weights  # ORT requires the container to outlive the session
        options = _ffi.new("void**")
        check(api.CreateSessionOptions(options))
        try:
            for key, value in config.items():
                check(api.AddSessionConfigEntry(options[0], key.encode(), value.encode()))
            devices = _ffi.new("void*[]", [device])
            keys = [_ffi.new("char[]", k.encode()) for k in ep_options]
            values = [_ffi.new("char[]", v.encode()) for v in ep_options.values()]
            check(api.SessionOptionsAppendExecutionProvider_V2(options[0], runtime.env, devices, 1, _ffi.new("const char*[]", keys),
                                 _ffi.new("const char*[]", values), len(keys)))
            out = _ffi.new("void**")
            if weights is None:
                check(api.CreateSessionFromArray(runtime.env, model, len(model), options[0], out))
            else:
                check(api.CreateSessionFromArrayWithPrepackedWeightsContainer(
                    runtime.env, model, len(model), options[0], weights.container, out))
            self.session = out[0]
        finally:
            api.ReleaseSessionOptions(options[0])

    def run(self, inputs: dict, outputs: dict[str, Tensor | None] | list[str]) -> dict[str, np.ndarray | Tensor]:
        """Run; `outputs` maps names to pre-made tensors (written in place) or None (returned as numpy)."""
        rt = self.runtime
        feeds = {k: v if isinstance(v, Tensor) else rt.cpu_tensor(v) for k, v in inputs.items()}
        wanted = outputs if isinstance(outputs, dict) else dict.fromkeys(outputs)
        in_names = [_ffi.new("char[]", k.encode()) for k in feeds]
        out_names = [_ffi.new("char[]", k.encode()) for k in wanted]
        values = _ffi.new("void*[]", [t.value if t is not None else _ffi.NULL for t in wanted.values()])
        rt.check(rt.api.Run(self.session, _ffi.NULL, _ffi.new("const char*[]", in_names),
                            _ffi.new("void*[]", [t.value for t in feeds.values()]), len(feeds),
                            _ffi.new("const char*[]", out_names), len(wanted), values))
        result = {}
        for i, (name, given) in enumerate(wanted.items()):
            result[name] = given if given is not None else Tensor(rt, values[i]).numpy()
        return result

    def __del__(self):
        if getattr(self, "session", None) is not None:
            self.runtime.api.ReleaseSession(self.session)
            self.session = None


class Memory:
    def __init__(self, importer: Importer, handle, size: int):
        self.importer, self.handle, self.size = importer, handle, size

    def release(self) -> None:
        self.importer.runtime.interop.ReleaseExternalMemoryHandle(self.handle)


class Semaphore:
    def __init__(self, importer: Importer, handle):
        self.importer, self.handle = importer, handle

    def release(self) -> None:
        self.importer.runtime.interop.ReleaseExternalSemaphoreHandle(self.handle)


class Importer:
    """OrtExternalResourceImporter for one vkep device."""

    def __init__(self, runtime: Runtime, device):
        self.runtime = runtime
        out = _ffi.new("void**")
        runtime.check(runtime.interop.CreateExternalResourceImporterForDevice(device, out))
        if out[0] == _ffi.NULL:
            raise InteropError("the EP offers no external resource importer")
        self.importer = out[0]

    def can_import_memory(self, kind: str) -> bool:
        ok = _ffi.new("_Bool*")
        self.runtime.check(self.runtime.interop.CanImportMemory(self.importer, MEMORY_TYPES[kind], ok))
        return bool(ok[0])

    def can_import_semaphore(self, kind: str) -> bool:
        ok = _ffi.new("_Bool*")
        self.runtime.check(self.runtime.interop.CanImportSemaphore(self.importer, SEMAPHORE_TYPES[kind], ok))
        return bool(ok[0])

    def import_memory(self, kind: str, handle: int, size: int, offset: int = 0) -> Memory:
        """Import an allocation of `size` bytes (an fd's ownership passes to vkep on success)."""
        desc = _ffi.new("OrtExternalMemoryDescriptor*", {"version": API_VERSION, "handle_type": MEMORY_TYPES[kind],
                                              "native_handle": _ffi.cast("void*", handle), "size_bytes": size,
                                              "offset_bytes": offset})
        out = _ffi.new("void**")
        self.runtime.check(self.runtime.interop.ImportMemory(self.importer, desc, out))
        return Memory(self, out[0], size)

    def tensor(self, memory: Memory, dtype, shape: list[int], offset: int = 0) -> Tensor:
        """A tensor viewing imported memory at `offset` (relative to the import's own offset)."""
        dims = _ffi.new("int64_t[]", list(shape) or [0])
        desc = _ffi.new("OrtExternalTensorDescriptor*", {"version": API_VERSION, "element_type": ELEMENT_CODES[np.dtype(dtype)],
                                              "shape": dims, "rank": len(shape), "offset_bytes": offset})
        out = _ffi.new("void**")
        self.runtime.check(self.runtime.interop.CreateTensorFromMemory(self.importer, memory.handle, desc, out))
        return Tensor(self.runtime, out[0], keep=dims)

    def import_semaphore(self, kind: str, handle: int) -> Semaphore:
        desc = _ffi.new("OrtExternalSemaphoreDescriptor*", {"version": API_VERSION, "type": SEMAPHORE_TYPES[kind],
                                                 "native_handle": _ffi.cast("void*", handle)})
        out = _ffi.new("void**")
        self.runtime.check(self.runtime.interop.ImportSemaphore(self.importer, desc, out))
        return Semaphore(self, out[0])

    def __del__(self):
        if getattr(self, "importer", None) is not None:
            self.runtime.interop.ReleaseExternalResourceImporter(self.importer)
            self.importer = None

