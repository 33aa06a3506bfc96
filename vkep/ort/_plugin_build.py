"""The plugin library ORT loads: a cffi *embedding* module whose callbacks are Python.

vkep writes its own declarations of the parts of ORT's C ABI it uses (ORT ships no headers in its
wheel). The C here is only what must be C: the exported entry points with their start-up guard, the
ORT function-table slots vkep calls, and the per-node Compute trampoline that gathers input
addresses and shapes so Python is entered once per node.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import cffi

# Lowest ORT API version whose members vkep's structs implement / whose functions it calls.
ORT_API_VERSION = 24

TYPES = r"""
typedef struct OrtStatus OrtStatus;
typedef struct OrtApi OrtApi;
typedef struct OrtEpApi OrtEpApi;
typedef struct OrtLogger OrtLogger;
typedef struct OrtHardwareDevice OrtHardwareDevice;
typedef struct OrtEpDevice OrtEpDevice;
typedef struct OrtKeyValuePairs OrtKeyValuePairs;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtMemoryDevice OrtMemoryDevice;
typedef struct OrtGraph OrtGraph;
typedef struct OrtNode OrtNode;
typedef struct OrtEpGraphSupportInfo OrtEpGraphSupportInfo;
typedef struct OrtKernelRegistry OrtKernelRegistry;
typedef struct OrtKernelDefBuilder OrtKernelDefBuilder;
typedef struct OrtKernelDef OrtKernelDef;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtKernelContext OrtKernelContext;
typedef struct OrtDataType OrtDataType;
typedef struct OrtValue OrtValue;
typedef struct OrtTypeInfo OrtTypeInfo;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtSyncStream OrtSyncStream;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtSharedPrePackedWeightCache OrtSharedPrePackedWeightCache;

typedef struct OrtApiBase {
    const OrtApi* (*GetApi)(uint32_t version);
    const char* (*GetVersionString)(void);
} OrtApiBase;

typedef struct OrtAllocator {
    uint32_t version;
    void* (*Alloc)(struct OrtAllocator* self, size_t size);
    void (*Free)(struct OrtAllocator* self, void* p);
    const OrtMemoryInfo* (*Info)(const struct OrtAllocator* self);
    void* (*Reserve)(struct OrtAllocator* self, size_t size);
} OrtAllocator;

typedef struct OrtSyncNotificationImpl {
    uint32_t ort_version_supported;
    void (*Release)(struct OrtSyncNotificationImpl* self);
    OrtStatus* (*Activate)(struct OrtSyncNotificationImpl* self);
    OrtStatus* (*WaitOnDevice)(struct OrtSyncNotificationImpl* self, OrtSyncStream* consumer);
    OrtStatus* (*WaitOnHost)(struct OrtSyncNotificationImpl* self);
} OrtSyncNotificationImpl;

typedef struct OrtSyncStreamImpl {
    uint32_t ort_version_supported;
    void (*Release)(struct OrtSyncStreamImpl* self);
    void* (*GetHandle)(struct OrtSyncStreamImpl* self);
    OrtStatus* (*CreateNotification)(struct OrtSyncStreamImpl* self, OrtSyncNotificationImpl** out);
    OrtStatus* (*Flush)(struct OrtSyncStreamImpl* self);
    OrtStatus* (*OnSessionRunEnd)(struct OrtSyncStreamImpl* self);
} OrtSyncStreamImpl;

typedef struct OrtDataTransferImpl {
    uint32_t ort_version_supported;
    void (*Release)(struct OrtDataTransferImpl* self);
    bool (*CanCopy)(const struct OrtDataTransferImpl* self, const OrtMemoryDevice* src, const OrtMemoryDevice* dst);
    OrtStatus* (*CopyTensors)(struct OrtDataTransferImpl* self, const OrtValue** src, OrtValue** dst,
                              OrtSyncStream** streams, size_t n);
} OrtDataTransferImpl;

typedef struct OrtKernelImpl {
    uint32_t ort_version_supported;
    uint32_t flags;
    OrtStatus* (*Compute)(struct OrtKernelImpl* self, OrtKernelContext* context);
    void (*Release)(struct OrtKernelImpl* self);
    OrtStatus* (*PrePackWeight)(struct OrtKernelImpl* self, const OrtValue* tensor, int input_index,
                                OrtAllocator* allocator, OrtSharedPrePackedWeightCache* cache, bool* is_packed);
    OrtStatus* (*SetSharedPrePackedWeight)(struct OrtKernelImpl* self, const void* const* data, const size_t* sizes,
                                           size_t n, int input_index);
} OrtKernelImpl;

typedef struct OrtLoopKernelHelper {
    uint32_t ort_version_supported;
    void (*Release)(struct OrtLoopKernelHelper* self);
    OrtStatus* (*ConcatOutput)(struct OrtLoopKernelHelper* self, void* stream_handle,
                               const OrtValue* const* per_iteration_outputs, size_t n, void* output,
                               size_t output_size_in_bytes);
} OrtLoopKernelHelper;

typedef struct OrtScanKernelHelper {
    uint32_t ort_version_supported;
    void (*Release)(struct OrtScanKernelHelper* self);
    OrtStatus* (*Transpose)(struct OrtScanKernelHelper* self, const size_t* permutation, size_t n,
                            const OrtValue* input, OrtSyncStream* stream, OrtValue* output);
} OrtScanKernelHelper;

typedef OrtStatus* (*OrtKernelCreateFunc)(void* state, const OrtKernelInfo* info, OrtKernelImpl** out);

typedef struct OrtEp {
    uint32_t ort_version_supported;
    const char* (*GetName)(const struct OrtEp* self);
    OrtStatus* (*GetCapability)(struct OrtEp* self, const OrtGraph* graph, OrtEpGraphSupportInfo* info);
    void* Compile;
    void* ReleaseNodeComputeInfos;
    void* GetPreferredDataLayout;
    void* ShouldConvertDataLayoutForOp;
    void* SetDynamicOptions;
    void* OnRunStart;
    void* OnRunEnd;
    void* CreateAllocator;
    void* CreateSyncStreamForDevice;
    void* GetCompiledModelCompatibilityInfo;
    OrtStatus* (*GetKernelRegistry)(struct OrtEp* self, const OrtKernelRegistry** out);
    OrtStatus* (*IsConcurrentRunSupported)(struct OrtEp* self, bool* out);
    void* Sync;
    void* CreateProfiler;
    void* IsGraphCaptureEnabled;
    void* IsGraphCaptured;
    void* ReplayGraph;
    void* GetGraphCaptureNodeAssignmentPolicy;
    void* GetAvailableResource;
    void* OnSessionInitializationEnd;
    OrtStatus* (*GetDefaultMemoryDevice)(const struct OrtEp* self, const OrtMemoryDevice** device);
    void* ReleaseCapturedGraph;
} OrtEp;

