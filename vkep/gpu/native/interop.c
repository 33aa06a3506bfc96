/* External memory and semaphores: what another process or API allocated, imported into vkep's device.
 * Linux handles are opaque fds (VK_KHR_external_memory_fd / _semaphore_fd); Windows handles (opaque
 * Win32, D3D12 heap/resource/fence) go through VK_KHR_external_memory_win32 / _semaphore_win32, whose
 * structs are declared here by layout so this file compiles without <windows.h>. Compiled after
 * recorder.c. */

typedef struct vkep_import_win32_memory {  /* = VkImportMemoryWin32HandleInfoKHR */
    VkStructureType sType; const void* pNext; VkExternalMemoryHandleTypeFlagBits handleType;
    void* handle; const void* name;
} vkep_import_win32_memory;

typedef struct vkep_import_win32_semaphore {  /* = VkImportSemaphoreWin32HandleInfoKHR */
    VkStructureType sType; const void* pNext; VkSemaphore semaphore; VkSemaphoreImportFlags flags;
    VkExternalSemaphoreHandleTypeFlagBits handleType; void* handle; const void* name;
} vkep_import_win32_semaphore;

typedef VkResult (VKAPI_PTR *vkep_import_semaphore_win32_fn)(VkDevice, const vkep_import_win32_semaphore*);

static const VkBufferUsageFlags EXTERNAL_USAGE = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;

/* VK_EXTERNAL_MEMORY_FEATURE_* bits the device reports for buffers of that handle type */
uint32_t vkep_external_memory_features(VkPhysicalDevice pd, uint32_t handle_type) {
    VkPhysicalDeviceExternalBufferInfo info = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO, NULL, 0,
                                               EXTERNAL_USAGE, (VkExternalMemoryHandleTypeFlagBits)handle_type};
    VkExternalBufferProperties props = {VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES, NULL, {0, 0, 0}};
    vkGetPhysicalDeviceExternalBufferProperties(pd, &info, &props);
    return props.externalMemoryProperties.externalMemoryFeatures;
}

/* VK_EXTERNAL_SEMAPHORE_FEATURE_* bits for a *timeline* semaphore of that handle type */
uint32_t vkep_external_semaphore_features(VkPhysicalDevice pd, uint32_t handle_type) {
    VkSemaphoreTypeCreateInfo timeline = {VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, NULL,
                                          VK_SEMAPHORE_TYPE_TIMELINE, 0};
    VkPhysicalDeviceExternalSemaphoreInfo info = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO,
                                                  &timeline, (VkExternalSemaphoreHandleTypeFlagBits)handle_type};
    VkExternalSemaphoreProperties props = {VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES, NULL, 0, 0, 0};
    vkGetPhysicalDeviceExternalSemaphoreProperties(pd, &info, &props);
    return props.externalSemaphoreFeatures;
}

static uint32_t pick_type(uint32_t bits, uint32_t preferred) {
    if (bits & (1u << preferred)) return preferred;
    for (uint32_t i = 0; i < 32; i++) if (bits & (1u << i)) return i;
    return 0;
}

/* A buffer of `size` bytes bound to memory allocated with `chain` (an import or export struct, which
 * must chain `flags` so the memory has a device address), of a type in `type_bits`. */
