/*
 * Object lifetimes: what happens when an application destroys things in the "wrong" order.
 *  - A context destroyed while objects created from it are alive logs an error naming them and
 *    waits for the last of them: destroying them afterwards is safe and nothing leaks (the
 *    sanitizer build and valgrind check the leak half).
 *  - A tensor destroyed while a graph uses it makes that graph fail to run with a message,
 *    instead of reading freed memory (or a destroyed VkBuffer).
 *  - A failed create or load leaves *out NULL.
 * Each case runs on the CPU backend and on Vulkan.
 */
#include "test_util.h"

/* A logger that keeps the errors it is given, and counts calls after the test closed it. */
typedef struct log_capture {
    int errors;
    char last[1024];
    bool closed;
    int after_close;
} log_capture;

static void capture_log(void *user, vka_log_level level, const char *msg) {
    log_capture *lc = user;
    if (lc->closed) lc->after_close++;
    if (level <= VKA_LOG_WARN) fprintf(stderr, "vkattn: %s\n", msg);
    if (level != VKA_LOG_ERROR) return;
    lc->errors++;
    snprintf(lc->last, sizeof lc->last, "%s", msg);
}

static vka_context *make_context(vka_backend backend, log_capture *lc) {
    vka_context_desc d = {.backend = backend, .log = capture_log, .log_user_data = lc};
    if (backend == VKA_BACKEND_VULKAN) {
        const char *v = getenv("VKATTN_VALIDATION");
        d.validation = v && strcmp(v, "0") == 0 ? -1 : 1;
    }
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r == VKA_SUCCESS) return ctx;
    char msg[1200];
    snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
    vka_context_destroy(ctx);
    const char *req = getenv("VKATTN_REQUIRE_GPU");
    if (backend == VKA_BACKEND_CPU || (req && strcmp(req, "1") == 0))
        fail_msg("no context: %s", msg);
    print_message("skipping: no Vulkan context (%s)\n", msg);
    skip();
    return NULL;
}

static const vka_gpt_config SMALL = {.max_T = 8, .V = 11, .L = 1, .NH = 2, .C = 8};

/* One of each kind of object, then the context destroyed first: one error naming them all,
 * the logger never called again, and every later destroy safe (in an arbitrary order). */
static void context_first_case(vka_backend backend) {
    log_capture lc = {0};
    vka_context *ctx = make_context(backend, &lc);
    vka_tensor *a = tu_tensor(ctx, 16, NULL), *b = tu_tensor(ctx, 33, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, a, 3.0f), VKA_SUCCESS);
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_create(ctx, &SMALL, 1, &gpt), VKA_SUCCESS);
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, "hello", 5, &tok), VKA_SUCCESS);
    vka_data *data = NULL; /* the built-in corpus, with a tokenizer of its own */
    assert_int_equal(vka_data_load(ctx, NULL, NULL, &data), VKA_SUCCESS);
    /* A graph still being recorded belongs to the context: destroyed with it. */
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, b, 1.0f), VKA_SUCCESS);
    assert_int_equal(vka_context_validation_messages(ctx), 0);
    assert_int_equal(lc.errors, 0);

    vka_context_destroy(ctx);
    lc.closed = true;
    assert_int_equal(lc.errors, 1);
    print_message("logged: %s\n", lc.last);
    assert_non_null(strstr(lc.last, "vka_context_destroy"));
    assert_non_null(strstr(lc.last, "2 vka_tensor, 1 vka_graph, 1 vka_gpt, 1 vka_data, "
                                    "1 vka_tokenizer"));
    assert_non_null(strstr(lc.last, "destroyed when the last of them is"));

    /* Each of these touched the freed context before (a use after free, or a crash). */
    vka_tensor_destroy(b);
    vka_gpt_destroy(gpt);
    vka_data_destroy(data);
    vka_graph_destroy(g); /* it uses a, still alive */
    vka_tokenizer_destroy(tok);
    vka_tensor_destroy(a); /* the last one: the context goes with it */
    assert_int_equal(lc.after_close, 0);
}

