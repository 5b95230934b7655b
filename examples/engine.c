/* examples/engine.c: vkattn inside an engine's frame loop.
 *
 * An application that owns its Vulkan objects (instance, device, one compute queue) and runs a
 * small language model as part of its frame, the way a game engine would run an NPC's "brain"
 * next to its own GPU work. Each frame records into ONE command buffer:
 *
 *   (1) the engine's own compute shader (engine_simulate.comp: particles that follow the model's
 *       token probabilities of the previous frame),
 *   (2) vkattn's decode step for this frame's token (vka_gpt_session_prepare, then
 *       vka_graph_record: vkattn records its commands, with its own barriers at entry and exit),
 *   (3) the engine's shader after it (engine_argmax.comp: reads the logits straight from the
 *       session's buffer, vka_gpt_session_logits_buffer, and writes the greedy next token and
 *       the probabilities into the engine's view buffer),
 *
 * submitted with a timeline semaphore (frame f waits for value f and signals f + 1). A second
 * thread ("streaming") submits its own small work to the same queue all along; the queue is
 * shared by the frames, that thread and vkattn through one mutex (Vulkan requires vkQueueSubmit
 * on a queue to be externally synchronised), which vkattn takes through the lock callbacks of
 * vka_vulkan_env.
 *
 * At the end it checks its own result: the tokens of the frame loop must be those of a plain
 * blocking loop (vka_gpt_session_append + greedy vka_gpt_session_sample) on the same model.
 * With validation (VKATTN_VALIDATION=1 or --validation) it runs under VK_LAYER_KHRONOS_validation
 * with synchronization validation (thread checks are on by default) and fails on any message.
 *
 *   engine [--frames N] [--model MODEL.bin] [--tokenizer TOK.bin] [--prompt TEXT]
 *          [--validation] [--quiet] [--inject-hazard]
 *
 * Without --model it makes a small random model (fixed seed). Exit status: 0 = every check
 * passed, 1 = a failure (message on stderr), 77 = no Vulkan 1.2 device with timeline
 * semaphores (a failure instead when VKATTN_REQUIRE_GPU=1).
 *
 * As an example it ends the program on any Vulkan or vkattn error; an engine would handle them.
 */
#define _POSIX_C_SOURCE 200809L
#include <vulkan/vulkan.h>
#include <vkattn.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

/* SPIR-V of the two shaders, compiled by glslangValidator at build time (examples/CMakeLists). */
#include "engine_argmax.spv.h"
#include "engine_simulate.spv.h"

enum {
    PARTICLES = 4096,
    SKIP = 77, /* ctest's SKIP_RETURN_CODE */
};
static const uint64_t FRAME_TIMEOUT_NS = 60ull * 1000 * 1000 * 1000;

/* ------------------------------------------------------------------------------------------
 * Errors: an example ends the program.
 * ---------------------------------------------------------------------------------------- */
static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "engine: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

