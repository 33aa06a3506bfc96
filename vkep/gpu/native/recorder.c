/* The few lines of C on vkep's Vulkan hot path: recording dispatches with hazard-tracked barriers,
 * submitting against the stream's timeline semaphore, host-to-device address translation, and the
 * validation-layer message sink. Built by vkep/gpu/_vk_build.py. */
#include <vulkan/vulkan.h>
#include <string.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>

#define VKEP_MAX_SPANS 64
#define VKEP_MAX_EXTERNAL 8
#define VKEP_SPARE 8      /* command buffers Python hands the native path for batches it rolls itself */
#define VKEP_RETIRED 32   /* batches the native path submitted, with their timeline values, for Python */
/* A dispatch past the device's maxComputeWorkGroupCount is recorded as pieces; each piece's first workgroup
 * goes to the shader in the last 12 bytes of the push constants (common.glsl GROUP_BASE, at this offset) */
#define VKEP_GROUP_BASE_OFFSET 116

typedef struct vkep_recorder {
    VkDevice device; VkQueue queue; VkCommandBuffer cmd; VkPipelineLayout layout;
    VkSemaphore timeline; uint64_t submitted; uint32_t recording; uint32_t commands; uint32_t barriers;
    uint32_t batch_limit; uint64_t total_commands;
    uint32_t reusable;  /* a captured graph's stream: its command buffers are submitted again */
    uint32_t max_groups[3];  /* the device's maxComputeWorkGroupCount (or a lower test limit) */
    VkPipeline bound;
    uint32_t base_zero;  /* the push constants' group base holds zeros (set since the command buffer began) */
    uint64_t pieces;  /* dispatches recorded for grids past max_groups (vkep.stats: dispatch_pieces) */
    pthread_mutex_t mutex;  /* recursive: Python and the native replay path may record on one stream */
    int n_ext_wait, n_ext_signal;  /* external timeline semaphores joined to the next submit */
    VkSemaphore ext_wait[VKEP_MAX_EXTERNAL], ext_signal[VKEP_MAX_EXTERNAL];
    uint64_t ext_wait_value[VKEP_MAX_EXTERNAL], ext_signal_value[VKEP_MAX_EXTERNAL];
    void* queue_mutex;  /* (a pthread_mutex_t)  the device's (one per VkQueue): vkQueueSubmit needs external sync */
    /* a full batch is submitted natively (vkep_roll): the next one opens in a spare command buffer, and the
     * submitted one waits in `retired` until its value passed (then it is reused) or Python takes it */
    int n_spare, n_retired;
    VkCommandBuffer spare[VKEP_SPARE];
    VkCommandBuffer retired[VKEP_RETIRED];
    uint64_t retired_value[VKEP_RETIRED];
    uint64_t rolls;
    /* address ranges read / written since the last barrier: a new command waits only on a real hazard */
    int nr, nw;
    uint64_t r_lo[VKEP_MAX_SPANS], r_hi[VKEP_MAX_SPANS], w_lo[VKEP_MAX_SPANS], w_hi[VKEP_MAX_SPANS];
} vkep_recorder;

static int vkep_begin_locked(vkep_recorder* r, VkCommandBuffer cmd);

static void vkep_barrier(vkep_recorder* r) {
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL,
        VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
        VK_ACCESS_TRANSFER_WRITE_BIT};
    VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(r->cmd, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
    r->nr = r->nw = 0;
    r->barriers++;
}

static int overlaps(const uint64_t* lo, const uint64_t* hi, int n, uint64_t a, uint64_t b) {
    for (int i = 0; i < n; i++) if (a < hi[i] && lo[i] < b) return 1;
    return 0;
}

/* spans are (lo, hi) pairs; RAW, WAR and WAW against what is pending since the last barrier */
static void vkep_track(vkep_recorder* r, const uint64_t* reads, int nreads, const uint64_t* writes, int nwrites) {
    int hazard = (r->nr + nreads > VKEP_MAX_SPANS) || (r->nw + nwrites > VKEP_MAX_SPANS);
    for (int i = 0; !hazard && i < nreads; i++)
        hazard = overlaps(r->w_lo, r->w_hi, r->nw, reads[2*i], reads[2*i+1]);
    for (int i = 0; !hazard && i < nwrites; i++)
        hazard = overlaps(r->w_lo, r->w_hi, r->nw, writes[2*i], writes[2*i+1]) ||
                 overlaps(r->r_lo, r->r_hi, r->nr, writes[2*i], writes[2*i+1]);
    if (hazard) vkep_barrier(r);
    for (int i = 0; i < nreads; i++) { r->r_lo[r->nr] = reads[2*i]; r->r_hi[r->nr++] = reads[2*i+1]; }
    for (int i = 0; i < nwrites; i++) { r->w_lo[r->nw] = writes[2*i]; r->w_hi[r->nw++] = writes[2*i+1]; }
}

