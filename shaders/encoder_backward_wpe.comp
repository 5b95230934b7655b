#version 450
#extension GL_GOOGLE_include_directive : require
// dwpe (maxT, C) += sum over b of dout (B, T, C): one invocation per (t, c), b in order
// (deterministic, no atomics).
#include "common.glsl"

layout(set = 0, binding = 0) buffer Dwpe { float dwpe[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };

// A dispatch covers B sequences and T positions (a block of rows, split at the binding limit);
// sequence b of the bound dout starts b * dout_stride elements in.
#include "pc/encoder.h"
VKA_PC_BLOCK(VKA_PC_ENCODER_WPE_VIEWS, VKA_PC_ENCODER_WPE)

void main() {
    uint i = vka_global_id(); // (t, c)
    if (i >= pc.T * pc.C) return;
    float sum = 0.0;
    for (uint b = 0; b < pc.B; b++) sum += dout[pc.dout_off + b * pc.dout_stride + i];
    dwpe[pc.dwpe_off + i] += sum;
}
