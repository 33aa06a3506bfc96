/* The C functions of the plugin module that Python calls: wrappers of ORT function-table slots
 * (generated from the tables in _plugin_build.py) and vkep's helpers. */
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
const OrtKeyValuePairs* ort_HardwareDevice_Metadata(const OrtHardwareDevice* d);
void ort_GetKeyValuePairs(const OrtKeyValuePairs* kvp, const char* const** keys, const char* const** values,
                          size_t* n);
OrtStatus* ort_GetSessionOptionsConfigEntries(const OrtSessionOptions* o, OrtKeyValuePairs** out);
OrtStatus* ort_Logger_LogMessage(const OrtLogger* logger, int severity, const char* message, const char* file,
                                 int line, const char* func);
OrtStatus* ort_Logger_GetLoggingSeverityLevel(const OrtLogger* logger, int* out);
OrtStatus* ort_Graph_GetNumNodes(const OrtGraph* g, size_t* n);
OrtStatus* ort_Graph_GetNodes(const OrtGraph* g, const OrtNode** nodes, size_t n);
OrtStatus* ort_Node_GetName(const OrtNode* node, const char** out);
OrtStatus* ort_Node_GetOperatorType(const OrtNode* node, const char** out);
OrtStatus* ort_Node_GetDomain(const OrtNode* node, const char** out);
OrtStatus* ort_Node_GetSinceVersion(const OrtNode* node, int* out);
OrtStatus* ort_Node_GetNumInputs(const OrtNode* node, size_t* out);
OrtStatus* ort_Node_GetInputs(const OrtNode* node, const OrtValueInfo** out, size_t n);
OrtStatus* ort_GetValueInfoTypeInfo(const OrtValueInfo* v, const OrtTypeInfo** out);
OrtStatus* ort_Node_GetNumOutputs(const OrtNode* node, size_t* out);
OrtStatus* ort_Node_GetOutputs(const OrtNode* node, const OrtValueInfo** out, size_t n);
OrtStatus* ort_GetValueInfoName(const OrtValueInfo* v, const char** out);
OrtStatus* ort_ValueInfo_GetValueNumConsumers(const OrtValueInfo* v, size_t* out);
OrtStatus* ort_ValueInfo_GetValueConsumers(const OrtValueInfo* v, const OrtNode** nodes, int64_t* input_indices,
                                           size_t n);
OrtStatus* ort_ValueInfo_IsGraphOutput(const OrtValueInfo* v, bool* out);
OrtStatus* ort_ValueInfo_GetValueProducer(const OrtValueInfo* v, const OrtNode** node, size_t* index);
OrtStatus* ort_Graph_GetNumOutputs(const OrtGraph* g, size_t* n);
OrtStatus* ort_Graph_GetOutputs(const OrtGraph* g, const OrtValueInfo** out, size_t n);
OrtStatus* ort_Graph_GetParentNode(const OrtGraph* g, const OrtNode** out);
OrtStatus* ort_Node_GetNumSubgraphs(const OrtNode* node, size_t* out);
OrtStatus* ort_Node_GetSubgraphs(const OrtNode* node, const OrtGraph** out, size_t n, const char** names);
OrtStatus* ort_Node_GetGraph(const OrtNode* node, const OrtGraph** out);
const char* ort_GetRunConfigEntry(const OrtRunOptions* o, const char* key);
OrtStatus* ort_CastTypeInfoToTensorInfo(const OrtTypeInfo* t, const OrtTensorTypeAndShapeInfo** out);
OrtStatus* ort_GetDimensionsCount(const OrtTensorTypeAndShapeInfo* i, size_t* out);
OrtStatus* ort_GetDimensions(const OrtTensorTypeAndShapeInfo* i, int64_t* out, size_t n);
bool ort_TensorTypeAndShape_HasShape(const OrtTensorTypeAndShapeInfo* i);
OrtStatus* ort_GetTensorElementType(const OrtTensorTypeAndShapeInfo* i, int* out);
OrtStatus* ort_Node_GetAttributeByName(const OrtNode* node, const char* name, const OrtOpAttr** out);
OrtStatus* ort_ReadOpAttr(const OrtOpAttr* attr, int type, void* data, size_t len, size_t* out);
OrtStatus* ort_GetTensorMutableData(OrtValue* v, void** out);
void ort_ReleaseValue(OrtValue* v);
OrtStatus* ort_KernelInfoGetAttribute_tensor(const OrtKernelInfo* info, const char* name, OrtAllocator* allocator,
                                             OrtValue** out);
