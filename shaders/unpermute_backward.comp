#version 450
#extension GL_GOOGLE_include_directive : require
// Backward of unpermute: dinp (B, NH, T, HS) += dout (B, T, C) rearranged.
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };

layout(push_constant) uniform PC {
    uint dinp_off, dout_off, unused_off2, unused_off3; // pc_permute: four offset slots
    uint B, T, NH, HS; // this dispatch's block: B sequences, T positions, NH heads (from h0)
    uint T_all, NH_all; // the whole tensors' T and NH (strides)
    uint h0;           // first head of the block
} pc;

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
