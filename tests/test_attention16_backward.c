/* vka_attention_backward with 16-bit q, k, v (or a packed qkv) and/or out (bf16 or fp16;
 * src/backend.h's 16-bit rule), dout, lse and the gradients float32, on the CPU backend (fast
 * kernels at 2 and 3 threads, reference kernels) and on Vulkan (GPU and CPU-type variants, and
 * at a 4 KiB binding limit batches in several dispatches whose 16-bit views start mid-word):
 *  (a) bit-exact: dq, dk, dv (or dqkv) are the float32 op's bits on the widened inputs
 *      (vka_convert's widening), on the same context. out is the float32 forward's on those
 *      inputs; where out is 16-bit, its rounding (vka_convert), which the float32 run reads
 *      widened;
 *  (b) sane: the float32 run's gradients against the double reference (attention_ref.h) on the
 *      same widened values, its delta from the out the op read;
 *  (c) the refusals: a bf16 / fp16 mix (q, k, v, out), 16-bit dout, dq, dqkv or lse, a 16-bit
 *      qkv of odd C.
 * Shapes: T = 1 and HS = 1 (delta recomputed from out in every pass), odd HS and NH (rows
 * sharing words), NH 7, T past a key tile and a workgroup, packed 16-bit qkv with (B, T, C)
 * out, masks, key lengths (padding queries), every causal kind, and rows whose |lse| >= 256
 * (the delta pass's correction reads q and k). */
#include "attention_ref.h"

enum { Q16 = 1, K16 = 2, V16 = 4, O16 = 8 };

typedef struct b16_case {
    vka_dtype type; /* VKA_BF16 or VKA_F16 */
    unsigned is16;  /* Q16 | K16 | V16 | O16; with s.qkv, Q16 means the packed qkv */
    att_case s;
    float mask_shift; /* added to the mask (s.mask): |lse| >= 256 with a shift of 300 */
} b16_case;

/* A case's host data: inputs in their tensors' layouts (qkv: one (B, T, 3C) array). */
typedef struct b16_data {
    int n_in;           /* tensors of q, k, v: 1 (qkv) or 3 */
    size_t n[3];        /* their elements */
    float *x[3];        /* the values an f32 input holds */
    float *w[3];        /* x rounded to the 16-bit type and widened: what a 16-bit one holds */
    uint16_t *words[3]; /* x's 16-bit words */
    float *dout, *mask, *lse;
    float *out;         /* the f32 forward's out on the widened inputs (out's layout) */
    float *out_w;       /* out rounded and widened (O16), else out */
    uint16_t *out_words;
} b16_data;

static size_t nq_of(const b16_case *c) { return att_nq(&c->s); }
static size_t n_all(const b16_data *d) { return d->n[0] + d->n[1] + d->n[2]; }

/* The values input i holds in the float32 runs: widened where the case makes it 16-bit. */
static const float *ref_vals(const b16_case *c, const b16_data *d, int i) {
    return c->is16 >> i & 1u ? d->w[i] : d->x[i];
}

/* The tensors q, k, v (or qkv) of a run, those in is16 16-bit; mask and key lengths. */
typedef struct b16_io {
    vka_tensor *in[3], *out, *lse, *mask, *key_lens;
} b16_io;

static vka_attention_desc desc_of(const b16_case *c, const b16_io *io) {
    const att_case *s = &c->s;
    vka_attention_desc d = {.B = s->B, .NH = s->NH, .Tq = s->Tq, .Tk = s->Tk, .HS = s->HS,
                            .causal = s->causal, .scale = s->scale, .out_btc = s->out_btc,
                            .mask = io->mask, .mask_per_batch = s->mask == 2,
                            .key_lens = io->key_lens, .out = io->out, .lse = io->lse};
    if (s->qkv) d.qkv = io->in[0];
    else d.q = io->in[0], d.k = io->in[1], d.v = io->in[2];
    return d;
}

