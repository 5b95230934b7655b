/* vka_adamw: AdamW steps (PyTorch's torch.optim.AdamW), hyper-parameters in a tensor written
 * before each run of one recorded graph. */
#include "op_util.h"

typedef struct adamw_cfg {
    float lr, beta1, beta2, eps, weight_decay;
} adamw_cfg;

static void write_hyper(vka_tensor *hyper, const adamw_cfg *c, int t) {
    float h[VKA_HYPER_COUNT] = {0};
    h[VKA_HYPER_LR] = c->lr;
    h[VKA_HYPER_BETA1] = c->beta1;
    h[VKA_HYPER_BETA2] = c->beta2;
    h[VKA_HYPER_EPS] = c->eps;
    h[VKA_HYPER_BC1] = (float)(1.0 - pow(c->beta1, t));
    h[VKA_HYPER_BC2] = (float)(1.0 - pow(c->beta2, t));
    assert_int_equal(vka_tensor_write(hyper, 0, h, VKA_HYPER_COUNT), VKA_SUCCESS);
}

/* `steps` AdamW steps of one graph replayed on ctx, gradient fixed; clip (if > 0) is written as
 * gscale[1]; clip < 0 writes gscale[1] = 0 (grad_norm's answer to NaN or inf gradients). Returns [param, m, v] after each step (steps * 3N), malloc'd. */
static float *adamw_run(vka_context *ctx, const adamw_cfg *c, const float *p0, const float *grad,
                        size_t N, int steps, float clip) {
    vka_tensor *param = tu_tensor(ctx, N, p0), *g = tu_tensor(ctx, N, grad);
    vka_tensor *m = tu_tensor(ctx, N, NULL), *v = tu_tensor(ctx, N, NULL);
    vka_tensor *hyper = tu_tensor(ctx, VKA_HYPER_COUNT, NULL);
    vka_tensor *gscale =
        clip != 0.0f ? tu_tensor(ctx, 2, (const float[]){123.0f, fmaxf(clip, 0.0f)}) : NULL;
    tu_begin(ctx);
    assert_int_equal(vka_adamw(ctx, param, g, m, v, hyper, gscale, N, c->weight_decay),
                     VKA_SUCCESS);
    vka_graph *graph = NULL;
    assert_int_equal(vka_graph_end(ctx, &graph), VKA_SUCCESS);
    float *res = malloc((size_t)steps * 3 * N * sizeof *res);
    for (int t = 1; t <= steps; t++) {
        write_hyper(hyper, c, t);
        assert_int_equal(vka_graph_run(graph), VKA_SUCCESS);
        float *r = res + (size_t)(t - 1) * 3 * N;
        vka_tensor_read(param, 0, r, N);
        vka_tensor_read(m, 0, r + N, N);
        vka_tensor_read(v, 0, r + 2 * N, N);
    }
    vka_graph_destroy(graph);
    vka_tensor *all[] = {param, g, m, v, hyper, gscale};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return res;
}

/* The worked values: p = 1, constant g = 0.5 -> 0.999 after one step, 0.997 after three
 * (each bias-corrected step is lr * g / |g|); g = 0 with weight decay 0.1 -> 1 - lr * 0.1. */
static void known_value_cases(vka_context *ctx) {
    adamw_cfg c = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    const float one = 1.0f, half = 0.5f, zero = 0.0f;
    float *r = adamw_run(ctx, &c, &one, &half, 1, 3, 0.0f);
    assert_true(fabs(r[0] - 0.999) <= 1e-6);     /* after step 1 */
    assert_true(fabs(r[3 * 2] - 0.997) <= 1e-6); /* after step 3 */
    free(r);
    c.weight_decay = 0.1f;
    r = adamw_run(ctx, &c, &one, &zero, 1, 1, 0.0f);
    assert_true(fabs(r[0] - 0.9999) <= 1e-7);
    free(r);
    c.weight_decay = 0.0f; /* biases and layernorm parameters: no decay, no gradient, no change */
    r = adamw_run(ctx, &c, &one, &zero, 1, 1, 0.0f);
    assert_true(r[0] == 1.0f);
    free(r);
    c.weight_decay = 0.1f; /* clip scale 0, NaN and inf gradients: no step, not even the decay */
    const float bad[2] = {NAN, INFINITY};
    for (int b = 0; b < 2; b++) {
        r = adamw_run(ctx, &c, &one, &bad[b], 1, 2, -1.0f);
        if (!(r[3] == 1.0f && r[4] == 0.0f && r[5] == 0.0f))
            fail_msg("gradient %g with clip scale 0: param %g, m %g, v %g (want 1, 0, 0)", bad[b],
                     r[3], r[4], r[5]);
        free(r);
    }
}

