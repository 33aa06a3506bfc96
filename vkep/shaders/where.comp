#version 450
// Where: y = c ? a : b with ONNX broadcasting of all three. c is bool (DTYPE), a, b and y have DTYPE_Y.
// Up to rank 5 the shape and the three stride sets sit in the push block (filling its 128 bytes); a rank-6
// broadcast (torch's adaptive pooling, exported with its window dims) reads them from a persistent table.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

#define PUSH_RANK 5
#define TABLE_RANK 6  // the table: shape, then the strides of c, a and b, TABLE_RANK words each
// 1: the dims are in the table (a specialization constant: Mesa 26's lavapipe performs a load whatever a runtime
// test of its address says, and a load from address 0 crashes, common.glsl's PRESENT_OR)
layout(constant_id = 0) const uint TABLE = 0;
// float64 moved as int64; zeros of float64, float32 and float16 as ORT 1.32's CPU EP gives them: it merges X' = c ? X : 0 and Y' = c ? 0 : Y by
// X' != 0 ? X' : Y', so a -0 taken from X comes out +0 (1), but where its merge reads Y' as one value a span it takes
// Y' != 0 ? Y' : X', and a -0 taken from Y does instead (2: elementwise.Where decides)
layout(constant_id = 1) const uint ZEROS = 0;
layout(buffer_reference, scalar, buffer_reference_align = 4) readonly buffer Words { uint v[]; };
layout(push_constant, scalar) uniform Push {
    uint64_t c, a, b, y;
    uint64_t table;  // (TABLE 1) the shape and strides
    uint n, rank;
    uint shape[PUSH_RANK];
    uint stride_c[PUSH_RANK];
    uint stride_a[PUSH_RANK];
    uint stride_b[PUSH_RANK];
} pc;

void main() {
    uint i = flat_index(64);
    if (i >= pc.n) return;
    uint ic = 0, ia = 0, ib = 0, rem = i;
    if (TABLE == 1u) {
        Words t = Words(pc.table);
        for (int d = TABLE_RANK - 1; d >= 0; --d) {
            uint k = rem % t.v[d];
            rem /= t.v[d];
            ic += k * t.v[TABLE_RANK + d];
            ia += k * t.v[2 * TABLE_RANK + d];
            ib += k * t.v[3 * TABLE_RANK + d];
        }
    } else {
        for (int d = int(pc.rank) - 1; d > 0; --d) {
            uint k = rem % pc.shape[d];
            rem /= pc.shape[d];
            ic += k * pc.stride_c[d];
            ia += k * pc.stride_a[d];
            ib += k * pc.stride_b[d];
        }
        // (the outermost coordinate is what is left: binary.comp)
        ic += rem * pc.stride_c[0];
        ia += rem * pc.stride_a[0];
        ib += rem * pc.stride_b[0];
    }
    // copy the stored value itself: no conversion through the compute type
    bool take_a = LOAD(Tensor(pc.c), ic) != 0;
    STORE_TY v = take_a ? TensorY(pc.a).v[ia] : TensorY(pc.b).v[ib];
    // (-0's bits, compared as bits: a float compare takes +0 for -0, and a compiler may fold the select away)
#if DTYPE_Y == 3
    if (ZEROS != 0u && v == (-9223372036854775807L - 1L) && take_a == (ZEROS == 1u)) v = 0;
#elif DTYPE_Y == 0 || DTYPE_Y == 1  // (float16's -0 widens to float's)
    if (ZEROS != 0u && floatBitsToUint(float(v)) == 0x80000000u && take_a == (ZEROS == 1u)) v = STORE_TY(0.0);
#endif
    TensorY(pc.y).v[i] = v;
}
