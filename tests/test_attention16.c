/* vka_attention_forward with 16-bit q, k, v and/or out (bf16 or fp16; src/backend.h's 16-bit
 * rule for the forward), on the CPU backend (fast kernels, 2 and 3 threads; reference kernels)
 * and on Vulkan (GPU and CPU-type variants, the split-key decode path and the row-parallel one):
 *  (a) bit-exact: out and lse are the f32 op's bits on the widened inputs, on the same context;
 *      a 16-bit out is that f32 out rounded by vka_convert;
 *  (b) out is one element longer than the op writes, starting as sentinels: that element (the
 *      high half of the last word where the count is odd) is left alone; with odd HS rows share
 *      words and every element is compared;
 *  (c) the refusals: a bf16 / fp16 mix, a 16-bit qkv of odd C (the backward's:
 *      test_attention16_backward.c).
 * Shapes: Tq = 1 (decoding: a KV cache's k, v in 16 bits, q f32), odd HS and NH (views starting
 * mid-word), packed 16-bit qkv, heads side by side (out_btc), masks, key lengths, causal kinds,
 * and with a lowered binding limit batches in several dispatches. */
#include "op_util.h"

enum { Q16 = 1, K16 = 2, V16 = 4, O16 = 8 };

typedef struct a16_case {
    vka_dtype type;  /* VKA_BF16 or VKA_F16 */
    unsigned is16;   /* Q16 | K16 | V16 | O16; with qkv, Q16 means the packed qkv */
    int B, NH, Tq, Tk, HS;
    vka_causal causal;
    bool qkv, out_btc, mask, key_lens;
} a16_case;

#define SENTINEL16 0xABCDu
#define SENTINEL32 0x7FC0ABCDu

static size_t nq_of(const a16_case *c) { return (size_t)c->B * c->NH * c->Tq * c->HS; }
static size_t nk_of(const a16_case *c) { return (size_t)c->B * c->NH * c->Tk * c->HS; }

typedef struct a16_out {
    uint32_t *out; /* out's elements (16-bit words in the low bits, or f32 bits), n + 1 */
    float *lse;
} a16_out;

/* One forward on ctx: inputs q, k, v (or qkv) of the given values, those flagged in `is16`
 * as `type` tensors of their words; out of type or f32 (+1 sentinel element). */
static a16_out run(vka_context *ctx, const a16_case *c, unsigned is16, const float *vals[3],
                   uint16_t *const words[3], const float *mask, const int *lens) {
    size_t nq = nq_of(c), nk = nk_of(c);
    size_t n_in[3] = {nq, nk, nk};
    if (c->qkv) n_in[0] = 3 * nq;
    vka_tensor *in[3] = {0};
    for (int i = 0; i < (c->qkv ? 1 : 3); i++) {
        bool h = is16 >> i & 1u;
        in[i] = h ? tu_tensor_typed(ctx, c->type, n_in[i], words[i])
                  : tu_tensor(ctx, n_in[i], vals[i]);
    }
    bool o16 = is16 & O16;
    vka_tensor *out = tu_tensor_typed(ctx, o16 ? c->type : VKA_F32, nq + 1, NULL);
    uint32_t *fill = malloc((nq + 1) * sizeof *fill);
    uint16_t *fill16 = malloc((nq + 1) * sizeof *fill16);
    for (size_t i = 0; i <= nq; i++) fill[i] = SENTINEL32, fill16[i] = SENTINEL16;
    assert_int_equal(vka_tensor_write(out, 0, o16 ? (void *)fill16 : (void *)fill, nq + 1),
                     VKA_SUCCESS);
    vka_tensor *lse = tu_tensor_nan(ctx, (size_t)c->B * c->NH * c->Tq);
    vka_tensor *mk = c->mask ? tu_tensor(ctx, (size_t)c->Tq * c->Tk, mask) : NULL;
    vka_tensor *kl = c->key_lens ? tu_tensor(ctx, (size_t)c->B, lens) : NULL;
    vka_attention_desc d = {.B = c->B, .NH = c->NH, .Tq = c->Tq, .Tk = c->Tk, .HS = c->HS,
                            .causal = c->causal, .out_btc = c->out_btc, .out = out, .lse = lse,
                            .mask = mk, .key_lens = kl};
    if (c->qkv) d.qkv = in[0];
    else d.q = in[0], d.k = in[1], d.v = in[2];
    tu_begin(ctx);
    vka_result r = vka_attention_forward(ctx, &d);
    if (r != VKA_SUCCESS) fail_msg("attention_forward: %s", vka_last_error(ctx));
    tu_run(ctx);
    a16_out res = {malloc((nq + 1) * sizeof *res.out), tu_read(lse, (size_t)c->B * c->NH * c->Tq)};
    if (o16) {
        assert_int_equal(vka_tensor_read(out, 0, fill16, nq + 1), VKA_SUCCESS);
        for (size_t i = 0; i <= nq; i++) res.out[i] = fill16[i];
    } else {
        assert_int_equal(vka_tensor_read(out, 0, res.out, nq + 1), VKA_SUCCESS);
    }
    free(fill);
    free(fill16);
    vka_tensor *all[] = {in[0], in[1], in[2], out, lse, mk, kl};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return res;
}

