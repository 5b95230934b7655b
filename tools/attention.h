/*
 * `vkattn attention`'s pieces: token labels (tools/attention_label.c) and the SVG picture of the
 * weights (tools/attention_svg.c). The command itself is tools/cmd_attention.c.
 */
#ifndef VKA_ATTENTION_H
#define VKA_ATTENTION_H

#include <stddef.h>

/* Longest label, in characters, before it is cut with an ellipsis. */
#define ATTN_LABEL_CHARS 14
/* Bytes a label may take: each character is at most "\xNN" (4 bytes) or 3 UTF-8 bytes. */
#define ATTN_LABEL_BYTES (4 * ATTN_LABEL_CHARS + 8)

/* A token's bytes as a label a person can read, UTF-8 (not yet escaped for XML or JSON):
 * space as U+2423 '␣', newline U+21B5 '↵', tab U+21E5 '⇥', carriage return U+240D '␍', other
 * control bytes and bytes that are not valid UTF-8 (a character a BPE token holds only part
 * of, U+FFFE, U+FFFF) as the text \xNN; longer than ATTN_LABEL_CHARS characters: cut, and '…'
 * appended. Returns the number of characters (for layout). */
int attn_label(const char *bytes, size_t len, char out[ATTN_LABEL_BYTES]);
/* Length of the valid UTF-8 character at p (n bytes left), 0 if none starts there (overlong
 * forms, surrogates, code points past U+10FFFF, U+FFFE and U+FFFF count as invalid: XML
 * forbids the last two). */
size_t attn_utf8_char(const unsigned char *p, size_t n);

/* What the picture shows: n_layers x n_heads panels of (T, T) weights, one row of panels per
 * layer (wrapped after 4 panels). */
typedef struct attn_picture {
    const char *title;           /* first line, e.g. "model.bin: attention weights"; the second
                                    is the prompt, its labels joined */
    int T;
    const char *const *labels;   /* (T) token labels (attn_label) */
    const int *label_chars;      /* (T) their lengths in characters */
    int n_layers, n_heads;
    const int *layers;           /* (n_layers) layer numbers shown */
    const int *heads;            /* (n_heads) head numbers shown */
    const float *weights;        /* (n_layers, n_heads, T, T); row t: query t, column j: key j */
} attn_picture;

/* The picture as an SVG document (malloc'd, *len bytes; NULL if out of memory). */
char *attn_svg(const attn_picture *p, size_t *len);

#endif
