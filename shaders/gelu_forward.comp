#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// GELU, tanh form (Hendrycks & Gimpel 2016), as GPT-2 (evaluated as in gelu.glsl):
//   out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// vka:texel-variant: the CPU-type vec4 layout of elementwise.glsl, inp read through a texel view
// (binding 12) in the VKA_TEXEL build.
// vka:texel16-variant: with 16-bit tensors, the CPU-type group layout of elementwise.glsl, inp
// read through a texel view of words (binding 12) in the VKA_TEXEL16 build.
#include "common.glsl"
#include "elementwise.glsl"
#include "gelu.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 0) writeonly buffer Out4 { vec4 out4[]; };
layout(set = 0, binding = 1) readonly buffer Inp4 { vec4 inp4[]; };
layout(set = 0, binding = 0) buffer OutW { uint out_w[]; }; // 16-bit views (T16)
layout(set = 0, binding = 1) readonly buffer InpW { uint inp_w[]; };
layout(set = 0, binding = 0) writeonly buffer OutW4 { uvec4 out_w4[]; };
layout(set = 0, binding = 1) readonly buffer InpW4 { uvec4 inp_w4[]; };
#if defined(VKA_TEXEL16)
layout(set = 0, binding = 12) uniform usamplerBuffer inp_tex;
#elif defined(VKA_TEXEL)
layout(set = 0, binding = 12) uniform samplerBuffer inp_tex;
#endif

// Same block as every elementwise op (pc_binary in vk_ops_elementwise.c); third offset unused.
#include "pc/elementwise.h"
VKA_PC_BLOCK(VKA_PC_GELU_FORWARD_VIEWS, VKA_PC_BINARY)

void main() {
    if (T16 != 0u && VEC4S != 0u) {
        [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
            uint q = vec4_index(r);
            if (q >= pc.N >> 3) return;
            vec4 lo, hi;
            VKA_LOAD8(1u, inp_tex, inp4, inp_w4, pc.inp_off, q, lo, hi);
            lo = vec4(gelu(lo.x), gelu(lo.y), gelu(lo.z), gelu(lo.w));
            hi = vec4(gelu(hi.x), gelu(hi.y), gelu(hi.z), gelu(hi.w));
            VKA_STORE8(0u, out4, out_w4, pc.out_off, q, lo, hi);
        }
        return;
    }
    if (T16 != 0u) {
        uint w = vka_global_id(), n2 = pair_count(w, pc.N);
        if (n2 == 0u) return;
        vec2 x = VKA_PAIR_LOAD(1u, inp, inp_w, pc.inp_off, w, n2);
        VKA_PAIR_STORE(0u, out_, out_w, pc.out_off, w, n2, vec2(gelu(x.x), gelu(x.y)));
        return;
    }
    if (VEC4S == 0u) {
        uint i = vka_global_id();
        if (i >= pc.N) return;
        out_[pc.out_off + i] = gelu(inp[pc.inp_off + i]);
        return;
    }
    [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
        uint q = vec4_index(r);
        if (q >= pc.N >> 2) return;
        vec4 x = VKA_LOAD4(inp_tex, inp4, (pc.inp_off >> 2) + q);
        out4[(pc.out_off >> 2) + q] = vec4(gelu(x.x), gelu(x.y), gelu(x.z), gelu(x.w));
    }
}
