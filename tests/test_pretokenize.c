/* GPT-2's pre-tokenizer (src/model/pretokenize.c, compiled into this test) against GPT-2's
 * reference for every code point (tests/data/gpt2_unicode.golden, made offline by
 * tools/gpt2_unicode_golden.py with Python's regex and GPT-2's merges), and its cuts: a text
 * cut where vkm_pretok_cut says splits into the pieces, hence ids, of the whole. */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"
#include "text_gen.h"

#include "model/pretokenize.h"

#include <stdint.h>
#include <utf8proc.h>

#define GOLDEN VKA_TEST_DATA_DIR "/gpt2_unicode.golden"
#define GPT2_FILE VKA_TEST_DATA_DIR "/gpt2_tokenizer.bin"

/* The generator's contexts, in its order ('C' stands for the code point). */
static const char *const CONTEXTS[] = {"C", "x Cy", "aCb", " C ", "CC1", "\nC", "C\n", "'sC",
                                       "C's", "1C1"};
#define N_CONTEXTS (int)(sizeof CONTEXTS / sizeof CONTEXTS[0])
static const char CONTEXTS_LINE[] =
    "contexts 10 \"C\" \"x Cy\" \"aCb\" \" C \" \"CC1\" \"\\nC\" \"C\\n\" \"'sC\" \"C's\" \"1C1\"";

typedef struct golden {
    uint32_t n_runs;
    uint32_t *run_len;
    uint64_t *run_sig;
    int block_bits;
    uint32_t n_blocks;
    uint64_t *block_hash;
    uint32_t n_ids;
    uint32_t *ids_cp;
    char **ids_line; /* "id id | id ..." as written */
} golden;

static char *next_line(char **p) {
    char *s = *p;
    if (!*s) fail_msg("%s ends early", GOLDEN);
    char *e = strchr(s, '\n');
    if (!e) fail_msg("%s: no newline at the end", GOLDEN);
    *e = '\0';
    *p = e + 1;
    return s;
}

static golden read_golden(char **buf) {
    size_t n = 0;
    *buf = (char *)tf_read(GOLDEN, &n);
    (*buf)[n] = '\0';
    char *p = *buf, *line;
    golden g = {0};
    while (*(line = next_line(&p)) == '#') {}
    if (strncmp(line, "reference ", 10) != 0) fail_msg("%s: no reference line", GOLDEN);
    print_message("  golden data: %s; utf8proc %s (Unicode %s)\n", line, utf8proc_version(),
                  utf8proc_unicode_version());
    /* The reference (regex 2022.10.31) has Unicode 15.0's classes; another utf8proc has
     * another Unicode's, and the first new letter or number would fail below. */
    if (strcmp(utf8proc_unicode_version(), "15.0.0") != 0)
        fail_msg("utf8proc %s has Unicode %s; GPT-2's reference data here is Unicode 15.0 "
                 "(utf8proc 2.8)", utf8proc_version(), utf8proc_unicode_version());
    line = next_line(&p);
    if (strcmp(line, CONTEXTS_LINE) != 0)
        fail_msg("%s has other contexts than this test: %s", GOLDEN, line);
    if (sscanf(next_line(&p), "runs %u", &g.n_runs) != 1) fail_msg("%s: no runs", GOLDEN);
    g.run_len = malloc(g.n_runs * sizeof *g.run_len);
    g.run_sig = malloc(g.n_runs * sizeof *g.run_sig);
    for (uint32_t i = 0; i < g.n_runs; i++) {
        unsigned long long sig;
        if (sscanf(next_line(&p), "%u %llx", &g.run_len[i], &sig) != 2)
            fail_msg("%s: run %u is damaged", GOLDEN, i);
        g.run_sig[i] = sig;
    }
    if (sscanf(next_line(&p), "blocks %d %u", &g.block_bits, &g.n_blocks) != 2)
        fail_msg("%s: no blocks", GOLDEN);
    g.block_hash = malloc(g.n_blocks * sizeof *g.block_hash);
    for (uint32_t i = 0; i < g.n_blocks; i++) {
        unsigned long long h;
        if (sscanf(next_line(&p), "%llx", &h) != 1) fail_msg("%s: block %u", GOLDEN, i);
        g.block_hash[i] = h;
    }
    if (sscanf(next_line(&p), "ids %u", &g.n_ids) != 1) fail_msg("%s: no ids", GOLDEN);
    g.ids_cp = malloc(g.n_ids * sizeof *g.ids_cp);
    g.ids_line = malloc(g.n_ids * sizeof *g.ids_line);
    for (uint32_t i = 0; i < g.n_ids; i++) {
        line = next_line(&p);
        int at = 0;
        if (sscanf(line, "U+%x %n", &g.ids_cp[i], &at) != 1 || at == 0)
            fail_msg("%s: ids line %u", GOLDEN, i);
        g.ids_line[i] = line + at;
    }
    return g;
}

