#version 450
#extension GL_GOOGLE_include_directive : require
// Global gradient norm, step 2 (one workgroup), WRITES:
//   out[0] = sqrt(sum of the partial sums of squares), out[1] = clip scale
//   min(1, max_norm / (norm + 1e-6)), 1 when max_norm <= 0 (as PyTorch's clip_grad_norm_).
// Fixed-order sum (rowreduce.glsl with SEG = WG): deterministic.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Partials { float partials[]; };

// pc_norm_finalize in src/vk/vk_ops_reduce.c
layout(push_constant) uniform PC {
    uint out_off, partials_off;
    uint n_partials;
    float max_norm;
    uint accumulate; // a later block of partials split at the binding limit: add out[0] first
    uint last;       // the last block: turn the sum of squares in out[0] into the norm
} pc;

float partial(uint i) { return partials[pc.partials_off + i]; }

void main() {
    float sum = 0.0;
    UNROLLED_SUM(float, sum, partial, seg_lane(), pc.n_partials, SEG)
    sum = seg_sum(sum);
    if (gl_LocalInvocationID.x != 0u) return;
    if (pc.accumulate != 0u) sum += out_[pc.out_off];
    if (pc.last == 0u) {
        out_[pc.out_off] = sum;
        return;
    }
    float norm = sqrt(sum);
    out_[pc.out_off] = norm;
    out_[pc.out_off + 1u] = pc.max_norm > 0.0 ? min(1.0, pc.max_norm / (norm + 1e-6)) : 1.0;
}
