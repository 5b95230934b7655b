#version 450
#extension GL_GOOGLE_include_directive : require
// Heads side by side (llm.c unpermute_kernel): inp (B, NH, T, HS) -> out (B, T, C).
// One invocation per output element, so writes are contiguous.
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };

#include "pc/permute.h"
VKA_PC_BLOCK(VKA_PC_UNPERMUTE_FORWARD_VIEWS, VKA_PC_PERMUTE)

void main() {
    uint i = vka_global_id();
    uint C = pc.NH_all * pc.HS, W = pc.NH * pc.HS;
    if (i >= pc.B * pc.T * W) return;
    // i indexes (b, t, c) of the block of out, c = h * HS + d (heads h0 .. h0 + NH - 1)
    uint c = i % W;
    uint t = (i / W) % pc.T;
    uint b = i / (W * pc.T);
    uint h = c / pc.HS, d = c % pc.HS;
    out_[pc.out_off + (b * pc.T_all + t) * C + pc.h0 * pc.HS + c] =
        inp[pc.inp_off + ((b * pc.NH_all + h) * pc.T_all + t) * pc.HS + d];
}
