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

layout(constant_id = 1) const uint VEC4S = 0;

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
