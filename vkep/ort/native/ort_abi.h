/* vkep's own declarations of the parts of ONNX Runtime's C ABI it uses (ORT ships no C headers in its
 * wheel; these are written from the documented ABI, API version 24+). Shared by the cffi cdef and the C
 * code, so it holds plain declarations only: no #include, no inline code. */
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
typedef struct OrtOpAttr OrtOpAttr;
typedef struct OrtValueInfo OrtValueInfo;
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
typedef struct OrtProfilingEvent OrtProfilingEvent;
typedef struct OrtProfilingEventsContainer OrtProfilingEventsContainer;
typedef struct OrtNodeComputeContext OrtNodeComputeContext;

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

/* ORT 1.25+: an EP's profiler (OrtEp::CreateProfiler); vkep/ort/profiler.py */
typedef struct OrtEpProfilerImpl {
    uint32_t ort_version_supported;
    void (*Release)(struct OrtEpProfilerImpl* self);
    OrtStatus* (*StartProfiling)(struct OrtEpProfilerImpl* self, int64_t ep_profiling_start_offset_ns);
    OrtStatus* (*StartEvent)(struct OrtEpProfilerImpl* self, uint64_t ort_event_correlation_id);
    OrtStatus* (*StopEvent)(struct OrtEpProfilerImpl* self, uint64_t ort_event_correlation_id,
                            const OrtProfilingEvent* ort_event);
    OrtStatus* (*EndProfiling)(struct OrtEpProfilerImpl* self, OrtProfilingEventsContainer* events_container);
} OrtEpProfilerImpl;

/* a fused group's compute functions (OrtEp::Compile): plugin.c's, over the group's vkep_kernel */
typedef struct OrtNodeComputeInfo {
    uint32_t ort_version_supported;
    OrtStatus* (*CreateState)(struct OrtNodeComputeInfo* self, OrtNodeComputeContext* context, void** state);
    OrtStatus* (*Compute)(struct OrtNodeComputeInfo* self, void* state, OrtKernelContext* context);
    void (*ReleaseState)(struct OrtNodeComputeInfo* self, void* state);
} OrtNodeComputeInfo;

typedef struct OrtNodeFusionOptions {
    uint32_t ort_version_supported;
    bool drop_constant_initializers;
} OrtNodeFusionOptions;

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
    OrtStatus* (*OnSessionInitializationEnd)(struct OrtEp* self);
    OrtStatus* (*GetDefaultMemoryDevice)(const struct OrtEp* self, const OrtMemoryDevice** device);
    void* ReleaseCapturedGraph;
} OrtEp;

/* external resources (interop) */
typedef struct OrtExternalMemoryDescriptor {
    uint32_t version; int handle_type; void* native_handle; size_t size_bytes; size_t offset_bytes;
} OrtExternalMemoryDescriptor;
typedef struct OrtExternalSemaphoreDescriptor { uint32_t version; int type; void* native_handle; }
    OrtExternalSemaphoreDescriptor;
typedef struct OrtExternalTensorDescriptor {
    uint32_t version; int element_type; const int64_t* shape; size_t rank; size_t offset_bytes;
} OrtExternalTensorDescriptor;
typedef struct OrtExternalMemoryHandle {
    uint32_t version; const OrtEpDevice* ep_device; OrtExternalMemoryDescriptor descriptor;
    void (*Release)(struct OrtExternalMemoryHandle* handle);
} OrtExternalMemoryHandle;
typedef struct OrtExternalSemaphoreHandle {
    uint32_t version; const OrtEpDevice* ep_device; OrtExternalSemaphoreDescriptor descriptor;
    void (*Release)(struct OrtExternalSemaphoreHandle* handle);
} OrtExternalSemaphoreHandle;
typedef struct OrtExternalResourceImporterImpl {
    uint32_t ort_version_supported;
    bool (*CanImportMemory)(const struct OrtExternalResourceImporterImpl* self, int handle_type);
    OrtStatus* (*ImportMemory)(struct OrtExternalResourceImporterImpl* self, const OrtExternalMemoryDescriptor* desc,
                               OrtExternalMemoryHandle** out);
    void (*ReleaseMemory)(struct OrtExternalResourceImporterImpl* self, OrtExternalMemoryHandle* handle);
    OrtStatus* (*CreateTensorFromMemory)(struct OrtExternalResourceImporterImpl* self,
                                         const OrtExternalMemoryHandle* handle,
                                         const OrtExternalTensorDescriptor* desc, OrtValue** out);
    bool (*CanImportSemaphore)(const struct OrtExternalResourceImporterImpl* self, int type);
    OrtStatus* (*ImportSemaphore)(struct OrtExternalResourceImporterImpl* self,
                                  const OrtExternalSemaphoreDescriptor* desc, OrtExternalSemaphoreHandle** out);
    void (*ReleaseSemaphore)(struct OrtExternalResourceImporterImpl* self, OrtExternalSemaphoreHandle* handle);
    OrtStatus* (*WaitSemaphore)(struct OrtExternalResourceImporterImpl* self, OrtExternalSemaphoreHandle* handle,
                                OrtSyncStream* stream, uint64_t value);
    OrtStatus* (*SignalSemaphore)(struct OrtExternalResourceImporterImpl* self, OrtExternalSemaphoreHandle* handle,
                                  OrtSyncStream* stream, uint64_t value);
    void (*Release)(struct OrtExternalResourceImporterImpl* self);
} OrtExternalResourceImporterImpl;

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
    OrtStatus* (*CreateExternalResourceImporterForDevice)(struct OrtEpFactory* self, const OrtEpDevice* ep_device,
                                                          OrtExternalResourceImporterImpl** out);
    void* GetNumCustomOpDomains;
    void* GetCustomOpDomains;
} OrtEpFactory;

