#version 450
// y = f(x) elementwise over contiguous tensors; f is chosen by a specialization constant (OP codes in
// vkep/kernels/elementwise.py, UNARY_OPS). Float variants compute in float32; integer variants in int /
// int64_t. The output type (DTYPE_Y) may differ from the input's: IsNaN/IsInf give bool, Cast anything.
// FLOAT64: float64 Neg, Abs, Relu, Sqrt, Reciprocal, Floor, Ceil, Round, Sign, Exp, Clip, Shrink, IsNaN, IsInf, and Cast
// between float64 and DTYPE, in double (unary_body.glsl).
#extension GL_GOOGLE_include_directive : require
#include "unary_body.glsl"