typedef struct OrtEpFactory {
    uint32_t ort_version_supported;
    const char* (*GetName)(const struct OrtEpFactory* self);
    const char* (*GetVendor)(const struct OrtEpFactory* self);
    OrtStatus* (*GetSupportedDevices)(struct OrtEpFactory* self, const OrtHardwareDevice* const* devices,
                                      size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                      size_t* num_ep_devices);
    OrtStatus* (*CreateEp)(struct OrtEpFactory* self, const OrtHardwareDevice* const* devices,
                           const OrtKeyValuePairs* const* ep_metadata, size_t num_devices,
                           const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** ep);
    void (*ReleaseEp)(struct OrtEpFactory* self, OrtEp* ep);
    uint32_t (*GetVendorId)(const struct OrtEpFactory* self);
    const char* (*GetVersion)(const struct OrtEpFactory* self);
    void* ValidateCompiledModelCompatibilityInfo;
    OrtStatus* (*CreateAllocator)(struct OrtEpFactory* self, const OrtMemoryInfo* info,
                                  const OrtKeyValuePairs* options, OrtAllocator** out);
    void (*ReleaseAllocator)(struct OrtEpFactory* self, OrtAllocator* allocator);
    OrtStatus* (*CreateDataTransfer)(struct OrtEpFactory* self, OrtDataTransferImpl** out);
    bool (*IsStreamAware)(const struct OrtEpFactory* self);
    OrtStatus* (*CreateSyncStreamForDevice)(struct OrtEpFactory* self, const OrtMemoryDevice* device,
                                            const OrtKeyValuePairs* options, OrtSyncStreamImpl** out);
    void* GetHardwareDeviceIncompatibilityDetails;
    void* CreateExternalResourceImporterForDevice;
    void* GetNumCustomOpDomains;
    void* GetCustomOpDomains;
} OrtEpFactory;

/* vkep's wrappers: ORT structs followed by the id Python knows them by */
typedef struct vkep_loop_helper { OrtLoopKernelHelper base; int64_t device; } vkep_loop_helper;
typedef struct vkep_scan_helper { OrtScanKernelHelper base; int64_t device; } vkep_scan_helper;
#define VKEP_MAX_IO 16
#define VKEP_MAX_RANK 8
/* what the Compute trampoline gathers for Python: one entry per input */
typedef struct vkep_io {
    int32_t n_inputs, n_outputs;
    int32_t types[VKEP_MAX_IO];   /* ONNX element type; 0 = absent optional input */
    int32_t ranks[VKEP_MAX_IO];
    uint64_t ptrs[VKEP_MAX_IO];
    int64_t dims[VKEP_MAX_IO * VKEP_MAX_RANK];
    void* stream;                 /* our stream impl handle, or NULL */
} vkep_io;

typedef struct vkep_alloc_cache vkep_alloc_cache;
#define VKEP_PLAN_OPS 4
#define VKEP_PLAN_SLOTS 8
#define VKEP_PLAN_OUTPUTS 4
#define VKEP_IO_CONST 1000
/* One recorded dispatch of a plan: push constants start with n_addr 64-bit addresses, each an io tensor's
 * address (code i >= 0: input i, -1-j: output j, VKEP_IO_CONST: the absolute address in addr_offset)
 * plus an offset; spans (reads, then writes) are addressed the same way. */
typedef struct vkep_plan_op {
    uint64_t pipeline;
    uint32_t push_size, n_addr, n_reads, n_writes;
    uint32_t groups[3];
    int32_t addr_io[VKEP_PLAN_SLOTS];
    uint64_t addr_offset[VKEP_PLAN_SLOTS];
    int32_t span_io[VKEP_PLAN_SLOTS];
    uint64_t span_offset[VKEP_PLAN_SLOTS];
    uint64_t span_len[VKEP_PLAN_SLOTS];
    uint8_t push[128];
} vkep_plan_op;
/* What a node did for one input signature, replayed in C while the signature holds. */
typedef struct vkep_plan {
    int32_t valid, n_inputs, n_outputs, n_ops, n_alias;
    int32_t types[VKEP_MAX_IO];
    int32_t ranks[VKEP_MAX_IO];
    int64_t dims[VKEP_MAX_IO * VKEP_MAX_RANK];
    int32_t out_rank[VKEP_PLAN_OUTPUTS];
    int64_t out_dims[VKEP_PLAN_OUTPUTS * VKEP_MAX_RANK];
    int32_t alias_out[VKEP_PLAN_OUTPUTS];
    int32_t alias_in[VKEP_PLAN_OUTPUTS];
    uint64_t out_bytes[VKEP_PLAN_OUTPUTS];
    vkep_alloc_cache* out_cache;   /* the allocator ORT gives this node's outputs from */
    vkep_plan_op ops[VKEP_PLAN_OPS];
} vkep_plan;
typedef struct vkep_kernel {
    OrtKernelImpl base; int64_t id; uint32_t plan_seq; uint32_t packed_mask; vkep_plan plan;
} vkep_kernel;
typedef struct vkep_allocator { OrtAllocator base; int64_t id; const OrtMemoryInfo* info; vkep_alloc_cache* cache; }
    vkep_allocator;
/* factory and EP with their strings: the getters ORT calls (also during teardown) are plain C */
typedef struct vkep_factory { OrtEpFactory base; const char* name; const char* vendor; const char* version; }
    vkep_factory;
typedef struct vkep_ep { OrtEp base; const char* name; } vkep_ep;
typedef struct vkep_stream { OrtSyncStreamImpl base; int64_t id; void* recorder; } vkep_stream;
typedef struct vkep_notification { OrtSyncNotificationImpl base; int64_t id; } vkep_notification;

"""

CALLS = r"""
/* OrtApi */
OrtStatus* ort_CreateStatus(int code, const char* msg);
int ort_GetErrorCode(const OrtStatus* s);
const char* ort_GetErrorMessage(const OrtStatus* s);
void ort_ReleaseStatus(OrtStatus* s);
OrtStatus* ort_CreateMemoryInfo_V2(const char* name, int device_type, uint32_t vendor_id, int32_t device_id,
                                   int mem_type, size_t alignment, int allocator_type, OrtMemoryInfo** out);
