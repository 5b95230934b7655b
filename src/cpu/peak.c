/* The CPU backend's arithmetic ceiling (shaders/peak_fma.comp): per element, 32 independent
 * multiply-add chains (8 four-wide vectors) of `iters` steps, summed into out[i]. Three elements
 * run together, their chains in two halves of 12 vectors: enough independent multiplies and
 * adds in flight to cover their latency, the way a register-blocked matmul keeps its
 * accumulators, and few enough that the 12 accumulators, a and b fit x86-64's 16 SSE registers
 * (16 accumulators spilled three to the stack each step, and the ceiling came out at 60% of what
 * the CPU backend's own matmul reached on an AMD EPYC). With GCC/Clang the chains are explicit
 * vector registers (vector extensions); elsewhere a plain loop computes the same numbers. */
#include "cpu/cpu_ops.h"

#define CHAINS 32      /* scalar chains per element, as the shader's 8 vec4 */
#define GROUP 3        /* elements run together */

#if defined(__GNUC__)
typedef float v4 __attribute__((vector_size(16)));

/* Chains 4h .. 4h+3 (vectors) of elements e0 .. e0+2, added into sum[e]. */
static void half_group(v4 *sum, size_t e0, int h, uint32_t iters) {
    const v4 a = {0.999f, 0.998f, 0.997f, 0.996f}, b = {1e-3f, 2e-3f, 3e-3f, 4e-3f};
    v4 x[12];
    for (int j = 0; j < 12; j++) {
        size_t e = e0 + (size_t)(j / 4);
        float s = (float)(e % 1024) * (1.0f / 1024.0f) + 0.1f * (float)(4 * h + j % 4);
        x[j] = (v4){s, s, s, s};
    }
    for (uint32_t k = 0; k < iters; k++) {
        /* unrolled so the compiler keeps all 12 accumulators in registers */
        x[0] = x[0] * a + b; x[1] = x[1] * a + b; x[2] = x[2] * a + b; x[3] = x[3] * a + b;
        x[4] = x[4] * a + b; x[5] = x[5] * a + b; x[6] = x[6] * a + b; x[7] = x[7] * a + b;
        x[8] = x[8] * a + b; x[9] = x[9] * a + b; x[10] = x[10] * a + b; x[11] = x[11] * a + b;
    }
    for (int j = 0; j < 12; j++) sum[j / 4] += x[j];
}

static void group(float *out, size_t i, size_t n, uint32_t iters) {
    v4 sum[GROUP] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    half_group(sum, i, 0, iters);
    half_group(sum, i, 1, iters);
    for (int e = 0; e < GROUP && i + (size_t)e < n; e++)
        out[i + (size_t)e] = (sum[e][0] + sum[e][1]) + (sum[e][2] + sum[e][3]);
}
#else
static void group(float *out, size_t i, size_t n, uint32_t iters) {
    static const float a4[4] = {0.999f, 0.998f, 0.997f, 0.996f};
    static const float b4[4] = {1e-3f, 2e-3f, 3e-3f, 4e-3f};
    float x[GROUP * CHAINS];
    for (int j = 0; j < GROUP * CHAINS; j++) {
        size_t e = i + (size_t)(j / CHAINS);
        x[j] = (float)(e % 1024) * (1.0f / 1024.0f) + 0.1f * (float)((j % CHAINS) / 4);
    }
    for (uint32_t k = 0; k < iters; k++)
        for (int j = 0; j < GROUP * CHAINS; j++) x[j] = x[j] * a4[j % 4] + b4[j % 4];
    for (int e = 0; e < GROUP && i + (size_t)e < n; e++) {
        float t = 0.0f;
        for (int j = 0; j < CHAINS; j++) t += x[e * CHAINS + j];
        out[i + (size_t)e] = t;
    }
}
#endif

void vkc_peak_fma(float *out, size_t n, uint32_t iters, int nt) {
    long groups = (long)((n + GROUP - 1) / GROUP);
    VKA_OMP_FOR(nt, groups > 1)
    for (long g = 0; g < groups; g++) group(out, (size_t)g * GROUP, n, iters);
}

/* --- the processor's ceiling ---------------------------------------------------------------- */
/* What the hardware can do, not what this build's code does: per thread, VKC_HW_CHAINS
 * independent fused multiply-add chains as wide as the ISA allows (AVX-512: 16 lanes, AVX2: 8),
 * enough to cover the FMA latency of two pipes (4 cycles x 2 pipes = 8 in flight), compiled
 * for that ISA by target attributes whatever the build's -march. */
#include "cpu/simd.h"

#ifdef VKC_X86
#define VKC_HW_CHAINS 12
#define VKC_SIMD_BODY "cpu/peak_simd.h" /* peak_hw_avx512, peak_hw_avx2 */
#include "cpu/simd_each.h"

double vkc_peak_fma_hw(float *out, vkc_isa isa, uint64_t iters, int nt) {
    if (isa != VKC_ISA_AVX512 && isa != VKC_ISA_AVX2) return 0.0;
    VKA_OMP_FOR(nt, nt > 1)
    for (int t = 0; t < nt; t++)
        out[t] = VKC_SIMD_PICK(isa, peak_hw)(iters, (float)t);
    return (double)nt * (double)iters * VKC_HW_CHAINS * (isa == VKC_ISA_AVX512 ? 16 : 8) * 2.0;
}
#else
double vkc_peak_fma_hw(float *out, vkc_isa isa, uint64_t iters, int nt) {
    (void)out, (void)isa, (void)iters, (void)nt;
    return 0.0;
}
#endif
