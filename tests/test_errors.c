/*
 * Error reporting: every failure on a valid context leaves a message in vka_last_error (the
 * header's promise), and settings from the environment that make no sense are errors, not
 * silently ignored.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include "test_util.h"

/* A fresh CPU context, so a message seen afterwards was set by the call under test. */
static vka_context *fresh(void) {
    vka_context *ctx = tu_cpu();
    assert_string_equal(vka_last_error(ctx), "");
    return ctx;
}

/* r is a failure and ctx's message contains want. */
static void assert_failed_with(vka_context *ctx, vka_result r, const char *want) {
    assert_true(r < 0);
    const char *msg = vka_last_error(ctx);
    if (!strstr(msg, want)) fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

static void test_errors_measure_peak_arguments(void **state) {
    (void)state;
    vka_peak peak;
    vka_context *ctx = fresh();
    assert_failed_with(ctx, vka_measure_peak(ctx, -1, -1, NULL), "vka_measure_peak");
    tu_done(ctx);
    ctx = fresh();
    assert_failed_with(ctx, vka_measure_peak(ctx, 0, -1, &peak), "repeats = -1");
    tu_done(ctx);
    ctx = fresh();
    assert_failed_with(ctx, vka_measure_peak(ctx, -1, 0, &peak), "min_ms");
    tu_done(ctx);
    ctx = fresh();
    assert_failed_with(ctx, vka_measure_peak(ctx, NAN, 0, &peak), "min_ms");
    tu_done(ctx);
    ctx = fresh();
    assert_failed_with(ctx, vka_measure_peak(ctx, 0, 0, NULL), "out is NULL");
    tu_done(ctx);
}

static void test_errors_times_arguments(void **state) {
    (void)state;
    vka_context *ctx = fresh();
    tu_begin(ctx);
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
    assert_failed_with(ctx, vka_graph_times(g, NULL, NULL, -1, NULL), "cap = -1");
    vka_graph_destroy(g);
    tu_done(ctx);

    ctx = fresh();
    vka_gpt *gpt = NULL;
    vka_gpt_config cfg = {.max_T = 4, .V = 5, .L = 1, .NH = 1, .C = 4};
    assert_int_equal(vka_gpt_create(ctx, &cfg, 1, &gpt), VKA_SUCCESS);
    assert_failed_with(ctx, vka_gpt_times(gpt, NULL, NULL, -1, NULL), "cap = -1");
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* A context that failed to create answers every other call with a message saying so. */
static void test_errors_failed_context_says_so(void **state) {
    (void)state;
    vka_context_desc d = {.backend = (vka_backend)99};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(ctx);
    assert_non_null(strstr(vka_last_error(ctx), "unknown backend 99"));
    const char *says = "the context failed to create";
    vka_device_info info;
    assert_failed_with(ctx, vka_context_device_info(ctx, 0, &info), "vka_context_device_info");
    assert_failed_with(ctx, vka_context_device_info(ctx, 0, &info), says);
    assert_failed_with(ctx, vka_context_selected_device(ctx, &info), says);
    assert_failed_with(ctx, vka_context_set_profiling(ctx, true), "vka_context_set_profiling");
    vka_peak peak;
    assert_failed_with(ctx, vka_measure_peak(ctx, 0, 0, &peak), "vka_measure_peak");
    assert_failed_with(ctx, vka_check(ctx, 1, NULL, NULL, NULL), "vka_check");
    vka_tensor *t = NULL;
    assert_failed_with(ctx, vka_tensor_create(ctx, 4, &t), "vka_tensor_create");
    assert_failed_with(ctx, vka_graph_begin(ctx), "vka_graph_begin");
    vka_gpt *gpt = NULL;
    vka_gpt_config cfg = {.max_T = 4, .V = 5, .L = 1, .NH = 1, .C = 4};
    assert_failed_with(ctx, vka_gpt_create(ctx, &cfg, 1, &gpt), "vka_gpt_create");
    assert_failed_with(ctx, vka_gpt_load(ctx, "model.bin", &gpt), "vka_gpt_load");
    vka_train_state st;
    assert_failed_with(ctx, vka_gpt_load_state(ctx, "state.bin", &gpt, &st),
                       "vka_gpt_load_state");
    assert_failed_with(ctx, vka_gpt_load_state(ctx, "state.bin", &gpt, &st), says);
    assert_failed_with(ctx, vka_train_state_read(ctx, "state.bin", &st), "vka_train_state_read");
    vka_context_destroy(ctx);
}

static void test_errors_bad_kernels_setting(void **state) {
    (void)state;
    /* In the environment. */
    setenv("VKATTN_KERNELS", "bogus", 1);
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN};
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    unsetenv("VKATTN_KERNELS");
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_failed_with(ctx, r, "VKATTN_KERNELS=\"bogus\"");
    assert_failed_with(ctx, r, "gpu, cpu or auto");
    vka_context_destroy(ctx);
    /* In the desc. */
    d.kernels = (vka_kernels)7;
    r = vka_context_create(&d, &ctx);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_failed_with(ctx, r, "kernels = 7");
    vka_context_destroy(ctx);
}

static void test_errors_bad_validation_setting(void **state) {
    (void)state;
    const char *was = getenv("VKATTN_VALIDATION");
    char old[64];
    snprintf(old, sizeof old, "%s", was ? was : "");
    setenv("VKATTN_VALIDATION", "yes", 1);
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN};
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (was) setenv("VKATTN_VALIDATION", old, 1);
    else unsetenv("VKATTN_VALIDATION");
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_failed_with(ctx, r, "VKATTN_VALIDATION=\"yes\"");
    vka_context_destroy(ctx);
    /* In the desc: only 1, -1 and 0 mean something, on either backend. */
    const int bad[] = {2, -2, 100};
    for (int b = 0; b < 2; b++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            d = (vka_context_desc){.backend = b ? VKA_BACKEND_CPU : VKA_BACKEND_VULKAN,
                                   .validation = bad[i]};
            r = vka_context_create(&d, &ctx);
            assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
            char want[48];
            snprintf(want, sizeof want, "validation = %d", bad[i]);
            assert_failed_with(ctx, r, want);
            vka_context_destroy(ctx);
        }
}

