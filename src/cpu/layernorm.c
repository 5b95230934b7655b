/* Layer normalisation (Ba et al. 2016), forward and backward as llm.c
 * (shaders/layernorm_forward.comp, layernorm_backward.comp). */
#include "cpu/convert.h"
#include "cpu/cpu_ops.h"
#include "cpu/simd.h"
#include "vkattn.h" /* vka_dtype */

#include <math.h>

#define LN_EPS 1e-5

/* One row: o (C), *mean, *rstd from x (C). o may be x (each o[c] is written after x[c] is
 * read for the last time): the 16-bit path normalises a widened row in place. */
static void ref_forward_row(float *o, float *mean, float *rstd, const float *x,
                            const float *weight, const float *bias, int C) {
    /* Two passes: E[(x - m)^2] has no cancellation, unlike E[x^2] - m^2 (think of
     * [40000, 40001, 40002, 40003]). */
    double m = 0.0;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    double var = 0.0;
    for (int c = 0; c < C; c++) {
        double d = x[c] - m;
        var += d * d;
    }
    var /= C;
    float mf = (float)m, rf = (float)(1.0 / sqrt(var + LN_EPS));
    for (int c = 0; c < C; c++) o[c] = (x[c] - mf) * rf * weight[c] + bias[c];
    *mean = mf;
    *rstd = rf;
}

void vkc_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, int nt) {
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
    for (int n = 0; n < N; n++) {
        size_t o = (size_t)n * C;
        ref_forward_row(out + o, mean + n, rstd + n, inp + o, weight, bias, C); // (C) rows
    }
}

/* One row of dinp (C) += ... from x, d (C); the 16-bit path runs it on widened rows. */
static void ref_backward_row(float *di, const float *x, const float *d, const float *weight,
                             float m, float r, int C) {
    double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
    for (int c = 0; c < C; c++) {
        double dnorm = (double)weight[c] * d[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * ((x[c] - m) * r);
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    for (int c = 0; c < C; c++) {
        double norm = (x[c] - m) * r;
        double dval = (double)weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean;
        di[c] = (float)(di[c] + dval * r);
    }
}

/* Elements [e, e + n) of x (dtype) in f32: x's own (f32) or widened into buf. */
static const float *widened(const void *x, int dtype, size_t e, size_t n, float *buf,
                            unsigned cvt) {
    if (dtype == VKA_F32) return (const float *)x + e;
    vkc_convert_serial(buf, VKA_F32, (const uint16_t *)x + e, dtype, n, cvt);
    return buf;
}

/* dweight += sum_n norm * dout, dbias += sum_n dout, for dout and inp of types dt and it
 * (widened a column block of a row at a time: each column's sum is its own chain down the rows,
 * in double, so the bits are the f32 loop's); blocks of columns are independent. */
static void param_sums(float *dweight, float *dbias, const void *dout, int dt, const void *inp,
                       int it, const float *mean, const float *rstd, int N, int C, unsigned cvt,
                       int nt) {
    int blocks = (C + VKA_COL_BLOCK - 1) / VKA_COL_BLOCK;
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK)
    for (int bl = 0; bl < blocks; bl++) {
        int c0 = bl * VKA_COL_BLOCK, cw = C - c0 < VKA_COL_BLOCK ? C - c0 : VKA_COL_BLOCK;
        double dw[VKA_COL_BLOCK] = {0}, db[VKA_COL_BLOCK] = {0};
        float xb[VKA_COL_BLOCK], db16[VKA_COL_BLOCK];
        for (int n = 0; n < N; n++) {
            size_t e = (size_t)n * C + (size_t)c0;
            const float *x = widened(inp, it, e, (size_t)cw, xb, cvt);
            const float *d = widened(dout, dt, e, (size_t)cw, db16, cvt);
            float m = mean[n], r = rstd[n];
            for (int j = 0; j < cw; j++) {
                float norm = (x[j] - m) * r;
                dw[j] += (double)norm * d[j];
                db[j] += d[j];
            }
        }
        for (int j = 0; j < cw; j++) {
            dweight[c0 + j] = (float)(dweight[c0 + j] + dw[j]);
            dbias[c0 + j] = (float)(dbias[c0 + j] + db[j]);
        }
    }
}

void vkc_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C, int nt) {
    /* dinp: rows are independent. */
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
    for (int n = 0; n < N; n++) {
        size_t o = (size_t)n * C;
        ref_backward_row(dinp + o, inp + o, dout + o, weight, mean[n], rstd[n], C);
    }
    /* dweight, dbias: sums over rows; blocks of columns are independent, rows go in order. */
    param_sums(dweight, dbias, dout, VKA_F32, inp, VKA_F32, mean, rstd, N, C, 0, nt);
}