#define VK_CHECK(call)                                                                        \
    do {                                                                                      \
        VkResult vk_check_r = (call);                                                         \
        if (vk_check_r != VK_SUCCESS) {                                                       \
            fprintf(stderr, "engine: %s failed: VkResult %d\n", #call, (int)vk_check_r);     \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#define VKA_CHECK(ctx, call)                                                                  \
    do {                                                                                      \
        vka_result vka_check_r = (call);                                                      \
        if (vka_check_r != VKA_SUCCESS) {                                                     \
            fprintf(stderr, "engine: %s failed: %s: %s\n", #call,                            \
                    vka_result_string(vka_check_r), vka_last_error(ctx));                     \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------------------------------
 * The engine's Vulkan objects.
 * ---------------------------------------------------------------------------------------- */
typedef struct engine {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger; /* only with validation */
    atomic_uint messages;               /* validation warnings and errors: any fails the run */
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem;
    VkDevice device;
    uint32_t family;
    VkQueue queue;  /* the one queue: frames, the streaming thread and vkattn all submit here */
    mtx_t queue_lock; /* held around every vkQueueSubmit on it, by everyone */
} engine;

/* Messages come from any thread that calls Vulkan (the frame loop, the streaming thread). */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *d,
                                                    void *user) {
    (void)types;
    engine *e = user;
    if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        atomic_fetch_add(&e->messages, 1);
        fprintf(stderr, "validation: %s\n", d && d->pMessage ? d->pMessage : "?");
    }
    return VK_FALSE;
}

static bool instance_has(const char *layer, const char *extension) {
    uint32_t n = 0;
    if (!extension) {
        vkEnumerateInstanceLayerProperties(&n, NULL);
        VkLayerProperties *p = calloc(n + 1, sizeof *p);
        vkEnumerateInstanceLayerProperties(&n, p);
        bool found = false;
        for (uint32_t i = 0; i < n; i++) found = found || strcmp(p[i].layerName, layer) == 0;
        free(p);
        return found;
    }
    vkEnumerateInstanceExtensionProperties(layer, &n, NULL);
    VkExtensionProperties *p = calloc(n + 1, sizeof *p);
    vkEnumerateInstanceExtensionProperties(layer, &n, p);
    bool found = false;
    for (uint32_t i = 0; i < n; i++) found = found || strcmp(p[i].extensionName, extension) == 0;
    free(p);
    return found;
}

/* A Vulkan 1.2 instance; with validation, the Khronos layer with synchronization validation
 * and a messenger that counts its messages (also chained into VkInstanceCreateInfo, so that
 * vkCreateInstance and vkDestroyInstance are covered). */
static bool create_instance(engine *e, bool validation) {
    uint32_t version = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2) {
        fprintf(stderr, "engine: the Vulkan loader is older than 1.2\n");
        return false;
    }
    const char *layer = "VK_LAYER_KHRONOS_validation";
    if (validation && !instance_has(layer, NULL))
        die("validation asked for but %s is not installed", layer);
    const char *exts[2] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    uint32_t n_exts = 1;
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_validation,
        .pUserData = e};
    /* Synchronization validation is off by default; the environment can also turn it on
     * (VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT). */
    VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                        .pNext = &mi,
                                        .enabledValidationFeatureCount = 1,
                                        .pEnabledValidationFeatures = enables};
    const void *next = &mi;
    if (validation && instance_has(layer, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME)) {
        exts[n_exts++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
        next = &features;
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "vkattn engine example",
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pNext = validation ? next : NULL,
                               .pApplicationInfo = &app,
                               .enabledLayerCount = validation ? 1 : 0,
                               .ppEnabledLayerNames = &layer,
                               .enabledExtensionCount = validation ? n_exts : 0,
                               .ppEnabledExtensionNames = exts};
    if (vkCreateInstance(&ii, NULL, &e->instance) != VK_SUCCESS) {
        fprintf(stderr, "engine: vkCreateInstance failed (no Vulkan driver?)\n");
        return false;
    }
    if (validation) {
        PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(e->instance, "vkCreateDebugUtilsMessengerEXT");
        VK_CHECK(create(e->instance, &mi, NULL, &e->messenger));
    }
    return true;
}

/* The best device (discrete > integrated > virtual > CPU) with Vulkan 1.2, timeline semaphores
 * and a compute queue family; a device with one queue of it, timeline semaphores enabled. */
static bool create_device(engine *e) {
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(e->instance, &n, NULL);
    VkPhysicalDevice *devs = calloc(n + 1, sizeof *devs);
    vkEnumeratePhysicalDevices(e->instance, &n, devs);
    static const int rank[] = {[VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU] = 4,
                               [VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU] = 3,
                               [VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU] = 2,
                               [VK_PHYSICAL_DEVICE_TYPE_CPU] = 1};
    int best_rank = 0;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(devs[i], &p);
        VkPhysicalDeviceVulkan12Features f12 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
        VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = &f12};
        if (p.apiVersion < VK_API_VERSION_1_2) continue;
        vkGetPhysicalDeviceFeatures2(devs[i], &f);
        uint32_t nq = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(devs[i], &nq, NULL);
        VkQueueFamilyProperties *q = calloc(nq + 1, sizeof *q);
        vkGetPhysicalDeviceQueueFamilyProperties(devs[i], &nq, q);
        uint32_t family = UINT32_MAX;
        for (uint32_t j = 0; j < nq && family == UINT32_MAX; j++)
            if (q[j].queueFlags & VK_QUEUE_COMPUTE_BIT) family = j;
        free(q);
        int r = p.deviceType <= VK_PHYSICAL_DEVICE_TYPE_CPU ? rank[p.deviceType] : 0;
        if (f12.timelineSemaphore && family != UINT32_MAX && r + 1 > best_rank) {
            best_rank = r + 1;
            e->phys = devs[i];
            e->family = family;
        }
    }
    free(devs);
    if (!e->phys) return false;
    vkGetPhysicalDeviceProperties(e->phys, &e->props);
    vkGetPhysicalDeviceMemoryProperties(e->phys, &e->mem);

    float priority = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = e->family, .queueCount = 1,
                                  .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .timelineSemaphore = VK_TRUE};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f12,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi};
    VK_CHECK(vkCreateDevice(e->phys, &di, NULL, &e->device));
    vkGetDeviceQueue(e->device, e->family, 0, &e->queue);
    return true;
}

/* vkattn calls these right before and after each of its vkQueueSubmit calls on our queue
 * (vka_vulkan_env.lock_queue / unlock_queue), from the thread using its context. */
static void lock_queue(void *user, void *queue) {
    (void)queue;
    mtx_lock(&((engine *)user)->queue_lock);
}
static void unlock_queue(void *user, void *queue) {
    (void)queue;
    mtx_unlock(&((engine *)user)->queue_lock);
}

