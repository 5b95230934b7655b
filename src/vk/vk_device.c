/*
 * Vulkan instance, physical-device choice and device creation (or adoption of the
 * application's own objects, vka_vulkan_env).
 *
 * The only process-wide state is volk's: the loader is opened once (call_once) and its
 * vkGetInstanceProcAddr kept; volkLoadDeviceTable() reads volk's global vkGetDeviceProcAddr, so
 * that global is set and used under one mutex. Everything else lives in the context:
 * instance functions in vkr_instance_fns, device functions in a VolkDeviceTable.
 */
#include "settings.h"
#include "vk/vk_internal.h"

#include <stdlib.h>
#include <string.h>
#include <threads.h>

static once_flag loader_once = ONCE_FLAG_INIT;
static mtx_t volk_lock;
static PFN_vkGetInstanceProcAddr loader_gipa; /* written once inside call_once */

static void loader_init(void) {
    mtx_init(&volk_lock, mtx_plain);
    if (volkInitialize() == VK_SUCCESS) loader_gipa = vkGetInstanceProcAddr;
}

const char *vkr_result_name(VkResult vr) {
    switch (vr) {
#define C(x) \
    case x:  \
        return #x;
        C(VK_SUCCESS) C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_INCOMPLETE)
        C(VK_ERROR_OUT_OF_HOST_MEMORY) C(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST) C(VK_ERROR_MEMORY_MAP_FAILED)
        C(VK_ERROR_LAYER_NOT_PRESENT) C(VK_ERROR_EXTENSION_NOT_PRESENT)
        C(VK_ERROR_FEATURE_NOT_PRESENT) C(VK_ERROR_INCOMPATIBLE_DRIVER)
        C(VK_ERROR_TOO_MANY_OBJECTS) C(VK_ERROR_FORMAT_NOT_SUPPORTED) C(VK_ERROR_FRAGMENTED_POOL)
        C(VK_ERROR_OUT_OF_POOL_MEMORY) C(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        C(VK_ERROR_FRAGMENTATION) C(VK_ERROR_UNKNOWN)
#undef C
    default:
        return "VkResult(unknown)";
    }
}

vka_result vkr_check(vka_context *ctx, VkResult vr, const char *what) {
    if (vr == VK_SUCCESS) return VKA_SUCCESS;
    vka_result r = VKA_ERROR_VULKAN;
    if (vr == VK_ERROR_OUT_OF_HOST_MEMORY) r = VKA_ERROR_OUT_OF_HOST_MEMORY;
    if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY) r = VKA_ERROR_OUT_OF_DEVICE_MEMORY;
    if (vr == VK_ERROR_DEVICE_LOST) r = VKA_ERROR_DEVICE_LOST;
    return vka_set_error(ctx, r, "%s failed: %s (%d)", what, vkr_result_name(vr), (int)vr);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    vkr_device *dev = user;
    (void)types;
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        atomic_fetch_add(&dev->validation_messages, 1);
        vka_log(dev->ctx,
                severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? VKA_LOG_ERROR
                                                                          : VKA_LOG_WARN,
                "validation: %s", data && data->pMessage ? data->pMessage : "(no message)");
    }
    return VK_FALSE;
}

