/* Elementwise ops: fill, copy, residual (shaders/residual_forward.comp, ...; the Vulkan
 * backend fills and copies with vkCmdFillBuffer and vkCmdCopyBuffer). Each
 * element is independent, so any split over threads gives the same result. */
#include "cpu/cpu_ops.h"

#include <string.h>

/* Work unit for the parallel loops: large enough to amortise the scheduling, small enough to
 * split a few-megabyte tensor over the cores. */
#define EW_BLOCK 65536

void vkc_fill(float *t, float value, size_t N, int nt) {
    long blocks = (long)((N + EW_BLOCK - 1) / EW_BLOCK);
    VKA_OMP_FOR(nt, blocks > 1)
    for (long bl = 0; bl < blocks; bl++) {
        size_t lo = (size_t)bl * EW_BLOCK, hi = lo + EW_BLOCK < N ? lo + EW_BLOCK : N;
        for (size_t i = lo; i < hi; i++) t[i] = value;
    }
}

void vkc_copy(float *dst, const float *src, size_t N, int nt) {
    if (dst == src) return;
    long blocks = (long)((N + EW_BLOCK - 1) / EW_BLOCK);
    VKA_OMP_FOR(nt, blocks > 1)
    for (long bl = 0; bl < blocks; bl++) {
        size_t lo = (size_t)bl * EW_BLOCK, hi = lo + EW_BLOCK < N ? lo + EW_BLOCK : N;
        memmove(dst + lo, src + lo, (hi - lo) * sizeof *dst);
    }
}

void vkc_residual_forward(float *out, const float *a, const float *b, size_t N, int nt) {
    long blocks = (long)((N + EW_BLOCK - 1) / EW_BLOCK);
    VKA_OMP_FOR(nt, blocks > 1)
    for (long bl = 0; bl < blocks; bl++) {
        size_t lo = (size_t)bl * EW_BLOCK, hi = lo + EW_BLOCK < N ? lo + EW_BLOCK : N;
        for (size_t i = lo; i < hi; i++) out[i] = a[i] + b[i];
    }
}

void vkc_add_inplace(float *dst, const float *src, size_t N, int nt) {
    long blocks = (long)((N + EW_BLOCK - 1) / EW_BLOCK);
    VKA_OMP_FOR(nt, blocks > 1)
    for (long bl = 0; bl < blocks; bl++) {
        size_t lo = (size_t)bl * EW_BLOCK, hi = lo + EW_BLOCK < N ? lo + EW_BLOCK : N;
        for (size_t i = lo; i < hi; i++) dst[i] += src[i];
    }
}
