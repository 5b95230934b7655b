/* File helpers for the tokenizer, data and checkpoint tests (header-only; POSIX). Each test
 * works in its own fresh directory under /tmp, removed at the end. */
#ifndef VKA_TEST_FILES_H
#define VKA_TEST_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

typedef struct tf_dir {
    char path[64];
} tf_dir;

static inline tf_dir tf_mkdir(void) {
    tf_dir d;
    snprintf(d.path, sizeof d.path, "/tmp/vkattn_test_XXXXXX");
    if (!mkdtemp(d.path)) fail_msg("mkdtemp failed");
    return d;
}

/* path of name inside d (static buffer rotation: up to 4 live at once). */
static inline const char *tf_path(const tf_dir *d, const char *name) {
    static char bufs[4][192];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", d->path, name);
    return b;
}

static inline void tf_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot create %s", path);
    if (n && fwrite(data, 1, n, f) != n) fail_msg("cannot write %s", path);
    fclose(f);
}

/* The whole file in a malloc'd buffer; *n its size. */
static inline unsigned char *tf_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)size + 1);
    if (fread(data, 1, (size_t)size, f) != (size_t)size) fail_msg("cannot read %s", path);
    fclose(f);
    *n = (size_t)size;
    return data;
}

/* Number of entries in d (other than . and ..) whose name contains part ("" = all). */
static inline int tf_count(const tf_dir *d, const char *part) {
    DIR *dir = opendir(d->path);
    if (!dir) fail_msg("cannot list %s", d->path);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (strstr(e->d_name, part)) n++;
    }
    closedir(dir);
    return n;
}

/* Remove every file in d, then d. */
static inline void tf_rmdir(const tf_dir *d) {
    DIR *dir = opendir(d->path);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
        remove(p);
    }
    closedir(dir);
    rmdir(d->path);
}

/* Fail unless r is want and the context's message contains each of the NULL-terminated
 * fragments. */
static inline void tf_expect_error(vka_context *ctx, vka_result r, vka_result want, ...) {
    const char *msg = vka_last_error(ctx);
    if (r != want)
        fail_msg("expected %s, got %s (%s)", vka_result_string(want), vka_result_string(r), msg);
    va_list ap;
    va_start(ap, want);
    const char *part;
    while ((part = va_arg(ap, const char *)))
        if (!strstr(msg, part)) fail_msg("message \"%s\" does not mention \"%s\"", msg, part);
    va_end(ap);
    print_message("  ok: %s\n", msg);
}

#endif
