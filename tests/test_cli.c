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

#include <sys/stat.h>

enum { CLI_USAGE_STATUS = 2 }; /* docs/environment.md "Exit codes" */

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

/* Text the fixture's vocabulary covers: the start of the built-in corpus; returns its length. */
static size_t write_eval_text(const char *path, size_t bytes) {
    size_t len = 0;
    char *text = vka_builtin_corpus(bytes, &len);
    assert_non_null(text);
    tf_write(path, text, len);
    free(text);
    return len;
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
    /* The best validation loss is the lowest of the step lines' val_loss, to the last digit
     * (it is stored as a float32; so are the values printed). */
    double best = INFINITY;
    char line[4096];
    for (int i = 0; cu_line(r.out, "\"val_loss\"", i, line, sizeof line); i++)
        if (strstr(line, "\"step\":") && cu_json_num(line, "val_loss") < best)
            best = cu_json_num(line, "val_loss");
    if (cu_json_num(done, "best_val_loss") != best)
        fail_msg("best_val_loss %.9g, lowest val_loss %.9g", cu_json_num(done, "best_val_loss"),
                 best);
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

/* The command a stopped run prints to continue it ("continue with: vkattn train ..."), as
 * arguments (its paths here have no spaces); false if there is none. */
static bool continue_args(const char *err, char *buf, size_t cap, const char **args, int max) {
    const char *p = strstr(err, "continue with: vkattn ");
    if (!p) return false;
    p += strlen("continue with: vkattn ");
    size_t n = strcspn(p, "\n");
    if (n >= cap) return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    int k = 0;
    for (char *tok = strtok(buf, " "); tok && k < max - 2; tok = strtok(NULL, " ")) args[k++] = tok;
    args[k++] = "--json";
    args[k] = NULL;
    return true;
}

/* Every loss of b's step lines equals a's from step `from` on, and the final val_loss too. */
static void expect_same_run(const cu_result *a, const cu_result *b, int from, const char *what) {
    double la[32], lb[32];
    int na = step_losses(a->out, la, 32), nb = step_losses(b->out, lb, 32);
    assert_int_equal(nb, na - from);
    for (int i = 0; i < nb; i++) {
        if (la[from + i] != lb[i])
            fail_msg("%s: step %d: loss %.9g in one run, %.9g resumed", what, from + i + 1,
                     la[from + i], lb[i]);
    }
    char da[4096], db[4096];
    assert_true(cu_line(a->out, "\"event\":\"done\"", 0, da, sizeof da));
    assert_true(cu_line(b->out, "\"event\":\"done\"", 0, db, sizeof db));
    if (cu_json_num(da, "val_loss") != cu_json_num(db, "val_loss"))
        fail_msg("%s: val_loss %.9g in one run, %.9g resumed", what, cu_json_num(da, "val_loss"),
                 cu_json_num(db, "val_loss"));
    assert_true(cu_json_num(db, "val_windows") == cu_json_num(da, "val_windows"));
}

/* A state file of the previous version (1: no eval_windows, header word 31) made from path. */
static void make_v1_state(const char *path, const char *v1_path) {
    size_t n;
    unsigned char *file = tf_read(path, &n);
    uint32_t version = 1, zero = 0;
    memcpy(file + 4, &version, 4);
    memcpy(file + 31 * 4, &zero, 4);
    memset(file + 248 * 4, 0, 32); /* the trailer came with version 4 */
    tf_write(v1_path, file, n);
    free(file);
}

/* 20 steps in one run, and 10 + --resume 10, give the same losses and the same model bytes.
 * The second half is run exactly as the first half's "continue with" line says: the state
 * holds every setting (--eval-windows too), the line adds what it does not (--backend). */
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
    /* The settings come from the state: a different one is refused, whichever it is. */
    const char *const stored[][2] = {{"--lr", "0.5"}, {"--eval-every", "7"},
                                     {"--eval-windows", "5"}, {"--steps", "30"}};
    for (size_t i = 0; i < sizeof stored / sizeof stored[0]; i++) {
        cu_result bad = cu_run(&d, "train", "--backend", backend, "--resume", "b.state.bin",
                               stored[i][0], stored[i][1]);
        cu_expect(&bad, CLI_USAGE_STATUS, stored[i][0], "resume with another setting");
        cu_free(&bad);
    }
    if (strcmp(backend, "cpu") == 0) {
        /* Before the state held --eval-windows: still resumes, taking it from the command line. */
        make_v1_state(tf_path(&d, "b.state.bin"), tf_path(&d, "v1.state.bin"));
        cu_copy(tf_path(&d, "b.tokenizer.bin"), tf_path(&d, "v1.tokenizer.bin"));
        cu_result v1 = cu_run(&d, "train", "--backend", "cpu", "--resume", "v1.state.bin",
                              "--eval-windows", "20", "--json");
        cu_expect(&v1, 0, NULL, "resume a version-1 state");
        expect_same_run(&a, &v1, 10, "version-1 state");
        cu_free(&v1);
    }
    char hint[512];
    const char *args[24];
    if (!continue_args(b.err, hint, sizeof hint, args, 24))
        fail_msg("no \"continue with\" line:\n%s", b.err);
    print_message("continue with: %s\n", strstr(b.err, "continue with: ") + 15);
    bool cpu_hint = strstr(b.err, "--backend cpu") != NULL;
    assert_true(cpu_hint == (strcmp(backend, "cpu") == 0));
    cu_result c = cu_run_spec(&(cu_spec){.dir = &d}, args);
    cu_expect(&c, 0, NULL, "resume as the hint says");
    assert_true(cu_json_num(c.out, "val_windows") == 20); /* the start event */
    expect_same_run(&a, &c, 10, backend);
    print_message("final val %.9g both ways\n", cu_json_num(strstr(c.out, "\"event\":\"done\""),
                                                            "val_loss"));
    /* The resumed run wrote b.bin (derived from b.state.bin), byte for byte a.bin. */
    size_t na, nb;
    unsigned char *ma = tf_read(tf_path(&d, "a.bin"), &na), *mb = tf_read(tf_path(&d, "b.bin"), &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ma, mb, na);
    free(ma);
    free(mb);
    cu_free(&a);
    cu_free(&b);
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

/* Start a long CPU training run in d and return once it has done 3 steps. */
static pid_t start_long_run(const cu_spec *spec, const char *const *args) {
    pid_t pid = cu_start(spec, args);
    char out_path[256];
    snprintf(out_path, sizeof out_path, "%s/.stdout", spec->dir->path);
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
    return pid;
}

/* SIGINT a few steps in: the step finishes, the files are saved, the exit is a normal 130,
 * and the saved state resumes. */
static void test_cli_sigint_saves_and_exits(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    cu_spec spec = {.dir = &d};
    pid_t pid = start_long_run(&spec, CU_ARGS("train", "--backend", "cpu", SMALL, "--steps",
                                              "100000", "--eval-every", "0", "--eval-windows", "5",
                                              "--json"));
    kill(pid, SIGINT);
    cu_result r = cu_wait(&spec, pid);
    cu_expect(&r, 130, "interrupt again to abort", "interrupted run");
    /* The way to continue names the backend, which the state does not hold. */
    assert_non_null(strstr(r.err, "continue with: vkattn train --resume model.state.bin "
                                  "--backend cpu\n"));
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

/* A second interrupt while the first is being handled ends the process at once, by that
 * signal, after one line saying so. (SIGINT then SIGTERM: two different signals cannot merge
 * into one pending signal, so the process sees both.) */
static void test_cli_second_interrupt_aborts(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    cu_spec spec = {.dir = &d};
    pid_t pid = start_long_run(&spec, CU_ARGS("train", "--backend", "cpu", SMALL, "--steps",
                                              "100000", "--eval-every", "0", "--json"));
    kill(pid, SIGINT);
    kill(pid, SIGTERM);
    cu_result r = cu_wait_any(&spec, pid);
    if (r.exited) fail_msg("exited with %d instead of ending by a signal:\n%s", r.status, r.err);
    /* Which one comes second depends on the threads they reach (OpenMP's take signals too). */
    assert_true(r.signal == SIGTERM || r.signal == SIGINT);
    assert_int_equal(cu_count_lines(r.err, "vkattn train: aborted (second interrupt)"), 1);
    cu_free(&r);
    tf_rmdir(&d);
}

static bool same_bytes(const char *p, const char *q) {
    size_t np, nq;
    unsigned char *a = tf_read(p, &np), *b = tf_read(q, &nq);
    bool same = np == nq && memcmp(a, b, np) == 0;
    free(a);
    free(b);
    return same;
}

/* A save that fails part-way replaces nothing: the model, tokenizer and state already there
 * stay a matching set (generate still works), with no staged or temporary file left. Here the
 * file-size limit stops first the state (the largest file) after the model and tokenizer were
 * written, then the model after the tokenizer; the new text has another vocabulary, so a new
 * tokenizer beside the old model would not fit it. */
static void test_cli_failed_save_keeps_the_old_set(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    const char *names[3] = {"model.bin", "model.tokenizer.bin", "model.state.bin"};
    for (int i = 0; i < 3; i++) {
        cu_copy(tf_path(&fixture, names[i]), tf_path(&d, names[i]));
        char keep[64];
        snprintf(keep, sizeof keep, "old.%s", names[i]);
        cu_copy(tf_path(&fixture, names[i]), tf_path(&d, keep));
    }
    char text[800];
    for (size_t i = 0; i < sizeof text; i++) text[i] = "abcdefgh ijk\n"[i % 13];
    tf_write(tf_path(&d, "small.txt"), text, sizeof text);
    size_t model_bytes;
    free(tf_read(fixture_model(), &model_bytes));
    const long limits[2] = {(long)model_bytes + 4096, 16384};
    for (int k = 0; k < 2; k++) {
        cu_spec spec = {.dir = &d, .fsize_limit = limits[k]};
        cu_result r = cu_run_spec(&spec, CU_ARGS("train", "--backend", "cpu", SMALL, "--steps",
                                                 "2", "--eval-windows", "2", "--data",
                                                 "small.txt"));
        cu_expect(&r, 1, "File too large", "save past the size limit");
        assert_non_null(strstr(r.err, "nothing was replaced"));
        print_message("  limit %ld: %s", limits[k], r.err);
        for (int i = 0; i < 3; i++) {
            char keep[64];
            snprintf(keep, sizeof keep, "old.%s", names[i]);
            if (!same_bytes(tf_path(&d, names[i]), tf_path(&d, keep)))
                fail_msg("limit %ld: %s changed", limits[k], names[i]);
        }
        assert_int_equal(tf_count(&d, ".tmp"), 0);
        assert_int_equal(tf_count(&d, ".new"), 0);
        cu_free(&r);
        r = cu_run(&d, "generate", "--backend", "cpu", "--model", "model.bin", "--tokens", "5");
        cu_expect(&r, 0, NULL, "generate from the set the failed save left");
        cu_free(&r);
    }
    tf_rmdir(&d);
}

/* Under a file-size limit (ulimit -f) a write fails with EFBIG instead of SIGXFSZ killing the
 * process: exit 1 with the reason, and no temporary file left. */
static void test_cli_file_size_limit_is_an_error(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    cu_spec spec = {.dir = &d, .fsize_limit = 16384};
    pid_t pid = cu_start(&spec, CU_ARGS("train", "--backend", "cpu", SMALL, "--steps", "2",
                                        "--eval-windows", "2"));
    cu_result r = cu_wait_any(&spec, pid);
    if (!r.exited) fail_msg("killed by signal %d (SIGXFSZ is %d)", r.signal, SIGXFSZ);
    cu_expect(&r, 1, "File too large", "save past the size limit");
    assert_int_equal(tf_count(&d, ".tmp"), 0);
    assert_int_equal(tf_count(&d, ".new"), 0);
    assert_false(cu_exists(tf_path(&d, "model.bin")));
    cu_free(&r);
    tf_rmdir(&d);
}

/* No output may be an input: --out (or the names derived from it) equal to --data, through a
 * symbolic link too, or to the state being resumed, is refused before anything is written. */
static void test_cli_out_never_overwrites_an_input(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    size_t text_len = write_eval_text(tf_path(&d, "text.txt"), 4000);
    cu_copy(tf_path(&d, "text.txt"), tf_path(&d, "m.tokenizer.bin"));
    cu_copy(tf_path(&d, "text.txt"), tf_path(&d, "s.bin.new"));
    cu_copy(tf_path(&fixture, "model.state.bin"), tf_path(&d, "r.state.bin"));
    cu_copy(tf_path(&fixture, "model.tokenizer.bin"), tf_path(&d, "r.tokenizer.bin"));
    if (symlink("text.txt", tf_path(&d, "link.bin")) != 0) fail_msg("symlink failed");
    const struct {
        const char *args[8];
        const char *message;
    } cases[] = {
        {{"--data", "text.txt", "--out", "text.txt"}, "is the training text (--data)"},
        {{"--data", "text.txt", "--out", "./link.bin"}, "is the training text (--data)"},
        {{"--data", "m.tokenizer.bin", "--out", "m.bin"}, "the tokenizer would be written to"},
        {{"--data", "s.bin.new", "--out", "s.bin"}, "the model's staging file would be written"},
        {{"--resume", "r.state.bin", "--out", "r.state.bin"}, "the training state resumed from"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16] = {"train", "--backend", "cpu"};
        int n = 3;
        if (strcmp(cases[i].args[0], "--resume") != 0) { /* else the state holds --steps */
            args[n++] = "--steps";
            args[n++] = "2";
        }
        for (int k = 0; cases[i].args[k]; k++) args[n++] = cases[i].args[k];
        args[n] = NULL;
        cu_result r = cu_run_spec(&(cu_spec){.dir = &d}, args);
        cu_expect(&r, CLI_USAGE_STATUS, cases[i].message, cases[i].args[3]);
        print_message("  ok: %s", r.err);
        cu_free(&r);
    }
    assert_true(same_bytes(tf_path(&d, "r.state.bin"), tf_path(&fixture, "model.state.bin")));
    size_t n;
    unsigned char *text = tf_read(tf_path(&d, "text.txt"), &n);
    assert_int_equal(n, text_len);
    free(text);
    assert_int_equal(tf_count(&d, ".bin"), 5); /* m.tokenizer, s.bin.new, r.state, r.tokenizer, link */
    tf_rmdir(&d);
}

/* An --out whose directory is missing (or is a file), or that is a directory, fails before
 * the first step, not after the last. */
static void test_cli_unwritable_out_fails_before_training(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    write_eval_text(tf_path(&d, "text.txt"), 4000);
    const struct {
        const char *out, *message;
    } cases[] = {
        {"missing/model.bin", "the directory missing does not exist"},
        {"text.txt/model.bin", "text.txt is not a directory"},
        {".", ". is a directory"},
        /* the suggestion has one slash, not "sub//model.bin" */
        {"sub/", "sub/ is a directory; give --out a file name such as sub/model.bin\n"},
    };
    if (mkdir(tf_path(&d, "sub"), 0755) != 0) fail_msg("mkdir failed");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "5", "--out",
                             cases[i].out, "--json");
        cu_expect(&r, 1, cases[i].message, cases[i].out);
        assert_int_equal(cu_count_lines(r.out, "\"step\":"), 0);
        print_message("  ok: %s", r.err);
        cu_free(&r);
    }
    rmdir(tf_path(&d, "sub"));
    assert_int_equal(tf_count(&d, ""), 3); /* text.txt, .stdout, .stderr */
    tf_rmdir(&d);
}

