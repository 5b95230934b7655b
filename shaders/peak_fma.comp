#version 450
#extension GL_GOOGLE_include_directive : require
// Arithmetic ceiling (vkpeak-style): each invocation runs 8 independent vec4 multiply-add chains
// for `iters` steps, 64 FLOPs a step, and writes their sum so nothing is optimised away. The
// chains converge to b / (1 - a) and stay finite. src/cpu/peak.c is the CPU backend's version.
//
// On lavapipe (Mesa 22.3, LLVM 15, 256-bit JIT) the loop's machine code, read with perf and gdb
// (the release build ignores GALLIVM_DEBUG), is 32 vmulps + 32 vaddps on ymm registers per
// step: full 256-bit width (8 invocations a vector, each vec4 component its own register), but
// fma() is not fused: the driver lowers it to a multiply and an add, and no shader spelling
// gets a vfmadd. On Zen 4/5, multiplies and adds issue on separate pipes (2 + 2 a cycle), as
// many FLOPs as 2 FMA pipes, so this is still lavapipe's ceiling: about half of bench's AVX-512
// processor peak. Every matmul and other kernel is held to the same unfused arithmetic.
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };

#include "pc/peak.h"
VKA_PC_BLOCK(VKA_PC_PEAK_VIEWS, VKA_PC_PEAK)

void main() {
    uint i = vka_global_id();
    if (i >= pc.n) return;
    float s = float((pc.first + i) % 1024u) * (1.0 / 1024.0);
    vec4 a = vec4(0.999, 0.998, 0.997, 0.996);
    vec4 b = vec4(1e-3, 2e-3, 3e-3, 4e-3);
    vec4 x0 = vec4(s), x1 = x0 + 0.1, x2 = x0 + 0.2, x3 = x0 + 0.3;
    vec4 x4 = x0 + 0.4, x5 = x0 + 0.5, x6 = x0 + 0.6, x7 = x0 + 0.7;
    for (uint k = 0u; k < pc.iters; k++) {
        x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);
        x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);
    }
    vec4 t = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);
    out_[pc.out_off + i] = (t.x + t.y) + (t.z + t.w);
}
