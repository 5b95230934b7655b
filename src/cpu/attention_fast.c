/* The fused attention's fast kernels (at_kern, attention_kern.h) for AVX-512 and AVX2+FMA,
 * written once in attention_simd.h and instantiated per ISA (simd.h), chosen at run time from
 * cpuid like the fast matmul's.
 *
 * The same FlashAttention-2 loops as the reference (attention.c) call them on the same tiles:
 *  - products: mm_simd.h's register block (the fast matmul's), 6 rows x 64 columns or 8 x 32
 *    (AVX-512), 6 x 16 (AVX2), each element still summed over k in order, one fused
 *    multiply-add per term;
 *  - k and v tiles transposed 8 x 8 in registers;
 *  - score rows: scale and mask by one multiply-add, exp by exp_fast.h's polynomial, row
 *    maxima and sums across vector lanes (a fixed tree: no result depends on the thread count);
 *  - delta = rowsum(dout * out) in double, as the reference.
 * So results differ from the reference's in the last bits (test_attention_fused.c's
 * test_attention_fused_cpu_fast_matches_reference holds them to the GPU's tolerance). */
#include "cpu/attention_kern.h"
#include "cpu/exp_fast.h"

#ifdef VKC_X86
/* at_kern.pack_t, for both ISAs: 8 x 8 blocks through registers, the ragged edges one float at
 * a time. */
VKC_TARGET_AVX2 static void at_pack_t_fast(float *kt, const float *x, vkc_attn_strides s, int b,
                                           int h, int j0, int bk, int HS) {
    const int jb = bk / 8 * 8, db = HS / 8 * 8;
    for (int jj = 0; jj < jb; jj += 8) {
        const float *row[8];
        for (int e = 0; e < 8; e++) row[e] = x + at_off(s, b, h, j0 + jj + e);
        for (int d = 0; d < db; d += 8) {
            __m256 r[8];
            VS_UNROLL
            for (int e = 0; e < 8; e++) r[e] = _mm256_loadu_ps(row[e] + d);
            vkc_transpose8(r);
            VS_UNROLL
            for (int e = 0; e < 8; e++) _mm256_storeu_ps(kt + (size_t)(d + e) * AT_BK + jj, r[e]);
        }
        for (int d = db; d < HS; d++)
            for (int e = 0; e < 8; e++) kt[(size_t)d * AT_BK + jj + e] = row[e][d];
    }
    for (int jj = jb; jj < bk; jj++) {
        const float *row = x + at_off(s, b, h, j0 + jj);
        for (int d = 0; d < HS; d++) kt[(size_t)d * AT_BK + jj] = row[d];
    }
    for (int jj = bk; jj < at_cols(bk); jj++)
        for (int d = 0; d < HS; d++) kt[(size_t)d * AT_BK + jj] = 0.0f;
}

#define VKC_SIMD_BODY "cpu/attention_simd.h" /* at_kern_fast_avx512, at_kern_fast_avx2 */
#include "cpu/simd_each.h"
#endif

const at_kern *vkc_attention_fast_kern(vkc_isa isa) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512) return &at_kern_fast_avx512;
    if (isa == VKC_ISA_AVX2) return &at_kern_fast_avx2;
#endif
    (void)isa;
    return NULL;
}
