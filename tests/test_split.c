/* Tensors past the Vulkan binding limit: with vka_context_desc.max_binding_bytes lowered to
 * 4 KiB (1024 floats per binding), small tensors are split by every op (src/vk/vk_internal.h),
 * and the results must match the CPU backend: a matmul in every transpose combination with
 * bias, batches and accumulation; a tiny model's forward and training step; on both kernel
 * variants. (The op tests also run with lowered limits: tests/CMakeLists.txt, *_split.) */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "gpt_util.h"

#include <math.h>

#define LIMIT 4096

static vka_context *split_ctx(vka_kernels kernels) { return tu_gpu_limited(kernels, LIMIT); }

static const vka_kernels KERNELS[2] = {VKA_KERNELS_GPU, VKA_KERNELS_CPU};

static void fill_rand(float *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s % 20001) / 10000.0 - 1.0);
    }
}

/* out of one matmul on ctx, from the same inputs. */
static float *matmul_on(vka_context *ctx, const float *a, size_t na, const float *b, size_t nb,
                        const float *bias, const float *out0, size_t no, vka_matmul_desc d) {
    vka_tensor *ta = tu_tensor(ctx, na, a), *tb = tu_tensor(ctx, nb, b);
    vka_tensor *tc = tu_tensor(ctx, (size_t)d.N, bias), *to = tu_tensor(ctx, no, out0);
    d.a = ta, d.b = tb, d.bias = tc, d.out = to;
    vka_graph *g = NULL;
    if (vka_graph_begin(ctx) != VKA_SUCCESS || vka_matmul(ctx, &d) != VKA_SUCCESS ||
        vka_graph_end(ctx, &g) != VKA_SUCCESS || vka_graph_run(g) != VKA_SUCCESS)
        fail_msg("matmul: %s", vka_last_error(ctx));
    vka_graph_destroy(g);
    float *r = tu_read(to, no);
    vka_tensor_destroy(ta);
    vka_tensor_destroy(tb);
    vka_tensor_destroy(tc);
    vka_tensor_destroy(to);
    return r;
}

/* Shapes whose operands are 3 to 40 bindings long, with rows longer than a binding (K = 1100:
 * one row of A is past 1024 floats, so K is split and accumulated), odd sizes everywhere. */
static void test_split_matmul_matches_cpu(void **state) {
    (void)state;
    vka_context *cpu = tu_cpu();
    static const int shapes[][4] = {{37, 45, 29, 3}, {5, 67, 1100, 1}, {130, 3, 77, 2}};
    for (int v = 0; v < 2; v++) {
        vka_context *ctx = split_ctx(KERNELS[v]);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int tr = 0; tr < 4; tr += s == 0 ? 1 : 3) { /* all four, then none / both */
                int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], batch = shapes[s][3];
                size_t na = (size_t)batch * M * K, nb = (size_t)batch * K * N;
                size_t no = (size_t)batch * M * N;
                float *a = malloc(na * 4), *b = malloc(nb * 4), *bias = malloc((size_t)N * 4);
                float *o = malloc(no * 4);
                fill_rand(a, na, 1 + s), fill_rand(b, nb, 2 + s), fill_rand(bias, N, 3);
                fill_rand(o, no, 4);
                vka_matmul_desc d = {.M = M, .N = N, .K = K, .batch = batch,
                                     .trans_a = tr & 1, .trans_b = tr & 2, .alpha = 0.5f,
                                     .accumulate = s == 1};
                float *g = matmul_on(ctx, a, na, b, nb, bias, o, no, d);
                float *c = matmul_on(cpu, a, na, b, nb, bias, o, no, d);
                double worst = 0;
                for (size_t i = 0; i < no; i++) worst = fmax(worst, fabs(g[i] - c[i]));
                if (worst > 2e-4 * sqrt((double)K))
                    fail_msg("matmul %dx%dx%d batch %d trans %d (%s kernels): max |diff| %g", M, N,
                             K, batch, tr, v ? "cpu" : "gpu", worst);
                free(a), free(b), free(bias), free(o), free(g), free(c);
            }
        tu_done(ctx);
    }
    tu_done(cpu);
}

/* A tiny model (wte 3 bindings, fcw 8, logits 22): forward loss, then two training steps'
 * losses and the parameters after them, against the CPU backend. */