static b16_io io_make(vka_context *ctx, const b16_case *c, const b16_data *d, unsigned is16) {
    b16_io io = {0};
    for (int i = 0; i < d->n_in; i++)
        io.in[i] = is16 >> i & 1u ? tu_tensor_typed(ctx, c->type, d->n[i], d->words[i])
                                  : tu_tensor(ctx, d->n[i], ref_vals(c, d, i));
    if (c->s.mask) io.mask = tu_tensor(ctx, att_nmask(&c->s), d->mask);
    if (c->s.key_lens) io.key_lens = tu_tensor(ctx, (size_t)c->s.B, c->s.key_lens);
    return io;
}

static void io_free(b16_io *io) {
    vka_tensor *all[] = {io->in[0], io->in[1], io->in[2], io->out, io->lse, io->mask,
                         io->key_lens};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

/* d->out and d->lse: the f32 forward on the widened inputs. */
static void run_forward(vka_context *ctx, const b16_case *c, b16_data *d) {
    size_t nq = nq_of(c), nl = att_nlse(&c->s);
    b16_io io = io_make(ctx, c, d, 0);
    io.out = tu_tensor_nan(ctx, nq);
    io.lse = tu_tensor_nan(ctx, nl);
    vka_attention_desc ad = desc_of(c, &io);
    tu_begin(ctx);
    if (vka_attention_forward(ctx, &ad) != VKA_SUCCESS)
        fail_msg("attention_forward: %s", vka_last_error(ctx));
    tu_run(ctx);
    d->out = tu_read(io.out, nq);
    d->lse = tu_read(io.lse, nl);
    io_free(&io);
}

/* The backward on ctx with the inputs in is16 16-bit (the others as the f32 runs hold them):
 * its gradients, dq | dk | dv (or dqkv) as the tensors hold them. */
static float *run_backward(vka_context *ctx, const b16_case *c, const b16_data *d,
                           unsigned is16) {
    size_t nq = nq_of(c), nl = att_nlse(&c->s), n = n_all(d);
    b16_io io = io_make(ctx, c, d, is16);
    io.out = is16 & O16 ? tu_tensor_typed(ctx, c->type, nq, d->out_words)
                        : tu_tensor(ctx, nq, d->out_w);
    io.lse = tu_tensor(ctx, nl, d->lse);
    vka_tensor *dout = tu_tensor(ctx, nq, d->dout), *g[3] = {0};
    for (int i = 0; i < d->n_in; i++) g[i] = tu_tensor_nan(ctx, d->n[i]);
    vka_attention_desc ad = desc_of(c, &io);
    vka_attention_grads gr = {.dout = dout};
    if (c->s.qkv) gr.dqkv = g[0];
    else gr.dq = g[0], gr.dk = g[1], gr.dv = g[2];
    tu_begin(ctx);
    if (vka_attention_backward(ctx, &ad, &gr) != VKA_SUCCESS)
        fail_msg("attention_backward: %s", vka_last_error(ctx));
    tu_run(ctx);
    float *res = malloc(n * sizeof *res);
    for (int i = 0, at = 0; i < d->n_in; at += (int)d->n[i], i++) {
        float *r = tu_read(g[i], d->n[i]);
        memcpy(res + at, r, d->n[i] * sizeof *r);
        free(r);
        vka_tensor_destroy(g[i]);
    }
    vka_tensor_destroy(dout);
    io_free(&io);
    return res;
}

static b16_data data_make(vka_context *ctx, const b16_case *c, uint64_t seed) {
    const att_case *s = &c->s;
    size_t nq = att_nq(s), nk = att_nk(s);
    b16_data d = {.n_in = s->qkv ? 1 : 3, .n = {s->qkv ? 3 * nq : nq, s->qkv ? 0 : nk,
                                                s->qkv ? 0 : nk}};
    for (int i = 0; i < d.n_in; i++) {
        d.x[i] = malloc(d.n[i] * sizeof *d.x[i]);
        tu_random(d.x[i], d.n[i], seed + (uint64_t)i, 1.5f);
        d.w[i] = tu_rounded16(d.x[i], d.n[i], c->type, &d.words[i]);
    }
    d.dout = malloc(nq * sizeof *d.dout);
    tu_random(d.dout, nq, seed + 3, 1.0f);
    d.mask = att_make_mask(s, seed + 4);
    if (d.mask)
        for (size_t i = 0; i < att_nmask(s); i++) d.mask[i] += c->mask_shift;
    run_forward(ctx, c, &d);
    if (c->is16 & O16) d.out_w = tu_rounded16(d.out, nq, c->type, &d.out_words);
    else d.out_w = d.out;
    return d;
}

static void data_free(b16_data *d) {
    for (int i = 0; i < 3; i++) free(d->x[i]), free(d->w[i]), free(d->words[i]);
    if (d->out_w != d->out) free(d->out_w);
    free(d->out);
    free(d->out_words);
    free(d->dout);
    free(d->mask);
    free(d->lse);
}

/* A (B, NH, T, HS)-packed copy of x as the layout of a view holds it: part `part` of a packed
 * qkv's (B, T, 3C) or a (B, T, C) out, or x itself. */
static double *packed_d(const att_case *s, int T, const float *x, int mul, int part, bool wide) {
    size_t n = (size_t)s->B * s->NH * T * s->HS;
    float *p = malloc(n * sizeof *p);
    if (wide) from_wide(s, T, x, p, mul, part);
    else memcpy(p, x, n * sizeof *p);
    double *r = tu_to_double(p, n);
    free(p);
    return r;
}

/* (b): the f32 run's gradients g (the tensors' layouts) against the double reference. */
static void check_sane(const char *what, const b16_case *c, const b16_data *d, const float *g) {
    const att_case *s = &c->s;
    size_t nq = att_nq(s), nk = att_nk(s), n_in = nq + 2 * nk;
    double *x = malloc(n_in * sizeof *x), *want = malloc(n_in * sizeof *want);
    float *got = malloc(n_in * sizeof *got);
    for (int i = 0; i < 3; i++) { /* q, k, v packed, as the reference takes them */
        int T = i ? s->Tk : s->Tq;
        size_t at = i ? nq + (size_t)(i - 1) * nk : 0, m = i ? nk : nq;
        const float *src = s->qkv ? ref_vals(c, d, 0) : ref_vals(c, d, i);
        double *p = packed_d(s, T, src, 3, i, s->qkv);
        memcpy(x + at, p, m * sizeof *p);
        free(p);
        float *gp = malloc(m * sizeof *gp);
        if (s->qkv) from_wide(s, T, g, gp, 3, i);
        else memcpy(gp, g + at, m * sizeof *gp);
        memcpy(got + at, gp, m * sizeof *gp);
        free(gp);
    }
    double *out = packed_d(s, s->Tq, d->out_w, 1, 0, s->out_btc);
    double *dout_d = packed_d(s, s->Tq, d->dout, 1, 0, s->out_btc);
    float *dout = malloc(nq * sizeof *dout);
    for (size_t i = 0; i < nq; i++) dout[i] = (float)dout_d[i];
    ref_backward(s, d->mask, x, dout, out, want);
    char name[320];
    snprintf(name, sizeof name, "%s: the f32 run's dq vs the double reference", what);
    tu_assert_close_d(name, got, want, nq, 5e-5, 2e-4);
    snprintf(name, sizeof name, "%s: the f32 run's dk, dv vs the double reference", what);
    tu_assert_close_d(name, got + nq, want + nq, 2 * nk, 5e-5, 2e-4);
    free(x);
    free(want);
    free(got);
    free(out);
    free(dout_d);
    free(dout);
}

static void case_on(vka_context *ctx, b16_case c, uint64_t seed) {
    const att_case *s = &c.s;
    b16_data d = data_make(ctx, &c, seed);
    char what[240];
    snprintf(what, sizeof what,
             "%s %s%s%s%s B=%d NH=%d Tq=%d Tk=%d HS=%d causal=%d%s%s%s%s%s (%s)",
             vka_dtype_string(c.type), c.is16 & Q16 ? (s->qkv ? "qkv " : "q ") : "",
             c.is16 & K16 ? "k " : "", c.is16 & V16 ? "v " : "", c.is16 & O16 ? "out" : "",
             s->B, s->NH, s->Tq, s->Tk, s->HS, (int)s->causal, s->qkv ? " qkv" : "",
             s->out_btc ? " out_btc" : "", s->mask ? " mask" : "",
             s->key_lens ? " key_lens" : "", c.mask_shift != 0.0f ? " big lse" : "",
             tu_is_cpu(ctx) ? vka_context_cpu_kernels(ctx) : vka_context_vulkan_kernels(ctx));
    float *want = run_backward(ctx, &c, &d, 0);
    float *got = run_backward(ctx, &c, &d, c.is16);
    static const char *const names[2][3] = {{"dq", "dk", "dv"}, {"dqkv", "", ""}};
    for (int i = 0, at = 0; i < d.n_in; at += (int)d.n[i], i++)
        for (size_t e = 0; e < d.n[i]; e++) {
            uint32_t a = tu_f32_bits(got[at + e]), b = tu_f32_bits(want[at + e]);
            if (a != b && !(isnan(got[at + e]) && isnan(want[at + e])))
                fail_msg("%s: %s[%zu] = %.9g (0x%08X), the f32 op's on the widened inputs "
                         "%.9g (0x%08X)",
                         what, names[s->qkv][i], e, got[at + e], a, want[at + e], b);
        }
    check_sane(what, &c, &d, want);
    free(want);
    free(got);
    data_free(&d);
}

/* --- the cases ------------------------------------------------------------------------------ */

static const int lens_7_20[2] = {7, 20};
static const int lens_3[3] = {0, 41, 70};
static const int lens_split[5] = {45, 0, 17, 44, 45};

#define ALL16 (Q16 | K16 | V16 | O16)

static const b16_case SHAPES[] = {
    /* everything 16-bit, odd HS and NH: rows sharing words */
    {.is16 = ALL16, .s = {.B = 3, .NH = 3, .Tq = 5, .Tk = 9, .HS = 7,
                          .causal = VKA_CAUSAL_BOTTOM_RIGHT}},
    /* T = 1, HS = 1: each pass recomputes delta from out */
    {.is16 = ALL16, .s = {.B = 1, .NH = 1, .Tq = 1, .Tk = 1, .HS = 1}},
    /* a 16-bit out alone, f32 q, k, v; and 16-bit q alone, f32 out */
    {.is16 = O16, .s = {.B = 2, .NH = 3, .Tq = 37, .Tk = 37, .HS = 4,
                        .causal = VKA_CAUSAL_TOP_LEFT}},
    {.is16 = Q16, .s = {.B = 1, .NH = 2, .Tq = 40, .Tk = 17, .HS = 4, .mask = 1}},
    /* k and v 16-bit (a KV cache's), NH 7, key lengths */
    {.is16 = K16 | V16, .s = {.B = 3, .NH = 7, .Tq = 3, .Tk = 70, .HS = 8,
                              .causal = VKA_CAUSAL_BOTTOM_RIGHT, .key_lens = lens_3}},
    /* packed 16-bit qkv (even C) with a (B, T, C) out, 16-bit and f32 */
    {.is16 = Q16 | O16, .s = {.B = 2, .NH = 2, .Tq = 33, .Tk = 33, .HS = 3,
                              .causal = VKA_CAUSAL_TOP_LEFT, .qkv = true, .out_btc = true}},
    {.is16 = Q16, .s = {.B = 2, .NH = 4, .Tq = 20, .Tk = 20, .HS = 8, .out_btc = true,
                        .causal = VKA_CAUSAL_TOP_LEFT, .qkv = true, .key_lens = lens_7_20}},
    /* rows past a workgroup and a key tile, a mask per batch with a fully masked row and masked
     * key tiles */
    {.is16 = ALL16, .s = {.B = 2, .NH = 1, .Tq = 130, .Tk = 130, .HS = 4,
                          .causal = VKA_CAUSAL_TOP_LEFT, .mask = 2, .mask_style = 1}},
    /* |lse| >= 256: the correction (delta pass, at_corr) recomputes scores from q and k */
    {.is16 = ALL16, .mask_shift = 300.0f,
     .s = {.B = 2, .NH = 1, .Tq = 9, .Tk = 21, .HS = 7, .mask = 1}},
    /* wide heads */
    {.is16 = K16 | V16 | O16, .s = {.B = 1, .NH = 2, .Tq = 3, .Tk = 50, .HS = 64,
                                    .causal = VKA_CAUSAL_BOTTOM_RIGHT, .out_btc = true}},
    {.is16 = ALL16, .s = {.B = 1, .NH = 3, .Tq = 65, .Tk = 65, .HS = 24, .scale = 0.3f,
                          .causal = VKA_CAUSAL_TOP_LEFT}},
};

/* Which of SHAPES x {bf16, fp16} a sweep runs. */
typedef enum { ALL_CASES, VK_QUICK, VK_REST } b16_sweep;

/* On Vulkan each shape's and type's pipelines take seconds to build on lavapipe (three passes,
 * and the f32 ones of the reference run; most at HS 1 and at odd HS, least with vec4 rows):
 * the quick group has the narrow heads (HS <= 8) in bf16 and the first in fp16 too (the type
 * changes only the widening), the exhaustive one the rest. */
static bool in_sweep(b16_sweep w, size_t shape, vka_dtype type) {
    bool quick = SHAPES[shape].s.HS <= 8 && (type == VKA_BF16 || shape == 0);
    return w == ALL_CASES || (w == VK_QUICK) == quick;
}

static void sweep(vka_context *ctx, uint64_t seed, b16_sweep w) {
    const vka_dtype types[] = {VKA_BF16, VKA_F16};
    for (size_t t = 0; t < TU_LEN(types); t++)
        for (size_t i = 0; i < TU_LEN(SHAPES); i++) {
            if (!in_sweep(w, i, types[t])) continue;
            b16_case c = SHAPES[i];
            c.type = types[t];
            case_on(ctx, c, seed + 10 * i);
        }
}

static void test_attention16_backward_cpu(void **state) {
    (void)state;
    vka_context *ctx[] = {tu_cpu_threads(2), tu_cpu_threads(3),
                          tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2)};
    for (size_t i = 0; i < TU_LEN(ctx); i++) {
        sweep(ctx[i], 100, ALL_CASES);
        tu_done(ctx[i]);
    }
}

