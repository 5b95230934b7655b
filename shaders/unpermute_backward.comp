#version 450
#extension GL_GOOGLE_include_directive : require
// Backward of unpermute: dinp (B, NH, T, HS) += dout (B, T, C) rearranged.
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };

layout(push_constant) uniform PC {
    uint dinp_off, dout_off, unused_off2, unused_off3; // pc_permute: four offset slots
    uint B, T, NH, HS;
} pc;

void main() {
    uint i = vka_global_id();
    uint C = pc.NH * pc.HS;
    if (i >= pc.B * pc.T * C) return;
    uint c = i % C;
    uint t = (i / C) % pc.T;
    uint b = i / (C * pc.T);
    uint h = c / pc.HS, d = c % pc.HS;
    dinp[pc.dinp_off + ((b * pc.NH + h) * pc.T + t) * pc.HS + d] += dout[pc.dout_off + i];
}