void ort_ReleaseMemoryInfo(OrtMemoryInfo* info);
void ort_CreateKeyValuePairs(OrtKeyValuePairs** out);
void ort_AddKeyValuePair(OrtKeyValuePairs* kvp, const char* key, const char* value);
const char* ort_GetKeyValue(const OrtKeyValuePairs* kvp, const char* key);
void ort_ReleaseKeyValuePairs(OrtKeyValuePairs* kvp);
int ort_HardwareDevice_Type(const OrtHardwareDevice* d);
uint32_t ort_HardwareDevice_VendorId(const OrtHardwareDevice* d);
uint32_t ort_HardwareDevice_DeviceId(const OrtHardwareDevice* d);
const char* ort_HardwareDevice_Vendor(const OrtHardwareDevice* d);
OrtStatus* ort_Graph_GetNumNodes(const OrtGraph* g, size_t* n);
OrtStatus* ort_Graph_GetNodes(const OrtGraph* g, const OrtNode** nodes, size_t n);
OrtStatus* ort_Node_GetOperatorType(const OrtNode* node, const char** out);
OrtStatus* ort_GetTensorMutableData(OrtValue* v, void** out);
OrtStatus* ort_GetTensorSizeInBytes(const OrtValue* v, size_t* out);
OrtStatus* ort_KernelInfoGetAttribute_float(const OrtKernelInfo* info, const char* name, float* out);
OrtStatus* ort_KernelInfoGetAttribute_int64(const OrtKernelInfo* info, const char* name, int64_t* out);
OrtStatus* ort_KernelInfoGetAttribute_string(const OrtKernelInfo* info, const char* name, char* out, size_t* size);
OrtStatus* ort_KernelInfoGetAttributeArray_float(const OrtKernelInfo* info, const char* name, float* out,
                                                 size_t* size);
OrtStatus* ort_KernelInfoGetAttributeArray_int64(const OrtKernelInfo* info, const char* name, int64_t* out,
                                                 size_t* size);
OrtStatus* ort_KernelInfo_GetInputCount(const OrtKernelInfo* info, size_t* out);
OrtStatus* ort_KernelInfo_GetOutputCount(const OrtKernelInfo* info, size_t* out);
OrtStatus* ort_KernelInfo_GetNodeName(const OrtKernelInfo* info, char* out, size_t* size);
OrtStatus* ort_KernelInfo_GetOperatorSinceVersion(const OrtKernelInfo* info, int* out);
int ort_KernelInfo_InputElementType(const OrtKernelInfo* info, size_t index);
OrtStatus* ort_GetSessionConfigEntry(const OrtSessionOptions* o, const char* key, char* out, size_t* size);
OrtStatus* ort_HasSessionConfigEntry(const OrtSessionOptions* o, const char* key, int* out);
/* OrtEpApi */
OrtStatus* ep_CreateEpDevice(OrtEpFactory* f, const OrtHardwareDevice* hw, const OrtKeyValuePairs* metadata,
                             const OrtKeyValuePairs* options, OrtEpDevice** out);
OrtStatus* ep_EpGraphSupportInfo_AddSingleNode(OrtEpGraphSupportInfo* info, const OrtNode* node);
OrtStatus* ep_EpDevice_AddAllocatorInfo(OrtEpDevice* d, const OrtMemoryInfo* info);
const OrtMemoryDevice* ep_MemoryInfo_GetMemoryDevice(const OrtMemoryInfo* info);
const OrtMemoryDevice* ep_Value_GetMemoryDevice(const OrtValue* v);
int ep_MemoryDevice_GetDeviceType(const OrtMemoryDevice* d);
int ep_MemoryDevice_GetMemoryType(const OrtMemoryDevice* d);
uint32_t ep_MemoryDevice_GetVendorId(const OrtMemoryDevice* d);
uint32_t ep_MemoryDevice_GetDeviceId(const OrtMemoryDevice* d);
const OrtSyncStreamImpl* ep_SyncStream_GetImpl(const OrtSyncStream* s);
OrtStatus* ep_CreateIfKernel(const OrtKernelInfo* info, OrtKernelImpl** out);
OrtStatus* ep_CreateLoopKernel(const OrtKernelInfo* info, OrtLoopKernelHelper* helper, OrtKernelImpl** out);
OrtStatus* ep_CreateScanKernel(const OrtKernelInfo* info, OrtScanKernelHelper* helper, OrtKernelImpl** out);
OrtStatus* ep_CreateKernelRegistry(OrtKernelRegistry** out);
OrtStatus* ep_KernelRegistry_AddKernel_py(OrtKernelRegistry* r, const OrtKernelDef* def, void* state);
void ep_ReleaseKernelRegistry(OrtKernelRegistry* r);
OrtStatus* ep_CreateKernelDefBuilder(OrtKernelDefBuilder** out);
void ep_ReleaseKernelDefBuilder(OrtKernelDefBuilder* b);
OrtStatus* ep_KernelDefBuilder_SetOperatorType(OrtKernelDefBuilder* b, const char* op);
OrtStatus* ep_KernelDefBuilder_SetDomain(OrtKernelDefBuilder* b, const char* domain);
OrtStatus* ep_KernelDefBuilder_SetSinceVersion(OrtKernelDefBuilder* b, int start, int end);
OrtStatus* ep_KernelDefBuilder_SetExecutionProvider(OrtKernelDefBuilder* b, const char* ep);
OrtStatus* ep_KernelDefBuilder_SetInputMemType(OrtKernelDefBuilder* b, size_t index, int mem_type);
OrtStatus* ep_KernelDefBuilder_SetOutputMemType(OrtKernelDefBuilder* b, size_t index, int mem_type);
OrtStatus* ep_KernelDefBuilder_AddTypeConstraint_types(OrtKernelDefBuilder* b, const char* name,
                                                       const int* elem_types, size_t n);
OrtStatus* ep_KernelDefBuilder_AddInputOutputAliases(OrtKernelDefBuilder* b, const int* inputs, const int* outputs,
                                                     size_t n);
OrtStatus* ep_KernelDefBuilder_Build(OrtKernelDefBuilder* b, OrtKernelDef** out);
void ep_ReleaseKernelDef(OrtKernelDef* d);
OrtStatus* ep_EpGraphSupportInfo_LookUpKernel(OrtEpGraphSupportInfo* info, const OrtNode* node,
                                              const OrtKernelDef** out);

