#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention backward, pass 1 of 3 (src/vk/vk_ops_attention.c): delta[b,h,t] =
// sum_d dout[b,h,t,d] * out[b,h,t,d], the row term of the softmax gradient
// (FlashAttention-2, Dao 2023, alg. 2). It is kept in dq's first element of the row,
// dq[b,h,t,0], which the dk/dv pass reads and the dq pass reads before it overwrites the row:
// the op needs no scratch tensor. One invocation per row, both variants.
#include "common.glsl"
#include "attention.glsl"

void main() {
    uint i = vka_global_id();
    if (i >= pc.B * pc.NH * pc.Tq) return;
    uint t = i % pc.Tq, bh = i / pc.Tq, b = bh / pc.NH, h = bh % pc.NH;
    uint orow = o_row(b, h, t), drow = do_row(b, h, t);
    float d = 0.0;
    [[unroll]] for (uint c = 0u; c < DV; c++) d += dot(ld_do(drow, c), ld_o(orow, c));
    dq_[dq_row(b, h, t)] = d;
}
