/*
 * KV-cache decoding: the kv_write op (CPU vs Vulkan, both kernel variants, against a loop
 * written here), and vka_gpt_session -- appending in pieces equals appending at once, reset,
 * bad ids, and greedy generation with the cache identical to the recompute path for 300 tokens
 * from a model of context 256 (crossing the full-context point), on both backends.
 */
#define _POSIX_C_SOURCE 200809L /* setenv (tu_gpu_packed16) */
#include <string.h>
#include "gpt_util.h"
#include "op_util.h"

#include <stdint.h>

/* --- kv_write ------------------------------------------------------------------------------- */

typedef struct kv_shape { int T, NH, HS, max_T, p0, n; } kv_shape;

/* kcache then vcache (2 * NH*max_T*HS) after kv_write on ctx, caches starting as init. */
static float *kv_write_run(vka_context *ctx, const kv_shape *s, const float *init,
                           const float *qkv) {
    size_t cache = (size_t)s->NH * s->max_T * s->HS, C = (size_t)s->NH * s->HS;
    vka_tensor *kc = tu_tensor(ctx, cache, init), *vc = tu_tensor(ctx, cache, init + cache);
    vka_tensor *x = tu_tensor(ctx, (size_t)s->T * 3 * C, qkv);
    int32_t pos[2] = {s->p0, s->n};
    vka_tensor *p = tu_tensor(ctx, 2, pos);
    tu_begin(ctx);
    assert_int_equal(vka_kv_write(ctx, kc, vc, x, p, s->T, s->NH, s->HS, s->max_T), VKA_SUCCESS);
    tu_run(ctx);
    float *out = malloc(2 * cache * sizeof *out);
    assert_int_equal(vka_tensor_read(kc, 0, out, cache), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(vc, 0, out + cache, cache), VKA_SUCCESS);
    vka_tensor_destroy(kc);
    vka_tensor_destroy(vc);
    vka_tensor_destroy(x);
    vka_tensor_destroy(p);
    return out;
}

static void kv_write_case(vka_context *gpu, const kv_shape *s) {
    size_t cache = (size_t)s->NH * s->max_T * s->HS, C = (size_t)s->NH * s->HS;
    float *init = malloc(2 * cache * sizeof *init), *qkv = malloc((size_t)s->T * 3 * C * 4);
    tu_random(init, 2 * cache, 7, 1.0f);
    tu_random(qkv, (size_t)s->T * 3 * C, 8, 1.0f);
    /* The reference: rows p0 + t for t < min(T, n) inside [0, max_T) replaced. */
    float *want = malloc(2 * cache * sizeof *want);
    memcpy(want, init, 2 * cache * sizeof *want);
    for (int t = 0; t < s->T && t < s->n; t++) {
        int p = s->p0 + t;
        if (p < 0 || p >= s->max_T) continue;
        for (int h = 0; h < s->NH; h++)
            for (int d = 0; d < s->HS; d++) {
                size_t dst = ((size_t)h * s->max_T + p) * s->HS + d;
                size_t src = (size_t)t * 3 * C + (size_t)h * s->HS + d;
                want[dst] = qkv[src + C];
                want[cache + dst] = qkv[src + 2 * C];
            }
    }
    vka_context *cpu = tu_cpu();
    float *got_cpu = kv_write_run(cpu, s, init, qkv);
    tu_assert_close("kv_write cpu", got_cpu, want, 2 * cache, 0.0, 0.0);
    if (gpu) {
        float *got = kv_write_run(gpu, s, init, qkv);
        tu_assert_close("kv_write vulkan", got, want, 2 * cache, 0.0, 0.0);
        free(got);
    }
    tu_done(cpu);
    free(got_cpu);
    free(init);
    free(qkv);
    free(want);
}