/* The variable name's value, saved (NULL: unset) so that restore puts it back. */
typedef struct saved_var {
    const char *name;
    char *value;
} saved_var;

static saved_var set_var(const char *name, const char *value) {
    const char *old = getenv(name);
    saved_var s = {name, old ? strdup(old) : NULL};
    setenv(name, value, 1);
    return s;
}

static void restore(saved_var *s) {
    if (s->value) setenv(s->name, s->value, 1);
    else unsetenv(s->name);
    free(s->value);
}

/* Every variable's value is checked when a context is created, whichever backend it runs and
 * whatever its desc decides (a typo is never silently ignored): numbers are digits only. */
static void test_errors_every_variable_checked_on_either_backend(void **state) {
    (void)state;
    static const struct {
        const char *var, *value, *want;
    } bad[] = {
        {"VKATTN_VALIDATION", "2", "is not 0 or 1"},
        {"VKATTN_DEVICE", "abc", "is not a device index"},
        {"VKATTN_DEVICE", " 1", "is not a device index"},
        {"VKATTN_KERNELS", "bogus", "is not a kernel variant"},
        {"VKATTN_TEXEL_LOADS", "2", "is not 0 or 1"},
        {"VKATTN_MAX_BINDING_BYTES", "4095", "is not a number of bytes >= 4096"},
        {"VKATTN_MAX_TENSOR_BYTES", "1G", "is not a number of bytes >= 65536"},
        {"VKATTN_MAX_MEMORY_BYTES", "0", "is not a number of bytes >= 65536"},
        {"VKATTN_MAX_MEMORY_BYTES", " 65536", "is not a number of bytes >= 65536"},
        {"VKATTN_CPU_KERNELS", "abc", "is not fast, reference or fast-avx2"},
        {"VKATTN_TEXT_PIECE_BYTES", "18446744073709551615",
         "is not a number of bytes from 1 to 4611686018427387903"},
        {"VKATTN_TEXT_PIECE_BYTES", "+1", "is not a number of bytes from 1 to"},
        {"VKATTN_TEST_FAIL_ALLOC", "-1", "is not a count"},
        {"VKATTN_TEST_FAIL_SUBMIT", "abc", "is not a count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int k = 0; k < 4; k++) {
            /* k & 1: the CPU backend; k & 2: the desc gives what the variable would */
            bool cpu = k & 1, given = k & 2;
            vka_context_desc d = {.backend = cpu ? VKA_BACKEND_CPU : VKA_BACKEND_VULKAN};
            if (given) {
                d.validation = -1;
                d.device = "0";
                d.kernels = VKA_KERNELS_GPU;
                d.cpu_kernels = VKA_CPU_KERNELS_REFERENCE;
                d.max_binding_bytes = d.max_tensor_bytes = d.max_memory_bytes = 1 << 20;
            }
            saved_var s = set_var(bad[i].var, bad[i].value);
            vka_context *ctx = NULL;
            vka_result r = vka_context_create(&d, &ctx);
            restore(&s);
            char want[128];
            snprintf(want, sizeof want, "%s=\"%s\" %s", bad[i].var, bad[i].value, bad[i].want);
            if (r != VKA_ERROR_INVALID_ARGUMENT || !strstr(vka_last_error(ctx), want))
                fail_msg("%s=\"%s\", %s backend%s: %s (%s), expected \"%s\"", bad[i].var,
                         bad[i].value, cpu ? "cpu" : "vulkan", given ? ", desc given" : "",
                         vka_result_string(r), vka_last_error(ctx), want);
            vka_context_destroy(ctx);
        }
    /* desc.cpu_threads past VKA_CPU_MAX_THREADS (libgomp crashes on 100000) or negative */
    const int threads[2] = {VKA_CPU_MAX_THREADS + 1, -2};
    for (int i = 0; i < 2; i++) {
        vka_context_desc d = {.backend = VKA_BACKEND_CPU, .cpu_threads = threads[i]};
        vka_context *ctx = NULL;
        assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(vka_last_error(ctx), "cpu_threads"));
        assert_non_null(strstr(vka_last_error(ctx), "is not in 0 .. 4096"));
        vka_context_destroy(ctx);
    }
    /* The other backend's variables, set to what they allow, change nothing on the CPU. */
    static const char *const good[][2] = {
        {"VKATTN_DEVICE", "7"},          {"VKATTN_KERNELS", "gpu"},
        {"VKATTN_TEXEL_LOADS", "0"},     {"VKATTN_MAX_BINDING_BYTES", "4096"},
        {"VKATTN_TEST_FAIL_ALLOC", "3"}, {"VKATTN_TEST_FAIL_SUBMIT", "0"},
    };
    saved_var s[sizeof good / sizeof good[0]];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) s[i] = set_var(good[i][0], good[i][1]);
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&(vka_context_desc){.backend = VKA_BACKEND_CPU}, &ctx);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) restore(&s[i]);
    if (r != VKA_SUCCESS) fail_msg("CPU context with the Vulkan settings set: %s",
                                   vka_last_error(ctx));
    vka_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors_measure_peak_arguments),
        cmocka_unit_test(test_errors_times_arguments),
        cmocka_unit_test(test_errors_failed_context_says_so),
        cmocka_unit_test(test_errors_bad_kernels_setting),
        cmocka_unit_test(test_errors_bad_validation_setting),
        cmocka_unit_test(test_errors_every_variable_checked_on_either_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
