/*
 * GPT-2's pre-tokenizer matched by hand (see pretokenize.h), as tiktoken-style pre-tokenizers
 * do. At a piece's start the pattern's alternatives are tried in order, and each is decided by
 * the code points at the start and by where a run of one class ends:
 *   'X               a contraction ('s 't 're 've 'm 'll 'd, ASCII, case-sensitive);
 *   " "? class run   a space and/or a run of letters, of numbers, or of anything else that is
 *                    not whitespace (the apostrophe too, when no contraction starts there);
 *   \s+(?!\S)        a whitespace run up to the end (or an invalid byte: no match crosses one),
 *                    or, before a non-space, the run but its last code point, which then
 *                    starts the next piece (a space takes the following run along);
 *   \s+              the single whitespace code point left before a non-space.
 * The classes are those of Python's `regex` module (GPT-2's reference), checked for every code
 * point by tests/test_pretokenize.c against tests/data/gpt2_unicode.golden.
 */
#include "model/pretokenize.h"

#include <stdint.h>
#include <utf8proc.h>

enum { CL_SPACE, CL_LETTER, CL_NUMBER, CL_OTHER };

/* Unicode's White_Space property (PropList.txt, unchanged since Unicode 6.3, which took U+180E
 * out): what `regex` means by \s. The ASCII ones (\t \n \v \f \r and space) are tested first. */
static bool is_white_space(uint32_t c) {
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int cp_class(uint32_t c) {
    if (c < 0x80) {
        if ((c >= 9 && c <= 13) || c == ' ') return CL_SPACE;
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return CL_LETTER;
        if (c >= '0' && c <= '9') return CL_NUMBER;
        return CL_OTHER;
    }
    if (is_white_space(c)) return CL_SPACE;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
    if (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) return CL_LETTER;
    if (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) return CL_NUMBER;
    return CL_OTHER;
}

/* The UTF-8 sequence at text[pos] (pos < len): its length (1..4) and class, 0 if it is not
 * UTF-8, or -1 if len cuts it while what is there could still become a valid sequence. */
static int decode(const unsigned char *t, size_t len, size_t pos, int *cls) {
    unsigned char b = t[pos];
    if (b < 0x80) {
        *cls = cp_class(b);
        return 1;
    }
    int n;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range (RFC 3629) */
    uint32_t c;
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2;
        c = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        c = b & 0x0Fu;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        c = b & 0x07u;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if (pos + (size_t)i >= len) return -1;
        unsigned char x = t[pos + (size_t)i];
        if (x < (i == 1 ? lo : 0x80) || x > (i == 1 ? hi : 0xBF)) return 0;
        c = c << 6 | (x & 0x3Fu);
    }
    *cls = cp_class(c);
    return n;
}

/* Length and class of the code point at pos, 0 at the end, at a byte that is not UTF-8, or at
 * a sequence len cuts (the matcher's text ends at len). */
static int at(const unsigned char *t, size_t len, size_t pos, int *cls) {
    if (pos >= len) return 0;
    int n = decode(t, len, pos, cls);
    return n > 0 ? n : 0;
}

/* Where the run of class cls continuing at pos ends. */
static size_t run_end(const unsigned char *t, size_t len, size_t pos, int cls) {
    int c, n;
    while ((n = at(t, len, pos, &c)) > 0 && c == cls) pos += (size_t)n;
    return pos;
}

size_t vkm_pretok_piece(const unsigned char *t, size_t len, size_t pos) {
    int cls, next;
    int n = at(t, len, pos, &cls);
    if (n == 0) return pos + 1; /* not UTF-8: a piece of its own */
    if (t[pos] == '\'' && pos + 1 < len) {
        unsigned char a = t[pos + 1], b = pos + 2 < len ? t[pos + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return pos + 3;
    }
    if (t[pos] == ' ') {
        int m = at(t, len, pos + 1, &next);
        if (m > 0 && next != CL_SPACE) return run_end(t, len, pos + 1 + (size_t)m, next);
    }
    if (cls != CL_SPACE) return run_end(t, len, pos + (size_t)n, cls);
    size_t last = pos, q = pos + (size_t)n; /* last: where the run's last code point starts */
    int m;
    while ((m = at(t, len, q, &next)) > 0 && next == CL_SPACE) {
        last = q;
        q += (size_t)m;
    }
    if (m == 0) return q;          /* the end or a barrier: (?!\S) holds after the whole run */
    return last > pos ? last : q;  /* before \S: all but the last, or \s+ of one */
}

size_t vkm_pretok_cut(const unsigned char *t, size_t len, size_t start, size_t from,
                      bool at_end) {
    bool prev_valid = false, prev_joins = true; /* the code point before q */
    int prev_cls = CL_SPACE;
    for (size_t q = start; q < len;) {
        int cls = CL_OTHER;
        int n = decode(t, len, q, &cls);
        if (n < 0 && !at_end) return 0; /* the rest of the sequence decides */
        bool valid = n > 0;
        if (q > start && q >= from) {
            if (!prev_valid || !valid) return q; /* next to a barrier */
            if (!prev_joins && cls != prev_cls) return q;
        }
        /* Whitespace can be split off its run's end (\s+(?!\S)), an apostrophe can start a
         * contraction: what follows them may still join them. */
        prev_valid = valid;
        prev_cls = cls;
        prev_joins = !valid || cls == CL_SPACE || t[q] == '\'';
        q += valid ? (size_t)n : 1;
    }
    return at_end ? len : 0;
}
