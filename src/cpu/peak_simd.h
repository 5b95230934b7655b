/* The processor's ceiling (peak.c), one instance per ISA (simd_each.h): VKC_HW_CHAINS
 * independent fused multiply-add chains of iters steps; the sum only keeps them alive. */
VS_TARGET static float VS_NAME(peak_hw)(uint64_t iters, float seed) {
    VS_F32 a = VS_SET1(0.999f), b = VS_SET1(1e-3f), x[VKC_HW_CHAINS];
    for (int j = 0; j < VKC_HW_CHAINS; j++) x[j] = VS_SET1(seed + 0.1f * (float)j);
    for (uint64_t k = 0; k < iters; k++) {
        VS_UNROLL
        for (int j = 0; j < VKC_HW_CHAINS; j++) x[j] = VS_FMA(x[j], a, b);
    }
    VS_F32 s = x[0];
    for (int j = 1; j < VKC_HW_CHAINS; j++) s = VS_ADD(s, x[j]);
    return VS_REDUCE_ADD(s);
}
