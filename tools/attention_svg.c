/*
 * The SVG picture of attention weights (`vkattn attention --svg`): for each layer and head a
 * grid, queries down the left and keys along the top, both labelled with the prompt's tokens,
 * each cell coloured by its weight on a fixed 0..1 scale (viridis, van der Walt & Smith 2015,
 * so panels compare) with its value written in when the cell is large enough; the masked
 * (future) cells stay blank. A colour bar on the right, a title with the model and the prompt,
 * and each cell's <title> (a tooltip in browsers) saying which query, key and weight it is.
 */
#include "attention.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FONT "DejaVu Sans, Verdana, Arial, sans-serif"
#define PANELS_PER_ROW 4
#define MAX_WIDTH 1600

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool failed; /* out of memory */
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* s with & < > " ' escaped for XML text and attribute values. */
static void sb_xml(sbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': sb_printf(b, "&amp;"); break;
        case '<': sb_printf(b, "&lt;"); break;
        case '>': sb_printf(b, "&gt;"); break;
        case '"': sb_printf(b, "&quot;"); break;
        case '\'': sb_printf(b, "&apos;"); break;
        default: sb_printf(b, "%c", *s);
        }
    }
}

/* Viridis at 0, 0.1, ..., 1 (matplotlib's table), linearly interpolated. */
static void viridis(float x, int rgb[3]) {
    static const unsigned char stops[11][3] = {
        {68, 1, 84},    {72, 36, 117},  {65, 68, 135},  {53, 95, 141},  {42, 120, 142},
        {33, 145, 140}, {34, 168, 132}, {68, 191, 112}, {122, 209, 81}, {189, 223, 38},
        {253, 231, 37}};
    if (!(x > 0.0f)) x = 0.0f;
    if (x > 1.0f) x = 1.0f;
    float pos = x * 10.0f;
    int i = (int)pos;
    if (i > 9) i = 9;
    float f = pos - (float)i;
    for (int c = 0; c < 3; c++)
        rgb[c] = (int)lroundf((float)stops[i][c] * (1.0f - f) + (float)stops[i + 1][c] * f);
}

/* Sizes of one panel, from T and the longest label. */
typedef struct layout {
    int cell;        /* cell side (px) */
    double font;     /* label font size (px) */
    double label_w;  /* room for the longest label (px) */
    int left, top;   /* grid origin inside a panel */
    int panel_w, panel_h;
    int per_row;     /* panels in a row */
    int cols, rows;  /* panels */
} layout;

static layout make_layout(const attn_picture *p) {
    layout l;
    int T = p->T;
    /* Cells of 12 px or more (labels of 8.4 px) up to 128 tokens; past that the grid keeps to
     * about 1536 px and the labels shrink with the cells. */
    l.cell = T <= 0 ? 30 : T <= 128 ? 600 / T : 1536 / T;
    if (l.cell > 30) l.cell = 30;
    if (T <= 128 && l.cell < 12) l.cell = 12;
    if (l.cell < 4) l.cell = 4;
    l.font = l.cell * 0.7;
    if (l.font > 12.0) l.font = 12.0;
    if (l.font < 4.0) l.font = 4.0;
    int chars = 1;
    for (int t = 0; t < T; t++)
        if (p->label_chars[t] > chars) chars = p->label_chars[t];
    l.label_w = chars * l.font * 0.62 + 6.0;
    if (l.label_w < 50.0) l.label_w = 50.0; /* room for the corner's "query" and "key" */
    l.left = (int)ceil(l.label_w) + 8;
    l.top = 26 + (int)ceil(l.label_w) + 4;
    l.panel_w = l.left + T * l.cell + 28;
    l.panel_h = l.top + T * l.cell + 24;
    /* Up to PANELS_PER_ROW panels a row, fewer where that would pass MAX_WIDTH px. */
    l.per_row = MAX_WIDTH / l.panel_w;
    if (l.per_row > PANELS_PER_ROW) l.per_row = PANELS_PER_ROW;
    if (l.per_row < 1) l.per_row = 1;
    l.cols = p->n_heads < l.per_row ? p->n_heads : l.per_row;
    l.rows = p->n_layers * ((p->n_heads + l.per_row - 1) / l.per_row);
    return l;
}

