#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef VKA_S16
#extension GL_EXT_shader_16bit_storage : require
#endif
// KV cache write: for t < min(T, pos[1]) with p = pos[0] + t in [0, max_T):
//   kcache[h, p, :] = k part, vcache[h, p, :] = v part of qkv[t] (T, 3C), C = NH*HS.
// kcache, vcache (NH, max_T, HS); pos (2) int32 written by the host before each run.
// The host splits the write at the binding limit: a dispatch binds the cache rows (h, p)
// r0 .. r0+nr-1 (r = h * max_T + p) and the qkv rows t0 .. t0+nt-1, and covers heads
// h0 .. h0+nh-1: one invocation per element of (nh, nt, HS); a row outside the bound cache
// rows (p is known only when the graph runs) is another dispatch's.
// 16-bit caches and/or qkv (T16, backend.h's 16-bit rule: a 16-bit cache element is the f32
// qkv element rounded as vka_copy rounds): their views are words, two elements each (element 2i
// in the low half), starting at a word's high half where pc.c_half / pc.q_half say so; a cache
// element is stored into its half of the word atomically (odd HS: rows share words).
//
// vka:s16-variant: also built with VKA_S16 defined (VKA_SHADER_KV_WRITE_S16), for devices with
// 16-bit storage (vk_internal.h, s16_kernels): the 16-bit views are arrays of uint16_t over the
// same bindings (element 2w + half of word w), each element loaded and stored alone, with the
// same conversions, so the same bits.
#include "common.glsl"
#include "half.glsl"

layout(constant_id = 1) const uint T16 = 0u; // bit 0: caches 16-bit; 1: qkv 16-bit; 2: fp16

layout(set = 0, binding = 0) buffer KC { float kc[]; };
layout(set = 0, binding = 1) buffer VC { float vc[]; };
layout(set = 0, binding = 2) readonly buffer Qkv { float qkv[]; };
layout(set = 0, binding = 3) readonly buffer Pos { int pos[]; };
#ifdef VKA_S16
layout(set = 0, binding = 0) writeonly buffer KC16 { uint16_t kc16[]; };
layout(set = 0, binding = 1) writeonly buffer VC16 { uint16_t vc16[]; };
layout(set = 0, binding = 2) readonly buffer Qkv16 { uint16_t qkv16[]; };
#else
layout(set = 0, binding = 0) buffer KC16 { uint kc16[]; };
layout(set = 0, binding = 1) buffer VC16 { uint vc16[]; };
layout(set = 0, binding = 2) readonly buffer Qkv16 { uint qkv16[]; };
#endif

#include "pc/kv.h"
VKA_PC_BLOCK(VKA_PC_KV_WRITE_VIEWS, VKA_PC_KV_WRITE)

const bool F16 = (T16 & 4u) != 0u;

// Element e of the bound qkv rows.
float ld_qkv(uint e) {
    if ((T16 & 2u) == 0u) return qkv[pc.qkv_off + e];
#ifdef VKA_S16
    return widen16_to(F16, uint(qkv16[2u * pc.qkv_off + pc.q_half + e]));
#else
    uint i = 2u * pc.qkv_off + pc.q_half + e, w = qkv16[i >> 1];
    return widen16_to(F16, (i & 1u) != 0u ? w >> 16 : w & 0xFFFFu);
#endif
}

// Element e of the bound cache rows := x (16-bit: rounded, into its half of the word).
void st16(bool v, uint e, float x) {
    uint i = 2u * (v ? pc.v_off : pc.k_off) + pc.c_half + e, h = narrow16_to(F16, x);
#ifdef VKA_S16
    if (v) vc16[i] = uint16_t(h);
    else kc16[i] = uint16_t(h);
#else
    uint keep = (i & 1u) != 0u ? 0x0000FFFFu : 0xFFFF0000u, put = (i & 1u) != 0u ? h << 16 : h;
    if (v) {
        atomicAnd(vc16[i >> 1], keep);
        atomicOr(vc16[i >> 1], put);
    } else {
        atomicAnd(kc16[i >> 1], keep);
        atomicOr(kc16[i >> 1], put);
    }
#endif
}

void main() {
    uint i = vka_global_id();
    if (i >= pc.nh * pc.nt * pc.HS) return;
    uint d = i % pc.HS;
    uint t = (i / pc.HS) % pc.nt;
    uint h = pc.h0 + i / (pc.HS * pc.nt);
    int p = pos[pc.pos_off] + int(pc.t0 + t);
    int n = pos[pc.pos_off + 1u];
    if (int(pc.t0 + t) >= n || p < 0 || p >= int(pc.max_T)) return;
    uint r = h * pc.max_T + uint(p);
    if (r < pc.r0 || r >= pc.r0 + pc.nr) return;
    uint src = t * 3u * pc.C + h * pc.HS + d;
    uint dst = (r - pc.r0) * pc.HS + d;
    float k = ld_qkv(src + pc.C), v = ld_qkv(src + 2u * pc.C);
    if ((T16 & 1u) != 0u) {
        st16(false, dst, k);
        st16(true, dst, v);
    } else {
        kc[pc.k_off + dst] = k;
        vc[pc.v_off + dst] = v;
    }
}
