// Shared part of the fused attention shaders (src/backend.h, vkb_attention; host side
// src/vk/vk_ops_attention.c): bindings, push constants, views, masks and row loads.
//
// Every attention shader sees the same 11 bindings (unused ones hold the backend's dummy
// buffer) and the same push constants, so the helpers below serve the forward and the three
// backward passes alike. A dispatch covers a block of B batches (the host splits larger ones at
// the binding limit); b below is the batch within the block.
//
// Variants (specialization constants, chosen per device by the host):
//  - GPU (VKA_CPU false): a workgroup of WG invocations, one query (or key) row each, stages
//    tiles of TK keys (or queries) of HS in shared memory, read by all its rows.
//  - CPU-type (VKA_CPU true, lavapipe): no shared memory, no barrier. llvmpipe runs a workgroup's
//    invocations as SIMD lanes and pays for each buffer load whose address varies by lane (a
//    loop over the lanes), so each invocation keeps TQ rows in registers and reuses every key
//    (or query) row it loads for all of them.
// Rows are HS floats, walked as DV = ceil(HS / 4) vec4s (fully unrolled: DV is a constant);
// with VEC every row start is a multiple of 4 elements and rows are read as vec4.
#ifndef VKA_ATTENTION_GLSL
#define VKA_ATTENTION_GLSL

#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 1) const bool VKA_CPU = false;
layout(constant_id = 2) const uint DV = 8;   // vec4s per row: ceil(HS / 4)
layout(constant_id = 3) const uint TQ = 1;   // CPU: rows per invocation
layout(constant_id = 4) const uint TK = 4;   // CPU: rows per unrolled step; GPU: rows per tile
layout(constant_id = 5) const bool VEC = false; // rows may be read and written as vec4

// 16-bit views (backend.h's 16-bit rule; the forward and the three backward passes): bit i (0 q,
// 1 k, 2 v, 3 out) set when binding i holds 16-bit elements, two a 32-bit word (element 2i in
// the low half); bit 4: they are fp16, else bf16. The forward writes a 16-bit out, the backward
// reads it (delta); dout and the gradients stay f32. A 16-bit view's bind_off counts words, and
// flags bit 4 + i says it starts at the high half of its first word (F_HALF0).
layout(constant_id = 7) const uint H16 = 0u;

const uint WG = gl_WorkGroupSize.x;

layout(set = 0, binding = 0) buffer Q { float q_[]; };
layout(set = 0, binding = 1) buffer K { float k_[]; };
layout(set = 0, binding = 2) buffer V { float v_[]; };
layout(set = 0, binding = 3) buffer O { float o_[]; };
layout(set = 0, binding = 4) buffer Lse { float lse_[]; };
layout(set = 0, binding = 5) buffer Mask { float mask_[]; };
layout(set = 0, binding = 6) buffer KeyLens { int key_lens_[]; };
layout(set = 0, binding = 7) buffer DO { float do_[]; };
layout(set = 0, binding = 8) buffer DQ { float dq_[]; };
layout(set = 0, binding = 9) buffer DK { float dk_[]; };
layout(set = 0, binding = 10) buffer DVb { float dv_[]; };
layout(set = 0, binding = 0) buffer Q4 { vec4 q4[]; };
layout(set = 0, binding = 1) buffer K4 { vec4 k4[]; };
layout(set = 0, binding = 2) buffer V4 { vec4 v4[]; };
layout(set = 0, binding = 3) buffer O4 { vec4 o4[]; };
layout(set = 0, binding = 7) buffer DO4 { vec4 do4[]; };
layout(set = 0, binding = 8) buffer DQ4 { vec4 dq4[]; };
layout(set = 0, binding = 9) buffer DK4 { vec4 dk4[]; };
layout(set = 0, binding = 10) buffer DV4 { vec4 dv4[]; };
layout(set = 0, binding = 0) buffer Q16 { uint q16[]; };
layout(set = 0, binding = 1) buffer K16 { uint k16[]; };
layout(set = 0, binding = 2) buffer V16 { uint v16[]; };
layout(set = 0, binding = 3) buffer O16 { uint o16[]; };
layout(set = 0, binding = 0) buffer Q16v { uvec2 q16v[]; };
layout(set = 0, binding = 1) buffer K16v { uvec2 k16v[]; };
layout(set = 0, binding = 2) buffer V16v { uvec2 v16v[]; };
layout(set = 0, binding = 3) buffer O16v { uvec2 o16v[]; };

