/* Reductions: bias gradient (column sums), mean, global gradient norm (shaders/bias_backward.comp,
 * mean.comp, grad_norm_partials.comp + grad_norm_finalize.comp). Each output is summed in a fixed order that does not depend on
 * the thread count, in double. */
#include "cpu/cpu_ops.h"
#include "cpu/simd.h"
#include "vkattn.h" /* VKA_NORM_PARTIALS: slices per tensor in grad_norm */

#include <math.h>

#ifdef VKA_HAVE_OPENMP
#define BB_SIMD VKA_PRAGMA(omp simd)
#else
#define BB_SIMD
#endif
#if defined(__GNUC__) || defined(__clang__)
#define BB_INLINE __attribute__((always_inline))
#else
#define BB_INLINE
#endif

#define SUM_LANES 8  /* independent partial sums: a fixed order that still pipelines */

/* The fast kernels: the reference's sums in the same order, vector lanes across the columns
 * (omp simd in reduce_simd.h's instances, cpuid dispatch), so bit-identical to it. Columns o0 ..
 * o0+w (w <= VKA_COL_BLOCK), rows in order. */
static inline BB_INLINE void bias_cols(float *dbias, const float *dout, int N, int OC, int o0,
                                       int w) {
    double sum[VKA_COL_BLOCK] = {0};
    for (int n = 0; n < N; n++) {
        const float *row = dout + (size_t)n * OC + o0;
        BB_SIMD
        for (int j = 0; j < w; j++) sum[j] += row[j];
    }
    for (int j = 0; j < w; j++) dbias[o0 + j] = (float)(dbias[o0 + j] + sum[j]);
}

#define VKC_SIMD_BODY "cpu/reduce_simd.h" /* bias_cols_avx512, bias_cols_avx2 */
#include "cpu/simd_each.h"

void vkc_bias_backward_fast(float *dbias, const float *dout, int N, int OC, vkc_isa isa,
                            int nt) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        int blocks = (OC + VKA_COL_BLOCK - 1) / VKA_COL_BLOCK;
        VKA_OMP_FOR(nt, (double)N * OC > VKA_OMP_MIN_WORK)
        for (int bl = 0; bl < blocks; bl++) {
            int o0 = bl * VKA_COL_BLOCK, w = OC - o0 < VKA_COL_BLOCK ? OC - o0 : VKA_COL_BLOCK;
            VKC_SIMD_PICK(isa, bias_cols)(dbias, dout, N, OC, o0, w);
        }
        return;
    }
#endif
    (void)isa;
    vkc_bias_backward(dbias, dout, N, OC, nt);
}

void vkc_bias_backward(float *dbias, const float *dout, int N, int OC, int nt) {
    int blocks = (OC + VKA_COL_BLOCK - 1) / VKA_COL_BLOCK;
    VKA_OMP_FOR(nt, (double)N * OC > VKA_OMP_MIN_WORK)
    for (int bl = 0; bl < blocks; bl++) {
        int o0 = bl * VKA_COL_BLOCK, w = OC - o0 < VKA_COL_BLOCK ? OC - o0 : VKA_COL_BLOCK;
        double sum[VKA_COL_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *row = dout + (size_t)n * OC + o0;
            for (int j = 0; j < w; j++) sum[j] += row[j];
        }
        for (int j = 0; j < w; j++) dbias[o0 + j] = (float)(dbias[o0 + j] + sum[j]);
    }
}

/* sum of x[0:n] (squared if square), SUM_LANES interleaved partial sums added in order. */
static double sum_lanes(const float *x, size_t n, bool square) {
    double lane[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int l = 0; l < SUM_LANES; l++) {
            double v = x[i + l];
            lane[l] += square ? v * v : v;
        }
    for (int l = 0; i < n; i++, l++) {
        double v = x[i];
        lane[l] += square ? v * v : v;
    }
    double s = 0.0;
    for (int l = 0; l < SUM_LANES; l++) s += lane[l];
    return s;
}

void vkc_mean(float *out, const float *inp, size_t N, int nt) {
    /* VKA_NORM_PARTIALS fixed slices summed in parallel, then in order. */
    double part[VKA_NORM_PARTIALS];
    size_t slice = (N + VKA_NORM_PARTIALS - 1) / VKA_NORM_PARTIALS;
    VKA_OMP_FOR(nt, N > VKA_OMP_MIN_WORK)
    for (int s = 0; s < VKA_NORM_PARTIALS; s++) {
        size_t lo = (size_t)s * slice < N ? (size_t)s * slice : N;
        size_t hi = lo + slice < N ? lo + slice : N;
        part[s] = sum_lanes(inp + lo, hi - lo, false);
    }
    double total = 0.0;
    for (int s = 0; s < VKA_NORM_PARTIALS; s++) total += part[s];
    out[0] = (float)(total / (double)N);
}

void vkc_grad_norm(float *out, float *partials, const float *const *grads, const size_t *sizes,
                   int count, float max_norm, float unscale, int nt) {
    long items = (long)count * VKA_NORM_PARTIALS;
    VKA_OMP_FOR(nt, items > VKA_NORM_PARTIALS)
    for (long it = 0; it < items; it++) {
        int i = (int)(it / VKA_NORM_PARTIALS), s = (int)(it % VKA_NORM_PARTIALS);
        size_t n = sizes[i], slice = (n + VKA_NORM_PARTIALS - 1) / VKA_NORM_PARTIALS;
        size_t lo = (size_t)s * slice < n ? (size_t)s * slice : n;
        size_t hi = lo + slice < n ? lo + slice : n;
        /* the slice's norm, not its sum of squares: a float holds it whenever it holds the
         * total norm (squares of floats never overflow or underflow a double) */
        partials[it] = (float)sqrt(sum_lanes(grads[i] + lo, hi - lo, true));
    }
    double total = 0.0;
    for (long it = 0; it < items; it++) total += (double)partials[it] * partials[it];
    double norm = sqrt(total) * (double)unscale; /* exact: unscale is a power of two */
    double clip = 1.0;
    if (!isfinite((float)norm))
        clip = 0.0; /* NaN or inf gradients, or a norm past FLT_MAX: adamw leaves all alone */
    else if (max_norm > 0.0f) {
        clip = (double)max_norm / (norm + 1e-6);
        if (clip > 1.0) clip = 1.0;
    }
    out[0] = (float)norm;
    out[1] = (float)clip * unscale;
}