static void submit_locked(engine *e, const VkSubmitInfo *si, VkFence fence) {
    mtx_lock(&e->queue_lock);
    VkResult r = vkQueueSubmit(e->queue, 1, si, fence);
    mtx_unlock(&e->queue_lock);
    VK_CHECK(r);
}

/* ------------------------------------------------------------------------------------------
 * Buffers and the engine's two compute pipelines.
 * ---------------------------------------------------------------------------------------- */
typedef struct app_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped; /* host-visible buffers only */
} app_buffer;

/* host: host-visible and coherent, mapped; else device-local where the device has it. */
static app_buffer buffer_create(engine *e, VkDeviceSize size, VkBufferUsageFlags usage,
                                bool host) {
    app_buffer b = {0};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                             .usage = usage};
    VK_CHECK(vkCreateBuffer(e->device, &bi, NULL, &b.buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(e->device, b.buffer, &req);
    VkMemoryPropertyFlags want = host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                            VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                      : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t type = UINT32_MAX;
    for (int pass = 0; pass < 2 && type == UINT32_MAX; pass++)
        for (uint32_t i = 0; i < e->mem.memoryTypeCount && type == UINT32_MAX; i++)
            if ((req.memoryTypeBits & (1u << i)) &&
                (pass == 1 || (e->mem.memoryTypes[i].propertyFlags & want) == want))
                type = i;
    if (host && !(e->mem.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
        die("%s", "no host-visible coherent memory for a buffer");
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size, .memoryTypeIndex = type};
    VK_CHECK(vkAllocateMemory(e->device, &ai, NULL, &b.memory));
    VK_CHECK(vkBindBufferMemory(e->device, b.buffer, b.memory, 0));
    if (host) VK_CHECK(vkMapMemory(e->device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return b;
}

static void buffer_destroy(engine *e, app_buffer *b) {
    vkDestroyBuffer(e->device, b->buffer, NULL);
    vkFreeMemory(e->device, b->memory, NULL); /* unmaps */
}

/* The view buffer: what the argmax pass writes for the host and the next frame. */
typedef struct view_header {
    uint32_t token;  /* greedy next token */
    float max_logit;
    float sum;       /* softmax denominator */
    uint32_t frame;  /* the frame that wrote it */
    /* float prob[V] follows */
} view_header;

/* Push constants of both shaders (their `Push` block). */
typedef struct engine_push {
    uint32_t V;
    uint32_t logits_first; /* element index of the first logit within binding 0 */
    uint32_t P;
    uint32_t frame;
    float dt;
} engine_push;

typedef struct app_pipelines {
    VkDescriptorSetLayout set_layout; /* 0: logits, 1: view, 2: particles (storage buffers) */
    VkPipelineLayout layout;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    VkPipeline simulate, argmax;
} app_pipelines;

static VkPipeline compute_pipeline(engine *e, VkPipelineLayout layout, const uint32_t *code,
                                   size_t bytes) {
    VkShaderModuleCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = bytes, .pCode = code};
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(e->device, &si, NULL, &module));
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = module, .pName = "main"},
        .layout = layout};
    VkPipeline p;
    VK_CHECK(vkCreateComputePipelines(e->device, VK_NULL_HANDLE, 1, &ci, NULL, &p));
    vkDestroyShaderModule(e->device, module, NULL);
    return p;
}

/* Both pipelines share one layout and one descriptor set. Binding 0 is the session's logits
 * buffer: vkattn gives its offset as a multiple of 4 only, so the binding starts at the offset
 * aligned down to minStorageBufferOffsetAlignment and the shader skips *logits_first floats. */
static app_pipelines pipelines_create(engine *e, VkBuffer logits, uint64_t logits_offset,
                                      uint64_t logits_size, const app_buffer *view,
                                      VkDeviceSize view_size, const app_buffer *particles,
                                      uint32_t *logits_first) {
    app_pipelines p = {0};
    VkDescriptorSetLayoutBinding b[3];
    for (uint32_t i = 0; i < 3; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = 3, .pBindings = b};
    VK_CHECK(vkCreateDescriptorSetLayout(e->device, &li, NULL, &p.set_layout));
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = sizeof(engine_push)};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1, .pSetLayouts = &p.set_layout,
                                      .pushConstantRangeCount = 1, .pPushConstantRanges = &pr};
    VK_CHECK(vkCreatePipelineLayout(e->device, &pli, NULL, &p.layout));
    p.simulate = compute_pipeline(e, p.layout, engine_spv_simulate, sizeof engine_spv_simulate);
    p.argmax = compute_pipeline(e, p.layout, engine_spv_argmax, sizeof engine_spv_argmax);

    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 3};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                      .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
    VK_CHECK(vkCreateDescriptorPool(e->device, &dpi, NULL, &p.pool));
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = p.pool, .descriptorSetCount = 1,
                                      .pSetLayouts = &p.set_layout};
    VK_CHECK(vkAllocateDescriptorSets(e->device, &ai, &p.set));

    VkDeviceSize align = e->props.limits.minStorageBufferOffsetAlignment;
    VkDeviceSize start = logits_offset / align * align;
    *logits_first = (uint32_t)((logits_offset - start) / 4);
    VkDescriptorBufferInfo infos[3] = {
        {.buffer = logits, .offset = start, .range = logits_offset - start + logits_size},
        {.buffer = view->buffer, .offset = 0, .range = view_size},
        {.buffer = particles->buffer, .offset = 0, .range = VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[3];
    for (uint32_t i = 0; i < 3; i++)
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = p.set, .dstBinding = i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &infos[i]};
    vkUpdateDescriptorSets(e->device, 3, w, 0, NULL);
    return p;
}

