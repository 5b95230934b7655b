/* Helpers for test_cli.c: run the built vkattn binary (VKA_CLI_PATH) in a directory, capture
 * its stdout and stderr, and read its JSON lines. Header-only; POSIX (fork/exec). */
#ifndef VKA_CLI_UTIL_H
#define VKA_CLI_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "test_files.h"

#ifndef VKA_CLI_PATH
#error "VKA_CLI_PATH (the vkattn binary) must be defined by tests/CMakeLists.txt"
#endif

#define CU_MAX_ARGS 64

#if defined(__SANITIZE_ADDRESS__)
#define CU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CU_ASAN 1
#endif
#endif
#ifndef CU_ASAN
#define CU_ASAN 0
#endif

/* How to run it: in dir, with extra environment entries ("NAME=value"), and optionally a limit
 * on the size of files it writes (RLIMIT_FSIZE, as `ulimit -f` sets it: SIGXFSZ keeps its
 * default action, which kills a process that writes past the limit unless it ignores it). */
typedef struct cu_spec {
    const tf_dir *dir;
    const char *env[4];
    long fsize_limit; /* bytes; 0 = none */
    const char *stdin_path; /* standard input (a file or a FIFO); NULL = /dev/null */
    long as_limit; /* bytes of address space (RLIMIT_AS), so that a run that would take all of
                    * memory fails to allocate instead; 0 = none; under ASan, which reserves
                    * terabytes of shadow, ASan's hard_rss_limit_mb of as much instead */
} cu_spec;

typedef struct cu_result {
    int status;        /* exit status (when exited) */
    bool exited;       /* a normal exit, not killed by a signal */
    int signal;        /* the signal that killed it, if !exited */
    char *out, *err;   /* captured, NUL-terminated */
    size_t out_len;
} cu_result;