/* A resumed run without --data asks whether --data was forgotten: the state's text is not the
 * built-in corpus (exit 2, test_cli_train.c has more), or -- from a version-2 state, which did
 * not record its text -- the text has characters outside the vocabulary, or another one. */
static void test_cli_resume_without_data_hints(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    char text[800];
    for (size_t i = 0; i < sizeof text; i++) text[i] = "abcdefgh ijk\n"[i % 13];
    tf_write(tf_path(&d, "small.txt"), text, sizeof text);
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "4", "--stop-at", "2",
                         "--data", "small.txt", "--quiet");
    cu_expect(&r, 0, NULL, "2 of 4 steps");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "model.state.bin");
    cu_expect(&r, CLI_USAGE_STATUS, "did you forget --data?", "resume without --data");
    assert_non_null(strstr(r.err, "the built-in corpus is 1048"));
    print_message("  ok: %s", r.err);
    cu_free(&r);
    /* version 2: words 34..38 unread */
    size_t n;
    unsigned char *file = tf_read(tf_path(&d, "model.state.bin"), &n);
    uint32_t version = 2;
    memcpy(file + 4, &version, 4);
    memset(file + 248 * 4, 0, 32); /* the trailer came with version 4 */
    tf_write(tf_path(&d, "v2.state.bin"), file, n);
    free(file);
    cu_copy(tf_path(&d, "model.tokenizer.bin"), tf_path(&d, "v2.tokenizer.bin"));
    /* with its tokenizer: the built-in corpus has characters small.txt has not */
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "v2.state.bin");
    cu_expect(&r, 1, "did you forget --data?", "resume v2 without --data");
    print_message("  ok: %s", r.err);
    cu_free(&r);
    /* without it: the built-in corpus's vocabulary is not the model's */
    remove(tf_path(&d, "v2.tokenizer.bin"));
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "v2.state.bin");
    cu_expect(&r, 1, "did you forget --data?", "resume v2 without --data or tokenizer");
    print_message("  ok: %s", r.err);
    cu_free(&r);
    /* and with it, it resumes (and records the text from now on) */
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "v2.state.bin", "--data", "small.txt",
               "--json");
    cu_expect(&r, 0, NULL, "resume v2 with --data");
    assert_int_equal(cu_count_lines(r.out, "\"step\":"), 2);
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

