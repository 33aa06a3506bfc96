"""cffi (API mode) binding of the Vulkan subset vkep uses, plus a few lines of C for the hot path.

Compiled against the system's <vulkan/vulkan.h>, so every struct layout below is checked by the C
compiler; only the members vkep touches are declared (`...;`).  Built by `python -m vkep.build`.
"""

from __future__ import annotations

import cffi

CDEF = r"""
typedef uint32_t VkFlags;
typedef uint32_t VkBool32;
typedef uint64_t VkDeviceSize;
typedef uint64_t VkDeviceAddress;
typedef int VkResult;
typedef int VkStructureType;
typedef int VkPhysicalDeviceType;
typedef int VkSharingMode;
typedef int VkShaderStageFlagBits;
typedef int VkCommandBufferLevel;
typedef int VkSemaphoreType;
typedef int VkDriverId;
typedef struct VkInstance_T* VkInstance;
typedef struct VkPhysicalDevice_T* VkPhysicalDevice;
typedef struct VkDevice_T* VkDevice;
typedef struct VkQueue_T* VkQueue;
typedef struct VkCommandBuffer_T* VkCommandBuffer;
typedef struct VkBuffer_T* VkBuffer;
typedef struct VkDeviceMemory_T* VkDeviceMemory;
typedef struct VkShaderModule_T* VkShaderModule;
typedef struct VkPipeline_T* VkPipeline;
typedef struct VkPipelineLayout_T* VkPipelineLayout;
typedef struct VkPipelineCache_T* VkPipelineCache;
typedef struct VkCommandPool_T* VkCommandPool;
typedef struct VkSemaphore_T* VkSemaphore;
typedef struct VkDebugUtilsMessengerEXT_T* VkDebugUtilsMessengerEXT;
typedef struct VkDescriptorSetLayout_T* VkDescriptorSetLayout;

#define VK_SUCCESS 0
#define VK_TIMEOUT 2
#define VK_INCOMPLETE 5
#define VK_API_VERSION_1_2 ...
#define VK_API_VERSION_1_3 ...

#define VK_STRUCTURE_TYPE_APPLICATION_INFO ...
#define VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES ...
#define VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO ...
#define VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO ...
#define VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO ...
#define VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO ...
#define VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO ...
#define VK_PHYSICAL_DEVICE_TYPE_OTHER ...
#define VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ...
#define VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ...
#define VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU ...
#define VK_PHYSICAL_DEVICE_TYPE_CPU ...
#define VK_QUEUE_COMPUTE_BIT ...
#define VK_QUEUE_GRAPHICS_BIT ...
#define VK_QUEUE_TRANSFER_BIT ...
#define VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT ...
#define VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT ...
#define VK_MEMORY_PROPERTY_HOST_COHERENT_BIT ...
#define VK_MEMORY_PROPERTY_HOST_CACHED_BIT ...
#define VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ...
#define VK_BUFFER_USAGE_TRANSFER_SRC_BIT ...
#define VK_BUFFER_USAGE_TRANSFER_DST_BIT ...
#define VK_BUFFER_USAGE_STORAGE_BUFFER_BIT ...
#define VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT ...
#define VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT ...
#define VK_SHARING_MODE_EXCLUSIVE ...
#define VK_SHADER_STAGE_COMPUTE_BIT ...
#define VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT ...
#define VK_COMMAND_BUFFER_LEVEL_PRIMARY ...
#define VK_SEMAPHORE_TYPE_TIMELINE ...
#define VK_ERROR_OUT_OF_HOST_MEMORY ...
#define VK_ERROR_OUT_OF_DEVICE_MEMORY ...
#define VK_ERROR_DEVICE_LOST ...

typedef struct VkApplicationInfo { VkStructureType sType; const void* pNext; const char* pApplicationName;
    uint32_t applicationVersion; const char* pEngineName; uint32_t engineVersion; uint32_t apiVersion; } VkApplicationInfo;
typedef struct VkInstanceCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    const VkApplicationInfo* pApplicationInfo; uint32_t enabledLayerCount; const char* const* ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char* const* ppEnabledExtensionNames; } VkInstanceCreateInfo;
typedef struct VkLayerProperties { char layerName[...]; ...; } VkLayerProperties;
typedef struct VkExtensionProperties { char extensionName[...]; uint32_t specVersion; } VkExtensionProperties;

typedef struct VkPhysicalDeviceLimits { uint32_t maxPushConstantsSize; uint32_t maxComputeSharedMemorySize;
    uint32_t maxComputeWorkGroupCount[3]; uint32_t maxComputeWorkGroupInvocations; uint32_t maxComputeWorkGroupSize[3];
    VkDeviceSize minStorageBufferOffsetAlignment; uint32_t maxStorageBufferRange; ...; } VkPhysicalDeviceLimits;
typedef struct VkPhysicalDeviceProperties { uint32_t apiVersion; uint32_t driverVersion; uint32_t vendorID;
    uint32_t deviceID; VkPhysicalDeviceType deviceType; char deviceName[...]; uint8_t pipelineCacheUUID[16];
    VkPhysicalDeviceLimits limits; ...; } VkPhysicalDeviceProperties;
typedef struct VkPhysicalDeviceDriverProperties { VkStructureType sType; void* pNext; VkDriverId driverID;
    char driverName[...]; char driverInfo[...]; ...; } VkPhysicalDeviceDriverProperties;
typedef struct VkPhysicalDeviceSubgroupProperties { VkStructureType sType; void* pNext; uint32_t subgroupSize; ...; }
    VkPhysicalDeviceSubgroupProperties;
typedef struct VkPhysicalDeviceProperties2 { VkStructureType sType; void* pNext; VkPhysicalDeviceProperties properties; }
    VkPhysicalDeviceProperties2;

typedef struct VkPhysicalDeviceFeatures { VkBool32 shaderInt64; VkBool32 shaderInt16; VkBool32 shaderFloat64; ...; }
    VkPhysicalDeviceFeatures;
typedef struct VkPhysicalDeviceFeatures2 { VkStructureType sType; void* pNext; VkPhysicalDeviceFeatures features; }
    VkPhysicalDeviceFeatures2;
typedef struct VkPhysicalDeviceVulkan11Features { VkStructureType sType; void* pNext;
    VkBool32 storageBuffer16BitAccess; VkBool32 uniformAndStorageBuffer16BitAccess; ...; } VkPhysicalDeviceVulkan11Features;
typedef struct VkPhysicalDeviceVulkan12Features { VkStructureType sType; void* pNext;
    VkBool32 storageBuffer8BitAccess; VkBool32 shaderFloat16; VkBool32 shaderInt8; VkBool32 timelineSemaphore;
    VkBool32 bufferDeviceAddress; VkBool32 vulkanMemoryModel; VkBool32 scalarBlockLayout; ...; }
    VkPhysicalDeviceVulkan12Features;

typedef struct VkMemoryType { VkFlags propertyFlags; uint32_t heapIndex; } VkMemoryType;
typedef struct VkMemoryHeap { VkDeviceSize size; VkFlags flags; } VkMemoryHeap;
typedef struct VkPhysicalDeviceMemoryProperties { uint32_t memoryTypeCount; VkMemoryType memoryTypes[32];
    uint32_t memoryHeapCount; VkMemoryHeap memoryHeaps[16]; } VkPhysicalDeviceMemoryProperties;
typedef struct VkQueueFamilyProperties { VkFlags queueFlags; uint32_t queueCount; uint32_t timestampValidBits; ...; }
    VkQueueFamilyProperties;

typedef struct VkDeviceQueueCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    uint32_t queueFamilyIndex; uint32_t queueCount; const float* pQueuePriorities; } VkDeviceQueueCreateInfo;
typedef struct VkDeviceCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    uint32_t queueCreateInfoCount; const VkDeviceQueueCreateInfo* pQueueCreateInfos;
    uint32_t enabledExtensionCount; const char* const* ppEnabledExtensionNames;
    const VkPhysicalDeviceFeatures* pEnabledFeatures; ...; } VkDeviceCreateInfo;

typedef struct VkBufferCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags; VkDeviceSize size;
    VkFlags usage; VkSharingMode sharingMode; ...; } VkBufferCreateInfo;
typedef struct VkMemoryRequirements { VkDeviceSize size; VkDeviceSize alignment; uint32_t memoryTypeBits; }
    VkMemoryRequirements;
typedef struct VkMemoryAllocateFlagsInfo { VkStructureType sType; const void* pNext; VkFlags flags; uint32_t deviceMask; }
    VkMemoryAllocateFlagsInfo;
typedef struct VkMemoryAllocateInfo { VkStructureType sType; const void* pNext; VkDeviceSize allocationSize;
    uint32_t memoryTypeIndex; } VkMemoryAllocateInfo;
typedef struct VkBufferDeviceAddressInfo { VkStructureType sType; const void* pNext; VkBuffer buffer; }
    VkBufferDeviceAddressInfo;

typedef struct VkShaderModuleCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags; size_t codeSize;
    const uint32_t* pCode; } VkShaderModuleCreateInfo;
typedef struct VkPushConstantRange { VkFlags stageFlags; uint32_t offset; uint32_t size; } VkPushConstantRange;
typedef struct VkPipelineLayoutCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    uint32_t setLayoutCount; const VkDescriptorSetLayout* pSetLayouts; uint32_t pushConstantRangeCount;
    const VkPushConstantRange* pPushConstantRanges; } VkPipelineLayoutCreateInfo;
typedef struct VkSpecializationMapEntry { uint32_t constantID; uint32_t offset; size_t size; } VkSpecializationMapEntry;
typedef struct VkSpecializationInfo { uint32_t mapEntryCount; const VkSpecializationMapEntry* pMapEntries;
    size_t dataSize; const void* pData; } VkSpecializationInfo;
typedef struct VkPipelineShaderStageCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags; VkShaderStageFlagBits stage;
    VkShaderModule module; const char* pName; const VkSpecializationInfo* pSpecializationInfo; }
    VkPipelineShaderStageCreateInfo;
typedef struct VkComputePipelineCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    VkPipelineShaderStageCreateInfo stage; VkPipelineLayout layout; VkPipeline basePipelineHandle;
    int32_t basePipelineIndex; } VkComputePipelineCreateInfo;
typedef struct VkPipelineCacheCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    size_t initialDataSize; const void* pInitialData; } VkPipelineCacheCreateInfo;

typedef struct VkCommandPoolCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    uint32_t queueFamilyIndex; } VkCommandPoolCreateInfo;
typedef struct VkCommandBufferAllocateInfo { VkStructureType sType; const void* pNext; VkCommandPool commandPool;
    VkCommandBufferLevel level; uint32_t commandBufferCount; } VkCommandBufferAllocateInfo;
typedef struct VkSemaphoreTypeCreateInfo { VkStructureType sType; const void* pNext; VkSemaphoreType semaphoreType;
    uint64_t initialValue; } VkSemaphoreTypeCreateInfo;
typedef struct VkSemaphoreCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags; } VkSemaphoreCreateInfo;
typedef struct VkSemaphoreWaitInfo { VkStructureType sType; const void* pNext; VkFlags flags; uint32_t semaphoreCount;
    const VkSemaphore* pSemaphores; const uint64_t* pValues; } VkSemaphoreWaitInfo;


VkResult vkCreateInstance(const VkInstanceCreateInfo*, const void*, VkInstance*);
void vkDestroyInstance(VkInstance, const void*);
VkResult vkEnumerateInstanceLayerProperties(uint32_t*, VkLayerProperties*);
VkResult vkEnumerateInstanceExtensionProperties(const char*, uint32_t*, VkExtensionProperties*);
VkResult vkEnumeratePhysicalDevices(VkInstance, uint32_t*, VkPhysicalDevice*);
void vkGetPhysicalDeviceProperties2(VkPhysicalDevice, VkPhysicalDeviceProperties2*);
void vkGetPhysicalDeviceFeatures2(VkPhysicalDevice, VkPhysicalDeviceFeatures2*);
void vkGetPhysicalDeviceMemoryProperties(VkPhysicalDevice, VkPhysicalDeviceMemoryProperties*);
void vkGetPhysicalDeviceQueueFamilyProperties(VkPhysicalDevice, uint32_t*, VkQueueFamilyProperties*);
VkResult vkEnumerateDeviceExtensionProperties(VkPhysicalDevice, const char*, uint32_t*, VkExtensionProperties*);
VkResult vkCreateDevice(VkPhysicalDevice, const VkDeviceCreateInfo*, const void*, VkDevice*);
void vkDestroyDevice(VkDevice, const void*);
void vkGetDeviceQueue(VkDevice, uint32_t, uint32_t, VkQueue*);
VkResult vkDeviceWaitIdle(VkDevice);

VkResult vkCreateBuffer(VkDevice, const VkBufferCreateInfo*, const void*, VkBuffer*);
void vkDestroyBuffer(VkDevice, VkBuffer, const void*);
void vkGetBufferMemoryRequirements(VkDevice, VkBuffer, VkMemoryRequirements*);
VkResult vkAllocateMemory(VkDevice, const VkMemoryAllocateInfo*, const void*, VkDeviceMemory*);
void vkFreeMemory(VkDevice, VkDeviceMemory, const void*);
VkResult vkBindBufferMemory(VkDevice, VkBuffer, VkDeviceMemory, VkDeviceSize);
VkResult vkMapMemory(VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize, VkFlags, void**);
void vkUnmapMemory(VkDevice, VkDeviceMemory);
VkDeviceAddress vkGetBufferDeviceAddress(VkDevice, const VkBufferDeviceAddressInfo*);

VkResult vkCreateShaderModule(VkDevice, const VkShaderModuleCreateInfo*, const void*, VkShaderModule*);
void vkDestroyShaderModule(VkDevice, VkShaderModule, const void*);
VkResult vkCreatePipelineLayout(VkDevice, const VkPipelineLayoutCreateInfo*, const void*, VkPipelineLayout*);
void vkDestroyPipelineLayout(VkDevice, VkPipelineLayout, const void*);
VkResult vkCreatePipelineCache(VkDevice, const VkPipelineCacheCreateInfo*, const void*, VkPipelineCache*);
void vkDestroyPipelineCache(VkDevice, VkPipelineCache, const void*);
VkResult vkGetPipelineCacheData(VkDevice, VkPipelineCache, size_t*, void*);
VkResult vkCreateComputePipelines(VkDevice, VkPipelineCache, uint32_t, const VkComputePipelineCreateInfo*,
    const void*, VkPipeline*);
void vkDestroyPipeline(VkDevice, VkPipeline, const void*);

VkResult vkCreateCommandPool(VkDevice, const VkCommandPoolCreateInfo*, const void*, VkCommandPool*);
void vkDestroyCommandPool(VkDevice, VkCommandPool, const void*);
VkResult vkAllocateCommandBuffers(VkDevice, const VkCommandBufferAllocateInfo*, VkCommandBuffer*);
VkResult vkCreateSemaphore(VkDevice, const VkSemaphoreCreateInfo*, const void*, VkSemaphore*);
void vkDestroySemaphore(VkDevice, VkSemaphore, const void*);
VkResult vkWaitSemaphores(VkDevice, const VkSemaphoreWaitInfo*, uint64_t);
VkResult vkGetSemaphoreCounterValue(VkDevice, VkSemaphore, uint64_t*);

/* vkep's own C (see SOURCE) */
typedef struct vkep_recorder {
    VkDevice device; VkQueue queue; VkCommandBuffer cmd; VkPipelineLayout layout;
    VkSemaphore timeline; uint64_t submitted; uint32_t recording; uint32_t commands; uint32_t barriers;
    uint32_t batch_limit; uint64_t total_commands;
    ...;
} vkep_recorder;
int vkep_begin(vkep_recorder* r, VkCommandBuffer cmd);
int vkep_dispatch(vkep_recorder* r, VkPipeline pipeline, const char* push, uint32_t push_size,
    uint32_t gx, uint32_t gy, uint32_t gz, const char* spans, int nreads, int nwrites);
int vkep_copy(vkep_recorder* r, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t size,
    uint64_t src_addr, uint64_t dst_addr);
int vkep_submit(vkep_recorder* r, uint64_t signal_value);
int vkep_wait(VkDevice device, VkSemaphore timeline, uint64_t value, uint64_t timeout_ns);
int vkep_ready(vkep_recorder* r, int n);
void vkep_recorder_init(vkep_recorder* r);
void vkep_recorder_destroy(vkep_recorder* r);
void vkep_lock(vkep_recorder* r);
void vkep_unlock(vkep_recorder* r);
extern void* vkep_lock_fn;
extern void* vkep_unlock_fn;
uint64_t vkep_translate(uint64_t address);
void vkep_set_translations(const uint64_t* lo, const uint64_t* hi, const int64_t* delta, int n);
/* function pointers for other native modules (the plugin's per-node fast path) */
extern void* vkep_dispatch_fn;
extern void* vkep_ready_fn;
extern void* vkep_translate_fn;

/* debug-utils messenger whose callback stays in C: messages are kept for Python to poll */
int vkep_install_messenger(VkInstance instance, VkDebugUtilsMessengerEXT* out);
void vkep_remove_messenger(VkInstance instance, VkDebugUtilsMessengerEXT messenger);
int vkep_validation_count(void);
int vkep_validation_take(char* buf, int size);
"""

