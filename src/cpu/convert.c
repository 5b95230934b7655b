/* fp32 <-> bf16 / fp16 (convert.h says what each rounds to and why). The
 * reference is integer arithmetic on the bit patterns, so it is the same on
 * every compiler and CPU; the fast versions are convert_simd.h (AVX-512, AVX2
 * with F16C) and VCVTNEPS2BF16 (AVX512-BF16). */
#include "cpu/convert.h"
#include "cpu/simd.h"

#include <stdbool.h>
#include <string.h>

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t vkc_f32_to_bf16_1(float x) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN */
    if ((u & 0x7F800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u); /* zero, subnormal */
    /* Inf: + 0x7FFF leaves it Inf; the largest finite values carry into Inf */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

uint16_t vkc_f32_to_f16_1(float x) {
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu)); /* NaN */
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 (and Inf): Inf */
    if (a >= 0x38800000u) { /* >= 2^-14: normal; rebias 127 -> 15, round off 13 bits */
        uint32_t m = a - (112u << 23);
        return (uint16_t)(sign | ((m + 0x0FFFu + ((m >> 13) & 1u)) >> 13));
    }
    if (a < 0x33000000u) return sign; /* <= 2^-25 (a tie at 2^-25 goes to the even 0) */
    /* subnormal: |x| = mant 2^(e - 150), in units of 2^-24: mant >> (126 -
     * e), 14..24 bits */
    uint32_t e = a >> 23, mant = (a & 0x7FFFFFu) | 0x800000u, shift = 126 - e;
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++; /* q = 0x400: the smallest normal */
    return (uint16_t)(sign | q);
}

float vkc_f16_to_f32_1(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 31) return bits_f32(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0)); /* quiet */
    if (e) return bits_f32(sign | ((e + 112) << 23) | (m << 13));
    if (!m) return bits_f32(sign);
    e = 113; /* subnormal m 2^-24: normalise */
    while (!(m & 0x400u)) {
        m <<= 1;
        e--;
    }
    return bits_f32(sign | (e << 23) | ((m & 0x3FFu) << 13));
}

void vkc_f32_to_bf16_ref(uint16_t *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = vkc_f32_to_bf16_1(in[i]);
}
void vkc_bf16_to_f32_ref(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = vkc_bf16_to_f32_1(in[i]);
}
void vkc_f32_to_f16_ref(uint16_t *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = vkc_f32_to_f16_1(in[i]);
}
void vkc_f16_to_f32_ref(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = vkc_f16_to_f32_1(in[i]);
}

/* --- fast
 * ------------------------------------------------------------------------------
 */
#define VKC_SIMD_BODY "cpu/convert_simd.h" /* cvt_f32_bf16_*, cvt_bf16_f32_*, ..._f16_* */
#include "cpu/simd_each.h"

#ifdef VKC_X86
#include <cpuid.h>

/* VCVTNEPS2BF16: 16 at a time; the reference gives the same bits for the rest.
 */
__attribute__((target("avx512f,avx512bf16"))) static void
cvt_f32_bf16_native(uint16_t *o, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
        _mm256_storeu_si256((__m256i *)(o + i), (__m256i)h);
    }
    vkc_f32_to_bf16_ref(o + i, x + i, n - i);
}
#endif

unsigned vkc_cvt_features(vkc_isa isa) {
    unsigned f = 0;
#ifdef VKC_X86
    __builtin_cpu_init();
    /* the ISAs vkc_cpu_isa checks, up to isa; F16C and AVX512-BF16 besides */
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa >= VKC_ISA_AVX2 && avx2) f |= VKC_CVT_AVX2;
    if (isa >= VKC_ISA_AVX512 && __builtin_cpu_supports("avx512f")) f |= VKC_CVT_AVX512;
    /* cpuid itself: older compilers' __builtin_cpu_supports know neither name. The OS saves
     * the registers they use: avx2 and avx512f above checked XCR0. */
    unsigned a = 0, b = 0, c = 0, d = 0;
    if ((f & VKC_CVT_AVX2) && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)))
        f |= VKC_CVT_F16C; /* CPUID.1:ECX.F16C[bit 29] */
    if ((f & VKC_CVT_AVX512) && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)))
        f |= VKC_CVT_BF16; /* CPUID.(EAX=7,ECX=1):EAX.AVX512_BF16[bit 5] */