/* Equal bits, or both NaN. */
static bool same_bits(uint32_t a, uint32_t b, bool is16, vka_dtype t) {
    if (a == b) return true;
    if (!is16) return isnan(tu_bits_f32(a)) && isnan(tu_bits_f32(b));
    uint32_t inf = t == VKA_BF16 ? 0x7F80u : 0x7C00u;
    return (a & 0x7FFFu) > inf && (b & 0x7FFFu) > inf;
}

static void case_on(vka_context *ctx, a16_case c, uint64_t seed) {
    size_t nq = nq_of(&c), nk = nk_of(&c);
    size_t n[3] = {c.qkv ? 3 * nq : nq, nk, nk};
    float *x[3] = {0}, *w[3] = {0};
    uint16_t *words[3] = {0};
    for (int i = 0; i < (c.qkv ? 1 : 3); i++) {
        x[i] = malloc(n[i] * sizeof *x[i]);
        tu_random(x[i], n[i], seed + (uint64_t)i, 2.0f);
        w[i] = tu_rounded16(x[i], n[i], c.type, &words[i]);
    }
    float *mask = NULL;
    if (c.mask) {
        mask = malloc((size_t)c.Tq * c.Tk * sizeof *mask);
        tu_random(mask, (size_t)c.Tq * c.Tk, seed + 5, 1.0f);
        for (int t = 0; t < c.Tq; t++) mask[(size_t)t * c.Tk + (size_t)t % c.Tk] = -INFINITY;
    }
    int lens[8];
    for (int b = 0; b < c.B && b < 8; b++) lens[b] = (int)((b * 7 + 3) % (c.Tk + 1));
    if (c.B > 1) lens[c.B - 1] = c.Tk;
    /* the reference: the f32 op on the widened values of the 16-bit inputs, f32 out */
    const float *ref_in[3], *test_in[3];
    for (int i = 0; i < 3; i++) {
        ref_in[i] = (c.is16 >> i & 1u) ? w[i] : x[i];
        test_in[i] = x[i];
    }
    a16_out ref = run(ctx, &c, 0, ref_in, words, mask, lens);
    a16_out got = run(ctx, &c, c.is16, test_in, words, mask, lens);
    bool o16 = c.is16 & O16;
    uint32_t *want = ref.out;
    uint16_t *want16 = NULL;
    if (o16) {
        want16 = malloc(nq * sizeof *want16);
        float *f = malloc(nq * sizeof *f);
        for (size_t i = 0; i < nq; i++) f[i] = tu_bits_f32(ref.out[i]);
        assert_int_equal(vka_convert(c.type, want16, VKA_F32, f, nq), VKA_SUCCESS);
        free(f);
    }
    char what[200];
    snprintf(what, sizeof what, "%s %s%s%s%s B=%d NH=%d Tq=%d Tk=%d HS=%d causal=%d%s%s%s%s",
             vka_dtype_string(c.type), c.is16 & Q16 ? (c.qkv ? "qkv " : "q ") : "",
             c.is16 & K16 ? "k " : "", c.is16 & V16 ? "v " : "", o16 ? "out" : "", c.B, c.NH,
             c.Tq, c.Tk, c.HS, (int)c.causal, c.qkv ? " qkv" : "", c.out_btc ? " out_btc" : "",
             c.mask ? " mask" : "", c.key_lens ? " key_lens" : "");
    for (size_t i = 0; i < nq; i++) {
        uint32_t wv = o16 ? want16[i] : want[i];
        if (!same_bits(got.out[i], wv, o16, c.type))
            fail_msg("%s (%s): out[%zu] = 0x%X, the f32 op's %s 0x%X", what,
                     tu_is_cpu(ctx) ? vka_context_cpu_kernels(ctx) : vka_context_vulkan_kernels(ctx),
                     i, got.out[i], o16 ? "rounded" : "out", wv);
    }
    size_t nl = (size_t)c.B * c.NH * c.Tq;
    for (size_t i = 0; i < nl; i++)
        if (!same_bits(tu_f32_bits(got.lse[i]), tu_f32_bits(ref.lse[i]), false, c.type))
            fail_msg("%s: lse[%zu] = %.9g, the f32 op's %.9g", what, i, got.lse[i], ref.lse[i]);
    uint32_t sentinel = o16 ? SENTINEL16 : SENTINEL32;
    if (got.out[nq] != sentinel)
        fail_msg("%s: out[%zu] past the op's elements became 0x%X", what, nq, got.out[nq]);
    free(want16);
    free(ref.out);
    free(ref.lse);
    free(got.out);
    free(got.lse);
    for (int i = 0; i < 3; i++) free(x[i]), free(w[i]), free(words[i]);
    free(mask);
}

