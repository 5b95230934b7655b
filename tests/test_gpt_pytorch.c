/*
 * The whole model against PyTorch, as llm.c's test_gpt2.c: tests/data/gpt_tiny.bin (checkpoint)
 * and tests/data/gpt_tiny_debug_state.bin (inputs, targets, logits, loss, every gradient, and
 * ten clipped AdamW steps) are written by tools/make_reference.py (PyTorch, float32; checked
 * there against float64 and finite differences). Each comparison runs on the CPU backend and on
 * Vulkan (skipped without a device unless VKATTN_REQUIRE_GPU=1).
 *
 * Tolerances, from the reference's own float32-vs-float64 error (make_reference.py --check):
 *  - logits: |diff| <= 1e-5 * max|ref| (2.0e-5; float32 PyTorch is 1.1e-6 from float64 there);
 *    loss: |diff| <= 1e-5 * loss (4.4e-5; float32 is 8e-8 from float64).
 *  - gradients, per tensor: |diff| <= 1e-4 * max|ref tensor|. PyTorch's float32 error is at most
 *    1e-6 of each tensor's scale, so this leaves ~100x for other summation orders and GPU
 *    reductions, while a wrong sign, a missing term or a wrong scale moves elements by a sizeable
 *    fraction of the scale. The key bias (the middle C of each qkvb row) has a gradient of exactly
 *    0 in exact arithmetic (softmax is invariant to adding q.b_k to every score of a row); the
 *    reference holds rounding noise there (~1e-9), so ours must be within the qkvb tolerance of 0.
 *  - training losses and gradient norms, each step: |diff| <= 1e-4 * |ref| (float32 vs float64
 *    differ by at most 4.8e-7 in loss and 1.2e-6 in norm over the ten steps; ~100x margin).
 *  - parameters after ten steps, per tensor, compared as updates (after - before): the L2 norm of
 *    the difference <= 1e-3 of the L2 norm of PyTorch's update, and every |diff| <= 1e-3.
 *    float32 vs float64 is at most 1.1e-5 relative in L2 and 4.5e-5 in one element (an fc weight
 *    whose gradient is ~1e-7, so AdamW's m/sqrt(v) amplifies rounding; hence no tighter
 *    per-element bound). Decaying a tensor that should not be decayed, or not decaying one that
 *    should, changes its update by 6e-3 (lnfb) to 3e-2 in L2, 6x-30x the bound. The key bias is excluded (only checked finite): its gradient is rounding
 *    noise that AdamW normalises into steps of about lr, so its values differ between any two
 *    float32 implementations (PyTorch float32 vs float64: 2.7e-3).
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include "test_util.h"

#include <unistd.h>

#define REF_CHECKPOINT VKA_TEST_DATA_DIR "/gpt_tiny.bin"
#define REF_STATE VKA_TEST_DATA_DIR "/gpt_tiny_debug_state.bin"
#define REF_MAGIC 20240327
#define REF_VERSION 2
#define REF_HEADER_INTS 256
#define N_TENSORS 16

static const char *const tensor_names[N_TENSORS] = {
    "wte",  "wpe",  "ln1w", "ln1b", "qkvw", "qkvb",    "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",  "lnfb"};
enum { T_QKVB = 5 };

/* Elements of each parameter tensor in checkpoint order (llm.c's fill_in_parameter_sizes). */
static size_t param_sizes(const vka_gpt_config *c, size_t sizes[N_TENSORS]) {
    size_t Vp = (size_t)c->Vp, C = (size_t)c->C, L = (size_t)c->L, maxT = (size_t)c->max_T;
    size_t s[N_TENSORS] = {Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
                           L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C,
                           L * C * 4 * C, L * C, C, C};
    size_t total = 0;
    for (int i = 0; i < N_TENSORS; i++) total += (sizes[i] = s[i]);
    return total;
}

/* --------------------------------------------------------------------------------------------
 * The debug state file (layout documented in tools/make_reference.py), little-endian as llm.c.
 * ------------------------------------------------------------------------------------------ */
