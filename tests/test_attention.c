/* Scaled dot-product attention built from the public ops (vka_matmul, vka_softmax_*,
 * vka_permute_*, vka_unpermute_*): a worked example with known values, and causal multi-head
 * attention forward and backward against a double reference and finite differences. */
#include "op_util.h"

/* One matmul into the graph being recorded (alpha 1, packed). */
static void mm(vka_context *ctx, vka_tensor *out, const vka_tensor *a, const vka_tensor *b,
               int M, int N, int K, int batch, bool ta, bool tb, bool accumulate) {
    vka_matmul_desc d = {.out = out, .a = a, .b = b, .M = M, .N = N, .K = K, .batch = batch,
                         .trans_a = ta, .trans_b = tb, .accumulate = accumulate};
    assert_int_equal(vka_matmul(ctx, &d), VKA_SUCCESS);
}

/* "Your journey starts with one step": 6 tokens of 3-d embeddings, 2-d queries, keys and
 * values, no mask, scale 1/sqrt(2) (S. Raschka, Build a Large Language Model from Scratch,
 * ch. 3). The context vectors are known to 4 decimals. */
static void journey_case(vka_context *ctx) {
    const float X[6 * 3] = {0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f, 0.57f, 0.85f, 0.64f,
                            0.22f, 0.58f, 0.33f, 0.77f, 0.25f, 0.10f, 0.05f, 0.80f, 0.55f};
    const float Wq[3 * 2] = {0.2961f, 0.5166f, 0.2517f, 0.6886f, 0.0740f, 0.8665f};
    const float Wk[3 * 2] = {0.1366f, 0.1025f, 0.1841f, 0.7264f, 0.3153f, 0.6871f};
    const float Wv[3 * 2] = {0.0756f, 0.1966f, 0.3164f, 0.4017f, 0.1186f, 0.8274f};
    const float want[6 * 2] = {0.2996f, 0.8053f, 0.3061f, 0.8210f, 0.3058f, 0.8203f,
                               0.2948f, 0.7939f, 0.2927f, 0.7891f, 0.2990f, 0.8040f};
    vka_tensor *x = tu_tensor(ctx, 18, X), *wq = tu_tensor(ctx, 6, Wq);
    vka_tensor *wk = tu_tensor(ctx, 6, Wk), *wv = tu_tensor(ctx, 6, Wv);
    vka_tensor *q = tu_tensor_nan(ctx, 12), *k = tu_tensor_nan(ctx, 12);
    vka_tensor *v = tu_tensor_nan(ctx, 12);
    vka_tensor *scores = tu_tensor_nan(ctx, 36), *att = tu_tensor_nan(ctx, 36);
    vka_tensor *context = tu_tensor_nan(ctx, 12);
    tu_begin(ctx);
    mm(ctx, q, x, wq, 6, 2, 3, 1, false, false, false); /* Q = X Wq (6, 2) */
    mm(ctx, k, x, wk, 6, 2, 3, 1, false, false, false);
    mm(ctx, v, x, wv, 6, 2, 3, 1, false, false, false);
    mm(ctx, scores, q, k, 6, 6, 2, 1, false, true, false); /* Q K^T (6, 6) */
    vka_softmax_desc sd = {.out = att, .inp = scores, .R = 6, .Tk = 6,
                           .scale = 1.0f / sqrtf(2.0f)};
    assert_int_equal(vka_softmax_forward(ctx, &sd), VKA_SUCCESS);
    mm(ctx, context, att, v, 6, 2, 6, 1, false, false, false); /* att V (6, 2) */
    tu_run(ctx);
    float *got = tu_read(context, 12);
    tu_assert_close("self-attention context vectors", got, want, 12, 1e-4, 0.0);
    free(got);
    vka_tensor *all[] = {x, wq, wk, wv, q, k, v, scores, att, context};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void test_attention_journey_known_values(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    journey_case(ctx);
    tu_done(ctx);
}

/* Causal multi-head attention as GPT-2 (llm.c attention_forward): inp (B,T,3C) -> out (B,T,C). */
typedef struct att_shape { int B, T, NH, HS; } att_shape;

static void attention_ref(void *user, const double *inp, double *out) {
    const att_shape *s = user;
    int C = s->NH * s->HS;
    double scale = 1.0 / sqrt((double)s->HS), w[64];
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++)
            for (int h = 0; h < s->NH; h++) {
                const double *q = inp + ((size_t)b * s->T + t) * 3 * C + (size_t)h * s->HS;
                double max = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const double *k = inp + ((size_t)b * s->T + t2) * 3 * C + C + h * s->HS;
                    double dot = 0.0;
                    for (int i = 0; i < s->HS; i++) dot += q[i] * k[i];
                    w[t2] = dot * scale;
                    if (w[t2] > max) max = w[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += w[t2] = exp(w[t2] - max);
                double *o = out + ((size_t)b * s->T + t) * C + (size_t)h * s->HS;
                for (int i = 0; i < s->HS; i++) {
                    o[i] = 0.0;
                    for (int t2 = 0; t2 <= t; t2++)
                        o[i] += w[t2] / sum *
                                inp[((size_t)b * s->T + t2) * 3 * C + 2 * C + h * s->HS + i];
                }
            }
}

/* Forward and backward of causal attention from the public ops on ctx; checks out against the
 * double reference and dinp against finite differences. */
static void attention_case(vka_context *ctx, att_shape s, uint64_t seed) {
    int B = s.B, T = s.T, NH = s.NH, HS = s.HS, C = NH * HS, BNH = B * NH;
    size_t n_in = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_h = (size_t)B * T * C;
    size_t n_att = (size_t)BNH * T * T;
    float *inp_h, *dout_h;
    vka_tensor *inp = tu_tensor_random(ctx, n_in, seed, 1.5f, &inp_h);
    vka_tensor *dout = tu_tensor_random(ctx, n_out, seed + 1, 1.0f, &dout_h);
    vka_tensor *q = tu_tensor_nan(ctx, n_h), *k = tu_tensor_nan(ctx, n_h);
    vka_tensor *v = tu_tensor_nan(ctx, n_h), *preatt = tu_tensor_nan(ctx, n_att);
    vka_tensor *att = tu_tensor_nan(ctx, n_att), *y = tu_tensor_nan(ctx, n_h);
    vka_tensor *out = tu_tensor_nan(ctx, n_out);
    vka_tensor *dy = tu_tensor(ctx, n_h, NULL), *datt = tu_tensor_nan(ctx, n_att);
    vka_tensor *dpreatt = tu_tensor(ctx, n_att, NULL), *dq = tu_tensor_nan(ctx, n_h);
    vka_tensor *dk = tu_tensor_nan(ctx, n_h), *dv = tu_tensor_nan(ctx, n_h);
    vka_tensor *dinp = tu_tensor(ctx, n_in, NULL);
    float scale = 1.0f / sqrtf((float)HS);

    tu_begin(ctx);
    assert_int_equal(vka_permute_forward(ctx, q, k, v, inp, B, T, NH, HS), VKA_SUCCESS);
    mm(ctx, preatt, q, k, T, T, HS, BNH, false, true, false); /* q k^T (BNH, T, T) */
    vka_softmax_desc sd = {.out = att, .inp = preatt, .R = BNH * T, .Tq = T, .Tk = T,
                           .scale = scale, .causal = true};
    assert_int_equal(vka_softmax_forward(ctx, &sd), VKA_SUCCESS);
    mm(ctx, y, att, v, T, HS, T, BNH, false, false, false); /* att v (BNH, T, HS) */
    assert_int_equal(vka_unpermute_forward(ctx, out, y, B, T, NH, HS), VKA_SUCCESS);
    /* backward */
    assert_int_equal(vka_unpermute_backward(ctx, dy, dout, B, T, NH, HS), VKA_SUCCESS);
    mm(ctx, datt, dy, v, T, T, HS, BNH, false, true, false); /* dy v^T */
    mm(ctx, dv, att, dy, T, HS, T, BNH, true, false, false);  /* att^T dy */
    assert_int_equal(vka_softmax_backward(ctx, dpreatt, datt, att, BNH * T, T, scale),
                     VKA_SUCCESS);
    mm(ctx, dq, dpreatt, k, T, HS, T, BNH, false, false, false); /* dpreatt k */
    mm(ctx, dk, dpreatt, q, T, HS, T, BNH, true, false, false);  /* dpreatt^T q */
    assert_int_equal(vka_permute_backward(ctx, dinp, dq, dk, dv, B, T, NH, HS), VKA_SUCCESS);
    tu_run(ctx);

    float *got = tu_read(out, n_out), *dgot = tu_read(dinp, n_in);
    double *xd = tu_to_double(inp_h, n_in), *want = malloc(n_out * sizeof *want);
    double *fd = malloc(n_in * sizeof *fd);
    attention_ref(&s, xd, want);
    tu_fd_grad(attention_ref, &s, inp_h, n_in, dout_h, n_out, fd);
    tu_assert_close_d("attention forward", got, want, n_out, 1e-5, 1e-4);
    tu_assert_close_d("attention backward vs finite differences", dgot, fd, n_in, 1e-4, 1e-3);
    free(got);
    free(dgot);
    free(xd);
    free(want);
    free(fd);
    free(inp_h);
    free(dout_h);
    vka_tensor *all[] = {inp, dout, q, k, v, preatt, att, y, out, dy, datt, dpreatt, dq, dk, dv,
                         dinp};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void test_attention_causal_multihead_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    attention_case(ctx, (att_shape){.B = 2, .T = 5, .NH = 3, .HS = 4}, 1);
    attention_case(ctx, (att_shape){.B = 1, .T = 1, .NH = 1, .HS = 1}, 2);
    attention_case(ctx, (att_shape){.B = 1, .T = 9, .NH = 2, .HS = 7}, 3);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_journey_known_values),
        cmocka_unit_test(test_attention_causal_multihead_finite_difference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
