/* Embedding as an engine does it (issue 9): the test plays an application that owns its
 * VkInstance (apiVersion 1.0 or 1.2), VkDevice and queue, runs the validation layer itself
 * (with the messenger counting every warning and error: any is a failure), and uses vkattn's
 * asynchronous submission with its semaphores, records vkattn's graphs and model steps into its
 * own command buffers, shares buffers both ways, shares its queue with two contexts on two
 * threads through lock callbacks, and passes its VkAllocationCallbacks; and the smallest env
 * an application can give. Issue 17: a deep model on a 1.0 instance stays valid (descriptor
 * pools counted), and validation = 1 on the application's instance checks its layers and
 * counts through vkattn's messenger. */
#define _POSIX_C_SOURCE 200809L
#include <vulkan/vulkan.h>

#include <threads.h>
#include <time.h>

#include "test_util.h"

typedef struct app_vulkan {
    uint32_t api;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    uint32_t messages;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
    bool timeline; /* timeline semaphores enabled */
    mtx_t queue_lock;
} app_vulkan;

static VKAPI_ATTR VkBool32 VKAPI_CALL app_messenger(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *d,
                                                    void *user) {
    (void)types;
    app_vulkan *app = user;
    if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        __atomic_add_fetch(&app->messages, 1, __ATOMIC_RELAXED);
        printf("app validation: %s\n", d && d->pMessage ? d->pMessage : "?");
    }
    return VK_FALSE;
}

static bool want_validation(void) {
    const char *v = getenv("VKATTN_VALIDATION");
    return v && strcmp(v, "1") == 0;
}

static bool has_layer(const char *name) {
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties *p = calloc(n ? n : 1, sizeof *p);
    vkEnumerateInstanceLayerProperties(&n, p);
    bool found = false;
    for (uint32_t i = 0; i < n; i++) found = found || strcmp(p[i].layerName, name) == 0;
    free(p);
    return found;
}

/* The application's Vulkan objects at instance version api, with the validation layer when
 * layer, and VK_EXT_debug_utils with the application's messenger counting when also
 * debug_utils; false (skip) without a device. */
static bool app_create_layers(app_vulkan *app, uint32_t api, bool layer, bool debug_utils) {
    bool validation = layer;
    debug_utils = debug_utils && layer;
    memset(app, 0, sizeof *app);
    app->api = api;
    mtx_init(&app->queue_lock, mtx_plain);
    if (validation && !has_layer("VK_LAYER_KHRONOS_validation"))
        fail_msg("validation asked for but VK_LAYER_KHRONOS_validation is not installed");
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = app_messenger,
        .pUserData = app};
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                            .pApplicationName = "test_embed_app",
                            .apiVersion = api};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pNext = debug_utils ? &mi : NULL,
                               .pApplicationInfo = &ai,
                               .enabledLayerCount = validation ? 1 : 0,
                               .ppEnabledLayerNames = layers,
                               .enabledExtensionCount = debug_utils ? 1 : 0,
                               .ppEnabledExtensionNames = exts};
    uint32_t n = 0;
    if (vkCreateInstance(&ii, NULL, &app->instance) != VK_SUCCESS ||
        vkEnumeratePhysicalDevices(app->instance, &n, NULL) != VK_SUCCESS || n == 0) {
        if (app->instance) vkDestroyInstance(app->instance, NULL);
        const char *req = getenv("VKATTN_REQUIRE_GPU");
        if (req && strcmp(req, "1") == 0) fail_msg("no Vulkan device for the embedding test");
        skip();
        return false;
    }
    if (debug_utils) {
        PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(app->instance, "vkCreateDebugUtilsMessengerEXT");
        assert_int_equal(create(app->instance, &mi, NULL, &app->messenger), VK_SUCCESS);
    }
    n = 1;
    vkEnumeratePhysicalDevices(app->instance, &n, &app->phys);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(app->phys, &props);
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(app->phys, &nq, NULL);
    VkQueueFamilyProperties q[16];
    nq = nq > 16 ? 16 : nq;
    vkGetPhysicalDeviceQueueFamilyProperties(app->phys, &nq, q);
    app->family = UINT32_MAX;
    for (uint32_t i = 0; i < nq && app->family == UINT32_MAX; i++)
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) app->family = i;
    assert_true(app->family != UINT32_MAX);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = app->family, .queueCount = 1,
                                  .pQueuePriorities = &prio};
    app->timeline = api >= VK_API_VERSION_1_2 && props.apiVersion >= VK_API_VERSION_1_2;
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .timelineSemaphore = VK_TRUE};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = app->timeline ? &f12 : NULL,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi};
    assert_int_equal(vkCreateDevice(app->phys, &di, NULL, &app->device), VK_SUCCESS);
    vkGetDeviceQueue(app->device, app->family, 0, &app->queue);
    return true;
}

static bool app_create_with(app_vulkan *app, uint32_t api, bool validation) {
    return app_create_layers(app, api, validation, validation);
}

/* Validation as the environment says (VKATTN_VALIDATION=1: on). */
static bool app_create(app_vulkan *app, uint32_t api) {
    return app_create_with(app, api, want_validation());
}

static void app_destroy(app_vulkan *app) {
    vkDestroyDevice(app->device, NULL);
    if (app->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(app->instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(app->instance, app->messenger, NULL);
    }
    vkDestroyInstance(app->instance, NULL);
    mtx_destroy(&app->queue_lock);
    assert_int_equal(app->messages, 0);
}

static void lock_queue(void *user, void *queue) {
    (void)queue;
    mtx_lock(&((app_vulkan *)user)->queue_lock);
}
static void unlock_queue(void *user, void *queue) {
    (void)queue;
    mtx_unlock(&((app_vulkan *)user)->queue_lock);
}

static vka_vulkan_env app_env(app_vulkan *app) {
    return (vka_vulkan_env){.get_instance_proc_addr = (void *)vkGetInstanceProcAddr,
                            .instance = app->instance, .physical_device = app->phys,
                            .device = app->device, .queue = app->queue,
                            .queue_family = app->family, .api_version = app->api,
                            .lock_queue = lock_queue, .unlock_queue = unlock_queue,
                            .queue_user_data = app};
}

static vka_context *app_context(app_vulkan *app, vka_vulkan_env *env, const void *allocator) {
    *env = app_env(app);
    /* validation -1: the application's own layer and messenger do it. */
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = env, .log = tu_log,
                          .validation = -1, .vk_allocator = allocator};
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS)
        fail_msg("embedding context: %s", vka_last_error(ctx));
    return ctx;
}