typedef struct ref_state {
    unsigned char *blob; /* the whole file; the pointers below point into it */
    int B, T;
    const int32_t *inputs, *targets; /* (B, T) */
    const float *logits;             /* (B, T, V) */
    float loss;
    const float *grads;              /* (P) checkpoint order */
    int n_steps;
    vka_adamw_desc opt;
    const float *losses, *grad_norms; /* (n_steps) */
    const float *params_after;        /* (P) */
} ref_state;

static void ref_free(ref_state *s) {
    free(s->blob);
    memset(s, 0, sizeof *s);
}

static bool ref_fail(char *err, size_t cap, const char *path, const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(err, cap, "reference %s: %s (regenerate with /usr/bin/python3 tools/make_reference.py)",
             path, what);
    return false;
}

/* Read and validate the debug state for a model of config c; false with err set if the file is
 * missing, has the wrong magic/version/sizes, ids out of range or non-finite numbers. */
#define REJECT(...)                                                                            \
    do {                                                                                       \
        ref_fail(err, cap, path, __VA_ARGS__); /* formats before the blob is freed */         \
        ref_free(s);                                                                           \
        return false;                                                                          \
    } while (0)
static bool ref_read(const char *path, const vka_gpt_config *c, ref_state *s, char *err,
                     size_t cap) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) REJECT("cannot open");
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        REJECT("cannot seek");
    }
    s->blob = malloc((size_t)len + 1);
    size_t got = s->blob ? fread(s->blob, 1, (size_t)len, f) : 0;
    fclose(f);
    if (got != (size_t)len) REJECT("read %zu of %ld bytes", got, len);
    const size_t hdr = REF_HEADER_INTS * 4;
    if ((size_t)len < hdr) REJECT("%ld bytes, shorter than the %zu-byte header", len, hdr);
    const int32_t *h = (const int32_t *)s->blob;
    if (h[0] != REF_MAGIC || h[1] != REF_VERSION)
        REJECT("magic %d version %d, want %d version %d", h[0], h[1], REF_MAGIC, REF_VERSION);
    s->B = h[2];
    s->T = h[3];
    if (s->B <= 0 || s->T <= 0 || s->T > c->max_T || s->B > 4096)
        REJECT("B=%d T=%d invalid for max_T=%d", s->B, s->T, c->max_T);
    size_t sizes[N_TENSORS];
    size_t P = param_sizes(c, sizes), BT = (size_t)s->B * (size_t)s->T, V = (size_t)c->V;
    size_t before_ext = hdr + 4 * (2 * BT + BT * V + 1 + P);
    if ((size_t)len < before_ext + 4)
        REJECT("%ld bytes, want at least %zu for B=%d T=%d V=%zu and %zu parameters", len,
               before_ext + 4, s->B, s->T, V, P);
    const unsigned char *p = s->blob + hdr;
    s->inputs = (const int32_t *)p;
    s->targets = s->inputs + BT;
    s->logits = (const float *)(s->targets + BT);
    s->loss = s->logits[BT * V];
    s->grads = s->logits + BT * V + 1;
    const int32_t *ext = (const int32_t *)(s->grads + P);
    s->n_steps = ext[0];
    if (s->n_steps < 1 || s->n_steps > 10000) REJECT("n_steps %d out of range", s->n_steps);
    size_t want = before_ext + 4 + 6 * 4 + 4 * (2 * (size_t)s->n_steps + P);
    if ((size_t)len != want) REJECT("%ld bytes, want exactly %zu", len, want);
    const float *hyper = (const float *)(ext + 1);
    s->opt = (vka_adamw_desc){.lr = hyper[0], .beta1 = hyper[1], .beta2 = hyper[2],
                              .eps = hyper[3], .weight_decay = hyper[4], .grad_clip = hyper[5]};
    s->losses = hyper + 6;
    s->grad_norms = s->losses + s->n_steps;
    s->params_after = s->grad_norms + s->n_steps;
    for (size_t i = 0; i < 2 * BT; i++) /* inputs, then targets */
        if (s->inputs[i] < 0 || (size_t)s->inputs[i] >= V)
            REJECT("token id %d out of range [0, %zu) at %zu", s->inputs[i], V, i);
    const float *floats = s->logits; /* everything after the ids is fp32, but n_steps */
    size_t n_floats = (size_t)((const float *)(s->blob + len) - floats);
    for (size_t i = 0; i < n_floats; i++)
        if (floats + i != (const float *)ext && !isfinite(floats[i]))
            REJECT("non-finite number at float %zu after the ids", i);
    if (!(s->opt.lr > 0.0f && s->opt.grad_clip > 0.0f))
        REJECT("lr %g grad_clip %g: both must be positive", s->opt.lr, s->opt.grad_clip);
    return true;
}
#undef REJECT

