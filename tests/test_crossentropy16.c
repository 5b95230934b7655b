/* vka_crossentropy_forward / vka_crossentropy_backward with 16-bit logits and dlogits (bf16,
 * fp16; src/backend.h's 16-bit rule): logits and dlogits each f32 or the call's one 16-bit type,
 * in place with one type. For each combination, on rows of odd and even Vp (a 16-bit row then
 * starts mid-word), V = 1, ignored targets, rows longer than a workgroup and GPT-2's vocabulary,
 * on the CPU backend (default kernels on 1 and 3 threads, reference kernels: the reference
 * conversions) and both Vulkan kernel variants, whole and in 4 KiB bindings (blocks of rows
 * starting mid-word):
 *  (a) losses bitwise the f32 op's on the widened logits, dlogits bitwise the f32 op's (f32) or
 *      its vka_copy rounding (16-bit), on the same context;
 *  (b) a 16-bit dlogits one element longer than N*Vp keeps that element;
 *  (c) against a float64 reference on the widened logits: losses within the f32 test's bound,
 *      a 16-bit dlogits within the format's unit roundoff u (bf16 2^-8, fp16 2^-11) plus the
 *      f32 bound, the padding columns written with zeros;
 *  (d) CPU backend and Vulkan agree within the f32 tolerance;
 *  (e) bad mixes are refused naming the op and the tensors. */
#define _POSIX_C_SOURCE 200809L /* setenv (tu_gpu_packed16) */
#include "op_util.h"

#include <stdint.h>

#define SENTINEL16 0xABCDu

typedef struct {
    int N, V, Vp;
    const int32_t *targets;
} ce16_shape;

/* Which tensors are 16-bit: bit 0 logits, bit 1 dlogits; IN_PLACE: the backward on logits. */
enum { L16 = 1, D16 = 2, IN_PLACE = 4 };

static double unit_roundoff(vka_dtype t) { return t == VKA_BF16 ? 0x1p-8 : 0x1p-11; }

/* logits (N*Vp) as 16-bit words of type t (random, scale), and their widened f32 values */
static void make_logits(const ce16_shape *s, vka_dtype t, uint64_t seed, float scale,
                        uint16_t *h, float *w) {
    size_t n = (size_t)s->N * s->Vp;
    tu_random(w, n, seed, scale);
    for (int i = 0; i < s->N; i++) /* NaN padding: a kernel reading it gives NaN */
        for (int j = s->V; j < s->Vp; j++) w[(size_t)i * s->Vp + j] = NAN;
    assert_int_equal(vka_convert(t, h, VKA_F32, w, n), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_F32, w, t, h, n), VKA_SUCCESS);
}

/* float64 losses and dlogits of the widened logits w */
static void reference(const ce16_shape *s, const float *w, double dloss, double *losses,
                      double *dl) {
    for (int i = 0; i < s->N; i++) {
        const float *l = w + (size_t)i * s->Vp;
        double *d = dl + (size_t)i * s->Vp;
        int t = s->targets[i];
        for (int j = 0; j < s->Vp; j++) d[j] = 0.0;
        if (t < 0) {
            losses[i] = 0.0;
            continue;
        }
        double max = -INFINITY, sum = 0.0;
        for (int j = 0; j < s->V; j++) max = l[j] > max ? l[j] : max;
        for (int j = 0; j < s->V; j++) sum += exp(l[j] - max);
        losses[i] = max + log(sum) - l[t];
        for (int j = 0; j < s->V; j++) d[j] = (exp(l[j] - max) / sum - (j == t)) * dloss;
    }
}

typedef struct {
    float *losses;  /* N */
    float *dl;      /* N*Vp: dlogits widened to f32 */
} ce16_result;

/* The case's op on ctx with mask's types, and the f32 op on the widened logits in the same
 * graph; checks (a) and (b). */