static void test_split_model_matches_cpu(void **state) {
    (void)state;
    vka_gpt_config cfg = {.max_T = 24, .V = 67, .L = 2, .NH = 3, .C = 48};
    enum { B = 3, T = 19 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, cfg.V, 11);
    tm_tokens(tg, B * T, cfg.V, 12);
    vka_adamw_desc opt = {.lr = 1e-3f, .grad_clip = 1.0f};
    vka_context *cpu = tu_cpu();
    vka_gpt *c = tm_model(cpu, cfg, 3);
    float lc[3];
    assert_int_equal(vka_gpt_forward(c, in, tg, B, T, &lc[0], NULL), VKA_SUCCESS);
    for (int s = 1; s < 3; s++)
        assert_int_equal(vka_gpt_train_step(c, in, tg, B, T, &opt, &lc[s], NULL), VKA_SUCCESS);
    float *pc = tm_params(c);
    size_t n = vka_gpt_num_params(c);
    for (int v = 0; v < 2; v++) {
        vka_context *ctx = split_ctx(KERNELS[v]);
        vka_gpt *g = tm_model(ctx, cfg, 3);
        float lg[3];
        assert_int_equal(vka_gpt_forward(g, in, tg, B, T, &lg[0], NULL), VKA_SUCCESS);
        for (int s = 1; s < 3; s++)
            if (vka_gpt_train_step(g, in, tg, B, T, &opt, &lg[s], NULL) != VKA_SUCCESS)
                fail_msg("train step: %s", vka_last_error(ctx));
        float *pg = tm_params(g);
        double worst = 0;
        for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(pg[i] - pc[i]));
        print_message("%s kernels, binding limit %d: loss %.6f %.6f %.6f (cpu %.6f %.6f %.6f), "
                      "max |param diff| %.2g\n", v ? "cpu" : "gpu", LIMIT, lg[0], lg[1], lg[2],
                      lc[0], lc[1], lc[2], worst);
        for (int s = 0; s < 3; s++) assert_true(fabsf(lg[s] - lc[s]) < 1e-4f * fabsf(lc[s]));
        assert_true(worst < 1e-5);
        free(pg);
        vka_gpt_destroy(g);
        tu_done(ctx);
    }
    free(pc);
    vka_gpt_destroy(c);
    tu_done(cpu);
}

/* ctx of backend with its largest tensor lowered to max_tensor bytes (0: the device's). */
static vka_context *limited_ctx(vka_backend backend, uint64_t max_tensor) {
    vka_context_desc d = {.backend = backend, .validation = 1, .log = tu_log,
                          .max_tensor_bytes = max_tensor};
    const char *v = getenv("VKATTN_VALIDATION");
    if (v && strcmp(v, "0") == 0) d.validation = -1;
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS) {
        char msg[1200];
        snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
        vka_context_destroy(ctx);
        const char *req = getenv("VKATTN_REQUIRE_GPU");
        if (backend == VKA_BACKEND_CPU || (req && strcmp(req, "1") == 0))
            fail_msg("no context: %s", msg);
        skip();
    }
    return ctx;
}

/* The LM head in blocks of rows (src/model/gpt_internal.h, gpt_head): with the largest tensor
 * lowered to 256 KiB, the logits of B*T = 128 positions of Vp 1536 (768 KiB) are 4 blocks of
 * 42 rows. Logits, loss, gradients and evaluation must match the same backend unlimited, and
 * the CPU backend. */