static void pipelines_destroy(engine *e, app_pipelines *p) {
    vkDestroyPipeline(e->device, p->simulate, NULL);
    vkDestroyPipeline(e->device, p->argmax, NULL);
    vkDestroyDescriptorPool(e->device, p->pool, NULL);
    vkDestroyPipelineLayout(e->device, p->layout, NULL);
    vkDestroyDescriptorSetLayout(e->device, p->set_layout, NULL);
}

static VkCommandPool command_pool(engine *e) {
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = e->family};
    VkCommandPool pool;
    VK_CHECK(vkCreateCommandPool(e->device, &pi, NULL, &pool));
    return pool;
}

static VkCommandBuffer command_buffer(engine *e, VkCommandPool pool) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkCommandBuffer cmd;
    VK_CHECK(vkAllocateCommandBuffers(e->device, &ai, &cmd));
    return cmd;
}

static void memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                           VkAccessFlags src_access, VkPipelineStageFlags dst_stage,
                           VkAccessFlags dst_access) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = src_access, .dstAccessMask = dst_access};
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* ------------------------------------------------------------------------------------------
 * The second thread: its own small transfers on the same queue, through the same lock, until
 * told to stop (an engine's asset streaming, say). Its command pool is its own: command pools
 * are externally synchronised too.
 * ---------------------------------------------------------------------------------------- */
typedef struct streamer {
    engine *e;
    atomic_bool stop;
    atomic_uint submissions;
    atomic_uint wrong; /* fills whose result the host did not see */
} streamer;

static int streamer_main(void *arg) {
    streamer *s = arg;
    engine *e = s->e;
    enum { WORDS = 16384 };
    app_buffer buf = buffer_create(e, WORDS * 4, VK_BUFFER_USAGE_TRANSFER_DST_BIT, true);
    VkCommandPool pool = command_pool(e);
    VkCommandBuffer cmd = command_buffer(e, pool);
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    VK_CHECK(vkCreateFence(e->device, &fi, NULL, &fence));
    for (uint32_t i = 1; !atomic_load(&s->stop); i++) {
        VK_CHECK(vkResetCommandBuffer(cmd, 0));
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        VK_CHECK(vkBeginCommandBuffer(cmd, &bi));
        vkCmdFillBuffer(cmd, buf.buffer, 0, VK_WHOLE_SIZE, i);
        memory_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
        VK_CHECK(vkEndCommandBuffer(cmd));
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &cmd};
        submit_locked(e, &si, fence);
        VK_CHECK(vkWaitForFences(e->device, 1, &fence, VK_TRUE, FRAME_TIMEOUT_NS));
        VK_CHECK(vkResetFences(e->device, 1, &fence));
        const uint32_t *w = buf.mapped;
        if (w[0] != i || w[WORDS - 1] != i) atomic_fetch_add(&s->wrong, 1);
        atomic_fetch_add(&s->submissions, 1);
        thrd_sleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL); /* ~1 kHz */
    }
    vkDestroyFence(e->device, fence, NULL);
    vkDestroyCommandPool(e->device, pool, NULL);
    buffer_destroy(e, &buf);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Options.
 * ---------------------------------------------------------------------------------------- */
typedef struct options {
    int frames;
    const char *model, *tokenizer, *prompt;
    bool validation, quiet, inject_hazard;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "Usage: engine [options]\n\n"
            "An engine-style frame loop: its own compute work and a vkattn decode step in one\n"
            "command buffer per frame, a second thread submitting to the same queue.\n\n"
            "  --frames N          frames to run (default 32)\n"
            "  --model FILE        llm.c checkpoint (default: a random model, seed 1337)\n"
            "  --tokenizer FILE    tokenizer file: print text instead of token ids\n"
            "  --prompt TEXT       prompt (needs --tokenizer; default: token ids 0 1 2 3)\n"
            "  --validation        run under VK_LAYER_KHRONOS_validation with synchronization\n"
            "                      validation; any message fails (also VKATTN_VALIDATION=1)\n"
            "  --quiet             do not print the tokens\n"
            "  --inject-hazard     clear the particles right after the particle pass with no\n"
            "                      barrier (to show that synchronization validation reports it)\n");
}

