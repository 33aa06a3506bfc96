"""The plugin library ORT loads: a cffi *embedding* module whose callbacks are Python.

vkep writes its own declarations of the parts of ORT's C ABI it uses (ORT ships no headers in its
wheel): the structs in native/ort_abi.h, the function-table slots in abi.py. The C here is only what
must be C: the exported entry points with their start-up guard, a wrapper for each ORT function vkep
calls, and the per-node Compute trampoline that gathers input addresses and shapes so Python is entered
once per node.
"""

from __future__ import annotations

from pathlib import Path

import cffi

from vkep.ort import abi
from vkep.ort.abi import EP_API, HEADER, ORT_API, ORT_API_VERSION

NATIVE = Path(__file__).resolve().parent / "native"
# a change to any of these rebuilds the module (vkep/build.py): the C, and the slots the wrappers call
SOURCES = [*sorted(NATIVE.glob("*.[ch]")), Path(abi.__file__)]

EMBEDDING_API = r"""
OrtStatus* vkep_py_create_factories(const char* registered_name, const OrtApiBase* base, const OrtLogger* logger,
                                    OrtEpFactory** factories, size_t max_factories, size_t* num_factories);
OrtStatus* vkep_py_release_factory(OrtEpFactory* factory);
"""

# (OrtApi member, return type, parameters, argument names): the wrapper ort_<member> calls slot abi.ORT_API[member]
ORT_SLOTS = [
    ("CreateStatus", "OrtStatus*", "int code, const char* msg", "code, msg"),
    ("GetErrorCode", "int", "const OrtStatus* s", "s"),
    ("GetErrorMessage", "const char*", "const OrtStatus* s", "s"),
    ("ReleaseStatus", "void", "OrtStatus* s", "s"),
    ("CreateMemoryInfo_V2", "OrtStatus*", "const char* name, int device_type, uint32_t vendor_id, "
     "int32_t device_id, int mem_type, size_t alignment, int allocator_type, OrtMemoryInfo** out",
     "name, device_type, vendor_id, device_id, mem_type, alignment, allocator_type, out"),
    ("ReleaseMemoryInfo", "void", "OrtMemoryInfo* info", "info"),
    ("CreateKeyValuePairs", "void", "OrtKeyValuePairs** out", "out"),
    ("AddKeyValuePair", "void", "OrtKeyValuePairs* kvp, const char* key, const char* value", "kvp, key, value"),
    ("GetKeyValue", "const char*", "const OrtKeyValuePairs* kvp, const char* key", "kvp, key"),
    ("ReleaseKeyValuePairs", "void", "OrtKeyValuePairs* kvp", "kvp"),
    ("HardwareDevice_Type", "int", "const OrtHardwareDevice* d", "d"),
    ("HardwareDevice_VendorId", "uint32_t", "const OrtHardwareDevice* d", "d"),
    ("HardwareDevice_Vendor", "const char*", "const OrtHardwareDevice* d", "d"),
    ("HardwareDevice_DeviceId", "uint32_t", "const OrtHardwareDevice* d", "d"),
    ("HardwareDevice_Metadata", "const OrtKeyValuePairs*", "const OrtHardwareDevice* d", "d"),
    ("GetKeyValuePairs", "void",
     "const OrtKeyValuePairs* kvp, const char* const** keys, const char* const** values, size_t* n",
     "kvp, keys, values, n"),
    ("GetSessionOptionsConfigEntries", "OrtStatus*", "const OrtSessionOptions* o, OrtKeyValuePairs** out",
     "o, out"),
    ("Logger_LogMessage", "OrtStatus*", "const OrtLogger* logger, int severity, const char* message, "
     "const char* file, int line, const char* func", "logger, severity, message, file, line, func"),
    ("Logger_GetLoggingSeverityLevel", "OrtStatus*", "const OrtLogger* logger, int* out", "logger, out"),
    ("Graph_GetNumNodes", "OrtStatus*", "const OrtGraph* g, size_t* n", "g, n"),
    ("Graph_GetNodes", "OrtStatus*", "const OrtGraph* g, const OrtNode** nodes, size_t n", "g, nodes, n"),
    ("Node_GetName", "OrtStatus*", "const OrtNode* node, const char** out", "node, out"),
    ("Node_GetOperatorType", "OrtStatus*", "const OrtNode* node, const char** out", "node, out"),
    ("Node_GetDomain", "OrtStatus*", "const OrtNode* node, const char** out", "node, out"),
    ("Node_GetSinceVersion", "OrtStatus*", "const OrtNode* node, int* out", "node, out"),
    ("Node_GetNumInputs", "OrtStatus*", "const OrtNode* node, size_t* out", "node, out"),
    ("Node_GetInputs", "OrtStatus*", "const OrtNode* node, const OrtValueInfo** out, size_t n", "node, out, n"),
    ("Node_GetNumOutputs", "OrtStatus*", "const OrtNode* node, size_t* out", "node, out"),
    ("Node_GetOutputs", "OrtStatus*", "const OrtNode* node, const OrtValueInfo** out, size_t n", "node, out, n"),
    ("GetValueInfoName", "OrtStatus*", "const OrtValueInfo* v, const char** out", "v, out"),
    ("ValueInfo_GetValueNumConsumers", "OrtStatus*", "const OrtValueInfo* v, size_t* out", "v, out"),
    ("ValueInfo_GetValueConsumers", "OrtStatus*",
     "const OrtValueInfo* v, const OrtNode** nodes, int64_t* input_indices, size_t n", "v, nodes, input_indices, n"),
    ("ValueInfo_IsGraphOutput", "OrtStatus*", "const OrtValueInfo* v, bool* out", "v, out"),
    ("ValueInfo_GetInitializerValue", "OrtStatus*", "const OrtValueInfo* v, const OrtValue** out", "v, out"),
    ("ValueInfo_IsConstantInitializer", "OrtStatus*", "const OrtValueInfo* v, bool* out", "v, out"),
    ("ValueInfo_GetValueProducer", "OrtStatus*", "const OrtValueInfo* v, const OrtNode** node, size_t* index",
     "v, node, index"),
    ("Graph_GetNumOutputs", "OrtStatus*", "const OrtGraph* g, size_t* n", "g, n"),
    ("Graph_GetOutputs", "OrtStatus*", "const OrtGraph* g, const OrtValueInfo** out, size_t n", "g, out, n"),
    ("Graph_GetParentNode", "OrtStatus*", "const OrtGraph* g, const OrtNode** out", "g, out"),
    ("Node_GetNumSubgraphs", "OrtStatus*", "const OrtNode* node, size_t* out", "node, out"),
    ("Node_GetSubgraphs", "OrtStatus*", "const OrtNode* node, const OrtGraph** out, size_t n, const char** names",
     "node, out, n, names"),
    ("Node_GetGraph", "OrtStatus*", "const OrtNode* node, const OrtGraph** out", "node, out"),
    ("KernelInfo_GetInputName", "OrtStatus*", "const OrtKernelInfo* info, size_t i, char* out, size_t* size",
     "info, i, out, size"),
    ("KernelInfo_GetOutputName", "OrtStatus*", "const OrtKernelInfo* info, size_t i, char* out, size_t* size",
     "info, i, out, size"),
    ("GetValueInfoTypeInfo", "OrtStatus*", "const OrtValueInfo* v, const OrtTypeInfo** out", "v, out"),
    ("GetSymbolicDimensions", "OrtStatus*", "const OrtTensorTypeAndShapeInfo* i, const char** out, size_t n",
     "i, out, n"),
    ("Node_GetAttributeByName", "OrtStatus*", "const OrtNode* node, const char* name, const OrtOpAttr** out",
     "node, name, out"),
    ("ReadOpAttr", "OrtStatus*", "const OrtOpAttr* attr, int type, void* data, size_t len, size_t* out",
     "attr, type, data, len, out"),
    ("OpAttr_GetTensorAttributeAsOrtValue", "OrtStatus*", "const OrtOpAttr* attr, OrtValue** out", "attr, out"),
    ("GetTensorMutableData", "OrtStatus*", "OrtValue* v, void** out", "v, out"),
    ("GetTensorElementTypeAndShapeDataReference", "OrtStatus*",
     "const OrtValue* v, int* elem_type, const int64_t** shape, size_t* count", "v, elem_type, shape, count"),
    ("ReleaseValue", "void", "OrtValue* v", "v"),
    ("KernelInfoGetAttribute_tensor", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, OrtAllocator* allocator, OrtValue** out", "info, name, allocator, out"),
    ("GetAllocatorWithDefaultOptions", "OrtStatus*", "OrtAllocator** out", "out"),
    ("CreateTensorWithDataAsOrtValue", "OrtStatus*", "const OrtMemoryInfo* info, void* data, size_t len, "
     "const int64_t* shape, size_t rank, int type, OrtValue** out", "info, data, len, shape, rank, type, out"),
    ("GetTensorSizeInBytes", "OrtStatus*", "const OrtValue* v, size_t* out", "v, out"),
    ("KernelInfoGetAttribute_float", "OrtStatus*", "const OrtKernelInfo* info, const char* name, float* out",
     "info, name, out"),
    ("KernelInfoGetAttribute_int64", "OrtStatus*", "const OrtKernelInfo* info, const char* name, int64_t* out",
     "info, name, out"),
    ("KernelInfoGetAttribute_string", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, char* out, size_t* size", "info, name, out, size"),
    ("KernelInfoGetAttributeArray_float", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, float* out, size_t* size", "info, name, out, size"),
    ("KernelInfoGetAttributeArray_int64", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, int64_t* out, size_t* size", "info, name, out, size"),
    ("KernelInfo_GetInputCount", "OrtStatus*", "const OrtKernelInfo* info, size_t* out", "info, out"),
    ("KernelInfo_GetOutputCount", "OrtStatus*", "const OrtKernelInfo* info, size_t* out", "info, out"),
    ("KernelInfo_GetNodeName", "OrtStatus*", "const OrtKernelInfo* info, char* out, size_t* size",
     "info, out, size"),
    ("KernelInfo_GetOperatorSinceVersion", "OrtStatus*", "const OrtKernelInfo* info, int* out", "info, out"),
    ("GetSessionConfigEntry", "OrtStatus*",
     "const OrtSessionOptions* o, const char* key, char* out, size_t* size", "o, key, out, size"),
    ("HasSessionConfigEntry", "OrtStatus*", "const OrtSessionOptions* o, const char* key, int* out",
     "o, key, out"),
    ("GetRunConfigEntry", "const char*", "const OrtRunOptions* o, const char* key", "o, key"),
    # used only inside the C helpers below
    ("KernelContext_GetInputCount", "OrtStatus*", "const OrtKernelContext* c, size_t* out", "c, out"),
    ("KernelContext_GetOutputCount", "OrtStatus*", "const OrtKernelContext* c, size_t* out", "c, out"),
    ("KernelContext_GetInput", "OrtStatus*", "const OrtKernelContext* c, size_t i, const OrtValue** out",
     "c, i, out"),
    ("KernelContext_GetOutput", "OrtStatus*",
     "OrtKernelContext* c, size_t i, const int64_t* dims, size_t n, OrtValue** out", "c, i, dims, n, out"),
    ("KernelContext_GetGPUComputeStream", "OrtStatus*", "const OrtKernelContext* c, void** out", "c, out"),
    ("GetTensorTypeAndShape", "OrtStatus*", "const OrtValue* v, OrtTensorTypeAndShapeInfo** out", "v, out"),
    ("TensorTypeAndShape_HasShape", "bool", "const OrtTensorTypeAndShapeInfo* i", "i"),
    ("GetTensorElementType", "OrtStatus*", "const OrtTensorTypeAndShapeInfo* i, int* out", "i, out"),
    ("GetDimensionsCount", "OrtStatus*", "const OrtTensorTypeAndShapeInfo* i, size_t* out", "i, out"),
    ("GetDimensions", "OrtStatus*", "const OrtTensorTypeAndShapeInfo* i, int64_t* out, size_t n", "i, out, n"),
    ("ReleaseTensorTypeAndShapeInfo", "void", "OrtTensorTypeAndShapeInfo* i", "i"),
    ("KernelInfo_GetInputTypeInfo", "OrtStatus*", "const OrtKernelInfo* info, size_t i, OrtTypeInfo** out",
     "info, i, out"),
    ("CastTypeInfoToTensorInfo", "OrtStatus*", "const OrtTypeInfo* t, const OrtTensorTypeAndShapeInfo** out",
     "t, out"),
    ("ReleaseTypeInfo", "void", "OrtTypeInfo* t", "t"),
]

# (OrtEpApi member, return type, parameters, argument names): the wrapper ep_<member> calls slot abi.EP_API[member]
EP_SLOTS = [
    ("CreateEpDevice", "OrtStatus*", "OrtEpFactory* f, const OrtHardwareDevice* hw, "
     "const OrtKeyValuePairs* metadata, const OrtKeyValuePairs* options, OrtEpDevice** out",
     "f, hw, metadata, options, out"),
    ("EpGraphSupportInfo_AddNodesToFuse", "OrtStatus*", "OrtEpGraphSupportInfo* info, const OrtNode* const* nodes, "
     "size_t n, const OrtNodeFusionOptions* options", "info, nodes, n, options"),
    ("EpGraphSupportInfo_AddSingleNode", "OrtStatus*", "OrtEpGraphSupportInfo* info, const OrtNode* node",
     "info, node"),
    ("CreateHardwareDevice", "OrtStatus*", "int type, uint32_t vendor_id, uint32_t device_id, "
     "const char* vendor_name, const OrtKeyValuePairs* metadata, OrtHardwareDevice** out",
     "type, vendor_id, device_id, vendor_name, metadata, out"),
    ("ReleaseHardwareDevice", "void", "OrtHardwareDevice* d", "d"),
    ("EpDevice_AddAllocatorInfo", "OrtStatus*", "OrtEpDevice* d, const OrtMemoryInfo* info", "d, info"),
    ("MemoryInfo_GetMemoryDevice", "const OrtMemoryDevice*", "const OrtMemoryInfo* info", "info"),
    ("Value_GetMemoryDevice", "const OrtMemoryDevice*", "const OrtValue* v", "v"),
    ("MemoryDevice_GetDeviceType", "int", "const OrtMemoryDevice* d", "d"),
    ("MemoryDevice_GetMemoryType", "int", "const OrtMemoryDevice* d", "d"),
    ("MemoryDevice_GetVendorId", "uint32_t", "const OrtMemoryDevice* d", "d"),
    ("MemoryDevice_GetDeviceId", "uint32_t", "const OrtMemoryDevice* d", "d"),
    ("SyncStream_GetImpl", "const OrtSyncStreamImpl*", "const OrtSyncStream* s", "s"),
    ("CreateKernelRegistry", "OrtStatus*", "OrtKernelRegistry** out", "out"),
    ("ReleaseKernelRegistry", "void", "OrtKernelRegistry* r", "r"),
    ("CreateKernelDefBuilder", "OrtStatus*", "OrtKernelDefBuilder** out", "out"),
    ("ReleaseKernelDefBuilder", "void", "OrtKernelDefBuilder* b", "b"),
    ("KernelDefBuilder_SetOperatorType", "OrtStatus*", "OrtKernelDefBuilder* b, const char* op", "b, op"),
    ("KernelDefBuilder_SetDomain", "OrtStatus*", "OrtKernelDefBuilder* b, const char* domain", "b, domain"),
    ("KernelDefBuilder_SetSinceVersion", "OrtStatus*", "OrtKernelDefBuilder* b, int start, int end",
     "b, start, end"),
    ("KernelDefBuilder_SetExecutionProvider", "OrtStatus*", "OrtKernelDefBuilder* b, const char* ep", "b, ep"),
    ("KernelDefBuilder_SetInputMemType", "OrtStatus*", "OrtKernelDefBuilder* b, size_t index, int mem_type",
     "b, index, mem_type"),
    ("KernelDefBuilder_SetOutputMemType", "OrtStatus*", "OrtKernelDefBuilder* b, size_t index, int mem_type",
     "b, index, mem_type"),
    ("KernelDefBuilder_AddInputOutputAliases", "OrtStatus*",
     "OrtKernelDefBuilder* b, const int* inputs, const int* outputs, size_t n", "b, inputs, outputs, n"),
    ("KernelDefBuilder_Build", "OrtStatus*", "OrtKernelDefBuilder* b, OrtKernelDef** out", "b, out"),
    ("ReleaseKernelDef", "void", "OrtKernelDef* d", "d"),
    ("EpGraphSupportInfo_LookUpKernel", "OrtStatus*",
     "OrtEpGraphSupportInfo* info, const OrtNode* node, const OrtKernelDef** out", "info, node, out"),
    ("KernelInfo_GetEp", "OrtStatus*", "const OrtKernelInfo* info, const OrtEp** out", "info, out"),
    ("SharedPrePackedWeightCache_StoreWeightData", "OrtStatus*",
     "OrtSharedPrePackedWeightCache* c, void** buffers, size_t* sizes, size_t n", "c, buffers, sizes, n"),
    ("CreateIfKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtKernelImpl** out", "info, out"),
    ("CreateLoopKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtLoopKernelHelper* helper, OrtKernelImpl** out",
     "info, helper, out"),
    ("CreateScanKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtScanKernelHelper* helper, OrtKernelImpl** out",
     "info, helper, out"),
    # ORT 1.25+ (called only from a profiler, which older ORTs never ask for: OrtEp::CreateProfiler)
    ("CreateProfilingEvent", "OrtStatus*", "int category, int32_t process_id, int32_t thread_id, "
     "const char* name, int64_t timestamp_us, int64_t duration_us, const char* const* keys, "
     "const char* const* values, size_t n, OrtProfilingEvent** out",
     "category, process_id, thread_id, name, timestamp_us, duration_us, keys, values, n, out"),
    ("ReleaseProfilingEvent", "void", "OrtProfilingEvent* e", "e"),
    ("ProfilingEvent_GetName", "OrtStatus*", "const OrtProfilingEvent* e, const char** out", "e, out"),
    ("ProfilingEvent_GetArgValue", "OrtStatus*", "const OrtProfilingEvent* e, const char* key, const char** out",
     "e, key, out"),
    ("ProfilingEventsContainer_AddEvents", "OrtStatus*",
     "OrtProfilingEventsContainer* c, const OrtProfilingEvent* const* events, size_t n", "c, events, n"),
    # used only inside the C helpers below
    ("KernelRegistry_AddKernel", "OrtStatus*",
     "OrtKernelRegistry* r, const OrtKernelDef* def, OrtKernelCreateFunc fn, void* state", "r, def, fn, state"),
    ("KernelDefBuilder_AddTypeConstraint", "OrtStatus*",
     "OrtKernelDefBuilder* b, const char* name, const OrtDataType* const* types, size_t n", "b, name, types, n"),
    ("GetTensorDataType", "OrtStatus*", "int elem_type, const OrtDataType** out", "elem_type, out"),
]


def _declarations(prefix: str, slots) -> str:
    """The cdef of each slot's wrapper (Python calls them through the module's lib)."""
    return "".join(f"{ret} {prefix}_{name}({params});\n" for name, ret, params, _ in slots)


def _wrappers(prefix: str, table: str, slots, index: dict[str, int]) -> str:
    out = []
    for name, ret, params, args in slots:
        slot = index[name]
        ret_kw = "" if ret == "void" else "return "
        out.append(f"{ret} {prefix}_{name}({params}) {{\n"
                   f"    typedef {ret} (*fn_t)({params});\n"
                   f"    {ret_kw}((fn_t)((void* const*){table})[{slot}])({args});\n}}")
    return "\n".join(out)


# The embedded interpreter's start: find the package beside this library (a C host's interpreter knows nothing
# of where vkep is installed; a Python host already has it on sys.path, and this changes nothing there).
INIT_CODE = """
import os, sys
from _vkep_plugin import ffi, lib
_site = os.path.dirname(os.path.dirname(os.path.dirname(ffi.string(lib.vkep_library_file()).decode())))
if _site not in sys.path:
    sys.path.append(_site)
import vkep.ort.plugin
vkep.ort.plugin.attach(ffi, lib)
"""


def builder(module_name: str) -> cffi.FFI:
    ffi = cffi.FFI()
    # read now, not at import: the digest vkep/build.py compares is of the files as they are now
    ffi.cdef(HEADER.read_text() + _declarations("ort", ORT_SLOTS) + _declarations("ep", EP_SLOTS)
             + "".join((NATIVE / name).read_text() for name in ("calls.h", "callbacks.h")))
    ffi.embedding_api(EMBEDDING_API)
    wrappers = _wrappers("ort", "g_api", ORT_SLOTS, ORT_API) + "\n" + _wrappers("ep", "g_ep_api", EP_SLOTS, EP_API)
    wrappers += """
OrtStatus* ep_KernelRegistry_AddKernel_py(OrtKernelRegistry* r, const OrtKernelDef* def, void* state) {
    return ep_KernelRegistry_AddKernel(r, def, py_kernel_create, state);
}"""
    source = (NATIVE / "plugin.c").read_text().replace("/* @@WRAPPERS@@: ORT function-table wrappers, generated */",
                                                        wrappers) + (NATIVE / "alloc_front.c").read_text()
    ffi.embedding_init_code(INIT_CODE)
    ffi.set_source(
        module_name, source,
        define_macros=[("VKEP_ORT_API_VERSION", str(ORT_API_VERSION))],
        extra_compile_args=["-O2", "-g0"], libraries=["dl"], include_dirs=[str(NATIVE)],
    )
    # cffi links an embedding module to libpython; vkep's is not: the Python process that loads it (or, for
    # a C host, vkep's loader library, native/loader.c) provides libpython's symbols, and a link would name
    # this machine's libpython
    ffi._apply_embedding_fix = lambda kwds: None
    return ffi
