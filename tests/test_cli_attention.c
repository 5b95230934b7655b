/*
 * vkattn attention, run as a user runs it (the built binary in a fresh directory) on a tiny
 * model with a byte-level BPE vocabulary (so any prompt bytes can be given): the JSON weights
 * are the library's (vka_gpt_attention_weights) on both backends, rows sum to 1 with future
 * keys 0; the SVG is well-formed XML with the prompt's tokens as escaped, visible labels; bad
 * input exits non-zero with a message naming the problem and leaves no file behind.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "gpt_util.h"

#include <sys/stat.h>

#define CTX 32
static tf_dir fixture;
static char fixture_model[1024]; /* tf_path's string lives only until its next call */
static const char *model_path(void) { return fixture_model; }

static int group_setup(void **state) {
    (void)state;
    fixture = tf_mkdir();
    snprintf(fixture_model, sizeof fixture_model, "%s", tf_path(&fixture, "m.bin"));
    size_t len = 0;
    char *text = vka_builtin_corpus(60000, &len);
    tf_write(tf_path(&fixture, "text.txt"), text, len);
    free(text);
    cu_result r = cu_run(&fixture, "train", "--backend", "cpu", "--layers", "2", "--heads", "2",
                         "--embd", "32", "--ctx", "32", "--batch", "4", "--steps", "20", "--lr",
                         "1e-2", "--eval-windows", "4", "--data", "text.txt", "--vocab-size",
                         "300", "--out", "m.bin", "--quiet");
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

/* ---------------------------------------------------------------------------------------------
 * Reading the JSON
 * ------------------------------------------------------------------------------------------- */

/* The integer after "key": (the first one), or -1. */
static int json_int(const char *s, const char *key) {
    double v = cu_json_num(s, key);
    return isnan(v) ? -1 : (int)v;
}

/* The count matrices after the "weights": keys, each T x T numbers, into w; returns how many
 * were found (fails on anything but numbers, brackets and commas inside one). */
static int json_weights(const char *s, int T, float *w, int cap) {
    int n = 0;
    for (const char *p = strstr(s, "\"weights\":"); p && n < cap;
         p = strstr(p, "\"weights\":"), n++) {
        p += strlen("\"weights\":");
        for (int i = 0; i < T * T; i++) {
            while (*p == '[' || *p == ']' || *p == ',') p++;
            char *end = NULL;
            double v = strtod(p, &end);
            if (end == p) fail_msg("weights %d: element %d is not a number: %.20s", n, i, p);
            w[(size_t)n * T * T + i] = (float)v;
            p = end;
        }
        while (*p == ']') p++;
        if (*p != '}') fail_msg("weights %d: more than %d x %d numbers", n, T, T);
    }
    return n;
}

/* The ids of the "tokens" array. */
static int json_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    for (const char *p = strstr(s, "{\"id\":"); p && n < cap; p = strstr(p + 1, "{\"id\":"))
        ids[n++] = (int32_t)atoi(p + 6);
    return n;
}

/* The library's weights of each layer for ids, on backend ("cpu" or "vulkan"). */
static float *library_weights(const char *backend, const int32_t *ids, int T, int *L, int *NH) {
    vka_context *ctx = strcmp(backend, "cpu") == 0 ? tu_cpu() : tm_gpu();
    vka_gpt *gpt = NULL;
    if (vka_gpt_load(ctx, model_path(), &gpt) != VKA_SUCCESS) fail_msg("%s", vka_last_error(ctx));
    vka_gpt_config c = vka_gpt_get_config(gpt);
    size_t per = (size_t)c.NH * T * T;
    float *w = malloc((size_t)c.L * per * sizeof *w);
    for (int l = 0; l < c.L; l++)
        if (vka_gpt_attention_weights(gpt, ids, T, l, w + l * per) != VKA_SUCCESS)
            fail_msg("layer %d: %s", l, vka_last_error(ctx));
    *L = c.L;
    *NH = c.NH;
    vka_gpt_destroy(gpt);
    tu_done(ctx);
    return w;
}

