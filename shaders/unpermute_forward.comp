#version 450
#extension GL_GOOGLE_include_directive : require
// Heads side by side (llm.c unpermute_kernel): inp (B, NH, T, HS) -> out (B, T, C).
// One invocation per output element, so writes are contiguous.
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };

layout(push_constant) uniform PC {
    uint out_off, inp_off, unused_off2, unused_off3; // pc_permute: four offset slots
    uint B, T, NH, HS;
} pc;

void main() {
    uint i = vka_global_id();
    uint C = pc.NH * pc.HS;
    if (i >= pc.B * pc.T * C) return;
    // i indexes (b, t, c) of out, c = h * HS + d
    uint c = i % C;
    uint t = (i / C) % pc.T;
    uint b = i / (C * pc.T);
    uint h = c / pc.HS, d = c % pc.HS;
    out_[pc.out_off + i] = inp[pc.inp_off + ((b * pc.NH + h) * pc.T + t) * pc.HS + d];
}
