#version 450
#extension GL_GOOGLE_include_directive : require
// Cross-entropy of softmax(logits) per row i (nats), as llm.c crossentropy_forward but stable:
//   losses[i] = logsumexp(logits[i, :V]) - logits[i, targets[i]]
// logsumexp = max + log(sum exp(x - max)), gathered online in one read of the row (padding
// columns V..Vp are never read). A target outside [0, V) -- -1, ignored, or an invalid one, which
// the host reports after the run (vk_commands.c) -- gives loss 0, never a read out of range.
// Row layout and reductions: rowreduce.glsl.
//
// 16-bit logits (specialization constant L16, crossentropy.glsl): each logit is widened exactly
// where it is read and the arithmetic is the f32 kernel's, so the losses are bitwise the f32
// op's on the widened logits.
#include "common.glsl"
#include "rowreduce.glsl"

layout(set = 0, binding = 0) writeonly buffer Losses { float losses[]; };
layout(set = 0, binding = 1) readonly buffer Logits { float logits[]; };
layout(set = 0, binding = 2) readonly buffer Targets { int targets[]; };

#include "pc/crossentropy.h"
VKA_PC_BLOCK(VKA_PC_CROSSENTROPY_FORWARD_VIEWS, VKA_PC_CROSSENTROPY)

#include "crossentropy.glsl"

void main() {
    uint i = seg_row(), lane = seg_lane();
    if (SEG == 1u && i >= pc.N) return;
    uint len = i < pc.N ? pc.V : 0u;
    uint row = logits_row(i);

    vec2 ms = MS_EMPTY;
    for (uint j = lane; j < len; j += SEG) ms_add(ms, logit(row + j));
    ms = seg_reduce(ms, RED_MAXSUM);

    if (i >= pc.N || lane != 0u) return;
    int t = targets[pc.targets_off + i];
    float loss = 0.0;
    if (t >= 0 && uint(t) < pc.V) loss = ms.x + log(ms.y) - logit(row + uint(t));
    losses[pc.losses_off + i] = loss;
}
