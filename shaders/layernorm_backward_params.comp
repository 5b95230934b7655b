#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalisation backward, the parameter gradients (llm.c layernorm_backward), per column c:
//   dweight[c] += sum_n dout[n, c] * (inp[n, c] - mean[n]) * rstd[n];  dbias[c] += sum_n dout[n, c].
// Column layout and reduction (deterministic, no scratch): colreduce.glsl.
//
// vka:texel-variant: also built with VKA_TEXEL defined
// (VKA_SHADER_LAYERNORM_BACKWARD_PARAMS_TEXEL): the CPU-type variant for C and every offset a
// multiple of 4 on devices with texel_operands (src/vk/vk_internal.h). An invocation sums 4
// columns (a vec4 texel of dout and of inp per row, bindings 12 and 13 over 2 and 3) down every
// RL-th row; a workgroup holds CQ column quads (spec constant 1) times RL row lanes, whose
// partial sums row lane 0 adds in order after one barrier (enough workgroups for every thread;
// on llvmpipe the SIMD lanes are neighbouring quads of one row, so mean and rstd are uniform).
//
// 16-bit dout and/or inp (bf16 or fp16, specialization constants DOUT16, INP16 as in
// layernorm_backward.comp, both builds): widened exactly where read (the texel build's 16-bit
// views as words through their storage bindings), the f32 kernel's arithmetic and order.
#include "common.glsl"
#include "sumloop.glsl"
#ifndef VKA_TEXEL
#include "colreduce.glsl"
#endif

layout(set = 0, binding = 0) buffer Dweight { float dweight[]; };
layout(set = 0, binding = 1) buffer Dbias { float dbias[]; };
layout(set = 0, binding = 2) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 3) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 4) readonly buffer Mean { float mean_[]; };
layout(set = 0, binding = 5) readonly buffer Rstd { float rstd_[]; };

#include "pc/layernorm.h"
VKA_PC_BLOCK(VKA_PC_LAYERNORM_PARAMS_VIEWS, VKA_PC_LAYERNORM_ROWS)

#include "half.glsl"

// vka_dtype of dout and inp (0: f32, the defaults), their 16-bit views as words
layout(constant_id = 3) const uint DOUT16 = 0u;
layout(constant_id = 4) const uint INP16 = 0u;
layout(set = 0, binding = 2) readonly buffer Dout16 { uint dout16[]; };
layout(set = 0, binding = 3) readonly buffer Inp16 { uint inp16[]; };

// Element k (of the bound range) of a 16-bit view, and the 4 from an even k, in f32.
#define LN_WIDEN1(buf, T16, k) WIDEN16_AT(T16 == 2u, buf, k)
#define LN_WIDEN4(buf, T16, k) widen16x4_to(T16 == 2u, buf[(k) >> 1], buf[((k) >> 1) + 1u])

#ifdef VKA_TEXEL
layout(constant_id = 1) const uint CQ = 8; // column quads per workgroup
const uint RL = gl_WorkGroupSize.x / CQ;   // row lanes
layout(set = 0, binding = 0) buffer Dweight4 { vec4 dweight4[]; };
layout(set = 0, binding = 1) buffer Dbias4 { vec4 dbias4[]; };
layout(set = 0, binding = 12) uniform samplerBuffer dout_tex;
layout(set = 0, binding = 13) uniform samplerBuffer inp_tex;

shared vec4 part_w[gl_WorkGroupSize.x];
shared vec4 part_b[gl_WorkGroupSize.x];

uint cq; // this invocation's column quad

// Row n's terms of dweight and dbias for the quad.
void quad_terms(uint n, out vec4 tw, out vec4 tb) {
    uint e = n * pc.C + 4u * cq;
    uint kd = 2u * pc.dout_off + e, kx = 2u * pc.inp_off + e; // 16-bit: elements
    vec4 d = DOUT16 == 0u ? texelFetch(dout_tex, int((pc.dout_off + e) >> 2))
                          : LN_WIDEN4(dout16, DOUT16, kd);
    vec4 x = INP16 == 0u ? texelFetch(inp_tex, int((pc.inp_off + e) >> 2))
                         : LN_WIDEN4(inp16, INP16, kx);
    tw = d * ((x - mean_[pc.mean_off + n]) * rstd_[pc.rstd_off + n]);
    tb = d;
}

void main() {
    uint t = gl_LocalInvocationID.x, lane = t / CQ;
    cq = vka_group_id() * CQ + t % CQ;
    uint rows = cq < (pc.C >> 2) ? pc.N : 0u;
    // rows lane, lane + RL, ...: four per iteration added pairwise, then the rest, each into
    // the sums with Kahan compensation (as UNROLLED_SUM)
    vec4 sw = vec4(0.0), sb = vec4(0.0), cw = vec4(0.0), cb = vec4(0.0);
    uint n = lane;
    for (; n + 3u * RL < rows; n += 4u * RL) {
        vec4 w0, b0, w1, b1, w2, b2, w3, b3;
        quad_terms(n, w0, b0);
        quad_terms(n + RL, w1, b1);
        quad_terms(n + 2u * RL, w2, b2);
        quad_terms(n + 3u * RL, w3, b3);
        KAHAN_ADD(vec4, sw, cw, (w0 + w1) + (w2 + w3))
        KAHAN_ADD(vec4, sb, cb, (b0 + b1) + (b2 + b3))
    }
    for (; n < rows; n += RL) {
        vec4 w0, b0;
        quad_terms(n, w0, b0);
        KAHAN_ADD(vec4, sw, cw, w0)
        KAHAN_ADD(vec4, sb, cb, b0)
    }
    if (RL > 1u) {
        part_w[t] = sw;
        part_b[t] = sb;
        barrier();
        if (lane != 0u) return;
        for (uint r = 1u; r < RL; r++) {
            sw += part_w[t + r * CQ];
            sb += part_b[t + r * CQ];
        }
    }
    if (rows == 0u) return;
    uint q = 4u * cq;
    dweight4[(pc.dweight_off + q) >> 2] += sw;
    dbias4[(pc.dbias_off + q) >> 2] += sb;
}
#else
uint c; // this invocation's column

// Row n's terms of (dweight[c], dbias[c]).
vec2 terms(uint n) {
    uint e = n * pc.C + c;
    float d = DOUT16 == 0u ? dout[pc.dout_off + e]
                           : LN_WIDEN1(dout16, DOUT16, 2u * pc.dout_off + pc.half0 + e);
    float x = INP16 == 0u ? inp[pc.inp_off + e]
                          : LN_WIDEN1(inp16, INP16, 2u * pc.inp_off + pc.half0 + e);
    float norm = (x - mean_[pc.mean_off + n]) * rstd_[pc.rstd_off + n];
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
#endif