/* The model and its reference, or a test failure saying which file is wrong. */
static vka_gpt *load_model_and_reference(vka_context *ctx, ref_state *s) {
    vka_gpt *gpt = NULL;
    vka_result r = vka_gpt_load(ctx, REF_CHECKPOINT, &gpt);
    if (r != VKA_SUCCESS)
        fail_msg("vka_gpt_load(%s): %s: %s", REF_CHECKPOINT, vka_result_string(r),
                 vka_last_error(ctx));
    vka_gpt_config c = vka_gpt_get_config(gpt);
    size_t sizes[N_TENSORS];
    size_t P = param_sizes(&c, sizes);
    if (vka_gpt_num_params(gpt) != P)
        fail_msg("vka_gpt_num_params %zu, llm.c's layout gives %zu for V=%d Vp=%d L=%d C=%d",
                 vka_gpt_num_params(gpt), P, c.V, c.Vp, c.L, c.C);
    char err[600];
    if (!ref_read(REF_STATE, &c, s, err, sizeof err)) fail_msg("%s", err);
    return gpt;
}

/* --------------------------------------------------------------------------------------------
 * Comparisons, printed like llm.c's test_gpt2
 * ------------------------------------------------------------------------------------------ */
static double max_abs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

/* Max |got - want| over n elements (infinite if got has a NaN). */
static double max_diff(const float *got, const float *want, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        m = isnan(d) ? INFINITY : fmax(m, d);
    }
    return m;
}

/* Compare the 16 tensors of got with want, each within rel * max|want tensor| (at least
 * floor); print one line per tensor; return how many failed. */
static int compare_params(const char *what, const float *got, const float *want,
                          const size_t sizes[N_TENSORS], double rel, double floor) {
    int bad = 0;
    size_t off = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        double tol = fmax(rel * max_abs(want + off, sizes[i]), floor);
        double d = max_diff(got + off, want + off, sizes[i]);
        bool ok = d <= tol;
        bad += !ok;
        print_message("  %s %-9s max|diff| %.3e  tol %.2e  (max|ref| %.3e)  %s\n", what,
                      tensor_names[i], d, tol, max_abs(want + off, sizes[i]),
                      ok ? "OK" : "NOT OK");
        off += sizes[i];
    }
    return bad;
}

/* Compare the updates (got - init) and (want - init) of each tensor: L2 norm of the difference
 * <= rel_l2 * L2 norm of want's update, and max |got - want| <= atol. One line per tensor;
 * returns how many failed. */
static int compare_updates(const float *got, const float *want, const float *init,
                           const size_t sizes[N_TENSORS], double rel_l2, double atol) {
    int bad = 0;
    size_t off = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        double diff2 = 0.0, upd2 = 0.0;
        for (size_t j = off; j < off + sizes[i]; j++) {
            double d = (double)got[j] - (double)want[j], u = (double)want[j] - (double)init[j];
            diff2 += d * d;
            upd2 += u * u;
        }
        double rel = sqrt(diff2) / fmax(sqrt(upd2), 1e-30);
        double d = max_diff(got + off, want + off, sizes[i]);
        bool ok = d <= atol && rel <= rel_l2; /* NaN fails both */
        bad += !ok;
        print_message("  param %-9s max|diff| %.3e (tol %.0e)  |diff|/|update| %.3e (tol %.0e)  %s\n",
                      tensor_names[i], d, atol, rel, rel_l2, ok ? "OK" : "NOT OK");
        off += sizes[i];
    }
    return bad;
}

