#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// matmul.comp's CPU-type variant reading op(A) and op(B) through uniform texel buffers, for
// devices with texel_operands (src/vk/vk_internal.h): on llvmpipe a texel fetch with
// lane-varying addresses is one gather, a storage buffer load a loop over the 8 lanes with a
// bounds check per component, so the product runs about twice as fast (matmul_cpu.glsl).
#define VKA_MATMUL_TEXEL 1
#include "matmul.glsl"
