/* VK_KHR_cooperative_matrix: the matrix sizes and types a device multiplies (its matrix units).
 * vkep's own copies of the extension's two structs (vkep_coopmat_*, member for member the same layout), so this
 * builds against Vulkan headers older than 1.3.255, where the extension first appears (Debian 12 has 1.3.239). */

typedef struct vkep_coopmat_features {  /* VkPhysicalDeviceCooperativeMatrixFeaturesKHR */
    uint32_t sType;
    void *pNext;
    uint32_t cooperativeMatrix;
    uint32_t cooperativeMatrixRobustBufferAccess;
} vkep_coopmat_features;

typedef struct vkep_coopmat_properties {  /* VkCooperativeMatrixPropertiesKHR */
    uint32_t sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    uint32_t AType, BType, CType, ResultType;  /* VkComponentTypeKHR */
    uint32_t saturatingAccumulation;
    uint32_t scope;  /* VkScopeKHR */
} vkep_coopmat_properties;

#define VKEP_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR 1000506000
#define VKEP_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR 1000506001

typedef VkResult (VKAPI_PTR *vkep_coopmat_properties_fn)(VkPhysicalDevice, uint32_t *, vkep_coopmat_properties *);

/* Fills up to `max` entries of `out` (sType set here) and returns how many the device lists; 0 where the
 * instance has no such function. */
uint32_t vkep_coopmat_list(VkInstance instance, VkPhysicalDevice device, vkep_coopmat_properties *out, uint32_t max) {
    vkep_coopmat_properties_fn list =
        (vkep_coopmat_properties_fn)vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    if (!list)
        return 0;
    uint32_t count = 0;
    if (list(device, &count, NULL) != VK_SUCCESS)
        return 0;
    if (count > max)
        count = max;
    for (uint32_t i = 0; i < count; ++i) {
        out[i].sType = VKEP_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
        out[i].pNext = NULL;
    }
    VkResult res = list(device, &count, out);
    return res == VK_SUCCESS || res == VK_INCOMPLETE ? count : 0;
}
