#version 450
#extension GL_GOOGLE_include_directive : require
// Bias gradient of a linear layer: dbias[o] += sum_n dout[n, o], dout (N, OC).
// Column layout and reduction (deterministic, no scratch): colreduce.glsl.
// vka:texel-variant: CPU-type devices with OC and the offsets multiples of 4 (VEC4 = 1) sum 4
// neighbouring columns per invocation as a vec4, one invocation per 4 columns down all rows
// (COLS = WG: no row lanes, no barrier), reading dout's rows through a texel view (binding 12)
// in the VKA_TEXEL build: on llvmpipe one gather per row instead of a loop over the lanes. The
// same sum per column, in the same order, as the one-column-per-invocation CPU-type layout.
#include "common.glsl"
#include "colreduce.glsl"
#include "sumloop.glsl"

layout(constant_id = 2) const uint VEC4 = 0;

layout(set = 0, binding = 0) buffer Dbias { float dbias[]; };
layout(set = 0, binding = 1) readonly buffer Dout { float dout[]; };
layout(set = 0, binding = 0) buffer Dbias4 { vec4 dbias4[]; };
layout(set = 0, binding = 1) readonly buffer Dout4 { vec4 dout4[]; };
#ifdef VKA_TEXEL
layout(set = 0, binding = 12) uniform samplerBuffer dout_tex;
#endif

#include "pc/reduce.h"
VKA_PC_BLOCK(VKA_PC_BIAS_BACKWARD_VIEWS, VKA_PC_BIAS_BACKWARD)

uint o; // this invocation's column (VEC4: its first column / 4)

float element(uint n) { return dout[pc.dout_off + n * pc.OC + o]; }

vec4 element4(uint n) {
    uint q = ((pc.dout_off + n * pc.OC) >> 2) + o;
#ifdef VKA_TEXEL
    return texelFetch(dout_tex, int(q));
#else
    return dout4[q];
#endif
}

void main() {
    if (VEC4 != 0u) {
        o = vka_global_id();
        uint rows = 4u * o < pc.OC ? pc.N : 0u;
        vec4 acc = vec4(0.0);
        UNROLLED_SUM(vec4, acc, element4, 0u, rows, 1u)
        if (4u * o < pc.OC) dbias4[(pc.dbias_off >> 2) + o] += acc;
        return;
    }
    o = col_index();
    uint rows = o < pc.OC ? pc.N : 0u;
    float acc = 0.0;
    UNROLLED_SUM(float, acc, element, col_row_lane(), rows, RL)
    acc = col_reduce(vec2(acc, 0.0)).x;
    if (o < pc.OC && col_row_lane() == 0u) dbias[pc.dbias_off + o] += acc;
}
