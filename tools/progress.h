/* An updating progress line that fits the terminal: fields joined in order, the least
 * important dropped whole until the line fits. Pure (no terminal needed) except
 * progress_width. */
#ifndef VKA_TOOLS_PROGRESS_H
#define VKA_TOOLS_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

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

/* "ETA 1m05s": how long the steps_left steps still to do take at the pace of the timed ones
 * (timed_steps of them in seconds), or "ETA --" while none is timed and some are left: the
 * first step of a run records the graphs and builds the pipelines, so its time (seconds, or
 * minutes on a software driver) says nothing about the others and is never timed. "ETA 0s"
 * when none is left; "ETA ?" for a time past 10^8 s. */
void progress_eta(double seconds, uint64_t timed_steps, uint64_t steps_left, char *out,
                  size_t cap);

/* The width of the terminal on fd (TIOCGWINSZ), else $COLUMNS, else 80. */
int progress_width(int fd);

#endif
