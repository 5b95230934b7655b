#version 450
#extension GL_GOOGLE_include_directive : require
// Bias gradient of a linear layer: dbias[o] += sum_n dout[n, o], dout (N, OC).
// Column layout and reduction (deterministic, no scratch): colreduce.glsl.
#include "common.glsl"
#include "colreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) buffer Dbias { float dbias[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };

// pc_bias_backward in src/vk/vk_ops_reduce.c
layout(push_constant) uniform PC {
    uint dbias_off, dout_off;
    uint N, OC;
} pc;

uint o; // this invocation's column

float element(uint n) { return dout[pc.dout_off + n * pc.OC + o]; }

void main() {
    o = col_index();
    uint rows = o < pc.OC ? pc.N : 0u;
    float acc = 0.0;
    UNROLLED_SUM(float, acc, element, col_row_lane(), rows, RL)
    acc = col_reduce(vec2(acc, 0.0)).x;
    if (o < pc.OC && col_row_lane() == 0u) dbias[pc.dbias_off + o] += acc;
}
