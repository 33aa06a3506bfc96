/* The C functions of the plugin module that Python calls beyond the wrappers of ORT function-table slots
 * (those are declared from the tables in _plugin_build.py, ORT_SLOTS and EP_SLOTS, at the slots abi.py gives: one place), and vkep's
 * helpers. */
/* OrtApi */
OrtAllocator* ort_default_allocator(void);
int ort_KernelInfo_InputElementType(const OrtKernelInfo* info, size_t index);
int ort_KernelInfo_InputShape(const OrtKernelInfo* info, size_t index, int64_t* dims);
/* OrtEpApi */
OrtStatus* ep_KernelRegistry_AddKernel_py(OrtKernelRegistry* r, const OrtKernelDef* def, void* state);
OrtStatus* ep_KernelDefBuilder_AddTypeConstraint_types(OrtKernelDefBuilder* b, const char* name,
                                                       const int* elem_types, size_t n);

/* vkep helpers */
OrtStatus* vkep_output(OrtKernelContext* ctx, size_t index, const char* dims, size_t rank, uint64_t* ptr);
OrtStatus* vkep_tensor_info(const OrtValue* v, int* type, int64_t* dims, int* rank, uint64_t* ptr);
extern void* vkep_compute_fn;
extern void* vkep_fused_create_state_fn;
extern void* vkep_fused_compute_fn;
extern void* vkep_fused_release_state_fn;
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
uint64_t vkep_alloc_cache_take(vkep_alloc_cache* c, uint64_t size);
void vkep_alloc_cache_free(vkep_alloc_cache* c, uint64_t ptr);
void vkep_alloc_cache_hold(vkep_alloc_cache* c, int on);
size_t vkep_alloc_cache_take_held(vkep_alloc_cache* c, uint64_t* ptrs, uint64_t* sizes, size_t max);
extern void* vkep_factory_name_fn;
extern void* vkep_factory_vendor_fn;
extern void* vkep_factory_version_fn;
extern void* vkep_ep_name_fn;
extern int vkep_py_ready;
int vkep_api_version(void);
void vkep_set_gpu_fns(uint64_t ready, uint64_t dispatch, uint64_t translate, uint64_t lock, uint64_t unlock,
                      uint64_t submit_open, uint64_t wait);
uint64_t vkep_fast_path_hits(void);
void vkep_reset_fast_path_hits(void);
void* calloc(size_t n, size_t size);
void free(void* p);
const char* vkep_ort_version(void);
const char* vkep_library_file(void);
