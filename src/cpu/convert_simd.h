/* The 16-bit conversions' fast bodies (convert.c), one instance per ISA
 * (simd_each.h): whole vectors through simd.h's VS_LOAD_/VS_STORE_ BF16 and
 * F16, the rest by the reference. */
VS_TARGET static void VS_NAME(cvt_f32_bf16)(uint16_t *o, const float *x, size_t n) {
    size_t i = 0;
    for (; i + VS_W <= n; i += VS_W) VS_STORE_BF16(o + i, VS_LOAD(x + i));
    vkc_f32_to_bf16_ref(o + i, x + i, n - i);
}

VS_TARGET static void VS_NAME(cvt_bf16_f32)(float *o, const uint16_t *x, size_t n) {
    size_t i = 0;
    for (; i + VS_W <= n; i += VS_W) VS_STORE(o + i, VS_LOAD_BF16(x + i));
    vkc_bf16_to_f32_ref(o + i, x + i, n - i);
}

VS_TARGET_F16C static void VS_NAME(cvt_f32_f16)(uint16_t *o, const float *x, size_t n) {
    size_t i = 0;
    for (; i + VS_W <= n; i += VS_W) VS_STORE_F16(o + i, VS_LOAD(x + i));
    vkc_f32_to_f16_ref(o + i, x + i, n - i);
}

VS_TARGET_F16C static void VS_NAME(cvt_f16_f32)(float *o, const uint16_t *x, size_t n) {
    size_t i = 0;
    for (; i + VS_W <= n; i += VS_W) VS_STORE(o + i, VS_LOAD_F16(x + i));
    vkc_f16_to_f32_ref(o + i, x + i, n - i);
}
