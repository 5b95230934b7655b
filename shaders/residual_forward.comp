#version 450
#extension GL_GOOGLE_include_directive : require
// out = a + b over N elements (residual connection).
#include "common.glsl"

layout(set = 0, binding = 0) buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer A { float a[]; };
layout(set = 0, binding = 2) readonly buffer B { float b[]; };

layout(push_constant) uniform PC {
    uint out_off, a_off, b_off;
    uint N;
} pc;

void main() {
    uint i = vka_global_id();
    if (i >= pc.N) return;
    out_[pc.out_off + i] = a[pc.a_off + i] + b[pc.b_off + i];
}
