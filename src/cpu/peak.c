/* The CPU backend's arithmetic ceiling (shaders/peak_fma.comp): per element, 32 independent
 * multiply-add chains of `iters` steps. Two elements run together so that 16 four-wide vectors
 * of chains are in flight: enough independent multiplies and adds to cover their latency, the
 * way a register-blocked matmul keeps its accumulators. With GCC/Clang the chains are explicit
 * vector registers (vector extensions); elsewhere a plain loop computes the same numbers. */
#include "cpu/cpu_ops.h"

#define CHAINS 32

#if defined(__GNUC__)
typedef float v4 __attribute__((vector_size(16)));

static void two_elements(float *out, size_t i, size_t n, uint32_t iters) {
    const v4 a = {0.999f, 0.998f, 0.997f, 0.996f}, b = {1e-3f, 2e-3f, 3e-3f, 4e-3f};
    v4 x[16];
    for (int j = 0; j < 16; j++) {
        size_t e = i + (size_t)(j / 8);
        float s = (float)(e % 1024) * (1.0f / 1024.0f) + 0.1f * (float)(j % 8);
        x[j] = (v4){s, s, s, s};
    }
    for (uint32_t k = 0; k < iters; k++) {
        /* unrolled so the compiler keeps all 16 accumulators in registers */
        x[0] = x[0] * a + b; x[1] = x[1] * a + b; x[2] = x[2] * a + b; x[3] = x[3] * a + b;
        x[4] = x[4] * a + b; x[5] = x[5] * a + b; x[6] = x[6] * a + b; x[7] = x[7] * a + b;
        x[8] = x[8] * a + b; x[9] = x[9] * a + b; x[10] = x[10] * a + b; x[11] = x[11] * a + b;
        x[12] = x[12] * a + b; x[13] = x[13] * a + b; x[14] = x[14] * a + b; x[15] = x[15] * a + b;
    }
    for (int e = 0; e < 2 && i + (size_t)e < n; e++) {
        v4 t = {0, 0, 0, 0};
        for (int j = 0; j < 8; j++) t += x[e * 8 + j];
        out[i + (size_t)e] = (t[0] + t[1]) + (t[2] + t[3]);
    }
}
#else
static void two_elements(float *out, size_t i, size_t n, uint32_t iters) {
    static const float a4[4] = {0.999f, 0.998f, 0.997f, 0.996f};
    static const float b4[4] = {1e-3f, 2e-3f, 3e-3f, 4e-3f};
    float x[2 * CHAINS];
    for (int j = 0; j < 2 * CHAINS; j++) {
        size_t e = i + (size_t)(j / CHAINS);
        x[j] = (float)(e % 1024) * (1.0f / 1024.0f) + 0.1f * (float)((j % CHAINS) / 4);
    }
    for (uint32_t k = 0; k < iters; k++)
        for (int j = 0; j < 2 * CHAINS; j++) x[j] = x[j] * a4[j % 4] + b4[j % 4];
    for (int e = 0; e < 2 && i + (size_t)e < n; e++) {
        float t = 0.0f;
        for (int j = 0; j < CHAINS; j++) t += x[e * CHAINS + j];
        out[i + (size_t)e] = t;
    }
}
#endif

void vkc_peak_fma(float *out, size_t n, uint32_t iters, int nt) {
    long pairs = (long)((n + 1) / 2);
    VKA_OMP_FOR(nt, pairs > 1)
    for (long p = 0; p < pairs; p++) two_elements(out, (size_t)p * 2, n, iters);
}