static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* out = gelu(a + b), recorded. */
static vka_graph *gelu_graph(vka_context *ctx, vka_tensor *out, vka_tensor *sum, vka_tensor *a,
                             vka_tensor *b, size_t n) {
    tu_begin(ctx);
    assert_int_equal(vka_residual_forward(ctx, sum, a, b, n), VKA_SUCCESS);
    assert_int_equal(vka_gelu_forward(ctx, out, sum, n), VKA_SUCCESS);
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    return g;
}

static void check_gelu(const float *got, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double want = gelu_ref((double)a[i] + (b ? b[i] : 0.0));
        if (fabs(got[i] - want) > 1e-5) fail_msg("element %zu: %g, want %g", i, got[i], want);
    }
}

/* The smallest embedding: an env with only the required fields (no lock callbacks, no API
 * version), vkattn's own validation setting; the application's device still works after
 * vka_context_destroy. */
/* One graph of gelu(a + b) over n random elements (seeds seed, seed + 1; a scaled by
 * a_scale) run on ctx and checked against the double reference; everything destroyed. */
static void run_gelu_checked(vka_context *ctx, size_t n, uint64_t seed, float a_scale) {
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_true(a && b);
    tu_random(a, n, seed, a_scale);
    tu_random(b, n, seed + 1, 1.0f);
    vka_tensor *ta = tu_tensor(ctx, n, a), *tb = tu_tensor(ctx, n, b);
    vka_tensor *sum = tu_tensor_nan(ctx, n), *out = tu_tensor_nan(ctx, n);
    vka_graph *g = gelu_graph(ctx, out, sum, ta, tb, n);
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
    float *got = tu_read(out, n);
    check_gelu(got, a, b, n);
    free(got);
    vka_graph_destroy(g);
    vka_tensor *all[] = {ta, tb, sum, out};
    for (size_t i = 0; i < 4; i++) vka_tensor_destroy(all[i]);
    free(a);
    free(b);
}

static void test_minimal_env_runs_ops(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_1)) return;
    vka_vulkan_env env = {.get_instance_proc_addr = (void *)vkGetInstanceProcAddr,
                          .instance = app.instance, .physical_device = app.phys,
                          .device = app.device, .queue = app.queue, .queue_family = app.family};
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env, .log = tu_log};
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS)
        fail_msg("embedding context: %s", vka_last_error(ctx));
    vka_device_info info;
    assert_int_equal(vka_context_selected_device(ctx, &info), VKA_SUCCESS);
    assert_true(info.selected);
    /* the application enabled no 16-bit feature (app_create) and said none: none is used */
    assert_false(info.storage_16bit || info.float16);
    assert_int_equal(info.path_16bit, VKA_16BIT_PACKED);
    enum { N = 1000 };
    float a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i / N;
        b[i] = 1.0f;
    }
    vka_tensor *ta = tu_tensor(ctx, N, a), *tb = tu_tensor(ctx, N, b);
    vka_tensor *sum = tu_tensor_nan(ctx, N), *out = tu_tensor_nan(ctx, N);
    vka_graph *g = gelu_graph(ctx, out, sum, ta, tb, N);
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
    float *got = tu_read(out, N);
    check_gelu(got, a, b, N);
    free(got);
    vka_graph_destroy(g);
    vka_tensor *all[] = {ta, tb, sum, out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vka_tensor_destroy(all[i]);
    vka_context_destroy(ctx);
    assert_int_equal(vkDeviceWaitIdle(app.device), VK_SUCCESS);
    app_destroy(&app);
}

/* The application enabled storageBuffer16BitAccess and shaderFloat16 on its device and says so
 * (vka_vulkan_env.storage_16bit, float16): vkattn reports the 16-bit path they give, and the
 * ops still run with the layer silent. (Without the flags: test_minimal_env_runs_ops.) */
static void test_app_16bit_features_reported(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_2)) return;
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(app.phys, &props);
    VkPhysicalDeviceVulkan11Features q11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features q12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &q11};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &q12};
    if (props.apiVersion >= VK_API_VERSION_1_2) vkGetPhysicalDeviceFeatures2(app.phys, &f2);
    if (!q11.storageBuffer16BitAccess || !q12.shaderFloat16) {
        print_message("  the device lacks 16-bit storage or float16: nothing to check\n");
        app_destroy(&app);
        return;
    }
    /* the same device again, now with both features */
    vkDestroyDevice(app.device, NULL);
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .storageBuffer16BitAccess = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f11,
        .shaderFloat16 = VK_TRUE, .timelineSemaphore = app.timeline ? VK_TRUE : VK_FALSE};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = app.family, .queueCount = 1,
                                  .pQueuePriorities = &prio};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f12,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi};
    assert_int_equal(vkCreateDevice(app.phys, &di, NULL, &app.device), VK_SUCCESS);
    vkGetDeviceQueue(app.device, app.family, 0, &app.queue);
    vka_vulkan_env env = app_env(&app);
    env.storage_16bit = true;
    env.float16 = true;
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env, .log = tu_log,
                          .validation = -1};
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS)
        fail_msg("embedding context: %s", vka_last_error(ctx));
    vka_device_info info;
    assert_int_equal(vka_context_selected_device(ctx, &info), VKA_SUCCESS);
    assert_true(info.storage_16bit && info.float16);
    assert_int_equal(info.path_16bit, VKA_16BIT_STORAGE); /* never fp16 arithmetic */
    run_gelu_checked(ctx, 1616, 1, 2.0f);
    vka_context_destroy(ctx);
    app_destroy(&app);
}

static void test_incomplete_env_refused(void **state) {
    (void)state;
    vka_vulkan_env env = {0};
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_vulkan_env"));
    vka_context_destroy(ctx);
}

