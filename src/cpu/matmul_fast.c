/* The CPU backend's fast matmul: the same product as vkc_matmul_forward (matmul.c), with
 * register-tiled micro-kernels for AVX2+FMA (6 x 16) and AVX-512 (8 x 32) chosen at run time
 * from cpuid (vkc_cpu_isa), compiled with target attributes so a baseline x86-64 build carries
 * them and still runs on any x86-64.
 *
 * Blocking as in BLIS (Van Zee & van de Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS
 * Functionality", 2015): out is cut into FM_MB x FM_NB tiles, one per OpenMP work item; for each
 * tile K is walked in blocks of FM_KC, the block of op(b) packed into NR-wide k-major panels
 * zero padded past N (a panel, FM_KC * NR floats, stays in L1 while every MR rows of op(a) pass
 * over it). op(a) is not packed: the micro-kernel broadcasts its elements one at a time, read
 * in place from MR row streams (packing it cost a quarter of the time at K = 128). The
 * micro-kernel keeps an MR x NR block of the tile's accumulators in registers for the k block.
 *
 * Summation order: every element is still summed over k = 0..K-1 in order, one term at a time,
 * whatever the tile sizes or thread count (deterministic, exact --resume), but each term is a
 * fused multiply-add (one rounding instead of two), so results differ from the reference kernel
 * in the last bits. VKATTN_CPU_KERNELS=reference selects the reference (README). */
#include "cpu/cpu_ops.h"

#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define FM_X86 1
#include <immintrin.h>
#endif

enum {
    FM_MB = 96,  /* rows per tile: a multiple of every MR */
    FM_NB = 128, /* columns per tile: a multiple of every NR */
    FM_KC = 128, /* k per packed block */
    FM_MR_MAX = 8,
    FM_NR_MAX = 32,
};

vkc_isa vkc_cpu_isa(void) {
#ifdef FM_X86
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves the vector state (XCR0) */
    if (__builtin_cpu_supports("avx512f")) return VKC_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VKC_ISA_AVX2;
#endif
    return VKC_ISA_BASELINE;
}

const char *vkc_isa_name(vkc_isa isa) {
    switch (isa) {
    case VKC_ISA_AVX512: return "avx512";
    case VKC_ISA_AVX2: return "avx2+fma";
    default: return "baseline";
    }
}

/* op(a)(i, k) = a[i * rs + k * cs] */
typedef struct fm_view {
    const float *p;
    size_t rs, cs;
} fm_view;

/* Pack op(b)(k0 .. k0+kc, j0 .. j0+nb) into bp[panel][k][nr], zeros past nb. */
static void pack_b(float *bp, fm_view b, int k0, int kc, int j0, int nb, int nr) {
    for (int p = 0; p < nb; p += nr) {
        float *dst = bp + (size_t)p * kc;
        int w = nb - p < nr ? nb - p : nr;
        if (b.cs == 1 && w == nr) { /* columns contiguous: copy nr per k */
            for (int k = 0; k < kc; k++)
                memcpy(dst + (size_t)k * nr, b.p + (size_t)(k0 + k) * b.rs + (size_t)(j0 + p),
                       (size_t)nr * sizeof(float));
            continue;
        }
        for (int jj = 0; jj < nr; jj++) {
            if (jj >= w) {
                for (int k = 0; k < kc; k++) dst[(size_t)k * nr + jj] = 0.0f;
                continue;
            }
            const float *src = b.p + (size_t)(j0 + p + jj) * b.cs + (size_t)k0 * b.rs;
            for (int k = 0; k < kc; k++) dst[(size_t)k * nr + jj] = src[(size_t)k * b.rs];
        }
    }
}

/* c (mr x nr block, row stride FM_NB) += op(a) (mr, kc) . bp (kc, nr), op(a)(r, k) =
 * a[r][k * cs]: the rows are read where they are (a row past the matrix repeats the last one;
 * its outputs are not kept), as many independent streams as rows. */
typedef void (*fm_kernel)(float *c, const float *const *a, size_t cs, const float *bp, int kc);

#ifdef FM_X86
/* 8 rows x 32 columns: 16 zmm accumulators, 2 for b, a broadcast folded into the FMA. */
__attribute__((target("avx512f"))) static void kernel_avx512(float *c, const float *const *a,
                                                             size_t cs, const float *bp, int kc) {
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5],
                *a6 = a[6], *a7 = a[7];
#define FM_ROW(r) __m512 c##r##0 = _mm512_loadu_ps(c + (r) * FM_NB), \
                         c##r##1 = _mm512_loadu_ps(c + (r) * FM_NB + 16)
    FM_ROW(0); FM_ROW(1); FM_ROW(2); FM_ROW(3); FM_ROW(4); FM_ROW(5); FM_ROW(6); FM_ROW(7);
#undef FM_ROW
    for (int k = 0; k < kc; k++) {
        const float *b = bp + (size_t)k * 32;
        size_t ko = (size_t)k * cs;
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), x;
#define FM_FMA(r) x = _mm512_set1_ps(a##r[ko]); \
                  c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0); \
                  c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1)
        FM_FMA(0); FM_FMA(1); FM_FMA(2); FM_FMA(3); FM_FMA(4); FM_FMA(5); FM_FMA(6); FM_FMA(7);
#undef FM_FMA
    }
#define FM_ST(r) _mm512_storeu_ps(c + (r) * FM_NB, c##r##0); \
                 _mm512_storeu_ps(c + (r) * FM_NB + 16, c##r##1)
    FM_ST(0); FM_ST(1); FM_ST(2); FM_ST(3); FM_ST(4); FM_ST(5); FM_ST(6); FM_ST(7);
#undef FM_ST
}

