"""ORT's ABI facts that are not C code, declared once: the slot of every function vkep calls in each of
ORT's function tables, ORT's element-type codes and its external-resource enums. The plugin build
(`_plugin_build.py`), the application-side binding (`vkep/interop.py`) and the tools read them here; the C
structs are in `native/ort_abi.h` (HEADER), which the plugin build and interop.py both declare to cffi.
tests/test_ort_abi.py checks every entry against ORT's official headers.

A slot is the function's index in its table (a struct of function pointers that only grows at its end), so
it holds for every later ORT API version. This module imports nothing: interop.py and the build read it
without loading the plugin.
"""

from __future__ import annotations

from pathlib import Path

# The ORT API version vkep's structs implement and whose functions it calls (ORT 1.N serves API N).
ORT_API_VERSION = 24

HEADER = Path(__file__).resolve().parent / "native" / "ort_abi.h"

# OrtApi (struct OrtApi in onnxruntime_c_api.h)
ORT_API: dict[str, int] = {
    "CreateStatus": 0, "GetErrorCode": 1, "GetErrorMessage": 2, "CreateEnv": 3, "CreateSessionFromArray": 8, "Run": 9,
    "CreateSessionOptions": 10, "CreateTensorWithDataAsOrtValue": 49, "GetTensorMutableData": 51,
    "CastTypeInfoToTensorInfo": 55, "GetTensorElementType": 60, "GetDimensionsCount": 61, "GetDimensions": 62,
    "GetSymbolicDimensions": 63, "GetTensorTypeAndShape": 65, "CreateCpuMemoryInfo": 69,
    "GetAllocatorWithDefaultOptions": 78,
    "KernelInfoGetAttribute_float": 85, "KernelInfoGetAttribute_int64": 86, "KernelInfoGetAttribute_string": 87,
    "KernelContext_GetInputCount": 88, "KernelContext_GetOutputCount": 89, "KernelContext_GetInput": 90,
    "KernelContext_GetOutput": 91, "ReleaseEnv": 92, "ReleaseStatus": 93, "ReleaseMemoryInfo": 94,
    "ReleaseSession": 95, "ReleaseValue": 96, "ReleaseTypeInfo": 98, "ReleaseTensorTypeAndShapeInfo": 99,
    "ReleaseSessionOptions": 100, "AddSessionConfigEntry": 130, "KernelInfoGetAttributeArray_float": 162,
    "KernelInfoGetAttributeArray_int64": 163, "CreatePrepackedWeightsContainer": 166,
    "ReleasePrepackedWeightsContainer": 167, "CreateSessionFromArrayWithPrepackedWeightsContainer": 169,
    "KernelContext_GetGPUComputeStream": 193, "KernelInfo_GetInputCount": 230, "KernelInfo_GetOutputCount": 231,
    "KernelInfo_GetInputName": 232, "KernelInfo_GetOutputName": 233, "KernelInfo_GetInputTypeInfo": 234, "KernelInfoGetAttribute_tensor": 236,
    "HasSessionConfigEntry": 237, "GetSessionConfigEntry": 238, "KernelInfo_GetNodeName": 244,
    "Logger_LogMessage": 247, "Logger_GetLoggingSeverityLevel": 248, "ReadOpAttr": 272, "GetValueInfoName": 289,
    "GetValueInfoTypeInfo": 290, "CreateKeyValuePairs": 295, "AddKeyValuePair": 296, "GetKeyValue": 297,
    "GetKeyValuePairs": 298, "ReleaseKeyValuePairs": 300, "RegisterExecutionProviderLibrary": 301,
    "GetEpDevices": 303, "SessionOptionsAppendExecutionProvider_V2": 304, "HardwareDevice_Type": 307,
    "HardwareDevice_VendorId": 308, "HardwareDevice_Vendor": 309, "HardwareDevice_DeviceId": 310,
    "HardwareDevice_Metadata": 311, "EpDevice_EpName": 312, "GetTensorSizeInBytes": 318, "CreateMemoryInfo_V2": 320,
    "ValueInfo_GetValueProducer": 323, "ValueInfo_GetValueNumConsumers": 324, "ValueInfo_GetValueConsumers": 325,
    "ValueInfo_GetInitializerValue": 326, "ValueInfo_IsGraphOutput": 330, "ValueInfo_IsConstantInitializer": 331,
    "Graph_GetNumOutputs": 340, "Graph_GetOutputs": 341, "Graph_GetNumNodes": 344, "Graph_GetNodes": 345,
    "Graph_GetParentNode": 346, "Node_GetName": 349, "Node_GetOperatorType": 350, "Node_GetDomain": 351,
    "Node_GetSinceVersion": 352, "Node_GetNumInputs": 353, "Node_GetInputs": 354, "Node_GetNumOutputs": 355,
    "Node_GetOutputs": 356, "Node_GetAttributeByName": 361, "OpAttr_GetTensorAttributeAsOrtValue": 362, "Node_GetNumSubgraphs": 365, "Node_GetSubgraphs": 366,
    "Node_GetGraph": 367, "GetRunConfigEntry": 373, "GetSessionOptionsConfigEntries": 379,
    "TensorTypeAndShape_HasShape": 390, "KernelInfo_GetOperatorSinceVersion": 394, "GetInteropApi": 395,
    "GetTensorElementTypeAndShapeDataReference": 414,
}
# OrtEpApi (struct OrtEpApi in onnxruntime_ep_c_api.h)
EP_API: dict[str, int] = {
    "CreateEpDevice": 0, "EpGraphSupportInfo_AddNodesToFuse": 2, "EpGraphSupportInfo_AddSingleNode": 3,
    "EpDevice_AddAllocatorInfo": 5, "MemoryInfo_GetMemoryDevice": 6, "Value_GetMemoryDevice": 7,
    "MemoryDevice_GetDeviceType": 9, "MemoryDevice_GetMemoryType": 10, "MemoryDevice_GetVendorId": 11,
    "MemoryDevice_GetDeviceId": 12, "SyncStream_GetImpl": 13, "CreateHardwareDevice": 16, "ReleaseHardwareDevice": 17,
    "CreateKernelRegistry": 18, "ReleaseKernelRegistry": 19, "KernelRegistry_AddKernel": 20,
    "CreateKernelDefBuilder": 21, "ReleaseKernelDefBuilder": 22, "KernelDefBuilder_SetOperatorType": 23,
    "KernelDefBuilder_SetDomain": 24, "KernelDefBuilder_SetSinceVersion": 25,
    "KernelDefBuilder_SetExecutionProvider": 26, "KernelDefBuilder_SetInputMemType": 27,
    "KernelDefBuilder_SetOutputMemType": 28, "KernelDefBuilder_AddTypeConstraint": 29,
    "KernelDefBuilder_AddInputOutputAliases": 30, "KernelDefBuilder_Build": 32, "ReleaseKernelDef": 33,
    "GetTensorDataType": 40, "EpGraphSupportInfo_LookUpKernel": 41, "SharedPrePackedWeightCache_StoreWeightData": 42,
    "KernelInfo_GetEp": 43, "CreateIfKernel": 45, "CreateLoopKernel": 46, "CreateScanKernel": 47,
    "CreateProfilingEvent": 65, "ReleaseProfilingEvent": 66, "ProfilingEvent_GetName": 68,
    "ProfilingEvent_GetArgValue": 71, "ProfilingEventsContainer_AddEvents": 72,
}
# OrtInteropApi (struct OrtInteropApi in onnxruntime_c_api.h; OrtApi's GetInteropApi returns it)
INTEROP_API: dict[str, int] = {
    "CreateExternalResourceImporterForDevice": 0, "ReleaseExternalResourceImporter": 1, "CanImportMemory": 2,
    "ImportMemory": 3, "ReleaseExternalMemoryHandle": 4, "CreateTensorFromMemory": 5, "CanImportSemaphore": 6,
    "ImportSemaphore": 7, "ReleaseExternalSemaphoreHandle": 8,
}

