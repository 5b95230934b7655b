/* vka_attention_forward / vka_attention_backward: the fused (FlashAttention-2) op, against a
 * double-precision reference on awkward shapes, finite differences, the composed path (matmul +
 * softmax ops) and the textbook example; masks, causal kinds, key lengths, packed qkv and
 * (B, T, C) output; fully masked rows; determinism; argument errors.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup */
#include "attention_ref.h"

/* The reference forward as tu_fd_grad's function. */
typedef struct ref_ctx {
    const att_case *s;
    const float *mask;
} ref_ctx;

static void ref_forward_fn(void *user, const double *x, double *y) {
    const ref_ctx *r = user;
    ref_forward(r->s, r->mask, x, y, NULL);
}

/* What a run gives, all in packed (B, NH, T, HS) layouts. */
typedef struct att_result {
    float *out, *lse, *dq, *dk, *dv;
} att_result;

static void att_result_free(att_result *r) {
    free(r->out);
    free(r->lse);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

/* Forward (and backward with dout, packed) of case s on ctx, inputs x = q | k | v packed. */
static att_result att_run(vka_context *ctx, const att_case *s, const float *x, const float *mask,
                          const float *dout) {
    size_t nq = att_nq(s), nk = att_nk(s), nl = att_nlse(s);
    size_t nqkv = (size_t)s->B * s->Tq * 3 * s->NH * s->HS;
    vka_tensor *q = NULL, *k = NULL, *v = NULL, *qkv = NULL;
    if (s->qkv) {
        float *w = malloc(nqkv * sizeof *w);
        to_wide(s, s->Tq, x, w, 3, 0);
        to_wide(s, s->Tk, x + nq, w, 3, 1);
        to_wide(s, s->Tk, x + nq + nk, w, 3, 2);
        qkv = tu_tensor(ctx, nqkv, w);
        free(w);
    } else {
        q = tu_tensor(ctx, nq, x);
        k = tu_tensor(ctx, nk, x + nq);
        v = tu_tensor(ctx, nk, x + nq + nk);
    }
    vka_tensor *out = tu_tensor_nan(ctx, nq), *lse = tu_tensor_nan(ctx, nl);
    vka_tensor *mask_t = mask ? tu_tensor(ctx, att_nmask(s), mask) : NULL;
    vka_tensor *kl = s->key_lens ? tu_tensor(ctx, (size_t)s->B, s->key_lens) : NULL;
    vka_attention_desc d = {.q = q, .k = k, .v = v, .qkv = qkv, .mask = mask_t,
                            .mask_per_batch = s->mask == 2, .key_lens = kl, .B = s->B,
                            .NH = s->NH, .Tq = s->Tq, .Tk = s->Tk, .HS = s->HS,
                            .scale = s->scale, .causal = s->causal, .out_btc = s->out_btc,
                            .out = out, .lse = lse};
    vka_tensor *dout_t = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *dqkv = NULL;
    tu_begin(ctx);
    vka_result r = vka_attention_forward(ctx, &d);
    assert_int_equal(r, VKA_SUCCESS);
    if (dout) {
        float *w = NULL;
        if (s->out_btc) {
            w = malloc(nq * sizeof *w);
            to_wide(s, s->Tq, dout, w, 1, 0);
        }
        dout_t = tu_tensor(ctx, nq, w ? w : dout);
        free(w);
        if (s->qkv) dqkv = tu_tensor_nan(ctx, nqkv);
        else {
            dq = tu_tensor_nan(ctx, nq);
            dk = tu_tensor_nan(ctx, nk);
            dv = tu_tensor_nan(ctx, nk);
        }
        vka_attention_grads gr = {.dout = dout_t, .dq = dq, .dk = dk, .dv = dv, .dqkv = dqkv};
        r = vka_attention_backward(ctx, &d, &gr);
            assert_int_equal(r, VKA_SUCCESS);
    }
    tu_run(ctx);
    att_result res = {0};
    res.out = tu_read(out, nq);
    if (s->out_btc) {
        float *p = malloc(nq * sizeof *p);
        from_wide(s, s->Tq, res.out, p, 1, 0);
        free(res.out);
        res.out = p;
    }
    res.lse = tu_read(lse, nl);
    if (dout) {
        if (s->qkv) {
            float *w = tu_read(dqkv, nqkv);
            res.dq = malloc(nq * sizeof(float));
            res.dk = malloc(nk * sizeof(float));
            res.dv = malloc(nk * sizeof(float));
            from_wide(s, s->Tq, w, res.dq, 3, 0);
            from_wide(s, s->Tk, w, res.dk, 3, 1);
            from_wide(s, s->Tk, w, res.dv, 3, 2);
            free(w);
        } else {
            res.dq = tu_read(dq, nq);
            res.dk = tu_read(dk, nk);
            res.dv = tu_read(dv, nk);
        }
    }
    vka_tensor *all[] = {q, k, v, qkv, out, lse, mask_t, kl, dout_t, dq, dk, dv, dqkv};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return res;
}

/* lse: -inf exactly where the reference's is, else close. */
static void check_lse(const char *what, const float *got, const double *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (want[i] == -INFINITY) {
            if (got[i] != -INFINITY) fail_msg("%s: lse[%zu] = %g, expected -inf", what, i, got[i]);
        } else if (!(fabs(got[i] - want[i]) <= 2e-5 + 2e-5 * fabs(want[i]))) {
            fail_msg("%s: lse[%zu] = %.9g, expected %.9g", what, i, got[i], want[i]);
        }
    }
}