/* has_layer, has_instance_ext, has_device_ext: 1 = there, 0 = not, -1 = out of host memory. */
static int has_layer(const vka_context *ctx, PFN_vkEnumerateInstanceLayerProperties enumerate,
                     const char *name) {
    uint32_t n = 0;
    if (!enumerate || enumerate(&n, NULL) != VK_SUCCESS || n == 0) return false;
    VkLayerProperties *props = vka_calloc(ctx, n, sizeof *props);
    if (!props) return -1;
    bool found = false;
    if (enumerate(&n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(props[i].layerName, name) == 0;
    vka_free(ctx, props);
    return found;
}

static int has_instance_ext(const vka_context *ctx,
                            PFN_vkEnumerateInstanceExtensionProperties enumerate,
                            const char *name) {
    uint32_t n = 0;
    if (!enumerate || enumerate(NULL, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkExtensionProperties *props = vka_calloc(ctx, n, sizeof *props);
    if (!props) return -1;
    bool found = false;
    if (enumerate(NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(props[i].extensionName, name) == 0;
    vka_free(ctx, props);
    return found;
}

static int has_device_ext(const vkr_device *dev, VkPhysicalDevice phys, const char *name) {
    uint32_t n = 0;
    if (dev->vki.EnumerateDeviceExtensionProperties(phys, NULL, &n, NULL) != VK_SUCCESS || !n)
        return false;
    VkExtensionProperties *props = vka_calloc(dev->ctx, n, sizeof *props);
    if (!props) return -1;
    bool found = false;
    if (dev->vki.EnumerateDeviceExtensionProperties(phys, NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(props[i].extensionName, name) == 0;
    vka_free(dev->ctx, props);
    return found;
}

static void load_instance_fns(vkr_device *dev) {
    VkInstance in = dev->instance;
#define L(name) dev->vki.name = (PFN_vk##name)dev->gipa(in, "vk" #name)
    L(DestroyInstance);
    L(EnumeratePhysicalDevices);
    L(GetPhysicalDeviceProperties);
    L(GetPhysicalDeviceProperties2);
    L(GetPhysicalDeviceFeatures);
    L(GetPhysicalDeviceFeatures2);
    L(GetPhysicalDeviceFormatProperties);
    L(GetPhysicalDeviceMemoryProperties);
    L(GetPhysicalDeviceQueueFamilyProperties);
    L(EnumerateDeviceExtensionProperties);
    L(CreateDevice);
    L(GetDeviceProcAddr);
    L(CreateDebugUtilsMessengerEXT);
    L(DestroyDebugUtilsMessengerEXT);
#undef L
}

/* The messenger vkattn installs: warnings and errors of every type, counted by debug_callback. */
static VkDebugUtilsMessengerCreateInfoEXT messenger_info(vkr_device *dev) {
    return (VkDebugUtilsMessengerCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = debug_callback,
        .pUserData = dev,
    };
}

static vka_result create_instance(vkr_device *dev, bool validation) {
    vka_context *ctx = dev->ctx;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)dev->gipa(NULL, "vkCreateInstance");
    PFN_vkEnumerateInstanceVersion version_fn =
        (PFN_vkEnumerateInstanceVersion)dev->gipa(NULL, "vkEnumerateInstanceVersion");
    PFN_vkEnumerateInstanceLayerProperties layers_fn =
        (PFN_vkEnumerateInstanceLayerProperties)dev->gipa(NULL, "vkEnumerateInstanceLayerProperties");
    PFN_vkEnumerateInstanceExtensionProperties exts_fn =
        (PFN_vkEnumerateInstanceExtensionProperties)dev->gipa(
            NULL, "vkEnumerateInstanceExtensionProperties");
    if (!create)
        return vka_set_error(ctx, VKA_ERROR_NO_VULKAN,
                             "the Vulkan loader has no vkCreateInstance; use --backend cpu");
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (version_fn && version_fn(&loader_version) != VK_SUCCESS) loader_version = VK_API_VERSION_1_0;

    const char *layers[1];
    uint32_t n_layers = 0;
    const char *exts[4];
    uint32_t n_exts = 0;
    if (validation) {
        int layer = has_layer(dev->ctx, layers_fn, "VK_LAYER_KHRONOS_validation");
        if (layer < 0) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        if (!layer)
            return vka_set_error(ctx, VKA_ERROR_UNSUPPORTED,
                                 "validation was requested but VK_LAYER_KHRONOS_validation is not "
                                 "installed (Debian: apt install vulkan-validationlayers)");
        layers[n_layers++] = "VK_LAYER_KHRONOS_validation";
        exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }
    VkInstanceCreateFlags flags = 0;
#ifdef VK_KHR_portability_enumeration
    int portability =
        has_instance_ext(dev->ctx, exts_fn, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    if (portability < 0) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (portability) {
        exts[n_exts++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
#endif
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = dev->ctx->label,
        .pEngineName = "vkattn",
        .engineVersion = VK_MAKE_VERSION(VKA_VERSION_MAJOR, VKA_VERSION_MINOR, VKA_VERSION_PATCH),
        /* 1.1 gives vkGetPhysicalDeviceProperties2 (subgroup size, driver name); 1.0 still works */
        .apiVersion = loader_version >= VK_API_VERSION_1_1 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_0,
    };
    dev->instance_version = app.apiVersion;
    VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info(dev);
    VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = n_layers ? &mi : NULL, /* also catches create/destroy messages */
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult vr = create(&info, dev->alloc, &dev->instance);
    if (vr == VK_ERROR_INCOMPATIBLE_DRIVER)
        return vka_set_error(ctx, VKA_ERROR_NO_DEVICE,
                             "no Vulkan driver is installed (vkCreateInstance: "
                             "VK_ERROR_INCOMPATIBLE_DRIVER); install your GPU's Vulkan driver or "
                             "Mesa's lavapipe (mesa-vulkan-drivers), or use --backend cpu");
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreateInstance");
    dev->own_instance = true;
    load_instance_fns(dev);
    if (n_layers && dev->vki.CreateDebugUtilsMessengerEXT) {
        vr = dev->vki.CreateDebugUtilsMessengerEXT(dev->instance, &mi, dev->alloc, &dev->messenger);
        if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreateDebugUtilsMessengerEXT");
    }
    return VKA_SUCCESS;
}

static vka_device_type map_type(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return VKA_DEVICE_TYPE_INTEGRATED_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return VKA_DEVICE_TYPE_DISCRETE_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return VKA_DEVICE_TYPE_VIRTUAL_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return VKA_DEVICE_TYPE_CPU;
    default: return VKA_DEVICE_TYPE_OTHER;
    }
}

/* The compute queue family to use: prefer one with timestamps, then a compute-only one.
 * The families on the stack (devices have a handful), so running out of host memory is not
 * mistaken for "no compute queue"; -1 = none. */
static int pick_queue_family(const vkr_device *dev, VkPhysicalDevice phys, uint32_t *valid_bits) {
    uint32_t n = 0;
    dev->vki.GetPhysicalDeviceQueueFamilyProperties(phys, &n, NULL);
    VkQueueFamilyProperties q[64];
    if (n > VKA_ARRAY_LEN(q)) n = VKA_ARRAY_LEN(q);
    dev->vki.GetPhysicalDeviceQueueFamilyProperties(phys, &n, q);
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0) continue;
        int score = (q[i].timestampValidBits > 0 ? 2 : 0) +
                    (q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT ? 0 : 1);
        if (score > best_score) {
            best = (int)i;
            best_score = score;
            *valid_bits = q[i].timestampValidBits;
        }
    }
    return best;
}

/* The 16-bit features the device has: storageBuffer16BitAccess (VK_KHR_16bit_storage, core in
 * 1.1) and shaderFloat16 (VK_KHR_shader_float16_int8, core in 1.2), read with
 * vkGetPhysicalDeviceFeatures2, so only when the instance and the device are 1.1 or later; the
 * float16 structure only where the device has 1.2 or the extension. */
static void query_16bit(const vkr_device *dev, VkPhysicalDevice phys, uint32_t api,
                        bool *storage, bool *float16) {
    *storage = *float16 = false;
    if (!dev->vki.GetPhysicalDeviceFeatures2 || api < VK_API_VERSION_1_1 ||
        dev->instance_version < VK_API_VERSION_1_1)
        return;
    bool f16_known = (api >= VK_API_VERSION_1_2 && dev->instance_version >= VK_API_VERSION_1_2) ||
                     has_device_ext(dev, phys, "VK_KHR_shader_float16_int8") == 1;
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .pNext = f16_known ? &f16 : NULL};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &s16};
    dev->vki.GetPhysicalDeviceFeatures2(phys, &f2);
    *storage = s16.storageBuffer16BitAccess == VK_TRUE;
    *float16 = f16_known && f16.shaderFloat16 == VK_TRUE;
}

/* What vkattn's kernels do with 16-bit data: 16-bit loads and stores where they use 16-bit
 * storage, else packed words; fp32 arithmetic either way, so never VKA_16BIT_STORAGE_FP16. */
static vka_16bit_path path_16bit(bool s16_kernels) {
    return s16_kernels ? VKA_16BIT_STORAGE : VKA_16BIT_PACKED;
}

static void fill_info(vkr_device *dev, uint32_t index, VkPhysicalDevice phys, vka_device_info *o) {
    VkPhysicalDeviceProperties p;
    dev->vki.GetPhysicalDeviceProperties(phys, &p);
    VkPhysicalDeviceMemoryProperties mp;
    dev->vki.GetPhysicalDeviceMemoryProperties(phys, &mp);
    memset(o, 0, sizeof *o);
    o->index = index;
    snprintf(o->name, sizeof o->name, "%s", p.deviceName);
    o->type = map_type(p.deviceType);
    o->vendor_id = p.vendorID;
    o->device_id = p.deviceID;
    o->api_version = p.apiVersion;
    o->driver_version = p.driverVersion;
    for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
        if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            o->device_local_bytes = VKA_MAX(o->device_local_bytes, mp.memoryHeaps[h].size);
    for (uint32_t t = 0; t < mp.memoryTypeCount; t++) {
        VkMemoryPropertyFlags f = mp.memoryTypes[t].propertyFlags;
        VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        if ((f & want) == want &&
            mp.memoryHeaps[mp.memoryTypes[t].heapIndex].size >= o->device_local_bytes &&
            o->type != VKA_DEVICE_TYPE_DISCRETE_GPU)
            o->unified_memory = true;
    }
    o->max_storage_buffer_range = p.limits.maxStorageBufferRange;
    o->max_memory_allocation_size = 1ull << 30; /* unknown before 1.1, which guarantees 2^30 */
    for (int i = 0; i < 3; i++) {
        o->max_compute_work_group_count[i] = p.limits.maxComputeWorkGroupCount[i];
        o->max_compute_work_group_size[i] = p.limits.maxComputeWorkGroupSize[i];
    }
    o->max_compute_work_group_invocations = p.limits.maxComputeWorkGroupInvocations;
    o->max_compute_shared_memory_size = p.limits.maxComputeSharedMemorySize;
    o->max_push_constants_size = p.limits.maxPushConstantsSize;
    o->timestamp_period = p.limits.timestampPeriod;
    uint32_t ts_bits = 0;
    o->has_compute = pick_queue_family(dev, phys, &ts_bits) >= 0;
    o->timestamps = ts_bits > 0 && p.limits.timestampPeriod > 0;

    /* vkGetPhysicalDeviceProperties2 is core 1.1: usable only when both the instance and the
     * device are 1.1 or later (an application's 1.0 instance may hand us a 1.3 device). */
    if (dev->vki.GetPhysicalDeviceProperties2 && p.apiVersion >= VK_API_VERSION_1_1 &&
        dev->instance_version >= VK_API_VERSION_1_1) {
        VkPhysicalDeviceDriverProperties drv = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
        VkPhysicalDeviceMaintenance3Properties m3 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
            .pNext = p.apiVersion >= VK_API_VERSION_1_2 && dev->instance_version >= VK_API_VERSION_1_2
                         ? &drv : NULL};
        VkPhysicalDeviceSubgroupProperties sg = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &m3};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &sg};
        dev->vki.GetPhysicalDeviceProperties2(phys, &p2);
        o->subgroup_size = sg.subgroupSize;
        if (m3.maxMemoryAllocationSize) /* 0: the chain was not filled (e.g. a 1.0 instance
                                         * declared as newer in vka_vulkan_env.api_version) */
            o->max_memory_allocation_size = m3.maxMemoryAllocationSize;
        if (m3.pNext) {
            snprintf(o->driver_name, sizeof o->driver_name, "%s", drv.driverName);
            snprintf(o->driver_info, sizeof o->driver_info, "%s", drv.driverInfo);
        }
    }
    query_16bit(dev, phys, p.apiVersion, &o->storage_16bit_supported, &o->float16_supported);
    /* what it would use if vkattn created the device; the selected one's is set once known */
    o->path_16bit = path_16bit(o->storage_16bit_supported); /* with the default settings */
}

static int type_rank(vka_device_type t) {
    switch (t) {
    case VKA_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VKA_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VKA_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VKA_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

static vka_result enumerate_devices(vkr_device *dev) {
    vka_context *ctx = dev->ctx;
    uint32_t n = 0;
    VkResult vr = dev->vki.EnumeratePhysicalDevices(dev->instance, &n, NULL);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkEnumeratePhysicalDevices");
    if (n == 0)
        return vka_set_error(ctx, VKA_ERROR_NO_DEVICE,
                             "no Vulkan device found; install a Vulkan driver (or Mesa's lavapipe: "
                             "mesa-vulkan-drivers) or use --backend cpu");
    dev->phys_list = vka_calloc(dev->ctx, n, sizeof *dev->phys_list);
    dev->infos = vka_calloc(dev->ctx, n, sizeof *dev->infos);
    if (!dev->phys_list || !dev->infos)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vr = dev->vki.EnumeratePhysicalDevices(dev->instance, &n, dev->phys_list);
    if (vr != VK_SUCCESS && vr != VK_INCOMPLETE) return vkr_check(ctx, vr, "vkEnumeratePhysicalDevices");
    dev->n_phys = n;
    for (uint32_t i = 0; i < n; i++) fill_info(dev, i, dev->phys_list[i], &dev->infos[i]);
    return VKA_SUCCESS;
}

/* want: the settings' device index (NULL = the best); from_env: it came from VKATTN_DEVICE. */
static vka_result select_device(vkr_device *dev, const char *want, bool from_env) {
    vka_context *ctx = dev->ctx;
    const char *source = from_env ? "VKATTN_DEVICE" : "device";
    if (want) {
        char *end = NULL;
        long idx = strtol(want, &end, 10);
        if (!end || *end || end == want || idx < 0 || (uint64_t)idx >= dev->n_phys) {
            char list[600] = "";
            size_t used = 0;
            for (uint32_t i = 0; i < dev->n_phys && used < sizeof list - 80; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%u: %s",
                                         i ? ", " : "", i, dev->infos[i].name);
            return vka_set_error(ctx, VKA_ERROR_NO_DEVICE,
                                 "%s \"%s\" is not a device index; the devices are %s", source,
                                 want, list);
        }
        if (!dev->infos[idx].has_compute)
            return vka_set_error(ctx, VKA_ERROR_NO_DEVICE, "device %ld (%s) has no compute queue",
                                 idx, dev->infos[idx].name);
        dev->selected = (uint32_t)idx;
        return VKA_SUCCESS;
    }
    int best = -1;
    for (uint32_t i = 0; i < dev->n_phys; i++) {
        if (!dev->infos[i].has_compute) continue;
        if (best < 0 || type_rank(dev->infos[i].type) > type_rank(dev->infos[best].type)) best = (int)i;
    }
    if (best < 0)
        return vka_set_error(ctx, VKA_ERROR_NO_DEVICE,
                             "no Vulkan device has a compute queue; use --backend cpu");
    dev->selected = (uint32_t)best;
    return VKA_SUCCESS;
}

static vka_result load_device_table(vkr_device *dev) {
    mtx_lock(&volk_lock);
    vkGetDeviceProcAddr = dev->vki.GetDeviceProcAddr; /* volk's global, read by the next call */
    volkLoadDeviceTable(&dev->vk, dev->device);
    mtx_unlock(&volk_lock);
    if (!dev->vk.vkCreateBuffer || !dev->vk.vkQueueSubmit)
        return vka_set_error(dev->ctx, VKA_ERROR_VULKAN, "could not load Vulkan device functions");
    return VKA_SUCCESS;
}

static vka_result create_device(vkr_device *dev) {
    vka_context *ctx = dev->ctx;
    VkPhysicalDevice phys = dev->phys_list[dev->selected];
    int family = pick_queue_family(dev, phys, &dev->timestamp_valid_bits);
    if (family < 0)
        return vka_set_error(ctx, VKA_ERROR_NO_DEVICE, "device %s has no compute queue",
                             dev->infos[dev->selected].name);
    dev->queue_family = (uint32_t)family;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qinfo = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                     .queueFamilyIndex = dev->queue_family,
                                     .queueCount = 1,
                                     .pQueuePriorities = &priority};
    const char *exts[2];
    uint32_t n_exts = 0;
    /* The spec requires enabling VK_KHR_portability_subset where it is exposed (MoltenVK). */
    int subset = has_device_ext(dev, phys, "VK_KHR_portability_subset");
    if (subset < 0) return vka_set_error(dev->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (subset) exts[n_exts++] = "VK_KHR_portability_subset";
    /* 16-bit features: enabled where the device has them (query_16bit), so that 16-bit tensors
     * can use them; nothing of the fp32 kernels changes. */
    const vka_device_info *di = &dev->infos[dev->selected];
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
        .shaderFloat16 = VK_TRUE};
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = VK_TRUE};
    void *features = NULL;
    if (di->float16_supported) {
        features = &f16;
        if (di->api_version < VK_API_VERSION_1_2 || dev->instance_version < VK_API_VERSION_1_2)
            exts[n_exts++] = "VK_KHR_shader_float16_int8";
    }
    if (di->storage_16bit_supported) {
        s16.pNext = features;
        features = &s16;
    }
    VkDeviceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                               .pNext = features,
                               .queueCreateInfoCount = 1,
                               .pQueueCreateInfos = &qinfo,
                               .enabledExtensionCount = n_exts,
                               .ppEnabledExtensionNames = exts};
    VkResult vr = dev->vki.CreateDevice(phys, &info, dev->alloc, &dev->device);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreateDevice");
    dev->own_device = true;
    dev->storage_16bit = di->storage_16bit_supported;
    dev->float16 = di->float16_supported;
    vka_result r = load_device_table(dev);
    if (r != VKA_SUCCESS) return r;
    dev->vk.vkGetDeviceQueue(dev->device, dev->queue_family, 0, &dev->queue);
    return VKA_SUCCESS;
}

