#version 450
// com.microsoft Inverse: each n x n matrix of X [..., n, n] inverted by one invocation, in place in Y (X copied
// there first): Gauss-Jordan elimination with partial (row) pivoting, the row swaps undone as column swaps at the
// end. ORT's CPU EP uses Eigen (cofactors up to 4 x 4, else an LU with partial pivoting): a few ulps apart.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64
#define MAX_N 32  // (vkep/kernels/contrib.py: Inverse.MAX_N)
layout(local_size_x = WG) in;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint count, n;
    GROUP_BASE;
} pc;

void main() {
    uint g = FLAT_ID(WG);
    if (g >= pc.count) return;
    uint n = pc.n, base = g * n * n;
    for (uint e = 0; e < n * n; ++e) STORE(Tensor(pc.y), base + e, LOAD(Tensor(pc.x), base + e));
    uint pivots[MAX_N];
    for (uint k = 0; k < n; ++k) {
        uint p = k;
        for (uint i = k + 1; i < n; ++i)
            if (abs(LOAD(Tensor(pc.y), base + i * n + k)) > abs(LOAD(Tensor(pc.y), base + p * n + k))) p = i;
        pivots[k] = p;
        if (p != k) {
            for (uint j = 0; j < n; ++j) {
                float t = LOAD(Tensor(pc.y), base + k * n + j);
                STORE(Tensor(pc.y), base + k * n + j, LOAD(Tensor(pc.y), base + p * n + j));
                STORE(Tensor(pc.y), base + p * n + j, t);
            }
        }
        float inv = 1.0 / LOAD(Tensor(pc.y), base + k * n + k);
        STORE(Tensor(pc.y), base + k * n + k, 1.0);
        for (uint j = 0; j < n; ++j) STORE(Tensor(pc.y), base + k * n + j, LOAD(Tensor(pc.y), base + k * n + j) * inv);
        for (uint i = 0; i < n; ++i) {
            if (i == k) continue;
            float f = LOAD(Tensor(pc.y), base + i * n + k);
            STORE(Tensor(pc.y), base + i * n + k, 0.0);
            for (uint j = 0; j < n; ++j)
                STORE(Tensor(pc.y), base + i * n + j, LOAD(Tensor(pc.y), base + i * n + j) - f * LOAD(Tensor(pc.y), base + k * n + j));
        }
    }
    for (uint kk = n; kk > 0; --kk) {  // (the row swaps, undone as column swaps in reverse order)
        uint k = kk - 1, p = pivots[k];
        if (p == k) continue;
        for (uint i = 0; i < n; ++i) {
            float t = LOAD(Tensor(pc.y), base + i * n + k);
            STORE(Tensor(pc.y), base + i * n + k, LOAD(Tensor(pc.y), base + i * n + p));
            STORE(Tensor(pc.y), base + i * n + p, t);
        }
    }
}
