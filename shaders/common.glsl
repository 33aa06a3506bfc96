// Shared by every vkep shader: tensors are buffer device addresses passed in push constants.
// A variant is chosen with -DDTYPE=...: 0 float32, 1 float16 (stored as 16-bit, computed in fp32).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_scalar_block_layout : require

#ifndef DTYPE
#define DTYPE 0
#endif

#if DTYPE == 1
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define STORE_T float16_t
#define ELEM_ALIGN 2
#else
#define STORE_T float
#define ELEM_ALIGN 4
#endif

layout(buffer_reference, scalar, buffer_reference_align = ELEM_ALIGN) buffer Tensor { STORE_T v[]; };

#define LOAD(t, i) float((t).v[i])
#define STORE(t, i, x) (t).v[i] = STORE_T(x)

// flat invocation index over a 2-D grid of 1-D workgroups (grids wider than 65535 groups fold into y)
uint flat_index(uint wg_size) {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * wg_size;
}
