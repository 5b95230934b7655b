/*
 * The vkattn command line, run as a user runs it (the built binary, VKA_CLI_PATH, in a fresh
 * directory): training lowers the loss on both backends, generate and eval work from the saved
 * files, a run stopped and resumed equals an uninterrupted one, Ctrl-C saves and exits cleanly,
 * and bad input of every kind gets a clear message and a non-zero exit, never a crash.
 *
 * Vulkan cases skip where there is no Vulkan device or its backend cannot train yet (fail
 * instead with VKATTN_REQUIRE_GPU=1); the Tiny Shakespeare cases skip where the file is missing
 * (fail instead with VKATTN_REQUIRE_DATA=1, as CI sets).
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "gpt_util.h"

enum { CLI_USAGE_STATUS = 2 }; /* README "Exit codes" */

/* A small model so every run here takes well under a second of CPU time. */
#define SMALL "--layers", "2", "--heads", "2", "--embd", "32", "--ctx", "32", "--batch", "8"

/* The model every generate/eval/bad-file case starts from: trained once per run of this
 * file (group setup) on the CPU backend on the built-in corpus. */
static tf_dir fixture;
static const char *fixture_model(void) { return tf_path(&fixture, "model.bin"); }

static int group_setup(void **state) {
    (void)state;
    fixture = tf_mkdir();
    cu_result r = cu_run(&fixture, "train", "--backend", "cpu", SMALL, "--steps", "60", "--lr",
                         "1e-2", "--eval-windows", "20", "--quiet");
    if (r.status != 0) {
        fprintf(stderr, "fixture training failed (%d):\n%s\n", r.status, r.err);
        return -1;
    }
    cu_free(&r);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    tf_rmdir(&fixture);
    return 0;
}

static const char *shakespeare(void) { return tu_shared_data_path("tinyshakespeare.txt"); }

/* Skip (or fail with VKATTN_REQUIRE_GPU=1) unless the Vulkan backend can train. */
static bool vulkan_can_train(void) {
    vka_context *ctx = tm_gpu();
    if (!ctx) return false;
    tu_done(ctx);
    return true;
}

/* The "loss" of the JSON step lines of out, in order; returns how many (at most cap). */
static int step_losses(const char *out, double *loss, int cap) {
    char line[4096];
    int n = 0;
    for (int i = 0; n < cap && cu_line(out, "\"step\":", i, line, sizeof line); i++)
        loss[n++] = cu_json_num(line, "loss");
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * Training
 * ------------------------------------------------------------------------------------------- */

/* 50 steps of a small model on Tiny Shakespeare: from about ln 65 = 4.17 the loss of a
 * character model falls below 3.4 within 50 steps at lr 3e-3 (unigram statistics alone give
 * about 3.3); a model that does not learn stays near 4.17. */
static void train_lowers_loss(const char *backend) {
    const char *data = shakespeare();
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "train", "--backend", backend, "--data", data, SMALL, "--steps",
                         "50", "--lr", "3e-3", "--eval-every", "25", "--eval-windows", "50",
                         "--json");
    cu_expect(&r, 0, NULL, "train");
    double loss[64];
    int n = step_losses(r.out, loss, 64);
    assert_int_equal(n, 50);
    double first = loss[0], last = (loss[45] + loss[46] + loss[47] + loss[48] + loss[49]) / 5;
    print_message("%s: loss %.4f at step 1, %.4f over steps 46-50\n", backend, first, last);
    assert_true(first > 3.9 && first < 4.5);
    assert_true(last < 3.4);
    char done[4096];
    assert_true(cu_line(r.out, "\"event\":\"done\"", 0, done, sizeof done));
    double val = cu_json_num(done, "val_loss");
    assert_true(val > 0 && val < 3.5);
    assert_true(cu_json_num(done, "steps") == 50);
    assert_non_null(strstr(done, backend));
    assert_int_equal(cu_count_lines(r.out, "\"val_loss\""), 3); /* steps 25, 50, and done */
    assert_true(cu_exists(tf_path(&d, "model.bin")));
    assert_true(cu_exists(tf_path(&d, "model.tokenizer.bin")));
    assert_true(cu_exists(tf_path(&d, "model.state.bin")));
    assert_int_equal(tf_count(&d, ".tmp"), 0);
    cu_free(&r);
    tf_rmdir(&d);
}