static void kv_write_shapes(vka_context *gpu) {
    static const kv_shape shapes[] = {
        {7, 3, 5, 19, 11, 5},   /* a partial chunk in the middle */
        {7, 3, 5, 19, 16, 7},   /* rows past max_T skipped */
        {1, 4, 33, 64, 63, 1},  /* the last position */
        {64, 2, 17, 100, 0, 64}, /* a whole prefill chunk */
        {5, 1, 1, 9, 2, 0},     /* nothing to write */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) kv_write_case(gpu, &shapes[i]);
}

/* 16-bit caches (bf16 or fp16) from an f32 qkv or a qkv of the caches' type: each written
 * element is the qkv value rounded by vka_convert (or its word), every other element -- the
 * rest of the caches and one element past them, which shares the last word where the count is
 * odd -- keeps its word. */
static void kv_write16_case(vka_context *ctx, const kv_shape *s, vka_dtype type, bool qkv16) {
    size_t cache = (size_t)s->NH * s->max_T * s->HS, C = (size_t)s->NH * s->HS;
    size_t nx = (size_t)s->T * 3 * C;
    float *initf = malloc(2 * (cache + 1) * sizeof *initf), *qkv = malloc(nx * sizeof *qkv);
    tu_random(initf, 2 * (cache + 1), 17, 1.0f);
    tu_random(qkv, nx, 18, 3.0f);
    uint16_t *init = malloc(2 * (cache + 1) * sizeof *init), *q16 = malloc(nx * sizeof *q16);
    assert_int_equal(vka_convert(type, init, VKA_F32, initf, 2 * (cache + 1)), VKA_SUCCESS);
    assert_int_equal(vka_convert(type, q16, VKA_F32, qkv, nx), VKA_SUCCESS);
    uint16_t *want = malloc(2 * (cache + 1) * sizeof *want);
    memcpy(want, init, 2 * (cache + 1) * sizeof *want);
    for (int t = 0; t < s->T && t < s->n; t++) {
        int p = s->p0 + t;
        if (p < 0 || p >= s->max_T) continue;
        for (int h = 0; h < s->NH; h++)
            for (int d = 0; d < s->HS; d++) {
                size_t dst = ((size_t)h * s->max_T + p) * s->HS + d;
                size_t src = (size_t)t * 3 * C + (size_t)h * s->HS + d;
                want[dst] = q16[src + C];
                want[cache + 1 + dst] = q16[src + 2 * C];
            }
    }
    vka_tensor *kc = tu_tensor_typed(ctx, type, cache + 1, init);
    vka_tensor *vc = tu_tensor_typed(ctx, type, cache + 1, init + cache + 1);
    vka_tensor *x = qkv16 ? tu_tensor_typed(ctx, type, nx, q16) : tu_tensor(ctx, nx, qkv);
    int32_t pos[2] = {s->p0, s->n};
    vka_tensor *p = tu_tensor(ctx, 2, pos);
    tu_begin(ctx);
    assert_int_equal(vka_kv_write(ctx, kc, vc, x, p, s->T, s->NH, s->HS, s->max_T), VKA_SUCCESS);
    tu_run(ctx);
    uint16_t *got = malloc(2 * (cache + 1) * sizeof *got);
    assert_int_equal(vka_tensor_read(kc, 0, got, cache + 1), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(vc, 0, got + cache + 1, cache + 1), VKA_SUCCESS);
    for (size_t i = 0; i < 2 * (cache + 1); i++)
        if (got[i] != want[i])
            fail_msg("kv_write %s caches, %s qkv, T=%d NH=%d HS=%d max_T=%d p0=%d n=%d: %s[%zu] "
                     "= 0x%04X, expected 0x%04X", vka_dtype_string(type), qkv16 ? "16-bit" : "f32",
                     s->T, s->NH, s->HS, s->max_T, s->p0, s->n, i <= cache ? "kcache" : "vcache",
                     i % (cache + 1), got[i], want[i]);
    vka_tensor *all[] = {kc, vc, x, p};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    free(initf), free(qkv), free(init), free(q16), free(want), free(got);
}

