#version 450
#extension GL_GOOGLE_include_directive : require
// Softmax backward (src/backend.h): with out the forward's output,
//   dinp[r, k] += scale * out[r, k] * (dout[r, k] - sum_j out[r, j] * dout[r, j]).
// Masked keys have out = 0 and get 0. Row layout and reductions: rowreduce.glsl.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 2) readonly buffer Out { float out_[]; };

#include "pc/softmax.h"
VKA_PC_BLOCK(VKA_PC_SOFTMAX_BACKWARD_VIEWS, VKA_PC_SOFTMAX_BACKWARD)

void main() {
    uint r = seg_row(), lane = seg_lane();
    if (SEG == 1u && r >= pc.R) return;
    uint len = r < pc.R ? pc.Tk : 0u;
    uint row = r * pc.Tk;

    float dot = 0.0, comp = 0.0;
    for (uint k = lane; k < len; k += SEG)
        KAHAN_ADD(float, dot, comp, out_[pc.out_off + row + k] * dout[pc.dout_off + row + k])
    dot = seg_sum(dot);

    for (uint k = lane; k < len; k += SEG) {
        float o = out_[pc.out_off + row + k];
        dinp[pc.dinp_off + row + k] += pc.scale * o * (dout[pc.dout_off + row + k] - dot);
    }
}
