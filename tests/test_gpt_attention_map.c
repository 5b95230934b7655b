/*
 * vka_gpt_attention_weights: every layer's weights equal a double-precision host forward of
 * the model from its parameters (llm.c's GPT-2), on the CPU backend and on Vulkan; rows sum
 * to 1 with the future keys exactly 0; training and forward passes before and after do not
 * change them; bad arguments are refused with a message naming the problem.
 */
#define _POSIX_C_SOURCE 200809L
#include "gpt_util.h"

/* An awkward shape: HS = 8, NH = 3, T below max_T and not a power of two. */
static const vka_gpt_config CFG = {.max_T = 16, .V = 13, .L = 3, .NH = 3, .C = 24};
#define T_TEST 11

/* Parameters uniform in [-a, a] (layernorm weights 1 +- a), so attention is far from uniform
 * (GPT-2's initialisation gives nearly uniform rows, which would hide a wrong scale). */
static float *random_params(vka_gpt *gpt, uint64_t seed) {
    vka_gpt_config c = vka_gpt_get_config(gpt);
    size_t n = vka_gpt_num_params(gpt), C = (size_t)c.C, L = (size_t)c.L;
    float *p = malloc(n * sizeof *p);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    /* ln1w, ln2w, lnfw around 1 (offsets as in the checkpoint layout, vkattn.h). */
    size_t wte = (size_t)c.Vp * C, wpe = (size_t)c.max_T * C;
    size_t ln1w = wte + wpe, ln2w = ln1w + 2 * L * C + L * 3 * C * C + L * 3 * C + L * C * C + L * C;
    size_t lnfw = n - 2 * C;
    for (size_t i = 0; i < L * C; i++) {
        p[ln1w + i] += 1.0f;
        p[ln2w + i] += 1.0f;
    }
    for (size_t i = 0; i < C; i++) p[lnfw + i] += 1.0f;
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    return p;
}

/* The checkpoint's tensors of layer l (vka_gpt_load's order). */
typedef struct layer_params {
    const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb,
        *fcprojw, *fcprojb;
} layer_params;

static layer_params layer_of(const float *p, const vka_gpt_config *c, int l) {
    size_t C = (size_t)c->C, L = (size_t)c->L;
    const float *q = p + (size_t)c->Vp * C + (size_t)c->max_T * C;
    const size_t sizes[12] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    const float *t[12];
    for (int i = 0; i < 12; i++) {
        t[i] = q + (size_t)l * sizes[i];
        q += L * sizes[i];
    }
    return (layer_params){t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]};
}

static void layernorm(double *out, const double *x, const float *w, const float *b, int C) {
    double mean = 0, var = 0;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    double rstd = 1.0 / sqrt(var / C + 1e-5);
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) * rstd * w[i] + b[i];
}

/* out (OC) = w (OC, IC) . x (IC) + b */
static void linear(double *out, const double *x, const float *w, const float *b, int IC, int OC) {
    for (int o = 0; o < OC; o++) {
        double s = b[o];
        for (int i = 0; i < IC; i++) s += (double)w[(size_t)o * IC + i] * x[i];
        out[o] = s;
    }
}

