#version 450
#extension GL_GOOGLE_include_directive : require
// Heads side by side (llm.c unpermute_kernel): inp (B, NH, T, HS) -> out (B, T, C).
// One invocation per output element, so writes are contiguous.
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };

layout(push_constant) uniform PC {
    uint out_off, inp_off, unused_off2, unused_off3; // pc_permute: four offset slots
    uint B, T, NH, HS; // this dispatch's block: B sequences, T positions, NH heads (from h0)
    uint T_all, NH_all; // the whole tensors' T and NH (strides)
    uint h0;           // first head of the block
} pc;

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
