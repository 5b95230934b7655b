/* The backends' own argument checks (vkb_need, src/backend.h): every op of the CPU and the
 * Vulkan backend refuses a missing tensor, or one smaller than its shape needs, with
 * VKA_ERROR_INVALID_ARGUMENT and a message naming op and tensor -- never an out-of-bounds
 * access. The public ops check sizes before they reach a backend (api_ops.c, test_graph.c), but
 * the model calls the backend directly; so this test alone drives the internal interface
 * (src/api.h gives a tensor's view and the context's backend), on shapes exactly at the limit
 * (accepted) and one element short of it (refused). */
#include "test_util.h"

#include "api.h"

/* Shapes (small: ops are recorded, never run). */
enum { B = 2, T = 3, NH = 2, HS = 2, C = NH * HS, N = 6, OC = 5, V = 5, Vp = 8 };
enum { MM_M = 3, MM_N = 4, MM_K = 5, MM_BATCH = 2 };
#define BT ((size_t)B * T)

#define MAX_ARGS 8
#define ANY 4 /* elements given to a tensor whose size is not checked (needs 0) */

typedef struct arg {
    const char *name;
    size_t n;      /* elements the op needs */
    bool optional; /* may be VKB_NONE */
} arg;

#define REQ(name, n) {name, n, false}
#define OPT(name, n) {name, n, true}

typedef struct op_case {
    const char *op;
    void (*call)(vkb_backend *be, const vkb_tensor *t);
    arg args[MAX_ARGS];
} op_case;

static void call_fill(vkb_backend *be, const vkb_tensor *t) { be->ops->fill(be, t[0], 1.0f); }
static void call_copy(vkb_backend *be, const vkb_tensor *t) { be->ops->copy(be, t[0], t[1]); }
static void call_matmul(vkb_backend *be, const vkb_tensor *t) {
    vkb_matmul mm = {.out = t[0], .a = t[1], .b = t[2], .bias = t[3], .M = MM_M, .N = MM_N,
                     .K = MM_K, .batch = MM_BATCH, .alpha = 1.0f};
    be->ops->matmul(be, &mm);
}
static void call_bias_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->bias_backward(be, t[0], t[1], N, OC);
}
static void call_encoder_forward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->encoder_forward(be, t[0], t[1], t[2], t[3], B, T, C);
}
static void call_encoder_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->encoder_backward(be, t[0], t[1], t[2], t[3], t[4], B, T, C);
}
static void call_layernorm_forward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->layernorm_forward(be, t[0], t[1], t[2], t[3], t[4], t[5], N, C);
}
static void call_layernorm_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->layernorm_backward(be, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], N, C);
}
static void call_permute_forward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->permute_forward(be, t[0], t[1], t[2], t[3], B, T, NH, HS);
}
static void call_permute_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->permute_backward(be, t[0], t[1], t[2], t[3], B, T, NH, HS);
}
static void call_unpermute_forward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->unpermute_forward(be, t[0], t[1], B, T, NH, HS);
}
static void call_unpermute_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->unpermute_backward(be, t[0], t[1], B, T, NH, HS);
}
static void call_softmax_forward(vkb_backend *be, const vkb_tensor *t) {
    /* Tq = 0 (= R), 2 rows per mask row: the mask is (R / 2, Tk) */
    vkb_softmax sm = {.out = t[0], .inp = t[1], .mask = t[2], .R = N, .Tk = C, .mask_rows = 2,
                      .scale = 1.0f, .causal = true};
    be->ops->softmax_forward(be, &sm);
}
static void call_softmax_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->softmax_backward(be, t[0], t[1], t[2], N, C, 1.0f);
}
static void call_gelu_forward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->gelu_forward(be, t[0], t[1], N);
}
static void call_gelu_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->gelu_backward(be, t[0], t[1], t[2], N);
}
static void call_residual_forward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->residual_forward(be, t[0], t[1], t[2], N);
}
static void call_add_inplace(vkb_backend *be, const vkb_tensor *t) {
    be->ops->add_inplace(be, t[0], t[1], N);
}
static void call_crossentropy_forward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->crossentropy_forward(be, t[0], t[1], t[2], N, V, Vp);
}
/* One column (V = Vp = 1): losses and logits both hold N, as dlogits would. */
static void call_crossentropy_forward_narrow(vkb_backend *be, const vkb_tensor *t) {
    be->ops->crossentropy_forward(be, t[0], t[1], t[2], N, 1, 1);
}
static void call_crossentropy_backward(vkb_backend *be, const vkb_tensor *t) {
    be->ops->crossentropy_backward(be, t[0], t[1], t[2], 1.0f, N, V, Vp);
}
static void call_mean(vkb_backend *be, const vkb_tensor *t) { be->ops->mean(be, t[0], t[1], N); }
static void call_grad_norm(vkb_backend *be, const vkb_tensor *t) {
    be->ops->grad_norm(be, t[0], t[1], t + 2, 2, 1.0f);
}
static void call_adamw(vkb_backend *be, const vkb_tensor *t) {
    be->ops->adamw(be, t[0], t[1], t[2], t[3], t[4], t[5], N, 0.1f);
}
static void call_peak_fma(vkb_backend *be, const vkb_tensor *t) {
    be->ops->peak_fma(be, t[0], N, 4);
}

