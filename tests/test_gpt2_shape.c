/* GPT-2 124M's shapes on the Vulkan backend: wte (50304 x 768 floats, 147.4 MiB) is past
 * lavapipe's maxStorageBufferRange (128 MiB) and is split by the ops. One layer (L = 1) of the
 * GPT-2-small shape (V 50257, Vp 50304, C 768, NH 12, max_T 1024): a forward at B=1 T=64 and a
 * training step at B=2 T=32, losses against the CPU backend. Times are printed, not asserted.
 * VKATTN_TEST_GPT2_LAYERS=12 runs the full depth instead (slow; by hand). */
#define _POSIX_C_SOURCE 200809L
#include "gpt_util.h"

#include <math.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

typedef struct run {
    float fwd, step, after;
    double create_ms, fwd_ms, step_ms;
} run;

static run run_on(vka_context *ctx, const vka_gpt_config *cfg) {
    run r;
    int32_t in[64], tg[64];
    tm_tokens(in, 64, cfg->V, 21);
    tm_tokens(tg, 64, cfg->V, 22);
    in[5] = cfg->V - 1; /* in wte's last block of rows */
    tg[7] = cfg->V - 1;
    double t0 = now_ms();
    vka_gpt *g = tm_model(ctx, *cfg, 9);
    r.create_ms = now_ms() - t0;
    t0 = now_ms();
    if (vka_gpt_forward(g, in, tg, 1, 64, &r.fwd, NULL) != VKA_SUCCESS)
        fail_msg("forward: %s", vka_last_error(ctx));
    r.fwd_ms = now_ms() - t0;
    vka_adamw_desc opt = {.lr = 1e-3f, .grad_clip = 1.0f, .weight_decay = 0.1f};
    t0 = now_ms();
    if (vka_gpt_train_step(g, in, tg, 2, 32, &opt, &r.step, NULL) != VKA_SUCCESS)
        fail_msg("train step: %s", vka_last_error(ctx));
    r.step_ms = now_ms() - t0;
    if (vka_gpt_forward(g, in, tg, 2, 32, &r.after, NULL) != VKA_SUCCESS)
        fail_msg("forward: %s", vka_last_error(ctx));
    vka_gpt_destroy(g);
    return r;
}

static void test_gpt2_small_shape_matches_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    vka_gpt_config cfg = {.max_T = 1024, .V = 50257, .Vp = 50304, .L = 1, .NH = 12, .C = 768};
    const char *layers = getenv("VKATTN_TEST_GPT2_LAYERS");
    if (layers && atoi(layers) > 0) cfg.L = atoi(layers);
    run g = run_on(ctx, &cfg);
    tu_done(ctx);
    vka_context *cpu = tu_cpu();
    run c = run_on(cpu, &cfg);
    tu_done(cpu);
    print_message("GPT-2 small shape, L=%d: create / forward B1 T64 / train step B2 T32 ms: "
                  "vulkan %.0f / %.0f / %.0f, cpu %.0f / %.0f / %.0f\n", cfg.L, g.create_ms, g.fwd_ms,
                  g.step_ms, c.create_ms, c.fwd_ms, c.step_ms);
    print_message("losses: forward vulkan %.6f cpu %.6f; step %.6f / %.6f; after the step "
                  "%.6f / %.6f (ln V = %.6f)\n", g.fwd, c.fwd, g.step, c.step, g.after, c.after,
                  log(cfg.V));
    assert_true(fabsf(g.fwd - c.fwd) < 1e-4f * c.fwd);
    assert_true(fabsf(g.step - c.step) < 1e-4f * c.step);
    assert_true(fabsf(g.after - c.after) < 1e-4f * c.after);
    assert_true(c.after < c.step); /* the step learned something */
}

/* The forward loss of the GPT-2 small shape (L = 1; VKATTN_TEST_GPT2_LAYERS for more) in fp32,
 * bf16 and fp16 mixed precision (its 16-bit wte copy, 77 MiB, and the head's products through
 * the 16-bit matmul): each 16-bit loss within 1e-2 of fp32's (issue 19's bound; measured 1.5e-4
 * for bf16 at L = 12), and the Vulkan backend within 1e-4 relative of the CPU backend in each. */
static void test_gpt2_small_shape_16bit_forward(void **state) {
    (void)state;
    vka_gpt_config cfg = {.max_T = 1024, .V = 50257, .Vp = 50304, .L = 1, .NH = 12, .C = 768};
    const char *layers = getenv("VKATTN_TEST_GPT2_LAYERS");
    if (layers && atoi(layers) > 0) cfg.L = atoi(layers);
    int32_t in[64], tg[64];
    tm_tokens(in, 64, cfg.V, 23);
    tm_tokens(tg, 64, cfg.V, 24);
    float loss[2][3];
    for (int b = 0; b < 2; b++) {
        vka_context *ctx = b ? tu_gpu() : tu_cpu();
        if (!ctx) return;
        vka_gpt *g = tm_model(ctx, cfg, 9);
        for (int p = 0; p < 3; p++) {
            assert_int_equal(vka_gpt_set_precision(g, (vka_dtype)p), VKA_SUCCESS);
            if (vka_gpt_forward(g, in, tg, 1, 64, &loss[b][p], NULL) != VKA_SUCCESS)
                fail_msg("forward in %s: %s", vka_dtype_string((vka_dtype)p), vka_last_error(ctx));
        }
        vka_gpt_destroy(g);
        tu_done(ctx);
    }
    print_message("GPT-2 small shape, L=%d, B1 T64 loss: cpu fp32 %.6f bf16 %.6f f16 %.6f; vulkan "
                  "%.6f %.6f %.6f\n", cfg.L, loss[0][0], loss[0][1], loss[0][2], loss[1][0],
                  loss[1][1], loss[1][2]);
    for (int b = 0; b < 2; b++)
        for (int p = 1; p < 3; p++) {
            assert_true(loss[b][p] != loss[b][0]); /* it ran in 16 bits */
            assert_true(fabsf(loss[b][p] - loss[b][0]) < 1e-2f);
        }
    for (int p = 0; p < 3; p++) assert_true(fabsf(loss[1][p] - loss[0][p]) < 1e-4f * loss[0][p]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_small_shape_16bit_forward),
        cmocka_unit_test(test_gpt2_small_shape_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
