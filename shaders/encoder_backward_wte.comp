#version 450
#extension GL_GOOGLE_include_directive : require
// dwte (Vp, C) += dout (B, T, C) rows gathered by token, deterministically: workgroup j owns
// bucket j of the host-made grouping (vka_encoder_buckets: positions sorted by token) and sums
// its positions in order; invocations stride over the C channels. No two workgroups write the
// same row, so there are no atomics and no races.
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dwte { float dwte[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 2) readonly buffer Buckets { int buckets[]; };

// A dispatch adds the rows of dout for positions pos0 .. pos0 + pos_n - 1 (bound) into the
// vocabulary rows tok0 .. tok0 + tok_rows - 1 of dwte (bound); both split at the binding limit.
#include "pc/encoder.h"
VKA_PC_BLOCK(VKA_PC_ENCODER_WTE_VIEWS, VKA_PC_ENCODER_WTE)

void main() {
    uint j = vka_group_id();
    uint n_buckets = uint(buckets[pc.buckets_off]);
    if (j >= n_buckets || j >= pc.BT) return;
    uint starts = pc.buckets_off + 1u;             // BT + 1 entries
    uint toks = pc.buckets_off + pc.BT + 2u;       // BT entries
    uint order = pc.buckets_off + 2u * pc.BT + 2u; // BT entries
    uint tok = uint(buckets[toks + j]);
    if (tok >= pc.wte_rows || tok - pc.tok0 >= pc.tok_rows) return;
    uint lo = uint(buckets[starts + j]), hi = uint(buckets[starts + j + 1u]);
    for (uint c = gl_LocalInvocationID.x; c < pc.C; c += gl_WorkGroupSize.x) {
        float sum = 0.0;
        for (uint p = lo; p < hi; p++) {
            uint pos = uint(buckets[order + p]) - pc.pos0;
            if (pos < pc.pos_n) sum += dout[pc.dout_off + pos * pc.C + c];
        }
        dwte[pc.dwte_off + (tok - pc.tok0) * pc.C + c] += sum;
    }
}
