#version 450
// y = f(x) elementwise over contiguous tensors; f is chosen by a specialization constant.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;  // see kernels.yaml: 0 relu, 1 sigmoid, 2 tanh

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint n;
    float alpha, beta;
} pc;

void main() {
    uint i = flat_index(256);
    if (i >= pc.n) return;
    float v = LOAD(Tensor(pc.x), i);
    float r;
    if (OP == 0) r = max(v, 0.0);
    else if (OP == 1) r = 1.0 / (1.0 + exp(-v));
    else r = tanh(clamp(v, -15.0, 15.0));  // unclamped tanh overflows exp() on some drivers
    STORE(Tensor(pc.y), i, r);
}
