#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalisation backward, the parameter gradients (llm.c layernorm_backward), per column c:
//   dweight[c] += sum_n dout[n, c] * (inp[n, c] - mean[n]) * rstd[n];  dbias[c] += sum_n dout[n, c].
// Column layout and reduction (deterministic, no scratch): colreduce.glsl.
#include "common.glsl"
#include "colreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) buffer Dweight { float dweight[]; };
layout(set = 0, binding = 1) buffer Dbias { float dbias[]; };
layout(set = 0, binding = 2) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 3) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 4) readonly buffer Mean { float mean_[]; };
layout(set = 0, binding = 5) readonly buffer Rstd { float rstd_[]; };

// pc_layernorm_params in src/vk/vk_ops_layernorm.c
layout(push_constant) uniform PC {
    uint dweight_off, dbias_off, dout_off, inp_off, mean_off, rstd_off;
    uint N, C;
} pc;

uint c; // this invocation's column

// Row n's terms of (dweight[c], dbias[c]).
vec2 terms(uint n) {
    float d = dout[pc.dout_off + n * pc.C + c];
    float norm = (inp[pc.inp_off + n * pc.C + c] - mean_[pc.mean_off + n]) * rstd_[pc.rstd_off + n];
    return vec2(d * norm, d);
}

void main() {
    c = col_index();
    uint rows = c < pc.C ? pc.N : 0u;
    vec2 acc = vec2(0.0);
    UNROLLED_SUM(vec2, acc, terms, col_row_lane(), rows, RL)
    acc = col_reduce(acc);
    if (c < pc.C && col_row_lane() == 0u) {
        dweight[pc.dweight_off + c] += acc.x;
        dbias[pc.dbias_off + c] += acc.y;
    }
}
