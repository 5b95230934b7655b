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
// half), of type fp16 where F16 (constant 3) is true, else bf16. The arithmetic is the float32
// path's, a 16-bit output its result rounded to nearest even (half.glsl). Every invocation owns
// whole words, so that no two store to the same one:
//  - VEC4S = 0 (GPUs; on CPU-type devices a block's last N % 8 elements, and views not aligned
//    to 16 bytes): one pair of elements, 2w and 2w + 1; the high half past an odd N keeps its
//    value.
//  - VEC4S = n > 0 (CPU-type devices; the host checked that N is a multiple of 8 and that every
//    view starts at 16 bytes of its bound range): groups of 8 elements, n per invocation as the
//    vec4s above (vec4_index(r) is the group). A 16-bit view's group is one uvec4 of its words,
//    a float32 view's two vec4s, read through texel views in the VKA_TEXEL16 build (every one
//    of 32-bit words: a float32 view's as float bits), else through storage buffers. On
//    lavapipe (Mesa 22.3, GELU over 393,216 bf16 elements to bf16) a pair per invocation takes
//    about 3.0 ms, groups through storage buffers 1.9 ms, through texel views 0.7 ms (float32
//    through texel vec4s: 0.8 ms).
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

// The vec4 at vec4 index q of a tensor's binding: its texel view tex in the VKA_TEXEL build
// (VKA_TEXEL16: of 32-bit words, the float bits), else its storage buffer seen as vec4s (buf4).
// VKA_LOAD_W4: the uvec4 of 16-bit words at index q of a 16-bit view, from its texel view in
// the VKA_TEXEL16 build, else its storage buffer seen as uvec4s (words4).
#if defined(VKA_TEXEL16)
#define VKA_LOAD4(tex, buf4, q) uintBitsToFloat(texelFetch(tex, int(q)))
#define VKA_LOAD_W4(tex, words4, q) texelFetch(tex, int(q))
#elif defined(VKA_TEXEL)
#define VKA_LOAD4(tex, buf4, q) texelFetch(tex, int(q))
#define VKA_LOAD_W4(tex, words4, q) words4[q]
#else
#define VKA_LOAD4(tex, buf4, q) buf4[q]
#define VKA_LOAD_W4(tex, words4, q) words4[q]
#endif

bool is16(uint binding) { return (T16 & (1u << binding)) != 0u; }

// A word's two elements, widened.
vec2 widen16_pair(uint w) { return vec2(widen16_to(F16, w & 0xFFFFu), widen16_to(F16, w >> 16)); }
// Two elements rounded into one word.
uint narrow16_pair(vec2 v) { return narrow16_to(F16, v.x) | (narrow16_to(F16, v.y) << 16); }

// Group q's 8 elements of a view at offset off (in its elements: words for a 16-bit view) as
// two vec4s lo, hi: from its uvec4 of words (words4) or its vec4s (buf4); tex: its texel view.
#define VKA_LOAD8(binding, tex, buf4, words4, off, q, lo, hi)                                  \
    do {                                                                                      \
        if (is16(binding)) {                                                                  \
            uvec4 w_ = VKA_LOAD_W4(tex, words4, ((off) >> 2) + (q));                          \
            lo = vec4(widen16_pair(w_.x), widen16_pair(w_.y));                                \
            hi = vec4(widen16_pair(w_.z), widen16_pair(w_.w));                                \
        } else {                                                                              \
            lo = VKA_LOAD4(tex, buf4, ((off) >> 2) + 2u * (q));                               \
            hi = VKA_LOAD4(tex, buf4, ((off) >> 2) + 2u * (q) + 1u);                          \
        }                                                                                     \
    } while (false)

// Store group q's 8 elements lo, hi into a 16-bit view's uvec4 (words4) or a float32 view's
// two vec4s (buf4).
#define VKA_STORE8(binding, buf4, words4, off, q, lo, hi)                                      \
    do {                                                                                      \
        if (is16(binding)) {                                                                  \
            words4[((off) >> 2) + (q)] = uvec4(narrow16_pair((lo).xy), narrow16_pair((lo).zw), \
                                               narrow16_pair((hi).xy), narrow16_pair((hi).zw)); \
        } else {                                                                              \
            buf4[((off) >> 2) + 2u * (q)] = (lo);                                             \
            buf4[((off) >> 2) + 2u * (q) + 1u] = (hi);                                        \
        }                                                                                     \
    } while (false)

#endif