SOURCE = r"""
#include <vulkan/vulkan.h>
#include <string.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>

#define VKEP_MAX_SPANS 64

typedef struct vkep_recorder {
    VkDevice device; VkQueue queue; VkCommandBuffer cmd; VkPipelineLayout layout;
    VkSemaphore timeline; uint64_t submitted; uint32_t recording; uint32_t commands; uint32_t barriers;
    uint32_t batch_limit; uint64_t total_commands;
    VkPipeline bound;
    pthread_mutex_t mutex;  /* recursive: Python and the native replay path may record on one stream */
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
                                   VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    int res = vkBeginCommandBuffer(cmd, &bi);
    if (res != VK_SUCCESS) return res;
    r->cmd = cmd; r->recording = 1; r->commands = 0; r->bound = VK_NULL_HANDLE;
    /* earlier submissions on this queue are not ordered with this one without a barrier */
    vkep_barrier(r);
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
    vkCmdDispatch(r->cmd, gx, gy, gz);
    r->commands++; r->total_commands++;
    pthread_mutex_unlock(&r->mutex);
    return VK_SUCCESS;
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

int vkep_submit(vkep_recorder* r, uint64_t signal_value) {
    pthread_mutex_lock(&r->mutex);
    int res = r->recording ? vkep_submit_locked(r, signal_value) : VK_SUCCESS;
    pthread_mutex_unlock(&r->mutex);
    return res;
}

static int vkep_submit_locked(vkep_recorder* r, uint64_t signal_value) {
    /* make every write visible to the host before the semaphore signals */
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL,
        VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    int res = vkEndCommandBuffer(r->cmd);
    r->recording = 0; r->nr = r->nw = 0;
    if (res != VK_SUCCESS) return res;
    VkTimelineSemaphoreSubmitInfo ts = {VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, NULL, 0, NULL, 1, &signal_value};
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, &ts, 0, NULL, NULL, 1, &r->cmd, 1, &r->timeline};
    res = vkQueueSubmit(r->queue, 1, &si, VK_NULL_HANDLE);
    if (res == VK_SUCCESS) r->submitted = signal_value;
    return res;
}

int vkep_wait(VkDevice device, VkSemaphore timeline, uint64_t value, uint64_t timeout_ns) {
    VkSemaphoreWaitInfo wi = {VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, NULL, 0, 1, &timeline, &value};
    return vkWaitSemaphores(device, &wi, timeout_ns);
}

/* can `n` more commands go into the open command buffer without a submit? (the native fast path asks) */
int vkep_ready(vkep_recorder* r, int n) {
    return r->recording && r->commands + (uint32_t)n <= r->batch_limit;
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

uint64_t vkep_translate(uint64_t address) {
    vkep_translation* t = __atomic_load_n(&g_translation, __ATOMIC_ACQUIRE);
    if (t) for (int i = 0; i < t->n; i++)
        if (address >= t->lo[i] && address < t->hi[i]) return (uint64_t)((int64_t)address + t->delta[i]);
    return address;
}

void* vkep_dispatch_fn = (void*)vkep_dispatch;
void* vkep_lock_fn = (void*)vkep_lock;
void* vkep_unlock_fn = (void*)vkep_unlock;
void* vkep_ready_fn = (void*)vkep_ready;
void* vkep_translate_fn = (void*)vkep_translate;

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
"""


def builder(module_name: str) -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source(module_name, SOURCE, libraries=["vulkan"], extra_compile_args=["-O2"])
    return ffi
