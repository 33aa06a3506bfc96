#version 450
// y = a OP b with full ONNX (numpy) broadcasting: strides of a broadcast dimension are 0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;  // 0 add, 1 sub, 2 mul, 3 div

#define MAX_RANK 6
layout(push_constant, scalar) uniform Push {
    uint64_t a, b, y;
    uint n, rank;
    uint shape[MAX_RANK];
    uint stride_a[MAX_RANK];
    uint stride_b[MAX_RANK];
} pc;

void main() {
    uint i = flat_index(256);
    if (i >= pc.n) return;
    uint ia = 0, ib = 0, rem = i;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint c = rem % pc.shape[d];
        rem /= pc.shape[d];
        ia += c * pc.stride_a[d];
        ib += c * pc.stride_b[d];
    }
    COMP_T x = LOAD(Tensor(pc.a), ia);
    COMP_T z = LOAD(Tensor(pc.b), ib);
    COMP_T r;
    if (OP == 0) r = x + z;
    else if (OP == 1) r = x - z;
    else if (OP == 2) r = x * z;
    else r = x / z;
    STORE(Tensor(pc.y), i, r);
}