/* vkep helpers */
OrtStatus* vkep_output(OrtKernelContext* ctx, size_t index, const char* dims, size_t rank, uint64_t* ptr);
OrtStatus* vkep_tensor_info(const OrtValue* v, int* type, int64_t* dims, int* rank, uint64_t* ptr);
extern void* vkep_compute_fn;
extern void* vkep_alloc_info_fn;
extern void* vkep_alloc_fn;
extern void* vkep_free_fn;
vkep_alloc_cache* vkep_alloc_cache_new(void);
void vkep_alloc_cache_delete(vkep_alloc_cache* c);
size_t vkep_alloc_cache_drain(vkep_alloc_cache* c, uint64_t* ptrs, uint64_t* sizes, size_t max);
void vkep_alloc_cache_stats(vkep_alloc_cache* c, uint64_t* out);
size_t vkep_alloc_cache_count(vkep_alloc_cache* c, uint64_t size);
void vkep_alloc_cache_put(vkep_alloc_cache* c, uint64_t ptr, uint64_t size);
int vkep_alloc_cache_owns(vkep_alloc_cache* c, uint64_t ptr);
extern void* vkep_factory_name_fn;
extern void* vkep_factory_vendor_fn;
extern void* vkep_factory_version_fn;
extern void* vkep_ep_name_fn;
extern int vkep_py_ready;
int vkep_api_version(void);
void vkep_set_gpu_fns(uint64_t ready, uint64_t dispatch, uint64_t translate, uint64_t lock, uint64_t unlock);
uint64_t vkep_fast_path_hits(void);
void* calloc(size_t n, size_t size);
void free(void* p);
const char* vkep_ort_version(void);
"""

PY_CALLBACKS = r"""
extern "Python" uint32_t py_factory_get_vendor_id(const OrtEpFactory*);
extern "Python" OrtStatus* py_factory_get_supported_devices(OrtEpFactory*, const OrtHardwareDevice* const*, size_t,
                                                            OrtEpDevice**, size_t, size_t*);
extern "Python" OrtStatus* py_factory_create_ep(OrtEpFactory*, const OrtHardwareDevice* const*,
                                                const OrtKeyValuePairs* const*, size_t, const OrtSessionOptions*,
                                                const OrtLogger*, OrtEp**);
extern "Python" void py_factory_release_ep(OrtEpFactory*, OrtEp*);
extern "Python" OrtStatus* py_factory_create_allocator(OrtEpFactory*, const OrtMemoryInfo*, const OrtKeyValuePairs*,
                                                       OrtAllocator**);
extern "Python" void py_factory_release_allocator(OrtEpFactory*, OrtAllocator*);
extern "Python" OrtStatus* py_factory_create_data_transfer(OrtEpFactory*, OrtDataTransferImpl**);
extern "Python" bool py_factory_is_stream_aware(const OrtEpFactory*);
extern "Python" OrtStatus* py_factory_create_stream(OrtEpFactory*, const OrtMemoryDevice*, const OrtKeyValuePairs*,
                                                    OrtSyncStreamImpl**);

extern "Python" OrtStatus* py_ep_get_capability(OrtEp*, const OrtGraph*, OrtEpGraphSupportInfo*);
extern "Python" OrtStatus* py_ep_get_kernel_registry(OrtEp*, const OrtKernelRegistry**);
extern "Python" OrtStatus* py_ep_is_concurrent_run_supported(OrtEp*, bool*);
extern "Python" OrtStatus* py_ep_get_default_memory_device(const OrtEp*, const OrtMemoryDevice**);

extern "Python+C" OrtStatus* py_kernel_create(void*, const OrtKernelInfo*, OrtKernelImpl**);
extern "Python+C" OrtStatus* py_kernel_compute(int64_t, OrtKernelContext*, vkep_io*);
extern "Python" void py_kernel_release(OrtKernelImpl*);
extern "Python" OrtStatus* py_kernel_prepack(OrtKernelImpl*, const OrtValue*, int, OrtAllocator*,
                                             OrtSharedPrePackedWeightCache*, bool*);
extern "Python" OrtStatus* py_kernel_set_shared(OrtKernelImpl*, const void* const*, const size_t*, size_t, int);

extern "Python" void py_loop_helper_release(OrtLoopKernelHelper*);
extern "Python" OrtStatus* py_loop_concat(OrtLoopKernelHelper*, void*, const OrtValue* const*, size_t, void*, size_t);
extern "Python" void py_scan_helper_release(OrtScanKernelHelper*);
extern "Python" OrtStatus* py_scan_transpose(OrtScanKernelHelper*, const size_t*, size_t, const OrtValue*,
                                             OrtSyncStream*, OrtValue*);
extern "Python+C" void* py_alloc(OrtAllocator*, size_t);

extern "Python" void py_transfer_release(OrtDataTransferImpl*);
extern "Python" bool py_transfer_can_copy(const OrtDataTransferImpl*, const OrtMemoryDevice*, const OrtMemoryDevice*);
extern "Python" OrtStatus* py_transfer_copy(OrtDataTransferImpl*, const OrtValue**, OrtValue**, OrtSyncStream**,
                                            size_t);