static void test_lifetime_context_destroyed_before_children_cpu(void **state) {
    (void)state;
    context_first_case(VKA_BACKEND_CPU);
}

static void test_lifetime_context_destroyed_before_children_vulkan(void **state) {
    (void)state;
    context_first_case(VKA_BACKEND_VULKAN);
}

/* Destroying children first, as documented, logs nothing; the count follows every create and
 * destroy (a failed create counts nothing). */
static void test_lifetime_children_first_logs_nothing(void **state) {
    (void)state;
    log_capture lc = {0};
    vka_context *ctx = make_context(VKA_BACKEND_CPU, &lc);
    vka_tensor *t = NULL;
    assert_int_equal(vka_tensor_create(ctx, 0, &t), VKA_ERROR_INVALID_ARGUMENT);
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, "", 0, &tok), VKA_ERROR_INVALID_ARGUMENT);
    vka_gpt *gpt = NULL;
    vka_gpt_config bad = SMALL;
    bad.NH = 3;
    assert_int_equal(vka_gpt_create(ctx, &bad, 1, &gpt), VKA_ERROR_INVALID_ARGUMENT);
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, "/nonexistent/corpus.txt", NULL, &data), VKA_ERROR_IO);
    tu_begin(ctx);
    vka_graph *g = NULL;
    assert_int_equal(vka_fill(ctx, NULL, 1.0f), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT); /* released */
    t = tu_tensor(ctx, 4, NULL);
    vka_tensor_destroy(t);
    int errors = lc.errors;
    vka_context_destroy(ctx);
    assert_int_equal(lc.errors, errors); /* nothing was left alive */
}

/* Graphs using a tensor that is destroyed fail to run, with a message; others run on. */
static void destroyed_tensor_case(vka_backend backend) {
    log_capture lc = {0};
    vka_context *ctx = make_context(backend, &lc);
    const size_t n = 300;
    vka_tensor *a = tu_tensor(ctx, n, NULL), *b = tu_tensor(ctx, n, NULL);
    vka_tensor *out = tu_tensor(ctx, n, NULL);
    vka_graph *uses_a = NULL, *uses_a_twice = NULL, *no_a = NULL;
    tu_begin(ctx);
    assert_int_equal(vka_residual_forward(ctx, out, a, b, n), VKA_SUCCESS);
    assert_int_equal(vka_graph_end(ctx, &uses_a), VKA_SUCCESS);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, a, 2.0f), VKA_SUCCESS);
    assert_int_equal(vka_add_inplace(ctx, a, a, n), VKA_SUCCESS);
    assert_int_equal(vka_copy(ctx, out, a, n), VKA_SUCCESS);
    assert_int_equal(vka_graph_end(ctx, &uses_a_twice), VKA_SUCCESS);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, b, 5.0f), VKA_SUCCESS);
    assert_int_equal(vka_copy(ctx, out, b, n), VKA_SUCCESS);
    assert_int_equal(vka_graph_end(ctx, &no_a), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(uses_a), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(uses_a_twice), VKA_SUCCESS);

    vka_tensor_destroy(a);
    assert_int_equal(vka_graph_run(uses_a), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_graph_run: a tensor this graph uses was "
                                                "destroyed"));
    assert_int_equal(vka_graph_run(uses_a_twice), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "a tensor this graph uses was destroyed"));
    /* The graph that never used a still runs, and right. */
    assert_int_equal(vka_graph_run(no_a), VKA_SUCCESS);
    float *got = tu_read(out, n);
    for (size_t i = 0; i < n; i++) assert_true(got[i] == 5.0f);
    free(got);

    /* A tensor destroyed while the graph using it is being recorded: later ops are ignored
     * (on Vulkan, nothing more is recorded into a command buffer using a destroyed buffer) and
     * graph_end fails. */
    vka_tensor *c = tu_tensor(ctx, n, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, c, 1.0f), VKA_SUCCESS);
    vka_tensor_destroy(c);
    assert_non_null(strstr(vka_last_error(ctx), "the graph being recorded uses was destroyed"));
    assert_int_equal(vka_fill(ctx, out, 1.0f), VKA_SUCCESS); /* ignored: the graph failed */
    vka_graph *g = (vka_graph *)&g;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    assert_non_null(strstr(vka_last_error(ctx), "the graph being recorded uses was destroyed"));
    /* Recording works again afterwards. */
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, out, 7.0f), VKA_SUCCESS);
    tu_run(ctx);
    got = tu_read(out, n);
    for (size_t i = 0; i < n; i++) assert_true(got[i] == 7.0f);
    free(got);

    /* Destroying the graphs after (or before) their tensors is fine either way. */
    vka_graph_destroy(uses_a);
    vka_graph_destroy(no_a);
    vka_tensor_destroy(b);
    vka_graph_destroy(uses_a_twice);
    vka_tensor_destroy(out);
    int errors = lc.errors;
    uint32_t validation = vka_context_validation_messages(ctx);
    vka_context_destroy(ctx);
    assert_int_equal(lc.errors, errors); /* everything was destroyed */
    assert_int_equal(validation, 0);
}