static void kv_write16_shapes(vka_context *ctx) {
    static const kv_shape shapes[] = {
        {7, 3, 5, 19, 11, 5},   /* odd HS: rows share words */
        {1, 4, 33, 64, 63, 1},  /* the last position */
        {64, 2, 17, 100, 0, 64},
    };
    const vka_dtype types[] = {VKA_BF16, VKA_F16};
    for (size_t t = 0; t < TU_LEN(types); t++)
        for (size_t i = 0; i < TU_LEN(shapes); i++) {
            kv_write16_case(ctx, &shapes[i], types[t], false);
            kv_write16_case(ctx, &shapes[i], types[t], i == 0);
        }
}

static void test_kv_write16(void **state) {
    (void)state;
    vka_context *cpu = tu_cpu();
    kv_write16_shapes(cpu);
    tu_done(cpu);
    const vka_kernels kinds[] = {VKA_KERNELS_GPU, VKA_KERNELS_CPU};
    for (size_t k = 0; k < TU_LEN(kinds); k++) { /* the device's 16-bit path, then packed */
        vka_context *gpu = tu_gpu_kernels(kinds[k]);
        kv_write16_shapes(gpu);
        tu_done(gpu);
        gpu = tu_gpu_packed16(kinds[k], 0);
        kv_write16_shapes(gpu);
        tu_done(gpu);
    }
}

static void test_kv_write_matches_cpu_gpu_kernels(void **state) {
    (void)state;
    vka_context *gpu = tu_gpu_kernels(VKA_KERNELS_GPU);
    kv_write_shapes(gpu);
    tu_done(gpu);
}

static void test_kv_write_matches_cpu_cpu_kernels(void **state) {
    (void)state;
    vka_context *gpu = tu_gpu_kernels(VKA_KERNELS_CPU);
    kv_write_shapes(gpu);
    tu_done(gpu);
}

static void test_kv_write_rejects_small_cache(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    vka_tensor *kc = tu_tensor(ctx, 2 * 8 * 4 - 1, NULL), *vc = tu_tensor(ctx, 64, NULL);
    vka_tensor *x = tu_tensor(ctx, 3 * 8, NULL), *p = tu_tensor(ctx, 2, NULL);
    tu_begin(ctx);
    vka_result r = vka_kv_write(ctx, kc, vc, x, p, 1, 2, 4, 8);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "kcache"));
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT);
    vka_tensor_destroy(kc);
    vka_tensor_destroy(vc);
    vka_tensor_destroy(x);
    vka_tensor_destroy(p);
    tu_done(ctx);
}

/* --- sessions ------------------------------------------------------------------------------- */

static void scale_params(vka_gpt *gpt, float k) {
    float *p = tm_params(gpt);
    size_t n = vka_gpt_num_params(gpt);
    for (size_t i = 0; i < n; i++) p[i] *= k;
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    free(p);
}

/* Logits (V) of a plain forward pass over ids[0:T] at its last position. */
static void forward_last(vka_gpt *gpt, const int32_t *ids, int T, float *out) {
    int V = vka_gpt_get_config(gpt).V;
    float *all = malloc((size_t)T * V * sizeof *all);
    assert_int_equal(vka_gpt_forward(gpt, ids, NULL, 1, T, NULL, all), VKA_SUCCESS);
    memcpy(out, all + (size_t)(T - 1) * V, (size_t)V * sizeof *out);
    free(all);
}

static double max_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Appending 50 tokens at once, in pieces (1, 7, 30, 12), and one by one gives the logits of a
 * plain forward pass; reset starts over; bad ids are refused with the id named. */
