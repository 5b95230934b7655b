#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef VKA_S16
#extension GL_EXT_shader_16bit_storage : require
#endif
// Batched row-major matrix product (src/backend.h, vkb_matmul):
//   out[b] = alpha * op(A[b]) * op(B[b]) (+ bias) (+ out[b] if accumulate)
// op(A) is (M, K): A stored (M, K), or (K, M) when trans_a; op(B) is (K, N): B stored (K, N), or
// (N, K) when trans_b. Each workgroup computes one BM x BN tile of one batch's out, summing
// k = 0..K-1 in order, so results do not depend on the dispatch.
//
// A 16-bit out (bf16 or fp16, specialization constant OUT16, both variants and builds): each
// element's f32 value is store_out's (alpha * acc, + bias; no accumulate, which op_checks.c
// refuses for a 16-bit out), rounded to nearest even by the convert op's integer arithmetic
// (half.glsl), so out16 == convert(out32) of the same pipeline's kind. out is then bound as
// 32-bit words of two elements (element 2i in the low half); a word whose two halves lie in one
// invocation's run of consecutive columns (the GPU variant's groups of 4, the CPU variant's TN)
// is stored whole, one whose other half belongs to another invocation (a neighbouring column
// group or, with odd N or strides, another row or batch) or lies outside out (the padding half,
// a gap between batches) is updated on its own half only with atomicAnd / atomicOr, as
// layernorm_forward.comp does, so no half is lost to a race. With OUT16 = 0 none of this code
// is live: the f32 pipelines are specialised from the same module as before.
//
// vka:texel-variant: also built with VKA_TEXEL defined (VKA_SHADER_MATMUL_TEXEL): the CPU-type
// variant only, with op(A) and op(B) also bound as uniform texel buffers (bindings 12 and 13,
// over the same bytes as bindings 1 and 2; VEC bits 3 and 4 say which it reads that way: of
// vec4s where it reads that operand as vec4s, bits 0 and 1, else of one float per texel), for
// devices with texel_operands (src/vk/vk_internal.h). On llvmpipe a texel fetch with
// lane-varying addresses is one gather, a storage buffer load a loop over the 8 lanes with a
// bounds check per component: the product runs about twice as fast, and builds faster.
//
// vka:s16-variant: the storage build (both variants) also built with VKA_S16 defined
// (VKA_SHADER_MATMUL_S16), for devices with 16-bit storage (vk_internal.h, s16_kernels): a 16-bit
// out's lone halves (a word shared with another invocation, or the padding half) are stored as
// uint16_t instead of by atomicAnd / atomicOr, whole words as before. A and B are still read as
// words: one 16-bit load per element was 5% slower on llvmpipe (Mesa 22.3) than a word load
// and a shift, and the same elsewhere. The same conversions, so the same bits.
#include "common.glsl"

layout(constant_id = 1) const uint TRANS = 0;   // bit 0: A stored (K, M); bit 1: B stored (N, K)
layout(constant_id = 2) const uint VARIANT = 0; // 0: GPU (shared-memory tiles), 1: CPU-type
layout(constant_id = 3) const uint TM = 4;      // rows of out per invocation
layout(constant_id = 4) const uint TN = 4;      // columns of out per invocation
layout(constant_id = 5) const uint LN = 16;     // GPU: invocations along N (WG / LN along M)
layout(constant_id = 6) const uint BK = 16;     // GPU: k-depth of a shared-memory tile
layout(constant_id = 7) const uint VEC = 0;     // CPU: vec4 access; bit 0: A, 1: B, 2: out, bias
                                                // (bits 3, 4: texels); bits 5, 6 (both
                                                // variants): A and B are bf16, fp16, two a
                                                // 32-bit word; bit 7 (CPU, with bits 0, 1 and
                                                // 5 or 6): A (M, K) and B (N, K) read 8
                                                // elements a load along k (matmul_cpu.glsl)
layout(constant_id = 8) const uint OUT16 = 0u;  // vka_dtype of out: 0 f32, 1 bf16, 2 fp16

const bool AB_BF16 = (VEC & 32u) != 0u;
const bool AB_F16 = (VEC & 64u) != 0u;
const bool AB_16 = AB_BF16 || AB_F16;
const bool K8 = (VEC & 128u) != 0u;
const bool TRANS_A = (TRANS & 1u) != 0u;
const bool TRANS_B = (TRANS & 2u) != 0u;
const uint WG = gl_WorkGroupSize.x;
const uint LM = WG / LN;  // GPU: invocations along M
const uint BM = LM * TM;  // GPU: rows of out per workgroup
const uint BN = LN * TN;  // GPU: columns of out per workgroup