#include "half.glsl"
#include "pc/attention.h"
VKA_PC_BLOCK(VKA_PC_ATTENTION_VIEWS, VKA_PC_ATTENTION)

const uint F_MASK = 1u, F_MASK_PER_BATCH = 2u, F_KEY_LENS = 4u, F_NO_LSE = 8u, F_HALF0 = 16u;

bool is16(uint i) { return i < 4u && (H16 & (1u << i)) != 0u; }
const bool H16_F16 = (H16 & 16u) != 0u;

// The element offset of binding i in its bound range (16-bit: counted in 16-bit elements).
uint boff(uint i) {
    if (!is16(i)) return pc.bind_off[i];
    return 2u * pc.bind_off[i] + ((pc.flags & (F_HALF0 << i)) != 0u ? 1u : 0u);
}

// Valid keys of batch b: key_lens[b] clamped to [0, Tk], or Tk.
uint valid_keys(uint b) {
    if ((pc.flags & F_KEY_LENS) == 0u) return pc.Tk;
    return uint(clamp(key_lens_[boff(6u) + b], 0, int(pc.Tk)));
}

// Queries [0, query_end(L)) are real: with key_lens and Tq == Tk (self-attention over padded
// sequences) queries t >= L are padding and see no key; otherwise all Tq.
uint query_end(uint L) { return (pc.flags & F_KEY_LENS) != 0u && pc.Tq == pc.Tk ? L : pc.Tq; }

// Query t sees keys [0, visible_end(t, L)).
uint visible_end(uint t, uint L) {
    if (t >= query_end(L)) return 0u;
    if (pc.causal == 1u) return min(L, t + 1u);
    if (pc.causal == 2u) return uint(clamp(int(t) + int(L) - int(pc.Tq) + 1, 0, int(L)));
    return L;
}

// Keys any of the WG rows from tg sees: visible_end grows with t up to the padding queries.
uint last_row_keys(uint tg, uint L) {
    uint qe = query_end(L);
    return tg >= qe ? 0u : visible_end(min(tg + WG - 1u, qe - 1u), L);
}

// Key j is seen by queries [first_query(j, L), query_end(L)) (none when j >= L: Tq).
uint first_query(uint j, uint L) {
    if (j >= L) return pc.Tq;
    if (pc.causal == 1u) return min(j, pc.Tq);
    if (pc.causal == 2u) return uint(clamp(int(j) - int(L) + int(pc.Tq), 0, int(pc.Tq)));
    return 0u;
}

// The additive mask at (b, t, j), 0 without one.
float mask_at(uint b, uint t, uint j) {
    if ((pc.flags & F_MASK) == 0u) return 0.0;
    uint mb = (pc.flags & F_MASK_PER_BATCH) != 0u ? b : 0u;
    return mask_[boff(5u) + (mb * pc.Tq + t) * pc.Tk + j];
}

// Row starts (elements, within the bound ranges).
uint q_row(uint b, uint h, uint t) { return boff(0u) + b * pc.q_sb + h * pc.q_sh + t * pc.q_st; }
uint k_row(uint b, uint h, uint j) { return boff(1u) + b * pc.k_sb + h * pc.k_sh + j * pc.k_st; }
uint v_row(uint b, uint h, uint j) { return boff(2u) + b * pc.v_sb + h * pc.v_sh + j * pc.v_st; }
uint o_row(uint b, uint h, uint t) { return boff(3u) + b * pc.o_sb + h * pc.o_sh + t * pc.o_st; }
uint do_row(uint b, uint h, uint t) { return boff(7u) + b * pc.o_sb + h * pc.o_sh + t * pc.o_st; }
uint dq_row(uint b, uint h, uint t) { return boff(8u) + b * pc.q_sb + h * pc.q_sh + t * pc.q_st; }
uint dk_row(uint b, uint h, uint j) { return boff(9u) + b * pc.k_sb + h * pc.k_sh + j * pc.k_st; }
uint dv_row(uint b, uint h, uint j) { return boff(10u) + b * pc.v_sb + h * pc.v_sh + j * pc.v_st; }
uint lse_at(uint b, uint h, uint t) { return boff(4u) + (b * pc.NH + h) * pc.Tq + t; }