static ce16_result run_case(vka_context *ctx, const ce16_shape *s, vka_dtype t, unsigned mask,
                            const uint16_t *h, const float *w, float dloss) {
    size_t n = (size_t)s->N * s->Vp;
    const char *tn = vka_dtype_string(t);
    bool l16 = mask & L16, d16 = mask & D16, in_place = mask & IN_PLACE;
    uint16_t *hb = malloc((n + 1) * sizeof *hb);
    memcpy(hb, h, n * sizeof *hb);
    hb[n] = SENTINEL16;
    vka_tensor *lg = l16 ? tu_tensor_typed(ctx, t, n + 1, hb) : tu_tensor(ctx, n, w);
    vka_tensor *lg32 = tu_tensor(ctx, n, w), *tg = tu_tensor(ctx, (size_t)s->N, s->targets);
    vka_tensor *losses = tu_tensor_nan(ctx, (size_t)s->N), *losses32 = tu_tensor_nan(ctx, (size_t)s->N);
    for (size_t i = 0; i < n; i++) hb[i] = SENTINEL16;
    vka_tensor *dl = in_place ? lg : d16 ? tu_tensor_typed(ctx, t, n + 1, hb) : tu_tensor_nan(ctx, n);
    vka_tensor *dl32 = tu_tensor_nan(ctx, n);
    vka_tensor *ref16 = d16 ? tu_tensor_typed(ctx, t, n, NULL) : NULL;
    tu_begin(ctx);
    if (vka_crossentropy_forward(ctx, losses, lg, tg, s->N, s->V, s->Vp) != VKA_SUCCESS ||
        vka_crossentropy_backward(ctx, dl, lg, tg, dloss, s->N, s->V, s->Vp) != VKA_SUCCESS)
        fail_msg("%s mask %#x: %s", tn, mask, vka_last_error(ctx));
    assert_int_equal(vka_crossentropy_forward(ctx, losses32, lg32, tg, s->N, s->V, s->Vp),
                     VKA_SUCCESS);
    assert_int_equal(vka_crossentropy_backward(ctx, dl32, lg32, tg, dloss, s->N, s->V, s->Vp),
                     VKA_SUCCESS);
    if (d16) assert_int_equal(vka_copy(ctx, ref16, dl32, n), VKA_SUCCESS);
    tu_run(ctx);
    ce16_result r = {tu_read(losses, (size_t)s->N), malloc(n * sizeof(float))};
    float *want = tu_read(losses32, (size_t)s->N);
    for (int i = 0; i < s->N; i++)
        if (tu_f32_bits(r.losses[i]) != tu_f32_bits(want[i]))
            fail_msg("%s mask %#x N %d V %d Vp %d: loss %d %.9g, the f32 op's %.9g", tn, mask,
                     s->N, s->V, s->Vp, i, r.losses[i], want[i]);
    free(want);
    if (d16) {
        uint16_t *got = malloc((n + 1) * sizeof *got), *ref = malloc(n * sizeof *ref);
        assert_int_equal(vka_tensor_read(dl, 0, got, n + 1), VKA_SUCCESS);
        assert_int_equal(vka_tensor_read(ref16, 0, ref, n), VKA_SUCCESS);
        for (size_t i = 0; i < n; i++)
            if (got[i] != ref[i])
                fail_msg("%s mask %#x N %d V %d Vp %d: dlogits[%zu] 0x%04x, the f32 op rounded "
                         "0x%04x", tn, mask, s->N, s->V, s->Vp, i, got[i], ref[i]);
        if (got[n] != SENTINEL16)
            fail_msg("%s mask %#x: the element after dlogits changed to 0x%04x", tn, mask, got[n]);
        assert_int_equal(vka_convert(VKA_F32, r.dl, t, got, n), VKA_SUCCESS);
        free(got);
        free(ref);
    } else {
        float *got = tu_read(dl, n), *ref = tu_read(dl32, n);
        for (size_t i = 0; i < n; i++)
            if (tu_f32_bits(got[i]) != tu_f32_bits(ref[i]))
                fail_msg("%s mask %#x N %d V %d Vp %d: dlogits[%zu] %.9g, the f32 op's %.9g", tn,
                         mask, s->N, s->V, s->Vp, i, got[i], ref[i]);
        memcpy(r.dl, got, n * sizeof *got);
        free(got);
        free(ref);
    }
    free(hb);
    vka_tensor *all[] = {lg, lg32, tg, losses, losses32, dl32, ref16};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    if (!in_place) vka_tensor_destroy(dl);
    return r;
}