static void check_rows(const float *w, int n_mats, int T) {
    for (int r = 0; r < n_mats * T; r++) {
        int t = r % T;
        double sum = 0;
        for (int j = 0; j < T; j++) {
            float v = w[(size_t)r * T + j];
            if (j > t && v != 0.0f) fail_msg("row %d: future key %d is %g", r, j, (double)v);
            sum += v;
        }
        if (fabs(sum - 1.0) > 1e-5) fail_msg("row %d (query %d) sums to %.8f", r, t, sum);
    }
}

#define PROMPT "Once upon a time, a little fox"

/* --json --layer all on backend: the library's numbers (JSON keeps 9 digits: exact floats). */
static void json_matches_library(const char *backend) {
    tf_dir d = tf_mkdir();
    cu_result r = cu_run(&d, "attention", "--backend", backend, "--model", model_path(),
                         "--prompt", PROMPT, "--layer", "all", "--json");
    cu_expect(&r, 0, NULL, "attention --json");
    int T = json_int(r.out, "T"), L = json_int(r.out, "L"), NH = json_int(r.out, "NH");
    assert_true(T >= 4 && T <= CTX);
    int32_t ids[CTX];
    assert_int_equal(json_ids(r.out, ids, CTX), T);
    float *w = malloc((size_t)L * NH * T * T * sizeof *w);
    assert_int_equal(json_weights(r.out, T, w, L * NH), L * NH);
    check_rows(w, L * NH, T);
    int L2, NH2;
    float *lib = library_weights(backend, ids, T, &L2, &NH2);
    assert_int_equal(L, L2);
    assert_int_equal(NH, NH2);
    assert_memory_equal(w, lib, (size_t)L * NH * T * T * sizeof *w);
    /* The other backend agrees up to rounding. */
    if (strcmp(backend, "vulkan") == 0) {
        float *cpu = library_weights("cpu", ids, T, &L2, &NH2);
        double dmax = 0;
        for (size_t i = 0; i < (size_t)L * NH * T * T; i++) dmax = fmax(dmax, fabs(w[i] - cpu[i]));
        print_message("max |vulkan - cpu| = %.3g\n", dmax);
        assert_true(dmax < 1e-5);
        free(cpu);
    }
    /* --layer 0 --head 1 is that one matrix. */
    cu_free(&r);
    r = cu_run(&d, "attention", "--backend", backend, "--model", model_path(), "--prompt",
               PROMPT, "--layer", "0", "--head", "1", "--json");
    cu_expect(&r, 0, NULL, "attention --layer 0 --head 1");
    float *one = malloc((size_t)T * T * sizeof *one);
    assert_int_equal(json_weights(r.out, T, one, 2), 1);
    assert_memory_equal(one, lib + (size_t)1 * T * T, (size_t)T * T * sizeof *one);
    assert_non_null(strstr(r.out, "\"layers\":[{\"layer\":0,\"heads\":[{\"head\":1,"));
    /* The default is the last layer, every head. */
    cu_free(&r);
    r = cu_run(&d, "attention", "--backend", backend, "--model", model_path(), "--prompt",
               PROMPT, "--json");
    cu_expect(&r, 0, NULL, "attention default layer");
    assert_non_null(strstr(r.out, "\"layers\":[{\"layer\":1,"));
    assert_int_equal(json_weights(r.out, T, w, L * NH), NH);
    assert_memory_equal(w, lib + (size_t)NH * T * T, (size_t)NH * T * T * sizeof *w);
    cu_free(&r);
    free(one);
    free(lib);
    free(w);
    tf_rmdir(&d);
}

static void test_cli_attention_json_matches_library_cpu(void **state) {
    (void)state;
    json_matches_library("cpu");
}

static void test_cli_attention_json_matches_library_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tm_gpu(); /* skips without a Vulkan device that runs the model */
    tu_done(ctx);
    json_matches_library("vulkan");
}