static int bound_buffer(VkDevice dev, uint32_t handle_type, uint64_t size, uint32_t type_bits, uint32_t preferred_type,
                        const void* chain, VkBuffer* out_buffer, VkDeviceMemory* out_memory, uint32_t* out_type) {
    VkExternalMemoryBufferCreateInfo ext = {VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, NULL, handle_type};
    VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, &ext, 0, size, EXTERNAL_USAGE,
                             VK_SHARING_MODE_EXCLUSIVE, 0, NULL};
    VkBuffer buffer = VK_NULL_HANDLE;
    VkResult res = vkCreateBuffer(dev, &bi, NULL, &buffer);
    if (res != VK_SUCCESS) return res;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buffer, &req);
    if (!(req.memoryTypeBits & type_bits)) {
        vkDestroyBuffer(dev, buffer, NULL);
        return VK_ERROR_INVALID_EXTERNAL_HANDLE;
    }
    uint64_t alloc_size = size > req.size ? size : req.size;
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, chain, alloc_size,
                               pick_type(req.memoryTypeBits & type_bits, preferred_type)};
    VkDeviceMemory memory = VK_NULL_HANDLE;
    res = vkAllocateMemory(dev, &ai, NULL, &memory);
    if (res == VK_SUCCESS) res = vkBindBufferMemory(dev, buffer, memory, 0);
    if (res != VK_SUCCESS) {
        if (memory) vkFreeMemory(dev, memory, NULL);
        vkDestroyBuffer(dev, buffer, NULL);
        return res;
    }
    *out_buffer = buffer;
    *out_memory = memory;
    *out_type = ai.memoryTypeIndex;
    return VK_SUCCESS;
}

/* One buffer over an external allocation (or a new exportable one when export_only is set).
 * fd >= 0 for opaque-fd imports, else win32 is the Windows handle. On success the fd belongs to Vulkan. */
int vkep_external_memory(VkDevice dev, uint32_t handle_type, uint64_t size, uint32_t preferred_type, int fd,
                         void* win32, int export_only, VkBuffer* out_buffer, VkDeviceMemory* out_memory,
                         uint32_t* out_type) {
    VkMemoryAllocateFlagsInfo flags = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, NULL,
                                       VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT, 0};
    VkImportMemoryFdInfoKHR import_fd = {VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, &flags,
                                         (VkExternalMemoryHandleTypeFlagBits)handle_type, fd};
    vkep_import_win32_memory import_win32 = {VK_STRUCTURE_TYPE_IMPORT_MEMORY_WIN32_HANDLE_INFO_KHR, &flags,
                                             (VkExternalMemoryHandleTypeFlagBits)handle_type, win32, NULL};
    VkExportMemoryAllocateInfo export_info = {VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO, &flags, handle_type};
    const void* chain = export_only ? (const void*)&export_info : fd >= 0 ? (const void*)&import_fd
                                                                          : (const void*)&import_win32;
    return bound_buffer(dev, handle_type, size, ~0u, preferred_type, chain, out_buffer, out_memory, out_type);
}

/* The alignment of host pointers the device imports (VK_EXT_external_memory_host; ask only when the
 * device has that extension) */
uint64_t vkep_host_import_alignment(VkPhysicalDevice pd) {
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT, NULL, 0};
    VkPhysicalDeviceProperties2 props = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &host, {0}};
    vkGetPhysicalDeviceProperties2(pd, &props);
    return host.minImportedHostPointerAlignment;
}

/* A buffer over host memory this process already has (VK_EXT_external_memory_host): nothing is copied,
 * the device reads and writes those pages. `ptr` and `size` are multiples of the device's
 * minImportedHostPointerAlignment; the pages must stay mapped until the buffer is destroyed. */
int vkep_import_host_memory(VkDevice dev, void* ptr, uint64_t size, uint32_t preferred_type,
                            VkBuffer* out_buffer, VkDeviceMemory* out_memory, uint32_t* out_type) {
    const VkExternalMemoryHandleTypeFlagBits kind = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    PFN_vkGetMemoryHostPointerPropertiesEXT props_of =
        (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(dev, "vkGetMemoryHostPointerPropertiesEXT");
    if (!props_of) return VK_ERROR_EXTENSION_NOT_PRESENT;
    VkMemoryHostPointerPropertiesEXT props = {VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT, NULL, 0};
    VkResult res = props_of(dev, kind, ptr, &props);
    if (res != VK_SUCCESS) return res;
    VkMemoryAllocateFlagsInfo flags = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, NULL,
                                       VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT, 0};
    VkImportMemoryHostPointerInfoEXT import_host = {VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT, &flags,
                                                    kind, ptr};
    return bound_buffer(dev, kind, size, props.memoryTypeBits, preferred_type, &import_host, out_buffer, out_memory,
                        out_type);
}