static const unsigned masks[] = {L16, D16, L16 | D16, L16 | D16 | IN_PLACE};

/* Every combination of one shape and type on ctx: (a)-(c), and (d) against the CPU backend. */
static void shape_case(vka_context *ctx, ce16_shape s, float scale, uint64_t seed) {
    size_t n = (size_t)s.N * s.Vp;
    float dloss = 1.0f / (float)s.N;
    uint16_t *h = malloc(n * sizeof *h);
    float *w = malloc(n * sizeof *w);
    double *rl = malloc((size_t)s.N * sizeof *rl), *rd = malloc(n * sizeof *rd);
    vka_context *cpu = tu_is_cpu(ctx) ? NULL : tu_cpu();
    for (vka_dtype t = VKA_BF16; t <= VKA_F16; t++) {
        make_logits(&s, t, seed + t, scale, h, w);
        reference(&s, w, dloss, rl, rd);
        for (size_t m = 0; m < TU_LEN(masks); m++) {
            ce16_result r = run_case(ctx, &s, t, masks[m], h, w, dloss);
            tu_assert_close_d("crossentropy16 losses vs float64", r.losses, rl, (size_t)s.N,
                              1e-5, 1e-5);
            /* a 16-bit dlogits: relative u, and below fp16's normal range half its spacing */
            double u = masks[m] & D16 ? unit_roundoff(t) : 0.0;
            double sub = (masks[m] & D16) && t == VKA_F16 ? 0x1p-25 : 0.0;
            for (size_t i = 0; i < n; i++) {
                double bound = (u + 1e-5) * fabs(rd[i]) + 1e-7 * dloss + sub;
                if (!(fabs(r.dl[i] - rd[i]) <= bound))
                    fail_msg("%s mask %#x N %d V %d Vp %d: dlogits[%zu] %.9g, float64 %.9g",
                             vka_dtype_string(t), masks[m], s.N, s.V, s.Vp, i, r.dl[i], rd[i]);
            }
            if (cpu) {
                ce16_result c = run_case(cpu, &s, t, masks[m], h, w, dloss);
                /* float32 against the CPU's float64 sums: the f32 test's bound, and for
                 * logits far from 0 the cancellation of max + log(sum) - logit (ulps of max) */
                tu_vs_cpu(ctx, "crossentropy16 losses vs cpu", r.losses, c.losses, (size_t)s.N,
                          1e-5 * fmax(1.0, scale / 10), 1e-5);
                /* a 16-bit dlogits: one rounding step apart at most */
                for (size_t i = 0; i < n; i++) {
                    double bound = (2 * u + 1e-5) * fabs(c.dl[i]) + 1e-7 * dloss + 2 * sub;
                    if (!(fabs(r.dl[i] - c.dl[i]) <= bound))
                        fail_msg("%s mask %#x: dlogits[%zu] %.9g, the CPU backend's %.9g",
                                 vka_dtype_string(t), masks[m], i, r.dl[i], c.dl[i]);
                }
                free(c.losses);
                free(c.dl);
            }
            free(r.losses);
            free(r.dl);
        }
    }
    if (cpu) tu_done(cpu);
    free(h);
    free(w);
    free(rl);
    free(rd);
}

static void shapes(vka_context *ctx) {
    static const int32_t targets[] = {0, 6, 3, 3, 1, 2, 5, 4};
    static const int32_t ignoring[] = {-1, 6, -1, 3, 1, -1, 0};
    static const int32_t wide[] = {0, 4999, 2500, 17};
    static const int32_t gpt2[] = {50256, 0, 1, 2};
    shape_case(ctx, (ce16_shape){5, 7, 9, targets}, 3.0f, 1);   /* odd Vp: rows mid-word */
    shape_case(ctx, (ce16_shape){8, 7, 7, targets}, 3.0f, 2);   /* no padding, odd */
    shape_case(ctx, (ce16_shape){1, 1, 4, targets}, 3.0f, 3);   /* V = 1 */
    shape_case(ctx, (ce16_shape){3, 1, 1, (const int32_t[]){0, 0, 0}}, 3.0f, 4);
    shape_case(ctx, (ce16_shape){7, 7, 9, ignoring}, 3.0f, 5);  /* ignored rows */
    shape_case(ctx, (ce16_shape){4, 7, 8, targets}, 100.0f, 6); /* far from 0 */
    shape_case(ctx, (ce16_shape){3, 5000, 5001, wide}, 4.0f, 7); /* longer than a workgroup */
    shape_case(ctx, (ce16_shape){3, 50257, 50304, gpt2}, 6.0f, 8);
}

