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

_ffi = cffi.FFI()
_ffi.cdef("""
typedef struct OrtApiBase { const void* (*GetApi)(uint32_t version); const char* (*GetVersionString)(void); }
    OrtApiBase;
const OrtApiBase* OrtGetApiBase(void);
typedef struct { uint32_t version; int handle_type; void* native_handle; size_t size_bytes; size_t offset_bytes; }
    MemoryDescriptor;
typedef struct { uint32_t version; int type; void* native_handle; } SemaphoreDescriptor;
typedef struct { uint32_t version; int element_type; const int64_t* shape; size_t rank; size_t offset_bytes; }
    TensorDescriptor;
""")

API_VERSION = 24
MEMORY_TYPES = {"d3d12_resource": 0, "d3d12_heap": 1, "vk_memory_win32": 2, "opaque_win32": 2,
                "vk_memory_opaque_fd": 3, "opaque_fd": 3}
SEMAPHORE_TYPES = {"d3d12_fence": 0, "vk_timeline_semaphore_win32": 1, "opaque_win32": 1,
                   "vk_timeline_semaphore_opaque_fd": 2, "opaque_fd": 2}
ELEMENT_CODES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.int32): 6,
                 np.dtype(np.int64): 7, np.dtype(np.bool_): 9, np.dtype(np.float16): 10, np.dtype(np.float64): 11}
DTYPES = {code: dtype for dtype, code in ELEMENT_CODES.items()}

# (slot, C signature) of the OrtApi functions used here
_API = {
    "GetErrorMessage": (2, "const char*(*)(void*)"),
    "ReleaseStatus": (93, "void(*)(void*)"),
    "CreateEnv": (3, "void*(*)(int, const char*, void**)"),
    "ReleaseEnv": (92, "void(*)(void*)"),
    "RegisterExecutionProviderLibrary": (301, "void*(*)(void*, const char*, const char*)"),
    "GetEpDevices": (303, "void*(*)(void*, void***, size_t*)"),
    "EpDevice_EpName": (312, "const char*(*)(void*)"),
    "CreateSessionOptions": (10, "void*(*)(void**)"),
    "ReleaseSessionOptions": (100, "void(*)(void*)"),
    "AddSessionConfigEntry": (130, "void*(*)(void*, const char*, const char*)"),
    "AppendEpV2": (304, "void*(*)(void*, void*, void**, size_t, const char**, const char**, size_t)"),
    "CreateSessionFromArray": (8, "void*(*)(void*, const void*, size_t, void*, void**)"),
    "ReleaseSession": (95, "void(*)(void*)"),
    "Run": (9, "void*(*)(void*, void*, const char**, void**, size_t, const char**, size_t, void**)"),
    "CreateCpuMemoryInfo": (69, "void*(*)(int, int, void**)"),
    "ReleaseMemoryInfo": (94, "void(*)(void*)"),
    "CreateTensorWithDataAsOrtValue": (49, "void*(*)(void*, void*, size_t, int64_t*, size_t, int, void**)"),
    "ReleaseValue": (96, "void(*)(void*)"),
    "GetTensorMutableData": (51, "void*(*)(void*, void**)"),
    "GetTensorTypeAndShape": (65, "void*(*)(void*, void**)"),
    "GetTensorElementType": (60, "void*(*)(void*, int*)"),
    "GetDimensionsCount": (61, "void*(*)(void*, size_t*)"),
    "GetDimensions": (62, "void*(*)(void*, int64_t*, size_t)"),
    "ReleaseTensorTypeAndShapeInfo": (99, "void(*)(void*)"),
    "GetInteropApi": (395, "void*(*)(void)"),
    "CreatePrepackedWeightsContainer": (166, "void*(*)(void**)"),
    "ReleasePrepackedWeightsContainer": (167, "void(*)(void*)"),
    "CreateSessionFromArrayWithPrepackedWeightsContainer": (169, "void*(*)(void*, const void*, size_t, void*, void*, "
                                                                 "void**)"),
}
# (slot in OrtInteropApi, C signature)
_INTEROP = {
    "CreateImporter": (0, "void*(*)(void*, void**)"),
    "ReleaseImporter": (1, "void(*)(void*)"),
    "CanImportMemory": (2, "void*(*)(void*, int, _Bool*)"),
    "ImportMemory": (3, "void*(*)(void*, MemoryDescriptor*, void**)"),
    "ReleaseMemory": (4, "void(*)(void*)"),
    "CreateTensorFromMemory": (5, "void*(*)(void*, void*, TensorDescriptor*, void**)"),
    "CanImportSemaphore": (6, "void*(*)(void*, int, _Bool*)"),
    "ImportSemaphore": (7, "void*(*)(void*, SemaphoreDescriptor*, void**)"),
    "ReleaseSemaphore": (8, "void(*)(void*)"),
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
    def __init__(self, table, entries: dict):
        slots = _ffi.cast("void**", table)
        self._fns = {name: _ffi.cast(sig, slots[slot]) for name, (slot, sig) in entries.items()}

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
        self.api = _Table(api, _API)
        self.interop = _Table(self.api.GetInteropApi(), _INTEROP)
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
            check(api.AppendEpV2(options[0], runtime.env, devices, 1, _ffi.new("const char*[]", keys),
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
        self.importer.runtime.interop.ReleaseMemory(self.handle)


class Semaphore:
    def __init__(self, importer: Importer, handle):
        self.importer, self.handle = importer, handle

    def release(self) -> None:
        self.importer.runtime.interop.ReleaseSemaphore(self.handle)


class Importer:
    """OrtExternalResourceImporter for one vkep device."""

    def __init__(self, runtime: Runtime, device):
        self.runtime = runtime
        out = _ffi.new("void**")
        runtime.check(runtime.interop.CreateImporter(device, out))
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
        desc = _ffi.new("MemoryDescriptor*", {"version": API_VERSION, "handle_type": MEMORY_TYPES[kind],
                                              "native_handle": _ffi.cast("void*", handle), "size_bytes": size,
                                              "offset_bytes": offset})
        out = _ffi.new("void**")
        self.runtime.check(self.runtime.interop.ImportMemory(self.importer, desc, out))
        return Memory(self, out[0], size)

    def tensor(self, memory: Memory, dtype, shape: list[int], offset: int = 0) -> Tensor:
        """A tensor viewing imported memory at `offset` (relative to the import's own offset)."""
        dims = _ffi.new("int64_t[]", list(shape) or [0])
        desc = _ffi.new("TensorDescriptor*", {"version": API_VERSION, "element_type": ELEMENT_CODES[np.dtype(dtype)],
                                              "shape": dims, "rank": len(shape), "offset_bytes": offset})
        out = _ffi.new("void**")
        self.runtime.check(self.runtime.interop.CreateTensorFromMemory(self.importer, memory.handle, desc, out))
        return Tensor(self.runtime, out[0], keep=dims)

    def import_semaphore(self, kind: str, handle: int) -> Semaphore:
        desc = _ffi.new("SemaphoreDescriptor*", {"version": API_VERSION, "type": SEMAPHORE_TYPES[kind],
                                                 "native_handle": _ffi.cast("void*", handle)})
        out = _ffi.new("void**")
        self.runtime.check(self.runtime.interop.ImportSemaphore(self.importer, desc, out))
        return Semaphore(self, out[0])

    def __del__(self):
        if getattr(self, "importer", None) is not None:
            self.runtime.interop.ReleaseImporter(self.importer)
            self.importer = None

