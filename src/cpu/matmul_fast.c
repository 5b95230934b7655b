/* The CPU backend's fast matmul: the same product as vkc_matmul_forward (matmul.c), with
 * register-tiled micro-kernels for AVX2+FMA (6 x 16) and AVX-512 (8 x 32) chosen at run time
 * from cpuid (vkc_cpu_isa), written once (matmul_simd.h over mm_simd.h's register block, which
 * the fused attention's products share) and instantiated per ISA (simd.h).
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
 * in the last bits. VKATTN_CPU_KERNELS=reference selects the reference (docs/environment.md). */
#include "cpu/matmul_tiles.h"
#include "cpu/simd.h"

enum {
    FM_MB = 96,  /* rows per tile: a multiple of every MR */
    FM_NB = 128, /* columns per tile: a multiple of every NR */
    FM_KC = 128, /* k per packed block */
    FM_MR_MAX = 8,
    FM_NR_MAX = 32,
};
_Static_assert((int)FM_NB <= VKC_MM_MAX_NB, "a tile wider than a 16-bit out's epilogue row");

vkc_isa vkc_cpu_isa(void) {
#ifdef VKC_X86
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

/* A product of few rows (M <= FM_FEW_ROWS: a decode step's matrix-vector products, M = the
 * sessions) skips the packing, which at M = 1 costs more than the product. op(b) is read in
 * place, V = 16 (AVX-512) or 8 (AVX2) columns at a time: where its columns are contiguous
 * (B stored (K, N)) a row of V per k; where they are strided (B stored (N, K), the linear
 * layers' weights) V rows of B are loaded V k at a time and transposed in registers. Each output
 * is still summed over k in order with one fused multiply-add per term from 0, then the same
 * epilogue: the bits are the tiled kernel's (test_matmul_cpu_few_rows_equal_tiled). */
enum { FM_FEW_ROWS = 4, FM_FEW_NB = 256 };
_Static_assert((int)FM_FEW_NB <= VKC_MM_MAX_NB, "a tile wider than a 16-bit out's epilogue row");

#define VKC_SIMD_BODY "cpu/matmul_simd.h" /* fm_kernel_*, fm_few_rows_*: 8 x 32 and 6 x 16 */
#include "cpu/simd_each.h"

/* The micro-kernel of an ISA and its register block. */
typedef struct fm_isa_kernel {
    fm_kernel kernel;
    int mr, nr;
} fm_isa_kernel;

/* One mb x nb tile of one batch: out(i0.., j0..); user is the fm_isa_kernel. */
static void fast_tile(const vkc_mm *mm, void *out, vkc_mm_view a, vkc_mm_view b, int i0, int mb,
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

void vkc_matmul_forward_fast(void *out, int out_dtype, const float *a, const float *b,
                             const float *bias, int M, int N, int K, int batch, bool trans_a,
                             bool trans_b, size_t stride_a, size_t stride_b, size_t stride_out,
                             float alpha, bool accumulate, vkc_isa isa, unsigned cvt, int nt) {
    fm_kernel kernel = NULL;
    int mr = 0, nr = 0;
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512) kernel = fm_kernel_avx512, mr = 8, nr = 32;
    else if (isa == VKC_ISA_AVX2) kernel = fm_kernel_avx2, mr = 6, nr = 16;
#endif
    if (!kernel || K == 0) { /* no vector unit to use: the portable reference */
        vkc_matmul_forward(out, out_dtype, a, b, bias, M, N, K, batch, trans_a, trans_b, stride_a,
                           stride_b, stride_out, alpha, accumulate, cvt, nt);
        return;
    }
    vkc_mm mm = {out, out_dtype, cvt, a, b, bias, M, N, K, batch, trans_a, trans_b,
                 stride_a, stride_b, stride_out, alpha, accumulate};
#ifdef VKC_X86
    if (M <= FM_FEW_ROWS) {
        vkc_matmul_tiles(&mm, M, FM_FEW_NB, VKC_SIMD_PICK(isa, fm_few_rows), NULL, nt);
        return;
    }
#endif
    fm_isa_kernel ik = {kernel, mr, nr};
    vkc_matmul_tiles(&mm, FM_MB, FM_NB, fast_tile, &ik, nt);
}
