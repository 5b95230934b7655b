/*
 * The command line's JSON is strict JSON in valid UTF-8 whatever bytes the names it reports
 * hold (docs/commands.md "JSON output"): train, tokenize and attention run with file names holding every
 * kind of byte sequence that is not UTF-8 (Latin-1, stray continuation bytes, overlong forms,
 * an encoded surrogate, a code point past U+10FFFF, 0xF5..0xFF, a truncated sequence) next to
 * valid UTF-8 and control characters. Each line of stdout is read twice, by tests/json_util.h
 * (strict UTF-8) and by Python's json (the bytes decoded as strict UTF-8, json.loads): both
 * parse it, and the name, with each \udcXX taken back to its byte (Python's surrogateescape),
 * is the file's name byte for byte. On the CPU backend with a small model.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "gpt_util.h"
#include "json_util.h"

#define SMALL "--layers", "1", "--heads", "2", "--embd", "16", "--ctx", "16", "--batch", "4"

/* Every kind of byte that is not UTF-8, between valid UTF-8 (é, an emoji), a control
 * character, DEL, a quote and a backslash; it ends in a truncated sequence, so that the
 * suffixes appended to it (".bin") follow one. No '/' (a file name). */
#define ODD "n\x01\x7f\"q\\ caf\xe9 \x80 \xc0\xaf \xe0\x80\xaf \xed\xa0\x80 \xf4\x90\x80\x80 " \
            "\xf5\xff ok\xc3\xa9\xf0\x9f\x98\x80 \xe2\x82"

static const char *python(void) {
    if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
    return system("command -v python3 >/dev/null 2>&1") == 0 ? "python3" : NULL;
}

/* Python's reading of the JSON lines in file out (each must parse; the bytes must be UTF-8):
 * the string under key, surrogateescape-encoded, is want in every line that has it, and at
 * least one line has it. */
static void python_check(const tf_dir *d, const char *out, const char *key, const char *want) {
    const char *py = python();
    if (!py) {
        print_message("  (no python3: Python's json check skipped; tools/install-deps.sh "
                      "installs it)\n");
        return;
    }
    static const char script[] =
        "import json, sys\n"
        "raw = open(sys.argv[1], 'rb').read()\n"
        "text = raw.decode('utf-8')  # strict: a byte that is not UTF-8 raises\n"
        "key, want, found = sys.argv[2], bytes.fromhex(sys.argv[3]), 0\n"
        "for line in text.splitlines():\n"
        "    obj = json.loads(line)  # strict: no raw control characters\n"
        "    v = obj.get(key) if isinstance(obj, dict) else None\n"
        "    if v is None: continue\n"
        "    got = v.encode('utf-8', 'surrogateescape')\n"
        "    if got != want: sys.exit('%s: %r is not %r' % (key, got, want))\n"
        "    found += 1\n"
        "sys.exit(0 if found else 'no line has ' + key)\n";
    tf_write(tf_path(d, "check.py"), script, strlen(script));
    char hex[512] = "";
    for (size_t i = 0; want[i] && 2 * i + 3 < sizeof hex; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)want[i]);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s check.py '%s' %s %s", d->path, py, out, key, hex);
    int rc = system(cmd);
    if (rc != 0) {
        char *text = cu_slurp(tf_path(d, out), NULL);
        fail_msg("Python's json rejects the output or its \"%s\" (status %d):\n%s", key, rc,
                 text);
    }
}

/* The same in C: every line of text is UTF-8 and one JSON value; key's string, where a line
 * has it, is want (json_util.h turns \udcXX back into its byte). */
static void c_check(const char *text, const char *key, const char *want, const char *what) {
    if (!jv_utf8_valid(text, strlen(text))) fail_msg("%s: stdout is not UTF-8:\n%s", what, text);
    int found = 0;
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        char *line = strndup(p, n);
        p += n + (p[n] == '\n');
        jv v;
        char err[160];
        if (!jv_parse(line, &v, err, sizeof err)) fail_msg("%s: %s in:\n%s", what, err, line);
        for (int i = 0; v.kind == JV_OBJ && i < v.n; i++) {
            if (strcmp(v.keys[i], key) != 0) continue;
            assert_int_equal(v.items[i].kind, JV_STR);
            if (strcmp(v.items[i].str, want) != 0)
                fail_msg("%s: \"%s\" reads back as \"%s\", not \"%s\"", what, key,
                         v.items[i].str, want);
            found++;
        }
        jv_clear(&v);
        free(line);
    }
    if (!found) fail_msg("%s: no line has \"%s\":\n%s", what, key, text);
}

