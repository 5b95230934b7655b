/* vka_permute_* (qkv (B,T,3C) -> q, k, v (B,NH,T,HS)) and vka_unpermute_* ((B,NH,T,HS) ->
 * (B,T,C)), forward and backward. */
#include "op_util.h"

typedef struct perm_shape { int B, T, NH, HS; } perm_shape;

static size_t heads_n(const perm_shape *s) { return (size_t)s->B * s->NH * s->T * s->HS; }

/* qkv (B,T,3C) -> [q | k | v] each (B,NH,T,HS) */
static void permute_ref(void *user, const double *inp, double *qkv) {
    const perm_shape *s = user;
    size_t C = (size_t)s->NH * s->HS, n = heads_n(s);
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++)
            for (int h = 0; h < s->NH; h++)
                for (int d = 0; d < s->HS; d++) {
                    size_t src = ((size_t)b * s->T + t) * 3 * C + (size_t)h * s->HS + d;
                    size_t dst = (((size_t)b * s->NH + h) * s->T + t) * s->HS + d;
                    for (int part = 0; part < 3; part++) qkv[part * n + dst] = inp[src + part * C];
                }
}

/* (B,NH,T,HS) -> (B,T,C) */
static void unpermute_ref(void *user, const double *inp, double *out) {
    const perm_shape *s = user;
    size_t C = (size_t)s->NH * s->HS;
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++)
            for (int h = 0; h < s->NH; h++)
                for (int d = 0; d < s->HS; d++)
                    out[((size_t)b * s->T + t) * C + (size_t)h * s->HS + d] =
                        inp[(((size_t)b * s->NH + h) * s->T + t) * s->HS + d];
}

/* All four ops on ctx: [q|k|v], dqkv added, unpermuted, dheads added -- concatenated. */
static float *permute_run(vka_context *ctx, const perm_shape *s, const float *qkv,
                          const float *dqkv_in, const float *heads, const float *dout,
                          const float *grad0_qkv, const float *grad0_heads) {
    size_t n = heads_n(s);
    vka_tensor *inp = tu_tensor(ctx, 3 * n, qkv), *q = tu_tensor_nan(ctx, n);
    vka_tensor *k = tu_tensor_nan(ctx, n), *v = tu_tensor_nan(ctx, n);
    vka_tensor *dq = tu_tensor(ctx, n, dqkv_in), *dk = tu_tensor(ctx, n, dqkv_in + n);
    vka_tensor *dv = tu_tensor(ctx, n, dqkv_in + 2 * n), *dinp = tu_tensor(ctx, 3 * n, grad0_qkv);
    vka_tensor *h = tu_tensor(ctx, n, heads), *out = tu_tensor_nan(ctx, n);
    vka_tensor *dout_t = tu_tensor(ctx, n, dout), *dh = tu_tensor(ctx, n, grad0_heads);
    tu_begin(ctx);
    assert_int_equal(vka_permute_forward(ctx, q, k, v, inp, s->B, s->T, s->NH, s->HS), VKA_SUCCESS);
    assert_int_equal(vka_permute_backward(ctx, dinp, dq, dk, dv, s->B, s->T, s->NH, s->HS),
                     VKA_SUCCESS);
    assert_int_equal(vka_unpermute_forward(ctx, out, h, s->B, s->T, s->NH, s->HS), VKA_SUCCESS);
    assert_int_equal(vka_unpermute_backward(ctx, dh, dout_t, s->B, s->T, s->NH, s->HS),
                     VKA_SUCCESS);
    tu_run(ctx);
    float *res = malloc(8 * n * sizeof *res);
    vka_tensor_read(q, 0, res, n);
    vka_tensor_read(k, 0, res + n, n);
    vka_tensor_read(v, 0, res + 2 * n, n);
    vka_tensor_read(dinp, 0, res + 3 * n, 3 * n);
    vka_tensor_read(out, 0, res + 6 * n, n);
    vka_tensor_read(dh, 0, res + 7 * n, n);
    for (size_t i = 0; i < 3 * n; i++) res[3 * n + i] -= grad0_qkv[i];
    for (size_t i = 0; i < n; i++) res[7 * n + i] -= grad0_heads[i];
    vka_tensor *all[] = {inp, q, k, v, dq, dk, dv, dinp, h, out, dout_t, dh};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return res;
}

static void permute_case(vka_context *ctx, perm_shape s, uint64_t seed) {
    size_t n = heads_n(&s);
    float *qkv = malloc(3 * n * sizeof *qkv), *dqkv = malloc(3 * n * sizeof *dqkv);
    float *heads = malloc(n * sizeof *heads), *dout = malloc(n * sizeof *dout);
    float *g0q = malloc(3 * n * sizeof *g0q), *g0h = malloc(n * sizeof *g0h);
    tu_random(qkv, 3 * n, seed, 1.0f);
    tu_random(dqkv, 3 * n, seed + 1, 1.0f);
    tu_random(heads, n, seed + 2, 1.0f);
    tu_random(dout, n, seed + 3, 1.0f);
    tu_random(g0q, 3 * n, seed + 4, 1.0f);
    tu_random(g0h, n, seed + 5, 1.0f);
    float *got = permute_run(ctx, &s, qkv, dqkv, heads, dout, g0q, g0h);
    vka_context *cpu = tu_cpu();
    float *cpu_res = permute_run(cpu, &s, qkv, dqkv, heads, dout, g0q, g0h);
    tu_done(cpu);

    double *want = malloc(3 * n * sizeof *want), *fd = malloc(3 * n * sizeof *fd);
    double *xd = tu_to_double(qkv, 3 * n);
    permute_ref(&s, xd, want);
    tu_assert_close_d("permute_forward", got, want, 3 * n, 0.0, 0.0);
    tu_fd_grad(permute_ref, &s, qkv, 3 * n, dqkv, 3 * n, fd); /* dqkv = [dq|dk|dv] weights */
    tu_assert_close_d("permute_backward vs finite differences", got + 3 * n, fd, 3 * n, 1e-6, 1e-6);
    free(xd);
    xd = tu_to_double(heads, n);
    unpermute_ref(&s, xd, want);
    tu_assert_close_d("unpermute_forward", got + 6 * n, want, n, 0.0, 0.0);
    tu_fd_grad(unpermute_ref, &s, heads, n, dout, n, fd);
    tu_assert_close_d("unpermute_backward vs finite differences", got + 7 * n, fd, n, 1e-6, 1e-6);
    tu_vs_cpu(ctx, "permute ops vs cpu", got, cpu_res, 8 * n, 0.0, 0.0);
    free(xd);
    free(want);
    free(fd);
    free(got);
    free(cpu_res);
    free(qkv);
    free(dqkv);
    free(heads);
    free(dout);
    free(g0q);
    free(g0h);
}

static void test_permute_forward_backward_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    permute_case(ctx, (perm_shape){2, 5, 3, 4}, 1);
    permute_case(ctx, (perm_shape){1, 1, 1, 1}, 2);
    permute_case(ctx, (perm_shape){3, 7, 1, 5}, 3);
    permute_case(ctx, (perm_shape){1, 3, 4, 1}, 4);
    tu_done(ctx);
}

static void test_permute_gpu_matches_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    permute_case(ctx, (perm_shape){2, 5, 3, 4}, 1);
    permute_case(ctx, (perm_shape){1, 1, 1, 1}, 2);
    permute_case(ctx, (perm_shape){3, 7, 1, 5}, 3);
    permute_case(ctx, (perm_shape){1, 3, 4, 1}, 4);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute_forward_backward_finite_difference),
        cmocka_unit_test(test_permute_gpu_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
