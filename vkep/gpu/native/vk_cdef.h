/* The Vulkan subset vkep uses, as cffi declarations (cdef syntax: `...` lets the compiler fill in the
 * rest of a struct or the value of a constant from <vulkan/vulkan.h>). Not compiled directly. */
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
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO ...
#define VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT ...
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
#define VK_ERROR_INITIALIZATION_FAILED ...
#define VK_ERROR_INCOMPATIBLE_DRIVER ...
#define VK_ERROR_LAYER_NOT_PRESENT ...
#define VK_ERROR_EXTENSION_NOT_PRESENT ...

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
typedef struct VkPhysicalDeviceFloatControlsProperties { VkStructureType sType; void* pNext;
    VkBool32 shaderSignedZeroInfNanPreserveFloat32; ...; }
    VkPhysicalDeviceFloatControlsProperties;
typedef struct VkPhysicalDeviceIDProperties { VkStructureType sType; void* pNext; uint8_t deviceUUID[16];
    uint8_t driverUUID[16]; ...; } VkPhysicalDeviceIDProperties;
typedef struct VkPhysicalDeviceSubgroupProperties { VkStructureType sType; void* pNext; uint32_t subgroupSize;
    uint32_t supportedStages; uint32_t supportedOperations; ...; }
    VkPhysicalDeviceSubgroupProperties;
typedef struct VkPhysicalDeviceSubgroupSizeControlProperties { VkStructureType sType; void* pNext;
    uint32_t minSubgroupSize; uint32_t maxSubgroupSize; uint32_t maxComputeWorkgroupSubgroups;
    uint32_t requiredSubgroupSizeStages; ...; } VkPhysicalDeviceSubgroupSizeControlProperties;
typedef struct VkPhysicalDeviceSubgroupSizeControlFeatures { VkStructureType sType; void* pNext;
    VkBool32 subgroupSizeControl; VkBool32 computeFullSubgroups; ...; } VkPhysicalDeviceSubgroupSizeControlFeatures;
typedef struct VkPipelineShaderStageRequiredSubgroupSizeCreateInfo { VkStructureType sType; void* pNext;
    uint32_t requiredSubgroupSize; ...; } VkPipelineShaderStageRequiredSubgroupSizeCreateInfo;
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
    VkBool32 bufferDeviceAddress; VkBool32 vulkanMemoryModel; VkBool32 vulkanMemoryModelDeviceScope; VkBool32 scalarBlockLayout;
    ...; }
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
    uint32_t batch_limit; uint64_t total_commands; uint32_t reusable; int n_ext_wait, n_ext_signal;
    void* queue_mutex; int n_spare, n_retired; VkCommandBuffer spare[8]; VkCommandBuffer retired[32];
    uint64_t retired_value[32]; uint64_t rolls; uint32_t max_groups[3]; uint64_t pieces;
    ...;
} vkep_recorder;
void* vkep_queue_mutex_new(void);
void vkep_queue_mutex_free(void* m);
int vkep_submit_again(vkep_recorder* r, const VkCommandBuffer* cmds, uint32_t n, uint64_t value);
int vkep_begin(vkep_recorder* r, VkCommandBuffer cmd);
int vkep_dispatch(vkep_recorder* r, VkPipeline pipeline, const char* push, uint32_t push_size,
    uint32_t gx, uint32_t gy, uint32_t gz, const char* spans, int nreads, int nwrites);
int vkep_copy(vkep_recorder* r, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t size,
    uint64_t src_addr, uint64_t dst_addr);
int vkep_submit(vkep_recorder* r, uint64_t signal_value);
int vkep_wait(VkDevice device, VkSemaphore timeline, uint64_t value, uint64_t timeout_ns);
int vkep_ready(vkep_recorder* r, int n);
int vkep_add_external(vkep_recorder* r, VkSemaphore sem, uint64_t value, int signal);
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
extern void* vkep_submit_open_fn;
extern void* vkep_wait_recorder_fn;
int vkep_submit_open(vkep_recorder* r, uint64_t* value);
int vkep_wait_recorder(vkep_recorder* r, uint64_t value, uint64_t timeout_ns);

/* external memory and semaphores (native/interop.c) */
#define VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT ...
#define VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_BIT ...
#define VK_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_HEAP_BIT ...
#define VK_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_RESOURCE_BIT ...
#define VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT ...
#define VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT ...
#define VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT ...
#define VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32_BIT ...
#define VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D12_FENCE_BIT ...
#define VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT ...
uint32_t vkep_external_memory_features(VkPhysicalDevice pd, uint32_t handle_type);
uint32_t vkep_external_semaphore_features(VkPhysicalDevice pd, uint32_t handle_type);
int vkep_external_memory(VkDevice dev, uint32_t handle_type, uint64_t size, uint32_t preferred_type, int fd,
                         void* win32, int export_only, VkBuffer* out_buffer, VkDeviceMemory* out_memory,
                         uint32_t* out_type);
uint64_t vkep_host_import_alignment(VkPhysicalDevice pd);
int vkep_import_host_memory(VkDevice dev, void* ptr, uint64_t size, uint32_t preferred_type,
                            VkBuffer* out_buffer, VkDeviceMemory* out_memory, uint32_t* out_type);
int vkep_memory_fd(VkDevice dev, VkDeviceMemory memory, uint32_t handle_type, int* fd);
int vkep_import_semaphore(VkDevice dev, uint32_t handle_type, int fd, void* win32, VkSemaphore* out);
int vkep_exportable_semaphore(VkDevice dev, uint32_t handle_type, VkSemaphore* out);
int vkep_semaphore_fd(VkDevice dev, VkSemaphore sem, uint32_t handle_type, int* fd);
int vkep_signal_semaphore(VkDevice dev, VkSemaphore sem, uint64_t value);

/* debug-utils messenger whose callback stays in C: messages are kept for Python to poll */
int vkep_install_messenger(VkInstance instance, VkDebugUtilsMessengerEXT* out);
void vkep_remove_messenger(VkInstance instance, VkDebugUtilsMessengerEXT messenger);
int vkep_validation_count(void);
int vkep_validation_take(char* buf, int size);

/* VK_KHR_cooperative_matrix (native/coopmat.c: vkep's own copies of its structs, for headers before 1.3.255) */
#define VKEP_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR 1000506000
#define VKEP_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR 1000506001
typedef struct vkep_coopmat_features { uint32_t sType; void* pNext; uint32_t cooperativeMatrix;
    uint32_t cooperativeMatrixRobustBufferAccess; } vkep_coopmat_features;
typedef struct vkep_coopmat_properties { uint32_t sType; void* pNext; uint32_t MSize, NSize, KSize;
    uint32_t AType, BType, CType, ResultType; uint32_t saturatingAccumulation; uint32_t scope; }
    vkep_coopmat_properties;
uint32_t vkep_coopmat_list(VkInstance instance, VkPhysicalDevice device, vkep_coopmat_properties* out, uint32_t max);