#define NC ((size_t)N * C)
#define HEADS ((size_t)B * NH * T * HS)

static const op_case cases[] = {
    {"fill", call_fill, {REQ("t", 0)}},
    {"copy", call_copy, {REQ("dst", ANY), REQ("src", 0)}}, /* dst needs src.n */
    {"matmul", call_matmul,
     {REQ("out", MM_BATCH * MM_M * MM_N), REQ("a", MM_BATCH * MM_M * MM_K),
      REQ("b", MM_BATCH * MM_K * MM_N), OPT("bias", MM_N)}},
    {"bias_backward", call_bias_backward, {REQ("dbias", OC), REQ("dout", (size_t)N * OC)}},
    {"encoder_forward", call_encoder_forward,
     {REQ("out", BT * C), REQ("tokens", BT), REQ("wte", C), REQ("wpe", (size_t)T * C)}},
    {"encoder_backward", call_encoder_backward,
     {REQ("dwte", C), REQ("dwpe", (size_t)T * C), REQ("dout", BT * C), REQ("tokens", BT),
      REQ("buckets", VKA_BUCKETS_SIZE(BT))}},
    {"layernorm_forward", call_layernorm_forward,
     {REQ("out", NC), REQ("mean", N), REQ("rstd", N), REQ("inp", NC), REQ("weight", C),
      REQ("bias", C)}},
    {"layernorm_backward", call_layernorm_backward,
     {REQ("dinp", NC), REQ("dweight", C), REQ("dbias", C), REQ("dout", NC), REQ("inp", NC),
      REQ("weight", C), REQ("mean", N), REQ("rstd", N)}},
    {"permute_forward", call_permute_forward,
     {REQ("q", HEADS), REQ("k", HEADS), REQ("v", HEADS), REQ("inp", 3 * HEADS)}},
    {"permute_backward", call_permute_backward,
     {REQ("dinp", 3 * HEADS), REQ("dq", HEADS), REQ("dk", HEADS), REQ("dv", HEADS)}},
    {"unpermute_forward", call_unpermute_forward, {REQ("out", HEADS), REQ("inp", HEADS)}},
    {"unpermute_backward", call_unpermute_backward, {REQ("dinp", HEADS), REQ("dout", HEADS)}},
    {"softmax_forward", call_softmax_forward,
     {REQ("out", NC), REQ("inp", NC), OPT("mask", NC / 2)}},
    {"softmax_backward", call_softmax_backward,
     {REQ("dinp", NC), REQ("dout", NC), REQ("out", NC)}},
    {"gelu_forward", call_gelu_forward, {REQ("out", N), REQ("inp", N)}},
    {"gelu_backward", call_gelu_backward, {REQ("dinp", N), REQ("inp", N), REQ("dout", N)}},
    {"residual_forward", call_residual_forward, {REQ("out", N), REQ("a", N), REQ("b", N)}},
    {"add_inplace", call_add_inplace, {REQ("dst", N), REQ("src", N)}},
    {"crossentropy_forward", call_crossentropy_forward,
     {REQ("losses", N), REQ("logits", (size_t)N * Vp), REQ("targets", N)}},
    {"crossentropy_forward", call_crossentropy_forward_narrow,
     {REQ("losses", N), REQ("logits", N), REQ("targets", N)}},
    {"crossentropy_backward", call_crossentropy_backward,
     {REQ("dlogits", (size_t)N * Vp), REQ("logits", (size_t)N * Vp), REQ("targets", N)}},
    {"mean", call_mean, {REQ("out", 1), REQ("inp", N)}},
    {"grad_norm", call_grad_norm,
     {REQ("out", 2), REQ("partials", 2 * VKA_NORM_PARTIALS), REQ("grads[0]", 0),
      REQ("grads[1]", 0)}},
    {"adamw", call_adamw,
     {REQ("param", N), REQ("grad", N), REQ("m", N), REQ("v", N), REQ("hyper", VKA_HYPER_COUNT),
      OPT("gscale", 2)}},
    {"peak_fma", call_peak_fma, {REQ("out", N)}},
};

