#version 450
#extension GL_GOOGLE_include_directive : require
// Multi-head split (llm.c permute_kernel): qkv inp (B, T, 3C) -> q, k, v (B, NH, T, HS), C = NH*HS.
// One invocation per element of q (and the same element of k and v).
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Q { float q[]; };
layout(set = 0, binding = 1) writeonly buffer K { float k[]; };
layout(set = 0, binding = 2) writeonly buffer V { float v[]; };
layout(set = 0, binding = 3) readonly buffer Inp { float inp[]; };

#include "pc/permute.h"
VKA_PC_BLOCK(VKA_PC_PERMUTE_FORWARD_VIEWS, VKA_PC_PERMUTE)

void main() {
    uint i = vka_global_id();
    uint C = pc.NH_all * pc.HS;
    if (i >= pc.B * pc.NH * pc.T * pc.HS) return;
    // i indexes (b, h, t, d) of the block of q
    uint d = i % pc.HS;
    uint t = (i / pc.HS) % pc.T;
    uint h = (i / (pc.HS * pc.T)) % pc.NH;
    uint b = i / (pc.HS * pc.T * pc.NH);
    uint src = pc.inp_off + (b * pc.T_all + t) * 3u * C + (pc.h0 + h) * pc.HS + d;
    uint dst = ((b * pc.NH_all + h) * pc.T_all + t) * pc.HS + d;
    q[pc.q_off + dst] = inp[src];
    k[pc.k_off + dst] = inp[src + C];
    v[pc.v_off + dst] = inp[src + 2u * C];
}
