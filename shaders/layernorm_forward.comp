#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef VKA_S16
#extension GL_EXT_shader_16bit_storage : require
#endif
// Layer normalisation (Ba et al. 2016) over rows of C, eps 1e-5, as llm.c layernorm_forward:
//   mean = sum(x) / C; var = sum((x - mean)^2) / C (second pass, never E[x^2] - E[x]^2);
//   rstd = 1 / sqrt(var + eps); out = (x - mean) * rstd * weight + bias.
// Saves mean (N) and rstd (N) for the backward pass. Row layout and reductions: rowreduce.glsl.
//
// 16-bit out and/or inp (bf16 or fp16, specialization constants OUT16 and INP16, in both
// builds): inp is widened exactly where it is read, the statistics and out's f32 value are the
// f32 kernel's expressions (the same build's, which the host picks as for f32), and out is that
// value rounded to nearest even by the convert op's integer arithmetic (half.glsl), so out16 ==
// convert(out32). Each invocation writes whole 32-bit words of out (two elements); in the
// storage build a word a row shares with its neighbour (odd C), or whose high half lies past the
// last element, is updated with atomicAnd / atomicOr on its own half only, so neighbouring rows
// in other invocations or workgroups do not race (the texel build's rows, C a multiple of 4,
// are whole words).
//
// vka:texel-variant: also built with VKA_TEXEL defined (VKA_SHADER_LAYERNORM_FORWARD_TEXEL):
// the CPU-type variant only (one invocation per row), for C and every offset a multiple of 4
// on devices with texel_operands (src/vk/vk_internal.h). It reads inp, weight and bias as vec4
// texels (bindings 12, 13, 14 over bindings 3, 4, 5) and writes out as vec4: on llvmpipe one
// gather per vec4 instead of a loop over the lanes per float. A 16-bit inp or out is read or
// written as words through its storage binding (inp's texel binding then holds a dummy view).
//
// vka:s16-variant: the storage build also built with VKA_S16 defined
// (VKA_SHADER_LAYERNORM_FORWARD_S16), for devices with 16-bit storage (vk_internal.h,
// s16_kernels): out's lone halves (a word shared with the neighbouring row, or the padding half)
// are stored as uint16_t instead of by atomicAnd / atomicOr, whole words as before (storing
// every element alone doubles the stores, each a loop over the lanes on llvmpipe: 10% slower);
// inp is read as words (as matmul.comp's VKA_S16 build says why). The same conversions, so the
// same bits. The texel build has no such variant.
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
VKA_PC_BLOCK(VKA_PC_LAYERNORM_FORWARD_VIEWS, VKA_PC_LAYERNORM_FORWARD)

#include "half.glsl"

// vka_dtype of inp and out: 0 f32 (the defaults: the f32 kernel), 1 bf16, 2 fp16. A 16-bit view
// holds two elements a word, element 2i in the low half; its offsets count words.
layout(constant_id = 3) const uint INP16 = 0u;
layout(constant_id = 4) const uint OUT16 = 0u;

layout(set = 0, binding = 0) buffer Out16 { uint out16[]; };
layout(set = 0, binding = 3) readonly buffer Inp16 { uint inp16[]; };
#ifdef VKA_S16
layout(set = 0, binding = 0) writeonly buffer Out16h { uint16_t out16h[]; };
#endif

#ifdef VKA_TEXEL
layout(set = 0, binding = 0) writeonly buffer Out4 { vec4 out4[]; };
layout(set = 0, binding = 12) uniform samplerBuffer inp_tex;
layout(set = 0, binding = 13) uniform samplerBuffer weight_tex;
layout(set = 0, binding = 14) uniform samplerBuffer bias_tex;

// vec4 c of the row whose first texel is x0 (f32 inp) or first element e0 (16-bit inp: an even
// element of inp's range, C being a multiple of 4), in f32.
vec4 inp4(int x0, uint e0, int c) {
    if (INP16 == 0u) return texelFetch(inp_tex, x0 + c);
    uint w = (e0 >> 1) + 2u * uint(c), a = inp16[w], b = inp16[w + 1u];
    bool f16 = INP16 == 2u;
    return vec4(widen16_to(f16, a & 0xFFFFu), widen16_to(f16, a >> 16),
                widen16_to(f16, b & 0xFFFFu), widen16_to(f16, b >> 16));
}