extern "Python" void py_stream_release(OrtSyncStreamImpl*);
extern "Python" void* py_stream_get_handle(OrtSyncStreamImpl*);
extern "Python" OrtStatus* py_stream_create_notification(OrtSyncStreamImpl*, OrtSyncNotificationImpl**);
extern "Python" OrtStatus* py_stream_flush(OrtSyncStreamImpl*);
extern "Python" OrtStatus* py_stream_on_run_end(OrtSyncStreamImpl*);
extern "Python" void py_notification_release(OrtSyncNotificationImpl*);
extern "Python" OrtStatus* py_notification_activate(OrtSyncNotificationImpl*);
extern "Python" OrtStatus* py_notification_wait_on_device(OrtSyncNotificationImpl*, OrtSyncStream*);
extern "Python" OrtStatus* py_notification_wait_on_host(OrtSyncNotificationImpl*);
"""

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
    (344, "Graph_GetNumNodes", "OrtStatus*", "const OrtGraph* g, size_t* n", "g, n"),
    (345, "Graph_GetNodes", "OrtStatus*", "const OrtGraph* g, const OrtNode** nodes, size_t n", "g, nodes, n"),
    (350, "Node_GetOperatorType", "OrtStatus*", "const OrtNode* node, const char** out", "node, out"),
    (51, "GetTensorMutableData", "OrtStatus*", "OrtValue* v, void** out", "v, out"),
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
    # used only inside the C helpers below
    (88, "KernelContext_GetInputCount", "OrtStatus*", "const OrtKernelContext* c, size_t* out", "c, out"),
    (89, "KernelContext_GetOutputCount", "OrtStatus*", "const OrtKernelContext* c, size_t* out", "c, out"),
    (90, "KernelContext_GetInput", "OrtStatus*", "const OrtKernelContext* c, size_t i, const OrtValue** out",
     "c, i, out"),
    (91, "KernelContext_GetOutput", "OrtStatus*",
     "OrtKernelContext* c, size_t i, const int64_t* dims, size_t n, OrtValue** out", "c, i, dims, n, out"),
    (193, "KernelContext_GetGPUComputeStream", "OrtStatus*", "const OrtKernelContext* c, void** out", "c, out"),
    (65, "GetTensorTypeAndShape", "OrtStatus*", "const OrtValue* v, OrtTensorTypeAndShapeInfo** out", "v, out"),
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
    (3, "EpGraphSupportInfo_AddSingleNode", "OrtStatus*", "OrtEpGraphSupportInfo* info, const OrtNode* node",
     "info, node"),
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
    (45, "CreateIfKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtKernelImpl** out", "info, out"),
    (46, "CreateLoopKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtLoopKernelHelper* helper, OrtKernelImpl** out",
     "info, helper, out"),
    (47, "CreateScanKernel", "OrtStatus*", "const OrtKernelInfo* info, OrtScanKernelHelper* helper, OrtKernelImpl** out",
     "info, helper, out"),
    # used only inside the C helpers below
    (20, "KernelRegistry_AddKernel", "OrtStatus*",
     "OrtKernelRegistry* r, const OrtKernelDef* def, OrtKernelCreateFunc fn, void* state", "r, def, fn, state"),
    (29, "KernelDefBuilder_AddTypeConstraint", "OrtStatus*",
     "OrtKernelDefBuilder* b, const char* name, const OrtDataType* const* types, size_t n", "b, name, types, n"),
    (40, "GetTensorDataType", "OrtStatus*", "int elem_type, const OrtDataType** out", "elem_type, out"),
]


def _wrappers(prefix: str, table: str, slots) -> str:
    out = []
    for slot, name, ret, params, args in slots:
        ret_kw = "" if ret == "void" else "return "
        out.append(f"{ret} {prefix}_{name}({params}) {{\n"
                   f"    typedef {ret} (*fn_t)({params});\n"
                   f"    {ret_kw}((fn_t)((void* const*){table})[{slot}])({args});\n}}")
    return "\n".join(out)


SOURCE = r"""
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* dladdr */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <Python.h>
""" + TYPES + r"""
static const OrtApi* g_api = NULL;
static const OrtEpApi* g_ep_api = NULL;
static const char* g_ort_version = "";
int vkep_py_ready = 0;   /* set by the embedded Python once vkep.ort.plugin is attached */
OrtStatus* py_kernel_compute(int64_t id, OrtKernelContext* ctx, vkep_io* io);
OrtStatus* py_kernel_create(void* state, const OrtKernelInfo* info, OrtKernelImpl** out);
OrtStatus* vkep_py_create_factories(const char* registered_name, const OrtApiBase* base, const OrtLogger* logger,
                                    OrtEpFactory** factories, size_t max_factories, size_t* num_factories);
OrtStatus* vkep_py_release_factory(OrtEpFactory* factory);

int vkep_api_version(void) { return VKEP_ORT_API_VERSION; }
const char* vkep_ort_version(void) { return g_ort_version; }
""" + "@@WRAPPERS@@" + r"""

/* ---- helpers for Python ------------------------------------------------------------------- */
OrtStatus* vkep_output(OrtKernelContext* ctx, size_t index, const char* dims, size_t rank, uint64_t* ptr) {
    int64_t d[VKEP_MAX_RANK];
    if (rank > VKEP_MAX_RANK) return ort_CreateStatus(2, "vkep: output rank above 8");
    memcpy(d, dims, rank * sizeof(int64_t));
    OrtValue* v = NULL;
    OrtStatus* s = ort_KernelContext_GetOutput(ctx, index, d, rank, &v);
    if (s) return s;
    void* p = NULL;
    s = ort_GetTensorMutableData(v, &p);
    *ptr = (uint64_t)(uintptr_t)p;
    return s;
}

OrtStatus* vkep_tensor_info(const OrtValue* v, int* type, int64_t* dims, int* rank, uint64_t* ptr) {
    OrtTensorTypeAndShapeInfo* info = NULL;
    OrtStatus* s = ort_GetTensorTypeAndShape(v, &info);
    if (s) return s;
    size_t r = 0;
    ort_GetTensorElementType(info, type);
    ort_GetDimensionsCount(info, &r);
    if (r > VKEP_MAX_RANK) { ort_ReleaseTensorTypeAndShapeInfo(info); return ort_CreateStatus(2, "vkep: rank above 8"); }
    ort_GetDimensions(info, dims, r);
    ort_ReleaseTensorTypeAndShapeInfo(info);
    *rank = (int)r;
    void* p = NULL;
    s = ort_GetTensorMutableData((OrtValue*)v, &p);
    *ptr = (uint64_t)(uintptr_t)p;
    return s;
}

int ort_KernelInfo_InputElementType(const OrtKernelInfo* info, size_t index) {
    OrtTypeInfo* t = NULL;
    const OrtTensorTypeAndShapeInfo* ti = NULL;
    int type = 0;
    OrtStatus* s = ort_KernelInfo_GetInputTypeInfo(info, index, &t);
    if (s) { ort_ReleaseStatus(s); return 0; }
    s = ort_CastTypeInfoToTensorInfo(t, &ti);
    if (!s && ti) { OrtStatus* s2 = ort_GetTensorElementType(ti, &type); if (s2) ort_ReleaseStatus(s2); }
    if (s) ort_ReleaseStatus(s);
    ort_ReleaseTypeInfo(t);
    return type;
}

OrtStatus* ep_KernelDefBuilder_AddTypeConstraint_types(OrtKernelDefBuilder* b, const char* name,
                                                       const int* elem_types, size_t n) {
    const OrtDataType* types[32];
    if (n > 32) n = 32;
    for (size_t i = 0; i < n; i++) {
        OrtStatus* s = ep_GetTensorDataType(elem_types[i], &types[i]);
        if (s) return s;
    }
    return ep_KernelDefBuilder_AddTypeConstraint(b, name, types, n);
}

size_t vkep_alloc_cache_count(vkep_alloc_cache* c, uint64_t size);

/* ---- replaying a node's plan without Python -------------------------------------------------------- */
typedef int (*gpu_ready_t)(void* recorder, int n);
typedef int (*gpu_dispatch_t)(void* recorder, uint64_t pipeline, const char* push, uint32_t push_size, uint32_t gx,
                              uint32_t gy, uint32_t gz, const char* spans, int nreads, int nwrites);
