/* Helpers for the model tests (test_gpt*.c), on top of test_util.h; public API only.
 *
 * Model-level cases run once on the CPU backend and once on Vulkan: cmocka's prestate says
 * which (tm_ctx). A Vulkan context is first asked to run one training step of a tiny model;
 * where its backend cannot yet (an op answers VKA_ERROR_UNSUPPORTED), the case is skipped
 * with the backend's reason -- or fails when VKATTN_REQUIRE_GPU=1, as a missing device does. */
#ifndef VKA_GPT_UTIL_H
#define VKA_GPT_UTIL_H

#include "test_util.h"

#include <stdint.h>

static const int TM_ON_CPU = 0, TM_ON_GPU = 1;

#define TM_BOTH(fn)                                                                            \
    cmocka_unit_test_prestate(fn, (void *)&TM_ON_CPU), cmocka_unit_test_prestate(fn, (void *)&TM_ON_GPU)

/* ids[0:n] uniform in [0, V), from seed (xorshift64). */
static inline void tm_tokens(int32_t *ids, size_t n, int V, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ids[i] = (int32_t)(s % (uint64_t)V);
    }
}

static inline vka_gpt *tm_model(vka_context *ctx, vka_gpt_config cfg, uint64_t seed) {
    vka_gpt *gpt = NULL;
    if (vka_gpt_create(ctx, &cfg, seed, &gpt) != VKA_SUCCESS)
        fail_msg("create: %s", vka_last_error(ctx));
    return gpt;
}

/* A Vulkan context whose backend runs the model, else skip (see the file comment). */
static inline vka_context *tm_gpu(void) {
    vka_context *ctx = tu_gpu();
    vka_gpt_config cfg = {.max_T = 4, .V = 5, .L = 1, .NH = 1, .C = 4};
    vka_gpt *gpt = tm_model(ctx, cfg, 1);
    int32_t in[8] = {0, 1, 2, 3, 4, 3, 2, 1}, tg[8] = {1, 2, 3, 4, 3, 2, 1, 0};
    vka_adamw_desc opt = {.lr = 1e-3f};
    float loss;
    vka_result r = vka_gpt_train_step(gpt, in, tg, 2, 4, &opt, &loss, NULL);
    vka_gpt_destroy(gpt);
    if (r == VKA_SUCCESS) return ctx;
    char msg[1200];
    snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
    tu_done(ctx);
    const char *req = getenv("VKATTN_REQUIRE_GPU");
    if (r != VKA_ERROR_UNSUPPORTED || (req && strcmp(req, "1") == 0))
        fail_msg("the Vulkan backend cannot run a training step: %s (%s)", vka_result_string(r), msg);
    print_message("skipping: the Vulkan backend cannot run the model yet (%s)\n", msg);
    skip();
    return NULL;
}

/* The context for a TM_BOTH case. */
static inline vka_context *tm_ctx(void **state) {
    return *(const int *)*state == TM_ON_GPU ? tm_gpu() : tu_cpu();
}

static inline float *tm_params(vka_gpt *gpt) {
    size_t n = vka_gpt_num_params(gpt);
    float *p = malloc(n * sizeof *p);
    assert_int_equal(vka_gpt_get_params(gpt, p, n), VKA_SUCCESS);
    return p;
}

static inline float *tm_grads(vka_gpt *gpt) {
    size_t n = vka_gpt_num_params(gpt);
    float *g = malloc(n * sizeof *g);
    assert_int_equal(vka_gpt_get_grads(gpt, g, n), VKA_SUCCESS);
    return g;
}

#endif