// Row n as C / 4 vec4s; the two sums per component (Kahan), then the four components added:
// a fixed order, within the CPU reference's tolerance of the scalar walk.
void main() {
    uint n = seg_row();
    if (n >= pc.N) return;
    uint C4 = pc.C >> 2;
    int x0 = int((pc.inp_off + n * pc.C) >> 2);
    uint e0 = 2u * pc.inp_off + n * pc.C;

    vec4 sum = vec4(0.0), comp = vec4(0.0);
    for (int c = 0; c < int(C4); c++) KAHAN_ADD(vec4, sum, comp, inp4(x0, e0, c))
    float m = ((sum.x + sum.y) + (sum.z + sum.w)) / float(pc.C);

    vec4 sq = vec4(0.0);
    comp = vec4(0.0);
    for (int c = 0; c < int(C4); c++) {
        vec4 d = inp4(x0, e0, c) - m;
        KAHAN_ADD(vec4, sq, comp, d * d)
    }
    float s = 1.0 / sqrt(((sq.x + sq.y) + (sq.z + sq.w)) / float(pc.C) + 1e-5);

    uint o0 = (pc.out_off + n * pc.C) >> 2;
    uint ow = pc.out_off + (n * pc.C >> 1); // 16-bit out: the row's first word
    int w0 = int(pc.weight_off >> 2), b0 = int(pc.bias_off >> 2);
    for (int c = 0; c < int(C4); c++) {
        vec4 x = inp4(x0, e0, c);
        vec4 w = texelFetch(weight_tex, w0 + c), b = texelFetch(bias_tex, b0 + c);
        vec4 y = (x - m) * s * w + b;
        if (OUT16 == 0u) {
            out4[o0 + uint(c)] = y;
        } else {
            bool f16 = OUT16 == 2u;
            uint q = ow + 2u * uint(c);
            out16[q] = narrow16_to(f16, y.x) | (narrow16_to(f16, y.y) << 16);
            out16[q + 1u] = narrow16_to(f16, y.z) | (narrow16_to(f16, y.w) << 16);
        }
    }
    mean_[pc.mean_off + n] = m;
    rstd_[pc.rstd_off + n] = s;
}
#else
// Element c of the row starting at element x0 of inp's bound range (16-bit: halves), in f32.
float inp_at(uint x0, uint c) {
    if (INP16 == 0u) return inp[x0 + c];
    uint e = x0 + c;
    return widen16_to(INP16 == 2u, (inp16[e >> 1] >> ((e & 1u) << 4)) & 0xFFFFu);
}

// out's f32 value at column c.
float ln_out(uint x0, uint c, float m, float s) {
    return (inp_at(x0, c) - m) * s * weight[pc.weight_off + c] + bias[pc.bias_off + c];
}

// The row's C elements from element e0 of out's 16-bit range, a word per iteration: whole words
// stored, a word shared with the row before or after (or the padding half past the end) updated
// on this row's half only.
void store16(uint e0, uint x0, float m, float s, uint lane) {
    bool f16 = OUT16 == 2u;
    uint w1 = (e0 + pc.C - 1u) >> 1;
    for (uint w = (e0 >> 1) + lane; w <= w1; w += SEG) {
        uint c = 2u * w - e0; // column of the low half (wraps to -1 when it is the row before's)
        bool lo_in = 2u * w >= e0, hi_in = 2u * w + 1u < e0 + pc.C;
        uint lo = lo_in ? narrow16_to(f16, ln_out(x0, c, m, s)) : 0u;
        uint hi = hi_in ? narrow16_to(f16, ln_out(x0, c + 1u, m, s)) : 0u;
        if (lo_in && hi_in) {
            out16[w] = lo | (hi << 16);
        } else if (lo_in) {
#ifdef VKA_S16
            out16h[2u * w] = uint16_t(lo);
#else
            atomicAnd(out16[w], 0xFFFF0000u);
            atomicOr(out16[w], lo);
#endif
        } else {
#ifdef VKA_S16
            out16h[2u * w + 1u] = uint16_t(hi);
#else
            atomicAnd(out16[w], 0x0000FFFFu);
            atomicOr(out16[w], hi << 16);
#endif
        }
    }
}

void main() {
    uint n = seg_row(), lane = seg_lane();
    if (SEG == 1u && n >= pc.N) return;
    uint len = n < pc.N ? pc.C : 0u;
    uint x0 = (INP16 == 0u ? pc.inp_off : 2u * pc.inp_off + pc.half0) + n * pc.C;

    float sum = 0.0, comp = 0.0;
    for (uint c = lane; c < len; c += SEG) KAHAN_ADD(float, sum, comp, inp_at(x0, c))
    float m = seg_sum(sum) / float(pc.C);

    float sq = 0.0;
    comp = 0.0;
    for (uint c = lane; c < len; c += SEG) {
        float d = inp_at(x0, c) - m;
        KAHAN_ADD(float, sq, comp, d * d)
    }
    float s = 1.0 / sqrt(seg_sum(sq) / float(pc.C) + 1e-5);
    if (n >= pc.N) return;

    if (OUT16 == 0u) {
        uint o0 = pc.out_off + n * pc.C;
        for (uint c = lane; c < len; c += SEG) out_[o0 + c] = ln_out(x0, c, m, s);
    } else {
        store16(2u * pc.out_off + pc.half0 + n * pc.C, x0, m, s, lane);
    }
    if (lane == 0u) {
        mean_[pc.mean_off + n] = m;
        rstd_[pc.rstd_off + n] = s;
    }
}
#endif
