#version 450
// Softmax along one axis. The tensor is read as [outer, axis, inner]; one workgroup per (outer, inner)
// row reduces max and sum in shared memory. LOG=1 gives LogSoftmax.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint LOG = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint rows, axis_len, inner;
} pc;

shared float partial[WG];

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint base = (row / pc.inner) * pc.axis_len * pc.inner + row % pc.inner;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);

    float m = -3.402823466e38;
    for (uint k = t; k < pc.axis_len; k += WG) m = max(m, LOAD(X, base + k * pc.inner));
    partial[t] = m;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] = max(partial[t], partial[t + s]);
        barrier();
    }
    m = partial[0];
    barrier();

    float sum = 0.0;
    for (uint k = t; k < pc.axis_len; k += WG) sum += exp(LOAD(X, base + k * pc.inner) - m);
    partial[t] = sum;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    sum = partial[0];

    for (uint k = t; k < pc.axis_len; k += WG) {
        float v = LOAD(X, base + k * pc.inner) - m;
        STORE(Y, base + k * pc.inner, LOG == 1 ? v - log(sum) : exp(v) / sum);
    }
}
