#version 450
#extension GL_GOOGLE_include_directive : require
// Token + position embedding: out (B, T, C) = wte[tokens[b, t]] + wpe[t].
// A token id outside wte's rows yields NaN (visible) instead of an out-of-bounds read.
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Tokens { int tokens[]; };
layout(set = 0, binding = 2) readonly buffer Wte { float wte[]; };
layout(set = 0, binding = 3) readonly buffer Wpe { float wpe[]; };

layout(push_constant) uniform PC {
    uint out_off, tokens_off, wte_off, wpe_off;
    uint B, T, C;
    uint wte_rows; // Vp
} pc;

void main() {
    uint i = vka_global_id();
    if (i >= pc.B * pc.T * pc.C) return;
    uint c = i % pc.C;
    uint bt = i / pc.C;
    uint t = bt % pc.T;
    int tok = tokens[pc.tokens_off + bt];
    float e = (tok >= 0 && uint(tok) < pc.wte_rows) ? wte[pc.wte_off + uint(tok) * pc.C + c]
                                                     : uintBitsToFloat(0x7fc00000u);
    out_[pc.out_off + i] = e + wpe[pc.wpe_off + t * pc.C + c];
}
