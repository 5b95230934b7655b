/*
 * vka_file_write_atomic (src/model/fileio.c), the writer every saved file goes through: the
 * bytes land whole under the name, nothing is left under the temporary name path.tmp.<pid>,
 * and a failure keeps the old file, says which file and why, and works without a context.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkdir */
#include "test_files.h"

#include <sys/stat.h>
#include <unistd.h>

/* r is a failure and ctx's message contains want. */
static void assert_failed_with(vka_context *ctx, vka_result r, const char *want) {
    assert_true(r < 0);
    const char *msg = vka_last_error(ctx);
    if (!strstr(msg, want)) fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

/* The file at path holds exactly want (n bytes). */
static void assert_file_is(const char *path, const void *want, size_t n) {
    size_t got_n = 0;
    unsigned char *got = tf_read(path, &got_n);
    assert_int_equal(got_n, n);
    if (n) assert_memory_equal(got, want, n);
    free(got);
}

static void test_fileio_write_atomic_writes_and_replaces(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    const char *path = tf_path(&d, "out.bin");
    static const char first[] = "the first version, longer than the second";
    static const char second[] = "second";
    /* Without a context (libc's allocator), then with one, over the first file. */
    assert_int_equal(vka_file_write_atomic(NULL, path, first, sizeof first), VKA_SUCCESS);
    assert_file_is(path, first, sizeof first);
    vka_context *ctx = tu_cpu();
    assert_int_equal(vka_file_write_atomic(ctx, path, second, sizeof second), VKA_SUCCESS);
    assert_file_is(path, second, sizeof second);
    /* Nothing to write: an empty file (data may be NULL). */
    assert_int_equal(vka_file_write_atomic(ctx, path, NULL, 0), VKA_SUCCESS);
    assert_file_is(path, "", 0);
    assert_int_equal(tf_count(&d, ""), 1);
    assert_int_equal(tf_count(&d, ".tmp."), 0);
    tu_done(ctx);
    tf_rmdir(&d);
}

/* A replaced file keeps its permissions; a temporary file someone else left under the first
 * temporary name is neither used nor removed. */
static void test_fileio_write_atomic_keeps_mode_and_others_temp(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    const char *path = tf_path(&d, "p.bin");
    assert_int_equal(vka_file_write_atomic(NULL, path, "one", 3), VKA_SUCCESS);
    assert_int_equal(chmod(path, 0600), 0);
    char taken[4096];
    snprintf(taken, sizeof taken, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(taken, "wb");
    assert_non_null(f);
    fputs("another writer's", f);
    fclose(f);
    assert_int_equal(vka_file_write_atomic(NULL, path, "two", 3), VKA_SUCCESS);
    assert_file_is(path, "two", 3);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_file_is(taken, "another writer's", 16);
    remove(taken);
    tf_rmdir(&d);
}

static void test_fileio_write_atomic_failure_keeps_the_old_file(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    vka_context *ctx = tu_cpu();
    /* No directory to create the temporary file in: the message names it and the reason. */
    const char *missing = tf_path(&d, "no/such/dir/out.bin");
    vka_result r = vka_file_write_atomic(ctx, missing, "x", 1);
    assert_int_equal(r, VKA_ERROR_IO);
    assert_failed_with(ctx, r, "cannot create");
    assert_failed_with(ctx, r, "no/such/dir/out.bin.tmp.");
    assert_failed_with(ctx, r, "No such file or directory");
    /* The name is a directory: the rename fails, the directory stays, no temporary file is
     * left behind. */
    const char *dir = tf_path(&d, "a_directory");
    if (mkdir(dir, 0700) != 0) fail_msg("mkdir %s failed", dir);
    const char *inside = tf_path(&d, "a_directory/kept");
    tf_write(inside, "kept", 4);
    r = vka_file_write_atomic(ctx, dir, "x", 1);
    assert_int_equal(r, VKA_ERROR_IO);
    assert_failed_with(ctx, r, "cannot rename");
    assert_int_equal(tf_count(&d, ".tmp."), 0);
    assert_file_is(inside, "kept", 4);
    remove(inside);
    rmdir(dir);
    /* Without a context the same failure is only a result. */
    assert_int_equal(vka_file_write_atomic(NULL, missing, "x", 1), VKA_ERROR_IO);
    tu_done(ctx);
    tf_rmdir(&d);
}

static void test_fileio_write_atomic_arguments(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    vka_context *ctx = tu_cpu();
    vka_result r = vka_file_write_atomic(ctx, NULL, "x", 1);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_failed_with(ctx, r, "path is NULL");
    r = vka_file_write_atomic(ctx, tf_path(&d, "out.bin"), NULL, 3);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_failed_with(ctx, r, "data is NULL and len is 3");
    assert_int_equal(vka_file_write_atomic(NULL, NULL, NULL, 0), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(tf_count(&d, ""), 0);
    tu_done(ctx);
    tf_rmdir(&d);
}

/* Counts the blocks a context's host allocator hands out. */
typedef struct counting {
    int allocs, frees;
} counting;
static void *count_alloc(void *user, size_t n) {
    ((counting *)user)->allocs++;
    return malloc(n);
}
static void *count_realloc(void *user, void *p, size_t n) {
    (void)user;
    return realloc(p, n);
}
static void count_free(void *user, void *p) {
    ((counting *)user)->frees++;
    free(p);
}

static void test_fileio_write_atomic_uses_the_context_allocator(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    counting c = {0};
    vka_host_allocator host = {count_alloc, count_realloc, count_free, .user_data = &c};
    vka_context_desc desc = {.backend = VKA_BACKEND_CPU, .host_allocator = &host};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&desc, &ctx), VKA_SUCCESS);
    counting before = c;
    assert_int_equal(vka_file_write_atomic(ctx, tf_path(&d, "out.bin"), "abc", 3), VKA_SUCCESS);
    assert_true(c.allocs > before.allocs);
    assert_int_equal(c.allocs - before.allocs, c.frees - before.frees);
    vka_context_destroy(ctx);
    assert_int_equal(c.allocs, c.frees);
    tf_rmdir(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fileio_write_atomic_writes_and_replaces),
        cmocka_unit_test(test_fileio_write_atomic_keeps_mode_and_others_temp),
        cmocka_unit_test(test_fileio_write_atomic_failure_keeps_the_old_file),
        cmocka_unit_test(test_fileio_write_atomic_arguments),
        cmocka_unit_test(test_fileio_write_atomic_uses_the_context_allocator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