/* A 1.0 instance with a newer device: no 1.1 call, sensible limits, ops run, layer silent. */
static void test_instance_1_0(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_0)) return;
    vka_vulkan_env env;
    vka_context *ctx = app_context(&app, &env, NULL);
    vka_device_info info;
    assert_int_equal(vka_context_selected_device(ctx, &info), VKA_SUCCESS);
    assert_true(info.max_memory_allocation_size == (1ull << 30));
    /* 16-bit features cannot be asked on 1.0: absent, and a claim of one is refused */
    assert_false(info.storage_16bit_supported || info.float16_supported);
    assert_int_equal(info.path_16bit, VKA_16BIT_PACKED);
    run_gelu_checked(ctx, 777, 1, 2.0f);
    vka_context_destroy(ctx);
    env.storage_16bit = true;
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env, .validation = -1};
    ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_vulkan_env.storage_16bit"));
    print_message("  %s\n", vka_last_error(ctx));
    vka_context_destroy(ctx);
    app_destroy(&app);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static VkSemaphore timeline_semaphore(app_vulkan *app, uint64_t initial) {
    VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                    .initialValue = initial};
    VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
    VkSemaphore s;
    assert_int_equal(vkCreateSemaphore(app->device, &si, NULL, &s), VK_SUCCESS);
    return s;
}

static void host_signal(app_vulkan *app, VkSemaphore s, uint64_t value) {
    VkSemaphoreSignalInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                .semaphore = s, .value = value};
    assert_int_equal(vkSignalSemaphore(app->device, &si), VK_SUCCESS);
}

/* Destroying a context never waits for the application's work; submissions wait on and
 * signal the application's semaphores (timeline and binary), wait polls with a timeout. */
static void test_async_semaphores_and_destroy(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_2)) return;
    if (!app.timeline) {
        app_destroy(&app);
        skip();
    }
    vka_vulkan_env env;
    vka_context *ctx = app_context(&app, &env, NULL);
    enum { N = 3000 };
    float a[N], b[N];
    tu_random(a, N, 3, 2.0f);
    tu_random(b, N, 4, 1.0f);
    vka_tensor *ta = tu_tensor(ctx, N, a), *tb = tu_tensor(ctx, N, b);
    vka_tensor *sum = tu_tensor_nan(ctx, N), *out = tu_tensor_nan(ctx, N);
    vka_tensor *sum2 = tu_tensor_nan(ctx, N), *out2 = tu_tensor_nan(ctx, N);
    vka_graph *g = gelu_graph(ctx, out, sum, ta, tb, N);
    vka_graph *g2 = gelu_graph(ctx, out2, sum2, out, tb, N); /* gelu(gelu(a + b) + b) */

    /* g waits for the application's timeline value 1 and signals 2 and a binary semaphore that
     * g2 waits for. */
    VkSemaphore tl = timeline_semaphore(&app, 0);
    VkSemaphoreCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    VkSemaphore bin;
    assert_int_equal(vkCreateSemaphore(app.device, &bi, NULL, &bin), VK_SUCCESS);
    VkSemaphore signals[2] = {tl, bin};
    uint64_t wait_value = 1, signal_values[2] = {2, 0};
    uint32_t stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    vka_submit_desc sd = {.wait_count = 1, .wait_semaphores = &tl, .wait_stages = &stage,
                          .wait_values = &wait_value, .signal_count = 2,
                          .signal_semaphores = signals, .signal_values = signal_values};
    assert_int_equal(vka_graph_submit(g, &sd), VKA_SUCCESS);
    assert_int_equal(vka_graph_submit(g, NULL), VKA_ERROR_INVALID_ARGUMENT); /* still pending */
    assert_non_null(strstr(vka_last_error(ctx), "pending"));
    assert_int_equal(vka_graph_wait(g, 0), VKA_TIMEOUT);
    assert_int_equal(vka_graph_wait(g, 20 * 1000 * 1000), VKA_TIMEOUT); /* 20 ms */
    host_signal(&app, tl, 1);
    assert_int_equal(vka_graph_wait(g, UINT64_MAX), VKA_SUCCESS);
    assert_int_equal(vka_graph_wait(g, 0), VKA_SUCCESS); /* nothing pending */
    /* g2 waits for the binary semaphore g signalled. (Submitted only now: lavapipe's
     * vkQueueSubmit blocks on a binary wait whose signal is still behind an unmet wait.) */
    vka_submit_desc sd2 = {.wait_count = 1, .wait_semaphores = &bin};
    assert_int_equal(vka_graph_submit(g2, &sd2), VKA_SUCCESS);
    assert_int_equal(vka_graph_wait(g2, UINT64_MAX), VKA_SUCCESS);
    uint64_t value = 0;
    assert_int_equal(vkGetSemaphoreCounterValue(app.device, tl, &value), VK_SUCCESS);
    assert_true(value == 2);
    float *got = tu_read(out, N), *got2 = tu_read(out2, N);
    check_gelu(got, a, b, N);
    check_gelu(got2, got, b, N);
    free(got);
    free(got2);
    double ms = 0;
    assert_int_equal(vka_graph_times(g, &ms, NULL, 0, NULL), VKA_SUCCESS);

    /* The application's own submission stays pending (it waits for timeline value 10) while
     * the context is destroyed: destroy does not wait for it. */
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    assert_int_equal(vkCreateFence(app.device, &fi, NULL, &fence), VK_SUCCESS);
    uint64_t ten = 10;
    VkTimelineSemaphoreSubmitInfo tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                         .waitSemaphoreValueCount = 1, .pWaitSemaphoreValues = &ten};
    VkPipelineStageFlags all = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tsi,
                       .waitSemaphoreCount = 1, .pWaitSemaphores = &tl, .pWaitDstStageMask = &all};
    mtx_lock(&app.queue_lock);
    assert_int_equal(vkQueueSubmit(app.queue, 1, &si, fence), VK_SUCCESS);
    mtx_unlock(&app.queue_lock);
    double t0 = now_ms();
    vka_graph_destroy(g);
    vka_graph_destroy(g2);
    vka_tensor *ts[] = {ta, tb, sum, out, sum2, out2};
    for (size_t i = 0; i < 6; i++) vka_tensor_destroy(ts[i]);
    vka_context_destroy(ctx);
    double destroy_ms = now_ms() - t0;
    printf("destroy with the application's submission pending: %.1f ms\n", destroy_ms);
    assert_int_equal(vkGetFenceStatus(app.device, fence), VK_NOT_READY);
    assert_true(destroy_ms < 1000.0);
    host_signal(&app, tl, 10);
    assert_int_equal(vkWaitForFences(app.device, 1, &fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
    vkDestroyFence(app.device, fence, NULL);
    vkDestroySemaphore(app.device, tl, NULL);
    vkDestroySemaphore(app.device, bin, NULL);
    app_destroy(&app);
}

typedef struct app_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    float *mapped;
} app_buffer;

