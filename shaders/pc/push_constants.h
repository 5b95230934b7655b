// One push-constant block for a shader and its host code alike: shaders/pc/<op>.h is included
// by the op's shaders (glslangValidator -I shaders) and by src/vk/vk_ops_<op>.c, and names each
// block's fields once, in two lists:
//   VIEWS(V, VA): the shader's bound views in binding order: V(x) gives `uint x_off`, VA(x, n)
//     `uint x_off[n]` (n consecutive bindings): the elements before view i in the range bound
//     for it (vkv_off). vkv_dispatch writes them from vkv_call.bind; ops never do.
//   FIELDS(U, F, UA): the rest, in order: U(x) a uint, F(x) a float, UA(x, n) n uints.
// Only 4-byte scalars and arrays of them, so that std430 (push constants) and C lay them out
// alike, with no padding.
//   VKA_PC_STRUCT(type, VIEWS, FIELDS)  C: typedef struct type { uint32_t view_off[n views];
//                                       fields } type, checked to fit 128 bytes (what every
//                                       Vulkan device allows); nothing in GLSL.
//   VKA_PC_SAME_VIEWS(type, VIEWS)      C: another shader sharing type has as many views.
//   VKA_PC_BLOCK(VIEWS, FIELDS)         GLSL: layout(push_constant) uniform PC { ... } pc;
#ifndef VKA_PC_PUSH_CONSTANTS_H
#define VKA_PC_PUSH_CONSTANTS_H

#define VKA_PC_COUNT_V_(x) +1
#define VKA_PC_COUNT_VA_(x, n) +(n)
#define VKA_PC_VIEWS_OF_(VIEWS) (0 VIEWS(VKA_PC_COUNT_V_, VKA_PC_COUNT_VA_))

#ifdef __STDC_VERSION__ /* C */
#include <stdint.h>
#define VKA_PC_U_(x) uint32_t x;
#define VKA_PC_F_(x) float x;
#define VKA_PC_UA_(x, n) uint32_t x[n];
#define VKA_PC_STRUCT(type, VIEWS, FIELDS)                                                  \
    typedef struct type {                                                                   \
        uint32_t view_off[VKA_PC_VIEWS_OF_(VIEWS)]; /* by vkv_dispatch */                   \
        FIELDS(VKA_PC_U_, VKA_PC_F_, VKA_PC_UA_)                                            \
    } type;                                                                                 \
    _Static_assert(sizeof(type) <= 128, #type ": more than 128 bytes of push constants");
#define VKA_PC_SAME_VIEWS(type, VIEWS)                                                      \
    _Static_assert(VKA_PC_VIEWS_OF_(VIEWS) == sizeof(((type *)0)->view_off) / 4,            \
                   #VIEWS ": not as many views as " #type);
#define VKA_PC_BLOCK(VIEWS, FIELDS)
#else /* GLSL */
#define VKA_PC_V_(x) uint x##_off;
#define VKA_PC_VA_(x, n) uint x##_off[n];
#define VKA_PC_U_(x) uint x;
#define VKA_PC_F_(x) float x;
#define VKA_PC_UA_(x, n) uint x[n];
#define VKA_PC_STRUCT(type, VIEWS, FIELDS)
#define VKA_PC_SAME_VIEWS(type, VIEWS)
#define VKA_PC_BLOCK(VIEWS, FIELDS)                                                         \
    layout(push_constant) uniform PC {                                                      \
        VIEWS(VKA_PC_V_, VKA_PC_VA_)                                                        \
        FIELDS(VKA_PC_U_, VKA_PC_F_, VKA_PC_UA_)                                            \
    } pc;
#endif

#endif
