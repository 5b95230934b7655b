#version 450
#extension GL_GOOGLE_include_directive : require
// Backward of the multi-head split: dinp (B, T, 3C) += dq, dk, dv (B, NH, T, HS) put back.
// Every dinp element has exactly one source, so the accumulation is race-free.
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer DQ { float dq[]; };
layout(set = 0, binding = 2) readonly buffer DK { float dk[]; };
layout(set = 0, binding = 3) readonly buffer DV { float dv[]; };

#include "pc/permute.h"
VKA_PC_BLOCK(VKA_PC_PERMUTE_BACKWARD_VIEWS, VKA_PC_PERMUTE)

void main() {
    uint i = vka_global_id();
    uint C = pc.NH_all * pc.HS;
    if (i >= pc.B * pc.NH * pc.T * pc.HS) return;
    uint d = i % pc.HS;
    uint t = (i / pc.HS) % pc.T;
    uint h = (i / (pc.HS * pc.T)) % pc.NH;
    uint b = i / (pc.HS * pc.T * pc.NH);
    uint dst = pc.dinp_off + (b * pc.T_all + t) * 3u * C + (pc.h0 + h) * pc.HS + d;
    uint src = ((b * pc.NH_all + h) * pc.T_all + t) * pc.HS + d;
    dinp[dst] += dq[pc.dq_off + src];
    dinp[dst + C] += dk[pc.dk_off + src];
    dinp[dst + 2u * C] += dv[pc.dv_off + src];
}