static app_buffer app_buffer_create(app_vulkan *app, VkDeviceSize bytes) {
    app_buffer b = {0};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    assert_int_equal(vkCreateBuffer(app->device, &bi, NULL, &b.buffer), VK_SUCCESS);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(app->device, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(app->phys, &mp);
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) type = i;
    assert_true(type != UINT32_MAX);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size, .memoryTypeIndex = type};
    assert_int_equal(vkAllocateMemory(app->device, &ai, NULL, &b.memory), VK_SUCCESS);
    assert_int_equal(vkBindBufferMemory(app->device, b.buffer, b.memory, 0), VK_SUCCESS);
    void *p = NULL;
    assert_int_equal(vkMapMemory(app->device, b.memory, 0, VK_WHOLE_SIZE, 0, &p), VK_SUCCESS);
    b.mapped = p;
    memset(p, 0, (size_t)bytes); /* new memory holds anything (ASan fills it) */
    return b;
}

static void app_buffer_destroy(app_vulkan *app, app_buffer *b) {
    vkDestroyBuffer(app->device, b->buffer, NULL);
    vkFreeMemory(app->device, b->memory, NULL);
}

typedef struct app_commands {
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
} app_commands;

static app_commands app_commands_create(app_vulkan *app) {
    app_commands c;
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = app->family};
    assert_int_equal(vkCreateCommandPool(app->device, &pi, NULL, &c.pool), VK_SUCCESS);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = c.pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    assert_int_equal(vkAllocateCommandBuffers(app->device, &ai, &c.cmd), VK_SUCCESS);
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    assert_int_equal(vkCreateFence(app->device, &fi, NULL, &c.fence), VK_SUCCESS);
    return c;
}

static void app_begin(app_commands *c) {
    assert_int_equal(vkResetCommandBuffer(c->cmd, 0), VK_SUCCESS);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    assert_int_equal(vkBeginCommandBuffer(c->cmd, &bi), VK_SUCCESS);
}

static void app_submit_wait(app_vulkan *app, app_commands *c) {
    assert_int_equal(vkEndCommandBuffer(c->cmd), VK_SUCCESS);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &c->cmd};
    mtx_lock(&app->queue_lock);
    assert_int_equal(vkQueueSubmit(app->queue, 1, &si, c->fence), VK_SUCCESS);
    mtx_unlock(&app->queue_lock);
    assert_int_equal(vkWaitForFences(app->device, 1, &c->fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
    assert_int_equal(vkResetFences(app->device, 1, &c->fence), VK_SUCCESS);
}

static void app_commands_destroy(app_vulkan *app, app_commands *c) {
    vkDestroyFence(app->device, c->fence, NULL);
    vkDestroyCommandPool(app->device, c->pool, NULL);
}

/* vkattn's graph recorded into the application's command buffer between the application's own
 * commands, on the application's buffer (wrapped as tensors at offsets that are multiples of 4
 * only), and a vkattn tensor copied by the application's own command. */
static void test_record_into_app_command_buffer(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_1)) return;
    vka_vulkan_env env;
    vka_context *ctx = app_context(&app, &env, NULL);
    enum { N = 1500, PAD = 3 };
    VkDeviceSize bytes = (VkDeviceSize)(4 * N + 2 * PAD) * 4;
    app_buffer buf = app_buffer_create(&app, bytes);
    vka_tensor *a = NULL, *out = NULL, *bad = NULL;
    /* a = elements [PAD, PAD + N), out = [PAD + 2N + PAD, ... + N): offsets 12 and 12036 bytes. */
    uint64_t a_off = PAD * 4, out_off = (uint64_t)(PAD + 2 * N + PAD) * 4;
    assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &buf.buffer, a_off, N * 4, &a), VKA_SUCCESS);
    assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &buf.buffer, out_off, N * 4, &out), VKA_SUCCESS);
    assert_int_equal(vka_tensor_size(out), N);
    assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &buf.buffer, 2, 8, &bad), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(bad);
    assert_non_null(strstr(vka_last_error(ctx), "multiples of 4"));
    assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, NULL, 0, 8, &bad), VKA_ERROR_INVALID_ARGUMENT);
    /* Past the end of the buffer, and an offset + size that would wrap around. */
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(app.device, buf.buffer, &req);
    assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &buf.buffer, req.size - 4, 8, &bad),
                     VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "end of the buffer"));
    assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &buf.buffer, UINT64_MAX - 3, 8, &bad),
                     VKA_ERROR_INVALID_ARGUMENT);
    assert_null(bad);

    float b[N], x[N];
    tu_random(b, N, 5, 1.0f);
    tu_random(x, N, 6, 2.0f);
    vka_tensor *tb = tu_tensor(ctx, N, b), *sum = tu_tensor_nan(ctx, N);
    vka_tensor *copy = tu_tensor(ctx, N, x); /* the application copies it into its buffer */
    vka_graph *g = gelu_graph(ctx, out, sum, a, tb, N);
    VkBuffer vb = VK_NULL_HANDLE;
    uint64_t off = 1, size = 0;
    assert_int_equal(vka_tensor_vulkan_buffer(copy, &vb, &off, &size), VKA_SUCCESS);
    assert_true(vb != VK_NULL_HANDLE && size == N * 4);

    app_commands c = app_commands_create(&app);
    for (int frame = 0; frame < 3; frame++) {
        /* The application's commands: a = frame + 0.5 everywhere, and x into [PAD + N, ...). */
        float fill = (float)frame + 0.5f;
        uint32_t bits;
        memcpy(&bits, &fill, 4);
        app_begin(&c);
        vkCmdFillBuffer(c.cmd, buf.buffer, a_off, N * 4, bits);
        VkBufferCopy region = {.srcOffset = off, .dstOffset = (VkDeviceSize)(PAD + N) * 4, .size = size};
        vkCmdCopyBuffer(c.cmd, vb, buf.buffer, 1, &region);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
        (void)mb; /* vkattn's own entry barrier orders the fill before its reads */
        assert_int_equal(vka_graph_record(g, c.cmd), VKA_SUCCESS);
        app_submit_wait(&app, &c);
        float av[N];
        for (int i = 0; i < N; i++) av[i] = fill;
        check_gelu(buf.mapped + PAD + 2 * N + PAD, av, b, N);
        for (int i = 0; i < N; i++) assert_true(buf.mapped[PAD + N + i] == x[i]);
        assert_int_equal(vka_graph_check(g), VKA_SUCCESS);
    }
    /* Host reads and writes of a wrapped tensor go through vkattn's staging copies. */
    float back[N];
    assert_int_equal(vka_tensor_read(out, 0, back, N), VKA_SUCCESS);
    assert_true(back[7] == buf.mapped[PAD + 2 * N + PAD + 7]);
    assert_int_equal(vka_tensor_write(a, 0, x, N), VKA_SUCCESS);
    assert_true(buf.mapped[PAD + 9] == x[9]);
    assert_true(buf.mapped[PAD - 1] == 0.0f); /* nothing before the wrapped range */

    assert_int_equal(vka_graph_record(g, NULL), VKA_ERROR_INVALID_ARGUMENT);
    vka_graph_destroy(g);
    vka_tensor *ts[] = {a, out, tb, sum, copy};
    for (size_t i = 0; i < 5; i++) vka_tensor_destroy(ts[i]);
    vka_context_destroy(ctx);
    app_commands_destroy(&app, &c);
    app_buffer_destroy(&app, &buf); /* the wrapped buffer is still the application's */
    app_destroy(&app);
}

