#version 450
#extension GL_GOOGLE_include_directive : require
// dst[i] = src[i] for i < N, converted (the backend's convert op, src/backend.h): the bits of
// src/cpu/convert.h's reference conversions, in integer arithmetic, so that every device gives
// the CPU backend's bits whatever its float conversion rounding. 16-bit views hold two elements
// a 32-bit word (element 2i in the low half); one invocation per word of the 16-bit side. An odd
// N leaves the high half of the 16-bit dst's last word as it was.
#include "common.glsl"
#include "half.glsl"

// 0: f32 -> bf16, 1: f32 -> fp16, 2: bf16 -> f32, 3: fp16 -> f32, 4: 16-bit copy
layout(constant_id = 1) const uint MODE = 0u;

layout(set = 0, binding = 0) buffer Dst { uint dst_[]; };
layout(set = 0, binding = 1) readonly buffer Src { uint src_[]; };

#include "pc/convert.h"
VKA_PC_BLOCK(VKA_PC_CONVERT_VIEWS, VKA_PC_CONVERT)

uint narrow(uint u) { return MODE == 0u ? f32_to_bf16(u) : f32_to_f16(u); }
uint widen(uint h) { return MODE == 2u ? h << 16 : f16_to_f32(h); }

void main() {
    uint w = vka_global_id();
    if (w >= (pc.N + 1u) >> 1) return;
    bool pair = 2u * w + 1u < pc.N; // both halves of word w are elements
    if (MODE <= 1u) {
        uint lo = narrow(src_[pc.src_off + 2u * w]);
        uint hi = pair ? narrow(src_[pc.src_off + 2u * w + 1u]) : dst_[pc.dst_off + w] >> 16;
        dst_[pc.dst_off + w] = lo | (hi << 16);
    } else if (MODE <= 3u) {
        uint word = src_[pc.src_off + w];
        dst_[pc.dst_off + 2u * w] = widen(word & 0xFFFFu);
        if (pair) dst_[pc.dst_off + 2u * w + 1u] = widen(word >> 16);
    } else {
        uint word = src_[pc.src_off + w];
        dst_[pc.dst_off + w] =
            pair ? word : (word & 0xFFFFu) | (dst_[pc.dst_off + w] & 0xFFFF0000u);
    }
}
