// Shared conventions of vkattn's compute shaders (see src/vk/vk_internal.h).
//
// - Bindings: set 0, binding i = the op's i-th tensor view, bound as its own range of its
//   buffer (from its start aligned down to the device's offset alignment); the elements before
//   the view in that range (< 64) come in the push constants (out_off, inp_off, ...). No range
//   passes the binding limit (maxStorageBufferRange or lower): the host splits larger tensors
//   into blocks, one dispatch each, and passes what a block needs to know of the whole (its
//   first row, leading dimensions, ...) in the push constants too. Each op's blocks are defined
//   once for GLSL and C in pc/<op>.h (pc/push_constants.h): VKA_PC_BLOCK(VIEWS, FIELDS).
// - Workgroup size: specialization constant 0. Tiles and variants: constants 1, 2, ...
// - Dispatches are a linear count of workgroups that the host may fold into a 2-D grid when it
//   exceeds maxComputeWorkGroupCount[0]; use vka_group_id() and return (whole workgroups) past
//   the end of the work.
// - VKA_CPU_DEVICE-style variant switches are specialization constants set by the host from the
//   device type, so one SPIR-V serves GPUs and CPU-type drivers (lavapipe) alike.
#ifndef VKA_COMMON_GLSL
#define VKA_COMMON_GLSL

// Every .comp starts with: #version 450, #extension GL_GOOGLE_include_directive : require.

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

// Linear workgroup index of a dispatch folded into (x, y).
uint vka_group_id() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// Linear invocation index (group * workgroup size + local index).
uint vka_global_id() { return vka_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; }

const float VKA_NEG_INF = -1.0 / 0.0;

#endif