/* The grid of one (layer, head) with its labels, its top-left corner at (x0, y0). */
static void draw_panel(sbuf *b, const attn_picture *p, const layout *l, int li, int hi,
                       int x0, int y0) {
    int T = p->T, cs = l->cell;
    const float *w = p->weights + ((size_t)li * p->n_heads + hi) * (size_t)T * T;
    int gx = x0 + l->left, gy = y0 + l->top;
    sb_printf(b, "<g>\n<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">layer %d, "
              "head %d</text>\n", x0, y0 + 16, p->layers[li], p->heads[hi]);
    /* The corner left free by the two label strips says which axis is which. */
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#666\" text-anchor=\"end\">"
              "key \xE2\x86\x92</text>\n", gx - 4, gy - 18);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#666\" text-anchor=\"end\">"
              "query \xE2\x86\x93</text>\n", gx - 4, gy - 5);
    sb_printf(b, "<g font-size=\"%.1f\">\n", l->font);
    for (int t = 0; t < T; t++) {
        sb_printf(b, "<text x=\"%d\" y=\"%.1f\" dy=\"0.35em\" text-anchor=\"end\">", gx - 4,
                  gy + (t + 0.5) * cs);
        sb_xml(b, p->labels[t]);
        sb_printf(b, "</text>\n");
        double cx = gx + (t + 0.5) * cs;
        sb_printf(b, "<text x=\"%.1f\" y=\"%d\" dy=\"0.35em\" transform=\"rotate(-90 %.1f %d)\">",
                  cx, gy - 4, cx, gy - 4);
        sb_xml(b, p->labels[t]);
        sb_printf(b, "</text>\n");
    }
    sb_printf(b, "</g>\n<g shape-rendering=\"crispEdges\">\n");
    /* A thin gap between cells where they are big enough to show it. */
    int side = cs >= 12 ? cs - 1 : cs;
    bool values = cs >= 28;
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++) {
            float v = w[(size_t)t * T + j];
            int rgb[3];
            viridis(v, rgb);
            sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                      "fill=\"#%02x%02x%02x\"><title>", gx + j * cs, gy + t * cs, side, side,
                      rgb[0], rgb[1], rgb[2]);
            sb_printf(b, "query %d ", t);
            sb_xml(b, p->labels[t]);
            sb_printf(b, " \xE2\x86\x92 key %d ", j);
            sb_xml(b, p->labels[j]);
            sb_printf(b, ": %.4f</title></rect>\n", (double)v);
        }
    sb_printf(b, "</g>\n");
    if (values) {
        sb_printf(b, "<g font-size=\"%.1f\" text-anchor=\"middle\">\n", cs * 0.33);
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++) {
                float v = w[(size_t)t * T + j];
                sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" dy=\"0.35em\" fill=\"%s\">%.2f</text>\n",
                          gx + j * cs + side / 2.0, gy + t * cs + side / 2.0,
                          v < 0.6f ? "#fff" : "#000", (double)v);
            }
        sb_printf(b, "</g>\n");
    }
    /* The whole square, so the blank masked triangle reads as part of the grid. */
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
              "stroke=\"#bbb\" stroke-width=\"1\"/>\n</g>\n", gx, gy, T * cs, T * cs);
}

/* The colour bar, its top-left corner at (x, y), h px tall. */
static void draw_legend(sbuf *b, int x, int y, int h) {
    sb_printf(b, "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n");
    for (int i = 0; i <= 10; i++) {
        int rgb[3];
        viridis(i / 10.0f, rgb);
        sb_printf(b, "<stop offset=\"%.1f\" stop-color=\"#%02x%02x%02x\"/>\n", i / 10.0, rgb[0],
                  rgb[1], rgb[2]);
    }
    sb_printf(b, "</linearGradient></defs>\n");
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\">weight</text>\n", x, y - 8);
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"16\" height=\"%d\" fill=\"url(#scale)\" "
              "stroke=\"#888\" stroke-width=\"0.5\"/>\n", x, y, h);
    for (int i = 0; i <= 4; i++) {
        double ty = y + h - h * i / 4.0;
        sb_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>\n",
                  x + 16, ty, x + 20, ty);
        sb_printf(b, "<text x=\"%d\" y=\"%.1f\" dy=\"0.35em\" font-size=\"10\">%.2f</text>\n",
                  x + 23, ty, i / 4.0);
    }
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"16\" height=\"10\" fill=\"#fff\" "
              "stroke=\"#bbb\"/>\n", x, y + h + 14);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\">masked</text>\n", x + 21, y + h + 23);
}

/* "prompt (T tokens, · between them): " and the labels joined by U+00B7, cut with an ellipsis
after about max_chars characters. */
static void draw_prompt(sbuf *b, const attn_picture *p, int max_chars) {
    sb_printf(b, "prompt (%d token%s, \xC2\xB7 between them): ", p->T, p->T == 1 ? "" : "s");
    int chars = 36;
    for (int t = 0; t < p->T; t++) {
        if (chars + p->label_chars[t] + 1 > max_chars) {
            sb_printf(b, "\xE2\x80\xA6");
            break;
        }
        if (t) sb_printf(b, "\xC2\xB7");
        sb_xml(b, p->labels[t]);
        chars += p->label_chars[t] + 1;
    }
}

char *attn_svg(const attn_picture *p, size_t *len) {
    layout l = make_layout(p);
    int header = 56, pad = 16, legend_w = 90;
    int width = pad + l.cols * l.panel_w + legend_w;
    int bar = p->T * l.cell < 240 ? p->T * l.cell : 240;
    if (bar < 100) bar = 100;
    int height = header + l.rows * l.panel_h + pad;
    if (height < header + l.top + bar + 40) height = header + l.top + bar + 40;
    sbuf b = {0};
    sb_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" font-family=\"%s\">\n", width, height, width, height, FONT);
    sb_printf(&b, "<title>");
    sb_xml(&b, p->title);
    sb_printf(&b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    sb_printf(&b, "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">", pad);
    sb_xml(&b, p->title);
    sb_printf(&b, "</text>\n<text x=\"%d\" y=\"44\" font-size=\"12\" fill=\"#333\">", pad);
    draw_prompt(&b, p, (width - 2 * pad) / 7);
    sb_printf(&b, "</text>\n");
    int per_layer_rows = (p->n_heads + l.per_row - 1) / l.per_row;
    for (int li = 0; li < p->n_layers; li++)
        for (int hi = 0; hi < p->n_heads; hi++) {
            int row = li * per_layer_rows + hi / l.per_row, col = hi % l.per_row;
            draw_panel(&b, p, &l, li, hi, pad + col * l.panel_w, header + row * l.panel_h);
        }
    draw_legend(&b, pad + l.cols * l.panel_w, header + l.top, bar);
    sb_printf(&b, "</svg>\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    *len = b.len;
    return b.s;
}