static void test_crossentropy16_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu_threads(1);
    shapes(ctx);
    tu_done(ctx);
    ctx = tu_cpu_threads(3);
    shapes(ctx);
    tu_done(ctx);
    ctx = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    shapes(ctx);
    tu_done(ctx);
}

TU_VULKAN_TESTS16(test_crossentropy16_vulkan, shapes)

/* Blocks of rows in 4 KiB bindings: 16-bit blocks starting at a word's high half. */
static void limited(vka_kernels kernels) {
    vka_context *ctx = tu_gpu_limited(kernels, 4096);
    static const int32_t targets[] = {0, 6, 3, 3, 1, 2, 5, 4, -1, 2, 0};
    shape_case(ctx, (ce16_shape){11, 300, 301, targets}, 3.0f, 9);
    shape_case(ctx, (ce16_shape){11, 7, 9, targets}, 3.0f, 10);
    tu_done(ctx);
}
static void test_crossentropy16_split_gpu_kernels(void **state) {
    (void)state;
    limited(VKA_KERNELS_GPU);
}
static void test_crossentropy16_split_cpu_kernels(void **state) {
    (void)state;
    limited(VKA_KERNELS_CPU);
}

/* (e) */
static void refusals(vka_context *ctx) {
    int N = 2, V = 3, Vp = 4;
    vka_tensor *lb = tu_tensor_typed(ctx, VKA_BF16, 8, NULL);
    vka_tensor *lh = tu_tensor_typed(ctx, VKA_F16, 8, NULL);
    vka_tensor *tg = tu_tensor(ctx, 2, (const int32_t[]){0, 1}), *losses = tu_tensor(ctx, 2, NULL);
    vka_tensor *l16 = tu_tensor_typed(ctx, VKA_BF16, 2, NULL);
    vka_tensor *tg16 = tu_tensor_typed(ctx, VKA_BF16, 2, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_crossentropy_backward(ctx, lh, lb, tg, 1.0f, N, V, Vp),
                     VKA_ERROR_INVALID_ARGUMENT);
    const char *e = vka_last_error(ctx);
    if (!strstr(e, "crossentropy_backward") || !strstr(e, "dlogits holds f16 elements but logits bf16"))
        fail_msg("type mix: %s", e);
    assert_int_equal(vka_crossentropy_forward(ctx, l16, lb, tg, N, V, Vp),
                     VKA_ERROR_INVALID_ARGUMENT);
    if (!strstr(vka_last_error(ctx), "losses holds bf16")) fail_msg("%s", vka_last_error(ctx));
    assert_int_equal(vka_crossentropy_forward(ctx, losses, lb, tg16, N, V, Vp),
                     VKA_ERROR_INVALID_ARGUMENT);
    if (!strstr(vka_last_error(ctx), "targets holds bf16")) fail_msg("%s", vka_last_error(ctx));
    assert_int_equal(vka_crossentropy_forward(ctx, losses, lb, tg, 3, V, Vp),
                     VKA_ERROR_INVALID_ARGUMENT);
    if (!strstr(vka_last_error(ctx), "logits holds 8 elements")) fail_msg("%s", vka_last_error(ctx));
    vka_graph *g = NULL;
    vka_graph_end(ctx, &g);
    vka_graph_destroy(g);
    vka_tensor *all[] = {lb, lh, tg, losses, l16, tg16};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void test_crossentropy16_refusals(void **state) {
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
        cmocka_unit_test(test_crossentropy16_cpu),
        TU_VULKAN_TEST_ENTRIES16(test_crossentropy16_vulkan),
        cmocka_unit_test(test_crossentropy16_split_gpu_kernels),
        cmocka_unit_test(test_crossentropy16_split_cpu_kernels),
        cmocka_unit_test(test_crossentropy16_refusals),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