/* The host forward up to layer want's attention: its weights (NH, T, T), future keys 0. */
static void host_weights(const float *p, const vka_gpt_config *c, const int32_t *tok, int T,
                         int want, double *att) {
    int C = c->C, NH = c->NH, HS = C / NH;
    double *x = calloc((size_t)T * C, sizeof *x), *ln = malloc((size_t)T * C * sizeof *ln);
    double *qkv = malloc((size_t)T * 3 * C * sizeof *qkv), *y = malloc((size_t)T * C * sizeof *y);
    double *h = malloc((size_t)4 * C * sizeof *h), *o = malloc((size_t)4 * C * sizeof *o);
    const float *wte = p, *wpe = p + (size_t)c->Vp * C;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++)
            x[(size_t)t * C + i] = (double)wte[(size_t)tok[t] * C + i] + wpe[(size_t)t * C + i];
    for (int l = 0; l <= want; l++) {
        layer_params lp = layer_of(p, c, l);
        for (int t = 0; t < T; t++) {
            layernorm(ln + (size_t)t * C, x + (size_t)t * C, lp.ln1w, lp.ln1b, C);
            linear(qkv + (size_t)t * 3 * C, ln + (size_t)t * C, lp.qkvw, lp.qkvb, C, 3 * C);
        }
        memset(y, 0, (size_t)T * C * sizeof *y);
        for (int hh = 0; hh < NH; hh++)
            for (int t = 0; t < T; t++) {
                double *row = att + ((size_t)hh * T + t) * T, m = -INFINITY, sum = 0;
                for (int j = 0; j < T; j++) {
                    if (j > t) {
                        row[j] = 0;
                        continue;
                    }
                    double d = 0;
                    for (int i = 0; i < HS; i++)
                        d += qkv[(size_t)t * 3 * C + hh * HS + i] *
                             qkv[(size_t)j * 3 * C + C + hh * HS + i];
                    row[j] = d / sqrt((double)HS);
                    if (row[j] > m) m = row[j];
                }
                for (int j = 0; j <= t; j++) sum += row[j] = exp(row[j] - m);
                for (int j = 0; j <= t; j++) {
                    row[j] /= sum;
                    for (int i = 0; i < HS; i++)
                        y[(size_t)t * C + hh * HS + i] +=
                            row[j] * qkv[(size_t)j * 3 * C + 2 * C + hh * HS + i];
                }
            }
        if (l == want) break;
        for (int t = 0; t < T; t++) {
            double *xt = x + (size_t)t * C;
            linear(o, y + (size_t)t * C, lp.attprojw, lp.attprojb, C, C);
            for (int i = 0; i < C; i++) xt[i] += o[i];
            layernorm(ln + (size_t)t * C, xt, lp.ln2w, lp.ln2b, C);
            linear(h, ln + (size_t)t * C, lp.fcw, lp.fcb, C, 4 * C);
            for (int i = 0; i < 4 * C; i++)
                h[i] = 0.5 * h[i] * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (h[i] + 0.044715 * h[i] * h[i] * h[i])));
            linear(o, h, lp.fcprojw, lp.fcprojb, 4 * C, C);
            for (int i = 0; i < C; i++) xt[i] += o[i];
        }
    }
    free(x);
    free(ln);
    free(qkv);
    free(y);
    free(h);
    free(o);
}

/* Rows sum to 1 over the keys j <= t; future keys exactly 0. */
static void check_rows(const float *w, int NH, int T) {
    for (int r = 0; r < NH * T; r++) {
        int t = r % T;
        double sum = 0;
        for (int j = 0; j < T; j++) {
            float v = w[(size_t)r * T + j];
            if (j > t && v != 0.0f) fail_msg("row %d (query %d): key %d is %g, not 0", r, t, j, (double)v);
            if (j <= t) assert_true(v >= 0.0f && v <= 1.0f);
            sum += v;
        }
        if (fabs(sum - 1.0) > 1e-5) fail_msg("row %d sums to %.8f", r, sum);
    }
}

/* max |w - ref| over (NH, T, T). */
static double max_diff(const float *w, const double *ref, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)w[i] - ref[i]));
    return d;
}