// vec4 number c of the row starting at element `row` of buffer X (elements past HS read as 0).
#define VKA_LOAD4(NAME, X, X4)                                                                 \
    vec4 NAME(uint row, uint c) {                                                             \
        if (VEC) return X4[(row >> 2) + c];                                                   \
        vec4 r = vec4(0.0);                                                                   \
        [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++)                                          \
            if (4u * c + e_ < pc.HS) r[e_] = X[row + 4u * c + e_];                            \
        return r;                                                                             \
    }
// The same from a 16-bit view's words W (W2: as uvec2s, four elements each), widened exactly.
#define VKA_LOAD4_16(NAME, W, W2)                                                              \
    vec4 NAME(uint row, uint c) {                                                             \
        if (VEC) {                                                                            \
            uvec2 w_ = W2[(row >> 2) + c];                                                    \
            return vec4(widen16_to(H16_F16, w_.x & 0xFFFFu), widen16_to(H16_F16, w_.x >> 16), \
                        widen16_to(H16_F16, w_.y & 0xFFFFu), widen16_to(H16_F16, w_.y >> 16)); \
        }                                                                                     \
        vec4 r = vec4(0.0);                                                                   \
        [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++) {                                        \
            uint i_ = row + 4u * c + e_;                                                      \
            if (4u * c + e_ < pc.HS)                                                          \
                r[e_] = widen16_to(H16_F16, (i_ & 1u) != 0u ? W[i_ >> 1] >> 16                \
                                                            : W[i_ >> 1] & 0xFFFFu);          \
        }                                                                                     \
        return r;                                                                             \
    }
VKA_LOAD4_16(ld16_q, q16, q16v)
VKA_LOAD4_16(ld16_k, k16, k16v)
VKA_LOAD4_16(ld16_v, v16, v16v)
VKA_LOAD4_16(ld16_o, o16, o16v)
#ifdef VKA_TEXEL
// Texel builds (vka:texel-variant; CPU-type variant only, VEC holds): q, k, v and dout are
// also bound as uniform texel buffers over the same bytes (bindings 12..15 over 0, 1, 2 and 7;
// src/vk/vk_internal.h), which llvmpipe reads with one gather where a storage buffer load is a
// loop over the lanes: four floats' bits a texel (R32G32B32A32_UINT), or for a 16-bit view
// four 16-bit elements (R16G16B16A16_UINT).
layout(set = 0, binding = 12) uniform usamplerBuffer q_tex;
layout(set = 0, binding = 13) uniform usamplerBuffer k_tex;
layout(set = 0, binding = 14) uniform usamplerBuffer v_tex;
layout(set = 0, binding = 15) uniform usamplerBuffer do_tex;
vec4 tex4(bool h16, uvec4 u) {
    if (!h16) return uintBitsToFloat(u);
    return vec4(widen16_to(H16_F16, u.x), widen16_to(H16_F16, u.y), widen16_to(H16_F16, u.z),
                widen16_to(H16_F16, u.w));
}
vec4 ld_q(uint row, uint c) { return tex4(is16(0u), texelFetch(q_tex, int((row >> 2) + c))); }
vec4 ld_k(uint row, uint c) { return tex4(is16(1u), texelFetch(k_tex, int((row >> 2) + c))); }
vec4 ld_v(uint row, uint c) { return tex4(is16(2u), texelFetch(v_tex, int((row >> 2) + c))); }
vec4 ld_do(uint row, uint c) { return uintBitsToFloat(texelFetch(do_tex, int((row >> 2) + c))); }
#else
VKA_LOAD4(ld32_q, q_, q4)
VKA_LOAD4(ld32_k, k_, k4)
VKA_LOAD4(ld32_v, v_, v4)
vec4 ld_q(uint row, uint c) { return is16(0u) ? ld16_q(row, c) : ld32_q(row, c); }
vec4 ld_k(uint row, uint c) { return is16(1u) ? ld16_k(row, c) : ld32_k(row, c); }
vec4 ld_v(uint row, uint c) { return is16(2u) ? ld16_v(row, c) : ld32_v(row, c); }
VKA_LOAD4(ld_do, do_, do4)
#endif
VKA_LOAD4(ld32_o, o_, o4)
vec4 ld_o(uint row, uint c) { return is16(3u) ? ld16_o(row, c) : ld32_o(row, c); }