static void free_golden(golden *g, char *buf) {
    free(g->run_len);
    free(g->run_sig);
    free(g->block_hash);
    free(g->ids_cp);
    free(g->ids_line);
    free(buf);
}

/* Context k of code point c in UTF-8 (*n bytes); at[i] = the byte where its i-th code point
 * starts (*n_cp code points). */
static void make_context(int k, uint32_t c, unsigned char *out, size_t *n, size_t *at,
                         int *n_cp) {
    unsigned char u[4];
    size_t ul = (size_t)utf8proc_encode_char((utf8proc_int32_t)c, u);
    *n = 0;
    *n_cp = 0;
    for (const char *t = CONTEXTS[k]; *t; t++) {
        at[(*n_cp)++] = *n;
        if (*t == 'C') {
            memcpy(out + *n, u, ul);
            *n += ul;
        } else {
            out[(*n)++] = (unsigned char)*t;
        }
    }
    at[*n_cp] = *n;
}

/* The pieces of text as "|"-separated pieces, for messages. */
static void show_pieces(const unsigned char *t, size_t n, char *s, size_t cap) {
    size_t o = 0;
    for (size_t pos = 0; pos < n && o + 16 < cap;) {
        size_t end = vkm_pretok_piece(t, n, pos);
        if (pos) s[o++] = '|';
        for (; pos < end && o + 8 < cap; pos++)
            o += (size_t)snprintf(s + o, cap - o, t[pos] >= 0x21 && t[pos] < 0x7F ? "%c" : "\\x%02X",
                                  t[pos]);
    }
    s[o] = '\0';
}

/* The signature of c: bit per gap between two code points of each context, set at a piece
 * boundary (the generator's). */
static uint64_t signature(uint32_t c) {
    uint64_t sig = 0;
    int bit = 0;
    for (int k = 0; k < N_CONTEXTS; k++) {
        unsigned char t[16];
        size_t n, at[8];
        int n_cp;
        make_context(k, c, t, &n, at, &n_cp);
        for (size_t pos = 0; pos < n;) {
            size_t end = vkm_pretok_piece(t, n, pos);
            for (int i = 1; i < n_cp; i++)
                if (at[i] == end) sig |= 1ull << (bit + i - 1);
            pos = end;
        }
        bit += n_cp - 1;
    }
    return sig;
}

static void test_pretokenize_every_code_point_splits_as_the_reference(void **state) {
    (void)state;
    char *buf;
    golden g = read_golden(&buf);
    uint32_t run = 0, left = g.n_runs ? g.run_len[0] : 0, checked = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        while (left == 0 && ++run < g.n_runs) left = g.run_len[run];
        if (run >= g.n_runs) fail_msg("%s has runs for %u code points only", GOLDEN, checked);
        left--;
        checked++;
        uint64_t got = signature(c), want = g.run_sig[run];
        if (got == want) continue;
        /* The first context that differs, shown. */
        int bit = 0;
        for (int k = 0; k < N_CONTEXTS; k++) {
            unsigned char t[16];
            size_t n, at[8];
            int n_cp;
            make_context(k, c, t, &n, at, &n_cp);
            uint64_t mask = ((1ull << (n_cp - 1)) - 1) << bit;
            if ((got & mask) != (want & mask)) {
                char s[128];
                show_pieces(t, n, s, sizeof s);
                fail_msg("U+%04X in context \"%s\": pieces %s; the reference cuts at code-point "
                         "gaps 0x%llx (here 0x%llx)", c, CONTEXTS[k], s,
                         (unsigned long long)((want & mask) >> bit),
                         (unsigned long long)((got & mask) >> bit));
            }
            bit += n_cp - 1;
        }
    }
    if (run + 1 != g.n_runs || left != 0) fail_msg("%s has runs past U+10FFFF", GOLDEN);
    print_message("  %u code points in %d contexts split as the reference (%u runs)\n", checked,
                  N_CONTEXTS, g.n_runs);
    free_golden(&g, buf);
}