# ONNXTensorElementDataType (ONNX's TensorProto.DataType numbers) -> vkep's (numpy-style) dtype names
ELEMENT_TYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
    11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16", 21: "uint4", 22: "int4",
}
ELEMENT_CODES: dict[str, int] = {name: code for code, name in ELEMENT_TYPES.items()}

# OrtExternalMemoryHandleType and OrtExternalSemaphoreType: ORT's enumerator names (lower case, without the
# ORT_EXTERNAL_MEMORY_HANDLE_TYPE_ / ORT_EXTERNAL_SEMAPHORE_ prefix) -> code
MEMORY_HANDLE_TYPES: dict[str, int] = {"d3d12_resource": 0, "d3d12_heap": 1, "vk_memory_win32": 2,
                                       "vk_memory_opaque_fd": 3}
SEMAPHORE_TYPES: dict[str, int] = {"d3d12_fence": 0, "vk_timeline_semaphore_win32": 1,
                                   "vk_timeline_semaphore_opaque_fd": 2}
# vkep's handle kinds (vkep/gpu/external.py) for ORT's Vulkan ones; the D3D12 kinds keep ORT's names
VULKAN_KINDS = {"vk_memory_win32": "opaque_win32", "vk_memory_opaque_fd": "opaque_fd",
                "vk_timeline_semaphore_win32": "opaque_win32", "vk_timeline_semaphore_opaque_fd": "opaque_fd"}
