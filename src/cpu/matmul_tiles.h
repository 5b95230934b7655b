/* What the reference matmul (matmul.c) and the fast one (matmul_fast.c) share: the strided
 * operand views, the packing of op(b) into k-major panels, the epilogue, and the driver that
 * cuts out into tiles (one OpenMP work item each) and hands each tile to the kernel's own tile
 * function. Private to those two files and the fused attention's (whose products take the same
 * views). */
#ifndef VKA_CPU_MATMUL_TILES_H
#define VKA_CPU_MATMUL_TILES_H

#include "cpu/cpu_ops.h"

#include <string.h>

/* op(x)(r, c) = p[r * rs + c * cs]: a batch's op(a) (M, K) or op(b) (K, N) in place. */
typedef struct vkc_mm_view {
    const float *p;
    size_t rs, cs;
} vkc_mm_view;

/* The product vkc_matmul_forward computes (cpu_ops.h), with its batch strides defaulted. */
typedef struct vkc_mm {
    float *out;
    const float *a, *b, *bias;
    int M, N, K, batch;
    bool trans_a, trans_b;
    size_t stride_a, stride_b, stride_out;
    float alpha;
    bool accumulate;
} vkc_mm;

/* out(i0 .. i0 + mb, j0 .. j0 + nb) of one batch (out points at the batch), from the batch's
 * views of op(a) and op(b); user is vkc_matmul_tiles' user pointer. */
typedef void (*vkc_mm_tile_fn)(const vkc_mm *mm, float *out, vkc_mm_view a, vkc_mm_view b,
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

/* out(i0 + r, j0 + j) = alpha * acc[r * ld + j], then + bias[j0 + j], then + out if accumulate
 * (the order cpu_ops.h documents). */
static inline void vkc_mm_epilogue(const vkc_mm *mm, float *out, const float *acc, int ld,
                                   int i0, int mb, int j0, int nb) {
    const float alpha = mm->alpha, *bias = mm->bias; /* locals: out's stores cannot alias them */
    const bool accumulate = mm->accumulate;
    for (int r = 0; r < mb; r++) {
        float *o = out + (size_t)(i0 + r) * mm->N + j0;
        const float *s = acc + (size_t)r * ld;
        for (int j = 0; j < nb; j++) {
            float x = alpha * s[j];
            if (bias) x = x + bias[j0 + j];
            o[j] = accumulate ? o[j] + x : x;
        }
    }
}

#endif