/* The ops on the application's buffer wrapped at every element offset mod 4: on lavapipe's
 * CPU-type kernels, vec4s through storage buffers where the views are vec4-aligned (an
 * application's buffer has no texel views) and one element per invocation where not. */
static void test_wrapped_buffers_at_every_offset(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_1)) return;
    vka_vulkan_env env;
    vka_context *ctx = app_context(&app, &env, NULL);
    enum { N = 1028 };
    app_buffer buf = app_buffer_create(&app, (VkDeviceSize)(2 * N + 16) * 4);
    float b[N], x[N];
    tu_random(b, N, 7, 1.0f);
    tu_random(x, N, 8, 2.0f);
    vka_tensor *tb = tu_tensor(ctx, N, b), *sum = tu_tensor_nan(ctx, N);
    for (size_t pad = 0; pad <= 4; pad++) {
        /* a = elements [pad, pad + N), out = [pad + N + 5, ... + N) */
        size_t out0 = pad + N + 5;
        memcpy(buf.mapped + pad, x, sizeof x);
        vka_tensor *a = NULL, *out = NULL;
        assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &buf.buffer, pad * 4, N * 4, &a),
                         VKA_SUCCESS);
        assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &buf.buffer, out0 * 4, N * 4, &out),
                         VKA_SUCCESS);
        vka_graph *g = gelu_graph(ctx, out, sum, a, tb, N);
        assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
        check_gelu(buf.mapped + out0, x, b, N);
        vka_graph_destroy(g);
        vka_tensor_destroy(a);
        vka_tensor_destroy(out);
    }
    vka_tensor_destroy(tb);
    vka_tensor_destroy(sum);
    vka_context_destroy(ctx);
    app_buffer_destroy(&app, &buf);
    app_destroy(&app);
}

/* Two contexts on the application's one queue, each on its own thread, plus the application's
 * own submissions from this thread: the lock callbacks keep the queue externally synchronised
 * (the validation layer's thread checks report any overlap). */
typedef struct worker {
    app_vulkan *app;
    int runs;
    int failures;
} worker;

static int worker_main(void *arg) {
    worker *w = arg;
    vka_vulkan_env env = app_env(w->app);
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env, .validation = -1};
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS) {
        w->failures++;
        vka_context_destroy(ctx);
        return 0;
    }
    enum { N = 4096 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    for (int i = 0; i < N; i++) {
        a[i] = (float)i / N;
        b[i] = 0.25f;
    }
    vka_tensor *ta = NULL, *tb = NULL, *sum = NULL, *out = NULL;
    vka_tensor_create(ctx, N, &ta);
    vka_tensor_create(ctx, N, &tb);
    vka_tensor_create(ctx, N, &sum);
    vka_tensor_create(ctx, N, &out);
    vka_tensor_write(ta, 0, a, N);
    vka_tensor_write(tb, 0, b, N);
    vka_graph_begin(ctx);
    vka_residual_forward(ctx, sum, ta, tb, N);
    vka_gelu_forward(ctx, out, sum, N);
    vka_graph *g = NULL;
    if (vka_graph_end(ctx, &g) != VKA_SUCCESS) w->failures++;
    for (int i = 0; g && i < w->runs; i++) {
        if (vka_graph_submit(g, NULL) != VKA_SUCCESS) w->failures++;
        if (vka_graph_wait(g, UINT64_MAX) != VKA_SUCCESS) w->failures++;
    }
    float got = 0;
    vka_tensor_read(out, N - 1, &got, 1);
    if (fabs(got - gelu_ref((double)(N - 1) / N + 0.25)) > 1e-5) w->failures++;
    vka_graph_destroy(g);
    vka_tensor_destroy(ta);
    vka_tensor_destroy(tb);
    vka_tensor_destroy(sum);
    vka_tensor_destroy(out);
    vka_context_destroy(ctx);
    free(a);
    free(b);
    return 0;
}

