#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// dinp += gelu'(inp) * dout, the derivative of the tanh-form GELU (see gelu.glsl).
// vka:texel-variant: the CPU-type vec4 layout of elementwise.glsl, dinp, inp and dout read
// through texel views (bindings 12, 13, 14) in the VKA_TEXEL build.
// vka:texel16-variant: with 16-bit tensors, the CPU-type group layout of elementwise.glsl, the
// same through texel views of words in the VKA_TEXEL16 build.
#include "common.glsl"
#include "elementwise.glsl"
#include "gelu.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 2) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 0) buffer Dinp4 { vec4 dinp4[]; };
layout(set = 0, binding = 1) readonly buffer Inp4 { vec4 inp4[]; };
layout(set = 0, binding = 2) readonly buffer Dout4 { vec4 dout4[]; };
layout(set = 0, binding = 1) readonly buffer InpW { uint inp_w[]; }; // 16-bit views (T16)
layout(set = 0, binding = 2) readonly buffer DoutW { uint dout_w[]; };
layout(set = 0, binding = 1) readonly buffer InpW4 { uvec4 inp_w4[]; };
layout(set = 0, binding = 2) readonly buffer DoutW4 { uvec4 dout_w4[]; };
#if defined(VKA_TEXEL16)
layout(set = 0, binding = 12) uniform usamplerBuffer dinp_tex;
layout(set = 0, binding = 13) uniform usamplerBuffer inp_tex;
layout(set = 0, binding = 14) uniform usamplerBuffer dout_tex;
#elif defined(VKA_TEXEL)
layout(set = 0, binding = 12) uniform samplerBuffer dinp_tex;
layout(set = 0, binding = 13) uniform samplerBuffer inp_tex;
layout(set = 0, binding = 14) uniform samplerBuffer dout_tex;
#endif

#include "pc/elementwise.h"
VKA_PC_BLOCK(VKA_PC_GELU_BACKWARD_VIEWS, VKA_PC_BINARY)

void main() {
    if (T16 != 0u && VEC4S != 0u) { // dinp stays float32
        [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
            uint q = vec4_index(r);
            if (q >= pc.N >> 3) return;
            vec4 xlo, xhi, dlo, dhi;
            VKA_LOAD8(1u, inp_tex, inp4, inp_w4, pc.inp_off, q, xlo, xhi);
            VKA_LOAD8(2u, dout_tex, dout4, dout_w4, pc.dout_off, q, dlo, dhi);
            uint o = (pc.dinp_off >> 2) + 2u * q;
            vec4 acc_lo = VKA_LOAD4(dinp_tex, dinp4, o);
            vec4 acc_hi = VKA_LOAD4(dinp_tex, dinp4, o + 1u);
            vec4 glo = vec4(gelu_grad(xlo.x), gelu_grad(xlo.y), gelu_grad(xlo.z), gelu_grad(xlo.w));
            vec4 ghi = vec4(gelu_grad(xhi.x), gelu_grad(xhi.y), gelu_grad(xhi.z), gelu_grad(xhi.w));
            dinp4[o] = acc_lo + glo * dlo;
            dinp4[o + 1u] = acc_hi + ghi * dhi;
        }
        return;
    }
    if (T16 != 0u) { // dinp stays float32 (T16 bit 0 is never set)
        uint w = vka_global_id(), n2 = pair_count(w, pc.N);
        if (n2 == 0u) return;
        vec2 x = VKA_PAIR_LOAD(1u, inp, inp_w, pc.inp_off, w, n2);
        vec2 d = VKA_PAIR_LOAD(2u, dout, dout_w, pc.dout_off, w, n2);
        uint i = pc.dinp_off + 2u * w;
        dinp[i] += gelu_grad(x.x) * d.x;
        if (n2 == 2u) dinp[i + 1u] += gelu_grad(x.y) * d.y;
        return;
    }
    if (VEC4S == 0u) {
        uint i = vka_global_id();
        if (i >= pc.N) return;
        dinp[pc.dinp_off + i] += gelu_grad(inp[pc.inp_off + i]) * dout[pc.dout_off + i];
        return;
    }
    [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
        uint q = vec4_index(r);
        if (q >= pc.N >> 2) return;
        vec4 x = VKA_LOAD4(inp_tex, inp4, (pc.inp_off >> 2) + q);
        vec4 d = VKA_LOAD4(dout_tex, dout4, (pc.dout_off >> 2) + q);
        vec4 acc = VKA_LOAD4(dinp_tex, dinp4, (pc.dinp_off >> 2) + q);
        vec4 g = vec4(gelu_grad(x.x), gelu_grad(x.y), gelu_grad(x.z), gelu_grad(x.w));
        dinp4[(pc.dinp_off >> 2) + q] = acc + g * d;
    }
}
