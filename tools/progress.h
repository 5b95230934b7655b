/* An updating progress line that fits the terminal: fields joined in order, the least
 * important dropped whole until the line fits. Pure (no terminal needed) except
 * progress_width. */
#ifndef VKA_TOOLS_PROGRESS_H
#define VKA_TOOLS_PROGRESS_H

#include <stddef.h>

typedef struct progress_field {
    const char *text; /* ASCII, one column per byte; NULL or "" = absent */
    int rank;         /* 0 = most important; higher ranks are dropped first */
} progress_field;

/* Writes into out (cap bytes, NUL-terminated) the fields joined by sep, in their order, leaving
 * out the highest-ranked fields (of equal rank, the later one first) until the line is at most
 * width columns. A field is never cut, except when the most important field alone is wider than
 * width: then it is cut to width. Returns the line's length. */
size_t progress_fit(const progress_field *fields, int n, const char *sep, int width, char *out,
                    size_t cap);

/* The width of the terminal on fd (TIOCGWINSZ), else $COLUMNS, else 80. */
int progress_width(int fd);

#endif