static void test_session_pieces_equal_at_once(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 64, .V = 37, .L = 2, .NH = 2, .C = 32};
    vka_gpt *gpt = tm_model(ctx, cfg, 41);
    scale_params(gpt, 5.0f);
    enum { N = 50 };
    int32_t ids[N];
    tm_tokens(ids, N, 37, 9);
    float want[37], once[37], pieces[37], single[37];
    forward_last(gpt, ids, N, want);
    vka_gpt_session *ss = NULL;
    vka_gpt_session_desc d = {.prefill_chunk = 16};
    assert_int_equal(vka_gpt_session_create(gpt, &d, &ss), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(ss, once, 37), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "no tokens"));
    assert_int_equal(vka_gpt_session_append(ss, ids, N), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_length(ss), N);
    assert_int_equal(vka_gpt_session_logits(ss, once, 37), VKA_SUCCESS);

    vka_gpt_session_reset(ss);
    assert_int_equal(vka_gpt_session_length(ss), 0);
    static const int cuts[] = {1, 7, 30, 12};
    for (int i = 0, at = 0; i < 4; at += cuts[i++])
        assert_int_equal(vka_gpt_session_append(ss, ids + at, (size_t)cuts[i]), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(ss, pieces, 37), VKA_SUCCESS);

    vka_gpt_session_reset(ss);
    for (int i = 0; i < N; i++) assert_int_equal(vka_gpt_session_append(ss, ids + i, 1), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(ss, single, 37), VKA_SUCCESS);
    double scale = 1.0;
    for (int i = 0; i < 37; i++) scale = fmax(scale, fabs(want[i]));
    double d1 = max_diff(once, want, 37), d2 = max_diff(pieces, want, 37),
           d3 = max_diff(single, want, 37);
    print_message("max |logit diff| vs forward: at once %.3g, pieces %.3g, one by one %.3g "
                  "(max |logit| %.3g)\n", d1, d2, d3, scale);
    assert_true(d1 <= 1e-4 * scale && d2 <= 1e-4 * scale && d3 <= 1e-4 * scale);

    /* A bad id: refused, named, nothing appended. */
    int32_t bad[3] = {1, 37, 2};
    assert_int_equal(vka_gpt_session_append(ss, bad, 3), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "tokens[1] = 37"));
    bad[1] = -1;
    assert_int_equal(vka_gpt_session_append(ss, bad, 3), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "tokens[1] = -1"));
    assert_int_equal(vka_gpt_session_length(ss), N);
    assert_int_equal(vka_gpt_session_logits(ss, once, 37), VKA_SUCCESS);
    assert_true(max_diff(once, single, 37) == 0.0);
    assert_int_equal(vka_gpt_session_append(ss, NULL, 2), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_gpt_session_logits(ss, once, 36), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "V = 36"));
    vka_gpt_session_desc big = {.max_T = 65};
    vka_gpt_session *none = (vka_gpt_session *)1;
    assert_int_equal(vka_gpt_session_create(gpt, &big, &none), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(none);
    assert_non_null(strstr(vka_last_error(ctx), "max_T = 65"));
    vka_gpt_session_destroy(ss);
    vka_gpt_session_destroy(NULL);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* The model is destroyed after its last session when destroyed first. */
static void test_session_outliving_its_model(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    vka_gpt_config cfg = {.max_T = 8, .V = 5, .L = 1, .NH = 1, .C = 4};
    vka_gpt *gpt = tm_model(ctx, cfg, 3);
    vka_gpt_session *ss = NULL;
    assert_int_equal(vka_gpt_session_create(gpt, NULL, &ss), VKA_SUCCESS);
    vka_gpt_destroy(gpt);      /* logs an error and waits */
    vka_context_destroy(ctx);  /* waits too */
    vka_gpt_session_destroy(ss); /* frees session, model, context (valgrind sees no leak) */
}

/* Greedy decoding of 300 tokens after a 100-token prompt, context 256: the cache path
 * (re-prefilling the last half at the full-context point) gives the recompute path's tokens,
 * and at every step its logits match a plain forward pass over the same context. */
static void test_greedy_cache_equals_recompute(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 256, .V = 65, .L = 2, .NH = 4, .C = 64};
    vka_gpt *gpt = tm_model(ctx, cfg, 77);
    scale_params(gpt, 4.0f);
    enum { P = 100, NEW = 300, V = 65 };
    int32_t seq[P + NEW], cached[NEW], recomputed[NEW];
    tm_tokens(seq, P, V, 5);
    vka_sample_desc greedy = {.temperature = 0.0f};
    assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &greedy, cached, NULL, NULL), VKA_SUCCESS);
    greedy.no_kv_cache = true;
    assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &greedy, recomputed, NULL, NULL),
                     VKA_SUCCESS);

    /* Step by step: the session's logits against a forward pass over the context. */
    vka_gpt_session *ss = NULL;
    assert_int_equal(vka_gpt_session_create(gpt, NULL, &ss), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_append(ss, seq, P), VKA_SUCCESS);
    float got[V], want[V];
    double worst = 0, min_margin = INFINITY;
    size_t start = 0;
    int refills = 0, checked = 0;
    for (int i = 0; i < NEW; i++) {
        size_t len = P + (size_t)i;
        bool refilled = false;
        if (len - start > (size_t)cfg.max_T) {
            start = len - 1 - (size_t)cfg.max_T / 2;
            refills++;
            refilled = true;
        }
        assert_int_equal(vka_gpt_session_length(ss), len - start);
        if (cached[i] != recomputed[i])
            fail_msg("step %d: cache %d, recompute %d", i, cached[i], recomputed[i]);
        seq[len] = cached[i];
        /* Logits every 16th step and around the full-context points (each forward pass of a
         * new length records a graph: every step would take long on lavapipe). */
        bool check = i % 16 == 0 || refilled || len - start >= (size_t)cfg.max_T - 1;
        if (check) assert_int_equal(vka_gpt_session_logits(ss, got, V), VKA_SUCCESS);
        if (!check) goto next;
        forward_last(gpt, seq + start, (int)(len - start), want);
        double scale = 1.0;
        int best = 0, second = -1;
        for (int j = 0; j < V; j++) {
            scale = fmax(scale, fabs(want[j]));
            if (want[j] > want[best]) best = j;
        }
        for (int j = 0; j < V; j++)
            if (j != best && (second < 0 || want[j] > want[second])) second = j;
        double diff = max_diff(got, want, V), margin = want[best] - want[second];
        worst = fmax(worst, diff / scale);
        min_margin = fmin(min_margin, margin);
        if (diff > 1e-4 * scale)
            fail_msg("step %d: logits differ by %.3g (max |logit| %.3g)", i, diff, scale);
        if (cached[i] != best)
            fail_msg("step %d: cache %d, forward argmax %d (top-2 margin %.3g)", i, cached[i],
                     best, margin);
        checked++;
    next:
        assert_int_equal(vka_gpt_session_append(ss, &cached[i], 1), VKA_SUCCESS);
    }
    print_message("300 greedy tokens identical; %d re-prefill(s); %d steps' logits checked: max "
                  "relative diff %.3g, smallest top-2 margin %.3g\n", refills, checked, worst,
                  min_margin);
    assert_true(refills >= 1);
    vka_gpt_session_destroy(ss);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* `test_kv split` (the test_kv_split run, with a lowered binding limit): the op and the
 * session's pieces only; the 300-token runs would take minutes at 4 KiB. */
int main(int argc, char **argv) {
    const struct CMUnitTest split_tests[] = {
        cmocka_unit_test(test_kv_write_matches_cpu_gpu_kernels),
        cmocka_unit_test(test_kv_write16),
        cmocka_unit_test(test_kv_write_matches_cpu_cpu_kernels),
        TM_BOTH(test_session_pieces_equal_at_once),
    };
    if (argc > 1 && strcmp(argv[1], "split") == 0)
        return cmocka_run_group_tests(split_tests, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_write_matches_cpu_gpu_kernels),
        cmocka_unit_test(test_kv_write_matches_cpu_cpu_kernels),
        cmocka_unit_test(test_kv_write16),
        cmocka_unit_test(test_kv_write_rejects_small_cache),
        TM_BOTH(test_session_pieces_equal_at_once),
        cmocka_unit_test(test_session_outliving_its_model),
        TM_BOTH(test_greedy_cache_equals_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