/* --no-kv-cache (recompute per token) prints what the KV cache does, greedy, on both backends,
 * for more characters than the model's context (the cache refills its last half). */
static void test_cli_generate_kv_cache_matches_recompute(void **state) {
    (void)state;
    const char *backends[2] = {"cpu", "vulkan"};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !vulkan_can_train()) return;
        cu_result a = generate(backends[i], "The cat", "150", "0");
        cu_expect(&a, 0, NULL, "generate");
        cu_result b = cu_run(&fixture, "generate", "--backend", backends[i], "--model",
                             "model.bin", "--prompt", "The cat", "--tokens", "150",
                             "--temperature", "0", "--no-kv-cache");
        cu_expect(&b, 0, NULL, "generate --no-kv-cache");
        assert_int_equal(a.out_len, strlen("The cat") + 150);
        assert_string_equal(a.out, b.out);
        cu_free(&a);
        cu_free(&b);
    }
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
    /* Windows of T+1 = 33 tokens at 0, 32, 64, ...: floor((n - 1) / 32) of them; "tokens" is
     * the predictions scored, 32 a window, "file_tokens" the file's length. */
    double windows = floor((n - 1) / 32);
    assert_true(cu_json_num(c.out, "windows") == windows);
    assert_true(cu_json_num(c.out, "tokens") == windows * 32);
    assert_true(cu_json_num(c.out, "file_tokens") == n);
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