#else
    (void)isa;
#endif
    return f;
}

void vkc_f32_to_bf16(uint16_t *out, const float *in, size_t n, unsigned feat) {
#ifdef VKC_X86
    if ((feat & (VKC_CVT_BF16 | VKC_CVT_AVX512)) == (VKC_CVT_BF16 | VKC_CVT_AVX512)) {
        cvt_f32_bf16_native(out, in, n);
        return;
    }
    if (feat & VKC_CVT_AVX512) {
        cvt_f32_bf16_avx512(out, in, n);
        return;
    }
    if (feat & VKC_CVT_AVX2) {
        cvt_f32_bf16_avx2(out, in, n);
        return;
    }
#endif
    (void)feat;
    vkc_f32_to_bf16_ref(out, in, n);
}

void vkc_bf16_to_f32(float *out, const uint16_t *in, size_t n, unsigned feat) {
#ifdef VKC_X86
    if (feat & VKC_CVT_AVX512) {
        cvt_bf16_f32_avx512(out, in, n);
        return;
    }
    if (feat & VKC_CVT_AVX2) {
        cvt_bf16_f32_avx2(out, in, n);
        return;
    }
#endif
    (void)feat;
    vkc_bf16_to_f32_ref(out, in, n);
}

void vkc_f32_to_f16(uint16_t *out, const float *in, size_t n, unsigned feat) {
#ifdef VKC_X86
    if (feat & VKC_CVT_AVX512) {
        cvt_f32_f16_avx512(out, in, n);
        return;
    }
    if ((feat & (VKC_CVT_AVX2 | VKC_CVT_F16C)) == (VKC_CVT_AVX2 | VKC_CVT_F16C)) {
        cvt_f32_f16_avx2(out, in, n);
        return;
    }
#endif
    (void)feat;
    vkc_f32_to_f16_ref(out, in, n);
}

void vkc_f16_to_f32(float *out, const uint16_t *in, size_t n, unsigned feat) {
#ifdef VKC_X86
    if (feat & VKC_CVT_AVX512) {
        cvt_f16_f32_avx512(out, in, n);
        return;
    }
    if ((feat & (VKC_CVT_AVX2 | VKC_CVT_F16C)) == (VKC_CVT_AVX2 | VKC_CVT_F16C)) {
        cvt_f16_f32_avx2(out, in, n);
        return;
    }
#endif
    (void)feat;
    vkc_f16_to_f32_ref(out, in, n);
}

#define CVT_BLOCK 65536 /* elements a thread converts at a time */

void vkc_convert_serial(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n,
                        unsigned feat) {
    if (src_dtype == 0 && dst_dtype == 1) vkc_f32_to_bf16(dst, src, n, feat);
    else if (src_dtype == 0 && dst_dtype == 2) vkc_f32_to_f16(dst, src, n, feat);
    else if (src_dtype == 1 && dst_dtype == 0) vkc_bf16_to_f32(dst, src, n, feat);
    else if (src_dtype == 2 && dst_dtype == 0) vkc_f16_to_f32(dst, src, n, feat);
    else memcpy(dst, src, n * sizeof(uint16_t));
}

void vkc_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n,
                 unsigned feat, int nt) {
    long blocks = (long)((n + CVT_BLOCK - 1) / CVT_BLOCK);
    size_t dsz = dst_dtype == 0 ? 4 : 2, ssz = src_dtype == 0 ? 4 : 2; /* bytes an element */
    VKA_OMP_FOR(nt, blocks > 1)
    for (long bl = 0; bl < blocks; bl++) {
        size_t lo = (size_t)bl * CVT_BLOCK, m = lo + CVT_BLOCK < n ? CVT_BLOCK : n - lo;
        vkc_convert_serial((char *)dst + lo * dsz, dst_dtype, (const char *)src + lo * ssz,
                           src_dtype, m, feat);
    }
}
