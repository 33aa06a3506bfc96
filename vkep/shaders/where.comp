#version 450
// Where: y = c ? a : b with ONNX broadcasting of all three. c is bool (DTYPE), a, b and y have DTYPE_Y.
// Up to rank 5 the shape and the three stride sets sit in the push block (filling its 128 bytes); a rank-6
// broadcast (torch's adaptive pooling, exported with its window dims) reads them from a persistent table.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

#define PUSH_RANK 5
#define TABLE_RANK 6  // the table: shape, then the strides of c, a and b, TABLE_RANK words each
layout(buffer_reference, scalar, buffer_reference_align = 4) readonly buffer Words { uint v[]; };
layout(push_constant, scalar) uniform Push {
    uint64_t c, a, b, y;
    uint64_t table;  // 0: the dims below
    uint n, rank;
    uint shape[PUSH_RANK];
    uint stride_c[PUSH_RANK];
    uint stride_a[PUSH_RANK];
    uint stride_b[PUSH_RANK];
} pc;

// dim d of set s (0 the shape, 1-3 the strides of c, a, b)
uint dim(uint s, int d) {
    if (pc.table != 0ul) return Words(pc.table).v[s * TABLE_RANK + uint(d)];
    return s == 0u ? pc.shape[d] : s == 1u ? pc.stride_c[d] : s == 2u ? pc.stride_a[d] : pc.stride_b[d];
}

void main() {
    uint i = flat_index(64);
    if (i >= pc.n) return;
    uint ic = 0, ia = 0, ib = 0, rem = i;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint size = dim(0u, d), k = rem % size;
        rem /= size;
        ic += k * dim(1u, d);
        ia += k * dim(2u, d);
        ib += k * dim(3u, d);
    }
    // copy the stored value itself: no conversion through the compute type
    bool take_a = LOAD(Tensor(pc.c), ic) != 0;
    TensorY(pc.y).v[i] = take_a ? TensorY(pc.a).v[ia] : TensorY(pc.b).v[ib];
}