/* A model far more confident than right (the final layer norm's weights scaled up, so its
 * logits are): eval prints its perplexity, exp(loss) > 10^6, in exponent form. */
static void test_cli_eval_huge_perplexity(void **state) {
    (void)state;
    write_eval_text(tf_path(&fixture, "eval.txt"), 20000);
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_load(ctx, fixture_model(), &gpt), VKA_SUCCESS);
    size_t n = vka_gpt_num_params(gpt);
    int C = vka_gpt_get_config(gpt).C;
    float *p = malloc(n * sizeof *p);
    assert_int_equal(vka_gpt_get_params(gpt, p, n), VKA_SUCCESS);
    for (size_t i = n - 2 * (size_t)C; i < n; i++) p[i] *= 40.0f; /* lnfw, lnfb: the last 2C */
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    assert_int_equal(vka_gpt_save(gpt, tf_path(&fixture, "hot.bin")), VKA_SUCCESS);
    free(p);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
    cu_copy(tf_path(&fixture, "model.tokenizer.bin"), tf_path(&fixture, "hot.tokenizer.bin"));
    cu_result j = cu_run(&fixture, "eval", "--backend", "cpu", "--model", "hot.bin", "--data",
                         "eval.txt", "--json");
    cu_expect(&j, 0, NULL, "eval --json");
    double loss = cu_json_num(j.out, "loss");
    print_message("loss %.4f, perplexity %g\n", loss, cu_json_num(j.out, "perplexity"));
    assert_true(loss > log(1e6) && loss < 700); /* finite, and past 10^6 */
    cu_result t = cu_run(&fixture, "eval", "--backend", "cpu", "--model", "hot.bin", "--data",
                         "eval.txt");
    cu_expect(&t, 0, NULL, "eval");
    print_message("%s", t.out);
    const char *ppl = strstr(t.out, "perplexity ");
    assert_non_null(ppl);
    double printed = strtod(ppl + strlen("perplexity "), NULL);
    assert_true(fabs(printed - exp(loss)) < 1e-3 * exp(loss));
    size_t digits = strcspn(ppl + strlen("perplexity "), "e,");
    if (digits > 6 || !strstr(ppl, "e+"))
        fail_msg("perplexity not in exponent form: %s", t.out);
    cu_free(&j);
    cu_free(&t);
}

