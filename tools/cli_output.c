/* Output: JSON strings and numbers (valid UTF-8 whatever the bytes), shell words, perplexity
 * text, and the clock (see cli.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cli.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at p (n bytes left), or 0 if p[0] does not start
 * one (Unicode's Table 3-7: no overlong forms, no surrogates U+D800..DFFF, nothing above
 * U+10FFFF, no truncated sequence). */
static size_t utf8_sequence(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || n < len) return 0;
    /* The second byte's range depends on the first (it rules out the overlongs, the
     * surrogates and what lies past U+10FFFF); the others are plain continuations. */
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

void cli_shell_word(FILE *f, const char *s) {
    size_t n = strlen(s);
    if (n && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+./,:=@%")
                 == n) {
        fputs(s, f);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    bool plain = true; /* valid UTF-8 without control characters: single quotes keep it */
    for (size_t i = 0; i < n && plain;) {
        size_t len = utf8_sequence(p + i, n - i);
        plain = len > 0 && p[i] >= 0x20 && p[i] != 0x7F;
        i += len;
    }
    if (plain) {
        fputc('\'', f);
        for (; *s; s++) {
            if (*s == '\'') fputs("'\\''", f);
            else fputc(*s, f);
        }
        fputc('\'', f);
        return;
    }
    /* $'...' (bash, zsh, ksh, POSIX.1-2024 sh): a byte that is not UTF-8, or a control
     * character, as \xHH, so the word survives a copy from a UTF-8 terminal byte for byte. */
    fputs("$'", f);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence(p + i, n - i);
        if (len == 0 || p[i] < 0x20 || p[i] == 0x7F) {
            fprintf(f, "\\x%02X", p[i]);
            i++;
            continue;
        }
        if (p[i] == '\'' || p[i] == '\\') fputc('\\', f);
        fwrite(p + i, 1, len, f);
        i += len;
    }
    fputc('\'', f);
}

void cli_json_string_n(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len = utf8_sequence(p + i, n - i);
        if (len == 0) {
            /* Not UTF-8: the byte as Python's surrogateescape decodes it (docs/commands.md,
             * "JSON output"). */
            fprintf(f, "\\udc%02x", c);
            i++;
            continue;
        }
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
        else fwrite(p + i, 1, len, f);
        i += len;
    }
    fputc('"', f);
}

void cli_json_string(FILE *f, const char *s) { cli_json_string_n(f, s, strlen(s)); }

void cli_json_number(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.9g", x);
    else fputs("null", f);
}

void cli_json_key(FILE *f, const char *key) { fprintf(f, ",\"%s\":", key); }

void cli_json_num(FILE *f, const char *key, double x) {
    cli_json_key(f, key);
    cli_json_number(f, x);
}

void cli_json_str(FILE *f, const char *key, const char *s) {
    cli_json_key(f, key);
    cli_json_string(f, s);
}

void cli_perplexity_text(double ppl, char *out, size_t cap) {
    if (ppl < 1e6) snprintf(out, cap, "%.3f", ppl);
    else snprintf(out, cap, "%.3e", ppl); /* also "inf" when exp(loss) overflows */
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