static inline void cu_free(cu_result *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* Start VKA_CLI_PATH with args (NULL-terminated, without argv[0]); stdout and stderr go to
 * dir/.stdout and dir/.stderr. */
static inline pid_t cu_start(const cu_spec *spec, const char *const *args) {
    char *argv[CU_MAX_ARGS + 2];
    int n = 0;
    argv[n++] = (char *)VKA_CLI_PATH;
    for (; args[n - 1] && n <= CU_MAX_ARGS; n++) argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    char out_path[256], err_path[256];
    snprintf(out_path, sizeof out_path, "%s/.stdout", spec->dir->path);
    snprintf(err_path, sizeof err_path, "%s/.stderr", spec->dir->path);
    if (CU_ASAN && spec->as_limit > 0)
        print_message("  (under ASan, which reserves terabytes of shadow memory, RLIMIT_AS is "
                      "skipped: `vkattn %s` runs with ASan's hard_rss_limit_mb=%ld instead)\n",
                      args[0], spec->as_limit >> 20);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fi = open(spec->stdin_path ? spec->stdin_path : "/dev/null", O_RDONLY);
        if (fo < 0 || fe < 0 || fi < 0 || chdir(spec->dir->path) != 0) _exit(126);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        for (int i = 0; i < 4 && spec->env[i]; i++) {
            char name[128];
            const char *eq = strchr(spec->env[i], '=');
            if (!eq || eq - spec->env[i] >= (long)sizeof name) _exit(126);
            snprintf(name, sizeof name, "%.*s", (int)(eq - spec->env[i]), spec->env[i]);
            setenv(name, eq + 1, 1);
        }
        if (spec->fsize_limit > 0) {
            signal(SIGXFSZ, SIG_DFL);
            struct rlimit rl = {(rlim_t)spec->fsize_limit, (rlim_t)spec->fsize_limit};
            setrlimit(RLIMIT_FSIZE, &rl);
        }
#if !CU_ASAN
        if (spec->as_limit > 0) {
            struct rlimit rl = {(rlim_t)spec->as_limit, (rlim_t)spec->as_limit};
            setrlimit(RLIMIT_AS, &rl);
        }
#else
        if (spec->as_limit > 0) { /* ASan's own guard: it ends the process past that RSS */
            const char *old = getenv("ASAN_OPTIONS");
            char opts[512];
            snprintf(opts, sizeof opts, "%s%shard_rss_limit_mb=%ld", old ? old : "",
                     old && old[0] ? ":" : "", spec->as_limit >> 20);
            setenv("ASAN_OPTIONS", opts, 1);
        }
#endif
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* The file's contents, NUL-terminated (empty if missing). */
static inline char *cu_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (f) {
        size_t got;
        while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
            n += got;
            if (cap - n < 2) buf = realloc(buf, cap *= 2);
        }
        fclose(f);
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* Wait for pid and collect its output; a process killed by a signal is a result too. */
static inline cu_result cu_wait_any(const cu_spec *spec, pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
    cu_result r = {0};
    r.exited = WIFEXITED(st);
    r.status = r.exited ? WEXITSTATUS(st) : -1;
    r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    char path[256];
    snprintf(path, sizeof path, "%s/.stdout", spec->dir->path);
    r.out = cu_slurp(path, &r.out_len);
    snprintf(path, sizeof path, "%s/.stderr", spec->dir->path);
    r.err = cu_slurp(path, NULL);
    if (r.status == 126 || r.status == 127) fail_msg("could not run %s", VKA_CLI_PATH);
    return r;
}

/* Wait for pid; it must have exited (a process killed by a signal fails the test). */
static inline cu_result cu_wait(const cu_spec *spec, pid_t pid) {
    cu_result r = cu_wait_any(spec, pid);
    if (!r.exited) fail_msg("vkattn was killed by signal %d; stderr:\n%s", r.signal, r.err);
    return r;
}

/* Run and wait; the result's process exited normally (fails the test otherwise). */
static inline cu_result cu_run_spec(const cu_spec *spec, const char *const *args) {
    return cu_wait(spec, cu_start(spec, args));
}

#define CU_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
/* cu_run(&dir, "train", "--steps", "5") */
#define cu_run(in_dir, ...) cu_run_spec(&(cu_spec){.dir = (in_dir)}, CU_ARGS(__VA_ARGS__))

/* Fail unless r exited with status and err contains part (NULL = anything). */
static inline void cu_expect(const cu_result *r, int status, const char *part, const char *what) {
    if (r->status != status || (part && !strstr(r->err, part)))
        fail_msg("%s: expected exit %d and a message with \"%s\"; got exit %d\nstdout:\n%s\n"
                 "stderr:\n%s", what, status, part ? part : "", r->status, r->out, r->err);
}

/* The number after "key": in the JSON object line (NAN if absent or null). */
static inline double cu_json_num(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return NAN;
    p += strlen(pat);
    char *end = NULL;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

/* The idx-th line (0-based) of text containing part: its start and length; NULL if none. */
static inline const char *cu_find_line(const char *text, const char *part, int idx, size_t *len) {
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        const char *hit = strstr(p, part);
        if (hit && hit + strlen(part) <= p + n && idx-- == 0) {
            *len = n;
            return p;
        }
        p += n + (eol ? 1 : 0);
    }
    return NULL;
}

/* Copy the idx-th line of text containing part into buf (truncated to cap); false if none. */
static inline bool cu_line(const char *text, const char *part, int idx, char *buf, size_t cap) {
    size_t len = 0;
    const char *line = cu_find_line(text, part, idx, &len);
    if (!line) return false;
    if (len >= cap) len = cap - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    return true;
}

/* Number of lines of text containing part. */
static inline int cu_count_lines(const char *text, const char *part) {
    size_t len;
    int n = 0;
    while (cu_find_line(text, part, n, &len)) n++;
    return n;
}

static inline void cu_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Copy file src to dst. */
static inline void cu_copy(const char *src, const char *dst) {
    size_t n;
    unsigned char *data = tf_read(src, &n);
    tf_write(dst, data, n);
    free(data);
}

static inline bool cu_exists(const char *path) { return access(path, F_OK) == 0; }

#endif