/* A file shorter than one window, and a tokenizer that does not fit the model: messages in
 * the command line's words (no library function names), with the right plural. */
static void test_cli_eval_messages(void **state) {
    (void)state;
    tf_write(tf_path(&fixture, "tiny.txt"), "to be or not", 12);
    cu_result r = cu_run(&fixture, "eval", "--backend", "cpu", "--model", "model.bin", "--data",
                         "tiny.txt");
    cu_expect(&r, 1, "vkattn eval: tiny.txt: 12 tokens, fewer than one window of T+1 = 33 tokens "
              "(--ctx)", "eval of a too short file");
    assert_null(strstr(r.err, "vka_"));
    cu_free(&r);
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, "aaaa", 4, &tok), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_save(tok, tf_path(&fixture, "one.tokenizer.bin")), VKA_SUCCESS);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
    r = cu_run(&fixture, "eval", "--backend", "cpu", "--model", "model.bin", "--data",
               "tiny.txt", "--tokenizer", "one.tokenizer.bin");
    cu_expect(&r, 1, "has 1 token but the model model.bin has V = ", "eval");
    cu_free(&r);
    r = cu_run(&fixture, "generate", "--backend", "cpu", "--model", "model.bin", "--tokenizer",
               "one.tokenizer.bin");
    cu_expect(&r, 1, "has 1 token but the model model.bin has V = ", "generate");
    cu_free(&r);
}

/* Without --prompt the prompt is a newline; a vocabulary without one gets its first token
 * (the smallest byte), and stderr says so. */