typedef uint64_t (*gpu_translate_t)(uint64_t address);
static gpu_ready_t g_ready = NULL;
static gpu_dispatch_t g_dispatch = NULL;
static gpu_translate_t g_translate = NULL;
typedef void (*gpu_lock_t)(void* recorder);
static gpu_lock_t g_lock = NULL, g_unlock = NULL;
static uint64_t g_fast_hits = 0;

void vkep_set_gpu_fns(uint64_t ready, uint64_t dispatch, uint64_t translate, uint64_t lock, uint64_t unlock) {
    g_lock = (gpu_lock_t)(uintptr_t)lock;
    g_unlock = (gpu_lock_t)(uintptr_t)unlock;
    g_ready = (gpu_ready_t)(uintptr_t)ready;
    g_dispatch = (gpu_dispatch_t)(uintptr_t)dispatch;
    g_translate = (gpu_translate_t)(uintptr_t)translate;
}

uint64_t vkep_fast_path_hits(void) { return __atomic_load_n(&g_fast_hits, __ATOMIC_RELAXED); }

static uint64_t io_address(const vkep_io* io, const uint64_t* outs, int32_t code, uint64_t offset) {
    if (code == VKEP_IO_CONST) return offset;
    uint64_t base = code >= 0 ? io->ptrs[code] : outs[-1 - code];
    return g_translate(base) + offset;
}

static int vkep_replay_locked(vkep_plan* p, void* rec, OrtKernelContext* ctx, const vkep_io* io,
                              OrtStatus** status);

/* 1 = handled (with *status set on an ORT error), 0 = let Python do it */
static int vkep_replay(vkep_kernel* k, OrtKernelContext* ctx, const vkep_io* io, OrtStatus** status) {
    static __thread vkep_plan p;
    if (!g_dispatch || !io->stream) return 0;
    uint32_t seq = __atomic_load_n(&k->plan_seq, __ATOMIC_ACQUIRE);
    if ((seq & 1) || !k->plan.valid) return 0;
    memcpy(&p, &k->plan, sizeof p);
    if (__atomic_load_n(&k->plan_seq, __ATOMIC_ACQUIRE) != seq) return 0;  /* being rewritten */
    if (p.n_inputs != io->n_inputs) return 0;
    for (int i = 0; i < io->n_inputs; i++) {
        if (p.types[i] != io->types[i] || p.ranks[i] != io->ranks[i]) return 0;
        if (memcmp(p.dims + i * VKEP_MAX_RANK, io->dims + i * VKEP_MAX_RANK, sizeof(int64_t) * (size_t)io->ranks[i]))
            return 0;
    }
    void* rec = ((vkep_stream*)io->stream)->recorder;
    if (!rec) return 0;
    g_lock(rec);  /* another thread may flush this stream (a device-wide sync): record atomically */
    int handled = vkep_replay_locked(&p, rec, ctx, io, status);
    g_unlock(rec);
    if (handled) __atomic_fetch_add(&g_fast_hits, 1, __ATOMIC_RELAXED);
    return handled;
}

static int vkep_replay_locked(vkep_plan* p, void* rec, OrtKernelContext* ctx, const vkep_io* io,
                              OrtStatus** status) {
    if (!g_ready(rec, p->n_ops)) return 0;
    /* only when each output's allocation is certain to succeed (an aliased output allocates nothing) */
    for (int j = 0; j < p->n_outputs; j++) {
        int aliased = 0;
        for (int a = 0; a < p->n_alias; a++) aliased |= p->alias_out[a] == j;
        if (!aliased && p->out_bytes[j] && (!p->out_cache || !vkep_alloc_cache_count(p->out_cache, p->out_bytes[j])))
            return 0;
    }
    uint64_t outs[VKEP_PLAN_OUTPUTS];
    for (int j = 0; j < p->n_outputs; j++) {
        OrtValue* v = NULL;
        void* ptr = NULL;
        OrtStatus* s = ort_KernelContext_GetOutput(ctx, (size_t)j, p->out_dims + j * VKEP_MAX_RANK,
                                                   (size_t)p->out_rank[j], &v);
        if (!s) s = ort_GetTensorMutableData(v, &ptr);
        if (s) { *status = s; return 1; }
        outs[j] = (uint64_t)(uintptr_t)ptr;
    }
    for (int a = 0; a < p->n_alias; a++)
        if (outs[p->alias_out[a]] != io->ptrs[p->alias_in[a]]) return 0;  /* ORT did not alias: Python copies */
    for (int o = 0; o < p->n_ops; o++) {
        vkep_plan_op* op = &p->ops[o];
        uint64_t spans[2 * VKEP_PLAN_SLOTS];
        for (uint32_t a = 0; a < op->n_addr; a++) {
            uint64_t addr = io_address(io, outs, op->addr_io[a], op->addr_offset[a]);
            memcpy(op->push + 8 * a, &addr, 8);
        }
        for (uint32_t sp = 0; sp < op->n_reads + op->n_writes; sp++) {
            spans[2 * sp] = io_address(io, outs, op->span_io[sp], op->span_offset[sp]);
            spans[2 * sp + 1] = spans[2 * sp] + op->span_len[sp];
        }
        g_dispatch(rec, op->pipeline, (const char*)op->push, op->push_size, op->groups[0], op->groups[1],
                   op->groups[2], (const char*)spans, (int)op->n_reads, (int)op->n_writes);
    }
    return 1;
}

/* ---- the per-node Compute trampoline ---------------------------------------------------------- */
static OrtStatus* vkep_compute(OrtKernelImpl* self, OrtKernelContext* ctx) {
    vkep_io io;
    size_t n = 0, nout = 0;
    OrtStatus* s = ort_KernelContext_GetInputCount(ctx, &n);
    if (s) return s;
    if (n > VKEP_MAX_IO) return ort_CreateStatus(2, "vkep: more than 16 inputs");
    ort_KernelContext_GetOutputCount(ctx, &nout);
    io.n_inputs = (int32_t)n;
    io.n_outputs = (int32_t)nout;
    uint32_t packed = ((vkep_kernel*)self)->packed_mask;
    for (size_t i = 0; i < n; i++) {
        const OrtValue* v = NULL;
        if (packed & (1u << i)) { io.types[i] = 0; io.ranks[i] = 0; io.ptrs[i] = 0; continue; }  /* prepacked */
        s = ort_KernelContext_GetInput(ctx, i, &v);
        if (s) return s;
        if (!v) { io.types[i] = 0; io.ranks[i] = 0; io.ptrs[i] = 0; continue; }
        int rank = 0;
        s = vkep_tensor_info(v, &io.types[i], io.dims + i * VKEP_MAX_RANK, &rank, &io.ptrs[i]);
        if (s) return s;
        io.ranks[i] = rank;
    }
    io.stream = NULL;
    s = ort_KernelContext_GetGPUComputeStream(ctx, &io.stream);
    if (s) { ort_ReleaseStatus(s); io.stream = NULL; }
    OrtStatus* status = NULL;
    if (vkep_replay((vkep_kernel*)self, ctx, &io, &status)) return status;
    return py_kernel_compute(((vkep_kernel*)self)->id, ctx, &io);
}

