/* vka_encoder_forward with 16-bit out, wte and/or wpe, and vka_layernorm_backward with 16-bit
 * dout, inp and/or weight (bf16, fp16; src/backend.h's 16-bit rule), on the CPU backend (default
 * kernels on 1 and 3 threads, reference kernels) and both Vulkan kernel variants, whole and in
 * 4 KiB bindings (blocks of rows and of vocabulary rows starting mid-word):
 *  (a) bit for bit the f32 op on the widened inputs, on the same context: the encoder's f32 out
 *      its bits, a 16-bit out their vka_copy rounding; layernorm_backward's dinp, dweight and
 *      dbias (f32, added to what they held) its bits;
 *  (b) a 16-bit out one element longer than B*T*C keeps that element;
 *  (c) the CPU backend and Vulkan agree: the encoder bit for bit (one f32 add an element), the
 *      layernorm backward within a bound from a float64 reference (sums in other orders);
 *  (d) bad mixes are refused naming the op and the tensors (bf16 with fp16; 16-bit tokens,
 *      mean, rstd, dinp, dweight).
 * Shapes: odd and even C, C = 1, C past a workgroup (769, 1601), B*T not a multiple of anything,
 * T = 1. */
#include "op_util.h"

#include <stdint.h>

#define SENTINEL16 0xABCDu

static const char *ctx_name(vka_context *ctx) {
    return tu_is_cpu(ctx) ? vka_context_cpu_kernels(ctx) : vka_context_vulkan_kernels(ctx);
}

/* --- encoder_forward ------------------------------------------------------------------------ */

typedef struct {
    int B, T, C, Vp;
} enc_shape;

/* which tensors are 16-bit */
enum { E_OUT = 1, E_WTE = 2, E_WPE = 4 };
static const unsigned enc_masks[] = {E_OUT, E_WTE, E_WPE, E_WTE | E_WPE, E_OUT | E_WTE | E_WPE};

/* A case's inputs rounded to the 16-bit type t: their widened values and words. */
typedef struct {
    int32_t *tokens;          /* B*T */
    float *wte, *wpe;         /* widened: (Vp, C), (T, C) */
    uint16_t *wte16, *wpe16;  /* their words */
} enc_data;

static enc_data enc_make(const enc_shape *s, vka_dtype t, uint64_t seed) {
    size_t BT = (size_t)s->B * s->T, nte = (size_t)s->Vp * s->C, npe = (size_t)s->T * s->C;
    enc_data d = {.tokens = malloc(BT * sizeof(int32_t))};
    float *x = malloc((nte > npe ? nte : npe) * sizeof *x);
    tu_random(x, nte, seed, 1.0f);
    d.wte = tu_rounded16(x, nte, t, &d.wte16);
    tu_random(x, npe, seed + 1, 0.5f);
    d.wpe = tu_rounded16(x, npe, t, &d.wpe16);
    free(x);
    uint64_t r = seed * 2654435761u + 7;
    for (size_t i = 0; i < BT; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        d.tokens[i] = (int32_t)((r >> 33) % (uint64_t)s->Vp);
    }
    return d;
}

static void enc_free(enc_data *d) {
    free(d->tokens);
    free(d->wte);
    free(d->wpe);
    free(d->wte16);
    free(d->wpe16);
}

/* The case's op on ctx with mask's tensors 16-bit, and the f32 op on the widened inputs in the
 * same graph; checks (a), (b). Returns out widened to f32 (B*T*C, malloc'd). */