static void test_lifetime_destroyed_tensor_invalidates_graphs_cpu(void **state) {
    (void)state;
    destroyed_tensor_case(VKA_BACKEND_CPU);
}

static void test_lifetime_destroyed_tensor_invalidates_graphs_vulkan(void **state) {
    (void)state;
    destroyed_tensor_case(VKA_BACKEND_VULKAN);
}

/* Every create and load sets *out to NULL when it fails, whatever *out held before. */
static void test_lifetime_failed_create_sets_out_null(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    void *junk = (void *)&junk;
    vka_tensor *t = junk;
    assert_int_equal(vka_tensor_create(ctx, 0, &t), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(t);
    t = junk;
    assert_int_equal(vka_tensor_create(NULL, 4, &t), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(t);
    vka_graph *g = junk;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    g = junk;
    assert_int_equal(vka_graph_end(NULL, &g), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    vka_tokenizer *tok = junk;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, NULL, 0, &tok),
                     VKA_ERROR_INVALID_ARGUMENT);
    assert_null(tok);
    tok = junk;
    assert_int_equal(vka_tokenizer_load(ctx, "/nonexistent/tok.bin", &tok), VKA_ERROR_IO);
    assert_null(tok);
    vka_data *data = junk;
    assert_int_equal(vka_data_load(ctx, "/nonexistent/data.txt", NULL, &data), VKA_ERROR_IO);
    assert_null(data);
    vka_gpt *gpt = junk;
    vka_gpt_config bad = SMALL;
    bad.C = 0;
    assert_int_equal(vka_gpt_create(ctx, &bad, 1, &gpt), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(gpt);
    gpt = junk;
    assert_int_equal(vka_gpt_create(NULL, &SMALL, 1, &gpt), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(gpt);
    gpt = junk;
    assert_int_equal(vka_gpt_load(ctx, "/nonexistent/model.bin", &gpt), VKA_ERROR_IO);
    assert_null(gpt);
    gpt = junk;
    assert_int_equal(vka_gpt_load(NULL, "/nonexistent/model.bin", &gpt),
                     VKA_ERROR_INVALID_ARGUMENT);
    assert_null(gpt);
    gpt = junk;
    vka_train_state st;
    assert_int_equal(vka_gpt_load_state(ctx, "/nonexistent/state.bin", &gpt, &st), VKA_ERROR_IO);
    assert_null(gpt);
    gpt = junk;
    assert_int_equal(vka_gpt_load_state(ctx, "/nonexistent/state.bin", &gpt, NULL),
                     VKA_ERROR_INVALID_ARGUMENT);
    assert_null(gpt);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifetime_context_destroyed_before_children_cpu),
        cmocka_unit_test(test_lifetime_context_destroyed_before_children_vulkan),
        cmocka_unit_test(test_lifetime_children_first_logs_nothing),
        cmocka_unit_test(test_lifetime_destroyed_tensor_invalidates_graphs_cpu),
        cmocka_unit_test(test_lifetime_destroyed_tensor_invalidates_graphs_vulkan),
        cmocka_unit_test(test_lifetime_failed_create_sets_out_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
