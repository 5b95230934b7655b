#version 450
#extension GL_GOOGLE_include_directive : require
// Fused softmax + cross-entropy backward (llm.c crossentropy_softmax_backward), WRITES:
//   dlogits[i, j] = (softmax(logits[i, :V])[j] - (j == targets[i])) * dloss   for j < V,
//   dlogits[i, j] = 0                                                     for V <= j < Vp,
// and a zero row for a target outside [0, V) (-1: ignored; others the host reports after the
// run). dloss is pc.dloss, or dlosses[dloss_off] when has_dloss (the model's 1 / count of
// counted positions, written per batch).
// May run in place (dlogits and logits the same memory, as llm.c): pass 1 reads the whole row
// before the reduction's barrier, and in pass 2 each element is read by the invocation that then
// overwrites it. Row layout and reductions: rowreduce.glsl.
#include "common.glsl"
#include "rowreduce.glsl"

// Neither is restrict: they may alias.
layout(set = 0, binding = 0) writeonly buffer Dlogits { float dlogits[]; };
layout(set = 0, binding = 1) readonly buffer Logits { float logits[]; };
layout(set = 0, binding = 2) readonly buffer Targets { int targets[]; };
layout(set = 0, binding = 3) readonly buffer Dloss { float dlosses[]; };

#include "pc/crossentropy.h"
VKA_PC_BLOCK(VKA_PC_CROSSENTROPY_BACKWARD_VIEWS, VKA_PC_CROSSENTROPY)

void main() {
    uint i = seg_row(), lane = seg_lane();
    if (SEG == 1u && i >= pc.N) return;
    uint len = i < pc.N ? pc.V : 0u;
    uint row = i * pc.Vp;

    vec2 ms = MS_EMPTY;
    for (uint j = lane; j < len; j += SEG) ms_add(ms, logits[pc.logits_off + row + j]);
    ms = seg_reduce(ms, RED_MAXSUM);
    if (i >= pc.N) return;

    int t = targets[pc.targets_off + i];
    bool counted = t >= 0 && uint(t) < pc.V;
    float dloss = pc.has_dloss != 0u ? dlosses[pc.dloss_off] : pc.dloss;
    float inv_sum = 1.0 / ms.y;
    for (uint j = lane; j < pc.Vp; j += SEG) {
        float d = 0.0;
        if (j < pc.V && counted) {
            float p = exp(logits[pc.logits_off + row + j] - ms.x) * inv_sum;
            d = (p - (int(j) == t ? 1.0 : 0.0)) * dloss;
        }
        dlogits[pc.dlogits_off + row + j] = d;
    }
}
