#version 450
// Where: y = c ? a : b with ONNX broadcasting of all three. c is bool (DTYPE), a, b and y have DTYPE_Y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

#define MAX_RANK 5  // three stride sets fill the 128-byte push block
layout(push_constant, scalar) uniform Push {
    uint64_t c, a, b, y;
    uint n, rank;
    uint shape[MAX_RANK];
    uint stride_c[MAX_RANK];
    uint stride_a[MAX_RANK];
    uint stride_b[MAX_RANK];
} pc;

void main() {
    uint i = flat_index(64);
    if (i >= pc.n) return;
    uint ic = 0, ia = 0, ib = 0, rem = i;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint k = rem % pc.shape[d];
        rem /= pc.shape[d];
        ic += k * pc.stride_c[d];
        ia += k * pc.stride_a[d];
        ib += k * pc.stride_b[d];
    }
    // copy the stored value itself: no conversion through the compute type
    bool take_a = LOAD(Tensor(pc.c), ic) != 0;
    TensorY(pc.y).v[i] = take_a ? TensorY(pc.a).v[ia] : TensorY(pc.b).v[ib];
}
