/* Embedding: vkattn running on the application's own VkInstance / VkDevice / VkQueue
 * (vka_vulkan_env), as an engine would next to its renderer. The test plays the application:
 * it creates the Vulkan objects with the loader itself, hands them to vkattn, runs ops, and
 * checks the objects are still its own (usable, not destroyed) after vka_context_destroy. */
#include <vulkan/vulkan.h>

#include "test_util.h"

typedef struct app_vulkan {
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
} app_vulkan;

/* The application's own Vulkan objects; false (and skip/fail) when there is no device. */
static bool app_create(app_vulkan *app) {
    memset(app, 0, sizeof *app);
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                            .pApplicationName = "test_embed",
                            .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &ai};
    uint32_t n = 0;
    if (vkCreateInstance(&ii, NULL, &app->instance) != VK_SUCCESS ||
        vkEnumeratePhysicalDevices(app->instance, &n, NULL) != VK_SUCCESS || n == 0) {
        if (app->instance) vkDestroyInstance(app->instance, NULL);
        const char *req = getenv("VKATTN_REQUIRE_GPU");
        if (req && strcmp(req, "1") == 0) fail_msg("no Vulkan device for the embedding test");
        skip();
        return false;
    }
    n = 1;
    vkEnumeratePhysicalDevices(app->instance, &n, &app->phys);
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
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi};
    assert_int_equal(vkCreateDevice(app->phys, &di, NULL, &app->device), VK_SUCCESS);
    vkGetDeviceQueue(app->device, app->family, 0, &app->queue);
    return true;
}

static void app_destroy(app_vulkan *app) {
    vkDestroyDevice(app->device, NULL);
    vkDestroyInstance(app->instance, NULL);
}

static void test_embed_runs_ops_on_the_applications_device(void **state) {
    (void)state;
    app_vulkan app;
    if (!app_create(&app)) return;
    vka_vulkan_env env = {.get_instance_proc_addr = (void *)vkGetInstanceProcAddr,
                          .instance = app.instance, .physical_device = app.phys,
                          .device = app.device, .queue = app.queue, .queue_family = app.family};
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env, .log = tu_log};
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r != VKA_SUCCESS) fail_msg("embedding context: %s", vka_last_error(ctx));
    vka_device_info info;
    assert_int_equal(vka_context_selected_device(ctx, &info), VKA_SUCCESS);
    assert_true(info.selected);

    /* A small op chain: out = gelu(a + b), read back. */
    enum { N = 1000 };
    float a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i / N;
        b[i] = 1.0f;
    }
    vka_tensor *ta = tu_tensor(ctx, N, a), *tb = tu_tensor(ctx, N, b);
    vka_tensor *sum = tu_tensor_nan(ctx, N), *out = tu_tensor_nan(ctx, N);
    tu_begin(ctx);
    assert_int_equal(vka_residual_forward(ctx, sum, ta, tb, N), VKA_SUCCESS);
    assert_int_equal(vka_gelu_forward(ctx, out, sum, N), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, N);
    for (int i = 0; i < N; i++) {
        double x = a[i] + 1.0;
        double want = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        if (fabs(got[i] - want) > 1e-5) fail_msg("element %d: %g, want %g", i, got[i], want);
    }
    free(got);
    vka_tensor *all[] = {ta, tb, sum, out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vka_tensor_destroy(all[i]);
    vka_context_destroy(ctx);

    /* The application's device is untouched and still works. */
    assert_int_equal(vkDeviceWaitIdle(app.device), VK_SUCCESS);
    app_destroy(&app);
}

static void test_embed_rejects_incomplete_env(void **state) {
    (void)state;
    vka_vulkan_env env = {0};
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .vulkan = &env};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_vulkan_env"));
    vka_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed_runs_ops_on_the_applications_device),
        cmocka_unit_test(test_embed_rejects_incomplete_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