void vkep_recorder_init(vkep_recorder* r) {
    for (int d = 0; d < 3; d++) if (!r->max_groups[d]) r->max_groups[d] = 65535;  /* (Vulkan's minimum) */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&r->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
}

void vkep_recorder_destroy(vkep_recorder* r) { pthread_mutex_destroy(&r->mutex); }
void vkep_lock(vkep_recorder* r) { pthread_mutex_lock(&r->mutex); }
void vkep_unlock(vkep_recorder* r) { pthread_mutex_unlock(&r->mutex); }

int vkep_begin(vkep_recorder* r, VkCommandBuffer cmd) {
    pthread_mutex_lock(&r->mutex);
    int res = vkep_begin_locked(r, cmd);
    pthread_mutex_unlock(&r->mutex);
    return res;
}

static int vkep_begin_locked(vkep_recorder* r, VkCommandBuffer cmd) {
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                   r->reusable ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    int res = vkBeginCommandBuffer(cmd, &bi);
    if (res != VK_SUCCESS) return res;
    r->cmd = cmd; r->recording = 1; r->commands = 0; r->bound = VK_NULL_HANDLE; r->base_zero = 0;
    /* earlier submissions on this queue are not ordered with this one without a barrier */
    vkep_barrier(r);
    return VK_SUCCESS;
}

static void vkep_push_group_base(vkep_recorder* r, uint32_t x, uint32_t y, uint32_t z) {
    uint32_t base[3] = {x, y, z};
    vkCmdPushConstants(r->cmd, r->layout, VK_SHADER_STAGE_COMPUTE_BIT, VKEP_GROUP_BASE_OFFSET, sizeof base, base);
    r->base_zero = !(x | y | z);
}

/* The grid as one vkCmdDispatch, or, past the device's limit in any dimension, as pieces of at most the
 * limit, each told its first workgroup through the push constants' group base (a shader that declares
 * GROUP_BASE reads WORKGROUP_ID = gl_WorkGroupID + base). A push block reaching into the base's bytes
 * cannot be split: -3 (Python refuses such a grid before it gets here). */
static int vkep_dispatch_pieces(vkep_recorder* r, uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz) {
    const uint32_t* m = r->max_groups;
    int fits = gx <= m[0] && gy <= m[1] && gz <= m[2];
    if (push_size > VKEP_GROUP_BASE_OFFSET) {
        r->base_zero = 0;  /* these bytes now hold the push block's own values */
        if (!fits) return -3;
        vkCmdDispatch(r->cmd, gx, gy, gz);
        return VK_SUCCESS;
    }
    if (fits) {
        if (!r->base_zero) vkep_push_group_base(r, 0, 0, 0);
        vkCmdDispatch(r->cmd, gx, gy, gz);
        return VK_SUCCESS;
    }
    for (uint64_t z = 0; z < gz; z += m[2])  /* (64-bit: x + m[0] may pass 2^32) */
        for (uint64_t y = 0; y < gy; y += m[1])
            for (uint64_t x = 0; x < gx; x += m[0]) {
                vkep_push_group_base(r, (uint32_t)x, (uint32_t)y, (uint32_t)z);
                r->pieces++;
                vkCmdDispatch(r->cmd, (uint32_t)(gx - x < m[0] ? gx - x : m[0]),
                              (uint32_t)(gy - y < m[1] ? gy - y : m[1]), (uint32_t)(gz - z < m[2] ? gz - z : m[2]));
            }
    return VK_SUCCESS;
}