/* Kernel variants: the settings' (desc or VKATTN_KERNELS), else by device type. */
static bool want_cpu_kernels(vka_kernels k, vka_device_type type) {
    if (k == VKA_KERNELS_GPU) return false;
    if (k == VKA_KERNELS_CPU) return true;
    return type == VKA_DEVICE_TYPE_CPU;
}

/* Fill the chosen device's properties the backend needs. */
static void finish_selection(vkr_device *dev, const vka_settings *s) {
    vka_kernels kernels = s->kernels;
    uint64_t max_binding = s->max_binding_bytes;
    vka_device_info *sel = &dev->infos[dev->selected];
    sel->selected = true;
    sel->storage_16bit = dev->storage_16bit;
    sel->float16 = dev->float16;
    dev->s16_kernels = dev->storage_16bit && s->storage_16bit_kernels;
    sel->path_16bit = path_16bit(dev->s16_kernels);
    dev->phys = dev->phys_list[dev->selected];
    dev->vki.GetPhysicalDeviceProperties(dev->phys, &dev->props);
    dev->vki.GetPhysicalDeviceMemoryProperties(dev->phys, &dev->mem_props);
    const vka_device_info *info = &dev->infos[dev->selected];
    dev->is_cpu = want_cpu_kernels(kernels, info->type);
    dev->unified_memory = info->unified_memory;
    dev->timestamps = info->timestamps;
    uint64_t range = dev->props.limits.maxStorageBufferRange;
    dev->max_binding_bytes = max_binding && max_binding < range ? max_binding : range;
    VkDeviceSize align = 16;
    while (align < dev->props.limits.minStorageBufferOffsetAlignment && align < 256) align *= 2;
    /* Texel loads: only for the CPU-type variants (on llvmpipe a uniform texel buffer fetch is
     * one gather, a storage buffer load a loop over the lanes: matmul 2x). RGBA32F uniform
     * texel buffers are mandatory, but check; VKATTN_TEXEL_LOADS=0 turns them off (tests,
     * benchmarks of the storage-buffer path). Texel views start where the storage range does,
     * so bind_align grows to the texel alignment (CPU-type variants only: GPUs keep theirs). */
    VkFormatProperties fp = {0}, fp1 = {0};
    dev->vki.GetPhysicalDeviceFormatProperties(dev->phys, VK_FORMAT_R32G32B32A32_SFLOAT, &fp);
    dev->vki.GetPhysicalDeviceFormatProperties(dev->phys, VK_FORMAT_R32_SFLOAT, &fp1);
    VkDeviceSize texel_align = dev->props.limits.minTexelBufferOffsetAlignment;
    dev->texel_operands = dev->is_cpu && s->texel_loads &&
                          (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                          (fp1.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                          texel_align <= 256;
    /* and 16-bit elements (bf16, fp16 operands) as R16_UINT and R16G16B16A16_UINT texels, and
     * eight a texel as R32G32B32A32_UINT (vkv_texel_format) */
    VkFormatProperties fp16 = {0}, fp16x4 = {0}, fp16x8 = {0};
    dev->vki.GetPhysicalDeviceFormatProperties(dev->phys, VK_FORMAT_R16_UINT, &fp16);
    dev->vki.GetPhysicalDeviceFormatProperties(dev->phys, VK_FORMAT_R16G16B16A16_UINT, &fp16x4);
    dev->vki.GetPhysicalDeviceFormatProperties(dev->phys, VK_FORMAT_R32G32B32A32_UINT, &fp16x8);
    dev->texel_16bit = dev->texel_operands &&
                       (fp16.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                       (fp16x4.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                       (fp16x8.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT);
    while (dev->texel_operands && align < texel_align) align *= 2;
    dev->bind_align = align;
}

/* Validation on the application's instance: vkattn cannot enable a layer on an instance it did
 * not create, so it checks that the application did and adds its own messenger. The layers
 * active on an instance are what vkEnumerateDeviceLayerProperties lists (the spec: "exactly
 * the sequence of layers enabled for the instance", implicit and VK_INSTANCE_LAYERS ones
 * included); vkGetInstanceProcAddr returns NULL for vkCreateDebugUtilsMessengerEXT unless
 * VK_EXT_debug_utils is enabled. from_env: the request came from VKATTN_VALIDATION. */
static vka_result adopt_validation(vkr_device *dev, VkPhysicalDevice phys, bool from_env) {
    vka_context *ctx = dev->ctx;
    const char *asked = from_env ? "VKATTN_VALIDATION=1" : "vka_context_desc.validation = 1";
    const char *off = from_env ? "unset VKATTN_VALIDATION or set vka_context_desc.validation = -1"
                               : "set vka_context_desc.validation = -1";
    PFN_vkEnumerateDeviceLayerProperties enumerate =
        (PFN_vkEnumerateDeviceLayerProperties)dev->gipa(dev->instance,
                                                        "vkEnumerateDeviceLayerProperties");
    uint32_t n = 0;
    VkResult vr = enumerate ? enumerate(phys, &n, NULL) : VK_ERROR_INITIALIZATION_FAILED;
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkEnumerateDeviceLayerProperties");
    VkLayerProperties *props = vka_calloc(ctx, n ? n : 1, sizeof *props);
    if (!props) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vr = enumerate(phys, &n, props);
    bool found = false;
    for (uint32_t i = 0; vr == VK_SUCCESS && i < n && !found; i++)
        found = strcmp(props[i].layerName, "VK_LAYER_KHRONOS_validation") == 0;
    vka_free(ctx, props);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkEnumerateDeviceLayerProperties");
    if (!found)
        return vka_set_error(ctx, VKA_ERROR_UNSUPPORTED,
                             "%s asks for validation, but the application's VkInstance "
                             "(vka_vulkan_env.instance) was not created with "
                             "VK_LAYER_KHRONOS_validation, and vkattn cannot enable a layer on an "
                             "instance it did not create: enable the layer and VK_EXT_debug_utils "
                             "in its VkInstanceCreateInfo, or %s", asked, off);
    if (!dev->vki.CreateDebugUtilsMessengerEXT || !dev->vki.DestroyDebugUtilsMessengerEXT)
        return vka_set_error(ctx, VKA_ERROR_UNSUPPORTED,
                             "%s asks for validation: the application's VkInstance has "
                             "VK_LAYER_KHRONOS_validation but not VK_EXT_debug_utils, which vkattn "
                             "needs for the messenger that counts the layer's messages: enable the "
                             "extension in its VkInstanceCreateInfo, or %s", asked, off);
    VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info(dev);
    vr = dev->vki.CreateDebugUtilsMessengerEXT(dev->instance, &mi, dev->alloc, &dev->messenger);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreateDebugUtilsMessengerEXT");
    return VKA_SUCCESS;
}

static vka_result adopt_env(vkr_device *dev, const vka_vulkan_env *env, const vka_settings *s) {
    vka_context *ctx = dev->ctx;
    if (!env->instance || !env->physical_device || !env->device || !env->queue)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_vulkan_env needs instance, physical_device, device and queue");
    dev->gipa = env->get_instance_proc_addr ? (PFN_vkGetInstanceProcAddr)env->get_instance_proc_addr
                                            : loader_gipa;
    if (!dev->gipa)
        return vka_set_error(ctx, VKA_ERROR_NO_VULKAN, "no vkGetInstanceProcAddr was given and the "
                                                       "Vulkan loader could not be opened");
    if (!env->lock_queue != !env->unlock_queue)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_vulkan_env: give both lock_queue and unlock_queue, or neither");
    dev->lock_queue = env->lock_queue;
    dev->unlock_queue = env->unlock_queue;
    dev->queue_user_data = env->queue_user_data;
    dev->instance_version = env->api_version ? env->api_version : VK_API_VERSION_1_0;
    dev->instance = (VkInstance)env->instance;
    load_instance_fns(dev);
    vka_result r = enumerate_devices(dev);
    if (r != VKA_SUCCESS) return r;
    dev->selected = UINT32_MAX;
    for (uint32_t i = 0; i < dev->n_phys; i++)
        if (dev->phys_list[i] == (VkPhysicalDevice)env->physical_device) dev->selected = i;
    if (dev->selected == UINT32_MAX)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_vulkan_env.physical_device is not a device of its instance");
    if (s->validation) {
        r = adopt_validation(dev, dev->phys_list[dev->selected], s->validation_from_env);
        if (r != VKA_SUCCESS) return r;
    }
    /* The application's device has only the features it enabled: vkattn cannot ask, so it
     * takes what vka_vulkan_env says, and refuses a claim the device cannot back. */
    const vka_device_info *di = &dev->infos[dev->selected];
    bool no_storage = env->storage_16bit && !di->storage_16bit_supported;
    if (no_storage || (env->float16 && !di->float16_supported))
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_vulkan_env.%s is set, but device %u (%s) does not report %s%s",
                             no_storage ? "storage_16bit" : "float16", dev->selected, di->name,
                             no_storage ? "storageBuffer16BitAccess" : "shaderFloat16",
                             dev->instance_version < VK_API_VERSION_1_1
                                 ? " (vkattn cannot ask on a Vulkan 1.0 instance: set "
                                   "vka_vulkan_env.api_version to the instance's version)"
                                 : "");
    dev->storage_16bit = env->storage_16bit;
    dev->float16 = env->float16;
    dev->device = (VkDevice)env->device;
    dev->queue = (VkQueue)env->queue;
    dev->queue_family = env->queue_family;
    r = load_device_table(dev);
    if (r != VKA_SUCCESS) return r;
    finish_selection(dev, s);
    /* Timestamps depend on the application's queue family. */
    uint32_t n = 0;
    dev->vki.GetPhysicalDeviceQueueFamilyProperties(dev->phys, &n, NULL);
    VkQueueFamilyProperties *q = vka_calloc(dev->ctx, n ? n : 1, sizeof *q);
    if (!q) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    dev->vki.GetPhysicalDeviceQueueFamilyProperties(dev->phys, &n, q);
    bool ok = dev->queue_family < n && (q[dev->queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT);
    dev->timestamp_valid_bits = ok ? q[dev->queue_family].timestampValidBits : 0;
    dev->timestamps = dev->timestamp_valid_bits > 0 && dev->props.limits.timestampPeriod > 0;
    vka_free(dev->ctx, q);
    if (!ok)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_vulkan_env.queue_family %u has no compute support",
                             env->queue_family);
    return VKA_SUCCESS;
}

vka_result vkr_device_create(vka_context *ctx, const vka_settings *s, vkr_device **out) {
    *out = NULL;
    call_once(&loader_once, loader_init);
    vkr_device *dev = vka_calloc(ctx, 1, sizeof *dev);
    if (!dev) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    dev->ctx = ctx;
    dev->alloc = (const VkAllocationCallbacks *)s->vk_allocator;
    dev->fail_alloc_at = s->fail_alloc_at;
    dev->fail_submit_at = s->fail_submit_at;
    *out = dev;
    if (s->vulkan) return adopt_env(dev, s->vulkan, s);

    dev->gipa = loader_gipa;
    if (!dev->gipa)
        return vka_set_error(ctx, VKA_ERROR_NO_VULKAN,
                             "the Vulkan loader (libvulkan.so.1) could not be opened; install it "
                             "(Debian: libvulkan1) with a driver, or use --backend cpu");
    vka_result r = create_instance(dev, s->validation);
    if (r == VKA_SUCCESS) r = enumerate_devices(dev);
    if (r == VKA_SUCCESS) r = select_device(dev, s->device, s->device_from_env);
    if (r == VKA_SUCCESS) r = create_device(dev);
    if (r == VKA_SUCCESS) finish_selection(dev, s);
    if (r == VKA_SUCCESS) {
        const vka_device_info *i = &dev->infos[dev->selected];
        vka_log(ctx, VKA_LOG_INFO, "Vulkan device %u: %s (%s %s)", dev->selected, i->name,
                i->driver_name, i->driver_info);
    }
    return r;
}

VkResult vkr_queue_submit(vkr_device *dev, const VkSubmitInfo *si, VkFence fence) {
    if (++dev->n_submits == dev->fail_submit_at) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    if (dev->lock_queue) dev->lock_queue(dev->queue_user_data, (void *)dev->queue);
    VkResult vr = dev->vk.vkQueueSubmit(dev->queue, si ? 1 : 0, si, fence);
    if (dev->unlock_queue) dev->unlock_queue(dev->queue_user_data, (void *)dev->queue);
    return vr;
}

void vkr_device_destroy(vkr_device *dev) {
    if (!dev) return;
    if (dev->own_device && dev->device) {
        dev->vk.vkDeviceWaitIdle(dev->device); /* our own device: nothing of the application's */
        dev->vk.vkDestroyDevice(dev->device, dev->alloc);
    }
    if (dev->messenger && dev->vki.DestroyDebugUtilsMessengerEXT)
        dev->vki.DestroyDebugUtilsMessengerEXT(dev->instance, dev->messenger, dev->alloc);
    if (dev->own_instance && dev->instance && dev->vki.DestroyInstance)
        dev->vki.DestroyInstance(dev->instance, dev->alloc);
    vka_free(dev->ctx, dev->phys_list);
    vka_free(dev->ctx, dev->infos);
    vka_free(dev->ctx, dev);
}