static void test_cli_train_lowers_loss_cpu(void **state) {
    (void)state;
    train_lowers_loss("cpu");
}

static void test_cli_train_lowers_loss_vulkan(void **state) {
    (void)state;
    if (vulkan_can_train()) train_lowers_loss("vulkan");
}

/* --profile: the done event carries the last step's per-op times, matmul among them. */
static void train_profile(const char *backend) {
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "train", "--backend", backend, SMALL, "--steps", "3",
                         "--eval-windows", "2", "--profile", "--json");
    cu_expect(&r, 0, NULL, "train --profile");
    char done[8192];
    assert_true(cu_line(r.out, "\"event\":\"done\"", 0, done, sizeof done));
    double step_ms = cu_json_num(done, "step_ms");
    const char *mm = strstr(done, "{\"op\":\"matmul\"");
    assert_non_null(mm);
    double mm_ms = cu_json_num(mm, "ms");
    print_message("%s: step %.3f ms, matmul %.3f ms\n", backend, step_ms, mm_ms);
    assert_true(step_ms > 0 && mm_ms > 0 && mm_ms <= step_ms * 1.05 + 0.05);
    cu_free(&r);
    tf_rmdir(&d);
}

static void test_cli_train_profile(void **state) {
    (void)state;
    train_profile("cpu");
    if (vulkan_can_train()) train_profile("vulkan");
}

/* 20 steps in one run, and 10 + --resume 10, give the same losses and the same model bytes. */
static void resume_is_exact(const char *backend) {
    tf_dir d = tf_mkdir();
    cu_result a = cu_run(&d, "train", "--backend", backend, SMALL, "--steps", "20", "--out",
                         "a.bin", "--eval-every", "5", "--eval-windows", "20", "--json");
    cu_expect(&a, 0, NULL, "20 steps");
    cu_result b = cu_run(&d, "train", "--backend", backend, SMALL, "--steps", "20", "--out",
                         "b.bin", "--eval-every", "5", "--eval-windows", "20", "--stop-at", "10",
                         "--json");
    cu_expect(&b, 0, NULL, "10 steps");
    assert_int_equal(cu_count_lines(b.out, "\"step\":"), 10);
    assert_int_equal(cu_count_lines(b.out, "\"event\":\"stopped\""), 1);
    /* The settings come from the state: a different one is refused. */
    cu_result bad = cu_run(&d, "train", "--backend", backend, "--resume", "b.state.bin", "--lr", "0.5");
    cu_expect(&bad, CLI_USAGE_STATUS, "--lr", "resume with another --lr");
    cu_result c = cu_run(&d, "train", "--backend", backend, "--resume", "b.state.bin",
                         "--eval-windows", "20", "--json");
    cu_expect(&c, 0, NULL, "resume");
    double la[32], lc[32];
    assert_int_equal(step_losses(a.out, la, 32), 20);
    assert_int_equal(step_losses(c.out, lc, 32), 10);
    for (int i = 0; i < 10; i++) {
        if (la[10 + i] != lc[i])
            fail_msg("step %d: loss %.9g in one run, %.9g resumed", 11 + i, la[10 + i], lc[i]);
    }
    char da[4096], dc[4096];
    assert_true(cu_line(a.out, "\"event\":\"done\"", 0, da, sizeof da));
    assert_true(cu_line(c.out, "\"event\":\"done\"", 0, dc, sizeof dc));
    assert_true(cu_json_num(da, "val_loss") == cu_json_num(dc, "val_loss"));
    print_message("final loss %.9g both ways, val %.9g\n", la[19], cu_json_num(dc, "val_loss"));
    /* The resumed run wrote b.bin (derived from b.state.bin), byte for byte a.bin. */
    size_t na, nb;
    unsigned char *ma = tf_read(tf_path(&d, "a.bin"), &na), *mb = tf_read(tf_path(&d, "b.bin"), &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ma, mb, na);
    free(ma);
    free(mb);
    cu_free(&a);
    cu_free(&b);
    cu_free(&bad);
    cu_free(&c);
    tf_rmdir(&d);
}

