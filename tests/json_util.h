/* A small JSON reader for the tests (RFC 8259: objects, arrays, strings, numbers, true, false,
 * null): parses a whole document into a tree, or says where it is malformed. Header-only. */
#ifndef VKA_JSON_UTIL_H
#define VKA_JSON_UTIL_H

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum jv_kind { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ } jv_kind;

typedef struct jv {
    jv_kind kind;
    bool b;
    double num;
    char *str;          /* JV_STR: the decoded text, UTF-8; a lone \udc80..\udcff (the CLI's
                           escape of a byte that is not UTF-8, Python's surrogateescape) is
                           that byte, another lone surrogate '?'; NUL ends it early */
    struct jv *items;   /* JV_ARR, JV_OBJ: n values */
    char **keys;        /* JV_OBJ: n keys */
    int n;
} jv;

typedef struct jv_parser {
    const char *s, *start;
    char err[160];
    int depth;
} jv_parser;

static inline bool jv_fail(jv_parser *p, const char *what) {
    if (!p->err[0])
        snprintf(p->err, sizeof p->err, "%s at offset %ld", what, (long)(p->s - p->start));
    return false;
}

static inline void jv_ws(jv_parser *p) {
    while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r') p->s++;
}

static inline bool jv_value(jv_parser *p, jv *out);

/* The length of the well-formed UTF-8 sequence at p (n bytes left), 0 if none starts there:
 * Unicode's Table 3-7 (no overlongs, no surrogates, nothing past U+10FFFF, not truncated). */
static inline size_t jv_utf8_len(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || n < len) return 0;
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Whether the n bytes at s are all well-formed UTF-8. */
static inline bool jv_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0, len; i < n; i += len)
        if ((len = jv_utf8_len(p + i, n - i)) == 0) return false;
    return true;
}

/* Four hex digits at p->s, consumed; false if they are not. */
static inline bool jv_hex4(jv_parser *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++, p->s++) {
        if (!isxdigit((unsigned char)*p->s)) return false;
        int ch = (unsigned char)*p->s;
        *v = *v * 16 + (unsigned)(isdigit(ch) ? ch - '0' : tolower(ch) - 'a' + 10);
    }
    return true;
}

/* Code point u as UTF-8 into out; returns the bytes written. */
static inline size_t jv_put_utf8(unsigned u, char *out) {
    if (u < 0x80) { out[0] = (char)u; return 1; }
    if (u < 0x800) { out[0] = (char)(0xC0 | u >> 6); out[1] = (char)(0x80 | (u & 0x3F)); return 2; }
    if (u < 0x10000) {
        out[0] = (char)(0xE0 | u >> 12); out[1] = (char)(0x80 | (u >> 6 & 0x3F));
        out[2] = (char)(0x80 | (u & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | u >> 18); out[1] = (char)(0x80 | (u >> 12 & 0x3F));
    out[2] = (char)(0x80 | (u >> 6 & 0x3F)); out[3] = (char)(0x80 | (u & 0x3F));
    return 4;
}

static inline bool jv_string(jv_parser *p, char **out) {
    if (*p->s != '"') return jv_fail(p, "expected a string");
    p->s++;
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        unsigned char c = (unsigned char)*p->s;
        if (c == '\0' || c < 0x20) {
            free(buf);
            return jv_fail(p, "unterminated string or raw control character");
        }
        if (n + 8 > cap) buf = realloc(buf, cap *= 2);
        if (c >= 0x80) { /* raw bytes: strictly UTF-8 (RFC 8259 section 8.1) */
            size_t avail = 1;
            while (avail < 4 && p->s[avail]) avail++;
            size_t len = jv_utf8_len((const unsigned char *)p->s, avail);
            if (len == 0) {
                free(buf);
                return jv_fail(p, "a byte that is not UTF-8");
            }
            memcpy(buf + n, p->s, len);
            n += len;
            p->s += len;
            continue;
        }
        p->s++;
        if (c == '"') break;
        if (c == '\\') {
            char e = *p->s++;
            switch (e) {
            case '"': case '\\': case '/': c = (unsigned char)e; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned v = 0, lo = 0;
                if (!jv_hex4(p, &v)) {
                    free(buf);
                    return jv_fail(p, "bad \\u escape");
                }
                if (v >= 0xD800 && v <= 0xDBFF && p->s[0] == '\\' && p->s[1] == 'u') {
                    const char *back = p->s;
                    p->s += 2;
                    if (jv_hex4(p, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                        n += jv_put_utf8(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00), buf + n);
                        continue;
                    }
                    p->s = back;
                }
                if (v >= 0xDC80 && v <= 0xDCFF) buf[n++] = (char)(v - 0xDC00);
                else if (v >= 0xD800 && v <= 0xDFFF) buf[n++] = '?';
                else n += jv_put_utf8(v, buf + n);
                continue;
            }
            default: free(buf); return jv_fail(p, "bad escape");
            }
        }
        buf[n++] = (char)c;
    }
    buf[n] = '\0';
    *out = buf;
    return true;
}