static void test_attention_weights_match_host_forward(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt *gpt = tm_model(ctx, CFG, 3);
    vka_gpt_config c = vka_gpt_get_config(gpt);
    float *p = random_params(gpt, 11);
    int32_t tok[T_TEST];
    tm_tokens(tok, T_TEST, c.V, 5);
    size_t n = (size_t)c.NH * T_TEST * T_TEST;
    float *w = malloc(n * sizeof *w);
    double *ref = malloc(n * sizeof *ref);
    double peak = 0; /* the largest weight off the first key: rows are not near uniform */
    for (int l = 0; l < c.L; l++) {
        vka_result r = vka_gpt_attention_weights(gpt, tok, T_TEST, l, w);
        if (r != VKA_SUCCESS) fail_msg("layer %d: %s", l, vka_last_error(ctx));
        host_weights(p, &c, tok, T_TEST, l, ref);
        double d = max_diff(w, ref, n);
        print_message("layer %d: max |weights - host| = %.3g\n", l, d);
        if (d > 2e-5) fail_msg("layer %d: max |weights - host| = %.3g > 2e-5", l, d);
        check_rows(w, c.NH, T_TEST);
        for (size_t i = 0; i < n; i++)
            if (i % T_TEST > 0) peak = fmax(peak, w[i]);
    }
    assert_true(peak > 0.5);
    /* T = 1: one key, weight 1. */
    assert_int_equal(vka_gpt_attention_weights(gpt, tok, 1, 0, w), VKA_SUCCESS);
    for (int h = 0; h < c.NH; h++) assert_true(w[h] == 1.0f);
    free(w);
    free(ref);
    free(p);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* The weights do not depend on what ran before (training graphs, other shapes), and running
 * them leaves the model's own passes as they were. */
static void test_attention_weights_independent_of_other_runs(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt *gpt = tm_model(ctx, CFG, 4);
    vka_gpt_config c = vka_gpt_get_config(gpt);
    free(random_params(gpt, 12));
    int32_t tok[2 * 16], tg[2 * 16];
    tm_tokens(tok, 32, c.V, 6);
    tm_tokens(tg, 32, c.V, 7);
    size_t n = (size_t)c.NH * T_TEST * T_TEST;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    float loss0 = 0, loss1 = 0, loss2 = 0;
    assert_int_equal(vka_gpt_forward_backward(gpt, tok, tg, 2, 16, &loss0), VKA_SUCCESS);
    assert_int_equal(vka_gpt_attention_weights(gpt, tok, T_TEST, 1, a), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(gpt, tok, tg, 2, 16, &loss1, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_attention_weights(gpt, tok, T_TEST, 1, b), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward_backward(gpt, tok, tg, 2, 16, &loss2), VKA_SUCCESS);
    assert_memory_equal(a, b, n * sizeof *a);
    if (fabsf(loss0 - loss1) > 1e-5f || loss0 != loss2)
        fail_msg("losses %.7f %.7f %.7f differ", (double)loss0, (double)loss1, (double)loss2);
    free(a);
    free(b);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

static void expect_error(vka_context *ctx, vka_result r, const char *part) {
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    if (!strstr(vka_last_error(ctx), part))
        fail_msg("expected \"%s\" in \"%s\"", part, vka_last_error(ctx));
}

static void test_attention_weights_rejects_bad_arguments(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = tm_model(ctx, CFG, 1);
    int32_t tok[17] = {0};
    float *w = malloc((size_t)CFG.NH * 17 * 17 * sizeof *w);
    expect_error(ctx, vka_gpt_attention_weights(gpt, tok, 4, 3, w), "layer = 3");
    expect_error(ctx, vka_gpt_attention_weights(gpt, tok, 4, -1, w), "layer = -1");
    expect_error(ctx, vka_gpt_attention_weights(gpt, tok, 17, 0, w), "max_T = 16");
    expect_error(ctx, vka_gpt_attention_weights(gpt, tok, 0, 0, w), "T = 0 tokens is not in 1 .. the model's max_T = 16");
    expect_error(ctx, vka_gpt_attention_weights(gpt, NULL, 4, 0, w), "tokens is NULL");
    expect_error(ctx, vka_gpt_attention_weights(gpt, tok, 4, 0, NULL), "out is NULL");
    tok[2] = 13;
    expect_error(ctx, vka_gpt_attention_weights(gpt, tok, 4, 0, w), "tokens[2] = 13");
    assert_int_equal(vka_gpt_attention_weights(NULL, tok, 4, 0, w), VKA_ERROR_INVALID_ARGUMENT);
    free(w);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TM_BOTH(test_attention_weights_match_host_forward),
        TM_BOTH(test_attention_weights_independent_of_other_runs),
        cmocka_unit_test(test_attention_weights_rejects_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