static void test_shared_queue_two_threads(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_1)) return;
    worker w[2] = {{&app, 40, 0}, {&app, 40, 0}};
    thrd_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(thrd_create(&th[i], worker_main, &w[i]), thrd_success);
    /* The application's own empty submissions meanwhile. */
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    assert_int_equal(vkCreateFence(app.device, &fi, NULL, &fence), VK_SUCCESS);
    for (int i = 0; i < 40; i++) {
        mtx_lock(&app.queue_lock);
        assert_int_equal(vkQueueSubmit(app.queue, 0, NULL, fence), VK_SUCCESS);
        mtx_unlock(&app.queue_lock);
        assert_int_equal(vkWaitForFences(app.device, 1, &fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
        assert_int_equal(vkResetFences(app.device, 1, &fence), VK_SUCCESS);
    }
    for (int i = 0; i < 2; i++) thrd_join(th[i], NULL);
    vkDestroyFence(app.device, fence, NULL);
    assert_int_equal(w[0].failures + w[1].failures, 0);
    app_destroy(&app);
}

static const vka_gpt_config tiny = {.max_T = 32, .V = 67, .L = 2, .NH = 2, .C = 32};

/* A Vulkan 1.0 instance with a deep model (issue 17): a 12-layer model's training step needs
 * more descriptor sets than one pool holds. Without VK_KHR_maintenance1 (core in 1.1) a pool
 * may not be asked for more than it has left (VUID-VkDescriptorSetAllocateInfo-
 * descriptorSetCount-00306 / -descriptorPool-00307): vkattn must track what each pool has
 * left rather than wait for VK_ERROR_OUT_OF_POOL_MEMORY. Train, eval and generate under the
 * application's validation layer (on here whatever VKATTN_VALIDATION says, when installed):
 * no message, and none at vkDestroyDevice either (no pool or set outlives the context). */
static void test_instance_1_0_deep_model(void **state) {
    (void)state;
    bool layer = has_layer("VK_LAYER_KHRONOS_validation");
    if (!layer && want_validation()) fail_msg("VK_LAYER_KHRONOS_validation is not installed");
    if (!layer) skip();
    app_vulkan app;
    if (!app_create_with(&app, VK_API_VERSION_1_0, true)) return;
    vka_vulkan_env env;
    vka_context *ctx = app_context(&app, &env, NULL);
    const vka_gpt_config deep = {.max_T = 16, .V = 67, .L = 12, .NH = 2, .C = 32};
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_create(ctx, &deep, 11, &gpt), VKA_SUCCESS);
    enum { B = 2, T = 16 };
    int32_t in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = (i * 5) % 67;
        tg[i] = (i * 5 + 1) % 67;
    }
    vka_adamw_desc opt = {.lr = 1e-3f};
    for (int step = 0; step < 3; step++) {
        float loss = 0, norm = 0;
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, &norm), VKA_SUCCESS);
        assert_true(isfinite(loss) && isfinite(norm));
    }
    double el = 0;
    size_t windows = 0;
    assert_int_equal(vka_gpt_eval(gpt, in, B * T, T, &el, &windows), VKA_SUCCESS);
    assert_true(isfinite(el) && windows > 0);
    int32_t prompt[3] = {1, 2, 3}, out[20];
    vka_sample_desc sd = {.temperature = 1.0f, .top_k = 8, .seed = 3};
    assert_int_equal(vka_gpt_generate(gpt, prompt, 3, 20, &sd, out, NULL, NULL), VKA_SUCCESS);
    for (int i = 0; i < 20; i++) assert_true(out[i] >= 0 && out[i] < 67);
    /* The first model's sets go back to their pools; a second model's allocations reuse
     * the room counted back (counting back too much would ask a pool for what it lacks). */
    vka_gpt_destroy(gpt);
    assert_int_equal(vka_gpt_create(ctx, &deep, 12, &gpt), VKA_SUCCESS);
    float loss = 0;
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, NULL), VKA_SUCCESS);
    assert_true(isfinite(loss));
    vka_gpt_destroy(gpt);
    vka_context_destroy(ctx);
    printf("1.0 instance, 12 layers: %u validation messages\n", app.messages);
    app_destroy(&app); /* asserts app.messages == 0 after vkDestroyDevice/vkDestroyInstance */
}

/* The model's steps run by the application: a decode step recorded into its command buffer
 * gives the logits vka_gpt_session_append gives; a training step submitted asynchronously gives
 * the loss and parameters of the blocking call on an identical model. */