/* The P parameters of an llm.c checkpoint file, read directly (not through the library). */
static float *read_checkpoint_params(const char *path, size_t P) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (regenerate with tools/make_reference.py)", path);
    float *p = malloc(P * sizeof(float));
    bool ok = fseek(f, REF_HEADER_INTS * 4, SEEK_SET) == 0 && fread(p, sizeof(float), P, f) == P &&
              fgetc(f) == EOF;
    fclose(f);
    if (!ok) fail_msg("%s: not a 1024-byte header and exactly %zu floats", path, P);
    return p;
}

static void check_scalar(const char *what, double got, double want, double tol) {
    double d = fabs(got - want);
    print_message("  %-16s %.7f  ref %.7f  |diff| %.2e  tol %.1e\n", what, got, want, d, tol);
    if (!(d <= tol)) fail_msg("%s: %.9g, reference %.9g (|diff| %.3g > %.3g)", what, got, want, d, tol);
}

/* True when a Vulkan backend answered VKA_ERROR_UNSUPPORTED (an op without a kernel yet) and
 * VKATTN_REQUIRE_GPU is not 1: the case is then skipped with the backend's reason, as a
 * missing device is (tu_gpu). Any other failure fails the test. */
static bool cannot_run_yet(vka_context *ctx, vka_result r) {
    const char *req = getenv("VKATTN_REQUIRE_GPU");
    if (r != VKA_ERROR_UNSUPPORTED || vka_context_backend(ctx) != VKA_BACKEND_VULKAN ||
        (req && strcmp(req, "1") == 0))
        return false;
    print_message("skipping: the Vulkan backend cannot run the model yet (%s)\n",
                  vka_last_error(ctx));
    return true;
}

static void check(vka_context *ctx, vka_result r, const char *call) {
    if (r != VKA_SUCCESS) fail_msg("%s: %s: %s", call, vka_result_string(r), vka_last_error(ctx));
}

/* --------------------------------------------------------------------------------------------
 * The three comparisons, each on a freshly loaded model
 * ------------------------------------------------------------------------------------------ */
/* Each comparison returns false, having freed what it made, when cannot_run_yet(). */
static bool forward_matches(vka_context *ctx) {
    ref_state s;
    vka_gpt *gpt = load_model_and_reference(ctx, &s);
    vka_gpt_config c = vka_gpt_get_config(gpt);
    size_t n = (size_t)s.B * s.T * c.V;
    float *logits = malloc(n * sizeof(float)), *logits_only = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) logits[i] = logits_only[i] = NAN;
    float loss = NAN;
    vka_result r = vka_gpt_forward(gpt, s.inputs, s.targets, s.B, s.T, &loss, logits);
    if (cannot_run_yet(ctx, r)) {
        free(logits);
        free(logits_only);
        vka_gpt_destroy(gpt);
        ref_free(&s);
        return false;
    }
    check(ctx, r, "vka_gpt_forward");
    check(ctx, vka_gpt_forward(gpt, s.inputs, NULL, s.B, s.T, NULL, logits_only),
          "vka_gpt_forward (no targets)");

    double tol = 1e-5 * max_abs(s.logits, n);
    print_message("  logits (B=%d, T=%d, V=%d) max|diff| %.3e  tol %.2e\n", s.B, s.T, c.V,
                  max_diff(logits, s.logits, n), tol);
    tu_assert_close("logits", logits, s.logits, n, tol, 0.0);
    tu_assert_close("logits without targets", logits_only, s.logits, n, tol, 0.0);
    check_scalar("loss", loss, s.loss, 1e-5 * fabs(s.loss));

    free(logits);
    free(logits_only);
    vka_gpt_destroy(gpt);
    ref_free(&s);
    return true;
}