static options parse(int argc, char **argv) {
    options o = {.frames = 32};
    const char *env = getenv("VKATTN_VALIDATION");
    o.validation = env && strcmp(env, "1") == 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--frames") == 0 && has_value) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 1000000) die("--frames %s: want 1 .. 1000000", argv[i]);
            o.frames = (int)n;
        } else if (strcmp(a, "--model") == 0 && has_value) {
            o.model = argv[++i];
        } else if (strcmp(a, "--tokenizer") == 0 && has_value) {
            o.tokenizer = argv[++i];
        } else if (strcmp(a, "--prompt") == 0 && has_value) {
            o.prompt = argv[++i];
        } else if (strcmp(a, "--validation") == 0) {
            o.validation = true;
        } else if (strcmp(a, "--quiet") == 0) {
            o.quiet = true;
        } else if (strcmp(a, "--inject-hazard") == 0) {
            o.inject_hazard = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            die("unknown option or missing value: %s", a);
        }
    }
    if (o.prompt && !o.tokenizer) die("%s", "--prompt needs --tokenizer");
    return o;
}

/* ------------------------------------------------------------------------------------------
 * The frame.
 * ---------------------------------------------------------------------------------------- */
typedef struct frame_state {
    VkCommandBuffer cmd;
    VkSemaphore timeline; /* value f + 1 = frame f completed */
    app_pipelines *pipes;
    app_buffer *particles;
    engine_push push;
    bool inject_hazard;
} frame_state;

static void bind_ours(VkCommandBuffer cmd, const app_pipelines *p, VkPipeline pipeline,
                      const engine_push *push) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &p->set, 0,
                            NULL);
    vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof *push, push);
}

/* Record frame f: (1) the particles, (2) vkattn's step, (3) the argmax pass. */
static void record_frame(frame_state *fs, vka_context *ctx, vka_graph *step, uint32_t f) {
    VkCommandBuffer cmd = fs->cmd;
    VK_CHECK(vkResetCommandBuffer(cmd, 0));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_CHECK(vkBeginCommandBuffer(cmd, &bi));
    fs->push.frame = f;
    if (f == 0) { /* the particles start at rest on the floor */
        vkCmdFillBuffer(cmd, fs->particles->buffer, 0, VK_WHOLE_SIZE, 0);
        memory_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    }

    /* (1) The engine's own work. It reads the view buffer the previous frame's argmax pass
     * wrote: that frame's commands are ordered before these by the timeline semaphore wait of
     * this submission (value f), which also makes their writes visible. */
    bind_ours(cmd, fs->pipes, fs->pipes->simulate, &fs->push);
    vkCmdDispatch(cmd, (PARTICLES + 63) / 64, 1, 1);
    /* A bug on purpose: clear the particles the shader just wrote, with no barrier between.
     * (The validation layer 1.3.239 reports this transfer-after-dispatch hazard, but not a
     * second dispatch writing them: it misses hazards between two dispatches.) */
    if (fs->inject_hazard) vkCmdFillBuffer(cmd, fs->particles->buffer, 0, VK_WHOLE_SIZE, 0);

    /* (2) vkattn's decode step. vka_graph_record puts a global memory barrier before its
     * commands (from all earlier commands' writes and the host's) and one after them (to all
     * later commands and the host), so no barrier of ours is needed on either side. */
    VKA_CHECK(ctx, vka_graph_record(step, cmd));

    /* (3) The engine's work on the model's output. vkattn left its own pipeline, descriptor
     * set 0 and push constants bound: bind ours again. */
    bind_ours(cmd, fs->pipes, fs->pipes->argmax, &fs->push);
    vkCmdDispatch(cmd, 1, 1, 1);
    /* The host reads the view buffer once the frame has completed. */
    memory_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VK_CHECK(vkEndCommandBuffer(cmd));
}

/* Frame f waits for timeline value f (frame f - 1 complete; 0 for the first) and signals
 * f + 1. (Timeline semaphores only: lavapipe's vkQueueSubmit blocks on a binary semaphore
 * wait whose signal is still behind an unmet wait.) */
static void submit_frame(engine *e, frame_state *fs, uint32_t f) {
    uint64_t wait = f, signal = (uint64_t)f + 1;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = 1, .pWaitSemaphoreValues = &wait,
                                        .signalSemaphoreValueCount = 1,
                                        .pSignalSemaphoreValues = &signal};
    VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ti,
                       .waitSemaphoreCount = 1, .pWaitSemaphores = &fs->timeline,
                       .pWaitDstStageMask = &stage, .commandBufferCount = 1,
                       .pCommandBuffers = &fs->cmd, .signalSemaphoreCount = 1,
                       .pSignalSemaphores = &fs->timeline};
    submit_locked(e, &si, VK_NULL_HANDLE);
}

