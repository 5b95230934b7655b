#version 450
#extension GL_GOOGLE_include_directive : require
// Token + position embedding: out (B, T, C) = wte[tokens[b, t]] + wpe[t].
// A token id outside wte's rows yields NaN (visible) instead of an out-of-bounds read.
//
// 16-bit out, wte and/or wpe (bf16 or fp16, specialization constant E16): a 16-bit wte or wpe
// element is widened exactly where it is read, the sum is the f32 kernel's, and a 16-bit out is
// that sum rounded to nearest even by the convert op's integer arithmetic (half.glsl), so
// out16 == convert(out32). Each invocation then owns a 32-bit word of out (two elements); a
// word whose other half this dispatch does not write (a row of another vocabulary block, the
// element before the view's first or past its last: odd C, blocks starting mid-word) is updated
// with atomicAnd / atomicOr on its own half only.
#include "common.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer Tokens { int tokens[]; };
layout(set = 0, binding = 2) readonly buffer Wte { float wte[]; };
layout(set = 0, binding = 3) readonly buffer Wpe { float wpe[]; };

// A dispatch covers positions pos0 .. pos0 + P - 1 (of B*T) and the vocabulary rows
// tok0 .. tok0 + tok_rows - 1 bound (split at the binding limit): it writes the positions whose
// token lies in them, and (nan_ids) those whose id is not a row of wte at all.
#include "pc/encoder.h"
VKA_PC_BLOCK(VKA_PC_ENCODER_FORWARD_VIEWS, VKA_PC_ENCODER_FORWARD)

#include "half.glsl"

// Which views are 16-bit (0, the default: the f32 kernel): bit 0 out, 1 wte, 2 wpe; bit 3: they
// are fp16 (else bf16). A 16-bit view holds two elements a word, element 2i in the low half; its
// offset counts words, and pc.half0 says which views start at their first word's high half.
layout(constant_id = 1) const uint E16 = 0u;
const bool F16 = (E16 & 8u) != 0u;

layout(set = 0, binding = 0) buffer Out16 { uint out16[]; };
layout(set = 0, binding = 2) readonly buffer Wte16 { uint wte16[]; };
layout(set = 0, binding = 3) readonly buffer Wpe16 { uint wpe16[]; };

// Element i of the wte or wpe view, in f32 (16-bit: from its words, pc.half0 its first half).
float wte_at(uint i) {
    if ((E16 & 2u) == 0u) return wte[pc.wte_off + i];
    uint e = 2u * pc.wte_off + ((pc.half0 >> 1) & 1u) + i;
    return WIDEN16_AT(F16, wte16, e);
}
float wpe_at(uint i) {
    if ((E16 & 4u) == 0u) return wpe[pc.wpe_off + i];
    uint e = 2u * pc.wpe_off + ((pc.half0 >> 2) & 1u) + i;
    return WIDEN16_AT(F16, wpe16, e);
}

// Whether this dispatch writes element i (< P * C) of out's view, and its value v.
bool embed(uint i, out float v) {
    uint c = i % pc.C;
    uint p = i / pc.C;
    uint t = (pc.pos0 + p) % pc.T - pc.wpe_row0;
    int tok = tokens[pc.tokens_off + p];
    bool valid = tok >= 0 && uint(tok) < pc.wte_rows;
    float e;
    if (valid && uint(tok) - pc.tok0 < pc.tok_rows)
        e = wte_at((uint(tok) - pc.tok0) * pc.C + c);
    else if (!valid && pc.nan_ids != 0u)
        e = uintBitsToFloat(0x7fc00000u);
    else
        return false; // another dispatch's vocabulary rows
    v = e + wpe_at(t * pc.C + c);
    return true;
}

// Word w of out's 16-bit view: its elements 2w - h and 2w + 1 - h (h = pc.half0 & 1).
void store16(uint w) {
    uint h = pc.half0 & 1u, n = pc.P * pc.C;
    float vlo, vhi;
    bool lo = (w > 0u || h == 0u) && 2u * w - h < n && embed(2u * w - h, vlo);
    bool hi = 2u * w + 1u - h < n && embed(2u * w + 1u - h, vhi);
    uint q = pc.out_off + w;
    if (lo && hi) {
        out16[q] = narrow16_to(F16, vlo) | (narrow16_to(F16, vhi) << 16);
    } else if (lo) {
        atomicAnd(out16[q], 0xFFFF0000u);
        atomicOr(out16[q], narrow16_to(F16, vlo));
    } else if (hi) {
        atomicAnd(out16[q], 0x0000FFFFu);
        atomicOr(out16[q], narrow16_to(F16, vhi) << 16);
    }
}

void main() {
    uint i = vka_global_id();
    if ((E16 & 1u) != 0u) {
        if (i < ((pc.half0 & 1u) + pc.P * pc.C + 1u) / 2u) store16(i);
        return;
    }
    if (i >= pc.P * pc.C) return;
    float v;
    if (embed(i, v)) out_[pc.out_off + i] = v;
}
