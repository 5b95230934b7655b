/* Cross-entropy of softmax(logits) over the V real columns of a padded (N, Vp) row
 * (shaders/crossentropy_forward.comp, crossentropy_backward.comp), via log-sum-exp. A target
 * outside [0, V) (VKB_IGNORE_TARGET; the caller refuses others) gives loss 0, dlogits row 0. */
#include "cpu/cpu_ops.h"

#include <math.h>

/* max and sum_j exp(l[j] - max) over l[0:V) */
static void row_stats(const float *l, int V, float *max, double *sum) {
    float mx = -INFINITY;
    for (int j = 0; j < V; j++)
        if (l[j] > mx) mx = l[j];
    double s = 0.0;
    for (int j = 0; j < V; j++) s += exp((double)l[j] - mx);
    *max = mx;
    *sum = s;
}

void vkc_crossentropy_forward(float *losses, const float *logits, const int32_t *targets, int N,
                              int V, int Vp, int nt) {
    VKA_OMP_FOR(nt, (double)N * V > VKA_OMP_MIN_WORK / 8)
    for (int i = 0; i < N; i++) {
        const float *l = logits + (size_t)i * Vp; // (Vp)
        if (targets[i] < 0 || targets[i] >= V) {
            losses[i] = 0.0f;
            continue;
        }
        float max;
        double sum;
        row_stats(l, V, &max, &sum);
        losses[i] = (float)((double)max + log(sum) - l[targets[i]]);
    }
}

void vkc_crossentropy_backward(float *dlogits, const float *logits, const int32_t *targets,
                               float dloss, int N, int V, int Vp, int nt) {
    VKA_OMP_FOR(nt, (double)N * V > VKA_OMP_MIN_WORK / 8)
    for (int i = 0; i < N; i++) {
        const float *l = logits + (size_t)i * Vp;
        float *dl = dlogits + (size_t)i * Vp;
        if (targets[i] < 0 || targets[i] >= V) {
            for (int j = 0; j < Vp; j++) dl[j] = 0.0f;
            continue;
        }
        float max;
        double sum;
        row_stats(l, V, &max, &sum);
        int t = targets[i];
        /* In place (dl == l) is fine: l[j] is read before dl[j] is written. */
        for (int j = 0; j < V; j++) {
            double p = exp((double)l[j] - max) / sum;
            dl[j] = (float)((p - (j == t ? 1.0 : 0.0)) * dloss);
        }
        for (int j = V; j < Vp; j++) dl[j] = 0.0f;
    }
}