static void test_model_steps_in_app_hands(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_1)) return;
    vka_vulkan_env env;
    vka_context *ctx = app_context(&app, &env, NULL);
    vka_gpt *gpt = NULL, *twin = NULL;
    assert_int_equal(vka_gpt_create(ctx, &tiny, 7, &gpt), VKA_SUCCESS);
    assert_int_equal(vka_gpt_create(ctx, &tiny, 7, &twin), VKA_SUCCESS);
    vka_gpt_session *ref = NULL, *ss = NULL;
    vka_gpt_session_desc sd = {.prefill_chunk = 8};
    assert_int_equal(vka_gpt_session_create(gpt, &sd, &ref), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_create(gpt, &sd, &ss), VKA_SUCCESS);
    int32_t prompt[5] = {1, 5, 9, 66, 0};
    assert_int_equal(vka_gpt_session_append(ref, prompt, 5), VKA_SUCCESS);

    app_commands c = app_commands_create(&app);
    vka_graph *g = NULL;
    assert_int_equal(vka_gpt_session_prepare(ss, prompt, 5, &g), VKA_SUCCESS);
    assert_non_null(g);
    vka_graph *g_again = NULL;
    assert_int_equal(vka_gpt_session_prepare(ss, prompt, 1, &g_again), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_gpt_session_append(ss, prompt, 1), VKA_ERROR_INVALID_ARGUMENT);
    app_begin(&c);
    assert_int_equal(vka_graph_record(g, c.cmd), VKA_SUCCESS);
    app_submit_wait(&app, &c);
    vka_graph_destroy(g); /* the session's: ignored */
    assert_int_equal(vka_gpt_session_finish(ss), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_finish(ss), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_gpt_session_length(ss), 5);
    float want[67], got[67];
    assert_int_equal(vka_gpt_session_logits(ref, want, 67), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(ss, got, 67), VKA_SUCCESS);
    tu_assert_close("decode step logits", got, want, 67, 1e-5, 0);
    /* A one-token step, submitted by vkattn this time; the logits' buffer for the renderer. */
    int32_t next = 42;
    assert_int_equal(vka_gpt_session_append(ref, &next, 1), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_prepare(ss, &next, 1, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_submit(g, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_finish(ss), VKA_SUCCESS); /* waits */
    assert_int_equal(vka_gpt_session_logits(ref, want, 67), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(ss, got, 67), VKA_SUCCESS);
    tu_assert_close("one-token step logits", got, want, 67, 1e-5, 0);
    VkBuffer lb = VK_NULL_HANDLE;
    uint64_t loff = 0, lsize = 0;
    assert_int_equal(vka_gpt_session_logits_buffer(ss, &lb, &loff, &lsize), VKA_SUCCESS);
    assert_true(lb != VK_NULL_HANDLE && lsize == 67 * 4);

    /* Training: prepare, submit, finish on gpt; the blocking call on twin. */
    enum { B = 2, T = 16 };
    int32_t in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = (i * 7) % 67;
        tg[i] = (i * 7 + 3) % 67;
    }
    vka_adamw_desc opt = {.lr = 1e-3f};
    for (int step = 0; step < 3; step++) {
        float loss = 0, loss_twin = 0, norm = 0, norm_twin = 0;
        assert_int_equal(vka_gpt_train_step_prepare(gpt, in, tg, B, T, &opt, &g), VKA_SUCCESS);
        if (step == 1) {
            app_begin(&c);
            assert_int_equal(vka_graph_record(g, c.cmd), VKA_SUCCESS);
            app_submit_wait(&app, &c);
        } else {
            assert_int_equal(vka_graph_submit(g, NULL), VKA_SUCCESS);
        }
        assert_int_equal(vka_gpt_train_step_finish(gpt, &loss, &norm), VKA_SUCCESS);
        assert_int_equal(vka_gpt_train_step(twin, in, tg, B, T, &opt, &loss_twin, &norm_twin), VKA_SUCCESS);
        printf("step %d: loss %.7f (blocking %.7f), grad norm %.6f\n", step, loss, loss_twin, norm);
        assert_true(loss == loss_twin && norm == norm_twin);
    }
    float fl = 0;
    assert_int_equal(vka_gpt_forward_prepare(gpt, in, tg, B, T, false, &g), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward_finish(gpt, &fl, got), VKA_ERROR_INVALID_ARGUMENT);
    /* While a pass is handed out, the model's other calls are refused. */
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &fl, NULL), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_gpt_forward_backward(gpt, in, tg, B, T, &fl), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "not finished"));
    double el = 0;
    assert_int_equal(vka_gpt_eval(gpt, (const int32_t *)in, B * T, T, &el, NULL), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_graph_submit(g, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward_finish(gpt, &fl, NULL), VKA_SUCCESS);
    float fl_twin = 0;
    assert_int_equal(vka_gpt_forward(twin, in, tg, B, T, &fl_twin, NULL), VKA_SUCCESS);
    assert_true(fl == fl_twin && isfinite(fl));

    /* A session's prepared step dropped by reset; a model destroyed with a submitted pass. */
    assert_int_equal(vka_gpt_session_prepare(ss, &next, 1, &g), VKA_SUCCESS);
    vka_gpt_session_reset(ss);
    assert_int_equal(vka_gpt_session_length(ss), 0);
    assert_int_equal(vka_gpt_session_finish(ss), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_gpt_session_append(ss, prompt, 5), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(ss, got, 67), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(ref, want, 67), VKA_SUCCESS); /* ref: 6 tokens */
    vka_gpt *third = NULL;
    assert_int_equal(vka_gpt_create(ctx, &tiny, 9, &third), VKA_SUCCESS);
    assert_int_equal(vka_gpt_train_step_prepare(third, in, tg, B, T, &opt, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_submit(g, NULL), VKA_SUCCESS);
    vka_gpt_destroy(third); /* waits for the submission, then frees */

    app_commands_destroy(&app, &c);
    vka_gpt_session_destroy(ref);
    vka_gpt_session_destroy(ss);
    vka_gpt_destroy(gpt);
    vka_gpt_destroy(twin);
    vka_context_destroy(ctx);
    app_destroy(&app);
}

/* Validation with the application's instance (issue 17): vkattn cannot enable a layer on an
 * instance it did not create. validation = 1, or VKATTN_VALIDATION=1 with validation 0, on an
 * instance without VK_LAYER_KHRONOS_validation, or with it but without VK_EXT_debug_utils,
 * fails with VKA_ERROR_UNSUPPORTED saying what to enable or how to turn it off; -1 runs. */
static vka_result app_context_validation(app_vulkan *app, int validation, vka_context **ctx) {
    vka_vulkan_env env = app_env(app);
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env, .log = tu_log,
                          .validation = validation};
    return vka_context_create(&d, ctx);
}

static bool layer_installed(void) {
    bool layer = has_layer("VK_LAYER_KHRONOS_validation");
    if (!layer && want_validation()) fail_msg("VK_LAYER_KHRONOS_validation is not installed");
    return layer;
}

static void test_validation_needs_the_app_layer(void **state) {
    (void)state;
    const char *was = getenv("VKATTN_VALIDATION");
    char *saved = was ? strdup(was) : NULL;
    for (int layer = 0; layer < 2; layer++) {
        if (layer && !layer_installed()) break;
        app_vulkan app;
        if (!app_create_layers(&app, VK_API_VERSION_1_1, layer, false)) return;
        const char *missing = layer ? "VK_EXT_debug_utils" : "VK_LAYER_KHRONOS_validation";
        vka_context *ctx = NULL;
        assert_int_equal(app_context_validation(&app, 1, &ctx), VKA_ERROR_UNSUPPORTED);
        printf("validation = 1: %s\n", vka_last_error(ctx));
        assert_non_null(strstr(vka_last_error(ctx), missing));
        assert_non_null(strstr(vka_last_error(ctx), "vka_context_desc.validation = 1"));
        assert_non_null(strstr(vka_last_error(ctx), "validation = -1"));
        vka_context_destroy(ctx);
        setenv("VKATTN_VALIDATION", "1", 1); /* 0 = the environment's choice */
        assert_int_equal(app_context_validation(&app, 0, &ctx), VKA_ERROR_UNSUPPORTED);
        assert_non_null(strstr(vka_last_error(ctx), missing));
        assert_non_null(strstr(vka_last_error(ctx), "VKATTN_VALIDATION=1"));
        vka_context_destroy(ctx);
        setenv("VKATTN_VALIDATION", "0", 1);
        assert_int_equal(app_context_validation(&app, 0, &ctx), VKA_SUCCESS);
        vka_context_destroy(ctx);
        assert_int_equal(app_context_validation(&app, -1, &ctx), VKA_SUCCESS);
        assert_int_equal(vka_context_validation_messages(ctx), 0);
        vka_context_destroy(ctx);
        app_destroy(&app);
    }
    if (saved) setenv("VKATTN_VALIDATION", saved, 1);
    else unsetenv("VKATTN_VALIDATION");
    free(saved);
}

