/*
 * vkattn bench --plot: an SVG with two panels, log-log. Left: matmul GFLOP/s against size
 * (M N K)^(1/3), square matrices as lines and the models' layer shapes as markers, with each
 * backend's measured FMA ceiling as a dashed line. Right: masked softmax GB/s against the row
 * length T, forward and backward, with each backend's copy bandwidth as a dashed line.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 1100
#define H 534

static const char *const colors[BENCH_NB] = {"#c0392b", "#1f5fa8"}; /* vulkan, cpu */

typedef struct panel {
    double x0, y0, w, h;          /* plot area in pixels */
    double xlo, xhi, ylo, yhi;    /* data range (log scales) */
} panel;

static double px(const panel *p, double x) {
    return p->x0 + p->w * (log(x) - log(p->xlo)) / (log(p->xhi) - log(p->xlo));
}
static double py(const panel *p, double y) {
    return p->y0 + p->h * (1.0 - (log(y) - log(p->ylo)) / (log(p->yhi) - log(p->ylo)));
}

/* Points of one series of one backend: rows whose series is name. */
static int points(const bench *b, int dev, const char *name, double *x, double *y, int cap) {
    int n = 0;
    for (int i = 0; i < b->n_rows && n < cap; i++) {
        const bench_row *row = &b->rows[i];
        double r = bench_rate(row, &row->r[dev]);
        if (!row->series || strcmp(row->series, name) != 0 || !(r > 0) || !(row->x > 0)) continue;
        x[n] = row->x;
        y[n++] = r;
    }
    return n;
}

/* The range of the panel's data and ceilings, padded. */
static bool fit(const bench *b, panel *p, const char *const *series, int n_series, bool gflops) {
    double xlo = INFINITY, xhi = 0, ylo = INFINITY, yhi = 0, x[64], y[64];
    for (int dev = 0; dev < BENCH_NB; dev++) {
        if (!b->dev[dev].on) continue;
        for (int s = 0; s < n_series; s++) {
            int n = points(b, dev, series[s], x, y, 64);
            for (int i = 0; i < n; i++) {
                xlo = fmin(xlo, x[i]), xhi = fmax(xhi, x[i]);
                ylo = fmin(ylo, y[i]), yhi = fmax(yhi, y[i]);
            }
        }
        double ceil = gflops ? b->dev[dev].peak.gflops : b->dev[dev].peak.gbps;
        if (ceil > 0 && xhi > 0) ylo = fmin(ylo, ceil), yhi = fmax(yhi, ceil);
    }
    if (!(xhi > 0)) return false;
    p->xlo = xlo / 1.3, p->xhi = xhi * 1.3;
    p->ylo = ylo / 2.0, p->yhi = yhi * 2.0;
    return true;
}

/* A panel's title over its plot area, and under it a smaller line saying what was measured. */
static void title_lines(FILE *f, const panel *p, const char *title, const char *subtitle) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
            p->x0, p->y0 - 24, title);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#555\">%s</text>\n",
            p->x0, p->y0 - 8, subtitle);
}

static void axes(FILE *f, const panel *p, const char *title, const char *subtitle,
                 const char *xlabel, const char *ylabel) {
    title_lines(f, p, title, subtitle);
    /* y grid at 1, 2, 5 x 10^k */
    for (double dec = pow(10, floor(log10(p->ylo))); dec <= p->yhi; dec *= 10)
        for (int m = 0; m < 3; m++) {
            double v = dec * (m == 0 ? 1 : m == 1 ? 2 : 5);
            if (v < p->ylo || v > p->yhi) continue;
            double y = py(p, v);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    p->x0, y, p->x0 + p->w, y);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">"
                    "%g</text>\n", p->x0 - 5, y + 4, v);
        }
    /* x grid at powers of two */
    for (double v = pow(2, ceil(log2(p->xlo))); v <= p->xhi; v *= 2) {
        double x = px(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x,
                p->y0, x, p->y0 + p->h);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">"
                "%g</text>\n", x, p->y0 + p->h + 16, v);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#444\"/>\n", p->x0, p->y0, p->w, p->h);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n",
            p->x0 + p->w / 2, p->y0 + p->h + 36, xlabel);
    fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" font-size=\"12\" "
            "text-anchor=\"middle\">%s</text>\n", p->x0 - 48, p->y0 + p->h / 2, ylabel);
}

static void marker(FILE *f, double cx, double cy, const char *kind, const char *c);

