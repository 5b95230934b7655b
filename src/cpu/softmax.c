/* Masked row softmax of attention scores (shaders/softmax_forward.comp, softmax_backward.comp),
 * Vaswani et al. 2017 eq. 1, stable: the row maximum over unmasked keys is subtracted. */
#include "cpu/cpu_ops.h"

#include <math.h>

/* One row: keys k > last are causally masked, mrow (Tk) is the additive mask or NULL. */
static void softmax_row(float *out, const float *inp, const float *mrow, int Tk, int last,
                        float scale) {
    float max = -INFINITY;
    for (int k = 0; k <= last; k++) {
        float x = scale * inp[k] + (mrow ? mrow[k] : 0.0f);
        if (x > max) max = x;
    }
    if (max == -INFINITY) { /* every key masked: zeros, not 0/0 */
        for (int k = 0; k < Tk; k++) out[k] = 0.0f;
        return;
    }
    double sum = 0.0;
    for (int k = 0; k <= last; k++) sum += expf(scale * inp[k] + (mrow ? mrow[k] : 0.0f) - max);
    /* out may be inp: each inp[k] is read before out[k] is written. */
    for (int k = 0; k < Tk; k++) {
        float e = k <= last ? expf(scale * inp[k] + (mrow ? mrow[k] : 0.0f) - max) : 0.0f;
        out[k] = (float)((double)e / sum);
    }
}

void vkc_softmax_forward(float *out, const float *inp, const float *mask, int R, int Tq, int Tk,
                         int mask_rows, float scale, bool causal, int nt) {
    VKA_OMP_FOR(nt, (double)R * Tk > VKA_OMP_MIN_WORK / 8)
    for (int r = 0; r < R; r++) {
        /* Query q = r % Tq sees keys 0 .. q + (Tk - Tq): queries aligned to the last keys. */
        long last = causal ? (long)(r % Tq) + Tk - Tq : Tk - 1;
        if (last > Tk - 1) last = Tk - 1;
        if (last < -1) last = -1;
        const float *mrow = mask ? mask + (size_t)(r / mask_rows) * Tk : NULL;
        softmax_row(out + (size_t)r * Tk, inp + (size_t)r * Tk, mrow, Tk, (int)last, scale);
    }
}

void vkc_softmax_backward(float *dinp, const float *dout, const float *out, int R, int Tk,
                          float scale, int nt) {
    VKA_OMP_FOR(nt, (double)R * Tk > VKA_OMP_MIN_WORK / 4)
    for (int r = 0; r < R; r++) {
        const float *o = out + (size_t)r * Tk, *d = dout + (size_t)r * Tk;
        float *di = dinp + (size_t)r * Tk;
        double dot = 0.0;
        for (int k = 0; k < Tk; k++) dot += (double)o[k] * d[k];
        for (int k = 0; k < Tk; k++)
            di[k] = (float)(di[k] + (double)scale * o[k] * ((double)d[k] - dot));
    }
}