static bool backward_matches(vka_context *ctx) {
    ref_state s;
    vka_gpt *gpt = load_model_and_reference(ctx, &s);
    vka_gpt_config c = vka_gpt_get_config(gpt);
    size_t sizes[N_TENSORS];
    size_t P = param_sizes(&c, sizes);
    float *grads = malloc(P * sizeof(float));
    for (size_t i = 0; i < P; i++) grads[i] = NAN;
    float loss = NAN;
    vka_result r = vka_gpt_forward_backward(gpt, s.inputs, s.targets, s.B, s.T, &loss);
    if (cannot_run_yet(ctx, r)) {
        free(grads);
        vka_gpt_destroy(gpt);
        ref_free(&s);
        return false;
    }
    check(ctx, r, "vka_gpt_forward_backward");
    check(ctx, vka_gpt_get_grads(gpt, grads, P), "vka_gpt_get_grads");

    check_scalar("loss", loss, s.loss, 1e-5 * fabs(s.loss));
    int bad = compare_params("grad", grads, s.grads, sizes, 1e-4, 1e-7);
    if (bad) fail_msg("%d of %d gradient tensors differ from PyTorch beyond tolerance", bad,
                      N_TENSORS);

    free(grads);
    vka_gpt_destroy(gpt);
    ref_free(&s);
    return true;
}

static bool train_steps_match(vka_context *ctx) {
    ref_state s;
    vka_gpt *gpt = load_model_and_reference(ctx, &s);
    vka_gpt_config c = vka_gpt_get_config(gpt);
    size_t sizes[N_TENSORS];
    size_t P = param_sizes(&c, sizes);
    float *init = read_checkpoint_params(REF_CHECKPOINT, P);
    float *loaded = malloc(P * sizeof(float));
    check(ctx, vka_gpt_get_params(gpt, loaded, P), "vka_gpt_get_params");
    tu_assert_close("parameters as loaded", loaded, init, P, 0.0, 0.0);
    free(loaded);
    print_message("  AdamW lr %g betas (%g, %g) eps %g weight decay %g, clip grad norm at %g\n",
                  s.opt.lr, s.opt.beta1, s.opt.beta2, s.opt.eps, s.opt.weight_decay,
                  s.opt.grad_clip);
    for (int i = 0; i < s.n_steps; i++) {
        float loss = NAN, norm = NAN;
        vka_result r = vka_gpt_train_step(gpt, s.inputs, s.targets, s.B, s.T, &s.opt, &loss, &norm);
        if (i == 0 && cannot_run_yet(ctx, r)) {
            free(init);
            vka_gpt_destroy(gpt);
            ref_free(&s);
            return false;
        }
        check(ctx, r, "vka_gpt_train_step");
        char what[64];
        snprintf(what, sizeof what, "step %d loss", i);
        check_scalar(what, loss, s.losses[i], 1e-4 * fabs(s.losses[i]));
        snprintf(what, sizeof what, "step %d grad norm", i);
        check_scalar(what, norm, s.grad_norms[i], 1e-4 * fabs(s.grad_norms[i]));
    }
    if (vka_gpt_step(gpt) != (uint64_t)s.n_steps)
        fail_msg("vka_gpt_step %llu after %d steps", (unsigned long long)vka_gpt_step(gpt),
                 s.n_steps);

    float *params = malloc(P * sizeof(float));
    check(ctx, vka_gpt_get_params(gpt, params, P), "vka_gpt_get_params");
    /* The key bias's values are AdamW-normalised rounding noise (see the top): check they are
     * finite, then compare everything else. */
    size_t qkvb = 0, C = (size_t)c.C;
    for (int i = 0; i < T_QKVB; i++) qkvb += sizes[i];
    for (size_t l = 0; l < (size_t)c.L; l++) {
        for (size_t j = l * 3 * C + C; j < l * 3 * C + 2 * C; j++) {
            if (!isfinite(params[qkvb + j])) fail_msg("key bias %zu is %g", j, params[qkvb + j]);
            params[qkvb + j] = s.params_after[qkvb + j];
        }
    }
    print_message("  parameters after %d steps (key bias excluded):\n", s.n_steps);
    int bad = compare_updates(params, s.params_after, init, sizes, 1e-3, 1e-3);
    if (bad) fail_msg("%d of %d parameter tensors differ from PyTorch after %d AdamW steps", bad,
                      N_TENSORS, s.n_steps);

    free(init);
    free(params);
    vka_gpt_destroy(gpt);
    ref_free(&s);
    return true;
}