static uint64_t fnv1a_ids(uint64_t h, const int32_t *ids, size_t n) {
    for (size_t i = 0; i <= n; i++) {
        uint32_t v = i < n ? (uint32_t)ids[i] : 0xFFFFFFFFu;
        for (int k = 0; k < 4; k++) h = (h ^ ((v >> (8 * k)) & 0xFF)) * 0x100000001B3ull;
    }
    return h;
}

/* The ids of c in every context through the public encoder, and their hash. */
static uint64_t encode_contexts(vka_context *ctx, const vka_tokenizer *tok, uint32_t c,
                                uint64_t h, char *line, size_t cap) {
    size_t o = 0;
    for (int k = 0; k < N_CONTEXTS; k++) {
        unsigned char t[16];
        size_t n, at[8];
        int n_cp;
        int32_t ids[16];
        size_t n_ids = 0;
        make_context(k, c, t, &n, at, &n_cp);
        if (vka_tokenizer_encode(tok, (const char *)t, n, ids, &n_ids) != VKA_SUCCESS)
            fail_msg("encode U+%04X: %s", c, vka_last_error(ctx));
        h = fnv1a_ids(h, ids, n_ids);
        if (line) {
            if (k) o += (size_t)snprintf(line + o, cap - o, " | ");
            for (size_t i = 0; i < n_ids; i++)
                o += (size_t)snprintf(line + o, cap - o, i ? " %d" : "%d", ids[i]);
        }
    }
    return h;
}

static void test_pretokenize_ids_of_every_code_point_match_the_reference(void **state) {
    (void)state;
    char *buf;
    golden g = read_golden(&buf);
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = NULL;
    if (vka_tokenizer_load(ctx, GPT2_FILE, &tok) != VKA_SUCCESS)
        fail_msg("load %s: %s", GPT2_FILE, vka_last_error(ctx));
    char line[512];
    for (uint32_t i = 0; i < g.n_ids; i++) {
        encode_contexts(ctx, tok, g.ids_cp[i], 0, line, sizeof line);
        if (strcmp(line, g.ids_line[i]) != 0)
            fail_msg("U+%04X in the contexts %s ...: ids %s; the reference's %s", g.ids_cp[i],
                     CONTEXTS_LINE + 12, line, g.ids_line[i]);
    }
    uint32_t per = 1u << g.block_bits;
    if ((uint64_t)g.n_blocks * per != 0x110000) fail_msg("%s: %u blocks", GOLDEN, g.n_blocks);
    for (uint32_t b = 0; b < g.n_blocks; b++) {
        uint64_t h = 0xCBF29CE484222325ull;
        for (uint32_t c = b * per; c < (b + 1) * per; c++)
            if (c < 0xD800 || c > 0xDFFF) h = encode_contexts(ctx, tok, c, h, NULL, 0);
        if (h != g.block_hash[b])
            fail_msg("the ids of U+%04X..U+%04X differ from the reference's (hash %016llx, the "
                     "reference's %016llx)", b * per, (b + 1) * per - 1, (unsigned long long)h,
                     (unsigned long long)g.block_hash[b]);
    }
    print_message("  ids of every code point in %d contexts equal the reference's (%u blocks, %u "
                  "code points written out)\n", N_CONTEXTS, g.n_blocks, g.n_ids);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
    free_golden(&g, buf);
}

/* Examples the issue named, and the rules of the pattern one by one. */
static void test_pretokenize_known_splits(void **state) {
    (void)state;
    static const struct {
        const char *text, *pieces;
    } cases[] = {
        {"word \n\nFirst", "word|\\x20\\x0A|\\x0A|First"},
        {" \n\n", "\\x20\\x0A\\x0A"},
        {"x \xE1\xA0\x8Ey", "x|\\x20\\xE1\\xA0\\x8E|y"}, /* U+180E is no whitespace */
        {"a\x1C" "b", "a|\\x1C|b"},                     /* nor U+001C */
        {"a\xC2\x85" "b", "a|\\xC2\\x85|b"},            /* U+0085 is */
        {"  a", "\\x20|\\x20a"},
        {"a\t\tb", "a|\\x09|\\x09|b"},
        {"a   ", "a|\\x20\\x20\\x20"},
        {"I'm they're we'll it's ''s", "I|'m|\\x20they|'re|\\x20we|'ll|\\x20it|'s|\\x20''|s"},
        {"'S", "'|S"},
        {"x1.5", "x|1|.|5"},
        {" !!", "\\x20!!"},
        {"a\xFF" "b", "a|\\xFF|b"},
        {" \xFF", "\\x20|\\xFF"},       /* an invalid byte ends the text for (?!\S) */
        {"  \xFF", "\\x20\\x20|\\xFF"},
        {"a\xE4\xB8", "a|\\xE4|\\xB8"}, /* a cut sequence: each byte alone */
        {"\xED\xA0\x80", "\\xED|\\xA0|\\x80"}, /* a surrogate */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[256];
        show_pieces((const unsigned char *)cases[i].text, strlen(cases[i].text), s, sizeof s);
        if (strcmp(s, cases[i].pieces) != 0)
            fail_msg("case %zu: pieces %s, want %s", i, s, cases[i].pieces);
    }
}

