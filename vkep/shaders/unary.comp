#version 450
// y = f(x) elementwise over contiguous tensors; f is chosen by a specialization constant (OP codes in
// vkep/kernels/elementwise.py, UNARY_OPS). Float variants compute in float32; integer variants in int /
// int64_t. The output type (DTYPE_Y) may differ from the input's: IsNaN/IsInf give bool, Cast anything.
// FLOAT64: float64 Neg, Abs and Cast between float64 and float32, in double (unary_body.glsl).
#extension GL_GOOGLE_include_directive : require
#ifdef FLOAT64
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#endif
#include "unary_body.glsl"
