/* The tensor and graph API: replay, recording rules, argument errors and their messages,
 * limits, NULL handling. */
#include "op_util.h"

/* The backend interface, for the model's path below (its ops are called through function
 * pointers: nothing of the library's internals is linked). */
#include "../src/api.h"

/* One graph run three times with new inputs written between runs. */
static void replay_case(vka_context *ctx) {
    const size_t n = 1000;
    vka_tensor *a = tu_tensor(ctx, n, NULL), *b = tu_tensor(ctx, n, NULL);
    vka_tensor *out = tu_tensor_nan(ctx, n);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, b, 2.0f), VKA_SUCCESS);
    assert_int_equal(vka_residual_forward(ctx, out, a, b, n), VKA_SUCCESS);
    assert_int_equal(vka_add_inplace(ctx, out, out, n), VKA_SUCCESS); /* 2 (a + 2) */
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    assert_non_null(g);
    float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want);
    for (int run = 0; run < 3; run++) {
        tu_random(x, n, (uint64_t)run + 1, 10.0f);
        assert_int_equal(vka_tensor_write(a, 0, x, n), VKA_SUCCESS);
        assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
        float *got = tu_read(out, n);
        for (size_t i = 0; i < n; i++) want[i] = 2.0f * (x[i] + 2.0f);
        tu_assert_close("replayed graph", got, want, n, 0.0, 0.0);
        free(got);
    }
    vka_graph_destroy(g);
    free(x);
    free(want);
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(out);
}

static void test_graph_replay_with_new_inputs(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    replay_case(ctx);
    tu_done(ctx);
}

/* Recording rules: ops only between begin and end, one graph at a time, empty graphs run. */
static void recording_case(vka_context *ctx) {
    vka_tensor *t = tu_tensor(ctx, 4, NULL);
    assert_int_equal(vka_fill(ctx, t, 1.0f), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_fill: called outside vka_graph_begin"));
    vka_graph *g = (vka_graph *)&g; /* must be set to NULL on failure */
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    tu_begin(ctx);
    assert_int_equal(vka_graph_begin(ctx), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "already recording"));
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS); /* empty graph */
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
    vka_graph_destroy(g);
    float x[4];
    assert_int_equal(vka_tensor_read(t, 0, x, 4), VKA_SUCCESS);
    for (int i = 0; i < 4; i++) assert_true(x[i] == 0.0f); /* zero-filled, fill never ran */
    vka_tensor_destroy(t);
}

static void test_graph_op_outside_graph_fails(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    recording_case(ctx);
    tu_done(ctx);
}

/* A wrong size is refused by the op with a message naming op, tensor and numbers; graph_end
 * returns the first such error (with its message) and no graph. */
