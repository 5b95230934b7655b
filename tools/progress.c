/* See progress.h. */
#define _DEFAULT_SOURCE /* TIOCGWINSZ */
#include "progress.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

enum { PROGRESS_MAX_FIELDS = 32 };

static size_t joined_len(const progress_field *fields, const bool *keep, int n, size_t sep_len) {
    size_t len = 0;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (!keep[i]) continue;
        len += (kept++ ? sep_len : 0) + strlen(fields[i].text);
    }
    return len;
}

size_t progress_fit(const progress_field *fields, int n, const char *sep, int width, char *out,
                    size_t cap) {
    if (cap == 0) return 0;
    out[0] = '\0';
    if (n > PROGRESS_MAX_FIELDS) n = PROGRESS_MAX_FIELDS;
    size_t limit = width > 0 ? (size_t)width : 0, sep_len = strlen(sep);
    bool keep[PROGRESS_MAX_FIELDS];
    int kept = 0;
    for (int i = 0; i < n; i++) {
        keep[i] = fields[i].text && fields[i].text[0];
        kept += keep[i];
    }
    /* Drop the highest rank (the later of equals) until it fits or one field is left. */
    while (kept > 1 && joined_len(fields, keep, n, sep_len) > limit) {
        int worst = -1;
        for (int i = 0; i < n; i++)
            if (keep[i] && (worst < 0 || fields[i].rank >= fields[worst].rank)) worst = i;
        keep[worst] = false;
        kept--;
    }
    size_t len = 0;
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (!keep[i]) continue;
        const char *parts[2] = {first ? "" : sep, fields[i].text};
        first = false;
        for (int p = 0; p < 2; p++)
            for (const char *s = parts[p]; *s && len < limit && len + 1 < cap; s++) out[len++] = *s;
    }
    out[len] = '\0';
    return len;
}

void progress_eta(double seconds, uint64_t timed_steps, uint64_t steps_left, char *out,
                  size_t cap) {
    if (steps_left == 0) {
        snprintf(out, cap, "ETA 0s");
        return;
    }
    if (timed_steps == 0) {
        snprintf(out, cap, "ETA --");
        return;
    }
    double s = seconds / (double)timed_steps * (double)steps_left;
    if (!(s >= 0.0) || s > 1e8) snprintf(out, cap, "ETA ?");
    else if (s >= 3600) snprintf(out, cap, "ETA %dh%02dm", (int)(s / 3600), (int)(fmod(s, 3600) / 60));
    else if (s >= 60) snprintf(out, cap, "ETA %dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(out, cap, "ETA %ds", (int)s);
}

int progress_width(int fd) {
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *cols = getenv("COLUMNS");
    long c = cols ? strtol(cols, NULL, 10) : 0;
    return c > 0 && c < 100000 ? (int)c : 80;
}
