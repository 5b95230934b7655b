// The logits of crossentropy_forward.comp and crossentropy_backward.comp (binding 1), f32 or
// 16-bit (issue 19): specialization constant L16 is logits' vka_dtype (0 f32, 1 bf16, 2 fp16).
// A 16-bit view holds two elements a word, element 2i in the low half; its offsets count words
// and pc.logits_half flags a view whose first element is its first word's high half.
#ifndef VKA_CROSSENTROPY_GLSL
#define VKA_CROSSENTROPY_GLSL
#include "half.glsl"

layout(constant_id = 3) const uint L16 = 0u;

layout(set = 0, binding = 1) readonly buffer Logits16 { uint logits16[]; };

// Index of row i's first logit: into logits[] (f32) or in halves of logits16[] (16-bit).
uint logits_row(uint i) {
    return (L16 == 0u ? pc.logits_off : 2u * pc.logits_off + pc.logits_half) + i * pc.Vp;
}

// The logit at index e (logits_row's units), in f32: a 16-bit one widened exactly.
float logit(uint e) {
    if (L16 == 0u) return logits[e];
    return widen16_to(L16 == 2u, (logits16[e >> 1] >> ((e & 1u) << 4)) & 0xFFFFu);
}

#endif
