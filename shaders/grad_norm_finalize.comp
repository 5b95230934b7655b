#version 450
#extension GL_GOOGLE_include_directive : require
// Global gradient norm, step 2 (one workgroup), WRITES:
//   out[0] = norm of the partial norms (nrm2.glsl), out[1] = clip scale
//   min(1, max_norm / (norm + 1e-6)), 1 when max_norm <= 0 (as PyTorch's clip_grad_norm_);
//   0 when the norm is NaN or inf (a NaN or inf gradient): adamw.comp then changes nothing.
//   Loss scaling (has_hyper): the gradients hold S times their value and hyper[6] = 1/S (a
//   power of two; 0 reads as 1): the last block writes the unscaled norm, the clip scale
//   computed from it, times 1/S (src/backend.h's grad_norm).
// Fixed-order sum (rowreduce.glsl with SEG = WG): deterministic.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"
#include "nrm2.glsl"

layout(set = 0, binding = 0) buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Partials { float partials[]; };
layout(set = 0, binding = 2) readonly buffer Hyper { float hyper[]; };

#include "pc/reduce.h"
VKA_PC_BLOCK(VKA_PC_NORM_FINALIZE_VIEWS, VKA_PC_NORM_FINALIZE)

vec4 partial(uint i) { return nrm2_term(partials[pc.partials_off + i]); }

void main() {
    vec4 sum = vec4(0.0);
    UNROLLED_SUM(vec4, sum, partial, seg_lane(), pc.n_partials, SEG)
    sum = vec4(seg_reduce(sum.xy, RED_SUM), seg_reduce(sum.zw, RED_SUM));
    if (gl_LocalInvocationID.x != 0u) return;
    if (pc.accumulate != 0u) sum += nrm2_term(out_[pc.out_off]);
    float norm = nrm2_result(sum);
    if (pc.last == 0u) {
        out_[pc.out_off] = norm;
        return;
    }
    float u = pc.has_hyper != 0u ? hyper[pc.hyper_off + 6u] : 1.0;
    if (u == 0.0) u = 1.0;
    norm *= u;
    out_[pc.out_off] = norm;
    float scale = pc.max_norm > 0.0 ? min(1.0, pc.max_norm / (norm + 1e-6)) : 1.0;
    out_[pc.out_off + 1u] = isnan(norm) || isinf(norm) ? 0.0 : scale * u;
}