/* Forward and backward of s on ctx against the double reference and the CPU backend. */
static void att_case_run(vka_context *ctx, att_case s, uint64_t seed) {
    size_t nq = att_nq(&s), nk = att_nk(&s), n_in = nq + 2 * nk, nl = att_nlse(&s);
    float *x = malloc(n_in * sizeof *x), *dout = malloc(nq * sizeof *dout);
    tu_random(x, n_in, seed, 1.5f);
    tu_random(dout, nq, seed + 1, 1.0f);
    float *mask = att_make_mask(&s, seed + 2);
    char what[160];
    snprintf(what, sizeof what, "B=%d NH=%d Tq=%d Tk=%d HS=%d causal=%d mask=%d/%d%s%s%s", s.B,
             s.NH, s.Tq, s.Tk, s.HS, (int)s.causal, s.mask, s.mask_style,
             s.key_lens ? " key_lens" : "", s.qkv ? " qkv" : "", s.out_btc ? " out_btc" : "");

    att_result got = att_run(ctx, &s, x, mask, dout);
    double *xd = tu_to_double(x, n_in), *want = malloc(nq * sizeof *want);
    double *lse = malloc(nl * sizeof *lse), *g = malloc(n_in * sizeof *g);
    ref_forward(&s, mask, xd, want, lse);
    ref_backward(&s, mask, xd, dout, NULL, g);
    print_message("%s\n", what);
    tu_assert_close_d("attention_forward out", got.out, want, nq, 2e-5, 1e-4);
    check_lse("attention_forward", got.lse, lse, nl);
    tu_assert_close_d("attention_backward dq", got.dq, g, nq, 5e-5, 2e-4);
    tu_assert_close_d("attention_backward dk", got.dk, g + nq, nk, 5e-5, 2e-4);
    tu_assert_close_d("attention_backward dv", got.dv, g + nq + nk, nk, 5e-5, 2e-4);
    if (!tu_is_cpu(ctx)) {
        vka_context *cpu = tu_cpu();
        att_result ref = att_run(cpu, &s, x, mask, dout);
        tu_done(cpu);
        tu_vs_cpu(ctx, "attention_forward vs cpu", got.out, ref.out, nq, 2e-5, 1e-4);
        tu_vs_cpu(ctx, "attention_backward dq vs cpu", got.dq, ref.dq, nq, 5e-5, 2e-4);
        tu_vs_cpu(ctx, "attention_backward dk vs cpu", got.dk, ref.dk, nk, 5e-5, 2e-4);
        tu_vs_cpu(ctx, "attention_backward dv vs cpu", got.dv, ref.dv, nk, 5e-5, 2e-4);
        att_result_free(&ref);
    }
    att_result_free(&got);
    free(x);
    free(dout);
    free(mask);
    free(xd);
    free(want);
    free(lse);
    free(g);
}

/* --- the cases ------------------------------------------------------------------------------ */

static const int lens_0_T[2] = {0, 130};
static const int lens_7_20[2] = {7, 20};
static const int lens_cross[3] = {70, 1, 33};
static const int lens_decode[2] = {333, 150};

/* heads: -1 every shape, 0 those with HS <= 8, 1 those with HS > 8. */
static void shape_cases_of(vka_context *ctx, int heads) {
    const att_case cases[] = {
        {.B = 1, .NH = 1, .Tq = 1, .Tk = 1, .HS = 1},
        {.B = 1, .NH = 1, .Tq = 1, .Tk = 1, .HS = 1, .causal = VKA_CAUSAL_TOP_LEFT, .qkv = true},
        {.B = 2, .NH = 3, .Tq = 37, .Tk = 37, .HS = 24, .causal = VKA_CAUSAL_TOP_LEFT},
        {.B = 1, .NH = 2, .Tq = 65, .Tk = 65, .HS = 72, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .mask = 1},
        {.B = 2, .NH = 1, .Tq = 130, .Tk = 130, .HS = 5, .mask = 2, .key_lens = lens_0_T},
        {.B = 2, .NH = 2, .Tq = 5, .Tk = 70, .HS = 8, .causal = VKA_CAUSAL_BOTTOM_RIGHT},
        {.B = 1, .NH = 2, .Tq = 70, .Tk = 5, .HS = 8, .causal = VKA_CAUSAL_TOP_LEFT},
        {.B = 2, .NH = 1, .Tq = 3, .Tk = 20, .HS = 4, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .key_lens = lens_7_20, .mask = 1},
        {.B = 3, .NH = 1, .Tq = 9, .Tk = 70, .HS = 3, .key_lens = lens_cross, .mask = 2,
         .scale = 0.3f},
        {.B = 1, .NH = 1, .Tq = 20, .Tk = 20, .HS = 128, .causal = VKA_CAUSAL_TOP_LEFT},
        {.B = 1, .NH = 1, .Tq = 3, .Tk = 4, .HS = 256},
        {.B = 2, .NH = 2, .Tq = 33, .Tk = 33, .HS = 8, .causal = VKA_CAUSAL_TOP_LEFT,
         .qkv = true, .out_btc = true},
        {.B = 1, .NH = 3, .Tq = 17, .Tk = 17, .HS = 7, .qkv = true, .mask = 1},
        {.B = 1, .NH = 1, .Tq = 12, .Tk = 100, .HS = 4, .mask = 1, .mask_style = 1,
         .out_btc = true},
        {.B = 2, .NH = 1, .Tq = 100, .Tk = 100, .HS = 4, .causal = VKA_CAUSAL_TOP_LEFT,
         .mask = 2, .mask_style = 1},
        /* Decoding shapes: Vulkan splits each row's keys over a workgroup for Tq <= 8
         * (vk_ops_attention.c, split_keys): many key tiles a lane, fewer keys than lanes, Tq at
         * the threshold and past it. */
        {.B = 2, .NH = 3, .Tq = 2, .Tk = 333, .HS = 8, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .key_lens = lens_decode},
        {.B = 1, .NH = 2, .Tq = 1, .Tk = 1000, .HS = 4, .mask = 1},
        {.B = 1, .NH = 1, .Tq = 1, .Tk = 3, .HS = 7, .causal = VKA_CAUSAL_BOTTOM_RIGHT},
        {.B = 1, .NH = 2, .Tq = 8, .Tk = 90, .HS = 6, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .mask = 1},
        {.B = 1, .NH = 2, .Tq = 9, .Tk = 90, .HS = 6, .causal = VKA_CAUSAL_BOTTOM_RIGHT},
        {.B = 1, .NH = 7, .Tq = 1, .Tk = 65, .HS = 64, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .mask = 1},
    };
    for (size_t i = 0; i < TU_LEN(cases); i++)
        if (heads < 0 || (cases[i].HS > 8) == heads) att_case_run(ctx, cases[i], 10 + i);
}
static void shape_cases(vka_context *ctx) { shape_cases_of(ctx, -1); }
/* On Vulkan the shapes are split by head size: heads of more than 8 (24 to 256) each build the
 * kernels anew, over a minute each on lavapipe with a cold shader cache, so they run in the
 * exhaustive group (tests/CMakeLists.txt) and the quick one keeps the narrow heads, which
 * still have every kind of awkward shape (length 1, rows past a workgroup and a key tile, qkv,
 * masks, key lengths, fully masked rows). */