layout(set = 0, binding = 0) buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer A { float a[]; };
layout(set = 0, binding = 2) readonly buffer B { float b[]; };
layout(set = 0, binding = 3) readonly buffer Bias { float bias[]; };
// The same buffers seen as vec4 (CPU variant, VEC): only used where offsets are multiples of 4.
layout(set = 0, binding = 1) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 2) readonly buffer B4 { vec4 b4[]; };
layout(set = 0, binding = 0) buffer Out4 { vec4 out4[]; };
layout(set = 0, binding = 3) readonly buffer Bias4 { vec4 bias4[]; };
// A 16-bit out (OUT16) as its 32-bit words: element 2i in the low half of word i.
layout(set = 0, binding = 0) buffer OutU { uint out_u[]; };
// And as pairs of words, 4 elements (CPU variant, VEC with OUT16: element offsets multiples of 4).
layout(set = 0, binding = 0) buffer OutU2 { uvec2 out_u2[]; };
// And as 32-bit words of two 16-bit elements each (AB_16): element 2i in the low half.
layout(set = 0, binding = 1) readonly buffer AU { uint a_u[]; };
layout(set = 0, binding = 2) readonly buffer BU { uint b_u[]; };
layout(set = 0, binding = 1) readonly buffer AU2 { uvec2 a_u2[]; }; // 4 elements (CPU, VEC)
layout(set = 0, binding = 2) readonly buffer BU2 { uvec2 b_u2[]; };
layout(set = 0, binding = 1) readonly buffer AU4 { uvec4 a_u4[]; }; // 8 elements (CPU, K8)
layout(set = 0, binding = 2) readonly buffer BU4 { uvec4 b_u4[]; };
#ifdef VKA_S16
layout(set = 0, binding = 0) writeonly buffer OutH { uint16_t out_h[]; }; // its lone halves
#endif
#ifdef VKA_TEXEL
layout(set = 0, binding = 12) uniform samplerBuffer a_tex;
layout(set = 0, binding = 13) uniform samplerBuffer b_tex;
// 16-bit A and B (AB_16): their elements as texels, one (R16_UINT), four
// (R16G16B16A16_UINT, VEC bit 0 / 1) or eight (R32G32B32A32_UINT, four words: K8) each.
layout(set = 0, binding = 14) uniform usamplerBuffer a_htex;
layout(set = 0, binding = 15) uniform usamplerBuffer b_htex;
#endif

#include "pc/matmul.h"
VKA_PC_BLOCK(VKA_PC_MATMUL_VIEWS, VKA_PC_MATMUL)

#include "half.glsl"

// Invocations along N and the tile of out a workgroup computes. The CPU-type variant takes
// its ln as a push constant (pc.ln): it only places invocations, so one pipeline serves every
// width, where each value of a specialization constant would be another pipeline for llvmpipe
// to compile (seconds each); the GPU variant unrolls its shared-memory reads over LN.
uint ln_() { return VARIANT == 1u ? pc.ln : LN; }
uint bm_() { return (WG / ln_()) * TM; }
uint bn_() { return ln_() * TN; }

