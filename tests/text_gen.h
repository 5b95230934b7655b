/* Random texts that stress GPT-2's pre-tokenizer (header-only): runs of spaces, tabs, newlines
 * and other whitespace (ASCII and not), contractions and apostrophes, letters, digits and
 * punctuation of several scripts in 1- to 4-byte UTF-8, combining marks, code points PCRE2 or
 * JavaScript class otherwise (U+180E, U+FEFF, U+200B, U+001C), and bytes that are not UTF-8
 * (a stray continuation byte, cut sequences). Never a NUL, few control characters (the text
 * rule of vka_data_open). */
#ifndef VKA_TEXT_GEN_H
#define VKA_TEXT_GEN_H

#include <stdint.h>
#include <string.h>

static const char *const tg_parts[] = {
    " ", " ", " ", "  ", "   ", "\t", "\t\t", "\n", "\n", "\n\n", " \n\n", "\r\n", " \t\n",
    "\xC2\xA0",          /* U+00A0 no-break space (White_Space) */
    "\xE3\x80\x80",      /* U+3000 ideographic space */
    "\xE2\x80\xA8",      /* U+2028 line separator */
    "\xC2\x85",          /* U+0085 next line */
    "\xE1\xA0\x8E",      /* U+180E Mongolian vowel separator (not White_Space) */
    "\xE2\x80\x8B",      /* U+200B zero-width space (not White_Space) */
    "\xEF\xBB\xBF",      /* U+FEFF byte order mark */
    "\x1C",              /* a separator Python's isspace takes, regex's \s does not */
    "a", "the", "First", "x", "s", "t", "re", "ll", "d", "m", "ve",
    "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "''",
    "1", "42", "2024", ".", ",", "!?", "--", "(", ")", "\"",
    "\xC3\xA9",          /* é */
    "\xCC\x81",          /* U+0301 combining acute (Mn: other) */
    "\xD9\xA3",          /* U+0663 Arabic-Indic three (Nd) */
    "\xE2\x85\xA0",      /* U+2160 Roman numeral one (Nl) */
    "\xE4\xB8\xAD\xE6\x96\x87", /* 中文 */
    "\xE2\x80\x94",      /* U+2014 em dash */
    "\xF0\x9F\x98\x80",  /* U+1F600 emoji (So) */
    "\xF0\x9D\x90\x80",  /* U+1D400 mathematical bold A (Lu) */
    "\xF0\x91\xBD\x90",  /* U+11F50 Kawi digit zero (Nd, new in Unicode 15) */
    "\x80", "\xFF", "\xE4\xB8", "\xF0\x9F\x98", "\xED\xA0\x80", /* not UTF-8 */
};

/* Up to cap bytes of random parts (at least 1 byte when cap >= 4); returns the length. */
static inline size_t tg_random_text(uint64_t *seed, unsigned char *out, size_t cap) {
    size_t len = 0;
    const size_t n_parts = sizeof tg_parts / sizeof tg_parts[0];
    for (;;) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        const char *p = tg_parts[(*seed >> 33) % n_parts];
        size_t k = strlen(p);
        if (len + k > cap) break;
        memcpy(out + len, p, k);
        len += k;
    }
    return len;
}

#endif