/* spans: nreads then nwrites (lo, hi) uint64 pairs, packed by the caller */
int vkep_dispatch(vkep_recorder* r, VkPipeline pipeline, const char* push, uint32_t push_size,
                  uint32_t gx, uint32_t gy, uint32_t gz, const char* spans, int nreads, int nwrites) {
    uint64_t sp[4 * VKEP_MAX_SPANS];
    int n = nreads + nwrites;
    if (n > 2 * VKEP_MAX_SPANS) return -1;
    memcpy(sp, spans, sizeof(uint64_t) * 2 * (size_t)n);
    pthread_mutex_lock(&r->mutex);
    if (!r->recording) { pthread_mutex_unlock(&r->mutex); return -2; }
    vkep_track(r, sp, nreads, sp + 2 * nreads, nwrites);
    if (r->bound != pipeline) {
        vkCmdBindPipeline(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
        r->bound = pipeline;
    }
    if (push_size) vkCmdPushConstants(r->cmd, r->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
    int res = vkep_dispatch_pieces(r, push_size, gx, gy, gz);
    r->commands++; r->total_commands++;
    pthread_mutex_unlock(&r->mutex);
    return res;
}

int vkep_copy(vkep_recorder* r, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t size,
              uint64_t src_addr, uint64_t dst_addr) {
    uint64_t rd[2] = {src_addr, src_addr + size}, wr[2] = {dst_addr, dst_addr + size};
    pthread_mutex_lock(&r->mutex);
    if (!r->recording) { pthread_mutex_unlock(&r->mutex); return -2; }
    vkep_track(r, rd, 1, wr, 1);
    VkBufferCopy region = {src_off, dst_off, size};
    vkCmdCopyBuffer(r->cmd, src, dst, 1, &region);
    r->commands++; r->total_commands++;
    pthread_mutex_unlock(&r->mutex);
    return VK_SUCCESS;
}

static int vkep_submit_locked(vkep_recorder* r, uint64_t signal_value);

/* the only vkQueueSubmit: a leaf lock (nothing else is taken while it is held) */
static int vkep_queue_submit(vkep_recorder* r, const VkSubmitInfo* si) {
    pthread_mutex_t* m = r->queue_mutex;
    if (m) pthread_mutex_lock(m);
    int res = vkQueueSubmit(r->queue, 1, si, VK_NULL_HANDLE);
    if (m) pthread_mutex_unlock(m);
    return res;
}

void* vkep_queue_mutex_new(void) {
    pthread_mutex_t* m = malloc(sizeof *m);
    if (m) pthread_mutex_init(m, NULL);
    return m;
}

void vkep_queue_mutex_free(void* m) {
    if (m) { pthread_mutex_destroy((pthread_mutex_t*)m); free(m); }
}

int vkep_submit(vkep_recorder* r, uint64_t signal_value) {
    pthread_mutex_lock(&r->mutex);
    int res = (r->recording || r->n_ext_signal) ? vkep_submit_locked(r, signal_value) : VK_SUCCESS;
    pthread_mutex_unlock(&r->mutex);
    return res;
}

/* a wait on / a signal of another API's timeline semaphore, joined to this stream's next submit */
int vkep_add_external(vkep_recorder* r, VkSemaphore sem, uint64_t value, int signal) {
    pthread_mutex_lock(&r->mutex);
    int* n = signal ? &r->n_ext_signal : &r->n_ext_wait;
    int res = -1;
    if (*n < VKEP_MAX_EXTERNAL) {
        (signal ? r->ext_signal : r->ext_wait)[*n] = sem;
        (signal ? r->ext_signal_value : r->ext_wait_value)[*n] = value;
        (*n)++;
        res = VK_SUCCESS;
    }
    pthread_mutex_unlock(&r->mutex);
    return res;
}

static int vkep_submit_locked(vkep_recorder* r, uint64_t signal_value) {
    int res = VK_SUCCESS, with_commands = r->recording;
    if (with_commands) {
        /* make every write visible to the host before the semaphore signals */
        VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL,
            VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        res = vkEndCommandBuffer(r->cmd);
        r->recording = 0; r->nr = r->nw = 0;
        if (res != VK_SUCCESS) return res;
    }
    /* our timeline first, then any external semaphores to signal; external waits gate the whole batch */
    VkSemaphore signals[1 + VKEP_MAX_EXTERNAL];
    uint64_t signal_values[1 + VKEP_MAX_EXTERNAL];
    VkPipelineStageFlags stages[VKEP_MAX_EXTERNAL];
    signals[0] = r->timeline; signal_values[0] = signal_value;
    for (int i = 0; i < r->n_ext_signal; i++) { signals[1 + i] = r->ext_signal[i]; signal_values[1 + i] = r->ext_signal_value[i]; }
    for (int i = 0; i < r->n_ext_wait; i++) stages[i] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo ts = {VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, NULL,
                                        (uint32_t)r->n_ext_wait, r->ext_wait_value,
                                        (uint32_t)(1 + r->n_ext_signal), signal_values};
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, &ts, (uint32_t)r->n_ext_wait, r->ext_wait, stages,
                       with_commands ? 1u : 0u, &r->cmd, (uint32_t)(1 + r->n_ext_signal), signals};
    res = vkep_queue_submit(r, &si);
    if (res == VK_SUCCESS) { r->submitted = signal_value; r->n_ext_wait = r->n_ext_signal = 0; }
    return res;
}

/* a captured graph's replay: its command buffers again, in order, in one submit that signals `value` */
int vkep_submit_again(vkep_recorder* r, const VkCommandBuffer* cmds, uint32_t n, uint64_t value) {
    pthread_mutex_lock(&r->mutex);
    VkTimelineSemaphoreSubmitInfo ts = {VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, NULL, 0, NULL, 1, &value};
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, &ts, 0, NULL, NULL, n, cmds, 1, &r->timeline};
    int res = vkep_queue_submit(r, &si);
    if (res == VK_SUCCESS) r->submitted = value;
    pthread_mutex_unlock(&r->mutex);
    return res;
}