static void narrow_head_cases(vka_context *ctx) { shape_cases_of(ctx, 0); }
static void wide_head_cases(vka_context *ctx) { shape_cases_of(ctx, 1); }

/* "Your journey starts with one step" (S. Raschka, Build a Large Language Model from Scratch,
 * ch. 3): q = x Wq etc. on the host, scale 1/sqrt(2), no mask; context vectors to 4 decimals. */
static void journey_cases(vka_context *ctx) {
    const float X[6][3] = {{0.43f, 0.15f, 0.89f}, {0.55f, 0.87f, 0.66f}, {0.57f, 0.85f, 0.64f},
                           {0.22f, 0.58f, 0.33f}, {0.77f, 0.25f, 0.10f}, {0.05f, 0.80f, 0.55f}};
    const float W[3][3][2] = {{{0.2961f, 0.5166f}, {0.2517f, 0.6886f}, {0.0740f, 0.8665f}},
                              {{0.1366f, 0.1025f}, {0.1841f, 0.7264f}, {0.3153f, 0.6871f}},
                              {{0.0756f, 0.1966f}, {0.3164f, 0.4017f}, {0.1186f, 0.8274f}}};
    const float want[6 * 2] = {0.2996f, 0.8053f, 0.3061f, 0.8210f, 0.3058f, 0.8203f,
                               0.2948f, 0.7939f, 0.2927f, 0.7891f, 0.2990f, 0.8040f};
    float qkv[3][12]; /* q, k, v (1, 1, 6, 2) */
    for (int m = 0; m < 3; m++)
        for (int t = 0; t < 6; t++)
            for (int d = 0; d < 2; d++) {
                float acc = 0.0f;
                for (int i = 0; i < 3; i++) acc += X[t][i] * W[m][i][d];
                qkv[m][t * 2 + d] = acc;
            }
    vka_tensor *q = tu_tensor(ctx, 12, qkv[0]), *k = tu_tensor(ctx, 12, qkv[1]);
    vka_tensor *v = tu_tensor(ctx, 12, qkv[2]), *out = tu_tensor_nan(ctx, 12);
    vka_attention_desc d = {.q = q, .k = k, .v = v, .out = out, .B = 1, .NH = 1, .Tq = 6,
                            .Tk = 6, .HS = 2, .scale = 1.0f / sqrtf(2.0f)};
    tu_begin(ctx);
    vka_result r = vka_attention_forward(ctx, &d);
    assert_int_equal(r, VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, 12);
    tu_assert_close("fused self-attention context vectors", got, want, 12, 1e-4, 0.0);
    free(got);
    vka_tensor *all[] = {q, k, v, out};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

/* Gradients against central finite differences of sum(out * w) in double (tiny shapes). */
static void finite_difference_cases(vka_context *ctx) {
    const att_case cases[] = {
        {.B = 1, .NH = 2, .Tq = 3, .Tk = 4, .HS = 3, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .mask = 1},
        {.B = 2, .NH = 1, .Tq = 5, .Tk = 5, .HS = 2, .causal = VKA_CAUSAL_TOP_LEFT,
         .qkv = true, .out_btc = true},
    };
    for (size_t c = 0; c < TU_LEN(cases); c++) {
        const att_case *s = &cases[c];
        size_t nq = att_nq(s), n_in = nq + 2 * att_nk(s);
        float *x = malloc(n_in * sizeof *x), *w = malloc(nq * sizeof *w);
        tu_random(x, n_in, 40 + c, 1.5f);
        tu_random(w, nq, 50 + c, 1.0f);
        float *mask = att_make_mask(s, 60 + c);
        att_result got = att_run(ctx, s, x, mask, w);
        ref_ctx rc = {s, mask};
        double *fd = malloc(n_in * sizeof *fd);
        tu_fd_grad(ref_forward_fn, &rc, x, n_in, w, nq, fd);
        tu_assert_close_d("dq vs finite differences", got.dq, fd, nq, 1e-4, 1e-3);
        tu_assert_close_d("dk vs finite differences", got.dk, fd + nq, att_nk(s), 1e-4, 1e-3);
        tu_assert_close_d("dv vs finite differences", got.dv, fd + nq + att_nk(s), att_nk(s),
                          1e-4, 1e-3);
        att_result_free(&got);
        free(x);
        free(w);
        free(mask);
        free(fd);
    }
}

/* Rows whose keys are all masked (a -inf mask row, key_lens 0, bottom-right causal with fewer
 * keys than queries): out 0, lse -inf, zero gradients, no NaN anywhere. */
static void fully_masked_cases(vka_context *ctx) {
    static const int lens[2] = {0, 2};
    const att_case s = {.B = 2, .NH = 2, .Tq = 6, .Tk = 70, .HS = 5, .mask = 1,
                        .mask_style = 1, .key_lens = lens,
                        .causal = VKA_CAUSAL_BOTTOM_RIGHT};
    size_t nq = att_nq(&s), nk = att_nk(&s), n_in = nq + 2 * nk;
    float *x = malloc(n_in * sizeof *x), *dout = malloc(nq * sizeof *dout);
    tu_random(x, n_in, 70, 1.5f);
    tu_random(dout, nq, 71, 1.0f);
    float *mask = att_make_mask(&s, 72);
    att_result got = att_run(ctx, &s, x, mask, dout);
    tu_assert_finite("out", got.out, nq);
    tu_assert_finite("dq", got.dq, nq);
    tu_assert_finite("dk", got.dk, nk);
    tu_assert_finite("dv", got.dv, nk);
    for (int h = 0; h < s.NH; h++)
        for (int t = 0; t < s.Tq; t++) {
            /* batch 0: no keys; batch 1: 2 keys, bottom-right, so queries 0..3 see none */
            for (int b = 0; b < 2; b++) {
                if (b == 1 && t >= 4) continue;
                size_t r = ((size_t)b * s.NH + h) * s.Tq + t;
                if (got.lse[r] != -INFINITY) fail_msg("lse[%zu] = %g, expected -inf", r, got.lse[r]);
                for (int d = 0; d < s.HS; d++) {
                    size_t i = pk(&s, s.Tq, b, h, t, d);
                    if (got.out[i] != 0.0f || got.dq[i] != 0.0f)
                        fail_msg("masked row b=%d h=%d t=%d: out %g dq %g, expected 0", b, h, t,
                                 got.out[i], got.dq[i]);
                }
            }
        }
    for (size_t i = 0; i < nk / 2; i++) /* batch 0's keys are all padding */
        if (got.dk[i] != 0.0f || got.dv[i] != 0.0f)
            fail_msg("padding key gradient %zu: dk %g dv %g", i, got.dk[i], got.dv[i]);
    att_result_free(&got);
    free(x);
    free(dout);
    free(mask);
}

/* Two runs give bitwise the same out, lse and gradients (HS 8: kernels the quick group's
 * narrow heads build anyway). */
static void deterministic_cases(vka_context *ctx) {
    const att_case s = {.B = 2, .NH = 2, .Tq = 70, .Tk = 70, .HS = 8,
                        .causal = VKA_CAUSAL_TOP_LEFT, .qkv = true, .mask = 1};
    size_t nq = att_nq(&s), nk = att_nk(&s), n_in = nq + 2 * nk;
    float *x = malloc(n_in * sizeof *x), *dout = malloc(nq * sizeof *dout);
    tu_random(x, n_in, 80, 1.5f);
    tu_random(dout, nq, 81, 1.0f);
    float *mask = att_make_mask(&s, 82);
    att_result a = att_run(ctx, &s, x, mask, dout), b = att_run(ctx, &s, x, mask, dout);
    const float *pa[] = {a.out, a.lse, a.dq, a.dk, a.dv}, *pb[] = {b.out, b.lse, b.dq, b.dk, b.dv};
    size_t n[] = {nq, att_nlse(&s), nq, nk, nk};
    for (int i = 0; i < 5; i++)
        if (memcmp(pa[i], pb[i], n[i] * sizeof(float)) != 0)
            fail_msg("tensor %d differs between two runs", i);
    att_result_free(&a);
    att_result_free(&b);
    free(x);
    free(dout);
    free(mask);
}

/* The CPU-type kernels read q, k, v and dout through texel views on lavapipe
 * (vk_ops_attention.c) unless VKATTN_TEXEL_LOADS=0: the same arithmetic, so bitwise the same
 * results as the storage-buffer path, on packed and qkv layouts, masks and key lengths. */
static void test_attention_fused_vulkan_texel_matches_storage(void **state) {
    (void)state;
    static const int lens[] = {37, 20, 1};
    const att_case cases[] = {
        {.B = 2, .NH = 2, .Tq = 70, .Tk = 70, .HS = 16, .causal = VKA_CAUSAL_TOP_LEFT,
         .qkv = true, .mask = 1},
        {.B = 3, .NH = 4, .Tq = 64, .Tk = 64, .HS = 32, .causal = VKA_CAUSAL_TOP_LEFT,
         .qkv = true},
        {.B = 3, .NH = 1, .Tq = 20, .Tk = 37, .HS = 64, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .key_lens = lens},
    };
    const char *old = getenv("VKATTN_TEXEL_LOADS");
    char *saved = old ? strdup(old) : NULL;
    vka_context *texel = tu_gpu_kernels(VKA_KERNELS_CPU);
    setenv("VKATTN_TEXEL_LOADS", "0", 1);
    vka_context *storage = tu_gpu_kernels(VKA_KERNELS_CPU);
    if (saved) setenv("VKATTN_TEXEL_LOADS", saved, 1);
    else unsetenv("VKATTN_TEXEL_LOADS");
    free(saved);
    for (size_t c = 0; c < TU_LEN(cases); c++) {
        const att_case *s = &cases[c];
        size_t nq = att_nq(s), nk = att_nk(s), n_in = nq + 2 * nk;
        float *x = malloc(n_in * sizeof *x), *dout = malloc(nq * sizeof *dout);
        tu_random(x, n_in, 90 + c, 1.5f);
        tu_random(dout, nq, 95 + c, 1.0f);
        float *mask = att_make_mask(s, 99);
        att_result a = att_run(texel, s, x, mask, dout), b = att_run(storage, s, x, mask, dout);
        const float *pa[] = {a.out, a.lse, a.dq, a.dk, a.dv};
        const float *pb[] = {b.out, b.lse, b.dq, b.dk, b.dv};
        size_t n[] = {nq, att_nlse(s), nq, nk, nk};
        for (int i = 0; i < 5; i++)
            if (memcmp(pa[i], pb[i], n[i] * sizeof(float)) != 0)
                fail_msg("case %zu: tensor %d differs between the texel and storage paths", c, i);
        att_result_free(&a);
        att_result_free(&b);
        free(x);
        free(dout);
        free(mask);
    }
    tu_done(texel);
    tu_done(storage);
}

/* One matmul into the graph being recorded (alpha 1, packed). */
static void mm(vka_context *ctx, vka_tensor *out, const vka_tensor *a, const vka_tensor *b,
               int M, int N, int K, int batch, bool ta, bool tb) {
    vka_matmul_desc d = {.out = out, .a = a, .b = b, .M = M, .N = N, .K = K, .batch = batch,
                         .trans_a = ta, .trans_b = tb};
    assert_int_equal(vka_matmul(ctx, &d), VKA_SUCCESS);
}

/* The model's use: qkv (B, T, 3C) -> out (B, T, C), causal, forward and backward, fused vs the
 * composed ops (permute, q k^T, masked softmax, att v, unpermute) on the same context (HS 8:
 * attention kernels the narrow heads build anyway). */
static void composed_cases(vka_context *ctx) {
    enum { B = 2, T = 64, NH = 4, HS = 8, C = NH * HS, BNH = B * NH };
    size_t n_in = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_att = (size_t)BNH * T * T;
    float *inp_h, *dout_h;
    vka_tensor *inp = tu_tensor_random(ctx, n_in, 90, 1.5f, &inp_h);
    vka_tensor *dout = tu_tensor_random(ctx, n_out, 91, 1.0f, &dout_h);
    vka_tensor *q = tu_tensor_nan(ctx, n_out), *k = tu_tensor_nan(ctx, n_out);
    vka_tensor *v = tu_tensor_nan(ctx, n_out), *preatt = tu_tensor_nan(ctx, n_att);
    vka_tensor *att = tu_tensor_nan(ctx, n_att), *y = tu_tensor_nan(ctx, n_out);
    vka_tensor *out = tu_tensor_nan(ctx, n_out), *dy = tu_tensor(ctx, n_out, NULL);
    vka_tensor *datt = tu_tensor_nan(ctx, n_att), *dpreatt = tu_tensor(ctx, n_att, NULL);
    vka_tensor *dq = tu_tensor_nan(ctx, n_out), *dk = tu_tensor_nan(ctx, n_out);
    vka_tensor *dv = tu_tensor_nan(ctx, n_out), *dinp = tu_tensor(ctx, n_in, NULL);
    vka_tensor *fout = tu_tensor_nan(ctx, n_out), *lse = tu_tensor_nan(ctx, (size_t)BNH * T);
    vka_tensor *fdinp = tu_tensor_nan(ctx, n_in);
    float scale = 1.0f / sqrtf((float)HS);
    tu_begin(ctx);
    vka_attention_desc d = {.qkv = inp, .B = B, .NH = NH, .Tq = T, .Tk = T, .HS = HS,
                            .causal = VKA_CAUSAL_TOP_LEFT, .out_btc = true, .out = fout,
                            .lse = lse};
    vka_result r = vka_attention_forward(ctx, &d);
    assert_int_equal(r, VKA_SUCCESS);
    vka_attention_grads g = {.dout = dout, .dqkv = fdinp};
    assert_int_equal(vka_attention_backward(ctx, &d, &g), VKA_SUCCESS);
    assert_int_equal(vka_permute_forward(ctx, q, k, v, inp, B, T, NH, HS), VKA_SUCCESS);
    mm(ctx, preatt, q, k, T, T, HS, BNH, false, true);
    vka_softmax_desc sd = {.out = att, .inp = preatt, .R = BNH * T, .Tq = T, .Tk = T,
                           .scale = scale, .causal = true};
    assert_int_equal(vka_softmax_forward(ctx, &sd), VKA_SUCCESS);
    mm(ctx, y, att, v, T, HS, T, BNH, false, false);
    assert_int_equal(vka_unpermute_forward(ctx, out, y, B, T, NH, HS), VKA_SUCCESS);
    assert_int_equal(vka_unpermute_backward(ctx, dy, dout, B, T, NH, HS), VKA_SUCCESS);
    mm(ctx, datt, dy, v, T, T, HS, BNH, false, true);
    mm(ctx, dv, att, dy, T, HS, T, BNH, true, false);
    assert_int_equal(vka_softmax_backward(ctx, dpreatt, datt, att, BNH * T, T, scale),
                     VKA_SUCCESS);
    mm(ctx, dq, dpreatt, k, T, HS, T, BNH, false, false);
    mm(ctx, dk, dpreatt, q, T, HS, T, BNH, true, false);
    assert_int_equal(vka_permute_backward(ctx, dinp, dq, dk, dv, B, T, NH, HS), VKA_SUCCESS);
    tu_run(ctx);
    float *a = tu_read(fout, n_out), *b = tu_read(out, n_out);
    float *da = tu_read(fdinp, n_in), *db = tu_read(dinp, n_in);
    tu_assert_close("fused vs composed out", a, b, n_out, 1e-5, 1e-4);
    tu_assert_close("fused vs composed dqkv", da, db, n_in, 5e-5, 2e-4);
    free(a);
    free(b);
    free(da);
    free(db);
    free(inp_h);
    free(dout_h);
    vka_tensor *all[] = {inp, dout, q, k, v, preatt, att, y, out, dy, datt, dpreatt, dq, dk, dv,
                         dinp, fout, lse, fdinp};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

/* --- argument errors (CPU: the checks are the same for every backend) ----------------------- */

static void expect_forward_error(vka_context *ctx, const vka_attention_desc *d, const char *text) {
    tu_begin(ctx);
    vka_result r = vka_attention_forward(ctx, d);
    if (r != VKA_ERROR_INVALID_ARGUMENT)
        fail_msg("expected invalid argument (%s), got %s", text, vka_result_string(r));
    tu_end_expect(ctx, VKA_ERROR_INVALID_ARGUMENT, text);
}

static void test_attention_fused_argument_errors(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    vka_tensor *q = tu_tensor(ctx, 2 * 3 * 5 * 4, NULL), *k = tu_tensor(ctx, 2 * 3 * 5 * 4, NULL);
    vka_tensor *v = tu_tensor(ctx, 2 * 3 * 5 * 4, NULL), *out = tu_tensor(ctx, 120, NULL);
    vka_tensor *small = tu_tensor(ctx, 119, NULL), *qkv = tu_tensor(ctx, 360, NULL);
    vka_tensor *lse = tu_tensor(ctx, 30, NULL);
    const vka_attention_desc good = {.q = q, .k = k, .v = v, .out = out, .B = 2, .NH = 3,
                                     .Tq = 5, .Tk = 5, .HS = 4};
    vka_attention_desc d = good;
    d.k = small;
    expect_forward_error(ctx, &d, "k holds 119 elements but B*NH*Tk*HS = 2*3*5*4 = 120");
    d = good;
    d.qkv = qkv;
    expect_forward_error(ctx, &d, "either q, k and v or qkv");
    d = good;
    d.HS = VKA_ATTENTION_MAX_HS + 1;
    expect_forward_error(ctx, &d, "exceeds VKA_ATTENTION_MAX_HS");
    d = good;
    d.causal = (vka_causal)3;
    expect_forward_error(ctx, &d, "causal = 3");
    d = good;
    d.q = d.k = d.v = NULL;
    d.qkv = qkv;
    d.Tk = 4;
    expect_forward_error(ctx, &d, "qkv needs Tq = Tk");
    d = good;
    d.mask = small;
    d.mask_per_batch = true;
    d.mask = lse; /* 30 < B*Tq*Tk = 50 */
    expect_forward_error(ctx, &d, "mask holds 30 elements");
    d = good;
    d.out = q;
    expect_forward_error(ctx, &d, "out must be a tensor other than the inputs");
    d = good;
    d.lse = k; /* lse is written while k is read */
    expect_forward_error(ctx, &d, "lse must be a tensor other than the inputs");
    d = good;
    d.mask = lse;
    d.lse = lse;
    expect_forward_error(ctx, &d, "lse must be a tensor other than the inputs");
    d = good;
    d.lse = out;
    expect_forward_error(ctx, &d, "out and lse must be different tensors");
    /* backward: lse required, the gradients in the forward's form */
    vka_attention_grads gr = {.dout = out, .dq = q, .dk = k, .dv = v};
    tu_begin(ctx);
    assert_int_equal(vka_attention_backward(ctx, &good, &gr), VKA_ERROR_INVALID_ARGUMENT);
    tu_end_expect(ctx, VKA_ERROR_INVALID_ARGUMENT, "lse is NULL");
    d = good;
    d.lse = lse;
    gr = (vka_attention_grads){.dout = out, .dqkv = qkv};
    tu_begin(ctx);
    assert_int_equal(vka_attention_backward(ctx, &d, &gr), VKA_ERROR_INVALID_ARGUMENT);
    tu_end_expect(ctx, VKA_ERROR_INVALID_ARGUMENT, "give dq, dk, dv, not dqkv");
    vka_tensor *g1 = tu_tensor(ctx, 120, NULL), *g2 = tu_tensor(ctx, 120, NULL);
    gr = (vka_attention_grads){.dout = out, .dq = q, .dk = g1, .dv = g2};
    tu_begin(ctx);
    assert_int_equal(vka_attention_backward(ctx, &d, &gr), VKA_ERROR_INVALID_ARGUMENT);
    tu_end_expect(ctx, VKA_ERROR_INVALID_ARGUMENT, "gradients must be tensors other than");
    /* key_lens are read when the graph runs: one beyond Tk fails the run, naming it */
    int32_t lens[2] = {5, 6};
    vka_tensor *kl = tu_tensor(ctx, 2, lens);
    d = good;
    d.key_lens = kl;
    tu_begin(ctx);
    assert_int_equal(vka_attention_forward(ctx, &d), VKA_SUCCESS);
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(g), VKA_ERROR_INVALID_ARGUMENT);
    vka_graph_destroy(g);
    if (!strstr(vka_last_error(ctx), "key_lens[1] = 6 is outside [0, Tk = 5]"))
        fail_msg("message: %s", vka_last_error(ctx));
    vka_tensor *all[] = {q, k, v, out, small, qkv, lse, kl, g1, g2};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    tu_done(ctx);
}

/* On Vulkan too (the shaders clamp; the host checks after the run): a key_lens value outside
 * [0, Tk] fails the run with the CPU backend's message, and the output stays finite. */
static void test_attention_fused_vulkan_key_lens_checked(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    float x[120];
    for (int i = 0; i < 120; i++) x[i] = 0.01f * (float)(i % 17) - 0.05f;
    vka_tensor *q = tu_tensor(ctx, 120, x), *k = tu_tensor(ctx, 120, x);
    vka_tensor *v = tu_tensor(ctx, 120, x), *out = tu_tensor(ctx, 120, NULL);
    const int32_t bad[2][2] = {{5, 6}, {-1, 3}};
    const char *const want[2] = {"key_lens[1] = 6 is outside [0, Tk = 5]",
                                 "key_lens[0] = -1 is outside [0, Tk = 5]"};
    for (int c = 0; c < 2; c++) {
        vka_tensor *kl = tu_tensor(ctx, 2, bad[c]);
        vka_attention_desc d = {.q = q, .k = k, .v = v, .out = out, .key_lens = kl, .B = 2,
                                .NH = 3, .Tq = 5, .Tk = 5, .HS = 4};
        tu_begin(ctx);
        assert_int_equal(vka_attention_forward(ctx, &d), VKA_SUCCESS);
        vka_graph *g = NULL;
        assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
        assert_int_equal(vka_graph_run(g), VKA_ERROR_INVALID_ARGUMENT);
        if (!strstr(vka_last_error(ctx), want[c])) fail_msg("message: %s", vka_last_error(ctx));
        vka_graph_destroy(g);
        float *o = tu_read(out, 120);
        for (int i = 0; i < 120; i++) assert_true(isfinite(o[i]));
        free(o);
        vka_tensor_destroy(kl);
    }
    vka_tensor *all[] = {q, k, v, out};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    tu_done(ctx);
}

/* A +inf score (a +INFINITY mask entry) has no softmax: both backends give NaN in that row
 * (never zeros that look like a fully masked row), and the other rows are unaffected. */
static void inf_score_case(vka_context *ctx) {
    float x[24], mask[4] = {0.0f, 0.0f, INFINITY, 0.0f}; /* query 1 sees +inf at key 0 */
    for (int i = 0; i < 24; i++) x[i] = 0.1f * (float)(i % 5);
    vka_tensor *q = tu_tensor(ctx, 12, x), *k = tu_tensor(ctx, 12, x + 12);
    vka_tensor *v = tu_tensor(ctx, 12, x), *m = tu_tensor(ctx, 4, mask);
    vka_tensor *out = tu_tensor(ctx, 12, NULL);
    vka_attention_desc d = {.q = q, .k = k, .v = v, .mask = m, .out = out, .B = 1, .NH = 3,
                            .Tq = 2, .Tk = 2, .HS = 2};
    tu_begin(ctx);
    assert_int_equal(vka_attention_forward(ctx, &d), VKA_SUCCESS);
    tu_run(ctx);
    float *o = tu_read(out, 12);
    for (int h = 0; h < 3; h++)
        for (int t = 0; t < 2; t++)
            for (int e = 0; e < 2; e++) {
                float y = o[(h * 2 + t) * 2 + e];
                if (t == 1 ? !isnan(y) : !isfinite(y))
                    fail_msg("%s: head %d row %d: %g", tu_is_cpu(ctx) ? "cpu" : "vulkan", h, t, y);
            }
    free(o);
    vka_tensor *all[] = {q, k, v, m, out};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}
static void test_attention_fused_inf_score_is_nan(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    inf_score_case(ctx);
    tu_done(ctx);
    ctx = tu_gpu();
    inf_score_case(ctx);
    tu_done(ctx);
}

/* --- the CPU backend's fast kernels --------------------------------------------------------- */

/* The fast kernels (attention_fast.c: fused multiply-adds, a polynomial exp, row sums across
 * vector lanes) and the reference ones sum every element in the same order but round
 * differently, so each is held to the tolerance the GPU is held to against the double
 * reference (att_case_run), lse is -inf exactly where it should be, fast and reference agree
 * within that tolerance, and the fast results are identical on 2 and 3 threads. Shapes: one
 * query and key, lengths of no tile (query blocks of 32, key tiles of 64, backward groups of
 * 256 keys), HS from 1 to 256 (no multiple of 8 or 16 too), both causal kinds, either mask,
 * key lengths, packed qkv. */
static void fast_matches_reference(vka_cpu_kernels kernels) {
    vka_context *fast = tu_cpu_kernels(kernels, 2), *fast3 = tu_cpu_kernels(kernels, 3);
    vka_context *ref = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    static const int lens[2] = {1, 299};
    const att_case cases[] = {
        {.B = 1, .NH = 1, .Tq = 1, .Tk = 1, .HS = 1},
        {.B = 1, .NH = 2, .Tq = 1, .Tk = 1, .HS = 24, .causal = VKA_CAUSAL_TOP_LEFT, .qkv = true},
        {.B = 2, .NH = 2, .Tq = 33, .Tk = 33, .HS = 40, .causal = VKA_CAUSAL_TOP_LEFT,
         .qkv = true, .out_btc = true},
        {.B = 1, .NH = 2, .Tq = 65, .Tk = 130, .HS = 64, .causal = VKA_CAUSAL_BOTTOM_RIGHT,
         .mask = 1},
        {.B = 2, .NH = 1, .Tq = 300, .Tk = 300, .HS = 40, .causal = VKA_CAUSAL_TOP_LEFT,
         .key_lens = lens},
        {.B = 2, .NH = 1, .Tq = 70, .Tk = 97, .HS = 7, .mask = 2, .mask_style = 1},
        {.B = 1, .NH = 1, .Tq = 37, .Tk = 5, .HS = 256, .scale = 0.9f},
        {.B = 1, .NH = 3, .Tq = 64, .Tk = 64, .HS = 32, .causal = VKA_CAUSAL_TOP_LEFT,
         .qkv = true, .out_btc = true}, /* the default model's layer */
    };
    const char *kind = vka_context_cpu_kernels(fast);
    double worst[2] = {0.0, 0.0}; /* |fast - reference|: out, gradients */
    for (size_t c = 0; c < TU_LEN(cases); c++) {
        const att_case *s = &cases[c];
        size_t nq = att_nq(s), nk = att_nk(s), n_in = nq + 2 * nk, nl = att_nlse(s);
        float *x = malloc(n_in * sizeof *x), *dout = malloc(nq * sizeof *dout);
        tu_random(x, n_in, 300 + c, 1.5f);
        tu_random(dout, nq, 310 + c, 1.0f);
        float *mask = att_make_mask(s, 320 + c);
        double *xd = tu_to_double(x, n_in), *want = malloc(nq * sizeof *want);
        double *lse = malloc(nl * sizeof *lse), *g = malloc(n_in * sizeof *g);
        ref_forward(s, mask, xd, want, lse);
        ref_backward(s, mask, xd, dout, NULL, g);
        att_result r[3] = {att_run(fast, s, x, mask, dout), att_run(ref, s, x, mask, dout),
                           att_run(fast3, s, x, mask, dout)};
        char what[200];
        for (int k = 0; k < 2; k++) {
            snprintf(what, sizeof what, "%s attention B=%d NH=%d Tq=%d Tk=%d HS=%d causal=%d "
                     "mask=%d", k ? "reference" : kind, s->B, s->NH, s->Tq, s->Tk, s->HS,
                     (int)s->causal, s->mask);
            tu_assert_close_d(what, r[k].out, want, nq, 2e-5, 1e-4);
            check_lse(what, r[k].lse, lse, nl);
            tu_assert_close_d(what, r[k].dq, g, nq, 5e-5, 2e-4);
            tu_assert_close_d(what, r[k].dk, g + nq, nk, 5e-5, 2e-4);
            tu_assert_close_d(what, r[k].dv, g + nq + nk, nk, 5e-5, 2e-4);
        }
        const float *f[] = {r[0].out, r[0].lse, r[0].dq, r[0].dk, r[0].dv};
        const float *f3[] = {r[2].out, r[2].lse, r[2].dq, r[2].dk, r[2].dv};
        const float *rf[] = {r[1].out, r[1].lse, r[1].dq, r[1].dk, r[1].dv};
        const size_t n[] = {nq, nl, nq, nk, nk};
        for (int t = 0; t < 5; t++) {
            if (memcmp(f[t], f3[t], n[t] * sizeof(float)) != 0)
                fail_msg("%s: tensor %d differs between 2 and 3 threads", what, t);
            if (t == 1) continue; /* lse: against the double reference above (-inf) */
            snprintf(what, sizeof what, "%s vs reference, case %zu, tensor %d", kind, c, t);
            double d = t == 0 ? tu_assert_close(what, f[t], rf[t], n[t], 2e-5, 1e-4)
                              : tu_assert_close(what, f[t], rf[t], n[t], 5e-5, 2e-4);
            if (d > worst[t > 0]) worst[t > 0] = d;
        }
        for (int k = 0; k < 3; k++) att_result_free(&r[k]);
        free(x);
        free(dout);
        free(mask);
        free(xd);
        free(want);
        free(lse);
        free(g);
    }
    print_message("fast attention (%s): max |fast - reference| out %.3g, gradients %.3g\n", kind,
                  worst[0], worst[1]);
    tu_done(fast);
    tu_done(fast3);
    tu_done(ref);
}

static void test_attention_fused_cpu_fast_matches_reference(void **state) {
    (void)state;
    fast_matches_reference(VKA_CPU_KERNELS_FAST);      /* the widest ISA (AVX-512 where there) */
    fast_matches_reference(VKA_CPU_KERNELS_FAST_AVX2); /* and the AVX2+FMA kernels */
}

/* --- cmocka --------------------------------------------------------------------------------- */

#define CPU_TEST(name, cases)                                                                  \
    static void name(void **state) {                                                           \
        (void)state;                                                                           \
        vka_context *ctx = tu_cpu();                                                           \
        cases(ctx);                                                                            \
        tu_done(ctx);                                                                          \
    }
CPU_TEST(test_attention_fused_journey_known_values, journey_cases)
CPU_TEST(test_attention_fused_matches_reference, shape_cases)
CPU_TEST(test_attention_fused_backward_finite_difference, finite_difference_cases)
CPU_TEST(test_attention_fused_fully_masked_row_is_zero, fully_masked_cases)
CPU_TEST(test_attention_fused_deterministic, deterministic_cases)
CPU_TEST(test_attention_fused_matches_composed, composed_cases)

/* The same on two threads: the result does not depend on the thread count. */
static void test_attention_fused_threads_agree(void **state) {
    (void)state;
    const att_case s = {.B = 2, .NH = 3, .Tq = 70, .Tk = 90, .HS = 24,
                        .causal = VKA_CAUSAL_BOTTOM_RIGHT, .mask = 1};
    size_t nq = att_nq(&s), nk = att_nk(&s), n_in = nq + 2 * nk;
    float *x = malloc(n_in * sizeof *x), *dout = malloc(nq * sizeof *dout);
    tu_random(x, n_in, 100, 1.5f);
    tu_random(dout, nq, 101, 1.0f);
    float *mask = att_make_mask(&s, 102);
    vka_context *c1 = tu_cpu_threads(1), *c2 = tu_cpu_threads(2);
    att_result a = att_run(c1, &s, x, mask, dout), b = att_run(c2, &s, x, mask, dout);
    tu_vs_cpu(c1, "out 1 vs 2 threads", a.out, b.out, nq, 0, 0);
    tu_vs_cpu(c1, "dq 1 vs 2 threads", a.dq, b.dq, nq, 0, 0);
    tu_vs_cpu(c1, "dk 1 vs 2 threads", a.dk, b.dk, nk, 0, 0);
    tu_vs_cpu(c1, "dv 1 vs 2 threads", a.dv, b.dv, nk, 0, 0);
    att_result_free(&a);
    att_result_free(&b);
    tu_done(c1);
    tu_done(c2);
    free(x);
    free(dout);
    free(mask);
}

TU_VULKAN_TESTS(test_attention_fused_vulkan_journey_known_values, journey_cases)
TU_VULKAN_TESTS(test_attention_fused_vulkan_matches_cpu, narrow_head_cases)
TU_VULKAN_TESTS(test_attention_fused_vulkan_matches_cpu_wide_heads, wide_head_cases)
TU_VULKAN_TESTS(test_attention_fused_vulkan_backward_finite_difference, finite_difference_cases)
TU_VULKAN_TESTS(test_attention_fused_vulkan_fully_masked_row_is_zero, fully_masked_cases)
TU_VULKAN_TESTS(test_attention_fused_vulkan_deterministic, deterministic_cases)
TU_VULKAN_TESTS(test_attention_fused_vulkan_matches_composed, composed_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_attention_fused_journey_known_values),
        cmocka_unit_test(test_attention_fused_matches_reference),
        cmocka_unit_test(test_attention_fused_backward_finite_difference),
        cmocka_unit_test(test_attention_fused_fully_masked_row_is_zero),
        cmocka_unit_test(test_attention_fused_deterministic),
        cmocka_unit_test(test_attention_fused_matches_composed),
        cmocka_unit_test(test_attention_fused_threads_agree),
        cmocka_unit_test(test_attention_fused_cpu_fast_matches_reference),
        cmocka_unit_test(test_attention_fused_argument_errors),
        cmocka_unit_test(test_attention_fused_vulkan_key_lens_checked),
        cmocka_unit_test(test_attention_fused_inf_score_is_nan),
        TU_VULKAN_TEST_ENTRIES(test_attention_fused_vulkan_journey_known_values),
        TU_VULKAN_TEST_ENTRIES(test_attention_fused_vulkan_matches_cpu),
        TU_VULKAN_TEST_ENTRIES(test_attention_fused_vulkan_backward_finite_difference),
        TU_VULKAN_TEST_ENTRIES(test_attention_fused_vulkan_fully_masked_row_is_zero),
        TU_VULKAN_TEST_ENTRIES(test_attention_fused_vulkan_deterministic),
        TU_VULKAN_TEST_ENTRIES(test_attention_fused_vulkan_matches_composed),
    };
    /* Wide heads and three more kernel builds (HS 16, 32, 64) on two contexts. */
    const struct CMUnitTest exhaustive[] = {
        TU_VULKAN_TEST_ENTRIES(test_attention_fused_vulkan_matches_cpu_wide_heads),
        cmocka_unit_test(test_attention_fused_vulkan_texel_matches_storage),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, NULL, NULL);
}
