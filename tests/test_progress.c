/*
 * The updating progress line (tools/progress.c, compiled into this test): fields are dropped
 * whole, least important first, until the line fits the width; the ETA comes from the steps
 * after the first (none on the first); and `vkattn train` run on a pseudo-terminal of 40, 60,
 * 80 and 200 columns draws every progress line within the width, the first without an ETA.
 */
#define _DEFAULT_SOURCE /* openpty, TIOCSWINSZ */
#include "cli_util.h"

#include <pty.h>
#include <sys/ioctl.h>

#include "progress.h"

/* train's fields (tools/train_report.c) at their widest plausible values */
static const progress_field TRAIN[] = {
    {"step 1234/5000", 0}, {"loss 3.1416", 1},   {"val 3.2000 (1.2345 bpb)", 2},
    {"lr 3.00e-04", 5},    {"12.3 ms/step", 4}, {"123456 tok/s", 6},
    {"ETA 1h02m", 3}};
enum { N_TRAIN = sizeof TRAIN / sizeof TRAIN[0] };

static bool kept(const char *line, const char *field) { return strstr(line, field) != NULL; }

/* At every width the line fits, the most important fields stay, and whenever a field is
 * missing every field ranked after it is missing too (no field is ever cut). */
static void test_progress_fit_drops_least_important_first(void **state) {
    (void)state;
    const int widths[] = {14, 20, 27, 40, 60, 79, 80, 120, 200};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        char line[512];
        size_t len = progress_fit(TRAIN, N_TRAIN, " | ", widths[w], line, sizeof line);
        if (len != strlen(line) || len > (size_t)widths[w])
            fail_msg("width %d: %zu columns: \"%s\"", widths[w], strlen(line), line);
        assert_true(kept(line, "step 1234/5000"));
        for (int i = 0; i < N_TRAIN; i++) {
            if (kept(line, TRAIN[i].text)) continue;
            for (int j = 0; j < N_TRAIN; j++)
                if (TRAIN[j].rank > TRAIN[i].rank && kept(line, TRAIN[j].text))
                    fail_msg("width %d: \"%s\" kept, \"%s\" dropped: \"%s\"", widths[w],
                             TRAIN[j].text, TRAIN[i].text, line);
        }
        /* every " | "-separated piece is a whole field */
        char copy[512];
        snprintf(copy, sizeof copy, "%s", line);
        for (char *p = copy, *e; p; p = e ? e + 3 : NULL) {
            if ((e = strstr(p, " | "))) *e = '\0';
            bool whole = false;
            for (int i = 0; i < N_TRAIN; i++) whole |= strcmp(p, TRAIN[i].text) == 0;
            if (!whole) fail_msg("width %d: \"%s\" is not a whole field", widths[w], p);
        }
    }
    char line[512];
    progress_fit(TRAIN, N_TRAIN, " | ", 200, line, sizeof line); /* all fit: all, in order */
    assert_string_equal(line, "step 1234/5000 | loss 3.1416 | val 3.2000 (1.2345 bpb) | "
                              "lr 3.00e-04 | 12.3 ms/step | 123456 tok/s | ETA 1h02m");
    /* strictly by rank: ETA would fit without val, but goes before it */
    progress_fit(TRAIN, N_TRAIN, " | ", 50, line, sizeof line);
    assert_string_equal(line, "step 1234/5000 | loss 3.1416");
    progress_fit(TRAIN, N_TRAIN, " | ", 80, line, sizeof line);
    assert_string_equal(line, "step 1234/5000 | loss 3.1416 | val 3.2000 (1.2345 bpb) | ETA 1h02m");
}

/* Absent fields take no separator; a first field wider than the width is cut to it; a small
 * buffer is never overrun. */
static void test_progress_fit_edges(void **state) {
    (void)state;
    const progress_field f[] = {{"alpha", 0}, {"", 1}, {NULL, 1}, {"beta", 2}};
    char line[64];
    assert_int_equal(progress_fit(f, 4, " ", 80, line, sizeof line), 10);
    assert_string_equal(line, "alpha beta");
    assert_int_equal(progress_fit(f, 4, " ", 3, line, sizeof line), 3);
    assert_string_equal(line, "alp");
    assert_int_equal(progress_fit(f, 4, " ", 0, line, sizeof line), 0);
    char small[4];
    assert_int_equal(progress_fit(f, 4, " ", 80, small, sizeof small), 3);
    assert_string_equal(small, "alp");
    const progress_field same[] = {{"a", 1}, {"b", 0}, {"c", 1}}; /* equal ranks: later first */
    progress_fit(same, 3, " ", 3, line, sizeof line);
    assert_string_equal(line, "a b");
}