static float *enc_run(vka_context *ctx, const enc_shape *s, vka_dtype t, unsigned mask,
                      const enc_data *d) {
    size_t n = (size_t)s->B * s->T * s->C, nte = (size_t)s->Vp * s->C, npe = (size_t)s->T * s->C;
    const char *tn = vka_dtype_string(t);
    vka_tensor *tok = tu_tensor(ctx, (size_t)s->B * s->T, d->tokens);
    vka_tensor *te = mask & E_WTE ? tu_tensor_typed(ctx, t, nte, d->wte16) : tu_tensor(ctx, nte, d->wte);
    vka_tensor *pe = mask & E_WPE ? tu_tensor_typed(ctx, t, npe, d->wpe16) : tu_tensor(ctx, npe, d->wpe);
    vka_tensor *te32 = tu_tensor(ctx, nte, d->wte), *pe32 = tu_tensor(ctx, npe, d->wpe);
    uint16_t *sent = malloc((n + 1) * sizeof *sent);
    for (size_t i = 0; i <= n; i++) sent[i] = SENTINEL16;
    vka_tensor *out = mask & E_OUT ? tu_tensor_typed(ctx, t, n + 1, sent) : tu_tensor_nan(ctx, n);
    vka_tensor *out32 = tu_tensor_nan(ctx, n);
    vka_tensor *ref16 = mask & E_OUT ? tu_tensor_typed(ctx, t, n, NULL) : NULL;
    tu_begin(ctx);
    if (vka_encoder_forward(ctx, out, tok, te, pe, s->B, s->T, s->C) != VKA_SUCCESS)
        fail_msg("%s mask %#x: %s", tn, mask, vka_last_error(ctx));
    assert_int_equal(vka_encoder_forward(ctx, out32, tok, te32, pe32, s->B, s->T, s->C),
                     VKA_SUCCESS);
    if (ref16) assert_int_equal(vka_copy(ctx, ref16, out32, n), VKA_SUCCESS);
    tu_run(ctx);
    float *got = malloc(n * sizeof *got);
    if (mask & E_OUT) {
        uint16_t *h = malloc((n + 1) * sizeof *h), *ref = malloc(n * sizeof *ref);
        assert_int_equal(vka_tensor_read(out, 0, h, n + 1), VKA_SUCCESS);
        assert_int_equal(vka_tensor_read(ref16, 0, ref, n), VKA_SUCCESS);
        for (size_t i = 0; i < n; i++)
            if (h[i] != ref[i])
                fail_msg("%s %s mask %#x B %d T %d C %d: out[%zu] 0x%04x, the f32 op rounded "
                         "0x%04x", ctx_name(ctx), tn, mask, s->B, s->T, s->C, i, h[i], ref[i]);
        if (h[n] != SENTINEL16)
            fail_msg("%s mask %#x: the element after out changed to 0x%04x", tn, mask, h[n]);
        assert_int_equal(vka_convert(VKA_F32, got, t, h, n), VKA_SUCCESS);
        free(h);
        free(ref);
    } else {
        float *o = tu_read(out, n), *ref = tu_read(out32, n);
        for (size_t i = 0; i < n; i++)
            if (tu_f32_bits(o[i]) != tu_f32_bits(ref[i]))
                fail_msg("%s %s mask %#x B %d T %d C %d: out[%zu] %.9g, the f32 op's %.9g",
                         ctx_name(ctx), tn, mask, s->B, s->T, s->C, i, o[i], ref[i]);
        memcpy(got, o, n * sizeof *got);
        free(o);
        free(ref);
    }
    free(sent);
    vka_tensor *all[] = {tok, te, pe, te32, pe32, out, out32, ref16};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return got;
}

static void enc_case(vka_context *ctx, enc_shape s, uint64_t seed) {
    size_t n = (size_t)s.B * s.T * s.C;
    vka_context *cpu = tu_is_cpu(ctx) ? NULL : tu_cpu();
    for (vka_dtype t = VKA_BF16; t <= VKA_F16; t++) {
        enc_data d = enc_make(&s, t, seed + t);
        for (size_t m = 0; m < TU_LEN(enc_masks); m++) {
            float *got = enc_run(ctx, &s, t, enc_masks[m], &d);
            if (cpu) { /* (c): one f32 add an element, so the same bits */
                float *c = enc_run(cpu, &s, t, enc_masks[m], &d);
                for (size_t i = 0; i < n; i++)
                    if (tu_f32_bits(got[i]) != tu_f32_bits(c[i]))
                        fail_msg("%s mask %#x: out[%zu] %.9g, the CPU backend's %.9g",
                                 vka_dtype_string(t), enc_masks[m], i, got[i], c[i]);
                free(c);
            }
            free(got);
        }
        enc_free(&d);
    }
    if (cpu) tu_done(cpu);
}

