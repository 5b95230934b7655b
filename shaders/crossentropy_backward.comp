#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef VKA_S16
#extension GL_EXT_shader_16bit_storage : require
#endif
// Fused softmax + cross-entropy backward (llm.c crossentropy_softmax_backward), WRITES:
//   dlogits[i, j] = (softmax(logits[i, :V])[j] - (j == targets[i])) * dloss   for j < V,
//   dlogits[i, j] = 0                                                     for V <= j < Vp,
// and a zero row for a target outside [0, V) (-1: ignored; others the host reports after the
// run). dloss is pc.dloss, or dlosses[dloss_off] when has_dloss (the model's 1 / count of
// counted positions, written per batch).
// May run in place (dlogits and logits the same memory, as llm.c): pass 1 reads the whole row
// before the reduction's barrier, and in pass 2 each element is read by the invocation that then
// overwrites it. Row layout and reductions: rowreduce.glsl.
//
// 16-bit logits and/or dlogits (specialization constants L16, crossentropy.glsl, and D16, the
// same codes): logits widen exactly where read, dlogits' f32 value is the f32 kernel's
// expression, rounded to nearest even by half.glsl (the convert op's bits). A 16-bit dlogits is
// written a word (two columns) per iteration; a word the row shares with its neighbour (odd Vp,
// or a view starting mid-word) is updated on this row's half only, by atomicAnd / atomicOr, so
// rows in other invocations do not race. In place, both halves of a whole word are read by the
// invocation that then stores it.
//
// vka:s16-variant: also built with VKA_S16 defined (VKA_SHADER_CROSSENTROPY_BACKWARD_S16), for
// devices with 16-bit storage (vk_internal.h, s16_kernels): dlogits' lone halves (a word the row
// shares with its neighbour, or the padding half) are stored as uint16_t instead of by
// atomicAnd / atomicOr, whole words as before; logits are read as words (as matmul.comp's
// VKA_S16 build says why). The same conversions, so the same bits; in place as before.
#include "common.glsl"
#include "rowreduce.glsl"

// Neither is restrict: they may alias.
layout(set = 0, binding = 0) writeonly buffer Dlogits { float dlogits[]; };
layout(set = 0, binding = 1) readonly buffer Logits { float logits[]; };
layout(set = 0, binding = 2) readonly buffer Targets { int targets[]; };
layout(set = 0, binding = 3) readonly buffer Dloss { float dlosses[]; };

#include "pc/crossentropy.h"
VKA_PC_BLOCK(VKA_PC_CROSSENTROPY_BACKWARD_VIEWS, VKA_PC_CROSSENTROPY)

#include "crossentropy.glsl"

layout(constant_id = 4) const uint D16 = 0u;
layout(set = 0, binding = 0) buffer Dlogits16 { uint dlogits16[]; };
#ifdef VKA_S16
layout(set = 0, binding = 0) writeonly buffer Dlogits16h { uint16_t dlogits16h[]; };
#endif

// dlogits' f32 value at column j of the row whose first logit is at index row.
float dvalue(uint row, uint j, vec2 ms, float inv_sum, int t, bool counted, float dloss) {
    float d = 0.0;
    if (j < pc.V && counted) {
        float p = exp(logit(row + j) - ms.x) * inv_sum;
        d = (p - (int(j) == t ? 1.0 : 0.0)) * dloss;
    }
    return d;
}

void main() {
    uint i = seg_row(), lane = seg_lane();
    if (SEG == 1u && i >= pc.N) return;
    uint len = i < pc.N ? pc.V : 0u;
    uint row = logits_row(i);

    vec2 ms = MS_EMPTY;
    for (uint j = lane; j < len; j += SEG) ms_add(ms, logit(row + j));
    ms = seg_reduce(ms, RED_MAXSUM);
    if (i >= pc.N) return;

    int t = targets[pc.targets_off + i];
    bool counted = t >= 0 && uint(t) < pc.V;
    float dloss = pc.has_dloss != 0u ? dlosses[pc.dloss_off] : pc.dloss;
    float inv_sum = 1.0 / ms.y;
    if (D16 == 0u) {
        uint o = pc.dlogits_off + i * pc.Vp;
        for (uint j = lane; j < pc.Vp; j += SEG)
            dlogits[o + j] = dvalue(row, j, ms, inv_sum, t, counted, dloss);
        return;
    }
    bool f16 = D16 == 2u;
    uint e0 = 2u * pc.dlogits_off + pc.out_half + i * pc.Vp; // the row's first element
    uint w1 = (e0 + pc.Vp - 1u) >> 1;
    for (uint w = (e0 >> 1) + lane; w <= w1; w += SEG) {
        uint c = 2u * w - e0; // column of the low half (wraps to -1 when it is the row before's)
        bool lo_in = 2u * w >= e0, hi_in = 2u * w + 1u < e0 + pc.Vp;
        uint lo = lo_in ? narrow16_to(f16, dvalue(row, c, ms, inv_sum, t, counted, dloss)) : 0u;
        uint hi = hi_in ? narrow16_to(f16, dvalue(row, c + 1u, ms, inv_sum, t, counted, dloss)) : 0u;
        if (lo_in && hi_in) {
            dlogits16[w] = lo | (hi << 16);
        } else if (lo_in) {
#ifdef VKA_S16
            dlogits16h[2u * w] = uint16_t(lo);
#else
            atomicAnd(dlogits16[w], 0xFFFF0000u);
            atomicOr(dlogits16[w], lo);
#endif
        } else {
#ifdef VKA_S16
            dlogits16h[2u * w + 1u] = uint16_t(hi);
#else
            atomicAnd(dlogits16[w], 0x0000FFFFu);
            atomicOr(dlogits16[w], hi << 16);
#endif
        }
    }
}