/* pieces of text[0 .. n) appended to p (byte ends); returns the count. */
static size_t piece_ends(const unsigned char *t, size_t n, size_t base, size_t *p) {
    size_t k = 0;
    for (size_t pos = 0; pos < n;) {
        pos = vkm_pretok_piece(t, n, pos);
        p[k++] = base + pos;
    }
    return k;
}

static void assert_cut_keeps_pieces(const unsigned char *t, size_t len, size_t cut,
                                    const size_t *whole, size_t n_whole, size_t *tmp) {
    size_t k = piece_ends(t, cut, 0, tmp);
    k += piece_ends(t + cut, len - cut, cut, tmp + k);
    bool same = k == n_whole;
    for (size_t i = 0; same && i < k; i++) same = tmp[i] == whole[i];
    if (!same) {
        char a[512], b[512], w[512];
        show_pieces(t, cut, a, sizeof a);
        show_pieces(t + cut, len - cut, b, sizeof b);
        show_pieces(t, len, w, sizeof w);
        fail_msg("cut at byte %zu of %zu changes the pieces: %s + %s, whole %s", cut, len, a, b, w);
    }
}

/* Every cut vkm_pretok_cut gives, with all of the text or only a prefix of it in hand, keeps
 * the pieces of the whole; and it finds cuts (an English sentence has one at every word). */
static void test_pretokenize_cuts_keep_the_pieces(void **state) {
    (void)state;
    uint64_t seed = 17;
    size_t cuts = 0;
    for (int round = 0; round < 300; round++) {
        unsigned char t[200];
        size_t len = tg_random_text(&seed, t, sizeof t);
        size_t whole[200], tmp[400];
        size_t n_whole = piece_ends(t, len, 0, whole);
        for (size_t from = 1; from <= len; from++) {
            size_t cut = vkm_pretok_cut(t, len, 0, from, true);
            if (cut < from || cut > len) fail_msg("cut %zu from %zu of %zu", cut, from, len);
            assert_cut_keeps_pieces(t, len, cut, whole, n_whole, tmp);
            /* Only t[0 .. have) read yet: a cut it names holds for the whole text. */
            for (size_t have = from; have <= len && have <= from + 6; have++) {
                size_t c = vkm_pretok_cut(t, have, 0, from, false);
                if (c == 0) continue;
                if (c < from || c >= have) fail_msg("cut %zu from %zu with %zu bytes", c, from, have);
                assert_cut_keeps_pieces(t, len, c, whole, n_whole, tmp);
                cuts++;
            }
            /* From a cut on, as the callers go. */
            if (cut < len) {
                size_t next = vkm_pretok_cut(t, len, cut, cut + 1, true);
                assert_true(next > cut);
                assert_cut_keeps_pieces(t, len, next, whole, n_whole, tmp);
            }
        }
    }
    const char *s = "Before we proceed any further, hear me speak.";
    for (size_t from = 1; from < strlen(s); from++) {
        size_t cut = vkm_pretok_cut((const unsigned char *)s, strlen(s), 0, from, true);
        if (cut - from > 8) fail_msg("no cut from %zu to %zu in \"%s\"", from, cut, s);
    }
    print_message("  %zu cuts of partly read texts checked\n", cuts);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretokenize_known_splits),
        cmocka_unit_test(test_pretokenize_cuts_keep_the_pieces),
        cmocka_unit_test(test_pretokenize_every_code_point_splits_as_the_reference),
        cmocka_unit_test(test_pretokenize_ids_of_every_code_point_match_the_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