/* Record c's op alone into a fresh backend graph (never run); its status. */
static vka_result record(vka_context *ctx, const op_case *c, const vkb_tensor *t) {
    vkb_backend *be = ctx->be;
    vkb_graph *g = NULL;
    assert_true(be->ops->graph_begin(be, &g));
    c->call(be, t);
    vka_result r = be->ops->graph_end(be, g);
    be->ops->graph_destroy(be, g);
    return r;
}

static void expect_refused(vka_context *ctx, const op_case *c, const vkb_tensor *t,
                           const char *want) {
    vka_result r = record(ctx, c, t);
    if (r != VKA_ERROR_INVALID_ARGUMENT || !strstr(vka_last_error(ctx), want))
        fail_msg("%s backend, %s: got %s (\"%s\"), want VKA_ERROR_INVALID_ARGUMENT (\"%s\")",
                 ctx->be->name, c->op, vka_result_string(r), vka_last_error(ctx), want);
}

static void op_checks_case(vka_context *ctx, const op_case *c) {
    int n = 0;
    while (n < MAX_ARGS && c->args[n].name) n++;
    vka_tensor *owned[MAX_ARGS] = {0};
    vkb_tensor t[MAX_ARGS] = {{0}};
    for (int i = 0; i < n; i++) {
        size_t size = c->args[i].n ? c->args[i].n : ANY;
        owned[i] = tu_tensor(ctx, size, NULL);
        t[i] = vkb_slice(owned[i]->t, 0, size);
    }
    vka_result r = record(ctx, c, t);
    if (r != VKA_SUCCESS)
        fail_msg("%s backend, %s at its exact sizes: %s (%s)", ctx->be->name, c->op,
                 vka_result_string(r), vka_last_error(ctx));
    /* Each tensor in turn one element short, then absent; the others as they were. */
    vka_log_fn log = ctx->log;
    ctx->log = NULL; /* the refusals are expected */
    char want[160];
    for (int i = 0; i < n; i++) {
        const arg *a = &c->args[i];
        vkb_tensor full = t[i];
        if (a->n > 0) {
            t[i] = vkb_slice(full, 0, a->n - 1);
            snprintf(want, sizeof want, "%s: %s holds %zu elements but %zu are needed", c->op,
                     a->name, a->n - 1, a->n);
            expect_refused(ctx, c, t, want);
        }
        if (!a->optional) {
            t[i] = VKB_NONE;
            snprintf(want, sizeof want, "%s: tensor %s is missing", c->op, a->name);
            expect_refused(ctx, c, t, want);
        }
        t[i] = full;
    }
    ctx->log = log;
    for (int i = 0; i < n; i++) vka_tensor_destroy(owned[i]);
}

static void op_checks(vka_context *ctx) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) op_checks_case(ctx, &cases[i]);
}

static void test_backend_cpu_ops_refuse_short_or_missing_tensors(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    op_checks(ctx);
    tu_done(ctx);
}

static void test_backend_gpu_ops_refuse_short_or_missing_tensors(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    op_checks(ctx);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_cpu_ops_refuse_short_or_missing_tensors),
        cmocka_unit_test(test_backend_gpu_ops_refuse_short_or_missing_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