static void test_gpt_forward_matches_pytorch_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    bool ran = forward_matches(ctx);
    tu_done(ctx);
    if (!ran) skip();
}
static void test_gpt_forward_matches_pytorch_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    bool ran = forward_matches(ctx);
    tu_done(ctx);
    if (!ran) skip();
}
static void test_gpt_backward_matches_pytorch_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    bool ran = backward_matches(ctx);
    tu_done(ctx);
    if (!ran) skip();
}
static void test_gpt_backward_matches_pytorch_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    bool ran = backward_matches(ctx);
    tu_done(ctx);
    if (!ran) skip();
}
static void test_gpt_train_steps_match_pytorch_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    bool ran = train_steps_match(ctx);
    tu_done(ctx);
    if (!ran) skip();
}
static void test_gpt_train_steps_match_pytorch_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    bool ran = train_steps_match(ctx);
    tu_done(ctx);
    if (!ran) skip();
}

/* --------------------------------------------------------------------------------------------
 * A broken reference must fail loudly, never pass
 * ------------------------------------------------------------------------------------------ */
static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (regenerate with tools/make_reference.py)", path);
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            buf = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
            if (!buf) fail_msg("out of memory reading %s", path);
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

static void spit(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) fail_msg("cannot write %s", path);
}

/* Expect ref_read to reject the file with a message naming it and containing needle. */
static void expect_rejected(const char *path, const vka_gpt_config *c, const char *needle) {
    ref_state s;
    char err[600] = "";
    if (ref_read(path, c, &s, err, sizeof err)) {
        ref_free(&s);
        fail_msg("%s accepted, want an error mentioning '%s'", path, needle);
    }
    print_message("  rejected: %s\n", err);
    if (!strstr(err, path) || !strstr(err, needle))
        fail_msg("message '%s' should name %s and say '%s'", err, path, needle);
}

/* The reader rejects missing, truncated, padded and mislabelled files; the model loader
 * rejects a truncated checkpoint. Copies are written in the working directory (the build's). */
static void test_gpt_pytorch_broken_reference_fails(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    ref_state good;
    vka_gpt *gpt = load_model_and_reference(ctx, &good);
    vka_gpt_config c = vka_gpt_get_config(gpt);
    vka_gpt_destroy(gpt);
    ref_free(&good);

    const char *bad = "test_gpt_pytorch_broken.bin";
    expect_rejected("no_such_dir/gpt_tiny_debug_state.bin", &c, "cannot open");
    size_t len;
    unsigned char *data = slurp(REF_STATE, &len);
    spit(bad, data, len - 4);
    expect_rejected(bad, &c, "want exactly");
    spit(bad, data, 100);
    expect_rejected(bad, &c, "shorter than the");
    unsigned char *longer = malloc(len + 4);
    memcpy(longer, data, len);
    memset(longer + len, 0, 4);
    spit(bad, longer, len + 4);
    expect_rejected(bad, &c, "want exactly");
    free(longer);
    data[0] ^= 1; /* magic */
    spit(bad, data, len);
    expect_rejected(bad, &c, "magic");
    data[0] ^= 1;
    memcpy(data + len - 4, &(float){NAN}, 4);
    spit(bad, data, len);
    expect_rejected(bad, &c, "non-finite");
    free(data);

    data = slurp(REF_CHECKPOINT, &len);
    spit(bad, data, len / 2);
    vka_gpt *none = NULL;
    vka_result r = vka_gpt_load(ctx, bad, &none);
    print_message("  vka_gpt_load(half a checkpoint): %s: %s\n", vka_result_string(r),
                  vka_last_error(ctx));
    vka_gpt_destroy(none);
    free(data);
    remove(bad);
    if (r != VKA_ERROR_FORMAT)
        fail_msg("vka_gpt_load of a truncated checkpoint returned %s, want %s",
                 vka_result_string(r), vka_result_string(VKA_ERROR_FORMAT));
    tu_done(ctx);
}