static const a16_case SHAPES[] = {
    /* decoding: q f32 from the new token, k and v a 16-bit cache (split-key path on Vulkan) */
    {.is16 = K16 | V16, .B = 1, .NH = 3, .Tq = 1, .Tk = 70, .HS = 8,
     .causal = VKA_CAUSAL_BOTTOM_RIGHT, .mask = true},
    {.is16 = K16 | V16 | O16, .B = 2, .NH = 1, .Tq = 1, .Tk = 333, .HS = 7, .key_lens = true},
    /* everything 16-bit, odd HS and NH: views and rows starting mid-word */
    {.is16 = Q16 | K16 | V16 | O16, .B = 3, .NH = 3, .Tq = 5, .Tk = 9, .HS = 7,
     .causal = VKA_CAUSAL_BOTTOM_RIGHT},
    {.is16 = Q16 | K16 | V16 | O16, .B = 1, .NH = 1, .Tq = 1, .Tk = 1, .HS = 1},
    {.is16 = O16, .B = 2, .NH = 3, .Tq = 37, .Tk = 37, .HS = 5, .causal = VKA_CAUSAL_TOP_LEFT},
    {.is16 = Q16, .B = 1, .NH = 2, .Tq = 40, .Tk = 17, .HS = 4, .mask = true},
    /* packed 16-bit qkv (even C), heads side by side */
    {.is16 = Q16 | O16, .qkv = true, .out_btc = true, .B = 2, .NH = 2, .Tq = 33, .Tk = 33,
     .HS = 3, .causal = VKA_CAUSAL_TOP_LEFT},
    {.is16 = Q16, .qkv = true, .B = 2, .NH = 4, .Tq = 20, .Tk = 20, .HS = 8,
     .causal = VKA_CAUSAL_TOP_LEFT, .key_lens = true},
    {.is16 = K16 | V16 | O16, .B = 1, .NH = 2, .Tq = 3, .Tk = 50, .HS = 64, .out_btc = true,
     .causal = VKA_CAUSAL_BOTTOM_RIGHT},
};

/* Every shape in both types; on Vulkan (where each new shape and type builds pipelines, seconds
 * each on lavapipe) fp16 on the first four shapes and no HS 64 (HS 8 takes the same vec4 paths). */
