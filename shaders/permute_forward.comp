#version 450
#extension GL_GOOGLE_include_directive : require
// Multi-head split (llm.c permute_kernel): qkv inp (B, T, 3C) -> q, k, v (B, NH, T, HS), C = NH*HS.
// One invocation per element of q (and the same element of k and v).
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Q { float q[]; };
layout(set = 0, binding = 1) writeonly buffer K { float k[]; };
layout(set = 0, binding = 2) writeonly buffer V { float v[]; };
layout(set = 0, binding = 3) readonly buffer Inp { float inp[]; };

layout(push_constant) uniform PC {
    uint q_off, k_off, v_off, inp_off;
    uint B, T, NH, HS;
} pc;

void main() {
    uint i = vka_global_id();
    uint C = pc.NH * pc.HS;
    if (i >= pc.B * pc.T * C) return;
    // i indexes (b, h, t, d) of q
    uint d = i % pc.HS;
    uint t = (i / pc.HS) % pc.T;
    uint h = (i / (pc.HS * pc.T)) % pc.NH;
    uint b = i / (pc.HS * pc.T * pc.NH);
    uint src = pc.inp_off + (b * pc.T + t) * 3u * C + h * pc.HS + d;
    q[pc.q_off + i] = inp[src];
    k[pc.k_off + i] = inp[src + C];
    v[pc.v_off + i] = inp[src + 2u * C];
}