OrtAllocator* ort_default_allocator(void);
OrtStatus* ort_CreateTensorWithDataAsOrtValue(const OrtMemoryInfo* info, void* data, size_t len, const int64_t* shape,
                                              size_t rank, int type, OrtValue** out);
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
OrtStatus* ort_KernelInfo_GetOutputName(const OrtKernelInfo* info, size_t i, char* out, size_t* size);
OrtStatus* ort_KernelInfo_GetOperatorSinceVersion(const OrtKernelInfo* info, int* out);
int ort_KernelInfo_InputElementType(const OrtKernelInfo* info, size_t index);
int ort_KernelInfo_InputShape(const OrtKernelInfo* info, size_t index, int64_t* dims);
OrtStatus* ort_GetSessionConfigEntry(const OrtSessionOptions* o, const char* key, char* out, size_t* size);
OrtStatus* ort_HasSessionConfigEntry(const OrtSessionOptions* o, const char* key, int* out);
/* OrtEpApi */
OrtStatus* ep_CreateEpDevice(OrtEpFactory* f, const OrtHardwareDevice* hw, const OrtKeyValuePairs* metadata,
                             const OrtKeyValuePairs* options, OrtEpDevice** out);
OrtStatus* ep_EpGraphSupportInfo_AddSingleNode(OrtEpGraphSupportInfo* info, const OrtNode* node);
OrtStatus* ep_EpDevice_AddAllocatorInfo(OrtEpDevice* d, const OrtMemoryInfo* info);
OrtStatus* ep_CreateHardwareDevice(int type, uint32_t vendor_id, uint32_t device_id, const char* vendor_name,
                                   const OrtKeyValuePairs* metadata, OrtHardwareDevice** out);
void ep_ReleaseHardwareDevice(OrtHardwareDevice* d);
const OrtMemoryDevice* ep_MemoryInfo_GetMemoryDevice(const OrtMemoryInfo* info);
const OrtMemoryDevice* ep_Value_GetMemoryDevice(const OrtValue* v);
int ep_MemoryDevice_GetDeviceType(const OrtMemoryDevice* d);
int ep_MemoryDevice_GetMemoryType(const OrtMemoryDevice* d);
uint32_t ep_MemoryDevice_GetVendorId(const OrtMemoryDevice* d);
uint32_t ep_MemoryDevice_GetDeviceId(const OrtMemoryDevice* d);
const OrtSyncStreamImpl* ep_SyncStream_GetImpl(const OrtSyncStream* s);
OrtStatus* ep_KernelInfo_GetEp(const OrtKernelInfo* info, const OrtEp** out);
OrtStatus* ep_SharedPrePackedWeightCache_StoreWeightData(OrtSharedPrePackedWeightCache* c, void** buffers,
                                                       size_t* sizes, size_t n);
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
void vkep_alloc_cache_hold(vkep_alloc_cache* c, int on);
size_t vkep_alloc_cache_take_held(vkep_alloc_cache* c, uint64_t* ptrs, uint64_t* sizes, size_t max);
extern void* vkep_factory_name_fn;
extern void* vkep_factory_vendor_fn;
extern void* vkep_factory_version_fn;
extern void* vkep_ep_name_fn;
extern int vkep_py_ready;
int vkep_api_version(void);
void vkep_set_gpu_fns(uint64_t ready, uint64_t dispatch, uint64_t translate, uint64_t lock, uint64_t unlock);
uint64_t vkep_fast_path_hits(void);
void vkep_reset_fast_path_hits(void);
void* calloc(size_t n, size_t size);
void free(void* p);
const char* vkep_ort_version(void);
const char* vkep_library_file(void);