static void test_split_logit_blocks_match_whole(void **state) {
    (void)state;
    vka_gpt_config cfg = {.max_T = 32, .V = 1500, .L = 1, .NH = 2, .C = 32};
    enum { B = 4, T = 32, BT = B * T };
    int32_t in[BT], tg[BT], text[3 * T + 1];
    tm_tokens(in, BT, cfg.V, 21);
    tm_tokens(tg, BT, cfg.V, 22);
    tm_tokens(text, 3 * T + 1, cfg.V, 23);
    const vka_backend kinds[2] = {VKA_BACKEND_CPU, VKA_BACKEND_VULKAN};
    for (int k = 0; k < 2; k++) {
        float loss[2], bwd_loss[2], *logits[2], *grads[2];
        double eval[2];
        size_t n = 0;
        for (int lim = 0; lim < 2; lim++) {
            vka_context *ctx = limited_ctx(kinds[k], lim ? 256 << 10 : 0);
            if (lim) { /* the limit is in force: one tensor past 256 KiB is refused */
                vka_tensor *big = NULL;
                assert_int_equal(vka_tensor_create(ctx, 70000, &big), VKA_ERROR_DEVICE_LIMIT);
            }
            vka_gpt *g = tm_model(ctx, cfg, 5);
            n = vka_gpt_num_params(g);
            logits[lim] = malloc((size_t)BT * cfg.V * sizeof(float));
            grads[lim] = malloc(n * sizeof(float));
            if (vka_gpt_forward(g, in, tg, B, T, &loss[lim], logits[lim]) != VKA_SUCCESS ||
                vka_gpt_forward_backward(g, in, tg, B, T, &bwd_loss[lim]) != VKA_SUCCESS ||
                vka_gpt_get_grads(g, grads[lim], n) != VKA_SUCCESS ||
                vka_gpt_eval(g, text, 3 * T + 1, T, &eval[lim], NULL) != VKA_SUCCESS)
                fail_msg("%s, max tensor %s: %s", kinds[k] == VKA_BACKEND_VULKAN ? "vulkan" : "cpu",
                         lim ? "256 KiB" : "unlimited", vka_last_error(ctx));
            vka_gpt_destroy(g);
            tu_done(ctx);
        }
        double dl = 0, dg = 0, gmax = 0;
        for (size_t i = 0; i < (size_t)BT * cfg.V; i++)
            dl = fmax(dl, fabs(logits[0][i] - logits[1][i]));
        for (size_t i = 0; i < n; i++) {
            dg = fmax(dg, fabs(grads[0][i] - grads[1][i]));
            gmax = fmax(gmax, fabs(grads[0][i]));
        }
        print_message("%s: loss %.7f / %.7f, backward loss %.7f / %.7f, eval %.7f / %.7f, "
                      "max |logit diff| %.2g, max |grad diff| %.2g (max |grad| %.2g)\n",
                      kinds[k] == VKA_BACKEND_VULKAN ? "vulkan" : "cpu", loss[0], loss[1], bwd_loss[0], bwd_loss[1],
                      eval[0], eval[1], dl, dg, gmax);
        assert_true(dl <= 1e-6);
        assert_true(fabsf(loss[0] - loss[1]) <= 1e-6f * loss[0]);
        assert_true(fabsf(bwd_loss[0] - bwd_loss[1]) <= 1e-6f * bwd_loss[0]);
        assert_true(fabs(eval[0] - eval[1]) <= 1e-6 * eval[0]);
        assert_true(dg <= 1e-5 * gmax);
        for (int lim = 0; lim < 2; lim++) free(logits[lim]), free(grads[lim]);
    }
}

/* A max_tensor_bytes below 64 KiB, or a VKATTN_MAX_TENSOR_BYTES that is not a number, is
 * refused, naming it. */
static void test_split_bad_tensor_limit(void **state) {
    (void)state;
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .max_tensor_bytes = 1000};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "max_tensor_bytes"));
    vka_context_destroy(ctx);
    setenv("VKATTN_MAX_TENSOR_BYTES", "1G", 1);
    d.max_tensor_bytes = 0;
    vka_result r = vka_context_create(&d, &ctx);
    unsetenv("VKATTN_MAX_TENSOR_BYTES");
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "VKATTN_MAX_TENSOR_BYTES=\"1G\""));
    vka_context_destroy(ctx);
}

/* A limit below 4096 bytes, or a VKATTN_MAX_BINDING_BYTES that is not a number, is refused. */
static void test_split_bad_limit(void **state) {
    (void)state;
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .max_binding_bytes = 100};
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r == VKA_ERROR_NO_VULKAN || r == VKA_ERROR_NO_DEVICE) {
        vka_context_destroy(ctx);
        skip();
    }
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "max_binding_bytes"));
    vka_context_destroy(ctx);
    setenv("VKATTN_MAX_BINDING_BYTES", "64k", 1);
    d.max_binding_bytes = 0;
    r = vka_context_create(&d, &ctx);
    unsetenv("VKATTN_MAX_BINDING_BYTES");
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "VKATTN_MAX_BINDING_BYTES=\"64k\""));
    vka_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_split_bad_limit),
        cmocka_unit_test(test_split_bad_tensor_limit),
    };
    /* Whole matmuls, a model and the logits at 4 KiB bindings: minutes on lavapipe (every op
     * test's *_split run, in the quick set, splits its tensors too; tests/CMakeLists.txt). */
    const struct CMUnitTest exhaustive[] = {
        cmocka_unit_test(test_split_matmul_matches_cpu),
        cmocka_unit_test(test_split_model_matches_cpu),
        cmocka_unit_test(test_split_logit_blocks_match_whole),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, NULL, NULL);
}
