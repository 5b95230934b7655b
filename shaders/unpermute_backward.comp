#version 450
#extension GL_GOOGLE_include_directive : require
// Backward of unpermute: dinp (B, NH, T, HS) += dout (B, T, C) rearranged.
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };

#include "pc/permute.h"
VKA_PC_BLOCK(VKA_PC_UNPERMUTE_BACKWARD_VIEWS, VKA_PC_PERMUTE)

void main() {
    uint i = vka_global_id();
    uint C = pc.NH_all * pc.HS, W = pc.NH * pc.HS;
    if (i >= pc.B * pc.T * W) return;
    uint c = i % W;
    uint t = (i / W) % pc.T;
    uint b = i / (W * pc.T);
    uint h = c / pc.HS, d = c % pc.HS;
    dinp[pc.dinp_off + ((b * pc.NH_all + h) * pc.T_all + t) * pc.HS + d] +=
        dout[pc.dout_off + (b * pc.T_all + t) * C + pc.h0 * pc.HS + c];
}