/* Both readings of r's stdout (kept as file out in d for Python). */
static void check_json(const tf_dir *d, const cu_result *r, const char *out, const char *key,
                       const char *want, const char *what) {
    c_check(r->out, key, want, what);
    tf_write(tf_path(d, out), r->out, r->out_len);
    python_check(d, out, key, want);
}

static void test_cli_json_is_utf8_for_any_name(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "2",
                         "--eval-windows", "4", "--out", ODD ".bin", "--json");
    cu_expect(&r, 0, NULL, "train --out with bytes that are not UTF-8");
    check_json(&d, &r, "train.json", "model", ODD ".bin", "train");
    check_json(&d, &r, "train.json", "tokenizer", ODD ".tokenizer.bin", "train");
    check_json(&d, &r, "train.json", "state", ODD ".state.bin", "train");
    cu_free(&r);

    size_t len = 0;
    char *text = vka_builtin_corpus(2000, &len);
    assert_non_null(text);
    tf_write(tf_path(&d, "text.txt"), text, len);
    free(text);
    r = cu_run(&d, "tokenize", "--tokenizer", ODD ".tokenizer.bin", "--data", "text.txt",
               "--out", ODD ".tokens", "--json");
    cu_expect(&r, 0, NULL, "tokenize --out");
    check_json(&d, &r, "tokenize.json", "out", ODD ".tokens", "tokenize");
    cu_free(&r);

    r = cu_run(&d, "attention", "--backend", "cpu", "--model", ODD ".bin", "--prompt", "the",
               "--json");
    cu_expect(&r, 0, NULL, "attention --model");
    check_json(&d, &r, "attention.json", "model", ODD ".bin", "attention");
    cu_free(&r);
    tf_rmdir(&d);
}

/* The "continue with:" command a stopped run prints is valid UTF-8 (a byte that is not, as
 * $'\xHH') and, run by bash, gives back the state's name byte for byte. */
static void test_cli_continue_command_survives_any_name(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "3", "--stop-at", "1",
                         "--eval-windows", "4", "--out", ODD ".bin");
    cu_expect(&r, 0, NULL, "train --stop-at 1");
    const char *at = strstr(r.out, "continue with: vkattn ");
    assert_non_null(at);
    at += strlen("continue with: vkattn ");
    size_t n = strcspn(at, "\n");
    /* The line, then bash's words of it (printf in vkattn's place), one per line. */
    FILE *f = fopen(tf_path(&d, "line.txt"), "wb");
    assert_non_null(f);
    fwrite(at, 1, n, f);
    fclose(f);
    f = fopen(tf_path(&d, "words.sh"), "wb");
    assert_non_null(f);
    fputs("printf '%s\\n' ", f);
    fwrite(at, 1, n, f);
    fputc('\n', f);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && iconv -f UTF-8 -t UTF-8 line.txt >/dev/null",
             d.path);
    if (system(cmd) != 0) fail_msg("the continue command is not UTF-8: %.*s", (int)n, at);
    snprintf(cmd, sizeof cmd, "cd '%s' && bash words.sh > words.txt", d.path);
    assert_int_equal(system(cmd), 0);
    char *words = cu_slurp(tf_path(&d, "words.txt"), NULL);
    assert_non_null(words);
    char want[512];
    snprintf(want, sizeof want, "train\n--resume\n%s\n", ODD ".state.bin");
    if (strncmp(words, want, strlen(want)) != 0)
        fail_msg("bash read the continue command %.*s as %s", (int)n, at, words);
    free(words);
    cu_free(&r);
    tf_rmdir(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_json_is_utf8_for_any_name),
        cmocka_unit_test(test_cli_continue_command_survives_any_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