/* With the layer and VK_EXT_debug_utils on the application's instance, validation = 1 counts
 * and logs the layer's messages as on vkattn's own instance: none for vkattn's work, one for
 * an invalid call (the instance's messages: the application's own calls count too). */
static void test_validation_on_app_instance_counts(void **state) {
    (void)state;
    if (!layer_installed()) skip();
    app_vulkan app;
    if (!app_create_with(&app, VK_API_VERSION_1_1, true)) return;
    vka_context *ctx = NULL;
    if (app_context_validation(&app, 1, &ctx) != VKA_SUCCESS)
        fail_msg("validation on the application's instance: %s", vka_last_error(ctx));
    run_gelu_checked(ctx, 500, 5, 1.0f);
    assert_int_equal(vka_context_validation_messages(ctx), 0);
    /* A buffer of size 0 is invalid (VUID-VkBufferCreateInfo-size-00912): the layer reports
     * it and does not pass the call on. */
    VkBufferCreateInfo bad = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 0,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    VkBuffer buf = VK_NULL_HANDLE;
    VkResult vr = vkCreateBuffer(app.device, &bad, NULL, &buf);
    if (vr == VK_SUCCESS) vkDestroyBuffer(app.device, buf, NULL);
    uint32_t seen = vka_context_validation_messages(ctx);
    printf("vkattn's messenger on the application's instance: %u message(s)\n", seen);
    assert_true(seen >= 1);
    assert_true(app.messages >= 1);
    vka_context_destroy(ctx);
    app.messages = 0; /* the invalid call's, on purpose */
    app_destroy(&app);
}

/* The application's VkAllocationCallbacks see every host allocation of vkattn's Vulkan
 * objects, and all are freed at destroy. */
typedef struct counting {
    long allocs, frees, live;
} counting;

static void *VKAPI_CALL c_alloc(void *user, size_t size, size_t align, VkSystemAllocationScope s) {
    (void)s;
    counting *c = user;
    if (align < sizeof(void *)) align = sizeof(void *);
    void *p = aligned_alloc(align, (size + align - 1) / align * align + align);
    if (!p) return NULL;
    c->allocs++;
    c->live++;
    return p;
}
static void VKAPI_CALL c_free(void *user, void *p) {
    counting *c = user;
    if (!p) return;
    c->frees++;
    c->live--;
    free(p);
}
static void *VKAPI_CALL c_realloc(void *user, void *old, size_t size, size_t align,
                                  VkSystemAllocationScope s) {
    if (!old) return c_alloc(user, size, align, s);
    if (!size) {
        c_free(user, old);
        return NULL;
    }
    void *p = c_alloc(user, size, align, s);
    if (!p) return NULL;
    memcpy(p, old, size); /* test allocator: copies size bytes (blocks are at least that big) */
    c_free(user, old);
    return p;
}

static void test_allocation_callbacks(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app, VK_API_VERSION_1_1)) return;
    counting cnt = {0};
    VkAllocationCallbacks cb = {.pUserData = &cnt, .pfnAllocation = c_alloc,
                                .pfnReallocation = c_realloc, .pfnFree = c_free};
    vka_vulkan_env env;
    vka_context *ctx = app_context(&app, &env, &cb);
    vka_tensor *t = tu_tensor_nan(ctx, 100);
    vka_tensor_destroy(t);
    vka_context_destroy(ctx);
    printf("allocation callbacks: %ld allocations, %ld frees\n", cnt.allocs, cnt.frees);
    /* Drivers may allocate nothing through them (lavapipe does for some objects). */
    assert_true(cnt.live == 0);
    app_destroy(&app);
}

/* The CPU backend: submit runs at once, wait succeeds, no semaphores or command buffers. */
static void test_cpu_backend_async(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    enum { N = 100 };
    float a[N], b[N];
    tu_random(a, N, 8, 1.0f);
    tu_random(b, N, 9, 1.0f);
    vka_tensor *ta = tu_tensor(ctx, N, a), *tb = tu_tensor(ctx, N, b);
    vka_tensor *sum = tu_tensor_nan(ctx, N), *out = tu_tensor_nan(ctx, N);
    vka_graph *g = gelu_graph(ctx, out, sum, ta, tb, N);
    assert_int_equal(vka_graph_submit(g, NULL), VKA_SUCCESS);
    assert_int_equal(vka_graph_wait(g, 0), VKA_SUCCESS);
    float *got = tu_read(out, N);
    check_gelu(got, a, b, N);
    free(got);
    int dummy = 0;
    vka_submit_desc sd = {.wait_count = 1, .wait_semaphores = &dummy};
    assert_int_equal(vka_graph_submit(g, &sd), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_graph_record(g, &dummy), VKA_ERROR_UNSUPPORTED);
    vka_tensor *w = NULL;
    assert_int_equal(vka_tensor_wrap_vulkan_buffer(ctx, &dummy, 0, 4, &w), VKA_ERROR_UNSUPPORTED);
    assert_int_equal(vka_tensor_vulkan_buffer(ta, &dummy, NULL, NULL), VKA_ERROR_UNSUPPORTED);
    vka_graph_destroy(g);
    vka_tensor *ts[] = {ta, tb, sum, out};
    for (size_t i = 0; i < 4; i++) vka_tensor_destroy(ts[i]);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_env_runs_ops),
        cmocka_unit_test(test_incomplete_env_refused),
        cmocka_unit_test(test_app_16bit_features_reported),
        cmocka_unit_test(test_instance_1_0),
        cmocka_unit_test(test_async_semaphores_and_destroy),
        cmocka_unit_test(test_record_into_app_command_buffer),
        cmocka_unit_test(test_wrapped_buffers_at_every_offset),
        cmocka_unit_test(test_shared_queue_two_threads),
        cmocka_unit_test(test_model_steps_in_app_hands),
        cmocka_unit_test(test_instance_1_0_deep_model),
        cmocka_unit_test(test_validation_needs_the_app_layer),
        cmocka_unit_test(test_validation_on_app_instance_counts),
        cmocka_unit_test(test_allocation_callbacks),
        cmocka_unit_test(test_cpu_backend_async),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
