/* What the reference matmul (matmul.c) and the fast one (matmul_fast.c) share: the strided
 * operand views, the packing of op(b) into k-major panels, the epilogue, and the driver that
 * cuts out into tiles (one OpenMP work item each) and hands each tile to the kernel's own tile
 * function. Private to those two files, the 16-bit matmul's (matmul16.c: the 16-bit out's
 * epilogue) and the fused attention's (whose products take the same views). */
#ifndef VKA_CPU_MATMUL_TILES_H
#define VKA_CPU_MATMUL_TILES_H

#include "cpu/convert.h"
#include "cpu/cpu_ops.h"
#include "vkattn.h" /* vka_dtype */

#include <string.h>

/* op(x)(r, c) = p[r * rs + c * cs]: a batch's op(a) (M, K) or op(b) (K, N) in place. */
typedef struct vkc_mm_view {
    const float *p;
    size_t rs, cs;
} vkc_mm_view;

/* The product vkc_matmul_forward computes (cpu_ops.h), with its batch strides defaulted. */
typedef struct vkc_mm {
    void *out;     /* float32, or 16-bit words (a uint16_t array) when out_dtype is 16-bit */
    int out_dtype; /* VKA_F32, VKA_BF16 or VKA_F16 */
    unsigned cvt;  /* a 16-bit out's narrowing: the conversions it may use (vkc_cvt_features) */
    const float *a, *b, *bias;
    int M, N, K, batch;
    bool trans_a, trans_b;
    size_t stride_a, stride_b, stride_out;
    float alpha;
    bool accumulate;
} vkc_mm;

/* out(i0 .. i0 + mb, j0 .. j0 + nb) of one batch (out points at the batch's first element, of
 * mm->out_dtype), from the batch's views of op(a) and op(b); user is vkc_matmul_tiles' user
 * pointer. */
typedef void (*vkc_mm_tile_fn)(const vkc_mm *mm, void *out, vkc_mm_view a, vkc_mm_view b,
                               int i0, int mb, int j0, int nb, const void *user);

/* Every tile_m x tile_n tile of every batch, in a dynamic OpenMP loop over nt threads (each
 * tile's result does not depend on which thread computes it). */
void vkc_matmul_tiles(const vkc_mm *mm, int tile_m, int tile_n, vkc_mm_tile_fn tile,
                      const void *user, int nt);

/* Pack op(b)(k0 .. k0+kc, j0 .. j0+nb) into bp[panel][k][nr], zeros past nb. */
static inline void vkc_mm_pack_b(float *bp, vkc_mm_view b, int k0, int kc, int j0, int nb,
                                 int nr) {
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

/* Element e of a matmul's out of type dtype (out its first element). */
static inline void *vkc_mm_out_at(void *out, int dtype, size_t e) {
    return dtype == VKA_F32 ? (void *)((float *)out + e) : (void *)((uint16_t *)out + e);
}

/* The widest tile any kernel hands an epilogue (matmul_fast.c's few-rows tiles). */
#define VKC_MM_MAX_NB 256

/* A 16-bit out's part of a tile: out(i0 + r, j0 + j) = alpha * acc[r * ld + j] + bias[j0 + j]
 * computed in float32 as the float32 epilogues compute it, then rounded to dtype (VKA_BF16,
 * VKA_F16) by the convert op's conversion (vkc_convert_serial), a row at a time through a stack
 * row: so the 16-bit out is vka_copy of the float32 out, bit for bit. uint16_t stores only, so
 * the tiles of other threads writing the other half of a word two rows share do not race.
 * nb <= VKC_MM_MAX_NB; accumulate is refused for a 16-bit out (op_checks.c). */
static inline void vkc_mm_epilogue16(uint16_t *out, int dtype, unsigned cvt, int N, float alpha,
                                     const float *bias, const float *acc, int ld, int i0,
                                     int mb, int j0, int nb) {
    float row[VKC_MM_MAX_NB];
    for (int r = 0; r < mb; r++) {
        const float *s = acc + (size_t)r * ld;
        for (int j = 0; j < nb; j++) {
            float x = alpha * s[j];
            if (bias) x = x + bias[j0 + j];
            row[j] = x;
        }
        vkc_convert_serial(out + (size_t)(i0 + r) * N + j0, dtype, row, VKA_F32, (size_t)nb,
                           cvt);
    }
}

/* out(i0 + r, j0 + j) = alpha * acc[r * ld + j], then + bias[j0 + j], then + out if accumulate
 * (the order cpu_ops.h documents); a 16-bit out: vkc_mm_epilogue16. */
static inline void vkc_mm_epilogue(const vkc_mm *mm, void *out, const float *acc, int ld,
                                   int i0, int mb, int j0, int nb) {
    const float alpha = mm->alpha, *bias = mm->bias; /* locals: out's stores cannot alias them */
    const bool accumulate = mm->accumulate;
    if (mm->out_dtype != VKA_F32) {
        vkc_mm_epilogue16(out, mm->out_dtype, mm->cvt, mm->N, alpha, bias, acc, ld, i0, mb, j0,
                          nb);
        return;
    }
    for (int r = 0; r < mb; r++) {
        float *o = (float *)out + (size_t)(i0 + r) * mm->N + j0;
        const float *s = acc + (size_t)r * ld;
        for (int j = 0; j < nb; j++) {
            float x = alpha * s[j];
            if (bias) x = x + bias[j0 + j];
            o[j] = accumulate ? o[j] + x : x;
        }
    }
}

#endif
