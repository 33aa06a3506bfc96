#version 450
// Batched y = alpha * op(A) x op(B) + beta * C, tiled through shared memory.
// A, B are read through strides, so transposes and broadcast batch dimensions cost nothing;
// C (Gemm's bias, optional: address 0) is read through its own strides (0 where it broadcasts).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define TILE 16
layout(local_size_x = TILE, local_size_y = TILE) in;

layout(push_constant, scalar) uniform Push {
    uint64_t a, b, c, y;
    uint M, N, K, batch_inner;              // batch index z = outer * batch_inner + inner
    uint a_outer, a_inner, a_m, a_k;        // element strides of A
    uint b_outer, b_inner, b_k, b_n;        // element strides of B
    uint c_m, c_n;                          // element strides of C
    float alpha, beta;
} pc;

shared float tile_a[TILE][TILE];
shared float tile_b[TILE][TILE];

void main() {
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint n = gl_WorkGroupID.x * TILE + tx;
    uint m = gl_WorkGroupID.y * TILE + ty;
    uint z = gl_WorkGroupID.z;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_base = outer * pc.a_outer + inner * pc.a_inner;
    uint b_base = outer * pc.b_outer + inner * pc.b_inner;
    Tensor A = Tensor(pc.a), B = Tensor(pc.b);
    float acc = 0.0;
    for (uint k0 = 0; k0 < pc.K; k0 += TILE) {
        uint ka = k0 + tx, kb = k0 + ty;
        tile_a[ty][tx] = (m < pc.M && ka < pc.K) ? LOAD(A, a_base + m * pc.a_m + ka * pc.a_k) : 0.0;
        tile_b[ty][tx] = (n < pc.N && kb < pc.K) ? LOAD(B, b_base + kb * pc.b_k + n * pc.b_n) : 0.0;
        barrier();
        for (uint k = 0; k < TILE; ++k) acc += tile_a[ty][k] * tile_b[k][tx];
        barrier();
    }
    if (m < pc.M && n < pc.N) {
        float r = pc.alpha * acc;
        if (pc.c != 0) r += pc.beta * LOAD(Tensor(pc.c), m * pc.c_m + n * pc.c_n);
        STORE(Tensor(pc.y), z * pc.M * pc.N + m * pc.N + n, r);
    }
}
