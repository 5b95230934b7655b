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
//
// 16-bit dout, inp and/or weight (bf16 or fp16, specialization constants DOUT16, INP16, W16, in
// both builds, since the 16-bit call must take the build the f32 call takes: the texel build sums
// in another order): each element is widened exactly where it is read (a texel build's 16-bit
// view as words through its storage binding), the arithmetic is the f32 kernel's, so dinp is
// the f32 op's bits on the widened inputs.
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

#include "half.glsl"

// vka_dtype of dout, inp and weight: 0 f32 (the defaults: the f32 kernel), 1 bf16, 2 fp16. A
// 16-bit view holds two elements a word, element 2i in the low half; its offsets count words.
layout(constant_id = 3) const uint DOUT16 = 0u;
layout(constant_id = 4) const uint INP16 = 0u;
layout(constant_id = 5) const uint W16 = 0u;

layout(set = 0, binding = 1) readonly buffer Dout16 { uint dout16[]; };
layout(set = 0, binding = 2) readonly buffer Inp16 { uint inp16[]; };
layout(set = 0, binding = 3) readonly buffer Weight16 { uint weight16[]; };

// Element k (of the bound range) of a 16-bit view, and the 4 from an even k, in f32.
#define LN_WIDEN1(buf, T16, k) WIDEN16_AT(T16 == 2u, buf, k)
#define LN_WIDEN4(buf, T16, k) widen16x4_to(T16 == 2u, buf[(k) >> 1], buf[((k) >> 1) + 1u])

#ifdef VKA_TEXEL
layout(set = 0, binding = 0) buffer Dinp4 { vec4 dinp4[]; };
layout(set = 0, binding = 12) uniform samplerBuffer dout_tex;
layout(set = 0, binding = 13) uniform samplerBuffer inp_tex;
layout(set = 0, binding = 14) uniform samplerBuffer weight_tex;

// vec4 c of row n's dout, inp and of weight, in f32 (16-bit: C a multiple of 4, rows start at
// even elements)
vec4 dout4(uint n, int c) {
    if (DOUT16 == 0u) return texelFetch(dout_tex, int((pc.dout_off + n * pc.C) >> 2) + c);
    return LN_WIDEN4(dout16, DOUT16, 2u * pc.dout_off + n * pc.C + 4u * uint(c));
}
vec4 inp4(uint n, int c) {
    if (INP16 == 0u) return texelFetch(inp_tex, int((pc.inp_off + n * pc.C) >> 2) + c);
    return LN_WIDEN4(inp16, INP16, 2u * pc.inp_off + n * pc.C + 4u * uint(c));
}
vec4 weight4(int c) {
    if (W16 == 0u) return texelFetch(weight_tex, int(pc.weight_off >> 2) + c);
    return LN_WIDEN4(weight16, W16, 2u * pc.weight_off + 4u * uint(c));
}

void main() {
    uint n = seg_row();
    if (n >= pc.N) return;
    uint C4 = pc.C >> 2;
    float m = mean_[pc.mean_off + n], s = rstd_[pc.rstd_off + n];

    // (sum g, sum g * norm) per component (Kahan), then the four components added
    vec4 sg = vec4(0.0), sgn = vec4(0.0), cg = vec4(0.0), cgn = vec4(0.0);
    for (int c = 0; c < int(C4); c++) {
        vec4 g = weight4(c) * dout4(n, c);
        vec4 norm = (inp4(n, c) - m) * s;
        KAHAN_ADD(vec4, sg, cg, g)
        KAHAN_ADD(vec4, sgn, cgn, g * norm)
    }
    float mg = ((sg.x + sg.y) + (sg.z + sg.w)) / float(pc.C);
    float mgn = ((sgn.x + sgn.y) + (sgn.z + sgn.w)) / float(pc.C);

    uint d0 = (pc.dinp_off + n * pc.C) >> 2;
    for (int c = 0; c < int(C4); c++) {
        vec4 g = weight4(c) * dout4(n, c);
        vec4 norm = (inp4(n, c) - m) * s;
        dinp4[d0 + uint(c)] += (g - mg - norm * mgn) * s;
    }
}
#else
// Element e of the block's dout and inp views (from their first element), weight's c, in f32.
float dout_at(uint e) {
    if (DOUT16 == 0u) return dout[pc.dout_off + e];
    return LN_WIDEN1(dout16, DOUT16, 2u * pc.dout_off + pc.half0 + e);
}
float inp_at(uint e) {
    if (INP16 == 0u) return inp[pc.inp_off + e];
    return LN_WIDEN1(inp16, INP16, 2u * pc.inp_off + pc.half0 + e);
}
float weight_at(uint c) {
    if (W16 == 0u) return weight[pc.weight_off + c];
    return LN_WIDEN1(weight16, W16, 2u * pc.weight_off + c);
}

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
        float g = weight_at(c) * dout_at(row + c);
        float norm = (inp_at(row + c) - m) * s;
        KAHAN_ADD(vec2, sums, comp, vec2(g, g * norm))
    }
    sums = seg_reduce(sums, RED_SUM) / float(pc.C);

    for (uint c = lane; c < len; c += SEG) {
        float g = weight_at(c) * dout_at(row + c);
        float norm = (inp_at(row + c) - m) * s;
        dinp[pc.dinp_off + row + c] += (g - sums.x - norm * sums.y) * s;
    }
}
#endif