static void vulkan_cases(vka_context *ctx) { sweep(ctx, 200, VK_QUICK); }
static void vulkan_rest_cases(vka_context *ctx) { sweep(ctx, 200, VK_REST); }

/* Past 4 KiB a view: batches in several dispatches, the 16-bit views of odd batches (odd
 * per-batch element counts) starting at a word's high half: one batch a dispatch (dk of 651
 * floats), and three (dk of 315). (HS 7 and every input 16-bit: SHAPES[0]'s pipelines.) */
static void split_cases(vka_kernels kernels) {
    vka_context *ctx = tu_gpu_limited(kernels, 4096);
    const b16_case cases[] = {
        {.type = VKA_BF16, .is16 = ALL16,
         .s = {.B = 5, .NH = 3, .Tq = 11, .Tk = 31, .HS = 7, .causal = VKA_CAUSAL_BOTTOM_RIGHT}},
        {.type = VKA_F16, .is16 = ALL16,
         .s = {.B = 5, .NH = 1, .Tq = 3, .Tk = 45, .HS = 7, .key_lens = lens_split}},
    };
    for (size_t i = 0; i < TU_LEN(cases); i++) case_on(ctx, cases[i], 300 + i);
    tu_done(ctx);
}
static void test_attention16_backward_split_gpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_GPU);
}
static void test_attention16_backward_split_cpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_CPU);
}