/* an fd for memory allocated exportable (the producer side of a share) */
int vkep_memory_fd(VkDevice dev, VkDeviceMemory memory, uint32_t handle_type, int* fd) {
    PFN_vkGetMemoryFdKHR get = (PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(dev, "vkGetMemoryFdKHR");
    if (!get) return VK_ERROR_EXTENSION_NOT_PRESENT;
    VkMemoryGetFdInfoKHR info = {VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR, NULL, memory,
                                 (VkExternalMemoryHandleTypeFlagBits)handle_type};
    return get(dev, &info, fd);
}

/* a timeline semaphore imported from an fd (Linux) or a Windows / D3D12 fence handle */
int vkep_import_semaphore(VkDevice dev, uint32_t handle_type, int fd, void* win32, VkSemaphore* out) {
    VkSemaphoreTypeCreateInfo timeline = {VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, NULL,
                                          VK_SEMAPHORE_TYPE_TIMELINE, 0};
    VkSemaphoreCreateInfo ci = {VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &timeline, 0};
    VkSemaphore sem = VK_NULL_HANDLE;
    VkResult res = vkCreateSemaphore(dev, &ci, NULL, &sem);
    if (res != VK_SUCCESS) return res;
    if (fd >= 0) {
        PFN_vkImportSemaphoreFdKHR import = (PFN_vkImportSemaphoreFdKHR)vkGetDeviceProcAddr(dev, "vkImportSemaphoreFdKHR");
        VkImportSemaphoreFdInfoKHR info = {VK_STRUCTURE_TYPE_IMPORT_SEMAPHORE_FD_INFO_KHR, NULL, sem, 0,
                                           (VkExternalSemaphoreHandleTypeFlagBits)handle_type, fd};
        res = import ? import(dev, &info) : VK_ERROR_EXTENSION_NOT_PRESENT;
    } else {
        vkep_import_semaphore_win32_fn import =
            (vkep_import_semaphore_win32_fn)vkGetDeviceProcAddr(dev, "vkImportSemaphoreWin32HandleKHR");
        vkep_import_win32_semaphore info = {VK_STRUCTURE_TYPE_IMPORT_SEMAPHORE_WIN32_HANDLE_INFO_KHR, NULL, sem, 0,
                                            (VkExternalSemaphoreHandleTypeFlagBits)handle_type, win32, NULL};
        res = import ? import(dev, &info) : VK_ERROR_EXTENSION_NOT_PRESENT;
    }
    if (res != VK_SUCCESS) { vkDestroySemaphore(dev, sem, NULL); return res; }
    *out = sem;
    return VK_SUCCESS;
}

/* a timeline semaphore another process or API can import (the producer side), and its fd */
int vkep_exportable_semaphore(VkDevice dev, uint32_t handle_type, VkSemaphore* out) {
    VkExportSemaphoreCreateInfo export_info = {VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO, NULL, handle_type};
    VkSemaphoreTypeCreateInfo timeline = {VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, &export_info,
                                          VK_SEMAPHORE_TYPE_TIMELINE, 0};
    VkSemaphoreCreateInfo ci = {VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &timeline, 0};
    return vkCreateSemaphore(dev, &ci, NULL, out);
}

int vkep_semaphore_fd(VkDevice dev, VkSemaphore sem, uint32_t handle_type, int* fd) {
    PFN_vkGetSemaphoreFdKHR get = (PFN_vkGetSemaphoreFdKHR)vkGetDeviceProcAddr(dev, "vkGetSemaphoreFdKHR");
    if (!get) return VK_ERROR_EXTENSION_NOT_PRESENT;
    VkSemaphoreGetFdInfoKHR info = {VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR, NULL, sem,
                                    (VkExternalSemaphoreHandleTypeFlagBits)handle_type};
    return get(dev, &info, fd);
}

int vkep_signal_semaphore(VkDevice dev, VkSemaphore sem, uint64_t value) {
    VkSemaphoreSignalInfo info = {VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, NULL, sem, value};
    return vkSignalSemaphore(dev, &info);
}
