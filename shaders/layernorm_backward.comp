#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalisation backward, the input gradient (llm.c layernorm_backward), per row n:
//   norm = (x - mean) * rstd, g = weight * dout,
//   dinp += (g - mean(g) - norm * mean(g * norm)) * rstd.
// dweight and dbias are column sums over rows: layernorm_backward_params.comp.
// Row layout and reductions: rowreduce.glsl.
//
// vka:texel-variant: also built with VKA_TEXEL defined (VKA_SHADER_LAYERNORM_BACKWARD_TEXEL):
// the CPU-type variant only (one invocation per row), for C and every offset a multiple of 4
// on devices with texel_operands (src/vk/vk_internal.h). It reads dout, inp and weight as vec4
// texels (bindings 12, 13, 14 over bindings 1, 2, 3) and adds to dinp as vec4s.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 2) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 3) readonly buffer Weight { float weight[]; };
layout(set = 0, binding = 4) readonly buffer Mean { float mean_[]; };
layout(set = 0, binding = 5) readonly buffer Rstd { float rstd_[]; };

#include "pc/layernorm.h"
VKA_PC_BLOCK(VKA_PC_LAYERNORM_BACKWARD_VIEWS, VKA_PC_LAYERNORM_ROWS)

#ifdef VKA_TEXEL
layout(set = 0, binding = 0) buffer Dinp4 { vec4 dinp4[]; };
layout(set = 0, binding = 12) uniform samplerBuffer dout_tex;
layout(set = 0, binding = 13) uniform samplerBuffer inp_tex;
layout(set = 0, binding = 14) uniform samplerBuffer weight_tex;

void main() {
    uint n = seg_row();
    if (n >= pc.N) return;
    uint C4 = pc.C >> 2;
    float m = mean_[pc.mean_off + n], s = rstd_[pc.rstd_off + n];
    int g0 = int((pc.dout_off + n * pc.C) >> 2), x0 = int((pc.inp_off + n * pc.C) >> 2);
    int w0 = int(pc.weight_off >> 2);

    // (sum g, sum g * norm) per component (Kahan), then the four components added
    vec4 sg = vec4(0.0), sgn = vec4(0.0), cg = vec4(0.0), cgn = vec4(0.0);
    for (int c = 0; c < int(C4); c++) {
        vec4 g = texelFetch(weight_tex, w0 + c) * texelFetch(dout_tex, g0 + c);
        vec4 norm = (texelFetch(inp_tex, x0 + c) - m) * s;
        KAHAN_ADD(vec4, sg, cg, g)
        KAHAN_ADD(vec4, sgn, cgn, g * norm)
    }
    float mg = ((sg.x + sg.y) + (sg.z + sg.w)) / float(pc.C);
    float mgn = ((sgn.x + sgn.y) + (sgn.z + sgn.w)) / float(pc.C);

    uint d0 = (pc.dinp_off + n * pc.C) >> 2;
    for (int c = 0; c < int(C4); c++) {
        vec4 g = texelFetch(weight_tex, w0 + c) * texelFetch(dout_tex, g0 + c);
        vec4 norm = (texelFetch(inp_tex, x0 + c) - m) * s;
        dinp4[d0 + uint(c)] += (g - mg - norm * mgn) * s;
    }
}
#else
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
#endif
