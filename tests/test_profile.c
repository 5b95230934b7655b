/* Profiling: per-op times of graphs (timestamp queries on Vulkan, the host clock on the CPU) and
 * the model's last step. Times are checked for consistency, never against speed targets. */
#include "op_util.h"

static void profile_graph_case(vka_context *ctx) {
    assert_int_equal(vka_context_set_profiling(ctx, true), VKA_SUCCESS);
    enum { M = 96, N = 80, K = 64 };
    vka_tensor *a = tu_tensor_random(ctx, M * K, 1, 1.0f, NULL);
    vka_tensor *b = tu_tensor_random(ctx, K * N, 2, 1.0f, NULL);
    vka_tensor *c = tu_tensor(ctx, M * N, NULL), *p = tu_tensor(ctx, M * N, NULL);
    tu_begin(ctx);
    vka_matmul_desc mm = {.out = c, .a = a, .b = b, .M = M, .N = N, .K = K};
    assert_int_equal(vka_matmul(ctx, &mm), VKA_SUCCESS);
    vka_softmax_desc sm = {.out = p, .inp = c, .R = M, .Tk = N};
    assert_int_equal(vka_softmax_forward(ctx, &sm), VKA_SUCCESS);
    assert_int_equal(vka_matmul(ctx, &mm), VKA_SUCCESS);
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_times(g, NULL, NULL, 0, NULL), VKA_ERROR_INVALID_ARGUMENT); /* not run */
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);

    vka_op_time t[4];
    int n = -1;
    double total = -1;
    assert_int_equal(vka_graph_times(g, &total, t, 4, &n), VKA_SUCCESS);
    assert_int_equal(n, 2);
    assert_string_equal(t[0].op, "matmul");
    assert_int_equal(t[0].calls, 2);
    assert_string_equal(t[1].op, "softmax_forward");
    assert_int_equal(t[1].calls, 1);
    double sum = t[0].ms + t[1].ms;
    print_message("total %.3f ms, matmul %.3f ms, softmax %.3f ms\n", total, t[0].ms, t[1].ms);
    assert_true(t[0].ms >= 0 && t[1].ms >= 0 && total > 0);
    assert_true(sum <= total * 1.05 + 0.05); /* serialised ops fit inside the graph's span */
    /* A cap smaller than the op count still reports the count. */
    assert_int_equal(vka_graph_times(g, NULL, t, 1, &n), VKA_SUCCESS);
    assert_int_equal(n, 2);
    vka_graph_destroy(g);

    /* Graphs recorded with profiling off report only their total. */
    assert_int_equal(vka_context_set_profiling(ctx, false), VKA_SUCCESS);
    tu_begin(ctx);
    assert_int_equal(vka_matmul(ctx, &mm), VKA_SUCCESS);
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
    assert_int_equal(vka_graph_times(g, &total, t, 4, &n), VKA_SUCCESS);
    assert_int_equal(n, 0);
    assert_true(total > 0);
    vka_graph_destroy(g);
    vka_tensor *all[] = {a, b, c, p};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void profile_model_case(vka_context *ctx) {
    vka_gpt_config cfg = {.max_T = 16, .V = 17, .L = 1, .NH = 2, .C = 16};
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_create(ctx, &cfg, 7, &gpt), VKA_SUCCESS);
    assert_int_equal(vka_gpt_times(gpt, NULL, NULL, 0, NULL), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_context_set_profiling(ctx, true), VKA_SUCCESS);
    int32_t in[2 * 16], tg[2 * 16];
    for (int i = 0; i < 32; i++) {
        in[i] = i % 17;
        tg[i] = (i * 5) % 17;
    }
    vka_adamw_desc opt = {.lr = 1e-3f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    float loss;
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, 2, 16, &opt, &loss, NULL), VKA_SUCCESS);
    vka_op_time t[32];
    int n = 0;
    double total = 0;
    assert_int_equal(vka_gpt_times(gpt, &total, t, 32, &n), VKA_SUCCESS);
    assert_true(n > 8 && n <= 32);
    bool seen_matmul = false, seen_adamw = false;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        seen_matmul |= strcmp(t[i].op, "matmul") == 0;
        /* One AdamW op per run of adjacent tensors with the same decay: [wte wpe] [ln1]
         * [qkvw] [qkvb] [attprojw] [attprojb ln2] [fcw] [fcb] [fcprojw] [fcprojb lnf]. */
        seen_adamw |= strcmp(t[i].op, "adamw") == 0 && t[i].calls == 10;
        sum += t[i].ms;
    }
    assert_true(seen_matmul && seen_adamw);
    assert_true(sum <= total * 1.05 + 0.05);
    assert_int_equal(vka_context_set_profiling(ctx, false), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
}

/* The ceilings come out positive and finite. */
static void peak_case(vka_context *ctx) {
    vka_peak p;
    assert_int_equal(vka_measure_peak(ctx, 2.0, 2, &p), VKA_SUCCESS);
    print_message("peak: %.2f GFLOP/s, %.2f GB/s (device timer %d)\n", p.gflops, p.gbps,
                  p.device_timer);
    assert_true(isfinite(p.gflops) && p.gflops > 0 && p.fma_gflop > 0);
    assert_true(isfinite(p.gbps) && p.gbps > 0 && p.copy_mbytes > 0);
    /* the copy ran on a written source (read back), larger than the host's last-level cache */
    assert_true(p.copy_source_written);
    assert_int_equal(p.copy_passes, 2);
    assert_true(p.llc_mbytes >= 0 && (p.llc_mbytes == 0 || p.copy_mbytes > p.llc_mbytes));
    assert_int_equal(vka_measure_peak(ctx, -1.0, 0, &p), VKA_ERROR_INVALID_ARGUMENT);
}

static void test_measure_peak_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    peak_case(ctx);
    tu_done(ctx);
}

static void test_measure_peak_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    peak_case(ctx);
    tu_done(ctx);
}

static void test_profile_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    profile_graph_case(ctx);
    profile_model_case(ctx);
    tu_done(ctx);
}

static void test_profile_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    profile_graph_case(ctx);
    profile_model_case(ctx);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_cpu),
        cmocka_unit_test(test_profile_vulkan),
        cmocka_unit_test(test_measure_peak_cpu),
        cmocka_unit_test(test_measure_peak_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
