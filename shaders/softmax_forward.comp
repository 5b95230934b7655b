#version 450
#extension GL_GOOGLE_include_directive : require
// Masked row softmax (src/backend.h, vkb_softmax), stable, as Vaswani et al. 2017 eq. 1:
//   x[k] = scale * inp[r, k] + mask[r / mask_rows, k]   (-inf where causal-masked)
//   out[r, k] = exp(x[k] - max) / sum_k exp(x[k] - max), and 0 for masked keys.
// Pass 1 gathers (max, sum) online in one read of the row (Milakov & Gimelshein 2018); pass 2
// writes. Causal rows only read their visible keys. A fully masked row is written as zeros.
// Row layout and reductions: rowreduce.glsl.
#include "common.glsl"
#include "rowreduce.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Inp { float inp[]; };
layout(set = 0, binding = 2) readonly buffer Mask { float mask[]; };

#include "pc/softmax.h"
VKA_PC_BLOCK(VKA_PC_SOFTMAX_FORWARD_VIEWS, VKA_PC_SOFTMAX_FORWARD)

// Keys [0, visible) of row r can be unmasked by causality: query q = r % Tq sees keys
// k <= q + Tk - Tq (queries aligned to the last keys).
uint visible_keys(uint r) {
    if (pc.causal == 0u) return pc.Tk;
    int last = int((pc.row0 + r) % pc.Tq) + int(pc.Tk) - int(pc.Tq);
    return uint(clamp(last + 1, 0, int(pc.Tk)));
}

float logit(uint r, uint k) {
    float x = pc.scale * inp[pc.inp_off + r * pc.Tk + k];
    if (pc.has_mask != 0u)
        x += mask[pc.mask_off + ((pc.row0 + r) / pc.mask_rows - pc.mask_row0) * pc.Tk + k];
    return x;
}

void main() {
    uint r = seg_row(), lane = seg_lane();
    if (SEG == 1u && r >= pc.R) return;
    uint kend = r < pc.R ? visible_keys(r) : 0u;

    vec2 ms = MS_EMPTY;
    for (uint k = lane; k < kend; k += SEG) ms_add(ms, logit(r, k));
    ms = seg_reduce(ms, RED_MAXSUM);
    if (r >= pc.R) return;

    // Nothing visible (or every visible key masked): all zeros, never exp(-inf - -inf).
    if (ms.x == VKA_NEG_INF) kend = 0u;
    float inv_sum = 1.0 / ms.y;
    uint row = pc.out_off + r * pc.Tk;
    for (uint k = lane; k < pc.Tk; k += SEG)
        out_[row + k] = k < kend ? exp(logit(r, k) - ms.x) * inv_sum : 0.0;
}
