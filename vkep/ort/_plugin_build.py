"""The plugin library ORT loads: a cffi *embedding* module whose callbacks are Python.

vkep writes its own declarations of the parts of ORT's C ABI it uses (ORT ships no headers in its
wheel). The C here is only what must be C: the exported entry points with their start-up guard, the
ORT function-table slots vkep calls, and the per-node Compute trampoline that gathers input
addresses and shapes so Python is entered once per node.
"""

from __future__ import annotations

from pathlib import Path

import cffi

# Lowest ORT API version whose members vkep's structs implement / whose functions it calls.
ORT_API_VERSION = 24

NATIVE = Path(__file__).resolve().parent / "native"
SOURCES = sorted(NATIVE.glob("*.[ch]"))  # a change to any of these rebuilds the module (vkep/build.py)

EMBEDDING_API = r"""
OrtStatus* vkep_py_create_factories(const char* registered_name, const OrtApiBase* base, const OrtLogger* logger,
                                    OrtEpFactory** factories, size_t max_factories, size_t* num_factories);
OrtStatus* vkep_py_release_factory(OrtEpFactory* factory);
"""

# (slot in OrtApi, wrapper name, return type, parameters, argument names)
ORT_SLOTS = [
    (0, "CreateStatus", "OrtStatus*", "int code, const char* msg", "code, msg"),
    (1, "GetErrorCode", "int", "const OrtStatus* s", "s"),
    (2, "GetErrorMessage", "const char*", "const OrtStatus* s", "s"),
    (93, "ReleaseStatus", "void", "OrtStatus* s", "s"),
    (320, "CreateMemoryInfo_V2", "OrtStatus*", "const char* name, int device_type, uint32_t vendor_id, "
     "int32_t device_id, int mem_type, size_t alignment, int allocator_type, OrtMemoryInfo** out",
     "name, device_type, vendor_id, device_id, mem_type, alignment, allocator_type, out"),
    (94, "ReleaseMemoryInfo", "void", "OrtMemoryInfo* info", "info"),
    (295, "CreateKeyValuePairs", "void", "OrtKeyValuePairs** out", "out"),
    (296, "AddKeyValuePair", "void", "OrtKeyValuePairs* kvp, const char* key, const char* value", "kvp, key, value"),
    (297, "GetKeyValue", "const char*", "const OrtKeyValuePairs* kvp, const char* key", "kvp, key"),
    (300, "ReleaseKeyValuePairs", "void", "OrtKeyValuePairs* kvp", "kvp"),
    (307, "HardwareDevice_Type", "int", "const OrtHardwareDevice* d", "d"),
    (308, "HardwareDevice_VendorId", "uint32_t", "const OrtHardwareDevice* d", "d"),
    (309, "HardwareDevice_Vendor", "const char*", "const OrtHardwareDevice* d", "d"),
    (310, "HardwareDevice_DeviceId", "uint32_t", "const OrtHardwareDevice* d", "d"),
    (311, "HardwareDevice_Metadata", "const OrtKeyValuePairs*", "const OrtHardwareDevice* d", "d"),
    (298, "GetKeyValuePairs", "void",
     "const OrtKeyValuePairs* kvp, const char* const** keys, const char* const** values, size_t* n",
     "kvp, keys, values, n"),
    (379, "GetSessionOptionsConfigEntries", "OrtStatus*", "const OrtSessionOptions* o, OrtKeyValuePairs** out",
     "o, out"),
    (247, "Logger_LogMessage", "OrtStatus*", "const OrtLogger* logger, int severity, const char* message, "
     "const char* file, int line, const char* func", "logger, severity, message, file, line, func"),
    (248, "Logger_GetLoggingSeverityLevel", "OrtStatus*", "const OrtLogger* logger, int* out", "logger, out"),
    (344, "Graph_GetNumNodes", "OrtStatus*", "const OrtGraph* g, size_t* n", "g, n"),
    (345, "Graph_GetNodes", "OrtStatus*", "const OrtGraph* g, const OrtNode** nodes, size_t n", "g, nodes, n"),
    (349, "Node_GetName", "OrtStatus*", "const OrtNode* node, const char** out", "node, out"),
    (350, "Node_GetOperatorType", "OrtStatus*", "const OrtNode* node, const char** out", "node, out"),
    (351, "Node_GetDomain", "OrtStatus*", "const OrtNode* node, const char** out", "node, out"),
    (352, "Node_GetSinceVersion", "OrtStatus*", "const OrtNode* node, int* out", "node, out"),
    (353, "Node_GetNumInputs", "OrtStatus*", "const OrtNode* node, size_t* out", "node, out"),
    (354, "Node_GetInputs", "OrtStatus*", "const OrtNode* node, const OrtValueInfo** out, size_t n", "node, out, n"),
    (355, "Node_GetNumOutputs", "OrtStatus*", "const OrtNode* node, size_t* out", "node, out"),
    (356, "Node_GetOutputs", "OrtStatus*", "const OrtNode* node, const OrtValueInfo** out, size_t n", "node, out, n"),
    (289, "GetValueInfoName", "OrtStatus*", "const OrtValueInfo* v, const char** out", "v, out"),
    (324, "ValueInfo_GetValueNumConsumers", "OrtStatus*", "const OrtValueInfo* v, size_t* out", "v, out"),
    (325, "ValueInfo_GetValueConsumers", "OrtStatus*",
     "const OrtValueInfo* v, const OrtNode** nodes, int64_t* input_indices, size_t n", "v, nodes, input_indices, n"),
    (330, "ValueInfo_IsGraphOutput", "OrtStatus*", "const OrtValueInfo* v, bool* out", "v, out"),
    (326, "ValueInfo_GetInitializerValue", "OrtStatus*", "const OrtValueInfo* v, const OrtValue** out", "v, out"),
    (331, "ValueInfo_IsConstantInitializer", "OrtStatus*", "const OrtValueInfo* v, bool* out", "v, out"),
    (323, "ValueInfo_GetValueProducer", "OrtStatus*", "const OrtValueInfo* v, const OrtNode** node, size_t* index",
     "v, node, index"),
    (340, "Graph_GetNumOutputs", "OrtStatus*", "const OrtGraph* g, size_t* n", "g, n"),
    (341, "Graph_GetOutputs", "OrtStatus*", "const OrtGraph* g, const OrtValueInfo** out, size_t n", "g, out, n"),
    (346, "Graph_GetParentNode", "OrtStatus*", "const OrtGraph* g, const OrtNode** out", "g, out"),
    (365, "Node_GetNumSubgraphs", "OrtStatus*", "const OrtNode* node, size_t* out", "node, out"),
    (366, "Node_GetSubgraphs", "OrtStatus*", "const OrtNode* node, const OrtGraph** out, size_t n, const char** names",
     "node, out, n, names"),
    (367, "Node_GetGraph", "OrtStatus*", "const OrtNode* node, const OrtGraph** out", "node, out"),
    (233, "KernelInfo_GetOutputName", "OrtStatus*", "const OrtKernelInfo* info, size_t i, char* out, size_t* size",
     "info, i, out, size"),
    (290, "GetValueInfoTypeInfo", "OrtStatus*", "const OrtValueInfo* v, const OrtTypeInfo** out", "v, out"),
    (361, "Node_GetAttributeByName", "OrtStatus*", "const OrtNode* node, const char* name, const OrtOpAttr** out",
     "node, name, out"),
    (272, "ReadOpAttr", "OrtStatus*", "const OrtOpAttr* attr, int type, void* data, size_t len, size_t* out",
     "attr, type, data, len, out"),
    (51, "GetTensorMutableData", "OrtStatus*", "OrtValue* v, void** out", "v, out"),
    (414, "GetTensorElementTypeAndShapeDataReference", "OrtStatus*",
     "const OrtValue* v, int* elem_type, const int64_t** shape, size_t* count", "v, elem_type, shape, count"),
    (96, "ReleaseValue", "void", "OrtValue* v", "v"),
    (236, "KernelInfoGetAttribute_tensor", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, OrtAllocator* allocator, OrtValue** out", "info, name, allocator, out"),
    (78, "GetAllocatorWithDefaultOptions", "OrtStatus*", "OrtAllocator** out", "out"),
    (49, "CreateTensorWithDataAsOrtValue", "OrtStatus*", "const OrtMemoryInfo* info, void* data, size_t len, "
     "const int64_t* shape, size_t rank, int type, OrtValue** out", "info, data, len, shape, rank, type, out"),
    (318, "GetTensorSizeInBytes", "OrtStatus*", "const OrtValue* v, size_t* out", "v, out"),
    (85, "KernelInfoGetAttribute_float", "OrtStatus*", "const OrtKernelInfo* info, const char* name, float* out",
     "info, name, out"),
    (86, "KernelInfoGetAttribute_int64", "OrtStatus*", "const OrtKernelInfo* info, const char* name, int64_t* out",
     "info, name, out"),
    (87, "KernelInfoGetAttribute_string", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, char* out, size_t* size", "info, name, out, size"),
    (162, "KernelInfoGetAttributeArray_float", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, float* out, size_t* size", "info, name, out, size"),
    (163, "KernelInfoGetAttributeArray_int64", "OrtStatus*",
     "const OrtKernelInfo* info, const char* name, int64_t* out, size_t* size", "info, name, out, size"),
    (230, "KernelInfo_GetInputCount", "OrtStatus*", "const OrtKernelInfo* info, size_t* out", "info, out"),
    (231, "KernelInfo_GetOutputCount", "OrtStatus*", "const OrtKernelInfo* info, size_t* out", "info, out"),
    (244, "KernelInfo_GetNodeName", "OrtStatus*", "const OrtKernelInfo* info, char* out, size_t* size",
     "info, out, size"),
    (394, "KernelInfo_GetOperatorSinceVersion", "OrtStatus*", "const OrtKernelInfo* info, int* out", "info, out"),
    (238, "GetSessionConfigEntry", "OrtStatus*",
     "const OrtSessionOptions* o, const char* key, char* out, size_t* size", "o, key, out, size"),
    (237, "HasSessionConfigEntry", "OrtStatus*", "const OrtSessionOptions* o, const char* key, int* out",
     "o, key, out"),
    (373, "GetRunConfigEntry", "const char*", "const OrtRunOptions* o, const char* key", "o, key"),
    # used only inside the C helpers below
    (88, "KernelContext_GetInputCount", "OrtStatus*", "const OrtKernelContext* c, size_t* out", "c, out"),
    (89, "KernelContext_GetOutputCount", "OrtStatus*", "const OrtKernelContext* c, size_t* out", "c, out"),
    (90, "KernelContext_GetInput", "OrtStatus*", "const OrtKernelContext* c, size_t i, const OrtValue** out",
     "c, i, out"),
    (91, "KernelContext_GetOutput", "OrtStatus*",
     "OrtKernelContext* c, size_t i, const int64_t* dims, size_t n, OrtValue** out", "c, i, dims, n, out"),
    (193, "KernelContext_GetGPUComputeStream", "OrtStatus*", "const OrtKernelContext* c, void** out", "c, out"),
    (65, "GetTensorTypeAndShape", "OrtStatus*", "const OrtValue* v, OrtTensorTypeAndShapeInfo** out", "v, out"),
    (390, "TensorTypeAndShape_HasShape", "bool", "const OrtTensorTypeAndShapeInfo* i", "i"),
    (60, "GetTensorElementType", "OrtStatus*", "const OrtTensorTypeAndShapeInfo* i, int* out", "i, out"),
    (61, "GetDimensionsCount", "OrtStatus*", "const OrtTensorTypeAndShapeInfo* i, size_t* out", "i, out"),
    (62, "GetDimensions", "OrtStatus*", "const OrtTensorTypeAndShapeInfo* i, int64_t* out, size_t n", "i, out, n"),
    (99, "ReleaseTensorTypeAndShapeInfo", "void", "OrtTensorTypeAndShapeInfo* i", "i"),
    (234, "KernelInfo_GetInputTypeInfo", "OrtStatus*", "const OrtKernelInfo* info, size_t i, OrtTypeInfo** out",
     "info, i, out"),
    (55, "CastTypeInfoToTensorInfo", "OrtStatus*", "const OrtTypeInfo* t, const OrtTensorTypeAndShapeInfo** out",
     "t, out"),
    (98, "ReleaseTypeInfo", "void", "OrtTypeInfo* t", "t"),
]

# (slot in OrtEpApi, wrapper name, return type, parameters, argument names)
EP_SLOTS = [
    (0, "CreateEpDevice", "OrtStatus*", "OrtEpFactory* f, const OrtHardwareDevice* hw, "
     "const OrtKeyValuePairs* metadata, const OrtKeyValuePairs* options, OrtEpDevice** out",
     "f, hw, metadata, options, out"),
    (2, "EpGraphSupportInfo_AddNodesToFuse", "OrtStatus*", "OrtEpGraphSupportInfo* info, const OrtNode* const* nodes, "
     "size_t n, const OrtNodeFusionOptions* options", "info, nodes, n, options"),
    (3, "EpGraphSupportInfo_AddSingleNode", "OrtStatus*", "OrtEpGraphSupportInfo* info, const OrtNode* node",
     "info, node"),
    (16, "CreateHardwareDevice", "OrtStatus*", "int type, uint32_t vendor_id, uint32_t device_id, "
     "const char* vendor_name, const OrtKeyValuePairs* metadata, OrtHardwareDevice** out",
     "type, vendor_id, device_id, vendor_name, metadata, out"),
    (17, "ReleaseHardwareDevice", "void", "OrtHardwareDevice* d", "d"),
    (5, "EpDevice_AddAllocatorInfo", "OrtStatus*", "OrtEpDevice* d, const OrtMemoryInfo* info", "d, info"),
    (6, "MemoryInfo_GetMemoryDevice", "const OrtMemoryDevice*", "const OrtMemoryInfo* info", "info"),
    (7, "Value_GetMemoryDevice", "const OrtMemoryDevice*", "const OrtValue* v", "v"),
    (9, "MemoryDevice_GetDeviceType", "int", "const OrtMemoryDevice* d", "d"),
    (10, "MemoryDevice_GetMemoryType", "int", "const OrtMemoryDevice* d", "d"),
    (11, "MemoryDevice_GetVendorId", "uint32_t", "const OrtMemoryDevice* d", "d"),
    (12, "MemoryDevice_GetDeviceId", "uint32_t", "const OrtMemoryDevice* d", "d"),
    (13, "SyncStream_GetImpl", "const OrtSyncStreamImpl*", "const OrtSyncStream* s", "s"),
    (18, "CreateKernelRegistry", "OrtStatus*", "OrtKernelRegistry** out", "out"),
    (19, "ReleaseKernelRegistry", "void", "OrtKernelRegistry* r", "r"),
    (21, "CreateKernelDefBuilder", "OrtStatus*", "OrtKernelDefBuilder** out", "out"),
    (22, "ReleaseKernelDefBuilder", "void", "OrtKernelDefBuilder* b", "b"),
    (23, "KernelDefBuilder_SetOperatorType", "OrtStatus*", "OrtKernelDefBuilder* b, const char* op", "b, op"),
    (24, "KernelDefBuilder_SetDomain", "OrtStatus*", "OrtKernelDefBuilder* b, const char* domain", "b, domain"),
    (25, "KernelDefBuilder_SetSinceVersion", "OrtStatus*", "OrtKernelDefBuilder* b, int start, int end",
     "b, start, end"),
    (26, "KernelDefBuilder_SetExecutionProvider", "OrtStatus*", "OrtKernelDefBuilder* b, const char* ep", "b, ep"),
    (27, "KernelDefBuilder_SetInputMemType", "OrtStatus*", "OrtKernelDefBuilder* b, size_t index, int mem_type",
     "b, index, mem_type"),
    (28, "KernelDefBuilder_SetOutputMemType", "OrtStatus*", "OrtKernelDefBuilder* b, size_t index, int mem_type",
     "b, index, mem_type"),
    (30, "KernelDefBuilder_AddInputOutputAliases", "OrtStatus*",
     "OrtKernelDefBuilder* b, const int* inputs, const int* outputs, size_t n", "b, inputs, outputs, n"),
    (32, "KernelDefBuilder_Build", "OrtStatus*", "OrtKernelDefBuilder* b, OrtKernelDef** out", "b, out"),
    (33, "ReleaseKernelDef", "void", "OrtKernelDef* d", "d"),
    (41, "EpGraphSupportInfo_LookUpKernel", "OrtStatus*",
     "OrtEpGraphSupportInfo* info, const OrtNode* node, const OrtKernelDef** out", "info, node, out"),
    (43, "KernelInfo_GetEp", "OrtStatus*", "const OrtKernelInfo* info, const OrtEp** out", "info, out"),
    (42, "SharedPrePackedWeightCache_StoreWeightData", "OrtStatus*",
     "OrtSharedPrePackedWeightCache* c, void** buffers, size_t* sizes, size_t n", "c, buffers, sizes, n"),
    (45, "CreateIfKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtKernelImpl** out", "info, out"),
    (46, "CreateLoopKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtLoopKernelHelper* helper, OrtKernelImpl** out",
     "info, helper, out"),
    (47, "CreateScanKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtScanKernelHelper* helper, OrtKernelImpl** out",
     "info, helper, out"),
    # ORT 1.25+ (called only from a profiler, which older ORTs never ask for: OrtEp::CreateProfiler)
    (65, "CreateProfilingEvent", "OrtStatus*", "int category, int32_t process_id, int32_t thread_id, "
     "const char* name, int64_t timestamp_us, int64_t duration_us, const char* const* keys, "
     "const char* const* values, size_t n, OrtProfilingEvent** out",
     "category, process_id, thread_id, name, timestamp_us, duration_us, keys, values, n, out"),
    (66, "ReleaseProfilingEvent", "void", "OrtProfilingEvent* e", "e"),
    (68, "ProfilingEvent_GetName", "OrtStatus*", "const OrtProfilingEvent* e, const char** out", "e, out"),
    (71, "ProfilingEvent_GetArgValue", "OrtStatus*", "const OrtProfilingEvent* e, const char* key, const char** out",
     "e, key, out"),
    (72, "ProfilingEventsContainer_AddEvents", "OrtStatus*",
     "OrtProfilingEventsContainer* c, const OrtProfilingEvent* const* events, size_t n", "c, events, n"),
    # used only inside the C helpers below
    (20, "KernelRegistry_AddKernel", "OrtStatus*",
     "OrtKernelRegistry* r, const OrtKernelDef* def, OrtKernelCreateFunc fn, void* state", "r, def, fn, state"),
    (29, "KernelDefBuilder_AddTypeConstraint", "OrtStatus*",
     "OrtKernelDefBuilder* b, const char* name, const OrtDataType* const* types, size_t n", "b, name, types, n"),
    (40, "GetTensorDataType", "OrtStatus*", "int elem_type, const OrtDataType** out", "elem_type, out"),
]


def _declarations(prefix: str, slots) -> str:
    """The cdef of each slot's wrapper (Python calls them through the module's lib)."""
    return "".join(f"{ret} {prefix}_{name}({params});\n" for _, name, ret, params, _ in slots)


def _wrappers(prefix: str, table: str, slots) -> str:
    out = []
    for slot, name, ret, params, args in slots:
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
    ffi.cdef((NATIVE / "ort_abi.h").read_text() + _declarations("ort", ORT_SLOTS) + _declarations("ep", EP_SLOTS)
             + "".join((NATIVE / name).read_text() for name in ("calls.h", "callbacks.h")))
    ffi.embedding_api(EMBEDDING_API)
    wrappers = _wrappers("ort", "g_api", ORT_SLOTS) + "\n" + _wrappers("ep", "g_ep_api", EP_SLOTS)
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
