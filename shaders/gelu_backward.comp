#version 450
#extension GL_GOOGLE_include_directive : require
// dinp += gelu'(inp) * dout, the derivative of the tanh-form GELU (see gelu.glsl).
#include "common.glsl"
#include "gelu.glsl"

layout(set = 0, binding = 0) buffer Dinp { float dinp[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 2) readonly buffer Dout { float dout[]; };

layout(push_constant) uniform PC {
    uint dinp_off, inp_off, dout_off;
    uint N;
} pc;

void main() {
    uint i = vka_global_id();
    if (i >= pc.N) return;
    dinp[pc.dinp_off + i] += gelu_grad(inp[pc.inp_off + i]) * dout[pc.dout_off + i];
}