/* A series: a line through its points (or markers only), with an id a reader can find. */
static void series(FILE *f, const panel *p, const bench *b, int dev, const char *name, bool line,
                   const char *dash, const char *kind) {
    double x[64], y[64];
    int n = points(b, dev, name, x, y, 64);
    if (n == 0) return;
    const char *c = colors[dev];
    fprintf(f, "<g id=\"series-%s-%s\">\n", bench_backend_names[dev], name);
    if (line && n > 1) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s points=\"", c,
                dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", px(p, x[i]), py(p, y[i]));
        fprintf(f, "\"/>\n");
    }
    for (int i = 0; i < n; i++) marker(f, px(p, x[i]), py(p, y[i]), kind, c);
    fprintf(f, "</g>\n");
}

/* A backend's ceiling as a dashed line across the panel. */
static void ceiling_line(FILE *f, const panel *p, int dev, double v) {
    if (!(v > 0)) return;
    double y = py(p, v);
    fprintf(f, "<g id=\"ceiling-%s\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/></g>\n",
            bench_backend_names[dev], p->x0, y, p->x0 + p->w, y, colors[dev]);
}

/* The ceilings' labels, drawn after every line so that no line strikes one through (a white
 * halo keeps them readable where a series crosses): Vulkan's at the left end, the CPU's at the
 * right, each over its line; when the two lines are closer than a label is tall, the lower
 * one's label goes under its line, so neither label sits on the other's line. */
static void ceiling_labels(FILE *f, const panel *p, const bench *b, const double *v,
                           const char *what) {
    double y[BENCH_NB];
    for (int dev = 0; dev < BENCH_NB; dev++) y[dev] = v[dev] > 0 ? py(p, v[dev]) : NAN;
    bool near = fabs(y[BENCH_VK] - y[BENCH_CPU]) < 14; /* false when either is NaN */
    for (int dev = 0; dev < BENCH_NB; dev++) {
        if (!b->dev[dev].on || !(v[dev] > 0)) continue;
        bool lower = y[dev] > y[1 - dev] || (y[dev] == y[1 - dev] && dev == BENCH_CPU);
        bool left = dev == BENCH_VK, under = near && lower;
        fprintf(f, "<text id=\"ceiling-label-%s\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                "text-anchor=\"%s\" fill=\"%s\" stroke=\"white\" stroke-width=\"3\" "
                "paint-order=\"stroke\">%s %s %.3g</text>\n", bench_backend_names[dev],
                left ? p->x0 + 4 : p->x0 + p->w - 4, under ? y[dev] + 13 : y[dev] - 4,
                left ? "start" : "end", colors[dev], bench_backend_names[dev], what, v[dev]);
    }
}

/* A legend entry: a line (dashed or not) and/or a marker, then its text. */
typedef struct legend_item {
    const char *text;
    const char *dash;   /* NULL: solid; "": no line */
    const char *marker; /* "dot", "ring", "square" or NULL */
    const char *series; /* listed only where this series has points; NULL: a ceiling */
} legend_item;

static void marker(FILE *f, double cx, double cy, const char *kind, const char *c) {
    if (!kind) return;
    if (strcmp(kind, "square") == 0)
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"white\" "
                "stroke=\"%s\" stroke-width=\"1.5\"/>\n", cx - 3.5, cy - 3.5, c);
    else
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"%s\" "
                "stroke-width=\"1.5\"/>\n", cx, cy, strcmp(kind, "ring") == 0 ? "white" : c, c);
}

/* One line per backend under the panel: its name, then the items. */
static void legend(FILE *f, const panel *p, const bench *b, const legend_item *items, int n) {
    double y = p->y0 + p->h + 62;
    for (int dev = 0; dev < BENCH_NB; dev++) {
        if (!b->dev[dev].on) continue;
        const char *c = colors[dev];
        double x = p->x0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"%s\" "
                "font-weight=\"bold\">%s</text>\n", x, y + 4, c, bench_backend_names[dev]);
        x += 52;
        for (int i = 0; i < n; i++) {
            double xs[1], ys[1];
            if (items[i].series && points(b, dev, items[i].series, xs, ys, 1) == 0) continue;
            if (!items[i].dash || items[i].dash[0])
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                        "stroke-width=\"2\"%s%s%s/>\n", x, y, x + 24, y, c,
                        items[i].dash ? " stroke-dasharray=\"" : "",
                        items[i].dash ? items[i].dash : "", items[i].dash ? "\"" : "");
            marker(f, x + 12, y, items[i].marker, c);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n", x + 30, y + 4,
                    items[i].text);
            x += 40 + 6.5 * (double)strlen(items[i].text);
        }
        y += 18;
    }
}