/* --- fast: the same arithmetic, vectorised --------------------------------------------------- */
/* The reference's row sums are chains of dependent double adds (4 cycles each), so its rows
 * cost ~C * 12 cycles. Here the same expressions run in vector lanes (`omp simd`, compiled
 * for AVX-512 or AVX2 by layernorm_simd.h's instances, cpuid dispatch): each row sum is carried
 * in double in several partial sums added at the end, so mean, rstd and dinp may differ from the
 * reference in the last bit; dweight and dbias keep the reference's order (rows in order per
 * column) and are bit-identical. Without OpenMP the loops stay scalar (the reference's speed). */
#ifdef VKA_HAVE_OPENMP
#define LN_SIMD VKA_PRAGMA(omp simd)
#define LN_SIMD_SUM(...) VKA_PRAGMA(omp simd reduction(+ : __VA_ARGS__))
#else
#define LN_SIMD
#define LN_SIMD_SUM(...)
#endif
/* inlined into each ISA's instance (layernorm_simd.h), so they are compiled for that ISA */
#if defined(__GNUC__) || defined(__clang__)
#define LN_INLINE static inline __attribute__((always_inline))
#else
#define LN_INLINE static inline
#endif

/* o may be x, as ref_forward_row's (the 16-bit path's widened rows) */
LN_INLINE void ln_forward_row(float *o, float *mean, float *rstd, const float *x,
                                  const float *weight, const float *bias, int C) {
    double m = 0.0;
    LN_SIMD_SUM(m)
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    double var = 0.0;
    LN_SIMD_SUM(var)
    for (int c = 0; c < C; c++) {
        double d = x[c] - m;
        var += d * d;
    }
    var /= C;
    float mf = (float)m, rf = (float)(1.0 / sqrt(var + LN_EPS));
    LN_SIMD
    for (int c = 0; c < C; c++) o[c] = (x[c] - mf) * rf * weight[c] + bias[c];
    *mean = mf;
    *rstd = rf;
}

LN_INLINE void ln_backward_row(float *di, const float *x, const float *d,
                                   const float *weight, float m, float r, int C) {
    double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
    LN_SIMD_SUM(dnorm_mean, dnorm_norm_mean)
    for (int c = 0; c < C; c++) {
        double dnorm = (double)weight[c] * d[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * ((x[c] - m) * r);
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    LN_SIMD
    for (int c = 0; c < C; c++) {
        double norm = (x[c] - m) * r;
        double dval = (double)weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean;
        di[c] = (float)(di[c] + dval * r);
    }
}

/* dweight, dbias columns c0 .. c0+w (w <= VKA_COL_BLOCK): the reference's loop */
LN_INLINE void ln_backward_cols(float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *mean, const float *rstd,
                                    int N, int C, int c0, int w) {
    double dw[VKA_COL_BLOCK] = {0}, db[VKA_COL_BLOCK] = {0};
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
        float m = mean[n], r = rstd[n];
        LN_SIMD
        for (int j = 0; j < w; j++) {
            float norm = (x[j] - m) * r;
            dw[j] += (double)norm * d[j];
            db[j] += d[j];
        }
    }
    for (int j = 0; j < w; j++) {
        dweight[c0 + j] = (float)(dweight[c0 + j] + dw[j]);
        dbias[c0 + j] = (float)(dbias[c0 + j] + db[j]);
    }
}

#define VKC_SIMD_BODY "cpu/layernorm_simd.h" /* ln_fwd_*, ln_bwd_*, ln_cols_* */
#include "cpu/simd_each.h"

void vkc_layernorm_forward_fast(float *out, float *mean, float *rstd, const float *inp,
                                const float *weight, const float *bias, int N, int C,
                                vkc_isa isa, int nt) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
        for (int n = 0; n < N; n++) {
            size_t o = (size_t)n * C;
            VKC_SIMD_PICK(isa, ln_fwd)(out + o, mean + n, rstd + n, inp + o, weight, bias, C);
        }
        return;
    }
#endif
    (void)isa;
    vkc_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, nt);
}

/* --- 16-bit out and/or inp (backend.h) ------------------------------------------------------ */
/* The f32 kernels' row functions on the widened row, then rounded: the statistics are sums in
 * vector lanes whose order the compiler picks for the loop as written, so a row read in pieces,
 * or widened inside those loops, could sum in another order; a whole widened row in f32 gives
 * the f32 path's bits by construction. */

/* One row of the kernel vkc_layernorm_forward_fast runs for isa (o may be x). */
static void forward_row(float *o, float *mean, float *rstd, const float *x, const float *weight,
                        const float *bias, int C, vkc_isa isa) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        VKC_SIMD_PICK(isa, ln_fwd)(o, mean, rstd, x, weight, bias, C);
        return;
    }
#endif
    (void)isa;
    ref_forward_row(o, mean, rstd, x, weight, bias, C);
}

size_t vkc_layernorm_forward16_scratch(int N, int C, int out_dtype, int nt) {
    if (out_dtype == VKA_F32) return 0;
    return (size_t)(N < nt ? N : nt) * (size_t)C;
}

