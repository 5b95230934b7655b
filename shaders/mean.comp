#version 450
#extension GL_GOOGLE_include_directive : require
// out[0] = sum(inp[0:N]) / N, WRITES. One workgroup, as one row of N (rowreduce.glsl with
// SEG = WG): each invocation sums a fixed strided subset, then a fixed-order combine, so the
// result is the same on every run.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };

#include "pc/reduce.h"
VKA_PC_BLOCK(VKA_PC_MEAN_VIEWS, VKA_PC_MEAN)

float element(uint i) { return inp[pc.inp_off + i]; }

void main() {
    float sum = 0.0;
    UNROLLED_SUM(float, sum, element, seg_lane(), pc.N, SEG)
    sum = seg_sum(sum);
    if (gl_LocalInvocationID.x == 0u)
        out_[pc.out_off] = (pc.accumulate != 0u ? out_[pc.out_off] : 0.0) + sum / pc.total;
}
