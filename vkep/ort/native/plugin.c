/* The plugin's C: exported entry points, the per-node Compute trampoline with its native replay, and the
 * allocator front. Everything else is Python (the modules of vkep/ort). Built by vkep/ort/_plugin_build.py. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* dladdr */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <Python.h>
#include "ort_abi.h"

static const OrtApi* g_api = NULL;
static const OrtEpApi* g_ep_api = NULL;
static const char* g_ort_version = "";
int vkep_py_ready = 0;   /* set by the embedded Python once vkep.ort.plugin is attached */
OrtStatus* py_kernel_compute(int64_t id, OrtKernelContext* ctx, vkep_io* io);
OrtStatus* py_kernel_finish(int64_t id, void* stream);
OrtStatus* py_kernel_create(void* state, const OrtKernelInfo* info, OrtKernelImpl** out);
OrtStatus* vkep_py_create_factories(const char* registered_name, const OrtApiBase* base, const OrtLogger* logger,
                                    OrtEpFactory** factories, size_t max_factories, size_t* num_factories);
OrtStatus* vkep_py_release_factory(OrtEpFactory* factory);

int vkep_api_version(void) { return VKEP_ORT_API_VERSION; }
const char* vkep_ort_version(void) { return g_ort_version; }
/* @@WRAPPERS@@: ORT function-table wrappers, generated */


/* ---- helpers for Python ------------------------------------------------------------------- */
OrtAllocator* ort_default_allocator(void) {
    OrtAllocator* a = NULL;
    OrtStatus* s = ort_GetAllocatorWithDefaultOptions(&a);
    if (s) { ort_ReleaseStatus(s); return NULL; }
    return a;
}

OrtStatus* vkep_output(OrtKernelContext* ctx, size_t index, const char* dims, size_t rank, uint64_t* ptr) {
    int64_t d[VKEP_MAX_RANK];
    if (rank > VKEP_MAX_RANK) return ort_CreateStatus(2, "vkep: output rank above 8");
    memcpy(d, dims, rank * sizeof(int64_t));
    OrtValue* v = NULL;
    *ptr = 0;
    OrtStatus* s = ort_KernelContext_GetOutput(ctx, index, d, rank, &v);
    if (s || !v) return s;  /* no value: an optional output the node does not produce */
    void* p = NULL;
    s = ort_GetTensorMutableData(v, &p);
    *ptr = (uint64_t)(uintptr_t)p;
    return s;
}