// A 16-bit element (the low half of h) widened to float32, exactly: bf16 is the top half of a
// float; fp16 through unpackHalf2x16 (GLSL 4.20's conversion, any device: no shaderFloat16).
float widen16(uint h) { return AB_F16 ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16); }
// Element idx of a word array, from its word w.
float elem16(uint w, uint idx) { return widen16((idx & 1u) != 0u ? w >> 16 : w & 0xFFFFu); }
// Four elements (4q .. 4q + 3) from a uvec2 of a word array.
vec4 elem16x4(uvec2 w) {
    if (AB_F16) return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    return vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xFFFF0000u),
                uintBitsToFloat(w.y << 16), uintBitsToFloat(w.y & 0xFFFF0000u));
}
// Four elements, one a texel (R16G16B16A16_UINT).
vec4 texel16x4(uvec4 t) {
    if (AB_F16) return vec4(unpackHalf2x16(t.x | t.y << 16), unpackHalf2x16(t.z | t.w << 16));
    return uintBitsToFloat(t << 16);
}
// Eight elements (8q .. 8q + 7) from four 32-bit words: a uvec4 of a word array, or a texel
// (R32G32B32A32_UINT).
void elem16x8(uvec4 w, out float v[8]) {
    [[unroll]] for (uint c = 0u; c < 4u; c++) {
        if (AB_F16) {
            vec2 h = unpackHalf2x16(w[c]);
            v[2u * c] = h.x;
            v[2u * c + 1u] = h.y;
        } else {
            v[2u * c] = uintBitsToFloat(w[c] << 16);
            v[2u * c + 1u] = uintBitsToFloat(w[c] & 0xFFFF0000u);
        }
    }
}
// A's (B's) element idx: float32, or 16-bit (AB_16; the view's offset a_off counts words, and a
// block may start at the high half of the view's first word: a_half). Read one element at a
// time, A (B) comes through its texel view of one element per texel where VEC bit 3 (4) is set
// without bit 0 (1) (the VKA_TEXEL build).
float a_at(uint idx) {
#ifdef VKA_TEXEL
    if ((VEC & 9u) == 8u)
        return AB_16 ? widen16(texelFetch(a_htex, int(idx)).x) : texelFetch(a_tex, int(idx)).x;
#endif
    return AB_16 ? elem16(a_u[idx >> 1], idx) : a[idx];
}
float b_at(uint idx) {
#ifdef VKA_TEXEL
    if ((VEC & 18u) == 16u)
        return AB_16 ? widen16(texelFetch(b_htex, int(idx)).x) : texelFetch(b_tex, int(idx)).x;
#endif
    return AB_16 ? elem16(b_u[idx >> 1], idx) : b[idx];
}
// The first element of batch bi of A (B) in its view.
uint a_base(uint bi) {
    return (AB_16 ? 2u * pc.a_off + pc.a_half : pc.a_off) + bi * pc.stride_a;
}
uint b_base(uint bi) {
    return (AB_16 ? 2u * pc.b_off + pc.b_half : pc.b_off) + bi * pc.stride_b;
}

// The tile a workgroup computes, or false past the end of the work (folded grids).
bool tile_of_group(out uint bi, out uint row0, out uint col0) {
    uint bm = bm_(), bn = bn_();
    uint tiles_m = (pc.M + bm - 1u) / bm;
    uint tiles_n = (pc.N + bn - 1u) / bn;
    uint g = vka_group_id();
    uint per_batch = tiles_m * tiles_n;
    bi = g / per_batch;
    uint t = g - bi * per_batch;
    row0 = (t / tiles_n) * bm;
    col0 = (t % tiles_n) * bn;
    return bi < pc.batch;
}

// out[i, j] of batch bi from the accumulated product.
void store_out(uint bi, uint i, uint j, float acc) {
    uint o = pc.out_off + bi * pc.stride_out + i * pc.ldo + j;
    float v = pc.alpha * acc;
    if (pc.has_bias != 0u) v += bias[pc.bias_off + j];
    if (pc.accumulate != 0u) v += out_[o];
    out_[o] = v;
}

// A 16-bit out's element at column j from the accumulated product: store_out's f32 value
// (no accumulate) rounded to out's type, in the low 16 bits.
uint out16_value(uint j, float acc) {
    float v = pc.alpha * acc;
    if (pc.has_bias != 0u) v += bias[pc.bias_off + j];
    return narrow16_to(OUT16 == 2u, v);
}

// 16-bit out[i, j] of batch bi (OUT16; i, j inside out). prev: column j - 1 is this
// invocation's too (the one before in its run); next: so is column j + 1 (inside out), whose
// accumulated product is acc1. The word holding both j and j + 1 (j at its low half) is stored
// whole when both are this invocation's (j + 1 then stores nothing); a half whose partner is
// another invocation's, or no element of out, is updated alone, atomically.
// (VKA_S16: a lone half stored as a uint16_t instead, no atomics.)
void store_out16(uint bi, uint i, uint j, float acc, bool prev, bool next, float acc1) {
    uint e = 2u * pc.out_off + pc.out_half + bi * pc.stride_out + i * pc.ldo + j;
    uint w = e >> 1;
    bool high = (e & 1u) != 0u;
    if (high && prev) return; // stored whole with column j - 1
    uint h = out16_value(j, acc);
    if (!high && next) {
        out_u[w] = h | (out16_value(j + 1u, acc1) << 16);
    } else if (!high) {
#ifdef VKA_S16
        out_h[e] = uint16_t(h);
#else
        atomicAnd(out_u[w], 0xFFFF0000u);
        atomicOr(out_u[w], h);
#endif
    } else {
#ifdef VKA_S16
        out_h[e] = uint16_t(h);
#else
        atomicAnd(out_u[w], 0x0000FFFFu);
        atomicOr(out_u[w], h << 16);
#endif
    }
}

#include "matmul_cpu.glsl"
#ifdef VKA_TEXEL
void main() { matmul_cpu(); }
#else
#include "matmul_gpu.glsl"

void main() {
    if (VARIANT == 1u)
        matmul_cpu();
    else
        matmul_gpu();
}
#endif