static void test_adamw_known_values(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    known_value_cases(ctx);
    tu_done(ctx);
}

/* Random parameters and gradient over 4 steps, against the formula in double. */
static void adamw_case(vka_context *ctx, size_t N, float weight_decay, float clip, uint64_t seed) {
    adamw_cfg c = {.lr = 3e-3f, .beta1 = 0.85f, .beta2 = 0.99f, .eps = 1e-6f,
                   .weight_decay = weight_decay};
    const int steps = 4;
    float *p0 = malloc(N * sizeof *p0), *grad = malloc(N * sizeof *grad);
    tu_random(p0, N, seed, 1.0f);
    tu_random(grad, N, seed + 1, 0.1f);
    float *got = adamw_run(ctx, &c, p0, grad, N, steps, clip);
    vka_context *cpu = tu_cpu();
    float *cpu_res = adamw_run(cpu, &c, p0, grad, N, steps, clip);
    tu_done(cpu);
    double *want = malloc((size_t)steps * 3 * N * sizeof *want);
    for (size_t i = 0; i < N; i++) {
        double p = p0[i], m = 0.0, v = 0.0, g = (double)grad[i] * (clip > 0.0f ? clip : 1.0f);
        for (int t = 1; t <= steps; t++) {
            m = c.beta1 * m + (1.0 - c.beta1) * g;
            v = c.beta2 * v + (1.0 - c.beta2) * g * g;
            double mhat = m / (1.0 - pow(c.beta1, t)), vhat = v / (1.0 - pow(c.beta2, t));
            p -= c.lr * (mhat / (sqrt(vhat) + c.eps) + c.weight_decay * p);
            double *w = want + (size_t)(t - 1) * 3 * N;
            w[i] = p;
            w[N + i] = m;
            w[2 * N + i] = v;
        }
    }
    tu_assert_close_d("adamw", got, want, (size_t)steps * 3 * N, 1e-6, 1e-5);
    tu_vs_cpu(ctx, "adamw vs cpu", got, cpu_res, (size_t)steps * 3 * N, 1e-7, 1e-6);
    free(p0);
    free(grad);
    free(got);
    free(cpu_res);
    free(want);
}

static void test_adamw_matches_reference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    adamw_case(ctx, 1, 0.0f, 0.0f, 1);
    adamw_case(ctx, 1001, 0.1f, 0.0f, 2);
    adamw_case(ctx, 777, 0.05f, 0.25f, 3); /* gradients scaled by a clip factor */
    tu_done(ctx);
}

/* The CPU backend's fast AdamW (vectorised on AVX-512, and on AVX2) is bit-identical to the
 * reference one, on a length that is no multiple of its vectors or work items, over several
 * steps, clipped. */
static void test_adamw_cpu_fast_equals_reference(void **state) {
    (void)state;
    adamw_cfg c = {.lr = 3e-3f, .beta1 = 0.85f, .beta2 = 0.99f, .eps = 1e-6f,
                   .weight_decay = 0.1f};
    const size_t N = 40009;
    float *p0 = malloc(N * sizeof *p0), *grad = malloc(N * sizeof *grad);
    tu_random(p0, N, 7, 1.0f);
    tu_random(grad, N, 8, 0.1f);
    const vka_cpu_kernels kinds[3] = {VKA_CPU_KERNELS_REFERENCE, VKA_CPU_KERNELS_FAST,
                                      VKA_CPU_KERNELS_FAST_AVX2};
    float *res[3];
    for (int k = 0; k < 3; k++) {
        vka_context *ctx = tu_cpu_kernels(kinds[k], 3);
        res[k] = adamw_run(ctx, &c, p0, grad, N, 3, 0.5f);
        tu_done(ctx);
    }
    assert_memory_equal(res[0], res[1], 3 * 3 * N * sizeof(float));
    assert_memory_equal(res[0], res[2], 3 * 3 * N * sizeof(float));
    for (int k = 0; k < 3; k++) free(res[k]);
    free(p0);
    free(grad);
}

