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
#include "cpu/matmul_tiles.h"

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

/* A product of few rows (M <= FM_FEW_ROWS: a decode step's matrix-vector products, M = the
 * sessions) skips the packing, which at M = 1 costs more than the product. op(b) is read in
 * place, V = 16 (AVX-512) or 8 (AVX2) columns at a time: where its columns are contiguous
 * (B stored (K, N)) a row of V per k; where they are strided (B stored (N, K), the linear
 * layers' weights) V rows of B are loaded V k at a time and transposed in registers. Each output
 * is still summed over k in order with one fused multiply-add per term from 0, then the same
 * epilogue: the bits are the tiled kernel's (test_matmul_cpu_few_rows_equal_tiled). */
enum { FM_FEW_ROWS = 4, FM_FEW_NB = 256 };

#if defined(__clang__)
#define FM_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define FM_UNROLL _Pragma("GCC unroll 16")
#else
#define FM_UNROLL
#endif

#ifdef FM_X86
/* t[q] (row q, lanes k) := its transpose, by swapping the off-diagonal blocks of 8, 4, 2 and 1
 * (each stage: lane l of row i and of row i + h from lanes of rows i and i + h). */
#define FM_SWAP(h, i, ilo, ihi)                                                                  \
    do {                                                                                       \
        __m512 x_ = t[i], y_ = t[(i) + (h)];                                                   \
        t[i] = _mm512_permutex2var_ps(x_, ilo, y_);                                            \
        t[(i) + (h)] = _mm512_permutex2var_ps(x_, ihi, y_);                                    \
    } while (0)
#define FM_STAGE(h)                                                                              \
    do {                                                                                       \
        __m512i lo_ = _mm512_setzero_si512(), hi_ = _mm512_setzero_si512();                    \
        fm_stage_index(h, &lo_, &hi_);                                                         \
        FM_UNROLL                                                                              \
        for (int i = 0; i < 16; i++)                                                           \
            if (!(i & (h))) FM_SWAP(h, i, lo_, hi_);                                           \
    } while (0)

__attribute__((target("avx512f"))) static inline void fm_stage_index(int h, __m512i *lo,
                                                                      __m512i *hi) {
    int l0[16], h0[16];
    for (int l = 0; l < 16; l++) {
        l0[l] = (l & h) ? 16 + l - h : l;
        h0[l] = (l & h) ? 16 + l : l + h;
    }
    *lo = _mm512_loadu_si512(l0);
    *hi = _mm512_loadu_si512(h0);
}

__attribute__((target("avx512f"))) static inline void transpose16(__m512 t[16]) {
    FM_STAGE(8);
    FM_STAGE(4);
    FM_STAGE(2);
    FM_STAGE(1);
}
#undef FM_STAGE
#undef FM_SWAP

__attribute__((target("avx512f"))) static void few_rows_avx512(const vkc_mm *mm, float *out,
                                                                vkc_mm_view a, vkc_mm_view b,
                                                                int i0, int mb, int j0, int nb,
                                                                const void *user) {
    (void)user;
    _Alignas(64) float acc[FM_FEW_ROWS * FM_FEW_NB];
    const int K = mm->K;
    const float *ar[FM_FEW_ROWS];
    for (int r = 0; r < mb; r++) ar[r] = a.p + (size_t)(i0 + r) * a.rs;
    for (int p = 0; p < nb; p += 16) {
        int w = nb - p < 16 ? nb - p : 16;
        const float *bj = b.p + (size_t)(j0 + p) * b.cs;
        __m512 c[FM_FEW_ROWS];
        for (int r = 0; r < FM_FEW_ROWS; r++) c[r] = _mm512_setzero_ps();
        if (b.cs == 1) { /* row k of op(b) is contiguous */
            __mmask16 m = (__mmask16)((1u << w) - 1);
            for (int k = 0; k < K; k++) {
                __m512 bv = _mm512_maskz_loadu_ps(m, bj + (size_t)k * b.rs);
                for (int r = 0; r < mb; r++)
                    c[r] = _mm512_fmadd_ps(_mm512_set1_ps(ar[r][(size_t)k * a.cs]), bv, c[r]);
            }
        } else { /* column j of op(b) is contiguous (b.rs == 1): 16 x 16 blocks, transposed */
            for (int k0 = 0; k0 < K; k0 += 16) {
                int kc = K - k0 < 16 ? K - k0 : 16;
                __mmask16 km = (__mmask16)((1u << kc) - 1);
                __m512 t[16];
                for (int q = 0; q < 16; q++)
                    t[q] = q < w ? _mm512_maskz_loadu_ps(km, bj + (size_t)q * b.cs + k0)
                                 : _mm512_setzero_ps();
                transpose16(t);
                if (kc == 16) {
                    FM_UNROLL
                    for (int kk = 0; kk < 16; kk++)
                        for (int r = 0; r < mb; r++)
                            c[r] = _mm512_fmadd_ps(
                                _mm512_set1_ps(ar[r][(size_t)(k0 + kk) * a.cs]), t[kk], c[r]);
                } else {
                    for (int kk = 0; kk < kc; kk++)
                        for (int r = 0; r < mb; r++)
                            c[r] = _mm512_fmadd_ps(
                                _mm512_set1_ps(ar[r][(size_t)(k0 + kk) * a.cs]), t[kk], c[r]);
                }
            }
        }
        for (int r = 0; r < mb; r++) _mm512_storeu_ps(acc + r * FM_FEW_NB + p, c[r]);
    }
    vkc_mm_epilogue(mm, out, acc, FM_FEW_NB, i0, mb, j0, nb);
}

