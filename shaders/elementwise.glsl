// CPU-type layout of the elementwise shaders (gelu_forward/backward, residual_forward,
// add_inplace, adamw): vec4s, several per invocation, read through texel views where the host
// binds them (vka:texel-variant; src/vk/vk_internal.h "Texel loads").
//
// VEC4S (specialization constant 1) = 0: one element per invocation, the GPU variant, and the
// CPU-type one where N or an offset is not a multiple of 4. VEC4S = n > 0: the op's N elements
// as N / 4 vec4s (the host checked N and every offset are multiples of 4), n per invocation:
// the workgroup owns n * WG consecutive vec4s, and its r-th round the WG of them at r * WG, so
// that the SIMD lanes (llvmpipe runs a workgroup's invocations as lanes of one vector) touch
// neighbouring vec4s. On llvmpipe a storage buffer load or store with lane-varying addresses is
// a loop over the 8 lanes with a bounds check per component; a vec4 access pays that loop once
// for 4 elements, a texel fetch is one gather, and n > 1 spreads the per-invocation cost (the
// push constants, AdamW's scalars) over more elements. Measured on lavapipe (Mesa 22.3, GELU
// over 393,216 floats): one float per invocation 1.54 ms, a vec4 0.76 ms, a texel vec4 0.65 ms,
// 4-8 texel vec4s 0.33-0.50 ms. Each element gets the same arithmetic in either layout.
#ifndef VKA_ELEMENTWISE_GLSL
#define VKA_ELEMENTWISE_GLSL

#include "half.glsl"

layout(constant_id = 1) const uint VEC4S = 0;

// 16-bit tensors (backend.h's 16-bit rule of the elementwise ops): T16 (specialization constant
// 2) bit i set = binding i holds 16-bit elements, two a 32-bit word (element 2j in the low
// half), of type fp16 where F16 (constant 3) is true, else bf16. With T16 != 0 (and VEC4S = 0)
// an invocation owns one pair of elements, 2w and 2w + 1, so that no two invocations store to
// the same word; the arithmetic is the float32 path's, a 16-bit output its result rounded to
// nearest even (half.glsl), and the high half past an odd N keeps its value.
layout(constant_id = 2) const uint T16 = 0u;
layout(constant_id = 3) const bool F16 = false;

// The two elements of pair w from a float32 view (buf, view offset off) or, where binding
// `binding` is 16-bit, from its word view (words); n2: 2 if both are elements, else 1 (the
// second then reads as 0).
#define VKA_PAIR_LOAD(binding, buf, words, off, w, n2)                                         \
    ((T16 & (1u << (binding))) != 0u                                                          \
         ? vec2(widen16_to(F16, words[(off) + (w)] & 0xFFFFu),                                \
                (n2) == 2u ? widen16_to(F16, words[(off) + (w)] >> 16) : 0.0)                 \
         : vec2(buf[(off) + 2u * (w)], (n2) == 2u ? buf[(off) + 2u * (w) + 1u] : 0.0))

// Store pair w (v; only v.x when n2 is 1) into a float32 view or a 16-bit word view.
#define VKA_PAIR_STORE(binding, buf, words, off, w, n2, v)                                     \
    do {                                                                                      \
        if ((T16 & (1u << (binding))) != 0u) {                                                \
            uint hi_ = (n2) == 2u ? narrow16_to(F16, (v).y) : (words[(off) + (w)] >> 16);     \
            words[(off) + (w)] = narrow16_to(F16, (v).x) | (hi_ << 16);                       \
        } else {                                                                              \
            buf[(off) + 2u * (w)] = (v).x;                                                    \
            if ((n2) == 2u) buf[(off) + 2u * (w) + 1u] = (v).y;                               \
        }                                                                                     \
    } while (false)

// This invocation's pair and how many of its two elements lie below N (0: none).
uint pair_count(uint w, uint N) { return 2u * w >= N ? 0u : (2u * w + 1u < N ? 2u : 1u); }

// The vec4 index (into the N / 4 vec4s) of this invocation's round r < VEC4S.
uint vec4_index(uint r) {
    return (vka_group_id() * VEC4S + r) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
}

// The vec4 at vec4 index q of a tensor's binding: its texel view tex in the VKA_TEXEL build,
// else its storage buffer seen as vec4s (buf4).
#ifdef VKA_TEXEL
#define VKA_LOAD4(tex, buf4, q) texelFetch(tex, int(q))
#else
#define VKA_LOAD4(tex, buf4, q) buf4[q]
#endif

#endif
