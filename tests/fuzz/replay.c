/* A fuzz target as a test of the normal suite (any compiler, no libFuzzer): tests/CMakeLists.txt
 * builds each tests/fuzz/fuzz_NAME.c with this driver as test_fuzz_NAME, which runs the target
 * on every file of its seeds (tests/fuzz/corpus/NAME) and of its regressions
 * (tests/fuzz/regress/NAME: each input a fuzzer found crashing, kept once fixed). A property
 * that fails aborts, as under libFuzzer. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Run the target on every regular file in dir (none if it does not exist); returns how many. */
static int replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        uint8_t *buf = malloc((size_t)st.st_size + 1);
        assert_non_null(buf);
        size_t got = fread(buf, 1, (size_t)st.st_size, f);
        fclose(f);
        assert_int_equal(got, (size_t)st.st_size);
        /* libFuzzer hands the target a buffer of exactly the input's size. */
        uint8_t *exact = malloc(got ? got : 1);
        assert_non_null(exact);
        memcpy(exact, buf, got);
        free(buf);
        LLVMFuzzerTestOneInput(exact, got);
        free(exact);
        n++;
    }
    closedir(d);
    return n;
}

static void test_fuzz_target_replays_seeds_and_regressions(void **state) {
    (void)state;
    int seeds = replay_dir(VKA_FUZZ_DIR "/corpus/" VKA_FUZZ_NAME);
    int regress = replay_dir(VKA_FUZZ_DIR "/regress/" VKA_FUZZ_NAME);
    print_message("fuzz_%s: %d seeds and %d regression inputs, every property held\n",
                  VKA_FUZZ_NAME, seeds, regress);
    assert_true(seeds > 0);
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_target_replays_seeds_and_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
