/*
 * The memory ceiling (vka_context_desc.max_memory_bytes, VKATTN_MAX_MEMORY_BYTES; by default
 * physical memory on the CPU backend and a CPU-type Vulkan device): a model, batch or tensor
 * past it is refused before anything is allocated, with VKA_ERROR_DEVICE_LIMIT and a message
 * naming the arena and the sizes, on both backends alike; the context and the model stay
 * usable for smaller work.
 */
#define _POSIX_C_SOURCE 200809L
#include "gpt_util.h"

#include <unistd.h>

#define LIMIT ((uint64_t)64 << 20) /* 64 MiB */

/* A context whose arenas may take LIMIT bytes in all: the CPU backend through the desc field,
 * Vulkan through the environment variable (so that tu_gpu's skip rules apply). */
static vka_context *limited_ctx(void **state) {
    if (*(const int *)*state == TM_ON_CPU) {
        vka_context_desc d = {.backend = VKA_BACKEND_CPU, .log = tu_log, .max_memory_bytes = LIMIT};
        vka_context *ctx = NULL;
        if (vka_context_create(&d, &ctx) != VKA_SUCCESS) fail_msg("%s", vka_last_error(ctx));
        return ctx;
    }
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)LIMIT);
    setenv("VKATTN_MAX_MEMORY_BYTES", v, 1);
    vka_context *ctx = tm_gpu();
    unsetenv("VKATTN_MAX_MEMORY_BYTES");
    return ctx;
}

/* r is VKA_ERROR_DEVICE_LIMIT and the message names what and the limit. */
static void expect_refused(vka_context *ctx, vka_result r, const char *what) {
    const char *msg = vka_last_error(ctx);
    print_message("  %s: %s\n", vka_result_string(r), msg);
    assert_int_equal(r, VKA_ERROR_DEVICE_LIMIT);
    assert_non_null(strstr(msg, what));
    assert_non_null(strstr(msg, "64.0 MiB"));
    assert_non_null(strstr(msg, "VKATTN_MAX_MEMORY_BYTES"));
}

static float step(vka_gpt *gpt, int B, int T, vka_result *r) {
    size_t n = (size_t)B * T;
    int32_t *in = malloc(n * sizeof *in), *tg = malloc(n * sizeof *tg);
    tm_tokens(in, n, 65, 1);
    tm_tokens(tg, n, 65, 2);
    vka_adamw_desc opt = {.lr = 1e-3f};
    float loss = NAN;
    *r = vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, NULL);
    free(in);
    free(tg);
    return loss;
}

/* Parameters past the limit (C = 1024, L = 2: 100 MiB) are refused by vka_gpt_create; a small
 * model trains, a batch whose activations are past the limit (B = 4096: over 1 GiB) is
 * refused, and the next small step gives the loss an untouched twin of the model gives. */
static void test_memory_limit_refuses_a_plan_past_it(void **state) {
    vka_context *ctx = limited_ctx(state);
    if (!ctx) return;
    vka_gpt_config big = {.max_T = 32, .V = 65, .L = 2, .NH = 8, .C = 1024};
    vka_gpt *gpt = NULL;
    expect_refused(ctx, vka_gpt_create(ctx, &big, 1, &gpt), "parameters");
    assert_null(gpt);

    vka_gpt_config cfg = {.max_T = 32, .V = 65, .L = 2, .NH = 2, .C = 64};
    vka_gpt *a = tm_model(ctx, cfg, 7), *b = tm_model(ctx, cfg, 7);
    vka_result r;
    step(a, 4, 32, &r);
    assert_int_equal(r, VKA_SUCCESS);
    step(a, 4096, 32, &r);
    expect_refused(ctx, r, "activations");
    assert_true(vka_gpt_memory_bytes(a) <= LIMIT);
    float la = step(a, 4, 32, &r);
    assert_int_equal(r, VKA_SUCCESS);
    step(b, 4, 32, &r);
    float lb = step(b, 4, 32, &r);
    assert_int_equal(r, VKA_SUCCESS);
    print_message("  loss after the refusal %.6f, untouched twin %.6f\n", la, lb);
    assert_true(isfinite(la) && fabsf(la - lb) <= 1e-5f * fabsf(lb));
    vka_gpt_destroy(a);
    vka_gpt_destroy(b);
    tu_done(ctx);
}

/* A public tensor past the limit (80 MiB) is refused naming it; 4 MiB is not. */
static void test_memory_limit_bounds_tensors(void **state) {
    vka_context *ctx = limited_ctx(state);
    if (!ctx) return;
    vka_tensor *t = NULL;
    expect_refused(ctx, vka_tensor_create(ctx, (size_t)20 << 20, &t), "vka_tensor");
    assert_null(t);
    assert_int_equal(vka_tensor_create(ctx, (size_t)1 << 20, &t), VKA_SUCCESS);
    vka_tensor_destroy(t);
    tu_done(ctx);
}

/* Without a limit the CPU backend's ceiling is physical memory: a tensor of 1 GiB more is
 * refused up front (not attempted), naming the sizes; a desc limit above it does not raise it. */
static void test_memory_limit_cpu_default_is_physical_memory(void **state) {
    (void)state;
    uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    if (phys == 0 || phys > ((uint64_t)1 << 39)) skip(); /* past the CPU's largest tensor */
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .max_memory_bytes = (uint64_t)1 << 50};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_SUCCESS);
    vka_tensor *t = NULL;
    size_t n = (size_t)((phys + ((uint64_t)1 << 30)) / 4);
    vka_result r = vka_tensor_create(ctx, n, &t);
    const char *msg = vka_last_error(ctx);
    print_message("  %s\n", msg);
    assert_int_equal(r, VKA_ERROR_DEVICE_LIMIT);
    char want[64];
    snprintf(want, sizeof want, "(%llu bytes) (its memory", (unsigned long long)phys);
    assert_non_null(strstr(msg, want));
    vka_context_destroy(ctx);
}

/* A bad VKATTN_MAX_MEMORY_BYTES or a desc value below 64 KiB fails the context naming it; a
 * good one applies when the desc field is 0. */
static void test_memory_limit_bad_values_are_refused(void **state) {
    (void)state;
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .max_memory_bytes = 1000};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "max_memory_bytes = 1000"));
    vka_context_destroy(ctx);
    d.max_memory_bytes = 0;
    const char *bad[] = {"64M", "-1", "1000", " 67108864", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("VKATTN_MAX_MEMORY_BYTES", bad[i], 1);
        vka_result r = vka_context_create(&d, &ctx);
        char want[64];
        snprintf(want, sizeof want, "VKATTN_MAX_MEMORY_BYTES=\"%s\"", bad[i]);
        if (r != VKA_ERROR_INVALID_ARGUMENT || !strstr(vka_last_error(ctx), want))
            fail_msg("\"%s\": %s: %s", bad[i], vka_result_string(r), vka_last_error(ctx));
        vka_context_destroy(ctx);
    }
    setenv("VKATTN_MAX_MEMORY_BYTES", "67108864", 1);
    assert_int_equal(vka_context_create(&d, &ctx), VKA_SUCCESS);
    unsetenv("VKATTN_MAX_MEMORY_BYTES");
    vka_tensor *t = NULL;
    expect_refused(ctx, vka_tensor_create(ctx, (size_t)20 << 20, &t), "vka_tensor");
    vka_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TM_BOTH(test_memory_limit_refuses_a_plan_past_it),
        TM_BOTH(test_memory_limit_bounds_tensors),
        cmocka_unit_test(test_memory_limit_cpu_default_is_physical_memory),
        cmocka_unit_test(test_memory_limit_bad_values_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