static void sweep(vka_context *ctx, uint64_t seed) {
    const vka_dtype types[] = {VKA_BF16, VKA_F16};
    bool vk = !tu_is_cpu(ctx);
    for (size_t t = 0; t < TU_LEN(types); t++)
        for (size_t s = 0; s < TU_LEN(SHAPES); s++) {
            a16_case c = SHAPES[s];
            if (vk && (c.HS > 8 || (types[t] == VKA_F16 && s >= 4))) continue;
            c.type = types[t];
            case_on(ctx, c, seed + 10 * s);
        }
}

static void test_attention16_cpu(void **state) {
    (void)state;
    vka_context *ctx[] = {tu_cpu_threads(2), tu_cpu_threads(3),
                          tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2)};
    for (size_t i = 0; i < TU_LEN(ctx); i++) {
        sweep(ctx[i], 100);
        tu_done(ctx[i]);
    }
}

static void vulkan_cases(vka_context *ctx) { sweep(ctx, 200); }

/* Past 4 KiB a view: the batches of q, k, v in several dispatches, starting mid-word. */
static void split_cases(vka_kernels kernels) {
    vka_context *ctx = tu_gpu_limited(kernels, 4096);
    const a16_case cases[] = {
        {.type = VKA_BF16, .is16 = Q16 | K16 | V16 | O16, .B = 5, .NH = 3, .Tq = 11, .Tk = 30,
         .HS = 7, .causal = VKA_CAUSAL_BOTTOM_RIGHT},
        {.type = VKA_F16, .is16 = K16 | V16, .B = 4, .NH = 3, .Tq = 1, .Tk = 45, .HS = 5,
         .key_lens = true},
    };
    for (size_t i = 0; i < TU_LEN(cases); i++) case_on(ctx, cases[i], 300 + i);
    tu_done(ctx);
}
static void test_attention16_split_gpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_GPU);
}
static void test_attention16_split_cpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_CPU);
}

/* (c) the refusals, with their messages. */
static void refusals_on(vka_context *ctx) {
    vka_tensor *qb = tu_tensor_typed(ctx, VKA_BF16, 64, NULL);
    vka_tensor *kf = tu_tensor_typed(ctx, VKA_F16, 64, NULL);
    vka_tensor *vb = tu_tensor_typed(ctx, VKA_BF16, 64, NULL);
    vka_tensor *out = tu_tensor(ctx, 64, NULL), *lse = tu_tensor(ctx, 64, NULL);
    vka_attention_desc d = {.q = qb, .k = kf, .v = vb, .out = out, .lse = lse, .B = 1, .NH = 1,
                            .Tq = 4, .Tk = 4, .HS = 4};
    tu_begin(ctx);
    assert_int_equal(vka_attention_forward(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    if (!strstr(vka_last_error(ctx), "k holds f16 elements but q bf16"))
        fail_msg("mixed types: %s", vka_last_error(ctx));
    vka_attention_desc p = {.qkv = qb, .out = out, .B = 1, .NH = 1, .Tq = 3, .Tk = 3, .HS = 3};
    assert_int_equal(vka_attention_forward(ctx, &p), VKA_ERROR_INVALID_ARGUMENT);
    if (!strstr(vka_last_error(ctx), "needs an even C"))
        fail_msg("odd C: %s", vka_last_error(ctx));
    vka_graph *gh = NULL;
    vka_graph_end(ctx, &gh);
    vka_graph_destroy(gh);
    vka_tensor *all[] = {qb, kf, vb, out, lse};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}
static void test_attention16_refusals(void **state) {
    (void)state;
    vka_context *cpu = tu_cpu();
    refusals_on(cpu);
    tu_done(cpu);
}

TU_VULKAN_TESTS(test_attention16_vulkan, vulkan_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention16_cpu),
        cmocka_unit_test(test_attention16_refusals),
        TU_VULKAN_TEST_ENTRIES(test_attention16_vulkan),
        cmocka_unit_test(test_attention16_split_gpu_kernels),
        cmocka_unit_test(test_attention16_split_cpu_kernels),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