/* (c) the refusals, each naming the op and the tensor. */
static void expect_refused(vka_context *ctx, const vka_attention_desc *d,
                           const vka_attention_grads *g, const char *text) {
    vka_result r = vka_attention_backward(ctx, d, g);
    if (r != VKA_ERROR_INVALID_ARGUMENT)
        fail_msg("\"%s\": attention_backward gave %s (%s)", text, vka_result_string(r),
                 vka_last_error(ctx));
    const char *msg = vka_last_error(ctx);
    if (!strstr(msg, "attention_backward") || !strstr(msg, text))
        fail_msg("the message \"%s\" lacks \"%s\" or the op's name", msg, text);
}

static void refusals_on(vka_context *ctx) {
    vka_tensor *b[3], *h[3], *f[4];
    for (int i = 0; i < 3; i++) {
        b[i] = tu_tensor_typed(ctx, VKA_BF16, 64, NULL);
        h[i] = tu_tensor_typed(ctx, VKA_F16, 64, NULL);
    }
    for (int i = 0; i < 4; i++) f[i] = tu_tensor(ctx, 64, NULL);
    vka_tensor *out = tu_tensor(ctx, 64, NULL), *lse = tu_tensor(ctx, 64, NULL);
    vka_tensor *dout = tu_tensor(ctx, 64, NULL), *qkv = tu_tensor_typed(ctx, VKA_BF16, 192, NULL);
    vka_tensor *dqkv16 = tu_tensor_typed(ctx, VKA_BF16, 192, NULL);
    vka_tensor *dqkv = tu_tensor(ctx, 192, NULL);
    vka_attention_desc d = {.q = b[0], .k = h[1], .v = b[2], .out = out, .lse = lse, .B = 1,
                            .NH = 1, .Tq = 4, .Tk = 4, .HS = 4};
    vka_attention_grads g = {.dout = dout, .dq = f[0], .dk = f[1], .dv = f[2]};
    tu_begin(ctx);
    expect_refused(ctx, &d, &g, "k holds f16 elements but q bf16");
    d.k = b[1], d.out = h[0];
    expect_refused(ctx, &d, &g, "out holds f16 elements but v bf16");
    d.out = out, d.lse = h[2];
    expect_refused(ctx, &d, &g, "lse holds f16 elements");
    d.lse = lse, g.dout = h[2];
    expect_refused(ctx, &d, &g, "dout holds f16 elements");
    g.dout = dout, g.dq = h[0];
    expect_refused(ctx, &d, &g, "dq holds f16 elements");
    /* a bf16 qkv (C = 4): its gradients are an f32 dqkv */
    vka_attention_desc p = {.qkv = qkv, .out = out, .lse = lse, .B = 1, .NH = 1, .Tq = 4,
                            .Tk = 4, .HS = 4};
    vka_attention_grads pg = {.dout = dout, .dqkv = dqkv16};
    expect_refused(ctx, &p, &pg, "dqkv holds bf16 elements");
    p.HS = 3, p.Tq = p.Tk = 5, pg.dqkv = dqkv;
    expect_refused(ctx, &p, &pg, "needs an even C");
    vka_graph *gh = NULL;
    vka_graph_end(ctx, &gh);
    vka_graph_destroy(gh);
    vka_tensor *all[] = {b[0], b[1], b[2], h[0], h[1], h[2], f[0], f[1], f[2], f[3],
                         out, lse, dout, qkv, dqkv16, dqkv};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}
static void test_attention16_backward_refusals(void **state) {
    (void)state;
    vka_context *cpu = tu_cpu();
    refusals_on(cpu);
    tu_done(cpu);
}

TU_VULKAN_TESTS(test_attention16_backward_vulkan, vulkan_cases)
TU_VULKAN_TESTS(test_attention16_backward_vulkan_rest, vulkan_rest_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_attention16_backward_cpu),
        cmocka_unit_test(test_attention16_backward_refusals),
        TU_VULKAN_TEST_ENTRIES(test_attention16_backward_vulkan),
        cmocka_unit_test(test_attention16_backward_split_gpu_kernels),
        cmocka_unit_test(test_attention16_backward_split_cpu_kernels),
    };
    const struct CMUnitTest exhaustive[] = {
        TU_VULKAN_TEST_ENTRIES(test_attention16_backward_vulkan_rest),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, NULL, NULL);
}