static void test_cli_generate_default_prompt_without_newline(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    char text[800];
    for (size_t i = 0; i < sizeof text; i++) text[i] = "abcdefgh ijk."[i % 13];
    tf_write(tf_path(&d, "line.txt"), text, sizeof text);
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "2", "--eval-windows",
                         "2", "--data", "line.txt", "--quiet");
    cu_expect(&r, 0, NULL, "train on text without a newline");
    cu_free(&r);
    r = cu_run(&d, "generate", "--backend", "cpu", "--model", "model.bin", "--tokens", "5",
               "--temperature", "0");
    cu_expect(&r, 0, "the vocabulary has no newline", "generate without --prompt");
    assert_non_null(strstr(r.err, "byte 0x20 ' '"));
    assert_int_equal(r.out_len, 1 + 5);
    assert_int_equal(r.out[0], ' ');
    print_message("  ok: %s", r.err);
    cu_free(&r);
    tf_rmdir(&d);
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
    /* a training state where a model is expected (no tokenizer beside it: the model is the
     * problem to report) */
    cu_copy(tf_path(&fixture, "model.state.bin"), tf_path(&d, "x.state.bin"));
    const struct {
        const char *model, *message;
    } cases[] = {
        {"short.bin", "truncated"},
        {"magic.bin", "wrong magic"},
        {"alone.bin", "--tokenizer"},
        {"missing.bin", "model: cannot open missing.bin"},
        {"x.state.bin", "x.state.bin is a training state, not a model (llm.c GPT-2 checkpoint): "
                        "give the model saved beside it (x.bin), or continue training with "
                        "`vkattn train --resume x.state.bin`"},
        {"/bin/ls", "/bin/ls is an executable program, not a model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cu_result r = cu_run(&d, "generate", "--backend", "cpu", "--model", cases[i].model,
                             "--tokens", "3");
        cu_expect(&r, 1, cases[i].message, cases[i].model);
        /* The command line's words, not the library's function names. */
        assert_null(strstr(r.err, "vka_"));
        print_message("  ok: %s", r.err);
        cu_free(&r);
    }
    /* --resume of something that is not a state file */
    cu_result r = cu_run(&d, "train", "--backend", "cpu", "--resume", "magic.bin");
    cu_expect(&r, 1, "wrong magic", "resume from junk");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "alone.bin");
    cu_expect(&r, 1, "alone.bin is a model (llm.c GPT-2 checkpoint), not a training state",
              "resume from a model");
    assert_null(strstr(r.err, "vka_"));
    cu_free(&r);
    /* a model where a tokenizer is expected */
    r = cu_run(&d, "generate", "--backend", "cpu", "--model", "alone.bin", "--tokenizer",
               "alone.bin");
    cu_expect(&r, 1, "alone.bin is a model (llm.c GPT-2 checkpoint), not a tokenizer file",
              "--tokenizer a model");
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

/* A model beyond the device: the message says which tensor or arena and the sizes. C = 16384:
 * one layer's fcw alone is 4 * 16384^2 * 4 bytes = 4 GiB, past lavapipe's
 * maxMemoryAllocationSize (2 GiB), so nothing is allocated; on a GPU it may instead pass the
 * device-local heap (two layers' parameters are 24 GiB). */
static void test_cli_config_beyond_the_device(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    if (!ctx) return;
    tu_done(ctx);
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "train", "--embd", "16384", "--heads", "8", "--layers", "2",
                         "--steps", "1");
    cu_expect(&r, 1, "MiB", "--embd 16384");
    assert_true(strstr(r.err, "the device has") || strstr(r.err, "maxMemoryAllocationSize"));
    print_message("  ok: %s", r.err);
    assert_false(cu_exists(tf_path(&d, "model.bin")));
    cu_free(&r);
    tf_rmdir(&d);
}

