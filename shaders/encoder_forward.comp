#version 450
#extension GL_GOOGLE_include_directive : require
// Token + position embedding: out (B, T, C) = wte[tokens[b, t]] + wpe[t].
// A token id outside wte's rows yields NaN (visible) instead of an out-of-bounds read.
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

void main() {
    uint i = vka_global_id();
    if (i >= pc.P * pc.C) return;
    uint c = i % pc.C;
    uint p = i / pc.C;
    uint t = (pc.pos0 + p) % pc.T - pc.wpe_row0;
    int tok = tokens[pc.tokens_off + p];
    bool valid = tok >= 0 && uint(tok) < pc.wte_rows;
    float e;
    if (valid && uint(tok) - pc.tok0 < pc.tok_rows)
        e = wte[pc.wte_off + (uint(tok) - pc.tok0) * pc.C + c];
    else if (!valid && pc.nan_ids != 0u)
        e = uintBitsToFloat(0x7fc00000u);
    else
        return; // another dispatch's vocabulary rows
    out_[pc.out_off + i] = e + wpe[pc.wpe_off + t * pc.C + c];
}
