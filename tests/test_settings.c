/*
 * Settings (src/settings.h): the documentation's tables of environment variables (every row
 * starting with "| `VKATTN_" in README.md and in the docs folder's .md files) list exactly the
 * variables of the code's tables, the library reads the environment in src/settings.c only, and
 * every variable the command line, the tests and the Python binding read is in a table.
 */
#define _POSIX_C_SOURCE 200809L /* opendir, stat */
#include "test_util.h"

#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>

#include "../src/settings.h"

#define ROOT VKA_TEST_DATA_DIR "/../.."
#define MAX_NAMES 128

typedef struct names {
    char *v[MAX_NAMES];
    int n;
} names;

static bool has(const names *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0) return true;
    return false;
}

static void add(names *s, const char *name, size_t len) {
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s", (int)len, name);
    if (has(s, buf)) return;
    assert_true(s->n < MAX_NAMES);
    s->v[s->n++] = strdup(buf);
}

static void drop(names *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    s->n = 0;
}

/* The variables of the code's tables; documented_only: not those it says are undocumented. */
static void code_names(names *s, bool documented_only) {
#define LIB(id, var, field, kind, min, max, def, expect) \
    if (var) add(s, var, strlen(var ? var : ""));
    VKA_SETTING_LIST(LIB)
#undef LIB
#define OUT(var, reader, documented) \
    if (documented || !documented_only) add(s, var, strlen(var));
    VKA_SETTING_OUTSIDE_LIST(OUT)
#undef OUT
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    size_t got = fread(text, 1, (size_t)n, f);
    fclose(f);
    text[got] = '\0';
    return text;
}

static size_t name_len(const char *p) {
    size_t n = 0;
    while (isupper((unsigned char)p[n]) || isdigit((unsigned char)p[n]) || p[n] == '_') n++;
    return n;
}

/* Each table row of path starting "| `VKATTN_": every VKATTN_ name of its first cell. */
static void documented_names(const char *path, names *s) {
    char *text = read_file(path);
    if (!text) return;
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        if (strncmp(line, "| `VKATTN_", 10) == 0) {
            char *cell_end = strstr(line + 1, " |");
            if (cell_end) *cell_end = '\0';
            for (char *p = strstr(line, "VKATTN_"); p; p = strstr(p + 7, "VKATTN_"))
                add(s, p, name_len(p));
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
}

/* Calls each regular file under dir (recursively) whose name ends with one of suffixes. */
static void each_file(const char *dir, const char *const *suffixes, int n_suffixes,
                      void (*fn)(const char *path, void *user), void *user) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            each_file(path, suffixes, n_suffixes, fn, user);
            continue;
        }
        size_t len = strlen(e->d_name);
        for (int i = 0; i < n_suffixes; i++) {
            size_t sl = strlen(suffixes[i]);
            if (len > sl && strcmp(e->d_name + len - sl, suffixes[i]) == 0) {
                fn(path, user);
                break;
            }
        }
    }
    closedir(d);
}

static void collect_docs(const char *path, void *user) { documented_names(path, user); }

/* Lists in *bad (a message) the names of a that b lacks. */
static void missing(const names *a, const names *b, const char *what, char *bad, size_t cap) {
    for (int i = 0; i < a->n; i++)
        if (!has(b, a->v[i]))
            snprintf(bad + strlen(bad), cap - strlen(bad), "\n  %s %s", a->v[i], what);
}

static void test_settings_documented_variables_match_the_code(void **state) {
    (void)state;
    names doc = {0}, code = {0};
    documented_names(ROOT "/README.md", &doc);
    static const char *const md[] = {".md"};
    each_file(ROOT "/docs", md, 1, collect_docs, &doc);
    code_names(&code, true);
    assert_true(doc.n > 0); /* the table was found */
    char bad[4096] = "";
    missing(&doc, &code, "is documented but not in src/settings.h's tables", bad, sizeof bad);
    missing(&code, &doc, "is in src/settings.h's tables but not documented", bad, sizeof bad);
    drop(&doc);
    drop(&code);
    if (bad[0]) fail_msg("the environment variables of the docs and of the code differ:%s", bad);
}

typedef struct scan {
    const char *allowed;  /* the one file that may call getenv (NULL: any) */
    const names *known;   /* variables a getenv of a VKATTN_ name must name (NULL: not checked) */
    char bad[4096];
} scan;

/* Every getenv( (src: outside the allowed file) and every read of a "VKATTN_ name (getenv,
 * env_set, os.environ.get) that the tables lack. */
static void scan_file(const char *path, void *user) {
    scan *s = user;
    char *text = read_file(path);
    if (!text) return;
    if (s->allowed && !strstr(path, s->allowed) && strstr(text, "getenv("))
        snprintf(s->bad + strlen(s->bad), sizeof s->bad - strlen(s->bad),
                 "\n  %s calls getenv (the library reads the environment in src/settings.c)",
                 path);
    static const char *const reads[] = {"getenv(\"", "env_set(\"", "environ.get(\""};
    for (size_t r = 0; s->known && r < VKA_ARRAY_LEN(reads); r++) {
        for (char *p = strstr(text, reads[r]); p; p = strstr(p + 1, reads[r])) {
            char *name = p + strlen(reads[r]);
            if (strncmp(name, "VKATTN_", 7) != 0) continue;
            char buf[128];
            snprintf(buf, sizeof buf, "%.*s", (int)name_len(name), name);
            if (!has(s->known, buf))
                snprintf(s->bad + strlen(s->bad), sizeof s->bad - strlen(s->bad),
                         "\n  %s reads %s, which src/settings.h's tables lack", path, buf);
        }
    }
    free(text);
}

static void test_settings_library_reads_environment_in_one_place(void **state) {
    (void)state;
    static const char *const c[] = {".c", ".h"};
    scan s = {.allowed = "/src/settings.c"};
    each_file(ROOT "/src", c, 2, scan_file, &s);
    if (s.bad[0]) fail_msg("%s", s.bad);
}

static void test_settings_outside_reads_are_listed(void **state) {
    (void)state;
    names code = {0};
    code_names(&code, false);
    static const char *const src[] = {".c", ".h", ".py"};
    scan s = {.known = &code};
    each_file(ROOT "/tools", src, 3, scan_file, &s);
    each_file(ROOT "/tests", src, 3, scan_file, &s);
    each_file(ROOT "/bindings", src, 3, scan_file, &s);
    each_file(ROOT "/examples", src, 3, scan_file, &s);
    drop(&code);
    if (s.bad[0]) fail_msg("%s", s.bad);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_documented_variables_match_the_code),
        cmocka_unit_test(test_settings_library_reads_environment_in_one_place),
        cmocka_unit_test(test_settings_outside_reads_are_listed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
