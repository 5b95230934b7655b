#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalisation backward, the input gradient (llm.c layernorm_backward), per row n:
//   norm = (x - mean) * rstd, g = weight * dout,
//   dinp += (g - mean(g) - norm * mean(g * norm)) * rstd.
// dweight and dbias are column sums over rows: layernorm_backward_params.comp.
// Row layout and reductions: rowreduce.glsl.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 2) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 3) readonly buffer Weight { float weight[]; };
layout(set = 0, binding = 4) readonly buffer Mean { float mean_[]; };
layout(set = 0, binding = 5) readonly buffer Rstd { float rstd_[]; };

// pc_layernorm_backward in src/vk/vk_ops_layernorm.c
layout(push_constant) uniform PC {
    uint dinp_off, dout_off, inp_off, weight_off, mean_off, rstd_off;
    uint N, C;
} pc;

void main() {
    uint n = seg_row(), lane = seg_lane();
    if (SEG == 1u && n >= pc.N) return;
    bool live = n < pc.N;
    uint len = live ? pc.C : 0u;
    float m = live ? mean_[pc.mean_off + n] : 0.0;
    float s = live ? rstd_[pc.rstd_off + n] : 0.0;
    uint row = n * pc.C;

    vec2 sums = vec2(0.0), comp = vec2(0.0); // (sum g, sum g * norm)
    for (uint c = lane; c < len; c += SEG) {
        float g = weight[pc.weight_off + c] * dout[pc.dout_off + row + c];
        float norm = (inp[pc.inp_off + row + c] - m) * s;
        KAHAN_ADD(vec2, sums, comp, vec2(g, g * norm))
    }
    sums = seg_reduce(sums, RED_SUM) / float(pc.C);

    for (uint c = lane; c < len; c += SEG) {
        float g = weight[pc.weight_off + c] * dout[pc.dout_off + row + c];
        float norm = (inp[pc.inp_off + row + c] - m) * s;
        dinp[pc.dinp_off + row + c] += (g - sums.x - norm * sums.y) * s;
    }
}