/* ---------------------------------------------------------------------------------------------
 * The SVG
 * ------------------------------------------------------------------------------------------- */

/* Well-formed XML, as far as a picture needs: valid UTF-8 and no control characters but
 * newline and tab; every '<' opens a declaration, a tag or a closing tag with balanced names;
 * attributes are name="value" without '<' in the value; every '&' is a known entity. */
static void check_xml(const char *s) {
    char stack[32][32];
    int depth = 0, roots = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; u[i];) {
        unsigned c = u[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || (c < 0x20 && c != '\n' && c != '\t')) fail_msg("byte 0x%02X at %zu", c, i);
        for (size_t k = 1; k < n; k++)
            if ((u[i + k] & 0xC0) != 0x80) fail_msg("invalid UTF-8 at %zu", i);
        if (c == '&') {
            static const char *const ent[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            bool ok = false;
            for (int k = 0; k < 5; k++) ok |= strncmp(s + i, ent[k], strlen(ent[k])) == 0;
            if (!ok) fail_msg("bare & at %zu: %.20s", i, s + i);
        }
        if (c == '>' && depth == 0) fail_msg("'>' outside any element at %zu", i);
        if (c != '<') {
            i += n;
            continue;
        }
        const char *p = s + i + 1;
        if (*p == '?') { /* the XML declaration */
            const char *end = strstr(p, "?>");
            assert_non_null(end);
            i = (size_t)(end + 2 - s);
            continue;
        }
        bool closing = *p == '/';
        if (closing) p++;
        size_t nl = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-:");
        if (nl == 0 || nl >= 32) fail_msg("bad tag name at %zu: %.20s", i, s + i);
        char name[32];
        memcpy(name, p, nl);
        name[nl] = '\0';
        p += nl;
        if (closing) {
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
                fail_msg("</%s> closes <%s>", name, depth ? stack[depth - 1] : "(nothing)");
            depth--;
            if (*p != '>') fail_msg("junk in </%s>", name);
            i = (size_t)(p + 1 - s);
            continue;
        }
        for (;;) { /* attributes */
            while (*p == ' ' || *p == '\n') p++;
            if (*p == '>' || (p[0] == '/' && p[1] == '>')) break;
            size_t an = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-:");
            if (an == 0 || p[an] != '=' || p[an + 1] != '"') fail_msg("bad attribute in <%s>: %.30s", name, p);
            const char *v = p + an + 2, *q = strchr(v, '"');
            assert_non_null(q);
            for (const char *x = v; x < q; x++) if (*x == '<') fail_msg("'<' in an attribute of <%s>", name);
            p = q + 1;
        }
        if (*p == '/') {
            p += 2;
            if (depth == 0) roots++;
        } else {
            if (depth == 0) roots++;
            if (depth == 32) fail_msg("nesting too deep");
            strcpy(stack[depth++], name);
            p++;
        }
        i = (size_t)(p - s);
    }
    if (depth != 0) fail_msg("<%s> is never closed", stack[depth - 1]);
    assert_int_equal(roots, 1);
}