static void test_adamw_gpu_known_values(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    known_value_cases(ctx);
    tu_done(ctx);
}

static void test_adamw_gpu_matches_reference(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    adamw_case(ctx, 1, 0.0f, 0.0f, 1);
    adamw_case(ctx, 1001, 0.1f, 0.0f, 2);
    adamw_case(ctx, 777, 0.05f, 0.25f, 3);
    tu_done(ctx);
}

/* Lengths that take each path of the CPU-type kernel (shaders/elementwise.glsl): multiples of 4
 * (vec4s, through texel views on lavapipe; 2068 fills two workgroups and part of a third) and
 * not (one element per invocation); clipped and not. */
static void vulkan_cases(vka_context *ctx) {
    adamw_case(ctx, 4, 0.0f, 0.0f, 1);
    adamw_case(ctx, 1001, 0.1f, 0.0f, 2);
    adamw_case(ctx, 2068, 0.1f, 0.0f, 3);
    adamw_case(ctx, 1000, 0.05f, 0.25f, 4);
    known_value_cases(ctx);
    adamw_cfg c = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
    float p0[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[8] = {NAN, 1, 1, 1, 1, 1, 1, INFINITY};
    float *r = adamw_run(ctx, &c, p0, g, 8, 1, -1.0f); /* clip scale 0 on the vec4 path */
    for (int i = 0; i < 8; i++)
        if (!(r[i] == p0[i] && r[8 + i] == 0.0f && r[16 + i] == 0.0f))
            fail_msg("clip scale 0: element %d changed (param %g, m %g, v %g)", i, r[i], r[8 + i],
                     r[16 + i]);
    free(r);
}
TU_VULKAN_TESTS(test_adamw_vulkan_matches_reference, vulkan_cases)

/* The CPU-type kernel (vec4s, texel views) gives the same bits as the one-element-per-invocation
 * GPU kernel on the same device, over several steps, clipped and not. */
static void test_adamw_vulkan_kernel_variants_agree(void **state) {
    (void)state;
    adamw_cfg c = {.lr = 3e-3f, .beta1 = 0.85f, .beta2 = 0.99f, .eps = 1e-6f,
                   .weight_decay = 0.1f};
    const size_t N = 40008;
    float *p0 = malloc(N * sizeof *p0), *grad = malloc(N * sizeof *grad);
    tu_random(p0, N, 7, 1.0f);
    tu_random(grad, N, 8, 0.1f);
    for (int clipped = 0; clipped < 2; clipped++) {
        float *res[2];
        for (int k = 0; k < 2; k++) {
            vka_context *ctx = tu_gpu_kernels(k ? VKA_KERNELS_CPU : VKA_KERNELS_GPU);
            res[k] = adamw_run(ctx, &c, p0, grad, N, 3, clipped ? 0.5f : 0.0f);
            tu_done(ctx);
        }
        for (size_t i = 0; i < 3 * 3 * N; i++)
            if (memcmp(&res[0][i], &res[1][i], 4))
                fail_msg("clipped %d: result %zu (step %zu, %s of element %zu) is %.9g with the "
                         "GPU kernel, %.9g with the CPU-type one", clipped, i, i / (3 * N) + 1,
                         (const char *[]){"param", "m", "v"}[i / N % 3], i % N, res[0][i],
                         res[1][i]);
        free(res[0]);
        free(res[1]);
    }
    free(p0);
    free(grad);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_known_values),
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_adamw_cpu_fast_equals_reference),
        cmocka_unit_test(test_adamw_gpu_known_values),
        cmocka_unit_test(test_adamw_gpu_matches_reference),
        TU_VULKAN_TEST_ENTRIES(test_adamw_vulkan_matches_reference),
        cmocka_unit_test(test_adamw_vulkan_kernel_variants_agree),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