static void test_cli_bad_options(void **state) {
    (void)state;
    const struct {
        const char *args[10];
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
        /* options the chosen backend would ignore */
        {{"train", "--backend", "cpu", "--kernels", "gpu"}, "--kernels chooses Vulkan kernel"},
        {{"eval", "--model", "m", "--data", "d", "--backend", "cpu", "--device", "0"},
         "--device selects a Vulkan device"},
        {{"generate", "--model", "m.bin", "--threads", "2"}, "--threads sets the CPU backend's"},
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

/* A malformed VKATTN_* value is a usage error (exit 2) naming the variable, whichever backend
 * the command runs (a Vulkan-only variable under --backend cpu too, and the other way round),
 * before anything runs. */
static void test_cli_bad_variables_are_usage_errors(void **state) {
    (void)state;
    static const char *const bad[] = {
        "VKATTN_DEVICE=abc",       "VKATTN_MAX_MEMORY_BYTES=0", "VKATTN_VALIDATION=2",
        "VKATTN_CPU_KERNELS=abc",  "VKATTN_TEXEL_LOADS=2",      "VKATTN_KERNELS=bogus",
        "VKATTN_TEST_FAIL_ALLOC=-1", "VKATTN_MAX_TENSOR_BYTES= 65536",
        "VKATTN_TEXT_PIECE_BYTES=18446744073709551615",
    };
    static const char *const backends[] = {"cpu", "vulkan"};
    tf_dir d = tf_mkdir();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int b = 0; b < 2; b++) {
            char name[64], what[128];
            snprintf(name, sizeof name, "%.*s=\"", (int)strcspn(bad[i], "="), bad[i]);
            snprintf(what, sizeof what, "%s train --backend %s", bad[i], backends[b]);
            cu_result r = cu_run_spec(&(cu_spec){.dir = &d, .env = {bad[i]}},
                                      CU_ARGS("train", "--backend", backends[b], "--steps", "1"));
            cu_expect(&r, CLI_USAGE_STATUS, name, what);
            if (r.out[0]) fail_msg("%s: it ran before refusing:\n%s", what, r.out);
            cu_free(&r);
        }
    /* The byte-size message gives the range. */
    cu_result r = cu_run_spec(&(cu_spec){.dir = &d, .env = {bad[8]}},
                              CU_ARGS("train", "--backend", "cpu", "--steps", "1"));
    cu_expect(&r, CLI_USAGE_STATUS, "is not a number of bytes from 1 to 4611686018427387903",
              bad[8]);
    cu_free(&r);
    tf_rmdir(&d);
}

/* ---------------------------------------------------------------------------------------------
 * info and check
 * ------------------------------------------------------------------------------------------- */

static void test_cli_info(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    /* No Vulkan driver at all: a clear message, exit 1; info and check, which have no
     * --backend, say that they need a device and that the other commands have --backend cpu
     * (never "use --backend cpu" as if it were theirs). */
    cu_spec none = {.dir = &d, .env = {"VK_ICD_FILENAMES=/nonexistent.json",
                                        "VK_DRIVER_FILES=/nonexistent.json"}};
    const char *const vulkan_only[] = {"info", "check"};
    for (int i = 0; i < 2; i++) {
        cu_result r = cu_run_spec(&none, CU_ARGS(vulkan_only[i]));
        cu_expect(&r, 1, "needs a working Vulkan device", vulkan_only[i]);
        assert_non_null(strstr(r.err, "train, generate and eval also run without one, with "
                                      "--backend cpu"));
        assert_null(strstr(r.err, "use --backend cpu"));
        assert_null(strstr(r.err, "add --backend cpu"));
        print_message("  no driver: %s", r.err);
        cu_free(&r);
    }
    cu_result r = cu_run_spec(&none, CU_ARGS("generate", "--model", "m.bin"));
    cu_expect(&r, 1, "--backend cpu", "generate without a driver");
    cu_free(&r);
    vka_context *ctx = tu_gpu();
    if (ctx) {
        /* the 16-bit path the library reports for the selected device, as info prints it */
        vka_device_info sel;
        assert_int_equal(vka_context_selected_device(ctx, &sel), VKA_SUCCESS);
        char line[320];
        const char *packed = "the kernels read bf16 and fp16 as packed 32-bit words, fp32 arithmetic";
        char off[160];
        snprintf(off, sizeof off, "VKATTN_16BIT_STORAGE=0: %s", packed);
        snprintf(line, sizeof line, "16-bit data                %s (%s)\n",
                 vka_16bit_path_string(sel.path_16bit),
                 sel.path_16bit == VKA_16BIT_STORAGE
                     ? "16-bit loads and stores in kv_write and the storage-buffer builds of "
                       "layernorm forward, matmul and crossentropy backward; packed 32-bit words "
                       "in the texel builds and the other kernels; fp32 arithmetic"
                 : sel.storage_16bit ? off
                                     : packed);
        tu_done(ctx);
        r = cu_run(&d, "info");
        cu_expect(&r, 0, NULL, "info");
        assert_non_null(strstr(r.out, "maxStorageBufferRange"));
        assert_non_null(strstr(r.out, "Selected: device 0"));
        assert_non_null(strstr(r.out, "CPU backend"));
        if (!strstr(r.out, line)) fail_msg("info does not say \"%s\":\n%s", line, r.out);
        assert_non_null(strstr(r.out, "CPU backend 16-bit data: host: converted by the CPU ("));
        cu_free(&r);
        r = cu_run(&d, "info", "--json");
        cu_expect(&r, 0, NULL, "info --json");
        snprintf(line, sizeof line, "\"path_16bit\":\"%s\"", vka_16bit_path_string(sel.path_16bit));
        assert_non_null(strstr(r.out, line));
        assert_non_null(strstr(r.out, "\"cpu_path_16bit\":\"host: converted by the CPU ("));
        assert_non_null(strstr(r.out, "\"devices\":[{\"index\":0,"));
        assert_true(cu_json_num(r.out, "cpu_threads") >= 1);
        assert_true(cu_json_num(r.out, "max_storage_buffer_range") > 0);
        cu_free(&r);
        r = cu_run(&d, "info", "--device", "99");
        cu_expect(&r, 1, "not a device index", "info --device 99");
        cu_free(&r);
        /* where the CPU backend's thread count came from; OMP_NUM_THREADS past --threads' limit
         * (which crashed libgomp) is capped at it */
        r = cu_run_spec(&(cu_spec){.dir = &d, .env = {"OMP_NUM_THREADS=3"}}, CU_ARGS("info"));
        cu_expect(&r, 0, NULL, "OMP_NUM_THREADS=3 info");
        assert_non_null(strstr(r.out, "CPU backend (--backend cpu): 3 thread(s) "
                                      "(OMP_NUM_THREADS=3; --threads overrides it)\n"));
        cu_free(&r);
        r = cu_run_spec(&(cu_spec){.dir = &d, .env = {"OMP_NUM_THREADS=100000"}},
                        CU_ARGS("info", "--json"));
        cu_expect(&r, 0, NULL, "OMP_NUM_THREADS=100000 info --json");
        assert_int_equal((int)cu_json_num(r.out, "cpu_threads"), VKA_CPU_MAX_THREADS);
        cu_free(&r);
        r = cu_run_spec(&(cu_spec){.dir = &d, .env = {"OMP_NUM_THREADS=100000"}}, CU_ARGS("info"));
        cu_expect(&r, 0, NULL, "OMP_NUM_THREADS=100000 info");
        assert_non_null(strstr(r.out, "4096 thread(s) (OMP_NUM_THREADS=100000, capped at 4096"));
        cu_free(&r);
        if (!getenv("OMP_NUM_THREADS")) {
            r = cu_run(&d, "info");
            cu_expect(&r, 0, NULL, "info");
            assert_non_null(strstr(r.out, "thread(s) (OpenMP's default: the CPUs; --threads or "
                                          "OMP_NUM_THREADS sets it)\n"));
            cu_free(&r);
        }
    }
    /* the library says it capped the count (an info message: --verbose) */
    r = cu_run_spec(&(cu_spec){.dir = &d, .env = {"OMP_NUM_THREADS=100000"}},
                    CU_ARGS("generate", "--backend", "cpu", "--verbose", "--model", "none.bin"));
    cu_expect(&r, 1, "OpenMP's default of 100000 threads (OMP_NUM_THREADS) is capped at 4096",
              "OMP_NUM_THREADS=100000 generate --verbose");
    assert_non_null(strstr(r.err, "cpu backend: 4096 thread(s)"));
    cu_free(&r);
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
    /* the 16-bit rows: the model's mixed precision and the widest op name */
    assert_non_null(strstr(r.out, "\"op\":\"train_step_params bf16\""));
    assert_non_null(strstr(r.out, "\"op\":\"crossentropy_forward_backward f16\""));
    assert_non_null(strstr(r.out, "\"path_16bit\":\""));
    cu_free(&r);
    /* The table: every row's columns line up, however long its shape. */
    r = cu_run(&d, "check");
    cu_expect(&r, 0, NULL, "check");
    assert_non_null(strstr(r.out, "\n16-bit data: "));
    char header[512], row[512];
    assert_true(cu_line(r.out, "max abs", 0, header, sizeof header));
    size_t col = (size_t)(strstr(header, "result") - header);
    int rows = 0;
    for (int i = 0; cu_line(r.out, "PASS", i, row, sizeof row); i++, rows++)
        if (strlen(row) < col + 4 || strncmp(row + col, "PASS", 4) != 0)
            fail_msg("row %d's result is not under the header's:\n%s\n%s", i, header, row);
    assert_true(rows >= 20);
    cu_free(&r);
    tf_rmdir(&d);
}

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_cli_bad_options),
        cmocka_unit_test(test_cli_bad_variables_are_usage_errors),
        cmocka_unit_test(test_cli_info),
        cmocka_unit_test(test_cli_train_lowers_loss_cpu),
        cmocka_unit_test(test_cli_train_profile),
        cmocka_unit_test(test_cli_resume_is_exact_cpu),
        cmocka_unit_test(test_cli_resume_is_exact_vulkan),
        cmocka_unit_test(test_cli_sigint_saves_and_exits),
        cmocka_unit_test(test_cli_second_interrupt_aborts),
        cmocka_unit_test(test_cli_failed_save_keeps_the_old_set),
        cmocka_unit_test(test_cli_file_size_limit_is_an_error),
        cmocka_unit_test(test_cli_out_never_overwrites_an_input),
        cmocka_unit_test(test_cli_unwritable_out_fails_before_training),
        cmocka_unit_test(test_cli_resume_without_data_hints),
        cmocka_unit_test(test_cli_generate_prints_prompt_and_tokens),
        cmocka_unit_test(test_cli_generate_greedy_is_deterministic_on_vulkan),
        cmocka_unit_test(test_cli_generate_kv_cache_matches_recompute),
        cmocka_unit_test(test_cli_eval_json_agrees_across_backends),
        cmocka_unit_test(test_cli_eval_huge_perplexity),
        cmocka_unit_test(test_cli_eval_messages),
        cmocka_unit_test(test_cli_generate_default_prompt_without_newline),
        cmocka_unit_test(test_cli_bad_data_files),
        cmocka_unit_test(test_cli_bad_model_files),
        cmocka_unit_test(test_cli_text_outside_the_vocabulary),
        cmocka_unit_test(test_cli_config_beyond_the_device),
    };
    /* The two slowest on lavapipe (tests/CMakeLists.txt, VKA_SPLIT_PROGRAMS): `check` runs every
     * op on both backends; a Vulkan training run to a lower loss (resume_is_exact_vulkan trains
     * on Vulkan in the quick group). */
    const struct CMUnitTest exhaustive[] = {
        cmocka_unit_test(test_cli_check_json_passes),
        cmocka_unit_test(test_cli_train_lowers_loss_vulkan),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, group_setup, group_teardown);
}