int vkep_wait(VkDevice device, VkSemaphore timeline, uint64_t value, uint64_t timeout_ns) {
    VkSemaphoreWaitInfo wi = {VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, NULL, 0, 1, &timeline, &value};
    return vkWaitSemaphores(device, &wi, timeout_ns);
}

/* The open batch is full: submit it and open the next in a spare command buffer, or in the oldest retired
 * one once the device is done with it, so that a long run of natively replayed nodes never returns to
 * Python to flush (caller holds r->mutex). 1: rolled; 0: not here (Python flushes); < 0: a Vulkan error. */
static int vkep_roll(vkep_recorder* r) {
    if (!r->recording || r->reusable || r->n_ext_wait || r->n_ext_signal || r->n_retired == VKEP_RETIRED)
        return 0;  /* (a captured graph keeps its command buffers; external semaphores are Python's) */
    VkCommandBuffer next = VK_NULL_HANDLE;
    uint64_t done = 0;
    if (r->n_spare) {
        next = r->spare[--r->n_spare];
    } else if (r->n_retired && vkGetSemaphoreCounterValue(r->device, r->timeline, &done) == VK_SUCCESS &&
               r->retired_value[0] <= done) {
        next = r->retired[0];
        r->n_retired--;
        memmove(r->retired, r->retired + 1, sizeof(VkCommandBuffer) * (size_t)r->n_retired);
        memmove(r->retired_value, r->retired_value + 1, sizeof(uint64_t) * (size_t)r->n_retired);
    }
    if (next == VK_NULL_HANDLE) return 0;
    VkCommandBuffer full = r->cmd;
    uint64_t value = r->submitted + 1;
    int res = vkep_submit_locked(r, value);
    if (res != VK_SUCCESS) {
        r->spare[r->n_spare++] = next;
        return res < 0 ? res : -1;
    }
    r->retired[r->n_retired] = full;
    r->retired_value[r->n_retired++] = value;
    r->rolls++;
    res = vkep_begin_locked(r, next);
    return res == VK_SUCCESS ? 1 : (res < 0 ? res : -1);
}

/* can `n` more commands go into the open command buffer? (the native fast path asks, holding r->mutex)
 * 1: yes (after submitting a full batch, if need be); 0: Python records this node; < 0: a Vulkan error */
int vkep_ready(vkep_recorder* r, int n) {
    if (!r->recording) return 0;
    if (r->commands + (uint32_t)n <= r->batch_limit) return 1;
    int rolled = vkep_roll(r);
    return rolled == 1 ? r->commands + (uint32_t)n <= r->batch_limit : rolled;
}

/* Submit what the open command buffer holds now (the native replay of a node whose output the host reads:
 * it waits for its work before Compute returns), opening the next as vkep_roll does. *value: the timeline
 * value that marks the work recorded so far complete. 1: done; 0: not here (Python finishes); < 0: error. */