/* llm.c's bf16 file (version 5) as PyTorch writes it (tools/make_bf16_reference.py: the
 * float32 reference's parameters through tensor.to(torch.bfloat16)): vka_gpt_save_dtype(VKA_BF16)
 * of the float32 model writes the same header and the same words (our rounding is PyTorch's),
 * and loading the file widens every word as PyTorch's .float() does (the word's 16 bits on top);
 * the bf16 model's loss is within 1e-2 of the float32 one's. */
static void test_gpt_bf16_file_matches_pytorch(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    size_t n16, n32;
    unsigned char *golden = slurp(VKA_TEST_DATA_DIR "/gpt_tiny_bf16.bin", &n16);
    vka_gpt *m32 = NULL, *m16 = NULL;
    assert_int_equal(vka_gpt_load(ctx, REF_CHECKPOINT, &m32), VKA_SUCCESS);
    size_t n = vka_gpt_num_params(m32);
    assert_int_equal(n16, 1024 + 2 * n);
    char path[] = "/tmp/vkattn_bf16_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(vka_gpt_save_dtype(m32, path, VKA_BF16), VKA_SUCCESS);
    unsigned char *ours = slurp(path, &n32);
    remove(path);
    assert_int_equal(n32, n16);
    assert_memory_equal(ours, golden, 8 * 4); /* magic, 5, maxT, V, L, NH, C, Vp */
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(ours + 1024 + 2 * i, golden + 1024 + 2 * i, 2) != 0 && differ++ == 0) first = i;
    if (differ)
        fail_msg("%zu of %zu bf16 words differ from PyTorch's, the first at parameter %zu",
                 differ, n, first);
    assert_int_equal(vka_gpt_load(ctx, VKA_TEST_DATA_DIR "/gpt_tiny_bf16.bin", &m16), VKA_SUCCESS);
    float *p = malloc(n * sizeof *p);
    assert_int_equal(vka_gpt_get_params(m16, p, n), VKA_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(golden[1024 + 2 * i] | golden[1024 + 2 * i + 1] << 8) << 16, got;
        memcpy(&got, &p[i], 4);
        if (got != u) fail_msg("parameter %zu widened to 0x%08x, PyTorch's 0x%08x", i, got, u);
    }
    vka_gpt_config cfg = vka_gpt_get_config(m32);
    int32_t in[16], tg[16];
    for (int i = 0; i < 16; i++) in[i] = (i * 7) % cfg.V, tg[i] = (i * 5 + 1) % cfg.V;
    float l32, l16;
    assert_int_equal(vka_gpt_forward(m32, in, tg, 2, 8, &l32, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(m16, in, tg, 2, 8, &l16, NULL), VKA_SUCCESS);
    print_message("loss: float32 %.6f, its bf16 file %.6f\n", l32, l16);
    assert_true(l32 != l16 && fabsf(l32 - l16) <= 1e-2f * l32);
    free(p);
    free(ours);
    free(golden);
    vka_gpt_destroy(m16);
    vka_gpt_destroy(m32);
    tu_done(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_gpt_bf16_file_matches_pytorch),
        cmocka_unit_test(test_gpt_pytorch_broken_reference_fails),
        cmocka_unit_test(test_gpt_forward_matches_pytorch_cpu),
        cmocka_unit_test(test_gpt_backward_matches_pytorch_cpu),
        cmocka_unit_test(test_gpt_train_steps_match_pytorch_cpu),
        cmocka_unit_test(test_gpt_forward_matches_pytorch_vulkan),
    };
    /* The reference's configurations build backward pipelines nothing else in the quick set
     * does (14 s on lavapipe); Vulkan's gradients and steps equal the CPU backend's in the
     * quick set (test_gpt), whose equal PyTorch's above. */
    const struct CMUnitTest exhaustive[] = {
        cmocka_unit_test(test_gpt_backward_matches_pytorch_vulkan),
        cmocka_unit_test(test_gpt_train_steps_match_pytorch_vulkan),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, NULL, NULL);
}