static void no_data(FILE *f, const panel *p, const char *title, const char *subtitle) {
    title_lines(f, p, title, subtitle);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">no such cases "
            "in this run</text>\n", p->x0 + p->w / 2, p->y0 + p->h / 2);
}

static void matmul_panel(FILE *f, const bench *b, panel *p) {
    static const char *const names[] = {"matmul", "matmul_model"};
    const char *title = "matmul: GFLOP/s against size";
    const char *sub = "2 M N K flop per product (M x K times K x N)";
    if (!fit(b, p, names, 2, true)) return no_data(f, p, title, sub);
    axes(f, p, title, sub, "size (M N K)^(1/3)", "GFLOP/s");
    double ceil[BENCH_NB];
    for (int dev = 0; dev < BENCH_NB; dev++) {
        ceil[dev] = b->dev[dev].on ? b->dev[dev].peak.gflops : 0.0;
        if (!b->dev[dev].on) continue;
        ceiling_line(f, p, dev, ceil[dev]);
        series(f, p, b, dev, "matmul", true, NULL, "dot");
        series(f, p, b, dev, "matmul_model", false, NULL, "ring");
    }
    ceiling_labels(f, p, b, ceil, "FMA ceiling");
    static const legend_item items[] = {{"square", NULL, "dot", "matmul"},
                                        {"model layers (fwd, bwd)", "", "ring", "matmul_model"},
                                        {"FMA ceiling", "8 4", NULL, NULL}};
    legend(f, p, b, items, 3);
}

static void softmax_panel(FILE *f, const bench *b, panel *p) {
    static const char *const names[] = {"softmax_forward", "softmax_backward"};
    const char *title = "masked softmax: GB/s against T";
    const char *sub = "B*NH matrices of T x T, causal mask; bytes as the docs count them";
    if (!fit(b, p, names, 2, false)) return no_data(f, p, title, sub);
    axes(f, p, title, sub, "T (row length)", "GB/s");
    double ceil[BENCH_NB];
    for (int dev = 0; dev < BENCH_NB; dev++) {
        ceil[dev] = b->dev[dev].on ? b->dev[dev].peak.gbps : 0.0;
        if (!b->dev[dev].on) continue;
        ceiling_line(f, p, dev, ceil[dev]);
        series(f, p, b, dev, "softmax_forward", true, NULL, "dot");
        series(f, p, b, dev, "softmax_backward", true, "3 3", "square");
    }
    ceiling_labels(f, p, b, ceil, "copy bandwidth");
    static const legend_item items[] = {{"forward", NULL, "dot", "softmax_forward"},
                                        {"backward", "3 3", "square", "softmax_backward"},
                                        {"copy bandwidth", "8 4", NULL, NULL}};
    legend(f, p, b, items, 3);
}

int bench_write_plot(const bench *b, const char *path) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        fprintf(stderr, "vkattn bench: --plot: out of memory\n");
        return CLI_ERROR;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"20\" y=\"26\" font-size=\"16\">vkattn bench %s (%s set):",
            vka_version_string(), b->quick ? "quick" : "full");
    for (int dev = 0; dev < BENCH_NB; dev++) {
        if (!b->dev[dev].on) continue;
        fprintf(f, " <tspan fill=\"%s\">%s: ", colors[dev], bench_backend_names[dev]);
        /* device names are plain text; escape what XML needs */
        for (const char *s = b->dev[dev].info.name; *s; s++) {
            if (*s == '<') fputs("&lt;", f);
            else if (*s == '>') fputs("&gt;", f);
            else if (*s == '&') fputs("&amp;", f);
            else fputc(*s, f);
        }
        fprintf(f, "</tspan>");
    }
    fprintf(f, "</text>\n");
    panel left = {.x0 = 80, .y0 = 84, .w = 430, .h = 330};
    panel right = {.x0 = 640, .y0 = 84, .w = 430, .h = 330};
    fprintf(f, "<g id=\"panel-matmul\">\n");
    matmul_panel(f, b, &left);
    fprintf(f, "</g>\n<g id=\"panel-softmax\">\n");
    softmax_panel(f, b, &right);
    fprintf(f, "</g>\n");
    fprintf(f, "</svg>\n");
    fclose(f);
    int rc = cli_write_file_atomic("bench", b->ref, path, buf, len);
    free(buf);
    return rc;
}
