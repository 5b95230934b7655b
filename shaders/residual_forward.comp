#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// out = a + b over N elements (residual connection).
// vka:texel-variant: the CPU-type vec4 layout of elementwise.glsl, a and b read through texel
// views (bindings 12, 13) in the VKA_TEXEL build.
// vka:texel16-variant: with 16-bit tensors, the CPU-type group layout of elementwise.glsl, the
// same through texel views of words in the VKA_TEXEL16 build.
#include "common.glsl"
#include "elementwise.glsl"

layout(set = 0, binding = 0) buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer A { float a[]; };
layout(set = 0, binding = 2) readonly buffer B { float b[]; };
layout(set = 0, binding = 0) buffer Out4 { vec4 out4[]; };
layout(set = 0, binding = 1) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 2) readonly buffer B4 { vec4 b4[]; };
layout(set = 0, binding = 0) buffer OutW { uint out_w[]; }; // 16-bit views (T16)
layout(set = 0, binding = 1) readonly buffer AW { uint a_w[]; };
layout(set = 0, binding = 2) readonly buffer BW { uint b_w[]; };
layout(set = 0, binding = 0) buffer OutW4 { uvec4 out_w4[]; };
layout(set = 0, binding = 1) readonly buffer AW4 { uvec4 a_w4[]; };
layout(set = 0, binding = 2) readonly buffer BW4 { uvec4 b_w4[]; };
#if defined(VKA_TEXEL16)
layout(set = 0, binding = 12) uniform usamplerBuffer a_tex;
layout(set = 0, binding = 13) uniform usamplerBuffer b_tex;
#elif defined(VKA_TEXEL)
layout(set = 0, binding = 12) uniform samplerBuffer a_tex;
layout(set = 0, binding = 13) uniform samplerBuffer b_tex;
#endif

#include "pc/elementwise.h"
VKA_PC_BLOCK(VKA_PC_RESIDUAL_FORWARD_VIEWS, VKA_PC_BINARY)

void main() {
    if (T16 != 0u && VEC4S != 0u) {
        [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
            uint q = vec4_index(r);
            if (q >= pc.N >> 3) return;
            vec4 alo, ahi, blo, bhi;
            VKA_LOAD8(1u, a_tex, a4, a_w4, pc.a_off, q, alo, ahi);
            VKA_LOAD8(2u, b_tex, b4, b_w4, pc.b_off, q, blo, bhi);
            vec4 lo = alo + blo, hi = ahi + bhi;
            VKA_STORE8(0u, out4, out_w4, pc.out_off, q, lo, hi);
        }
        return;
    }
    if (T16 != 0u) {
        uint w = vka_global_id(), n2 = pair_count(w, pc.N);
        if (n2 == 0u) return;
        vec2 x = VKA_PAIR_LOAD(1u, a, a_w, pc.a_off, w, n2);
        vec2 y = VKA_PAIR_LOAD(2u, b, b_w, pc.b_off, w, n2);
        VKA_PAIR_STORE(0u, out_, out_w, pc.out_off, w, n2, x + y);
        return;
    }
    if (VEC4S == 0u) {
        uint i = vka_global_id();
        if (i >= pc.N) return;
        out_[pc.out_off + i] = a[pc.a_off + i] + b[pc.b_off + i];
        return;
    }
    [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
        uint q = vec4_index(r);
        if (q >= pc.N >> 2) return;
        out4[(pc.out_off >> 2) + q] = VKA_LOAD4(a_tex, a4, (pc.a_off >> 2) + q) +
                                      VKA_LOAD4(b_tex, b4, (pc.b_off >> 2) + q);
    }
}
