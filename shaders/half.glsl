// The 16-bit number formats in integer arithmetic (issue 19): the bits of src/cpu/convert.h's
// reference conversions, so that every device rounds as the CPU backend does whatever its own
// float conversions do. 16-bit views hold two elements a 32-bit word, element 2i in the low
// half. Used by convert.comp and by the ops that read or write 16-bit activations.
#ifndef VKA_HALF_GLSL
#define VKA_HALF_GLSL

// Round to nearest even; NaN quiet with its sign; a zero or subnormal f32 gives a signed zero
// (as VCVTNEPS2BF16); the largest finite values carry into Inf.
uint f32_to_bf16(uint u) {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x0040u;
    if ((u & 0x7F800000u) == 0u) return (u >> 16) & 0x8000u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// IEEE binary16, round to nearest even (as F16C's VCVTPS2PH): |x| >= 65520 gives Inf,
// subnormals rounded correctly, NaN quiet with its sign and top mantissa bits.
uint f32_to_f16(uint u) {
    uint sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | 0x7E00u | ((a >> 13) & 0x3FFu);
    if (a >= 0x477FF000u) return sign | 0x7C00u;
    if (a >= 0x38800000u) {
        uint m = a - (112u << 23);
        return sign | ((m + 0x0FFFu + ((m >> 13) & 1u)) >> 13);
    }
    if (a < 0x33000000u) return sign;
    uint e = a >> 23, mant = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
    uint q = mant >> shift, rem = mant & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q++;
    return sign | q;
}

// Exact; a signalling NaN comes back quiet (as VCVTPH2PS). Written without branches (a CPU-type
// driver runs every path of a branch whose condition differs across lanes): normal numbers
// rebias the exponent; a subnormal or zero m 2^-24 is float(m) * 2^-24, exact, and normal in
// f32; Inf and NaN keep their mantissa, a NaN made quiet.
uint f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16, em = h & 0x7FFFu, e = em >> 10, m = h & 0x3FFu;
    uint normal = (em << 13) + 0x38000000u; // exponent + 112
    uint sub = floatBitsToUint(float(em) * 5.9604644775390625e-8); // em = m < 1024 here
    uint special = 0x7F800000u | (m << 13) | (m != 0u ? 0x400000u : 0u);
    return sign | (e == 0u ? sub : e == 31u ? special : normal);
}

// A 16-bit element h (low 16 bits) of type f16 (else bf16) widened to f32, exactly.
float widen16_to(bool f16, uint h) { return uintBitsToFloat(f16 ? f16_to_f32(h) : h << 16); }

// x rounded to nearest even into a 16-bit element of type f16 (else bf16), in the low 16 bits.
uint narrow16_to(bool f16, float x) {
    uint u = floatBitsToUint(x);
    return f16 ? f32_to_f16(u) : f32_to_bf16(u);
}

// Element k of a 16-bit view bound as the uint array buf, widened (a macro: GLSL passes no
// buffers), and the four elements of the two words a, b.
#define WIDEN16_AT(f16, buf, k) widen16_to(f16, ((buf)[(k) >> 1] >> (((k) & 1u) << 4)) & 0xFFFFu)
vec4 widen16x4_to(bool f16, uint a, uint b) {
    return vec4(widen16_to(f16, a & 0xFFFFu), widen16_to(f16, a >> 16),
                widen16_to(f16, b & 0xFFFFu), widen16_to(f16, b >> 16));
}

#endif