// Store vec4 c of a row (only its first HS elements).
#define VKA_STORE4(X, X4, row, c, val)                                                         \
    if (VEC) {                                                                                \
        X4[((row) >> 2) + (c)] = (val);                                                       \
    } else {                                                                                  \
        [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++)                                          \
            if (4u * (c) + e_ < pc.HS) X[(row) + 4u * (c) + e_] = (val)[e_];                  \
    }

// A 16-bit out: rounded as vka_copy rounds; with VEC a vec4 is two whole words, else each
// element's half of its word is replaced atomically (a word may hold two rows' elements, or two
// invocations' columns of a split row), the other half kept.
void st16_o(uint row, uint c, vec4 x) {
    if (VEC) {
        o16v[(row >> 2) + c] = uvec2(narrow16_to(H16_F16, x.x) | (narrow16_to(H16_F16, x.y) << 16),
                                     narrow16_to(H16_F16, x.z) | (narrow16_to(H16_F16, x.w) << 16));
        return;
    }
    [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++) {
        uint i_ = row + 4u * c + e_;
        if (4u * c + e_ >= pc.HS) continue;
        uint h_ = narrow16_to(H16_F16, x[e_]);
        if ((i_ & 1u) != 0u) {
            atomicAnd(o16[i_ >> 1], 0x0000FFFFu);
            atomicOr(o16[i_ >> 1], h_ << 16);
        } else {
            atomicAnd(o16[i_ >> 1], 0xFFFF0000u);
            atomicOr(o16[i_ >> 1], h_);
        }
    }
}
void st_o(uint row, uint c, vec4 x) {
    if (is16(3u)) {
        st16_o(row, c, x);
        return;
    }
    VKA_STORE4(o_, o4, row, c, x)
}
void st_dq(uint row, uint c, vec4 x) { VKA_STORE4(dq_, dq4, row, c, x) }
void st_dk(uint row, uint c, vec4 x) { VKA_STORE4(dk_, dk4, row, c, x) }
void st_dv(uint row, uint c, vec4 x) { VKA_STORE4(dv_, dv4, row, c, x) }

// exp((s - lse) - c) for a visible key, 0 for a masked one or a row with no visible key
// (lse = -inf). c is the row's correction (row_corr below; 0 for most rows, and then this is
// exp(s - lse) bitwise).
float prob(float s, float lse, float c) {
    return s == VKA_NEG_INF || lse == VKA_NEG_INF ? 0.0 : exp((s - lse) - c);
}

// Row t's score of key j, its q row scaled (q[c] = q * scale): the one expression the forward
// and every backward pass use, so that they agree bitwise.
// A key the mask hides (-inf) scores -inf whatever its k holds (NaN + -inf would be NaN).
float score(vec4 q[DV], vec4 kv[DV], uint b, uint t, uint j) {
    float d = 0.0;
    [[unroll]] for (uint c = 0u; c < DV; c++) d += dot(q[c], kv[c]);
    float mk = mask_at(b, t, j);
    return mk == VKA_NEG_INF ? VKA_NEG_INF : d + mk;
}

// delta = dout . out of row (b, h, t) (attention_backward_delta.comp).
float row_delta(uint b, uint h, uint t) {
    uint orow = o_row(b, h, t), drow = do_row(b, h, t);
    float d = 0.0;
    [[unroll]] for (uint c = 0u; c < DV; c++) d += dot(ld_do(drow, c), ld_o(orow, c));
    return d;
}

// (delta, c) of row (b, h, t), left in dq[b,h,t,0..1] by attention_backward_delta.comp; with
// HS = 1 the row has one slot, which holds c, and delta (one product) is recomputed.
vec2 delta_corr(uint b, uint h, uint t) {
    uint r = dq_row(b, h, t);
    if (pc.HS == 1u) return vec2(row_delta(b, h, t), dq_[r]);
    return vec2(dq_[r], dq_[r + 1u]);
}

#endif