OrtStatus* vkep_tensor_info(const OrtValue* v, int* type, int64_t* dims, int* rank, uint64_t* ptr) {
    /* (the value's own shape array, read in place: GetTensorTypeAndShape allocates an info per call, which
     * cost a replayed node more than its dispatch) */
    const int64_t* shape = NULL;
    size_t r = 0;
    OrtStatus* s = ort_GetTensorElementTypeAndShapeDataReference(v, type, &shape, &r);
    if (s) return s;
    if (r > VKEP_MAX_RANK) return ort_CreateStatus(2, "vkep: rank above 8");
    if (r) memcpy(dims, shape, r * sizeof(int64_t));
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

/* the rank of input `index` as the graph declares it, its dims in `dims` (-1 where symbolic); -1 when it
 * declares none (or more than VKEP_MAX_RANK) */
int ort_KernelInfo_InputShape(const OrtKernelInfo* info, size_t index, int64_t* dims) {
    OrtTypeInfo* t = NULL;
    const OrtTensorTypeAndShapeInfo* ti = NULL;
    size_t rank = 0;
    int out = -1;
    OrtStatus* s = ort_KernelInfo_GetInputTypeInfo(info, index, &t);
    if (s) { ort_ReleaseStatus(s); return -1; }
    s = ort_CastTypeInfoToTensorInfo(t, &ti);
    if (!s && ti && ort_TensorTypeAndShape_HasShape(ti)) s = ort_GetDimensionsCount(ti, &rank);
    else if (!s) rank = VKEP_MAX_RANK + 1;  /* no shape declared (a rank of 0 would say scalar) */
    if (!s && ti && rank <= VKEP_MAX_RANK) {
        s = ort_GetDimensions(ti, dims, rank);
        if (!s) out = (int)rank;
    }
    if (s) ort_ReleaseStatus(s);
    ort_ReleaseTypeInfo(t);
    return out;
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
uint64_t vkep_alloc_cache_take(vkep_alloc_cache* c, uint64_t size);
void vkep_alloc_cache_free(vkep_alloc_cache* c, uint64_t ptr);

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
typedef int (*gpu_submit_open_t)(void* recorder, uint64_t* value);
typedef int (*gpu_wait_t)(void* recorder, uint64_t value, uint64_t timeout_ns);
static gpu_submit_open_t g_submit_open = NULL;
static gpu_wait_t g_wait = NULL;
static uint64_t g_fast_hits = 0;
/* a replayed node whose output the host reads waits this long natively (gpu.stream.WAIT_SLICE_NS); a longer
 * wait, an error reported by a shader or a failure goes to Python, which waits in slices (Ctrl-C, limits) */
#define VKEP_FINISH_SLICE_NS 100000000ull

void vkep_set_gpu_fns(uint64_t ready, uint64_t dispatch, uint64_t translate, uint64_t lock, uint64_t unlock,
                      uint64_t submit_open, uint64_t wait) {
    g_lock = (gpu_lock_t)(uintptr_t)lock;
    g_unlock = (gpu_lock_t)(uintptr_t)unlock;
    g_ready = (gpu_ready_t)(uintptr_t)ready;
    g_dispatch = (gpu_dispatch_t)(uintptr_t)dispatch;
    g_translate = (gpu_translate_t)(uintptr_t)translate;
    g_submit_open = (gpu_submit_open_t)(uintptr_t)submit_open;
    g_wait = (gpu_wait_t)(uintptr_t)wait;
}

uint64_t vkep_fast_path_hits(void) { return __atomic_load_n(&g_fast_hits, __ATOMIC_RELAXED); }
void vkep_reset_fast_path_hits(void) { __atomic_store_n(&g_fast_hits, 0, __ATOMIC_RELAXED); }

static uint64_t io_address(const vkep_io* io, const uint64_t* outs, const uint64_t* scratch, int32_t code,
                           uint64_t offset) {
    if (code == VKEP_IO_CONST) return offset;
    uint64_t base = code >= VKEP_IO_SCRATCH ? scratch[code - VKEP_IO_SCRATCH] : code >= 0 ? io->ptrs[code]
                                                                                     : outs[-1 - code];
    return g_translate(base) + offset;
}

static int vkep_replay_locked(vkep_plan* p, void* rec, OrtKernelContext* ctx, const vkep_io* io,
                              OrtStatus** status);
static OrtStatus* finish(vkep_kernel* k, const vkep_plan* p, void* rec, const vkep_io* io);

/* 1 = handled (with *status set on an ORT error), 0 = let Python do it */
static int vkep_replay(vkep_kernel* k, OrtKernelContext* ctx, const vkep_io* io, OrtStatus** status) {
    static __thread vkep_plan p;
    if (!g_dispatch) return 0;
    uint32_t seq = __atomic_load_n(&k->plan_seq, __ATOMIC_ACQUIRE);
    if ((seq & 1) || !k->plan.valid) return 0;
    memcpy(&p, &k->plan, offsetof(vkep_plan, ops));  /* (the ops it uses only: most nodes have one) */
    if ((uint32_t)p.n_ops > VKEP_PLAN_OPS) return 0;
    memcpy(p.ops, k->plan.ops, (size_t)p.n_ops * sizeof(vkep_plan_op));
    if (__atomic_load_n(&k->plan_seq, __ATOMIC_ACQUIRE) != seq) return 0;  /* being rewritten */
    if (p.n_inputs != io->n_inputs || io->n_inputs > VKEP_PLAN_IO) return 0;
    for (int i = 0; i < io->n_inputs; i++) {
        if (p.types[i] != io->types[i] || p.ranks[i] != io->ranks[i]) return 0;
        if (memcmp(p.dims + i * VKEP_MAX_RANK, io->dims + i * VKEP_MAX_RANK, sizeof(int64_t) * (size_t)io->ranks[i]))
            return 0;
    }
    if (p.finish && k->capture_recorder) return 0;  /* (a graph being captured waits for nothing: Python's) */
    void* rec = k->capture_recorder ? k->capture_recorder
                                    : io->stream ? ((vkep_stream*)io->stream)->recorder : k->recorder;
    if (!rec) return 0;
    for (int i = 0; i < io->n_inputs; i++) {
        if (p.cpu_mask & (1u << i)) {  /* a value read on the host: the plan holds for the same bytes */
            if (p.cpu_len[i] && (!io->ptrs[i] ||
                                 memcmp((const void*)(uintptr_t)io->ptrs[i], p.cpu_values + p.cpu_offset[i], p.cpu_len[i])))
                return 0;
        } else if (io->types[i] && io->ptrs[i] && !g_translate(io->ptrs[i])) {
            return 0;  /* a host tensor: Python imports or stages it */
        }
    }
    g_lock(rec);  /* another thread may flush this stream (a device-wide sync): record atomically */
    int handled = vkep_replay_locked(&p, rec, ctx, io, status);
    g_unlock(rec);
    if (handled) __atomic_fetch_add(&g_fast_hits, 1, __ATOMIC_RELAXED);
    if (handled && !*status && p.elided) {  /* outputs the host reads in place: copies a discrete device makes */
        __atomic_fetch_add(p.elided, p.finish_count, __ATOMIC_RELAXED);
        __atomic_fetch_add(p.elided + 1, p.finish_bytes, __ATOMIC_RELAXED);
    }
    if (handled && !*status && p.finish) *status = finish(k, &p, rec, io);
    return handled;
}

/* the host reads an output of this node: submit and wait for what is recorded (outside the recorder's lock) */
static OrtStatus* finish(vkep_kernel* k, const vkep_plan* p, void* rec, const vkep_io* io) {
    uint64_t value = 0;
    if (g_submit_open(rec, &value) == 1) {
        /* (read after the submit: every dispatch it holds that may report was given the word, so it exists) */
        uint32_t* word = p->error_word ? __atomic_load_n(p->error_word, __ATOMIC_ACQUIRE) : NULL;
        if (g_wait(rec, value, VKEP_FINISH_SLICE_NS) == 0 /* VK_SUCCESS */ && !(word && __atomic_load_n(word, __ATOMIC_ACQUIRE)))
            return NULL;
    }
    return py_kernel_finish(k->id, io->stream);
}

/* dispatch op o of a plan (the replay's own copy), its addresses patched, in iteration t of the plan's loop: the
 * iterations run in order, so from the second on its counter is one more than the last dispatch's */
static void replay_op(vkep_plan* p, int o, uint32_t t, void* rec, const vkep_io* io, const uint64_t* outs,
                      const uint64_t* scratch) {
    vkep_plan_op* op = &p->ops[o];
    uint64_t spans[2 * VKEP_PLAN_SLOTS];
    for (uint32_t a = 0; a < op->n_addr; a++) {
        uint64_t addr = io_address(io, outs, scratch, op->addr_io[a], op->addr_offset[a]);
        memcpy(op->push + 8 * a, &addr, 8);
    }
    for (uint32_t sp = 0; sp < op->n_reads + op->n_writes; sp++) {
        spans[2 * sp] = io_address(io, outs, scratch, op->span_io[sp], op->span_offset[sp]);
        spans[2 * sp + 1] = spans[2 * sp] + op->span_len[sp];
    }
    int32_t at = p->loop_ops > 0 ? p->loop_counter[o] : -1;
    if (t > 0 && at >= 0 && (uint32_t)at + 4 <= op->push_size) {  /* (the recorded value is iteration 0's) */
        uint32_t value;
        memcpy(&value, op->push + at, 4);
        value += 1;
        memcpy(op->push + at, &value, 4);
    }
    g_dispatch(rec, op->pipeline, (const char*)op->push, op->push_size, op->groups[0], op->groups[1],
               op->groups[2], (const char*)spans, (int)op->n_reads, (int)op->n_writes);
}

/* the outputs and the dispatches of a plan whose stream and scratch memory are ready */
static int replay_ops(vkep_plan* p, void* rec, OrtKernelContext* ctx, const vkep_io* io,
                      const uint64_t* scratch, OrtStatus** status) {
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
        if (!s && v) s = ort_GetTensorMutableData(v, &ptr);
        if (s) { *status = s; return 1; }
        outs[j] = (uint64_t)(uintptr_t)ptr;
    }
    for (int a = 0; a < p->n_alias; a++)
        if (outs[p->alias_out[a]] != io->ptrs[p->alias_in[a]]) return 0;  /* ORT did not alias: Python copies */
    for (int o = 0; o < p->n_ops;) {
        int looped = p->loop_ops > 0 && o == p->loop_first;
        int body = looped ? p->loop_ops : 1, times = looped ? p->loop_times : 1;
        for (int t = 0; t < times; t++)
            for (int b = o; b < o + body; b++) replay_op(p, b, (uint32_t)t, rec, io, outs, scratch);
        o += body;
    }
    return 1;
}

static int vkep_replay_locked(vkep_plan* p, void* rec, OrtKernelContext* ctx, const vkep_io* io,
                              OrtStatus** status) {
    int total = p->n_ops + (p->loop_ops > 0 ? (p->loop_times - 1) * p->loop_ops : 0);
    int ready = g_ready(rec, total);  /* (may submit a full batch and open the next: vkep_roll) */
    if (ready < 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "vkep: submitting a full batch of commands failed (VkResult %d)", ready);
        *status = ort_CreateStatus(1, msg);
        return 1;
    }
    if (!ready) return 0;
    /* scratch chunks from the cache (missing ones send the node to Python, which allocates them) */
    uint64_t scratch[VKEP_PLAN_SCRATCH];
    int taken = 0;
    if (p->n_scratch && !p->out_cache) return 0;
    while (taken < p->n_scratch && (scratch[taken] = vkep_alloc_cache_take(p->out_cache, p->scratch_bytes[taken])))
        taken++;
    int handled = taken == p->n_scratch && replay_ops(p, rec, ctx, io, scratch, status);
    for (int k = 0; k < taken; k++) vkep_alloc_cache_free(p->out_cache, scratch[k]);  /* recorded: reusable */
    return handled;
}