/* The ETA is the pace of the timed steps (those after the first, which builds the pipelines)
 * times the steps left; before any is timed it is "--", never an estimate from the first. */
static void test_progress_eta_ignores_the_first_step(void **state) {
    (void)state;
    char eta[48];
    /* After the first step (1230 s of pipeline builds on a slow driver) nothing is timed. */
    progress_eta(0.0, 0, 199, eta, sizeof eta);
    assert_string_equal(eta, "ETA --");
    progress_eta(0.5, 2, 10, eta, sizeof eta); /* 0.25 s a step */
    assert_string_equal(eta, "ETA 2s");
    progress_eta(20.0, 200, 1800, eta, sizeof eta);
    assert_string_equal(eta, "ETA 3m00s");
    progress_eta(3.0, 1, 1500, eta, sizeof eta);
    assert_string_equal(eta, "ETA 1h15m");
    progress_eta(0.0, 0, 0, eta, sizeof eta); /* a one-step run: nothing left */
    assert_string_equal(eta, "ETA 0s");
    progress_eta(1e9, 1, 1, eta, sizeof eta);
    assert_string_equal(eta, "ETA ?");
}

/* Run train with stdout on a pty of cols columns; returns everything it wrote there. */
static char *train_on_pty(const tf_dir *d, int cols) {
    int master = -1, slave = -1;
    struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
    if (openpty(&master, &slave, NULL, NULL, &ws) != 0) fail_msg("openpty: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        char err_path[256];
        snprintf(err_path, sizeof err_path, "%s/.stderr", d->path);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fi = open("/dev/null", O_RDONLY);
        if (fe < 0 || fi < 0 || chdir(d->path) != 0) _exit(126);
        dup2(fi, 0);
        dup2(slave, 1);
        dup2(fe, 2);
        close(master);
        unsetenv("COLUMNS");
        execl(VKA_CLI_PATH, VKA_CLI_PATH, "train", "--backend", "cpu", "--layers", "1",
              "--heads", "2", "--embd", "16", "--ctx", "16", "--batch", "2", "--steps", "30",
              "--eval-every", "10", "--eval-windows", "8", (char *)NULL);
        _exit(127);
    }
    close(slave);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) { /* until EIO: the child closed its end */
        if (cap - n < 4096) buf = realloc(buf, cap *= 2);
        ssize_t got = read(master, buf + n, cap - n - 1);
        if (got > 0) n += (size_t)got;
        else if (got < 0 && errno == EINTR) continue;
        else break;
    }
    buf[n] = '\0';
    close(master);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char *err = cu_slurp(tf_path(d, ".stderr"), NULL);
        fail_msg("train on a %d-column pty failed (status %d):\n%s", cols, st, err);
    }
    return buf;
}

/* Every progress line drawn (the pieces between \r and \n that start with "step"), less its
 * erase-to-end-of-line, is narrower than the terminal and keeps step and loss; at 200 columns
 * nothing is dropped. */
static void test_train_progress_fits_the_terminal(void **state) {
    (void)state;
    const int widths[] = {40, 60, 80, 200};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        tf_dir d = tf_mkdir();
        char *out = train_on_pty(&d, widths[w]);
        int lines = 0, timed = 0;
        for (char *p = out; *p;) {
            size_t len = strcspn(p, "\r\n");
            char piece[1024];
            snprintf(piece, sizeof piece, "%.*s", (int)(len < 1023 ? len : 1023), p);
            p += len;
            while (*p == '\r' || *p == '\n') p++;
            char *text = piece;
            if (strncmp(text, "\033[K", 3) == 0) text += 3;
            if (strncmp(text, "step ", 5) != 0) continue;
            lines++;
            if (strlen(text) >= (size_t)widths[w])
                fail_msg("%d columns: a %zu-column line: \"%s\"", widths[w], strlen(text), text);
            assert_non_null(strstr(text, "loss "));
            if (widths[w] == 200) {
                assert_non_null(strstr(text, "tok/s | ETA "));
                /* The first step's line has no estimate yet; the later ones have one. */
                bool first = strncmp(text, "step  1/30 ", 11) == 0;
                if (first != (strstr(text, "ETA --") != NULL))
                    fail_msg("200 columns: %s", text);
                timed += !first;
            }
        }
        if (widths[w] == 200 && timed < 2) fail_msg("200 columns: %d timed lines in:\n%s", timed, out);
        if (lines < 3) fail_msg("%d columns: %d progress lines in:\n%s", widths[w], lines, out);
        free(out);
        tf_rmdir(&d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_progress_fit_drops_least_important_first),
        cmocka_unit_test(test_progress_fit_edges),
        cmocka_unit_test(test_progress_eta_ignores_the_first_step),
        cmocka_unit_test(test_train_progress_fits_the_terminal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
