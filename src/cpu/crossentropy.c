/* Cross-entropy of softmax(logits) over the V real columns of a padded (N, Vp) row
 * (shaders/crossentropy_forward.comp, crossentropy_backward.comp), via log-sum-exp. A target
 * outside [0, V) (VKB_IGNORE_TARGET; the caller refuses others) gives loss 0, dlogits row 0. */
#include "cpu/convert.h"
#include "cpu/cpu_ops.h"
#include "vka_internal.h" /* VKA_MIN, VKA_MAX */
#include "vkattn.h"       /* vka_dtype */

#include <math.h>

/* Rows of f32 logits are read in place; 16-bit ones (backend.h's 16-bit rule) are widened into
 * a stack buffer CE_CHUNK elements at a time (exactly, by the convert op's conversions). Every
 * pass is the same code on either, in the same order: the same max, sum, losses and dlogits
 * bits for a 16-bit row as for its widened f32 row. */
#define CE_CHUNK 2048

typedef struct { const void *p; int dt; unsigned cvt; } ce_row;

/* elements [j0, j0 + n) of row r widened into buf (n <= CE_CHUNK); f32 rows are read in place */
static const float *ce_chunk(ce_row r, int j0, int n, float *buf) {
    if (r.dt == VKA_F32) return (const float *)r.p + j0;
    vkc_convert_serial(buf, VKA_F32, (const uint16_t *)r.p + j0, r.dt, (size_t)n, r.cvt);
    return buf;
}

static float ce_at(ce_row r, int j) {
    float x;
    return *ce_chunk(r, j, 1, &x);
}

/* max and sum_j exp(l[j] - max) over the row's first V logits */
static void row_stats(ce_row r, int V, float *max, double *sum) {
    float buf[CE_CHUNK];
    float mx = -INFINITY;
    for (int j0 = 0; j0 < V; j0 += CE_CHUNK) {
        int n = VKA_MIN(CE_CHUNK, V - j0);
        const float *l = ce_chunk(r, j0, n, buf);
        for (int j = 0; j < n; j++)
            if (l[j] > mx) mx = l[j];
    }
    double s = 0.0;
    for (int j0 = 0; j0 < V; j0 += CE_CHUNK) {
        int n = VKA_MIN(CE_CHUNK, V - j0);
        const float *l = ce_chunk(r, j0, n, buf);
        for (int j = 0; j < n; j++) s += exp((double)l[j] - mx);
    }
    *max = mx;
    *sum = s;
}

static ce_row ce_row_of(const void *base, int dt, size_t first, unsigned cvt) {
    const void *p = dt == VKA_F32 ? (const void *)((const float *)base + first)
                                  : (const void *)((const uint16_t *)base + first);
    return (ce_row){p, dt, cvt};
}

void vkc_crossentropy_forward(float *losses, const void *logits, int logits_dt,
                                const int32_t *targets, int N, int V, int Vp, unsigned cvt,
                                int nt) {
    VKA_OMP_FOR(nt, (double)N * V > VKA_OMP_MIN_WORK / 8)
    for (int i = 0; i < N; i++) {
        ce_row r = ce_row_of(logits, logits_dt, (size_t)i * Vp, cvt);
        if (targets[i] < 0 || targets[i] >= V) {
            losses[i] = 0.0f;
            continue;
        }
        float max;
        double sum;
        row_stats(r, V, &max, &sum);
        losses[i] = (float)((double)max + log(sum) - ce_at(r, targets[i]));
    }
}

void vkc_crossentropy_backward(void *dlogits, int dlogits_dt, const void *logits,
                                 int logits_dt, const int32_t *targets, float dloss, int N, int V,
                                 int Vp, unsigned cvt, int nt) {
    VKA_OMP_FOR(nt, (double)N * V > VKA_OMP_MIN_WORK / 8)
    for (int i = 0; i < N; i++) {
        ce_row r = ce_row_of(logits, logits_dt, (size_t)i * Vp, cvt);
        size_t first = (size_t)i * Vp;
        float *dl32 = dlogits_dt == VKA_F32 ? (float *)dlogits + first : NULL;
        uint16_t *dl16 = dlogits_dt == VKA_F32 ? NULL : (uint16_t *)dlogits + first;
        bool counted = targets[i] >= 0 && targets[i] < V;
        float max = 0.0f;
        double sum = 1.0;
        if (counted) row_stats(r, V, &max, &sum);
        int t = targets[i];
        float in[CE_CHUNK], out[CE_CHUNK];
        /* In place: a chunk is widened (or, f32, each element read) before it is written. */
        for (int j0 = 0; j0 < Vp; j0 += CE_CHUNK) {
            int n = VKA_MIN(CE_CHUNK, Vp - j0), nv = counted ? VKA_MAX(VKA_MIN(n, V - j0), 0) : 0;
            const float *l = ce_chunk(r, j0, nv, in);
            float *d = dl32 ? dl32 + j0 : out;
            for (int j = 0; j < nv; j++) {
                double p = exp((double)l[j] - max) / sum;
                d[j] = (float)((p - (j0 + j == t ? 1.0 : 0.0)) * dloss);
            }
            for (int j = nv; j < n; j++) d[j] = 0.0f;
            if (dl16) vkc_convert_serial(dl16 + j0, dlogits_dt, out, VKA_F32, (size_t)n, cvt);
        }
    }
}