void vkc_layernorm_forward16(void *out, int out_dtype, float *mean, float *rstd,
                             const void *inp, int inp_dtype, const float *weight,
                             const float *bias, int N, int C, float *scratch, vkc_isa isa,
                             unsigned cvt, int nt) {
    /* blocks of rows, one scratch row each (independent: any schedule gives the same bits) */
    int blocks = out_dtype == VKA_F32 ? N : (N < nt ? N : nt);
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
    for (int bl = 0; bl < blocks; bl++) {
        int n0 = (int)((long long)N * bl / blocks), n1 = (int)((long long)N * (bl + 1) / blocks);
        for (int n = n0; n < n1; n++) {
            size_t e = (size_t)n * C; /* the row's first element in out and inp */
            /* the row in f32: out's own row (f32 out), else the block's scratch row */
            float *row = out_dtype == VKA_F32 ? (float *)out + e : scratch + (size_t)bl * C;
            const float *x = (const float *)inp + e;
            if (inp_dtype != VKA_F32) {
                vkc_convert_serial(row, VKA_F32, (const uint16_t *)inp + e, inp_dtype, (size_t)C, cvt);
                x = row;
            }
            forward_row(row, mean + n, rstd + n, x, weight, bias, C, isa);
            if (out_dtype != VKA_F32)
                vkc_convert_serial((uint16_t *)out + e, out_dtype, row, VKA_F32, (size_t)C, cvt);
        }
    }
}

void vkc_layernorm_backward_fast(float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const float *mean,
                                 const float *rstd, int N, int C, vkc_isa isa, int nt) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
        for (int n = 0; n < N; n++) {
            size_t o = (size_t)n * C;
            VKC_SIMD_PICK(isa, ln_bwd)(dinp + o, inp + o, dout + o, weight, mean[n], rstd[n], C);
        }
        int blocks = (C + VKA_COL_BLOCK - 1) / VKA_COL_BLOCK;
        VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK)
        for (int bl = 0; bl < blocks; bl++) {
            int c0 = bl * VKA_COL_BLOCK, w = C - c0 < VKA_COL_BLOCK ? C - c0 : VKA_COL_BLOCK;
            VKC_SIMD_PICK(isa, ln_cols)(dweight, dbias, dout, inp, mean, rstd, N, C, c0, w);
        }
        return;
    }
#endif
    (void)isa;
    vkc_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, nt);
}

/* --- 16-bit dout, inp and/or weight (backend.h) --------------------------------------------- */
/* dinp: the f32 kernel's row function for the ISA on whole widened rows (its sums run in vector
 * lanes in the order the compiler picks for the loop as written, as the forward16's); dweight,
 * dbias: each column's sum is its own chain down the rows, so rows widened a column block at a
 * time give the f32 kernels' bits (the reference's loop, which the fast one matches). */

static void backward_row(float *di, const float *x, const float *d, const float *weight, float m,
                         float r, int C, vkc_isa isa) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        VKC_SIMD_PICK(isa, ln_bwd)(di, x, d, weight, m, r, C);
        return;
    }
#endif
    (void)isa;
    ref_backward_row(di, x, d, weight, m, r, C);
}

size_t vkc_layernorm_backward16_scratch(int N, int C, int nt) {
    return (size_t)C + 2 * (size_t)(N < nt ? N : nt) * (size_t)C;
}

void vkc_layernorm_backward16(float *dinp, float *dweight, float *dbias, const void *dout,
                              const void *inp, const void *weight, int dtype16, unsigned mask16,
                              const float *mean, const float *rstd, int N, int C, float *scratch,
                              vkc_isa isa, unsigned cvt, int nt) {
    int dt = mask16 & 1u ? dtype16 : VKA_F32, it = mask16 & 2u ? dtype16 : VKA_F32;
    const float *w = widened(weight, mask16 & 4u ? dtype16 : VKA_F32, 0, (size_t)C, scratch, cvt);
    /* dinp: blocks of rows, each its two scratch rows (x, d) */
    int blocks = N < nt ? N : nt;
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
    for (int bl = 0; bl < blocks; bl++) {
        int n0 = (int)((long long)N * bl / blocks), n1 = (int)((long long)N * (bl + 1) / blocks);
        float *xs = scratch + C + 2 * (size_t)bl * C, *ds = xs + C;
        for (int n = n0; n < n1; n++) {
            size_t e = (size_t)n * C;
            const float *x = widened(inp, it, e, (size_t)C, xs, cvt);
            const float *d = widened(dout, dt, e, (size_t)C, ds, cvt);
            backward_row(dinp + e, x, d, w, mean[n], rstd[n], C, isa);
        }
    }
    param_sums(dweight, dbias, dout, dt, inp, it, mean, rstd, N, C, cvt, nt);
}