static void test_cli_attention_svg_is_well_formed_with_labels(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    /* Characters XML must escape, whitespace, a byte that is not UTF-8, a 2-byte character. */
    const char *prompt = "a <b> & \"c\"\n'd'\tcaf\xC3\xA9 \xFF";
    cu_result r = cu_run(&d, "attention", "--backend", "cpu", "--model", model_path(), "--prompt",
                         prompt, "--svg", "a.svg", "--json");
    cu_expect(&r, 0, "wrote a.svg", "attention --svg");
    int T = json_int(r.out, "T");
    assert_true(T > 4 && T <= CTX);
    size_t len = 0;
    char *svg = cu_slurp(tf_path(&d, "a.svg"), &len);
    assert_true(len > 1000);
    assert_memory_equal(svg, "<?xml", 5);
    check_xml(svg);
    /* One panel per head of the last layer, the labels shown and escaped. */
    assert_non_null(strstr(svg, "layer 1, head 0"));
    assert_non_null(strstr(svg, "layer 1, head 1"));
    assert_null(strstr(svg, "layer 0, head"));
    assert_non_null(strstr(svg, "&lt;"));
    assert_non_null(strstr(svg, "&amp;"));
    assert_non_null(strstr(svg, "&quot;"));
    assert_non_null(strstr(svg, "\xE2\x90\xA3")); /* a space, visible */
    assert_non_null(strstr(svg, "\xE2\x86\xB5")); /* the newline */
    assert_non_null(strstr(svg, "\xE2\x87\xA5")); /* the tab */
    assert_non_null(strstr(svg, "\\xFF"));        /* the byte that is not UTF-8 */
    /* é: whole where a token holds it, else its two bytes as tokens of their own */
    assert_true(strstr(svg, ">caf\xC3\xA9<") || strstr(svg, "\xC3\xA9<") ||
                (strstr(svg, ">\\xC3<") && strstr(svg, ">\\xA9<")));
    assert_non_null(strstr(svg, "linearGradient")); /* the colour scale */
    /* Every label of the JSON is in the picture, as a row label. */
    int found = 0;
    for (const char *p = strstr(r.out, "\"label\":\""); p; p = strstr(p + 1, "\"label\":\"")) {
        const char *v = p + 9;
        char label[128], esc[512];
        size_t k = 0, e = 0;
        for (; *v && *v != '"' && k < sizeof label - 1; v++) {
            if (*v == '\\' && v[1]) v++; /* JSON escapes: \" and \\ only in labels */
            label[k++] = *v;
        }
        label[k] = '\0';
        for (size_t i = 0; i < k; i++) {
            const char *rep = label[i] == '<' ? "&lt;" : label[i] == '>' ? "&gt;"
                            : label[i] == '&' ? "&amp;" : label[i] == '"' ? "&quot;"
                            : label[i] == '\'' ? "&apos;" : NULL;
            if (rep) e += (size_t)snprintf(esc + e, sizeof esc - e, "%s", rep);
            else esc[e++] = label[i];
        }
        esc[e] = '\0';
        char want[600];
        snprintf(want, sizeof want, "text-anchor=\"end\">%s</text>", esc);
        if (!strstr(svg, want)) fail_msg("label '%s' not in the SVG as %s", label, want);
        found++;
    }
    assert_int_equal(found, T);
    /* The "text" of the byte that is not UTF-8 is \udcff in the JSON (cli_json_string). */
    assert_non_null(strstr(r.out, "\"text\":\"\\udcff\""));
    free(svg);
    cu_free(&r);
    /* --layer all: a row of panels per layer. */
    r = cu_run(&d, "attention", "--backend", "cpu", "--model", model_path(), "--prompt", prompt,
               "--layer", "all", "--svg", "all.svg");
    cu_expect(&r, 0, NULL, "attention --layer all --svg");
    assert_non_null(strstr(r.out, "wrote all.svg: layers 0-1, every head")); /* stdout without --json */
    cu_free(&r);
    svg = cu_slurp(tf_path(&d, "all.svg"), &len);
    check_xml(svg);
    assert_non_null(strstr(svg, "layer 0, head 0"));
    assert_non_null(strstr(svg, "layer 0, head 1"));
    assert_non_null(strstr(svg, "layer 1, head 1"));
    free(svg);
    /* No temporary file is left. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", d.path);
    assert_int_not_equal(system(cmd), 0);
    tf_rmdir(&d);
}

/* ---------------------------------------------------------------------------------------------
 * Bad input
 * ------------------------------------------------------------------------------------------- */

/* 33 bytes that are not UTF-8: 33 tokens of a byte-level vocabulary, one past the context. */
#define LONG_PROMPT "\xFF\xFE\xFD\xFC\xFB\xFA\xF9\xF8\xF7\xF6\xF5\xF4\xF3\xF2\xF1\xF0\xEF" \
                    "\xFF\xFE\xFD\xFC\xFB\xFA\xF9\xF8\xF7\xF6\xF5\xF4\xF3\xF2\xF1\xF0"

static void test_cli_attention_bad_input(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    const char *m = model_path();
    tf_write(tf_path(&d, "old.svg"), "old", 3);
    struct {
        int status;
        const char *part;
        const char *args[12];
    } cases[] = {
        {1, "missing.bin", {"--model", "missing.bin", "--prompt", "x", "--svg", "old.svg"}},
        {2, "--layer 2 is not a layer of this model (0 to 1, or all)",
         {"--model", m, "--prompt", "x", "--layer", "2", "--svg", "old.svg"}},
        {2, "--layer 'first' is not a layer number", {"--model", m, "--prompt", "x", "--layer", "first", "--json"}},
        {2, "--layer -1 is not a layer", {"--model", m, "--prompt", "x", "--layer", "-1", "--json"}},
        {2, "--head 2 is not a head of this model (0 to 1)",
         {"--model", m, "--prompt", "x", "--head", "2", "--svg", "old.svg"}},
        {2, "--prompt needs a non-empty value", {"--model", m, "--prompt", "", "--json"}},
        {2, "--prompt TEXT is required", {"--model", m, "--json"}},
        {2, "--model MODEL is required", {"--prompt", "x", "--json"}},
        {2, "--svg FILE, --json, or both", {"--model", m, "--prompt", "x"}},
        {2, "longer than the model's context (max_T = 32 tokens)",
         {"--model", m, "--prompt", LONG_PROMPT,
          "--svg", "old.svg"}},
        {1, "is a directory", {"--model", m, "--prompt", "x", "--svg", "."}},
        {1, "the directory nodir does not exist", {"--model", m, "--prompt", "x", "--svg", "nodir/a.svg"}},
        {1, "not a model", {"--model", "old.svg", "--prompt", "x", "--json"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16] = {"attention", "--backend", "cpu"};
        int n = 3;
        for (int k = 0; cases[i].args[k]; k++) args[n++] = cases[i].args[k];
        args[n] = NULL;
        cu_result r = cu_run_spec(&(cu_spec){.dir = &d}, args);
        cu_expect(&r, cases[i].status, cases[i].part, cases[i].part);
        assert_int_equal(r.out_len, 0);
        cu_free(&r);
        size_t len = 0;
        char *old = cu_slurp(tf_path(&d, "old.svg"), &len);
        assert_int_equal(len, 3); /* untouched */
        free(old);
    }
    /* --svg naming the model or its tokenizer is refused before anything is written. */
    size_t before = 0, after = 0;
    char *model = cu_slurp(m, &before);
    const char *targets[2] = {"the model (--model)", "the tokenizer"};
    for (int t = 0; t < 2; t++) {
        char *tok = NULL;
        if (t == 1) {
            tok = malloc(strlen(m) + 32);
            snprintf(tok, strlen(m) + 32, "%.*s.tokenizer.bin", (int)(strlen(m) - 4), m);
        }
        cu_result r = cu_run(&d, "attention", "--backend", "cpu", "--model", m, "--prompt", "x",
                             "--svg", t ? tok : m);
        cu_expect(&r, 2, targets[t], "the picture would replace it");
        cu_free(&r);
        free(tok);
    }
    char *model_after = cu_slurp(m, &after);
    assert_int_equal(after, before);
    assert_memory_equal(model, model_after, before);
    free(model);
    free(model_after);
    tf_rmdir(&d);
}

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_cli_attention_json_matches_library_cpu),
        cmocka_unit_test(test_cli_attention_svg_is_well_formed_with_labels),
        cmocka_unit_test(test_cli_attention_bad_input),
    };
    /* On Vulkan: the fixture's model at prompt lengths that build their own pipelines (about
     * 14 s on lavapipe); the library's attention maps on Vulkan are in the quick set
     * (test_gpt_attention_map). */
    const struct CMUnitTest exhaustive[] = {
        cmocka_unit_test(test_cli_attention_json_matches_library_vulkan),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, group_setup, group_teardown);
}