int vkep_submit_open(vkep_recorder* r, uint64_t* value) {
    pthread_mutex_lock(&r->mutex);
    int res = 1;
    if (r->recording && r->commands) res = vkep_roll(r);
    *value = r->submitted;
    pthread_mutex_unlock(&r->mutex);
    return res;
}

/* wait for the recorder's timeline to reach `value` (the caller waits in slices: VK_TIMEOUT returns) */
int vkep_wait_recorder(vkep_recorder* r, uint64_t value, uint64_t timeout_ns) {
    return vkep_wait(r->device, r->timeline, value, timeout_ns);
}

/* ---- host pointer -> device address, for memory whose mapping differs from its device address ----
 * An immutable snapshot swapped atomically: readers never lock; old snapshots are kept (rare, tiny). */
typedef struct { int n; uint64_t* lo; uint64_t* hi; int64_t* delta; } vkep_translation;
static vkep_translation* volatile g_translation = NULL;

void vkep_set_translations(const uint64_t* lo, const uint64_t* hi, const int64_t* delta, int n) {
    vkep_translation* t = calloc(1, sizeof(*t));
    t->n = n;
    t->lo = calloc((size_t)n + 1, 8); t->hi = calloc((size_t)n + 1, 8); t->delta = calloc((size_t)n + 1, 8);
    memcpy(t->lo, lo, 8 * (size_t)n); memcpy(t->hi, hi, 8 * (size_t)n); memcpy(t->delta, delta, 8 * (size_t)n);
    __atomic_store_n(&g_translation, t, __ATOMIC_RELEASE);
}

/* the device address of a vkep address (device address or mapped host pointer); 0 if not vkep memory */
uint64_t vkep_translate(uint64_t address) {
    vkep_translation* t = __atomic_load_n(&g_translation, __ATOMIC_ACQUIRE);
    if (t) for (int i = 0; i < t->n; i++)
        if (address >= t->lo[i] && address < t->hi[i]) return (uint64_t)((int64_t)address + t->delta[i]);
    return 0;
}

void* vkep_dispatch_fn = (void*)vkep_dispatch;
void* vkep_lock_fn = (void*)vkep_lock;
void* vkep_unlock_fn = (void*)vkep_unlock;
void* vkep_ready_fn = (void*)vkep_ready;
void* vkep_translate_fn = (void*)vkep_translate;
void* vkep_submit_open_fn = (void*)vkep_submit_open;
void* vkep_wait_recorder_fn = (void*)vkep_wait_recorder;

/* ---- validation messages ---- */
static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;
static char msg_buf[65536];
static int msg_len = 0, msg_count = 0;

static VKAPI_ATTR VkBool32 VKAPI_CALL vkep_debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
        VkDebugUtilsMessageTypeFlagsEXT types, const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
    (void)types; (void)user;
    pthread_mutex_lock(&msg_lock);
    msg_count++;
    int room = (int)sizeof(msg_buf) - msg_len - 1;
    if (room > 0) {
        int n = snprintf(msg_buf + msg_len, (size_t)room, "[%s] %s\n",
                         severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
                         data && data->pMessage ? data->pMessage : "");
        msg_len += n < room ? n : room;
    }
    pthread_mutex_unlock(&msg_lock);
    return VK_FALSE;
}

int vkep_install_messenger(VkInstance instance, VkDebugUtilsMessengerEXT* out) {
    PFN_vkCreateDebugUtilsMessengerEXT create =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
    if (!create) return VK_ERROR_EXTENSION_NOT_PRESENT;
    VkDebugUtilsMessengerCreateInfoEXT ci = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT, NULL, 0,
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        vkep_debug_cb, NULL};
    return create(instance, &ci, NULL, out);
}

void vkep_remove_messenger(VkInstance instance, VkDebugUtilsMessengerEXT messenger) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT");
    if (destroy) destroy(instance, messenger, NULL);
}

int vkep_validation_count(void) { return msg_count; }

/* copies the pending messages into buf and clears them; returns how many there were */
int vkep_validation_take(char* buf, int size) {
    pthread_mutex_lock(&msg_lock);
    int n = msg_len < size - 1 ? msg_len : size - 1;
    memcpy(buf, msg_buf, (size_t)n);
    buf[n] = 0;
    int count = msg_count;
    msg_len = 0; msg_count = 0;
    pthread_mutex_unlock(&msg_lock);
    return count;
}