static void enc_shapes(vka_context *ctx) {
    enc_case(ctx, (enc_shape){2, 3, 7, 5}, 1);    /* odd C: rows start mid-word */
    enc_case(ctx, (enc_shape){3, 1, 5, 4}, 2);    /* T = 1 */
    enc_case(ctx, (enc_shape){1, 1, 1, 3}, 3);    /* C = 1 */
    enc_case(ctx, (enc_shape){2, 4, 8, 6}, 4);    /* even C */
    enc_case(ctx, (enc_shape){3, 5, 769, 11}, 5); /* rows past a workgroup */
    enc_case(ctx, (enc_shape){1, 3, 1601, 4}, 6);
    enc_case(ctx, (enc_shape){4, 8, 769, 9}, 7); /* enough work for the CPU backend's threads */
}

/* --- layernorm_backward --------------------------------------------------------------------- */

typedef struct {
    int N, C;
} lb_shape;

enum { L_DOUT = 1, L_INP = 2, L_W = 4 };
static const unsigned lb_masks[] = {L_DOUT, L_INP, L_W, L_DOUT | L_INP, L_DOUT | L_INP | L_W};

/* Inputs (widened values and 16-bit words of dout, inp, weight), mean and rstd of the widened
 * inp, and the gradients' starting values. */
typedef struct {
    float *dout, *inp, *w;         /* (N, C), (N, C), (C) */
    uint16_t *dout16, *inp16, *w16;
    float *mean, *rstd;            /* (N) */
    float *dinp0, *dw0, *db0;      /* (N, C), (C), (C) */
} lb_data;

static lb_data lb_make(const lb_shape *s, vka_dtype t, uint64_t seed) {
    size_t NC = (size_t)s->N * s->C, C = (size_t)s->C;
    lb_data d = {.mean = malloc((size_t)s->N * 4), .rstd = malloc((size_t)s->N * 4),
                 .dinp0 = malloc(NC * 4), .dw0 = malloc(C * 4), .db0 = malloc(C * 4)};
    float *x = malloc(NC * sizeof *x);
    tu_random(x, NC, seed, 1.0f);
    d.dout = tu_rounded16(x, NC, t, &d.dout16);
    tu_random(x, NC, seed + 1, 2.0f);
    for (size_t i = 0; i < NC; i++) x[i] += 3.0f;
    d.inp = tu_rounded16(x, NC, t, &d.inp16);
    tu_random(x, C, seed + 2, 1.5f);
    d.w = tu_rounded16(x, C, t, &d.w16);
    free(x);
    for (int n = 0; n < s->N; n++) {
        const float *r = d.inp + (size_t)n * s->C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < s->C; c++) m += r[c];
        m /= s->C;
        for (int c = 0; c < s->C; c++) v += (r[c] - m) * (r[c] - m);
        d.mean[n] = (float)m;
        d.rstd[n] = (float)(1.0 / sqrt(v / s->C + 1e-5));
    }
    tu_random(d.dinp0, NC, seed + 3, 0.5f);
    tu_random(d.dw0, C, seed + 4, 0.5f);
    tu_random(d.db0, C, seed + 5, 0.5f);
    return d;
}

static void lb_free(lb_data *d) {
    void *all[] = {d->dout, d->inp, d->w, d->dout16, d->inp16, d->w16, d->mean, d->rstd,
                   d->dinp0, d->dw0, d->db0};
    for (size_t i = 0; i < TU_LEN(all); i++) free(all[i]);
}

/* The op with mask's tensors 16-bit and the f32 op on the widened inputs in one graph; checks
 * (a). Returns dinp, dweight, dbias (N*C + 2C, malloc'd). */
