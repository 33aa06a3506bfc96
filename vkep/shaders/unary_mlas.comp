#version 450
// unary.comp for the ops ORT's CPU EP computes with MLAS's tanh and erf (Tanh, Erf, the Gelus) and Eigen's sin and cos
// (Sin, Cos), which this variant computes as they do, to the last bit (MLAS_OPS: unary_ops.glsl, mlas_logistic.glsl). A shader of its own
// because their emulated fused multiply-adds cost lavapipe ~0.5 s more to compile every pipeline that holds them
// (a pipeline is compiled from the whole shader before its op constant folds the others away).
#extension GL_GOOGLE_include_directive : require
#define MLAS_OPS 1
#include "unary_body.glsl"
