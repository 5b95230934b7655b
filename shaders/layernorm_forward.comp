#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalisation (Ba et al. 2016) over rows of C, eps 1e-5, as llm.c layernorm_forward:
//   mean = sum(x) / C; var = sum((x - mean)^2) / C (second pass, never E[x^2] - E[x]^2);
//   rstd = 1 / sqrt(var + eps); out = (x - mean) * rstd * weight + bias.
// Saves mean (N) and rstd (N) for the backward pass. Row layout and reductions: rowreduce.glsl.
//
// vka:texel-variant: also built with VKA_TEXEL defined (VKA_SHADER_LAYERNORM_FORWARD_TEXEL):
// the CPU-type variant only (one invocation per row), for C and every offset a multiple of 4
// on devices with texel_operands (src/vk/vk_internal.h). It reads inp, weight and bias as vec4
// texels (bindings 12, 13, 14 over bindings 3, 4, 5) and writes out as vec4: on llvmpipe one
// gather per vec4 instead of a loop over the lanes per float.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) writeonly buffer Mean { float mean_[]; };
layout(set = 0, binding = 2) writeonly buffer Rstd { float rstd_[]; };
layout(set = 0, binding = 3) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 4) readonly buffer Weight { float weight[]; };
layout(set = 0, binding = 5) readonly buffer Bias { float bias[]; };

#include "pc/layernorm.h"
VKA_PC_BLOCK(VKA_PC_LAYERNORM_FORWARD_VIEWS, VKA_PC_LAYERNORM_ROWS)

#ifdef VKA_TEXEL
layout(set = 0, binding = 0) writeonly buffer Out4 { vec4 out4[]; };
layout(set = 0, binding = 12) uniform samplerBuffer inp_tex;
layout(set = 0, binding = 13) uniform samplerBuffer weight_tex;
layout(set = 0, binding = 14) uniform samplerBuffer bias_tex;

// Row n as C / 4 vec4s; the two sums per component (Kahan), then the four components added:
// a fixed order, within the CPU reference's tolerance of the scalar walk.
void main() {
    uint n = seg_row();
    if (n >= pc.N) return;
    uint C4 = pc.C >> 2;
    int x0 = int((pc.inp_off + n * pc.C) >> 2);

    vec4 sum = vec4(0.0), comp = vec4(0.0);
    for (int c = 0; c < int(C4); c++) KAHAN_ADD(vec4, sum, comp, texelFetch(inp_tex, x0 + c))
    float m = ((sum.x + sum.y) + (sum.z + sum.w)) / float(pc.C);

    vec4 sq = vec4(0.0);
    comp = vec4(0.0);
    for (int c = 0; c < int(C4); c++) {
        vec4 d = texelFetch(inp_tex, x0 + c) - m;
        KAHAN_ADD(vec4, sq, comp, d * d)
    }
    float s = 1.0 / sqrt(((sq.x + sq.y) + (sq.z + sq.w)) / float(pc.C) + 1e-5);

    uint o0 = (pc.out_off + n * pc.C) >> 2;
    int w0 = int(pc.weight_off >> 2), b0 = int(pc.bias_off >> 2);
    for (int c = 0; c < int(C4); c++) {
        vec4 x = texelFetch(inp_tex, x0 + c);
        vec4 w = texelFetch(weight_tex, w0 + c), b = texelFetch(bias_tex, b0 + c);
        out4[o0 + uint(c)] = (x - m) * s * w + b;
    }
    mean_[pc.mean_off + n] = m;
    rstd_[pc.rstd_off + n] = s;
}
#else
void main() {
    uint n = seg_row(), lane = seg_lane();
    if (SEG == 1u && n >= pc.N) return;
    uint len = n < pc.N ? pc.C : 0u;
    uint x0 = pc.inp_off + n * pc.C;

    float sum = 0.0, comp = 0.0;
    for (uint c = lane; c < len; c += SEG) KAHAN_ADD(float, sum, comp, inp[x0 + c])
    float m = seg_sum(sum) / float(pc.C);

    float sq = 0.0;
    comp = 0.0;
    for (uint c = lane; c < len; c += SEG) {
        float d = inp[x0 + c] - m;
        KAHAN_ADD(float, sq, comp, d * d)
    }
    float s = 1.0 / sqrt(seg_sum(sq) / float(pc.C) + 1e-5);
    if (n >= pc.N) return;

    uint o0 = pc.out_off + n * pc.C;
    for (uint c = lane; c < len; c += SEG)
        out_[o0 + c] = (inp[x0 + c] - m) * s * weight[pc.weight_off + c] + bias[pc.bias_off + c];
    if (lane == 0u) {
        mean_[pc.mean_off + n] = m;
        rstd_[pc.rstd_off + n] = s;
    }
}
#endif
