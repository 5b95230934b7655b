#version 450
#extension GL_GOOGLE_include_directive : require
// Global gradient norm, step 1: norms of up to 7 gradient tensors, NORM_PARTIALS (spec
// constant 3, = VKA_NORM_PARTIALS) partial norms per tensor (norms, not sums of squares: a float
// holds each one whenever it holds the total; nrm2.glsl sums the squares without overflow). Workgroup w reduces part
// p = w % NORM_PARTIALS of tensor j = w / NORM_PARTIALS: a fixed block of it, strided over the
// workgroup (coalesced), combined in a fixed order (rowreduce.glsl with SEG = WG), so the norm is
// deterministic. grad_norm_finalize.comp combines the partials.
#include "common.glsl"
#include "rowreduce.glsl"
#include "sumloop.glsl"
#include "nrm2.glsl"

layout(constant_id = 3) const uint NORM_PARTIALS = 64;

layout(set = 0, binding = 0) buffer Partials { float partials[]; };
layout(set = 0, binding = 1) readonly buffer G0 { float g0[]; };
layout(set = 0, binding = 2) readonly buffer G1 { float g1[]; };
layout(set = 0, binding = 3) readonly buffer G2 { float g2[]; };
layout(set = 0, binding = 4) readonly buffer G3 { float g3[]; };
layout(set = 0, binding = 5) readonly buffer G4 { float g4[]; };
layout(set = 0, binding = 6) readonly buffer G5 { float g5[]; };
layout(set = 0, binding = 7) readonly buffer G6 { float g6[]; };

#include "pc/reduce.h"
VKA_PC_BLOCK(VKA_PC_NORM_PARTIALS_VIEWS, VKA_PC_NORM_PARTIALS)

// nrm2_term of element i of gradient J (one function per binding: the loop below picks the binding
// once per workgroup, not per element).
#define SQUARE_OF(G, J) \
    vec4 square_##J(uint i) { return nrm2_term(G[pc.g_off[J] + i]); }
SQUARE_OF(g0, 0)
SQUARE_OF(g1, 1)
SQUARE_OF(g2, 2)
SQUARE_OF(g3, 3)
SQUARE_OF(g4, 4)
SQUARE_OF(g5, 5)
SQUARE_OF(g6, 6)

void main() {
    uint w = vka_group_id(), lane = seg_lane();
    uint j = w / NORM_PARTIALS, p = w % NORM_PARTIALS;
    uint n = j < 7u ? pc.n[j] : 0u;
    // Blocks of whole workgroup strides, so every invocation reads inside its block.
    uint block = (n + NORM_PARTIALS * SEG - 1u) / (NORM_PARTIALS * SEG) * SEG;
    uint lo = min(p * block, n), hi = min(lo + block, n);
    vec4 sq = vec4(0.0);
    if (j == 0u) UNROLLED_SUM(vec4, sq, square_0, lo + lane, hi, SEG)
    else if (j == 1u) UNROLLED_SUM(vec4, sq, square_1, lo + lane, hi, SEG)
    else if (j == 2u) UNROLLED_SUM(vec4, sq, square_2, lo + lane, hi, SEG)
    else if (j == 3u) UNROLLED_SUM(vec4, sq, square_3, lo + lane, hi, SEG)
    else if (j == 4u) UNROLLED_SUM(vec4, sq, square_4, lo + lane, hi, SEG)
    else if (j == 5u) UNROLLED_SUM(vec4, sq, square_5, lo + lane, hi, SEG)
    else if (j == 6u) UNROLLED_SUM(vec4, sq, square_6, lo + lane, hi, SEG)
    sq = vec4(seg_reduce(sq.xy, RED_SUM), seg_reduce(sq.zw, RED_SUM));
    if (gl_LocalInvocationID.x == 0u && j < 7u) {
        if ((pc.accumulate & (1u << j)) != 0u) sq += nrm2_term(partials[pc.partials_off + w]);
        partials[pc.partials_off + w] = nrm2_result(sq);
    }
}
