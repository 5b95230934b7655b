#version 450
#extension GL_GOOGLE_include_directive : require
// GELU, tanh form (Hendrycks & Gimpel 2016), as GPT-2 (evaluated as in gelu.glsl):
//   out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#include "common.glsl"
#include "gelu.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };

// Same block as every elementwise op (pc_binary in vk_ops_elementwise.c); third offset unused.
layout(push_constant) uniform PC {
    uint out_off, inp_off, unused_off;
    uint N;
} pc;

void main() {
    uint i = vka_global_id();
    if (i >= pc.N) return;
    out_[pc.out_off + i] = gelu(inp[pc.inp_off + i]);
}
