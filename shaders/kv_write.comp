#version 450
#extension GL_GOOGLE_include_directive : require
// KV cache write: for t < min(T, pos[1]) with p = pos[0] + t in [0, max_T):
//   kcache[h, p, :] = k part, vcache[h, p, :] = v part of qkv[t] (T, 3C), C = NH*HS.
// kcache, vcache (NH, max_T, HS); pos (2) int32 written by the host before each run.
// The host splits the write at the binding limit: a dispatch binds the cache rows (h, p)
// r0 .. r0+nr-1 (r = h * max_T + p) and the qkv rows t0 .. t0+nt-1, and covers heads
// h0 .. h0+nh-1: one invocation per element of (nh, nt, HS); a row outside the bound cache
// rows (p is known only when the graph runs) is another dispatch's.
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer KC { float kc[]; };
layout(set = 0, binding = 1) writeonly buffer VC { float vc[]; };
layout(set = 0, binding = 2) readonly buffer Qkv { float qkv[]; };
layout(set = 0, binding = 3) readonly buffer Pos { int pos[]; };

#include "pc/kv.h"
VKA_PC_BLOCK(VKA_PC_KV_WRITE_VIEWS, VKA_PC_KV_WRITE)

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
    uint src = pc.qkv_off + t * 3u * pc.C + h * pc.HS + d;
    uint dst = (r - pc.r0) * pc.HS + d;
    kc[pc.k_off + dst] = qkv[src + pc.C];
    vc[pc.v_off + dst] = qkv[src + 2u * pc.C];
}