static void wait_timeline(engine *e, VkSemaphore s, uint64_t value) {
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1, .pSemaphores = &s, .pValues = &value};
    VkResult r = vkWaitSemaphores(e->device, &wi, FRAME_TIMEOUT_NS);
    if (r == VK_TIMEOUT) die("%s", "a frame did not complete within 60 s");
    VK_CHECK(r);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    if (n == 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void print_token(const vka_tokenizer *tok, int32_t id) {
    if (tok) {
        size_t len = 0;
        const char *bytes = vka_tokenizer_decode(tok, id, &len);
        fwrite(bytes, 1, len, stdout);
    } else {
        printf(" %d", (int)id);
    }
    fflush(stdout);
}

static void on_log(void *user, vka_log_level level, const char *message) {
    (void)user;
    fprintf(stderr, "vkattn %s: %s\n", level == VKA_LOG_ERROR ? "error" : "warning", message);
}

int main(int argc, char **argv) {
    options opt = parse(argc, argv);
    const char *require = getenv("VKATTN_REQUIRE_GPU");
    bool required = require && strcmp(require, "1") == 0;

    /* --- The engine's Vulkan objects ---------------------------------------------------- */
    engine e = {0};
    atomic_init(&e.messages, 0);
    mtx_init(&e.queue_lock, mtx_plain);
    if (!create_instance(&e, opt.validation)) return required ? 1 : SKIP;
    if (!create_device(&e)) {
        fprintf(stderr, "engine: no Vulkan 1.2 device with timeline semaphores and compute\n");
        return required ? 1 : SKIP;
    }
    printf("engine: %s, validation %s\n", e.props.deviceName,
           opt.validation ? "on (synchronization validation, thread checks)" : "off");

    /* --- vkattn on them --------------------------------------------------------------------
     * The context uses our instance, device and queue (and never destroys them); it calls our
     * lock around each of its submissions. validation -1: our layer and messenger do it. */
    vka_vulkan_env env = {.get_instance_proc_addr = (void *)vkGetInstanceProcAddr,
                          .instance = e.instance, .physical_device = e.phys,
                          .device = e.device, .queue = e.queue, .queue_family = e.family,
                          .api_version = VK_API_VERSION_1_2,
                          .lock_queue = lock_queue, .unlock_queue = unlock_queue,
                          .queue_user_data = &e};
    vka_context_desc cd = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env, .validation = -1,
                           .log = on_log, .log_level = VKA_LOG_WARN, .label = "engine"};
    vka_context *ctx = NULL;
    VKA_CHECK(ctx, vka_context_create(&cd, &ctx));

    vka_tokenizer *tok = NULL;
    if (opt.tokenizer) VKA_CHECK(ctx, vka_tokenizer_load(ctx, opt.tokenizer, &tok));
    vka_gpt *gpt = NULL;
    if (opt.model) {
        VKA_CHECK(ctx, vka_gpt_load(ctx, opt.model, &gpt));
    } else {
        vka_gpt_config small = {.max_T = 64, .V = tok ? vka_tokenizer_vocab_size(tok) : 256,
                                .L = 4, .NH = 4, .C = 128};
        VKA_CHECK(ctx, vka_gpt_create(ctx, &small, 1337, &gpt));
    }
    vka_gpt_config cfg = vka_gpt_get_config(gpt);
    if (tok && vka_tokenizer_vocab_size(tok) != cfg.V)
        die("the tokenizer's vocabulary is not the model's (%s)", opt.tokenizer);

    /* The prompt: the frame loop prefills it (a chunk per frame), then decodes one token per
     * frame. */
    int32_t *prompt = calloc((size_t)cfg.max_T, sizeof *prompt);
    size_t n_prompt = 4;
    if (tok) {
        const char *text = opt.prompt ? opt.prompt : "\n";
        int32_t *ids = calloc(strlen(text) + 1, sizeof *ids);
        VKA_CHECK(ctx, vka_tokenizer_encode(tok, text, strlen(text), ids, &n_prompt));
        if (n_prompt == 0 || n_prompt > (size_t)cfg.max_T)
            die("the prompt must be 1 .. max_T tokens long (%s)", text);
        memcpy(prompt, ids, n_prompt * sizeof *ids);
        free(ids);
    } else {
        for (size_t i = 0; i < n_prompt; i++) prompt[i] = (int32_t)(i % (size_t)cfg.V);
    }

    /* A session (KV cache). A decode step fills no more than the prefill chunk and never
     * re-prefills by itself: when the cache is full, the loop below spends a frame on
     * re-prefilling its last max_T/2 tokens (what vka_gpt_session_append does then). */
    int chunk = cfg.max_T < 64 ? cfg.max_T : 64;
    vka_gpt_session_desc sdesc = {.prefill_chunk = chunk};
    vka_gpt_session *sess = NULL;
    VKA_CHECK(ctx, vka_gpt_session_create(gpt, &sdesc, &sess));

    /* --- The engine's buffers and pipelines ---------------------------------------------- */
    VkBuffer logits = VK_NULL_HANDLE;
    uint64_t logits_offset = 0, logits_size = 0;
    VKA_CHECK(ctx, vka_gpt_session_logits_buffer(sess, &logits, &logits_offset, &logits_size));
    VkDeviceSize view_size = sizeof(view_header) + (VkDeviceSize)cfg.V * 4;
    app_buffer view = buffer_create(&e, view_size, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, true);
    memset(view.mapped, 0, view_size); /* frame 0's particles see all probabilities 0 */
    app_buffer particles = buffer_create(&e, PARTICLES * 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                         VK_BUFFER_USAGE_TRANSFER_DST_BIT, false);
    uint32_t logits_first = 0;
    app_pipelines pipes = pipelines_create(&e, logits, logits_offset, logits_size, &view,
                                           view_size, &particles, &logits_first);
    VkCommandPool pool = command_pool(&e);
    VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
    frame_state fs = {.cmd = command_buffer(&e, pool), .pipes = &pipes, .particles = &particles,
                      .push = {.V = (uint32_t)cfg.V, .logits_first = logits_first,
                               .P = PARTICLES, .dt = 1.0f / 60.0f},
                      .inject_hazard = opt.inject_hazard};
    VK_CHECK(vkCreateSemaphore(e.device, &sci, NULL, &fs.timeline));

    /* --- The streaming thread ------------------------------------------------------------ */
    streamer st = {.e = &e};
    atomic_init(&st.stop, false);
    atomic_init(&st.submissions, 0);
    atomic_init(&st.wrong, 0);
    thrd_t thread;
    if (thrd_create(&thread, streamer_main, &st) != thrd_success) die("%s", "thrd_create failed");

    /* --- The frame loop --------------------------------------------------------------------
     * The next token comes out of frame f, and vka_gpt_session_prepare writes the step's
     * inputs into the session's host-visible buffers, so frame f + 1's step is prepared only
     * after frame f completed: decode frames do not overlap (one frame in flight). */
    int32_t *context = calloc((size_t)cfg.max_T, sizeof *context); /* what the cache holds */
    size_t n_context = 0, prompt_done = 0;
    int32_t *generated = calloc((size_t)opt.frames, sizeof *generated);
    double *one_token_ms = calloc((size_t)opt.frames, sizeof *one_token_ms);
    int n_generated = 0, n_one_token = 0, prefill_frames = 0, refill_frames = 0, failures = 0;
    double first_ms = 0.0, loop_t0 = now_ms();
    int32_t next = 0;
    if (!opt.quiet && tok) {
        for (size_t i = 0; i < n_prompt; i++) print_token(tok, prompt[i]);
    }
    for (uint32_t f = 0; f < (uint32_t)opt.frames; f++) {
        double t0 = now_ms();
        /* What this frame feeds the model: the next piece of the prompt, a re-prefill of the
         * last max_T/2 tokens when the cache is full, or the token the last frame picked. */
        const int32_t *feed;
        size_t m;
        enum { PREFILL, REFILL, DECODE } kind;
        if (prompt_done < n_prompt) {
            kind = PREFILL;
            feed = prompt + prompt_done;
            m = n_prompt - prompt_done < (size_t)chunk ? n_prompt - prompt_done : (size_t)chunk;
        } else if (n_context == (size_t)cfg.max_T) {
            kind = REFILL;
            m = (size_t)cfg.max_T / 2;
            feed = context + n_context - m;
            vka_gpt_session_reset(sess);
        } else {
            kind = DECODE;
            feed = &next;
            m = 1;
        }
        vka_graph *step = NULL;
        VKA_CHECK(ctx, vka_gpt_session_prepare(sess, feed, m, &step));
        record_frame(&fs, ctx, step, f);
        submit_frame(&e, &fs, f);
        /* (An engine would do its host work for the frame here.) */
        wait_timeline(&e, fs.timeline, (uint64_t)f + 1);
        /* The step's commands completed: the session takes its tokens into the cache. */
        VKA_CHECK(ctx, vka_gpt_session_finish(sess));

        if (kind == REFILL) {
            memmove(context, feed, m * sizeof *context);
            n_context = m;
            refill_frames++;
        } else {
            memcpy(context + n_context, feed, m * sizeof *context);
            n_context += m;
            if (kind == PREFILL) {
                prompt_done += m;
                prefill_frames++;
            }
        }
        if (vka_gpt_session_length(sess) != n_context) {
            fprintf(stderr, "engine: frame %u: the session holds %zu tokens, want %zu\n", f,
                    vka_gpt_session_length(sess), n_context);
            failures++;
        }
        const view_header *v = view.mapped;
        const float *prob = (const float *)(v + 1);
        if (v->frame != f) {
            fprintf(stderr, "engine: frame %u: the argmax pass did not run\n", f);
            failures++;
        }
        /* The last prompt piece and each decode frame give the next token (a re-prefill's
         * logits are those of a token already generated: the pending token goes next). */
        if (kind == DECODE || (kind == PREFILL && prompt_done == n_prompt)) {
            next = (int32_t)v->token;
            /* Cross-checks of the engine's shader: vkattn's greedy choice, probabilities. */
            int32_t want = -1;
            VKA_CHECK(ctx, vka_gpt_session_sample(sess, NULL, NULL, &want));
            double total = 0.0;
            for (int i = 0; i < cfg.V; i++) total += prob[i];
            if (next != want || next < 0 || next >= cfg.V || !(total > 0.999 && total < 1.001)) {
                fprintf(stderr, "engine: frame %u: shader token %d, vkattn's greedy %d, "
                        "probabilities sum to %g\n", f, (int)next, (int)want, total);
                failures++;
            }
            generated[n_generated++] = next;
            if (!opt.quiet) print_token(tok, next);
        }
        double ms = now_ms() - t0;
        if (f == 0) first_ms = ms;
        if (kind == DECODE) one_token_ms[n_one_token++] = ms;
    }
    double loop_ms = now_ms() - loop_t0;
    while (atomic_load(&st.submissions) < 2) /* (a very short run: let it submit at least twice) */
        thrd_sleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    atomic_store(&st.stop, true);
    thrd_join(thread, NULL);
    if (!opt.quiet) printf("\n");

    /* --- The check: a plain blocking greedy loop on the same model ----------------------- */
    vka_gpt_session *ref = NULL;
    VKA_CHECK(ctx, vka_gpt_session_create(gpt, &sdesc, &ref));
    VKA_CHECK(ctx, vka_gpt_session_append(ref, prompt, n_prompt));
    int equal = 0;
    double *ref_ms = calloc((size_t)n_generated + 1, sizeof *ref_ms); /* per token */
    for (int i = 0; i < n_generated; i++) {
        int32_t t = -1;
        double t0 = now_ms();
        VKA_CHECK(ctx, vka_gpt_session_sample(ref, NULL, NULL, &t));
        if (t == generated[i]) equal++;
        else if (equal == i) fprintf(stderr, "engine: token %d: frame loop %d, blocking loop %d\n",
                                     i, (int)generated[i], (int)t);
        if (i + 1 < n_generated) VKA_CHECK(ctx, vka_gpt_session_append(ref, &t, 1));
        ref_ms[i] = now_ms() - t0;
    }
    double ref_median = median(ref_ms, n_generated > 1 ? n_generated - 1 : 0);
    free(ref_ms);
    vka_gpt_session_destroy(ref);

    double sum = 0.0;
    for (int i = 0; i < n_one_token; i++) sum += one_token_ms[i];
    double mean = n_one_token ? sum / n_one_token : 0.0, med = median(one_token_ms, n_one_token);
    printf("engine: %d frames in %.0f ms: %d prefill, %d re-prefill, %d one-token; %d tokens "
           "generated\n", opt.frames, loop_ms, prefill_frames, refill_frames, n_one_token,
           n_generated);
    printf("engine: per-frame time of the one-token frames: median %.2f ms, mean %.2f ms "
           "(first frame, the prompt: %.2f ms); the blocking loop (sample, append): median "
           "%.2f ms per token\n", med, mean, first_ms, ref_median);
    printf("engine: model L=%d C=%d NH=%d V=%d max_T=%d; %d particles; logits at byte %llu of "
           "vkattn's buffer (bound from %llu)\n", cfg.L, cfg.C, cfg.NH, cfg.V, cfg.max_T,
           PARTICLES, (unsigned long long)logits_offset,
           (unsigned long long)(logits_offset - 4ull * logits_first));
    printf("engine: streaming thread: %u submissions on the shared queue, %u wrong\n",
           atomic_load(&st.submissions), atomic_load(&st.wrong));
    printf("engine: tokens equal to the blocking vka_gpt_session_append loop: %d of %d\n", equal,
           n_generated);

    /* --- Teardown: our queue is idle once we say so (vkattn never waits on it for us). ---- */
    VK_CHECK(vkDeviceWaitIdle(e.device));
    vka_gpt_session_destroy(sess);
    vka_gpt_destroy(gpt);
    vka_tokenizer_destroy(tok);
    vka_context_destroy(ctx);
    vkDestroySemaphore(e.device, fs.timeline, NULL);
    vkDestroyCommandPool(e.device, pool, NULL);
    pipelines_destroy(&e, &pipes);
    buffer_destroy(&e, &particles);
    buffer_destroy(&e, &view);
    vkDestroyDevice(e.device, NULL);
    if (e.messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(e.instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(e.instance, e.messenger, NULL);
    }
    vkDestroyInstance(e.instance, NULL);
    mtx_destroy(&e.queue_lock);
    unsigned messages = atomic_load(&e.messages);
    printf("engine: validation messages: %u\n", messages);
    free(prompt);
    free(context);
    free(generated);
    free(one_token_ms);

    bool ok = failures == 0 && messages == 0 && atomic_load(&st.wrong) == 0 &&
              equal == n_generated && n_generated > 0;
    printf("engine: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