/* 6 rows x 16 columns: 12 ymm accumulators, 2 for b, 1 broadcast (of 16 registers). */
__attribute__((target("avx2,fma"))) static void kernel_avx2(float *c, const float *const *a,
                                                            size_t cs, const float *bp, int kc) {
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
#define FM_ROW(r) __m256 c##r##0 = _mm256_loadu_ps(c + (r) * FM_NB), \
                         c##r##1 = _mm256_loadu_ps(c + (r) * FM_NB + 8)
    FM_ROW(0); FM_ROW(1); FM_ROW(2); FM_ROW(3); FM_ROW(4); FM_ROW(5);
#undef FM_ROW
    for (int k = 0; k < kc; k++) {
        const float *b = bp + (size_t)k * 16;
        size_t ko = (size_t)k * cs;
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), x;
#define FM_FMA(r) x = _mm256_broadcast_ss(a##r + ko); \
                  c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0); \
                  c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1)
        FM_FMA(0); FM_FMA(1); FM_FMA(2); FM_FMA(3); FM_FMA(4); FM_FMA(5);
#undef FM_FMA
    }
#define FM_ST(r) _mm256_storeu_ps(c + (r) * FM_NB, c##r##0); \
                 _mm256_storeu_ps(c + (r) * FM_NB + 8, c##r##1)
    FM_ST(0); FM_ST(1); FM_ST(2); FM_ST(3); FM_ST(4); FM_ST(5);
#undef FM_ST
}
#endif

/* One mb x nb tile of one batch: out(i0.., j0..). */
static void fast_tile(float *out, fm_view a, fm_view b, const float *bias, int N, int K, int i0,
                      int mb, int j0, int nb, float alpha, bool accumulate, fm_kernel kernel,
                      int mr, int nr) {
    _Alignas(64) float acc[FM_MB * FM_NB];
    _Alignas(64) float bp[FM_KC * FM_NB];
    int mbp = (mb + mr - 1) / mr * mr, nbp = (nb + nr - 1) / nr * nr;
    for (int r = 0; r < mbp; r++) memset(acc + r * FM_NB, 0, (size_t)nbp * sizeof(float));
    for (int k0 = 0; k0 < K; k0 += FM_KC) {
        int kc = K - k0 < FM_KC ? K - k0 : FM_KC;
        pack_b(bp, b, k0, kc, j0, nb, nr);
        for (int p = 0; p < nb; p += nr)
            for (int r = 0; r < mb; r += mr) {
                const float *rows[FM_MR_MAX];
                for (int q = 0; q < mr; q++) {
                    int i = i0 + (r + q < mb ? r + q : mb - 1);
                    rows[q] = a.p + (size_t)i * a.rs + (size_t)k0 * a.cs;
                }
                kernel(acc + r * FM_NB + p, rows, a.cs, bp + (size_t)p * kc, kc);
            }
    }
    for (int r = 0; r < mb; r++) { /* the reference's epilogue */
        float *o = out + (size_t)(i0 + r) * N + j0;
        const float *s = acc + r * FM_NB;
        for (int j = 0; j < nb; j++) {
            float x = alpha * s[j];
            if (bias) x = x + bias[j0 + j];
            o[j] = accumulate ? o[j] + x : x;
        }
    }
}

void vkc_matmul_forward_fast(float *out, const float *a, const float *b, const float *bias, int M,
                             int N, int K, int batch, bool trans_a, bool trans_b, size_t stride_a,
                             size_t stride_b, size_t stride_out, float alpha, bool accumulate,
                             vkc_isa isa, int nt) {
    fm_kernel kernel = NULL;
    int mr = 0, nr = 0;
#ifdef FM_X86
    if (isa == VKC_ISA_AVX512) kernel = kernel_avx512, mr = 8, nr = 32;
    else if (isa == VKC_ISA_AVX2) kernel = kernel_avx2, mr = 6, nr = 16;
#endif
    if (!kernel || K == 0) { /* no vector unit to use: the portable reference */
        vkc_matmul_forward(out, a, b, bias, M, N, K, batch, trans_a, trans_b, stride_a, stride_b,
                           stride_out, alpha, accumulate, nt);
        return;
    }
    if (!stride_a) stride_a = (size_t)M * K;
    if (!stride_b) stride_b = (size_t)K * N;
    if (!stride_out) stride_out = (size_t)M * N;
    long tiles_m = (M + FM_MB - 1) / FM_MB, tiles_n = (N + FM_NB - 1) / FM_NB;
    long tiles = (long)batch * tiles_m * tiles_n;
    double work = (double)batch * M * N * K;
    (void)work; /* unused without OpenMP */
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (long t = 0; t < tiles; t++) {
        long bi = t / (tiles_m * tiles_n), rest = t % (tiles_m * tiles_n);
        int i0 = (int)(rest / tiles_n) * FM_MB, j0 = (int)(rest % tiles_n) * FM_NB;
        fm_view av = {a + (size_t)bi * stride_a, trans_a ? 1 : (size_t)K, trans_a ? (size_t)M : 1};
        fm_view bv = {b + (size_t)bi * stride_b, trans_b ? 1 : (size_t)N, trans_b ? (size_t)K : 1};
        int mb = M - i0 < FM_MB ? M - i0 : FM_MB, nb = N - j0 < FM_NB ? N - j0 : FM_NB;
        fast_tile(out + (size_t)bi * stride_out, av, bv, bias, N, K, i0, mb, j0, nb, alpha,
                  accumulate, kernel, mr, nr);
    }
}