static void test_cli_resume_is_exact_cpu(void **state) {
    (void)state;
    resume_is_exact("cpu");
}

static void test_cli_resume_is_exact_vulkan(void **state) {
    (void)state;
    if (vulkan_can_train()) resume_is_exact("vulkan");
}

/* SIGINT a few steps in: the step finishes, the files are saved, the exit is a normal 130,
 * and the saved state resumes. */
static void test_cli_sigint_saves_and_exits(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    cu_spec spec = {.dir = &d};
    pid_t pid = cu_start(&spec, CU_ARGS("train", "--backend", "cpu", SMALL, "--steps", "100000",
                                        "--eval-every", "0", "--eval-windows", "5", "--json"));
    char out_path[256];
    snprintf(out_path, sizeof out_path, "%s/.stdout", d.path);
    for (int waited = 0;; waited += 10) {
        char *out = cu_slurp(out_path, NULL);
        int steps = cu_count_lines(out, "\"step\":");
        free(out);
        if (steps >= 3) break;
        if (waited > 60000) {
            kill(pid, SIGKILL);
            fail_msg("no 3 training steps within 60 s");
        }
        cu_sleep_ms(10);
    }
    kill(pid, SIGINT);
    cu_result r = cu_wait(&spec, pid);
    cu_expect(&r, 130, NULL, "interrupted run");
    char line[4096];
    assert_true(cu_line(r.out, "\"event\":\"interrupted\"", 0, line, sizeof line));
    double steps = cu_json_num(line, "steps");
    assert_true(steps >= 3 && steps < 100000);
    assert_int_equal(tf_count(&d, ".tmp"), 0);
    /* The state holds the step reached; --resume continues from it. */
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = NULL;
    vka_train_state st;
    assert_int_equal(vka_gpt_load_state(ctx, tf_path(&d, "model.state.bin"), &gpt, &st), VKA_SUCCESS);
    assert_true((double)st.step == steps);
    vka_gpt_destroy(gpt);
    assert_int_equal(vka_gpt_load(ctx, tf_path(&d, "model.bin"), &gpt), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
    cu_free(&r);
    tf_rmdir(&d);
}

/* A save that fails (here: the file-size limit is hit) reports the error and leaves the
 * MODEL already there untouched, with no temporary file behind. */
static void test_cli_failed_save_keeps_the_old_model(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    cu_copy(fixture_model(), tf_path(&d, "model.bin"));
    size_t n0;
    unsigned char *before = tf_read(tf_path(&d, "model.bin"), &n0);
    cu_spec spec = {.dir = &d, .fsize_limit = 16384};
    cu_result r = cu_run_spec(&spec, CU_ARGS("train", "--backend", "cpu", SMALL, "--steps", "2",
                                             "--eval-windows", "2"));
    cu_expect(&r, 1, "File too large", "save past the size limit");
    size_t n1;
    unsigned char *after = tf_read(tf_path(&d, "model.bin"), &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    assert_int_equal(tf_count(&d, ".tmp"), 0);
    free(before);
    free(after);
    cu_free(&r);
    tf_rmdir(&d);
}

/* ---------------------------------------------------------------------------------------------
 * Generate and eval
 * ------------------------------------------------------------------------------------------- */

static cu_result generate(const char *backend, const char *prompt, const char *tokens,
                          const char *temperature) {
    return cu_run(&fixture, "generate", "--backend", backend, "--model", "model.bin", "--prompt",
                  prompt, "--tokens", tokens, "--temperature", temperature);
}

static void test_cli_generate_prints_prompt_and_tokens(void **state) {
    (void)state;
    /* Greedy: the prompt, then exactly 40 characters (one byte per token), the same twice. */
    cu_result a = generate("cpu", "Once upon a time", "40", "0");
    cu_expect(&a, 0, NULL, "generate");
    cu_result b = generate("cpu", "Once upon a time", "40", "0");
    cu_expect(&b, 0, NULL, "generate again");
    assert_int_equal(a.out_len, strlen("Once upon a time") + 40);
    assert_memory_equal(a.out, "Once upon a time", strlen("Once upon a time"));
    assert_string_equal(a.out, b.out);
    print_message("greedy: \"%s\"\n", a.out);
    /* Sampled with a seed: the length holds and the seed reproduces it. */
    cu_result c = cu_run(&fixture, "generate", "--backend", "cpu", "--model", "model.bin",
                         "--tokens", "30", "--temperature", "1.0", "--top-k", "5", "--seed", "7");
    cu_expect(&c, 0, NULL, "sampled");
    cu_result e = cu_run(&fixture, "generate", "--backend", "cpu", "--model", "model.bin",
                         "--tokens", "30", "--temperature", "1.0", "--top-k", "5", "--seed", "7");
    /* The default prompt is a newline. */
    assert_int_equal(c.out_len, 1 + 30);
    assert_int_equal(c.out[0], '\n');
    assert_string_equal(c.out, e.out);
    cu_free(&a);
    cu_free(&b);
    cu_free(&c);
    cu_free(&e);
}

static void test_cli_generate_greedy_is_deterministic_on_vulkan(void **state) {
    (void)state;
    if (!vulkan_can_train()) return;
    cu_result a = generate("vulkan", "The cat", "30", "0");
    cu_expect(&a, 0, NULL, "generate on Vulkan");
    cu_result b = generate("vulkan", "The cat", "30", "0");
    cu_expect(&b, 0, NULL, "generate on Vulkan again");
    assert_int_equal(a.out_len, strlen("The cat") + 30);
    assert_string_equal(a.out, b.out);
    cu_free(&a);
    cu_free(&b);
}

/* Text the fixture's vocabulary covers: the start of the built-in corpus; returns its length. */
static size_t write_eval_text(const char *path, size_t bytes) {
    size_t len = 0;
    char *text = vka_builtin_corpus(bytes, &len);
    assert_non_null(text);
    tf_write(path, text, len);
    free(text);
    return len;
}

static cu_result eval_json(const char *backend) {
    return cu_run(&fixture, "eval", "--backend", backend, "--model", "model.bin", "--data",
                  "eval.txt", "--json");
}

static void test_cli_eval_json_agrees_across_backends(void **state) {
    (void)state;
    double n = (double)write_eval_text(tf_path(&fixture, "eval.txt"), 20000);
    cu_result c = eval_json("cpu");
    cu_expect(&c, 0, NULL, "eval cpu");
    double loss = cu_json_num(c.out, "loss"), ppl = cu_json_num(c.out, "perplexity");
    print_message("cpu: %s", c.out);
    /* The fixture learned something (below ln 57 = 4.04) but is far from perfect. */
    assert_true(loss > 1.0 && loss < 4.0);
    assert_true(fabs(ppl - exp(loss)) < 1e-4 * ppl);
    /* Windows of T+1 = 33 tokens at 0, 32, 64, ...: floor((n - 1) / 32) of them. */
    assert_true(cu_json_num(c.out, "windows") == floor((n - 1) / 32));
    assert_true(cu_json_num(c.out, "tokens") == n);
    /* A shorter --ctx scores more, shorter windows. */
    cu_result s = cu_run(&fixture, "eval", "--backend", "cpu", "--model", "model.bin", "--data",
                         "eval.txt", "--ctx", "8", "--json");
    cu_expect(&s, 0, NULL, "eval --ctx 8");
    assert_true(cu_json_num(s.out, "windows") == floor((n - 1) / 8));
    cu_free(&s);
    if (vulkan_can_train()) {
        cu_result g = eval_json("vulkan");
        cu_expect(&g, 0, NULL, "eval vulkan");
        print_message("vulkan: %s", g.out);
        double diff = fabs(cu_json_num(g.out, "loss") - loss);
        if (!(diff < 1e-4)) fail_msg("eval differs across backends by %g", diff);
        assert_true(cu_json_num(g.out, "windows") == cu_json_num(c.out, "windows"));
        cu_free(&g);
    }
    cu_free(&c);
}

/* ---------------------------------------------------------------------------------------------
 * Bad input: each gets a message naming the problem and exit 1 (2 for the command line).
 * ------------------------------------------------------------------------------------------- */

static void test_cli_bad_data_files(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    tf_write(tf_path(&d, "empty.txt"), "", 0);
    unsigned char junk[4096];
    tu_random((float *)junk, sizeof junk / 4, 3, 1e30f);
    tf_write(tf_path(&d, "junk.bin"), junk, sizeof junk);
    tf_write(tf_path(&d, "short.txt"), "to be or not", 12);
    const struct {
        const char *data, *message;
    } cases[] = {
        {"missing.txt", "cannot open missing.txt"},
        {"empty.txt", "empty.txt is empty"},
        {"junk.bin", "junk.bin is not a text file"},
        {"/bin/ls", "/bin/ls is not a text file"},
        {"short.txt", "fewer than ctx+1"},
        {".", "directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "1", "--data",
                             cases[i].data);
        cu_expect(&r, 1, cases[i].message, cases[i].data);
        print_message("  ok: %s", r.err);
        cu_free(&r);
    }
    assert_false(cu_exists(tf_path(&d, "model.bin")));
    tf_rmdir(&d);
}

static void test_cli_bad_model_files(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    size_t n;
    unsigned char *model = tf_read(fixture_model(), &n);
    /* truncated: header and part of the weights */
    tf_write(tf_path(&d, "short.bin"), model, n / 2);
    cu_copy(tf_path(&fixture, "model.tokenizer.bin"), tf_path(&d, "short.tokenizer.bin"));
    /* wrong magic */
    unsigned char *bad = malloc(n);
    memcpy(bad, model, n);
    memcpy(bad, "GGUF", 4);
    tf_write(tf_path(&d, "magic.bin"), bad, n);
    cu_copy(tf_path(&fixture, "model.tokenizer.bin"), tf_path(&d, "magic.tokenizer.bin"));
    /* no tokenizer beside it */
    tf_write(tf_path(&d, "alone.bin"), model, n);
    /* a training state where a model is expected */
    cu_copy(tf_path(&fixture, "model.state.bin"), tf_path(&d, "state.bin"));
    cu_copy(tf_path(&fixture, "model.tokenizer.bin"), tf_path(&d, "state.tokenizer.bin"));
    const struct {
        const char *model, *message;
    } cases[] = {
        {"short.bin", "truncated"},
        {"magic.bin", "wrong magic"},
        {"alone.bin", "--tokenizer"},
        {"missing.bin", "cannot open missing.tokenizer.bin"},
        {"state.bin", "this is a training state"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cu_result r = cu_run(&d, "generate", "--backend", "cpu", "--model", cases[i].model,
                             "--tokens", "3");
        cu_expect(&r, 1, cases[i].message, cases[i].model);
        print_message("  ok: %s", r.err);
        cu_free(&r);
    }
    /* --resume of something that is not a state file */
    cu_result r = cu_run(&d, "train", "--backend", "cpu", "--resume", "magic.bin");
    cu_expect(&r, 1, "wrong magic", "resume from a model");
    cu_free(&r);
    free(model);
    free(bad);
    tf_rmdir(&d);
}

static void test_cli_text_outside_the_vocabulary(void **state) {
    (void)state;
    /* The built-in corpus has no '@' and no byte >= 0x80. */
    cu_result r = cu_run(&fixture, "generate", "--backend", "cpu", "--model", "model.bin",
                         "--prompt", "mail me @ home", "--tokens", "3");
    cu_expect(&r, 1, "'@'", "prompt outside the vocabulary");
    assert_non_null(strstr(r.err, "offset 8"));
    assert_int_equal(r.out_len, 0); /* nothing printed before the error */
    cu_free(&r);
    tf_write(tf_path(&fixture, "euro.txt"), "price: 5 \xe2\x82\xac\n", 13);
    r = cu_run(&fixture, "eval", "--backend", "cpu", "--model", "model.bin", "--data", "euro.txt");
    cu_expect(&r, 1, "euro.txt", "eval text outside the vocabulary");
    cu_free(&r);
}

/* A model whose tensors pass the device's maxStorageBufferRange: the message says which
 * tensor and which limit. C = 8192: one layer's fcw alone is 4 * 8192^2 * 4 bytes = 1 GiB. */
static void test_cli_config_beyond_the_device(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    if (!ctx) return;
    tu_done(ctx);
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "train", "--embd", "8192", "--heads", "8", "--layers", "2",
                         "--steps", "1");
    cu_expect(&r, 1, "maxStorageBufferRange", "--embd 8192");
    print_message("  ok: %s", r.err);
    assert_false(cu_exists(tf_path(&d, "model.bin")));
    cu_free(&r);
    tf_rmdir(&d);
}

static void test_cli_bad_options(void **state) {
    (void)state;
    const struct {
        const char *args[8];
        const char *message;
    } cases[] = {
        {{"train", "--steps", "-1"}, "--steps -1 is out of range"},
        {{"train", "--steps", "ten"}, "--steps 'ten' is not an integer"},
        {{"train", "--embd", "0"}, "--embd 0 is out of range"},
        {{"train", "--heads", "3", "--embd", "128"}, "--heads 3 does not divide --embd 128"},
        {{"train", "--lr", "nan"}, "--lr 'nan' is not a finite number"},
        {{"train", "--lr", "0"}, "--lr 0 is out of range"},
        {{"train", "--lr", "0.01", "--min-lr", "0.1"}, "--min-lr 0.1 is above --lr 0.01"},
        {{"train", "--warmup", "30", "--steps", "20"}, "--warmup 30 is longer than --steps 20"},
        {{"train", "--backend", "metal"}, "--backend 'metal' is not one of: vulkan, cpu"},
        {{"train", "--device", "gpu0"}, "--device 'gpu0' is not a device index"},
        {{"train", "--seed", "-3"}, "--seed '-3'"},
        {{"train", "--batch"}, "--batch needs a value"},
        {{"train", "--json=yes"}, "--json takes no value"},
        {{"train", "--frobnicate"}, "unknown option '--frobnicate'"},
        {{"train", "extra"}, "unexpected argument 'extra'"},
        {{"generate"}, "--model MODEL is required"},
        {{"generate", "--model", "m.bin", "--temperature", "-1"}, "--temperature -1"},
        {{"generate", "--model", "m.bin", "--prompt", ""}, "--prompt needs a non-empty value"},
        {{"eval", "--model", "m.bin"}, "--data FILE is required"},
        {{"check", "--kernels", "fast"}, "--kernels 'fast'"},
        {{"frobnicate"}, "unknown command 'frobnicate'"},
    };
    tf_dir d = tf_mkdir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cu_result r = cu_run_spec(&(cu_spec){.dir = &d}, cases[i].args);
        cu_expect(&r, CLI_USAGE_STATUS, cases[i].message, cases[i].args[0]);
        /* One line naming the problem. */
        assert_int_equal(cu_count_lines(r.err, ""), 1);
        cu_free(&r);
    }
    cu_result r = cu_run(&d, "--help");
    cu_expect(&r, 0, NULL, "--help");
    assert_non_null(strstr(r.out, "train"));
    cu_free(&r);
    r = cu_run(&d, "train", "--help");
    cu_expect(&r, 0, NULL, "train --help");
    assert_non_null(strstr(r.out, "--resume STATE"));
    assert_non_null(strstr(r.out, "cos(pi"));
    cu_free(&r);
    r = cu_run(&d, "--version");
    cu_expect(&r, 0, NULL, "--version");
    assert_non_null(strstr(r.out, VKA_VERSION_STRING));
    cu_free(&r);
    r = cu_run_spec(&(cu_spec){.dir = &d}, (const char *const[]){NULL});
    cu_expect(&r, CLI_USAGE_STATUS, "Usage", "no command");
    cu_free(&r);
    tf_rmdir(&d);
}

/* ---------------------------------------------------------------------------------------------
 * info and check
 * ------------------------------------------------------------------------------------------- */

static void test_cli_info(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    /* No Vulkan driver at all: a clear message pointing at --backend cpu, exit 1. */
    cu_spec none = {.dir = &d, .env = {"VK_ICD_FILENAMES=/nonexistent.json",
                                        "VK_DRIVER_FILES=/nonexistent.json"}};
    cu_result r = cu_run_spec(&none, CU_ARGS("info"));
    cu_expect(&r, 1, "--backend cpu", "info without a driver");
    print_message("  no driver: %s", r.err);
    cu_free(&r);
    vka_context *ctx = tu_gpu();
    if (ctx) {
        tu_done(ctx);
        r = cu_run(&d, "info");
        cu_expect(&r, 0, NULL, "info");
        assert_non_null(strstr(r.out, "maxStorageBufferRange"));
        assert_non_null(strstr(r.out, "Selected: device 0"));
        assert_non_null(strstr(r.out, "CPU backend"));
        cu_free(&r);
        r = cu_run(&d, "info", "--json");
        cu_expect(&r, 0, NULL, "info --json");
        assert_non_null(strstr(r.out, "\"devices\":[{\"index\":0,"));
        assert_true(cu_json_num(r.out, "cpu_threads") >= 1);
        assert_true(cu_json_num(r.out, "max_storage_buffer_range") > 0);
        cu_free(&r);
        r = cu_run(&d, "info", "--device", "99");
        cu_expect(&r, 1, "not a device index", "info --device 99");
        cu_free(&r);
    }
    tf_rmdir(&d);
}

static void test_cli_check_json_passes(void **state) {
    (void)state;
    if (!vulkan_can_train()) return;
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "check", "--json");
    cu_expect(&r, 0, NULL, "check --json");
    assert_non_null(strstr(r.out, "\"pass\":true}"));
    assert_true(cu_json_num(r.out, "failed") == 0);
    assert_non_null(strstr(r.out, "\"op\":\"train_step_params\""));
    cu_free(&r);
    tf_rmdir(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_bad_options),
        cmocka_unit_test(test_cli_info),
        cmocka_unit_test(test_cli_train_lowers_loss_cpu),
        cmocka_unit_test(test_cli_train_lowers_loss_vulkan),
        cmocka_unit_test(test_cli_train_profile),
        cmocka_unit_test(test_cli_resume_is_exact_cpu),
        cmocka_unit_test(test_cli_resume_is_exact_vulkan),
        cmocka_unit_test(test_cli_sigint_saves_and_exits),
        cmocka_unit_test(test_cli_failed_save_keeps_the_old_model),
        cmocka_unit_test(test_cli_generate_prints_prompt_and_tokens),
        cmocka_unit_test(test_cli_generate_greedy_is_deterministic_on_vulkan),
        cmocka_unit_test(test_cli_eval_json_agrees_across_backends),
        cmocka_unit_test(test_cli_bad_data_files),
        cmocka_unit_test(test_cli_bad_model_files),
        cmocka_unit_test(test_cli_text_outside_the_vocabulary),
        cmocka_unit_test(test_cli_config_beyond_the_device),
        cmocka_unit_test(test_cli_check_json_passes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