static float *lb_run(vka_context *ctx, const lb_shape *s, vka_dtype t, unsigned mask,
                     const lb_data *d) {
    size_t NC = (size_t)s->N * s->C, C = (size_t)s->C, N = (size_t)s->N;
    vka_tensor *g = mask & L_DOUT ? tu_tensor_typed(ctx, t, NC, d->dout16) : tu_tensor(ctx, NC, d->dout);
    vka_tensor *x = mask & L_INP ? tu_tensor_typed(ctx, t, NC, d->inp16) : tu_tensor(ctx, NC, d->inp);
    vka_tensor *w = mask & L_W ? tu_tensor_typed(ctx, t, C, d->w16) : tu_tensor(ctx, C, d->w);
    vka_tensor *g32 = tu_tensor(ctx, NC, d->dout), *x32 = tu_tensor(ctx, NC, d->inp);
    vka_tensor *w32 = tu_tensor(ctx, C, d->w);
    vka_tensor *m = tu_tensor(ctx, N, d->mean), *r = tu_tensor(ctx, N, d->rstd);
    vka_tensor *grads[2][3];
    for (int k = 0; k < 2; k++) {
        grads[k][0] = tu_tensor(ctx, NC, d->dinp0);
        grads[k][1] = tu_tensor(ctx, C, d->dw0);
        grads[k][2] = tu_tensor(ctx, C, d->db0);
    }
    tu_begin(ctx);
    if (vka_layernorm_backward(ctx, grads[0][0], grads[0][1], grads[0][2], g, x, w, m, r,
                               s->N, s->C) != VKA_SUCCESS)
        fail_msg("%s mask %#x: %s", vka_dtype_string(t), mask, vka_last_error(ctx));
    assert_int_equal(vka_layernorm_backward(ctx, grads[1][0], grads[1][1], grads[1][2], g32, x32,
                                            w32, m, r, s->N, s->C),
                     VKA_SUCCESS);
    tu_run(ctx);
    float *res = malloc((NC + 2 * C) * sizeof *res);
    static const char *names[3] = {"dinp", "dweight", "dbias"};
    size_t lens[3] = {NC, C, C}, at = 0;
    for (int k = 0; k < 3; k++) {
        float *got = tu_read(grads[0][k], lens[k]), *ref = tu_read(grads[1][k], lens[k]);
        for (size_t i = 0; i < lens[k]; i++)
            if (tu_f32_bits(got[i]) != tu_f32_bits(ref[i]))
                fail_msg("%s %s mask %#x N %d C %d: %s[%zu] %.9g, the f32 op's %.9g",
                         ctx_name(ctx), vka_dtype_string(t), mask, s->N, s->C, names[k], i,
                         got[i], ref[i]);
        memcpy(res + at, got, lens[k] * sizeof *got);
        at += lens[k];
        free(got);
        free(ref);
    }
    vka_tensor *all[] = {g, x, w, g32, x32, w32, m, r};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) vka_tensor_destroy(grads[k][j]);
    return res;
}

/* float64 gradients (N*C + 2C) of the widened inputs and a bound on each f32 result's error:
 * 1e-5 times the sum of its terms' magnitudes. */
static void lb_reference(const lb_shape *s, const lb_data *d, double *ref, double *bound) {
    int N = s->N, C = s->C;
    size_t NC = (size_t)N * C;
    for (int c = 0; c < C; c++) {
        ref[NC + c] = d->dw0[c];
        ref[NC + C + c] = d->db0[c];
        bound[NC + c] = fabs(d->dw0[c]);
        bound[NC + C + c] = fabs(d->db0[c]);
    }
    for (int n = 0; n < N; n++) {
        const float *x = d->inp + (size_t)n * C, *g = d->dout + (size_t)n * C;
        double m = d->mean[n], r = d->rstd[n], mg = 0.0, mgn = 0.0, ag = 0.0, agn = 0.0;
        for (int c = 0; c < C; c++) {
            double gi = (double)d->w[c] * g[c], norm = (x[c] - m) * r;
            mg += gi;
            mgn += gi * norm;
            ag += fabs(gi);
            agn += fabs(gi * norm);
            ref[NC + c] += norm * g[c];
            ref[NC + C + c] += g[c];
            bound[NC + c] += fabs(norm * g[c]);
            bound[NC + C + c] += fabs(g[c]);
        }
        mg /= C;
        mgn /= C;
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            double gi = (double)d->w[c] * g[c], norm = (x[c] - m) * r;
            ref[i] = d->dinp0[i] + (gi - mg - norm * mgn) * r;
            bound[i] = fabs(d->dinp0[i]) + (fabs(gi) + ag / C + fabs(norm) * agn / C) * r;
        }
    }
    for (size_t i = 0; i < NC + 2 * (size_t)C; i++) bound[i] = 1e-5 * bound[i] + 1e-6;
}

