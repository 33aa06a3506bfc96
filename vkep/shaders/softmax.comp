#version 450
// Softmax along one axis. The tensor is read as [outer, axis, inner]; one workgroup per (outer, inner)
// row reduces max and sum in shared memory. MODE=1 gives LogSoftmax, MODE=2 Hardmax (1 at the first
// maximum, 0 elsewhere). The workgroup size is specialization constant 1 (wide for long rows: lavapipe
// ends a shader's loops after 65535 iterations in all).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint MODE = 0;  // 0 softmax, 1 log-softmax, 2 hardmax

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint rows, axis_len, inner;
    GROUP_BASE;
} pc;

shared float partial[1024];
shared uint first_max[1024];

void main() {
    uint row = FLAT_GROUP;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint base = (row / pc.inner) * pc.axis_len * pc.inner + row % pc.inner;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);

    float m = uintBitsToFloat(0xff800000u);  // -inf
    for (uint k = t; k < pc.axis_len; k += WG) m = max(m, LOAD(X, base + k * pc.inner));
    partial[t] = m;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] = max(partial[t], partial[t + s]);
        barrier();
    }
    m = partial[0];
    barrier();

    if (MODE == 2) {
        uint first = 0xffffffffu;
        for (uint k = t; k < pc.axis_len && first == 0xffffffffu; k += WG)
            if (LOAD(X, base + k * pc.inner) == m) first = k;
        first_max[t] = first;
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (t < s) first_max[t] = min(first_max[t], first_max[t + s]);
            barrier();
        }
        first = first_max[0];
        for (uint k = t; k < pc.axis_len; k += WG) STORE(Y, base + k * pc.inner, k == first ? 1.0 : 0.0);
        return;
    }

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
        STORE(Y, base + k * pc.inner, MODE == 1 ? v - log(sum) : exp(v) / sum);
    }
}