static void size_error_case(vka_context *ctx) {
    vka_tensor *inp = tu_tensor(ctx, 100, NULL), *out = tu_tensor(ctx, 120, NULL);
    vka_tensor *small = tu_tensor(ctx, 5, NULL);
    const char *msg =
        "vka_softmax_forward: inp holds 100 elements but R*Tk = 6*20 = 120 are needed";
    tu_begin(ctx);
    vka_softmax_desc d = {.out = out, .inp = inp, .R = 6, .Tk = 20};
    assert_int_equal(vka_softmax_forward(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    assert_string_equal(vka_last_error(ctx), msg);
    /* a second bad op: its own message now, but graph_end reports the first */
    assert_int_equal(vka_gelu_forward(ctx, out, small, 7), VKA_ERROR_INVALID_ARGUMENT);
    assert_string_equal(vka_last_error(ctx),
                        "vka_gelu_forward: inp holds 5 elements but N = 7 are needed");
    assert_int_equal(vka_gelu_forward(ctx, out, inp, 7), VKA_SUCCESS); /* valid, ignored */
    vka_graph *g = (vka_graph *)&g;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    assert_string_equal(vka_last_error(ctx), msg);

    /* The next graph starts clean. */
    tu_begin(ctx);
    d.R = 5;
    assert_int_equal(vka_softmax_forward(ctx, &d), VKA_SUCCESS);
    tu_run(ctx);
    vka_tensor_destroy(inp);
    vka_tensor_destroy(out);
    vka_tensor_destroy(small);
}

static void test_graph_size_mismatch_errors_carry_the_message(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    size_error_case(ctx);
    tu_done(ctx);
}

/* One bad call inside a graph: the op fails with text in its message, and so does graph_end. */
#define EXPECT_OP_ERROR(ctx, call, text)                                                      \
    do {                                                                                      \
        tu_begin(ctx);                                                                        \
        assert_int_equal((call), VKA_ERROR_INVALID_ARGUMENT);                                 \
        if (!strstr(vka_last_error(ctx), (text)))                                             \
            fail_msg("message \"%s\" lacks \"%s\"", vka_last_error(ctx), (text));             \
        tu_end_expect(ctx, VKA_ERROR_INVALID_ARGUMENT, (text));                               \
    } while (0)

static void argument_error_cases(vka_context *ctx) {
    vka_tensor *a = tu_tensor(ctx, 64, NULL), *b = tu_tensor(ctx, 64, NULL);
    vka_tensor *c = tu_tensor(ctx, 64, NULL);
    EXPECT_OP_ERROR(ctx, vka_residual_forward(ctx, a, NULL, b, 64),
                    "vka_residual_forward: a is NULL");
    EXPECT_OP_ERROR(ctx, vka_layernorm_forward(ctx, a, b, c, a, b, c, 0, 8),
                    "vka_layernorm_forward: N = 0 must be positive");
    EXPECT_OP_ERROR(ctx, vka_encoder_forward(ctx, a, b, c, a, INT32_MAX, INT32_MAX, INT32_MAX),
                    "out: B*T*C = 2147483647*2147483647*2147483647 overflows");
    EXPECT_OP_ERROR(ctx, vka_mean(ctx, a, b, 0), "vka_mean: N = 0");
    vka_matmul_desc mm = {.out = a, .a = a, .b = b, .M = 8, .N = 8, .K = 8};
    EXPECT_OP_ERROR(ctx, vka_matmul(ctx, &mm), "out must be a different tensor from a and b");
    mm = (vka_matmul_desc){.out = c, .a = a, .b = b, .M = 4, .N = 4, .K = 4, .batch = 3,
                           .stride_a = 30};
    EXPECT_OP_ERROR(ctx, vka_matmul(ctx, &mm),
                    "vka_matmul: a holds 64 elements but (batch-1)*stride_a + M*K = 2*30 + 16 "
                    "= 76 are needed");
    mm = (vka_matmul_desc){.out = c, .a = a, .b = b, .M = 4, .N = 4, .K = 4, .batch = 2,
                           .stride_out = 8};
    EXPECT_OP_ERROR(ctx, vka_matmul(ctx, &mm), "stride_out = 8 is less than M*N = 4*4 = 16");
    EXPECT_OP_ERROR(ctx, vka_crossentropy_forward(ctx, a, b, c, 2, 9, 8),
                    "vka_crossentropy_forward: V = 9 exceeds Vp = 8");
    EXPECT_OP_ERROR(ctx, vka_encoder_backward(ctx, a, b, c, a, b, 4, 8, 2),
                    "buckets holds 64 elements but VKA_BUCKETS_SIZE(B*T) = 3*32 + 2 = 98 are "
                    "needed");
    const vka_tensor *grads[1] = {NULL};
    EXPECT_OP_ERROR(ctx, vka_grad_norm(ctx, b, c, grads, 1, 1.0f), "grads[0] is NULL");
    EXPECT_OP_ERROR(ctx, vka_adamw(ctx, a, b, c, a, b, c, 65, 0.0f),
                    "vka_adamw: param holds 64 elements but N = 65 are needed");

    /* A tensor of another context. */
    vka_context *other = tu_cpu();
    vka_tensor *foreign = tu_tensor(other, 64, NULL);
    EXPECT_OP_ERROR(ctx, vka_add_inplace(ctx, a, foreign, 64),
                    "vka_add_inplace: src belongs to another context");
    vka_tensor_destroy(foreign);
    tu_done(other);

    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(c);
}

static void test_graph_argument_errors(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    argument_error_cases(ctx);
    tu_done(ctx);
}

/* The model's ops (be->ops, as src/model/ calls them) pass the same one check layer as the public
 * API: the same check fires with the same expression, named by the op instead of the public
 * function, and a later op of a failed graph is ignored (the first failure is kept). */
static void model_path_case(vka_context *ctx) {
    vkb_backend *be = ctx->be;
    const size_t sizes[3] = {100, 120, 5};
    vkb_tensor t[3];
    vkb_arena *arena = NULL;
    assert_int_equal(be->rt->arena_create(be, "model", VKB_ARENA_DEVICE, sizes, NULL, 3, t, &arena),
                     VKA_SUCCESS);
    vkb_graph *g = NULL;
    assert_true(be->rt->graph_begin(be, &g));
    vkb_softmax sm = {.out = t[1], .inp = t[0], .R = 6, .Tk = 20};
    be->ops->softmax_forward(be, &sm);
    be->ops->gelu_forward(be, t[1], t[2], 7); /* ignored: the graph failed */
    assert_int_equal(be->rt->graph_end(be, g), VKA_ERROR_INVALID_ARGUMENT);
    assert_string_equal(vka_last_error(ctx),
                        "softmax_forward: inp holds 100 elements but R*Tk = 6*20 = 120 are needed");
    be->rt->graph_destroy(be, g);

    g = NULL;
    assert_true(be->rt->graph_begin(be, &g));
    vkb_matmul mm = {.out = t[1], .a = t[0], .b = t[0], .M = 4, .N = 4, .K = 4, .batch = 3,
                     .stride_a = 50};
    be->ops->matmul(be, &mm);
    assert_int_equal(be->rt->graph_end(be, g), VKA_ERROR_INVALID_ARGUMENT);
    assert_string_equal(vka_last_error(ctx), "matmul: a holds 100 elements but (batch-1)*stride_a "
                                             "+ M*K = 2*50 + 16 = 116 are needed");
    be->rt->graph_destroy(be, g);
    be->rt->arena_destroy(be, arena);
}

static void test_graph_model_ops_pass_the_same_checks(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    model_path_case(ctx);
    tu_done(ctx);
}

/* Tensors: sizes, zero fill, range checks on write/read, the device limit. */
static void tensor_case(vka_context *ctx) {
    vka_tensor *t = NULL;
    assert_int_equal(vka_tensor_create(ctx, 0, &t), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(t);
    t = tu_tensor(ctx, 10, NULL);
    assert_int_equal(vka_tensor_size(t), 10);
    float x[11] = {0};
    assert_int_equal(vka_tensor_write(t, 5, x, 6), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "outside the tensor's 10"));
    assert_int_equal(vka_tensor_read(t, 11, x, 0), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_tensor_read(t, (size_t)-1, x, 2), VKA_ERROR_INVALID_ARGUMENT);
    const float y[3] = {1, 2, 3};
    assert_int_equal(vka_tensor_write(t, 7, y, 3), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(t, 6, x, 4), VKA_SUCCESS);
    assert_true(x[0] == 0.0f && x[1] == 1.0f && x[3] == 3.0f);
    vka_tensor_destroy(t);

    vka_device_info info;
    assert_int_equal(vka_context_selected_device(ctx, &info), VKA_SUCCESS);
    size_t too_many = (size_t)(info.max_storage_buffer_range / 4) + 1;
    t = (vka_tensor *)&t;
    assert_int_equal(vka_tensor_create(ctx, too_many, &t), VKA_ERROR_DEVICE_LIMIT);
    assert_null(t);
    char limit[64];
    snprintf(limit, sizeof limit, "%llu bytes", (unsigned long long)info.max_storage_buffer_range);
    assert_non_null(strstr(vka_last_error(ctx), limit));
    assert_int_equal(vka_tensor_create(ctx, SIZE_MAX, &t), VKA_ERROR_DEVICE_LIMIT);
}

static void test_graph_tensor_limits_and_ranges(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    tensor_case(ctx);
    tu_done(ctx);
}

static void test_graph_destroy_null_is_noop(void **state) {
    (void)state;
    vka_tensor_destroy(NULL);
    vka_graph_destroy(NULL);
    vka_context_destroy(NULL);
    assert_int_equal(vka_tensor_size(NULL), 0);
    assert_int_equal(vka_graph_run(NULL), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_graph_begin(NULL), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_fill(NULL, NULL, 0.0f), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_tensor_write(NULL, 0, NULL, 0), VKA_ERROR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_replay_with_new_inputs),
        cmocka_unit_test(test_graph_op_outside_graph_fails),
        cmocka_unit_test(test_graph_size_mismatch_errors_carry_the_message),
        cmocka_unit_test(test_graph_argument_errors),
        cmocka_unit_test(test_graph_model_ops_pass_the_same_checks),
        cmocka_unit_test(test_graph_tensor_limits_and_ranges),
        cmocka_unit_test(test_graph_destroy_null_is_noop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