static void lb_case(vka_context *ctx, lb_shape s, uint64_t seed) {
    size_t len = (size_t)s.N * s.C + 2 * (size_t)s.C;
    vka_context *cpu = tu_is_cpu(ctx) ? NULL : tu_cpu();
    double *ref = malloc(len * sizeof *ref), *bound = malloc(len * sizeof *bound);
    for (vka_dtype t = VKA_BF16; t <= VKA_F16; t++) {
        lb_data d = lb_make(&s, t, seed + t);
        lb_reference(&s, &d, ref, bound);
        for (size_t k = 0; k < TU_LEN(lb_masks); k++) {
            float *got = lb_run(ctx, &s, t, lb_masks[k], &d);
            float *c = cpu ? lb_run(cpu, &s, t, lb_masks[k], &d) : NULL;
            for (size_t i = 0; i < len; i++) {
                if (!(fabs(got[i] - ref[i]) <= bound[i]))
                    fail_msg("%s %s mask %#x N %d C %d: gradient %zu %.9g, float64 %.9g",
                             ctx_name(ctx), vka_dtype_string(t), lb_masks[k], s.N, s.C, i,
                             got[i], ref[i]);
                if (c && !(fabs(got[i] - c[i]) <= 2 * bound[i])) /* (c) */
                    fail_msg("%s mask %#x N %d C %d: gradient %zu %.9g, the CPU backend's "
                             "%.9g", vka_dtype_string(t), lb_masks[k], s.N, s.C, i, got[i],
                             c[i]);
            }
            free(got);
            free(c);
        }
        lb_free(&d);
    }
    free(ref);
    free(bound);
    if (cpu) tu_done(cpu);
}

static void lb_shapes(vka_context *ctx) {
    lb_case(ctx, (lb_shape){5, 7}, 11);    /* odd C: rows start mid-word */
    lb_case(ctx, (lb_shape){1, 1}, 12);    /* C = 1 */
    lb_case(ctx, (lb_shape){4, 6}, 13);    /* even, not a multiple of 4 */
    lb_case(ctx, (lb_shape){37, 8}, 14);   /* multiples of 4: the CPU-type texel builds */
    lb_case(ctx, (lb_shape){13, 96}, 15);
    lb_case(ctx, (lb_shape){3, 769}, 16);  /* rows past a workgroup */
    lb_case(ctx, (lb_shape){2, 1601}, 17);
    lb_case(ctx, (lb_shape){24, 1601}, 18); /* enough rows and columns for the threads */
}

static void both_shapes(vka_context *ctx) {
    enc_shapes(ctx);
    lb_shapes(ctx);
}

static void test_encoder16_lnbw16_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu_threads(1);
    both_shapes(ctx);
    tu_done(ctx);
    ctx = tu_cpu_threads(3);
    both_shapes(ctx);
    tu_done(ctx);
    ctx = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    both_shapes(ctx);
    tu_done(ctx);
}

TU_VULKAN_TESTS(test_encoder16_lnbw16_vulkan, both_shapes)

/* 4 KiB bindings: blocks of positions, of vocabulary rows and of layernorm rows starting at a
 * word's high half (odd C), whole sequences and parts of one. */
static void limited(vka_kernels kernels) {
    vka_context *ctx = tu_gpu_limited(kernels, 4096);
    enc_case(ctx, (enc_shape){3, 21, 37, 60}, 21); /* whole sequences a block, 16-bit: two */
    enc_case(ctx, (enc_shape){2, 60, 37, 60}, 22); /* parts of a sequence */
    lb_case(ctx, (lb_shape){40, 37}, 23);
    lb_case(ctx, (lb_shape){70, 16}, 24);
    tu_done(ctx);
}
static void test_encoder16_lnbw16_split_gpu_kernels(void **state) {
    (void)state;
    limited(VKA_KERNELS_GPU);
}
static void test_encoder16_lnbw16_split_cpu_kernels(void **state) {
    (void)state;
    limited(VKA_KERNELS_CPU);
}