void* vkep_compute_fn = (void*)vkep_compute;

/* ---- allocator front: freed chunks are kept per size and handed out again without entering Python ---- */
#define ALLOC_ALIGN 256
static uint64_t aligned_size(uint64_t size) {
    return size ? (size + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN : ALLOC_ALIGN;
}
typedef struct { uint64_t size; uint64_t* ptrs; size_t n, cap; } alloc_bucket;
struct vkep_alloc_cache {
    pthread_mutex_t lock;
    uint64_t* keys; uint64_t* vals; size_t cap, count;   /* live chunks: pointer -> size (linear probing) */
    alloc_bucket* buckets; size_t nbuckets, bcap;
    uint64_t live, peak, cached, python_allocs;
};

void* py_alloc(OrtAllocator* self, size_t size);

vkep_alloc_cache* vkep_alloc_cache_new(void) {
    vkep_alloc_cache* c = calloc(1, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->cap = 1024;
    c->keys = calloc(c->cap, sizeof(uint64_t));
    c->vals = calloc(c->cap, sizeof(uint64_t));
    return c;
}

void vkep_alloc_cache_delete(vkep_alloc_cache* c) {
    for (size_t i = 0; i < c->nbuckets; i++) free(c->buckets[i].ptrs);
    free(c->buckets); free(c->keys); free(c->vals);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static size_t slot_of(uint64_t key, size_t cap) { return (size_t)((key >> 8) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static void live_put(vkep_alloc_cache* c, uint64_t key, uint64_t val);

static void live_grow(vkep_alloc_cache* c) {
    uint64_t* keys = c->keys; uint64_t* vals = c->vals; size_t cap = c->cap;
    c->cap *= 2; c->count = 0;
    c->keys = calloc(c->cap, sizeof(uint64_t)); c->vals = calloc(c->cap, sizeof(uint64_t));
    for (size_t i = 0; i < cap; i++) if (keys[i]) live_put(c, keys[i], vals[i]);
    free(keys); free(vals);
}

static void live_put(vkep_alloc_cache* c, uint64_t key, uint64_t val) {
    if (2 * (c->count + 1) > c->cap) live_grow(c);
    size_t i = slot_of(key, c->cap);
    while (c->keys[i]) i = (i + 1) & (c->cap - 1);
    c->keys[i] = key; c->vals[i] = val; c->count++;
}

static uint64_t live_take(vkep_alloc_cache* c, uint64_t key) {
    size_t i = slot_of(key, c->cap);
    while (c->keys[i] && c->keys[i] != key) i = (i + 1) & (c->cap - 1);
    if (!c->keys[i]) return 0;
    uint64_t val = c->vals[i];
    c->keys[i] = 0; c->count--;
    /* backward-shift deletion keeps every probe chain unbroken */
    size_t j = i;
    for (;;) {
        j = (j + 1) & (c->cap - 1);
        if (!c->keys[j]) break;
        size_t home = slot_of(c->keys[j], c->cap);
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            c->keys[i] = c->keys[j]; c->vals[i] = c->vals[j]; c->keys[j] = 0; i = j;
        }
    }
    return val;
}

static alloc_bucket* bucket_of(vkep_alloc_cache* c, uint64_t size, int create) {
    for (size_t i = 0; i < c->nbuckets; i++) if (c->buckets[i].size == size) return &c->buckets[i];
    if (!create) return NULL;
    if (c->nbuckets == c->bcap) {
        c->bcap = c->bcap ? 2 * c->bcap : 16;
        c->buckets = realloc(c->buckets, c->bcap * sizeof(alloc_bucket));
    }
    alloc_bucket* b = &c->buckets[c->nbuckets++];
    memset(b, 0, sizeof(*b));
    b->size = size;
    return b;
}

static void* vkep_alloc(OrtAllocator* self, size_t size) {
    vkep_alloc_cache* c = ((vkep_allocator*)self)->cache;
    uint64_t aligned = aligned_size(size);
    uint64_t p = 0;
    pthread_mutex_lock(&c->lock);
    alloc_bucket* b = bucket_of(c, aligned, 0);
    if (b && b->n) { p = b->ptrs[--b->n]; c->cached -= aligned; }
    pthread_mutex_unlock(&c->lock);
    if (!p) {
        p = (uint64_t)(uintptr_t)py_alloc(self, aligned);
        if (!p) return NULL;
        pthread_mutex_lock(&c->lock);
        c->python_allocs++;
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_lock(&c->lock);
    live_put(c, p, aligned);
    c->live += aligned;
    if (c->live > c->peak) c->peak = c->live;
    pthread_mutex_unlock(&c->lock);
    return (void*)(uintptr_t)p;
}

static void vkep_free(OrtAllocator* self, void* ptr) {
    if (!ptr) return;
    vkep_alloc_cache* c = ((vkep_allocator*)self)->cache;
    pthread_mutex_lock(&c->lock);
    uint64_t size = live_take(c, (uint64_t)(uintptr_t)ptr);
    if (size) {
        alloc_bucket* b = bucket_of(c, size, 1);
        if (b->n == b->cap) { b->cap = b->cap ? 2 * b->cap : 8; b->ptrs = realloc(b->ptrs, b->cap * sizeof(uint64_t)); }
        b->ptrs[b->n++] = (uint64_t)(uintptr_t)ptr;
        c->live -= size; c->cached += size;
    }
    pthread_mutex_unlock(&c->lock);
}

/* hands cached chunks back (to return them to the device pool); returns how many were written */
size_t vkep_alloc_cache_drain(vkep_alloc_cache* c, uint64_t* ptrs, uint64_t* sizes, size_t max) {
    size_t k = 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nbuckets && k < max; i++) {
        alloc_bucket* b = &c->buckets[i];
        while (b->n && k < max) { ptrs[k] = b->ptrs[--b->n]; sizes[k++] = b->size; c->cached -= b->size; }
    }
    pthread_mutex_unlock(&c->lock);
    return k;
}

/* live, peak, cached bytes, allocations that went to Python, live chunk count */
void vkep_alloc_cache_stats(vkep_alloc_cache* c, uint64_t* out) {
    pthread_mutex_lock(&c->lock);
    out[0] = c->live; out[1] = c->peak; out[2] = c->cached; out[3] = c->python_allocs; out[4] = c->count;
    pthread_mutex_unlock(&c->lock);
}

/* how many freed chunks of this size wait for reuse: an Alloc of that size will not fail */
size_t vkep_alloc_cache_count(vkep_alloc_cache* c, uint64_t size) {
    pthread_mutex_lock(&c->lock);
    alloc_bucket* b = bucket_of(c, aligned_size(size), 0);
    size_t n = b ? b->n : 0;
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* a chunk Python allocated ahead of ORT's Alloc, so that running out of memory is a clean error
 * (ORT does not check what an allocator returns) */
void vkep_alloc_cache_put(vkep_alloc_cache* c, uint64_t ptr, uint64_t size) {
    pthread_mutex_lock(&c->lock);
    alloc_bucket* b = bucket_of(c, aligned_size(size), 1);
    if (b->n == b->cap) { b->cap = b->cap ? 2 * b->cap : 8; b->ptrs = realloc(b->ptrs, b->cap * sizeof(uint64_t)); }
    b->ptrs[b->n++] = ptr;
    c->cached += b->size;
    pthread_mutex_unlock(&c->lock);
}

int vkep_alloc_cache_owns(vkep_alloc_cache* c, uint64_t ptr) {
    pthread_mutex_lock(&c->lock);
    size_t i = slot_of(ptr, c->cap);
    while (c->keys[i] && c->keys[i] != ptr) i = (i + 1) & (c->cap - 1);
    int found = c->keys[i] == ptr && ptr != 0;
    pthread_mutex_unlock(&c->lock);
    return found;
}

void* vkep_alloc_fn = (void*)vkep_alloc;
void* vkep_free_fn = (void*)vkep_free;

static const OrtMemoryInfo* vkep_alloc_info(const OrtAllocator* a) { return ((const vkep_allocator*)a)->info; }
static const char* vkep_factory_name(const OrtEpFactory* f) { return ((const vkep_factory*)f)->name; }
static const char* vkep_factory_vendor(const OrtEpFactory* f) { return ((const vkep_factory*)f)->vendor; }
static const char* vkep_factory_version(const OrtEpFactory* f) { return ((const vkep_factory*)f)->version; }
static const char* vkep_ep_name(const OrtEp* e) { return ((const vkep_ep*)e)->name; }
void* vkep_alloc_info_fn = (void*)vkep_alloc_info;
void* vkep_factory_name_fn = (void*)vkep_factory_name;
void* vkep_factory_vendor_fn = (void*)vkep_factory_vendor;
void* vkep_factory_version_fn = (void*)vkep_factory_version;
void* vkep_ep_name_fn = (void*)vkep_ep_name;

/* ---- exported entry points -------------------------------------------------------------------- */
static OrtStatus* fail(const OrtApiBase* base, const char* msg) {
    const OrtApi* api = base ? base->GetApi(VKEP_ORT_API_VERSION) : NULL;
    if (!api) return NULL;
    typedef OrtStatus* (*create_t)(int, const char*);
    return ((create_t)((void* const*)api)[0])(1, msg);
}

__attribute__((visibility("default")))
OrtStatus* CreateEpFactories(const char* registered_name, const OrtApiBase* base, const OrtLogger* logger,
                             OrtEpFactory** factories, size_t max_factories, size_t* num_factories) {
    *num_factories = 0;
    if (!base) return NULL;
    g_api = base->GetApi(VKEP_ORT_API_VERSION);
    if (!g_api) return NULL;  /* an ORT older than vkep needs: nothing to return a status with */
    typedef const OrtEpApi* (*get_ep_api_t)(void);
    g_ep_api = ((get_ep_api_t)((void* const*)g_api)[317])();
    g_ort_version = base->GetVersionString();
    /* a C host dlopens us RTLD_LOCAL: make libpython's symbols global before extension modules load */
    if (!Py_IsInitialized()) dlopen(VKEP_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL);
    /* stay loaded after ORT unregisters us: the interpreter keeps our Python callbacks attached to this
     * copy of the library, so a later registration must find the same one */
    Dl_info self;
    if (dladdr((void*)CreateEpFactories, &self) && self.dli_fname)
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    OrtStatus* s = vkep_py_create_factories(registered_name, base, logger, factories, max_factories,
                                            num_factories);
    if (!vkep_py_ready) {
        *num_factories = 0;
        return fail(base, "vkep: the embedded Python failed to start (its traceback is on stderr)");
    }
    return s;
}

__attribute__((visibility("default")))
OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
    if (!vkep_py_ready) return NULL;
    return vkep_py_release_factory(factory);
}
"""


def _init_code() -> str:
    # The embedded interpreter of a C host knows nothing of this environment: give it our paths.
    paths = [str(Path(__file__).resolve().parents[2])] + [p for p in sys.path if p.endswith("site-packages")]
    return f"""
import sys
for _p in {paths!r}:
    if _p not in sys.path:
        sys.path.append(_p)
from _vkep_plugin import ffi, lib
import vkep.ort.plugin
vkep.ort.plugin.attach(ffi, lib)
"""


def builder(module_name: str) -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(TYPES + CALLS + PY_CALLBACKS)
    ffi.embedding_api(EMBEDDING_API)
    wrappers = _wrappers("ort", "g_api", ORT_SLOTS) + "\n" + _wrappers("ep", "g_ep_api", EP_SLOTS)
    wrappers += """
OrtStatus* ep_KernelRegistry_AddKernel_py(OrtKernelRegistry* r, const OrtKernelDef* def, void* state) {
    return ep_KernelRegistry_AddKernel(r, def, py_kernel_create, state);
}"""
    source = SOURCE.replace("@@WRAPPERS@@", wrappers)
    libpython = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY") or ""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ffi.embedding_init_code(_init_code())
    ffi.set_source(
        module_name, source,
        define_macros=[("VKEP_ORT_API_VERSION", str(ORT_API_VERSION)),
                       ("VKEP_LIBPYTHON", f'"{Path(libdir) / libpython}"')],
        extra_compile_args=["-O2"], libraries=["dl"],
    )
    return ffi
