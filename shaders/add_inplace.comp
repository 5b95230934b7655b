#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// dst += src over N elements (residual backward; dst may be src).
// vka:texel-variant: the CPU-type vec4 layout of elementwise.glsl, dst and src read through
// texel views (bindings 12, 13) in the VKA_TEXEL build.
#include "common.glsl"
#include "elementwise.glsl"

layout(set = 0, binding = 0) buffer Dst { float dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { float src[]; };
layout(set = 0, binding = 0) buffer Dst4 { vec4 dst4[]; };
layout(set = 0, binding = 1) readonly buffer Src4 { vec4 src4[]; };
#ifdef VKA_TEXEL
layout(set = 0, binding = 12) uniform samplerBuffer dst_tex;
layout(set = 0, binding = 13) uniform samplerBuffer src_tex;
#endif

// Same block as every elementwise op (pc_binary in vk_ops_elementwise.c); third offset unused.
#include "pc/elementwise.h"
VKA_PC_BLOCK(VKA_PC_ADD_INPLACE_VIEWS, VKA_PC_BINARY)

void main() {
    if (VEC4S == 0u) {
        uint i = vka_global_id();
        if (i >= pc.N) return;
        dst[pc.dst_off + i] += src[pc.src_off + i];
        return;
    }
    [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
        uint q = vec4_index(r);
        if (q >= pc.N >> 2) return;
        uint o = (pc.dst_off >> 2) + q;
        dst4[o] = VKA_LOAD4(dst_tex, dst4, o) + VKA_LOAD4(src_tex, src4, (pc.src_off >> 2) + q);
    }
}
