#version 450
#extension GL_GOOGLE_include_directive : require
// KV cache write: for t < min(T, pos[1]) with p = pos[0] + t in [0, max_T):
//   kcache[h, p, :] = k part, vcache[h, p, :] = v part of qkv[t] (T, 3C), C = NH*HS.
// kcache, vcache (NH, max_T, HS); pos (2) int32 written by the host before each run.
// One invocation per element of (NH, T, HS).
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer KC { float kc[]; };
layout(set = 0, binding = 1) writeonly buffer VC { float vc[]; };
layout(set = 0, binding = 2) readonly buffer Qkv { float qkv[]; };
layout(set = 0, binding = 3) readonly buffer Pos { int pos[]; };

layout(push_constant) uniform PC {
    uint k_off, v_off, qkv_off, pos_off;
    uint T, NH, HS, max_T;
} pc;

void main() {
    uint i = vka_global_id();
    uint C = pc.NH * pc.HS;
    if (i >= pc.NH * pc.T * pc.HS) return;
    uint d = i % pc.HS;
    uint t = (i / pc.HS) % pc.T;
    uint h = i / (pc.HS * pc.T);
    int p = pos[pc.pos_off] + int(t);
    int n = pos[pc.pos_off + 1u];
    if (int(t) >= n || p < 0 || p >= int(pc.max_T)) return;
    uint src = pc.qkv_off + t * 3u * C + h * pc.HS + d;
    uint dst = (h * pc.max_T + uint(p)) * pc.HS + d;
    kc[pc.k_off + dst] = qkv[src + C];
    vc[pc.v_off + dst] = qkv[src + 2u * C];
}
