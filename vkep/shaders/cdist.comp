#version 450
// com.microsoft CDist: Y[i, j] = |A[i] - B[j]|^2 over the rows of A [M, K] and B [N, K], its square root where
// SQRT (metric euclidean), in the form ORT 1.32's CPU EP computes it: max((-2 A[i].B[j] + |A[i]|^2) + |B[j]|^2, 0)
// (a GEMM and the rows' norms; equal rows then give a small distance, not 0). Sums in order, rounded each step.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint SQRT = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t a, b, y;
    uint m, n, k;
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.m * pc.n) return;
    uint row = i / pc.n, col = i % pc.n;
    precise float dot = 0.0, an = 0.0, bn = 0.0;
    for (uint t = 0; t < pc.k; ++t) {
        float x = LOAD(Tensor(pc.a), row * pc.k + t), z = LOAD(Tensor(pc.b), col * pc.k + t);
        precise float xz = x * z, xx = x * x, zz = z * z;
        dot += xz;
        an += xx;
        bn += zz;
    }
    precise float sum = max((-2.0 * dot + an) + bn, 0.0);
    STORE(Tensor(pc.y), i, SQRT != 0 ? sqrt(sum) : sum);
}