/* ---- the per-node Compute trampoline ---------------------------------------------------------- */
static OrtStatus* vkep_compute(OrtKernelImpl* self, OrtKernelContext* ctx) {
    vkep_io io;
    size_t n = 0, nout = 0;
    OrtStatus* s = ort_KernelContext_GetInputCount(ctx, &n);
    if (s) return s;
    if (n > VKEP_MAX_IO) return ort_CreateStatus(2, "vkep: more than 256 inputs (VKEP_MAX_IO)");
    ort_KernelContext_GetOutputCount(ctx, &nout);
    io.n_inputs = (int32_t)n;
    io.n_outputs = (int32_t)nout;
    uint64_t packed = ((vkep_kernel*)self)->packed_mask;
    for (size_t i = 0; i < n; i++) {
        const OrtValue* v = NULL;
        if (i < 8 * sizeof packed && (packed & (1ull << i))) { io.types[i] = 0; io.ranks[i] = 0; io.ptrs[i] = 0; continue; }  /* prepacked */
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

/* a fused group (OrtEp::Compile) computes as a node does: its state is its vkep_kernel */
static OrtStatus* fused_create_state(OrtNodeComputeInfo* self, OrtNodeComputeContext* context, void** state) {
    (void)context;
    *state = ((vkep_compute_info*)self)->kernel;
    return NULL;
}
static OrtStatus* fused_compute(OrtNodeComputeInfo* self, void* state, OrtKernelContext* ctx) {
    (void)self;
    return vkep_compute((OrtKernelImpl*)state, ctx);
}
static void fused_release_state(OrtNodeComputeInfo* self, void* state) { (void)self; (void)state; }
void* vkep_fused_create_state_fn = (void*)fused_create_state;
void* vkep_fused_compute_fn = (void*)fused_compute;
void* vkep_fused_release_state_fn = (void*)fused_release_state;

/* this library's own file: the embedded interpreter finds the vkep package beside it */
const char* vkep_library_file(void) {
    Dl_info self;
    return dladdr((void*)vkep_library_file, &self) && self.dli_fname ? self.dli_fname : "";
}

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
    const OrtApi* api = base ? base->GetApi(1) : NULL;  /* CreateStatus is slot 0 in every API version */
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
    if (!g_api) {  /* an ORT older than the plugin API vkep implements */
        char msg[256];
        snprintf(msg, sizeof msg, "vkep: this is onnxruntime %s; vkep needs onnxruntime 1.%d or a later 1.x release "
                 "(ORT API version %d): pip install -U onnxruntime", base->GetVersionString(), VKEP_ORT_API_VERSION,
                 VKEP_ORT_API_VERSION);
        return fail(base, msg);
    }
    typedef const OrtEpApi* (*get_ep_api_t)(void);
    g_ep_api = ((get_ep_api_t)((void* const*)g_api)[317])();
    g_ort_version = base->GetVersionString();
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