/* (d) */
static void expect_refusal(vka_context *ctx, vka_result r, const char *op, const char *text) {
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    const char *e = vka_last_error(ctx);
    if (!strstr(e, op) || !strstr(e, text)) fail_msg("expected \"%s\" ... \"%s\": %s", op, text, e);
}

static void refusals(vka_context *ctx) {
    int B = 1, T = 2, C = 3, N = 2;
    vka_tensor *f = tu_tensor(ctx, 6, NULL), *f2 = tu_tensor(ctx, 6, NULL);
    vka_tensor *b6 = tu_tensor_typed(ctx, VKA_BF16, 6, NULL), *h6 = tu_tensor_typed(ctx, VKA_F16, 6, NULL);
    vka_tensor *b3 = tu_tensor_typed(ctx, VKA_BF16, 3, NULL), *h3 = tu_tensor_typed(ctx, VKA_F16, 3, NULL);
    vka_tensor *b2 = tu_tensor_typed(ctx, VKA_BF16, 2, NULL);
    vka_tensor *tok = tu_tensor(ctx, 2, (const int32_t[]){0, 1}), *w3 = tu_tensor(ctx, 3, NULL);
    vka_tensor *c3 = tu_tensor(ctx, 3, NULL), *s2 = tu_tensor(ctx, 2, NULL), *r2 = tu_tensor(ctx, 2, NULL);
    const char *ef = "encoder_forward", *lb = "layernorm_backward";
    tu_begin(ctx);
    expect_refusal(ctx, vka_encoder_forward(ctx, b6, tok, h6, f, B, T, C), ef,
                   "wte holds f16 elements but out bf16");
    expect_refusal(ctx, vka_encoder_forward(ctx, f2, tok, b6, h6, B, T, C), ef,
                   "wpe holds f16 elements but wte bf16");
    expect_refusal(ctx, vka_encoder_forward(ctx, f2, b2, b6, f, B, T, C), ef, "tokens holds bf16");
    expect_refusal(ctx, vka_layernorm_backward(ctx, f, w3, c3, b6, h6, w3, s2, r2, N, C), lb,
                   "inp holds f16 elements but dout bf16");
    expect_refusal(ctx, vka_layernorm_backward(ctx, f, w3, c3, b6, b6, h3, s2, r2, N, C), lb,
                   "weight holds f16 elements but inp bf16");
    expect_refusal(ctx, vka_layernorm_backward(ctx, b6, w3, c3, b6, b6, w3, s2, r2, N, C), lb,
                   "dinp holds bf16");
    expect_refusal(ctx, vka_layernorm_backward(ctx, f, b3, c3, f2, f2, w3, s2, r2, N, C), lb,
                   "dweight holds bf16");
    expect_refusal(ctx, vka_layernorm_backward(ctx, f, w3, b3, f2, f2, w3, s2, r2, N, C), lb,
                   "dbias holds bf16");
    expect_refusal(ctx, vka_layernorm_backward(ctx, f, w3, c3, b6, f2, w3, b2, r2, N, C), lb,
                   "mean holds bf16");
    expect_refusal(ctx, vka_layernorm_backward(ctx, f, w3, c3, b6, f2, w3, s2, b2, N, C), lb,
                   "rstd holds bf16");
    vka_graph *g = NULL;
    vka_graph_end(ctx, &g);
    vka_graph_destroy(g);
    vka_tensor *all[] = {f, f2, b6, h6, b3, h3, b2, tok, w3, c3, s2, r2};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void test_encoder16_lnbw16_refusals(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    refusals(ctx);
    tu_done(ctx);
    ctx = tu_gpu();
    refusals(ctx);
    tu_done(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder16_lnbw16_cpu),
        TU_VULKAN_TEST_ENTRIES(test_encoder16_lnbw16_vulkan),
        cmocka_unit_test(test_encoder16_lnbw16_split_gpu_kernels),
        cmocka_unit_test(test_encoder16_lnbw16_split_cpu_kernels),
        cmocka_unit_test(test_encoder16_lnbw16_refusals),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
