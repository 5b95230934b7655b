/* Token labels for `vkattn attention`: whitespace made visible, invalid UTF-8 shown safely. */
#include "attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t attn_utf8_char(const unsigned char *p, size_t n) {
    if (n == 0) return 0;
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    /* The second byte's range rules out overlong forms, surrogates and > U+10FFFF (RFC 3629). */
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F) ||
        (c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
        return 0;
    if (c == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF)) return 0; /* U+FFFE/F */
    return len;
}

/* The visible form of the ASCII control byte c (UTF-8), or NULL for "\xNN". */
static const char *shown_control(unsigned char c) {
    switch (c) {
    case ' ': return "\xE2\x90\xA3";  /* U+2423 OPEN BOX */
    case '\n': return "\xE2\x86\xB5"; /* U+21B5 DOWNWARDS ARROW WITH CORNER LEFTWARDS */
    case '\t': return "\xE2\x87\xA5"; /* U+21E5 RIGHTWARDS ARROW TO BAR */
    case '\r': return "\\r"; /* written out, as other control bytes are: fonts lack U+240D */
    default: return NULL;
    }
}

int attn_label(const char *bytes, size_t len, char out[ATTN_LABEL_BYTES]) {
    const unsigned char *p = (const unsigned char *)bytes;
    size_t used = 0;
    int chars = 0;
    for (size_t i = 0; i < len;) {
        if (chars == ATTN_LABEL_CHARS) {
            memcpy(out + used, "\xE2\x80\xA6", 3); /* U+2026 HORIZONTAL ELLIPSIS */
            used += 3;
            chars++;
            break;
        }
        size_t n = attn_utf8_char(p + i, len - i);
        const char *shown = n == 1 ? shown_control(p[i]) : NULL;
        if (shown) {
            memcpy(out + used, shown, 3);
            used += 3;
        } else if (n == 0 || (n == 1 && (p[i] < 0x20 || p[i] == 0x7F))) {
            snprintf(out + used, 5, "\\x%02X", p[i]);
            used += 4;
            n = 1;
        } else {
            memcpy(out + used, p + i, n);
            used += n;
        }
        i += n;
        chars++;
    }
    out[used] = '\0';
    return chars;
}
