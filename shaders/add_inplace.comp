#version 450
#extension GL_GOOGLE_include_directive : require
// dst += src over N elements (residual backward; dst may be src).
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dst { float dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { float src[]; };

// Same block as every elementwise op (pc_binary in vk_ops_elementwise.c); third offset unused.
layout(push_constant) uniform PC {
    uint dst_off, src_off, unused_off;
    uint N;
} pc;

void main() {
    uint i = vka_global_id();
    if (i >= pc.N) return;
    dst[pc.dst_off + i] += src[pc.src_off + i];
}
