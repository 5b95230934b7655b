// Row reductions shared by softmax, layernorm, cross-entropy, mean and grad_norm.
//
// Layout. A workgroup of WG invocations works on WG / SEG rows at once, SEG consecutive
// invocations per row (SEG, specialization constant 1, is a power of two dividing WG). The
// invocations of a row stride over it (elements lane, lane + SEG, ...), so neighbouring
// invocations touch neighbouring elements: coalesced on a GPU, one vector load per SIMD group on
// a CPU-type driver. A row longer than SEG is looped over.
//
// Combining a row's SEG partial results, in a fixed order (deterministic):
//  - SEG == 1: one invocation walks the whole row; the reductions compile to nothing and there
//    is no barrier at all. The CPU-type variant's choice for rows (lavapipe/llvmpipe runs a
//    workgroup's SIMD groups one after another on one thread, so SIMD lanes = rows costs
//    nothing, while each barrier() is a coroutine switch per SIMD group); also GPU rows of one
//    element.
//  - GPU variant (VKA_CPU false): a shared-memory tree, one barrier per level.
//  - CPU-type variant with SEG > 1 (mean, grad_norm, and rows too long for llvmpipe's loop
//    budget): a single barrier, then every invocation folds its row's SEG partials itself, in
//    order.
//
// Whole workgroups must reach seg_reduce() (it holds barriers when SEG > 1): invocations past the
// last row take part with an empty row, and may only return early when SEG == 1.
#ifndef VKA_ROWREDUCE_GLSL
#define VKA_ROWREDUCE_GLSL

layout(constant_id = 1) const uint SEG = 1;
layout(constant_id = 2) const bool VKA_CPU = false;

shared vec2 vka_red[gl_WorkGroupSize.x];

// Position of this invocation within its row, and the row it works on.
uint seg_lane() { return gl_LocalInvocationID.x & (SEG - 1u); }
uint seg_row() { return vka_group_id() * (gl_WorkGroupSize.x / SEG) + gl_LocalInvocationID.x / SEG; }

// Online softmax statistics (Milakov & Gimelshein 2018): (running max m, sum of exp(x - m)).
const vec2 MS_EMPTY = vec2(VKA_NEG_INF, 0.0);

// Fold one logit in; -inf (masked) adds nothing, NaN propagates into the sum.
void ms_add(inout vec2 ms, float x) {
    if (x > ms.x) {
        ms.y = ms.y * exp(ms.x - x) + 1.0;
        ms.x = x;
    } else if (x != VKA_NEG_INF) {
        ms.y += exp(x - ms.x);
    }
}

// Merge two partial statistics; two empty ones stay empty (never exp(-inf - -inf) = NaN).
vec2 ms_combine(vec2 a, vec2 b) {
    float m = max(a.x, b.x);
    if (m == VKA_NEG_INF) return MS_EMPTY;
    return vec2(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

const int RED_SUM = 0;    // componentwise sum
const int RED_MAXSUM = 1; // ms_combine

vec2 red_combine(vec2 a, vec2 b, int op) { return op == RED_SUM ? a + b : ms_combine(a, b); }

// Combine v over the SEG invocations of this row; every one of them gets the result.
vec2 seg_reduce(vec2 v, int op) {
    if (SEG == 1u) return v;
    uint t = gl_LocalInvocationID.x;
    uint base = t & ~(SEG - 1u);
    barrier(); // earlier reads of vka_red (a previous seg_reduce) are done
    vka_red[t] = v;
    barrier();
    if (VKA_CPU) {
        vec2 r = vka_red[base];
        for (uint i = 1u; i < SEG; i++) r = red_combine(r, vka_red[base + i], op);
        return r;
    }
    for (uint s = SEG / 2u; s > 0u; s >>= 1) {
        if (t - base < s) vka_red[t] = red_combine(vka_red[t], vka_red[t + s], op);
        barrier();
    }
    return vka_red[base];
}

float seg_sum(float v) { return seg_reduce(vec2(v, 0.0), RED_SUM).x; }

#endif