/* The classic 8 x 8 transpose: unpack, shuffle, swap 128-bit halves. */
__attribute__((target("avx2,fma"))) static inline void transpose8(__m256 t[8]) {
    __m256 u[8], v[8];
    for (int i = 0; i < 4; i++) {
        u[2 * i] = _mm256_unpacklo_ps(t[2 * i], t[2 * i + 1]);
        u[2 * i + 1] = _mm256_unpackhi_ps(t[2 * i], t[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        v[4 * i + 0] = _mm256_shuffle_ps(u[4 * i + 0], u[4 * i + 2], 0x44);
        v[4 * i + 1] = _mm256_shuffle_ps(u[4 * i + 0], u[4 * i + 2], 0xEE);
        v[4 * i + 2] = _mm256_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0x44);
        v[4 * i + 3] = _mm256_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x31);
    }
}

__attribute__((target("avx2,fma"))) static void few_rows_avx2(const vkc_mm *mm, float *out,
                                                               vkc_mm_view a, vkc_mm_view b,
                                                               int i0, int mb, int j0, int nb,
                                                               const void *user) {
    (void)user;
    _Alignas(32) float acc[FM_FEW_ROWS * FM_FEW_NB];
    const int K = mm->K;
    const float *ar[FM_FEW_ROWS];
    for (int r = 0; r < mb; r++) ar[r] = a.p + (size_t)(i0 + r) * a.rs;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int p = 0; p < nb; p += 8) {
        int w = nb - p < 8 ? nb - p : 8;
        const float *bj = b.p + (size_t)(j0 + p) * b.cs;
        __m256 c[FM_FEW_ROWS];
        for (int r = 0; r < FM_FEW_ROWS; r++) c[r] = _mm256_setzero_ps();
        if (b.cs == 1) {
            __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), lane);
            for (int k = 0; k < K; k++) {
                __m256 bv = _mm256_maskload_ps(bj + (size_t)k * b.rs, m);
                for (int r = 0; r < mb; r++)
                    c[r] = _mm256_fmadd_ps(_mm256_set1_ps(ar[r][(size_t)k * a.cs]), bv, c[r]);
            }
        } else {
            for (int k0 = 0; k0 < K; k0 += 8) {
                int kc = K - k0 < 8 ? K - k0 : 8;
                __m256i km = _mm256_cmpgt_epi32(_mm256_set1_epi32(kc), lane);
                __m256 t[8];
                for (int q = 0; q < 8; q++)
                    t[q] = q < w ? _mm256_maskload_ps(bj + (size_t)q * b.cs + k0, km)
                                 : _mm256_setzero_ps();
                transpose8(t);
                for (int kk = 0; kk < kc; kk++)
                    for (int r = 0; r < mb; r++)
                        c[r] = _mm256_fmadd_ps(_mm256_set1_ps(ar[r][(size_t)(k0 + kk) * a.cs]),
                                               t[kk], c[r]);
            }
        }
        for (int r = 0; r < mb; r++) _mm256_storeu_ps(acc + r * FM_FEW_NB + p, c[r]);
    }
    vkc_mm_epilogue(mm, out, acc, FM_FEW_NB, i0, mb, j0, nb);
}
#endif

/* The micro-kernel of an ISA and its register block. */
typedef struct fm_isa_kernel {
    fm_kernel kernel;
    int mr, nr;
} fm_isa_kernel;

/* One mb x nb tile of one batch: out(i0.., j0..); user is the fm_isa_kernel. */
static void fast_tile(const vkc_mm *mm, float *out, vkc_mm_view a, vkc_mm_view b, int i0, int mb,
                      int j0, int nb, const void *user) {
    const fm_isa_kernel *ik = user;
    fm_kernel kernel = ik->kernel;
    int mr = ik->mr, nr = ik->nr, K = mm->K;
    _Alignas(64) float acc[FM_MB * FM_NB];
    _Alignas(64) float bp[FM_KC * FM_NB];
    int mbp = (mb + mr - 1) / mr * mr, nbp = (nb + nr - 1) / nr * nr;
    for (int r = 0; r < mbp; r++) memset(acc + r * FM_NB, 0, (size_t)nbp * sizeof(float));
    for (int k0 = 0; k0 < K; k0 += FM_KC) {
        int kc = K - k0 < FM_KC ? K - k0 : FM_KC;
        vkc_mm_pack_b(bp, b, k0, kc, j0, nb, nr);
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
    vkc_mm_epilogue(mm, out, acc, FM_NB, i0, mb, j0, nb); /* the reference's */
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
    vkc_mm mm = {out, a, b, bias, M, N, K, batch, trans_a, trans_b,
                 stride_a, stride_b, stride_out, alpha, accumulate};
#ifdef FM_X86
    if (M <= FM_FEW_ROWS) {
        vkc_matmul_tiles(&mm, M, FM_FEW_NB, isa == VKC_ISA_AVX512 ? few_rows_avx512 : few_rows_avx2,
                         NULL, nt);
        return;
    }
#endif
    fm_isa_kernel ik = {kernel, mr, nr};
    vkc_matmul_tiles(&mm, FM_MB, FM_NB, fast_tile, &ik, nt);
}