static inline bool jv_number(jv_parser *p, jv *out) {
    const char *s = p->s;
    if (*s == '-') s++;
    if (!isdigit((unsigned char)*s)) return jv_fail(p, "expected a value");
    if (*s == '0' && isdigit((unsigned char)s[1])) return jv_fail(p, "leading zero");
    char *end = NULL;
    out->kind = JV_NUM;
    out->num = strtod(p->s, &end);
    /* strtod also takes "inf", "nan" and hex, which JSON does not */
    for (const char *c = p->s; c < end; c++)
        if (!strchr("0123456789+-.eE", *c)) return jv_fail(p, "not a JSON number");
    p->s = end;
    return true;
}

static inline bool jv_literal(jv_parser *p, const char *word, jv_kind kind, bool b, jv *out) {
    size_t n = strlen(word);
    if (strncmp(p->s, word, n) != 0) return jv_fail(p, "expected a value");
    p->s += n;
    out->kind = kind;
    out->b = b;
    return true;
}

static inline bool jv_push(jv *v, jv *item, char *key) {
    v->items = realloc(v->items, (size_t)(v->n + 1) * sizeof *v->items);
    if (v->kind == JV_OBJ) v->keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof *v->keys);
    v->items[v->n] = *item;
    if (v->kind == JV_OBJ) v->keys[v->n] = key;
    v->n++;
    return true;
}

static inline bool jv_container(jv_parser *p, jv *out, bool object) {
    out->kind = object ? JV_OBJ : JV_ARR;
    char close = object ? '}' : ']';
    p->s++;
    if (++p->depth > 64) return jv_fail(p, "nested too deeply");
    jv_ws(p);
    if (*p->s == close) {
        p->s++;
        p->depth--;
        return true;
    }
    for (;;) {
        char *key = NULL;
        jv item = {0};
        jv_ws(p);
        if (object) {
            if (!jv_string(p, &key)) return false;
            jv_ws(p);
            if (*p->s++ != ':') {
                free(key);
                return jv_fail(p, "expected ':'");
            }
        }
        if (!jv_value(p, &item)) {
            free(key);
            return false;
        }
        jv_push(out, &item, key);
        jv_ws(p);
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s == close) {
            p->s++;
            p->depth--;
            return true;
        }
        return jv_fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static inline bool jv_value(jv_parser *p, jv *out) {
    jv_ws(p);
    switch (*p->s) {
    case '{': return jv_container(p, out, true);
    case '[': return jv_container(p, out, false);
    case '"': out->kind = JV_STR; return jv_string(p, &out->str);
    case 't': return jv_literal(p, "true", JV_BOOL, true, out);
    case 'f': return jv_literal(p, "false", JV_BOOL, false, out);
    case 'n': return jv_literal(p, "null", JV_NULL, false, out);
    default: return jv_number(p, out);
    }
}

static inline void jv_clear(jv *v) {
    for (int i = 0; i < v->n; i++) {
        jv_clear(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

/* Parse text (the whole of it must be one value); false with err filled if malformed. */
static inline bool jv_parse(const char *text, jv *out, char *err, size_t cap) {
    jv_parser p = {.s = text, .start = text};
    memset(out, 0, sizeof *out);
    bool ok = jv_value(&p, out);
    if (ok) {
        jv_ws(&p);
        if (*p.s) ok = jv_fail(&p, "text after the value");
    }
    if (!ok) {
        snprintf(err, cap, "%s", p.err);
        jv_clear(out);
    }
    return ok;
}

/* obj[key], or NULL (also when obj is not an object). */
static inline const jv *jv_get(const jv *obj, const char *key) {
    if (!obj || obj->kind != JV_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}
/* The number at obj[key], or NaN. */
static inline double jv_num(const jv *obj, const char *key) {
    const jv *v = jv_get(obj, key);
    return v && v->kind == JV_NUM ? v->num : NAN;
}
/* The string at obj[key], or "" . */
static inline const char *jv_str(const jv *obj, const char *key) {
    const jv *v = jv_get(obj, key);
    return v && v->kind == JV_STR ? v->str : "";
}

#endif
