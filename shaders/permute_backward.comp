#version 450
#extension GL_GOOGLE_include_directive : require
// Backward of the multi-head split: dinp (B, T, 3C) += dq, dk, dv (B, NH, T, HS) put back.
// Every dinp element has exactly one source, so the accumulation is race-free.
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer DQ { float dq[]; };
layout(set = 0, binding = 2) readonly buffer DK { float dk[]; };
layout(set = 0, binding = 3) readonly buffer DV { float dv[]; };

layout(push_constant) uniform PC {
    uint dinp_off, dq_off, dk_off, dv_off;
    uint B, T, NH, HS; // this dispatch's block: B sequences, T positions, NH heads (from h0)
    uint T_all, NH_all; // the whole tensors' T and NH (strides)
    uint h0;           // first head of the block
} pc;

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
