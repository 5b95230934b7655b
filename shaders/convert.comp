#version 450
#extension GL_GOOGLE_include_directive : require
// dst[i] = src[i] for i < N, converted (the backend's convert op, src/backend.h): the bits of
// src/cpu/convert.h's reference conversions, in integer arithmetic, so that every device gives
// the CPU backend's bits whatever its float conversion rounding. 16-bit views hold two elements
// a 32-bit word (element 2i in the low half); one invocation per word of the 16-bit side. An odd
// N leaves the high half of the 16-bit dst's last word as it was.
#include "common.glsl"

// 0: f32 -> bf16, 1: f32 -> fp16, 2: bf16 -> f32, 3: fp16 -> f32, 4: 16-bit copy
layout(constant_id = 1) const uint MODE = 0u;

layout(set = 0, binding = 0) buffer Dst { uint dst_[]; };
layout(set = 0, binding = 1) readonly buffer Src { uint src_[]; };

#include "pc/convert.h"
VKA_PC_BLOCK(VKA_PC_CONVERT_VIEWS, VKA_PC_CONVERT)

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

// Exact; a signalling NaN comes back quiet (as VCVTPH2PS).
uint f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 31u) return sign | 0x7F800000u | (m << 13) | (m != 0u ? 0x400000u : 0u);
    if (e != 0u) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0u) return sign;
    uint msb = uint(findMSB(m)), shift = 10u - msb; // subnormal m 2^-24: normalise
    return sign | ((103u + msb) << 23) | (((m << shift) & 0x3FFu) << 13);
}

uint narrow(uint u) { return MODE == 0u ? f32_to_bf16(u) : f32_to_f16(u); }
uint widen(uint h) { return MODE == 2u ? h << 16 : f16_to_f32(h); }

void main() {
    uint w = vka_global_id();
    if (w >= (pc.N + 1u) >> 1) return;
    bool pair = 2u * w + 1u < pc.N; // both halves of word w are elements
    if (MODE <= 1u) {
        uint lo = narrow(src_[pc.src_off + 2u * w]);
        uint hi = pair ? narrow(src_[pc.src_off + 2u * w + 1u]) : dst_[pc.dst_off + w] >> 16;
        dst_[pc.dst_off + w] = lo | (hi << 16);
    } else if (MODE <= 3u) {
        uint word = src_[pc.src_off + w];
        dst_[pc.dst_off + 2u * w] = widen(word & 0xFFFFu);
        if (pair) dst_[pc.dst_off + 2u * w + 1u] = widen(word >> 16);
    } else {
        uint word = src_[pc.src_off + w];
        dst_[pc.dst_off + w] =
            pair ? word : (word & 0xFFFFu) | (dst_[pc.dst_off + w] & 0xFFFF0000u);
    }
}