/* vkep's wrappers: ORT structs followed by the id Python knows them by */
typedef struct vkep_importer { OrtExternalResourceImporterImpl base; int64_t id; } vkep_importer;
typedef struct vkep_memory_handle { OrtExternalMemoryHandle base; int64_t id; } vkep_memory_handle;
typedef struct vkep_semaphore_handle { OrtExternalSemaphoreHandle base; int64_t id; } vkep_semaphore_handle;
typedef struct vkep_loop_helper { OrtLoopKernelHelper base; int64_t device; } vkep_loop_helper;
typedef struct vkep_scan_helper { OrtScanKernelHelper base; int64_t device; } vkep_scan_helper;
/* a node's inputs the trampoline gathers (skl2onnx's PolynomialFeatures makes a Concat of 28; ORT's QOperator
 * quantizer a QLinearConcat of 3 per tensor + 2: 77 for densenet121's, 149 for densenet201's), and those of a node
 * whose work a plan replays natively (more: Python's path every call) */
#define VKEP_MAX_IO 256
#define VKEP_PLAN_IO 24
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
#define VKEP_PLAN_OPS 16  /* (a Winograd conv in several passes: 3 a pass; replay copies only the used ones) */
#define VKEP_PLAN_SLOTS 16
#define VKEP_PLAN_OUTPUTS 4
#define VKEP_PLAN_SCRATCH 4
#define VKEP_IO_CONST 1000
#define VKEP_IO_SCRATCH 2000
#define VKEP_PLAN_CPU_BYTES 256
/* One recorded dispatch of a plan: push constants start with n_addr 64-bit addresses, each an io tensor's
 * address (code i >= 0: input i, -1-j: output j, VKEP_IO_SCRATCH + k: the call's scratch chunk k,
 * VKEP_IO_CONST: the absolute address in addr_offset) plus an offset; spans (reads, then writes) are
 * addressed the same way. */
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
    int32_t types[VKEP_PLAN_IO];
    int32_t ranks[VKEP_PLAN_IO];
    int64_t dims[VKEP_PLAN_IO * VKEP_MAX_RANK];
    int32_t out_rank[VKEP_PLAN_OUTPUTS];
    int64_t out_dims[VKEP_PLAN_OUTPUTS * VKEP_MAX_RANK];
    int32_t alias_out[VKEP_PLAN_OUTPUTS];
    int32_t alias_in[VKEP_PLAN_OUTPUTS];
    uint64_t out_bytes[VKEP_PLAN_OUTPUTS];
    vkep_alloc_cache* out_cache;   /* the allocator ORT gives this node's outputs from */
    /* the host reads an output (docs/design.md, "The replay contract"): the replay submits what is recorded
     * and waits for it before Compute returns; then the device's error word (a uint32 on the host, once
     * made: error_word holds where its pointer is kept) must be 0 */
    int32_t finish;
    uint32_t** error_word;
    uint64_t* elided;  /* the device's (copies, bytes) counters: the outputs the host reads in place */
    uint64_t finish_count, finish_bytes;
    /* scratch memory: chunks of out_cache's allocator taken for the call and freed once it is recorded
     * (the device's one stream orders their reuse, as it does for values ORT frees) */
    int32_t n_scratch;
    uint64_t scratch_bytes[VKEP_PLAN_SCRATCH];
    /* CPU inputs (values the kernel read on the host): bit i of cpu_mask; the plan holds while their
     * bytes equal these (cpu_len[i] bytes at cpu_offset[i] of cpu_values) */
    uint32_t cpu_mask;
    uint16_t cpu_offset[VKEP_PLAN_IO], cpu_len[VKEP_PLAN_IO];
    uint8_t cpu_values[VKEP_PLAN_CPU_BYTES];
    /* a recorded loop (a recurrence's steps): ops [loop_first, loop_first + loop_ops) run loop_times times, the
     * uint32 push constant at byte loop_counter[o] of op o (-1: none) one more each time; 0 ops: no loop */
    int32_t loop_first, loop_ops, loop_times;
    int32_t loop_counter[VKEP_PLAN_OPS];
    vkep_plan_op ops[VKEP_PLAN_OPS];
} vkep_plan;
typedef struct vkep_kernel {
    OrtKernelImpl base; int64_t id; uint32_t plan_seq; uint64_t packed_mask; vkep_plan plan;
    void* recorder;  /* the device's default stream, for calls without an ORT stream */
    void* capture_recorder;  /* while its session captures a graph: the capture's stream, before any other */
} vkep_kernel;
typedef struct vkep_compute_info { OrtNodeComputeInfo base; void* kernel; } vkep_compute_info;
typedef struct vkep_allocator { OrtAllocator base; int64_t id; const OrtMemoryInfo* info; vkep_alloc_cache* cache; }
    vkep_allocator;
/* factory and EP with their strings: the getters ORT calls (also during teardown) are plain C */
typedef struct vkep_factory { OrtEpFactory base; const char* name; const char* vendor; const char* version; }
    vkep_factory;
typedef struct vkep_ep { OrtEp base; const char* name; } vkep_ep;
typedef struct vkep_stream { OrtSyncStreamImpl base; int64_t id; void* recorder; } vkep_stream;
typedef struct vkep_notification { OrtSyncNotificationImpl base; int64_t id; } vkep_notification;

