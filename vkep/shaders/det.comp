#version 450
// Det (ONNX 11, 22): the determinant of each M x M matrix of X [..., M, M], one invocation a matrix, as ORT's CPU EP
// computes it (det.cc: Eigen's determinant(), a partial-pivot LU, blocked as Eigen's past 16 rows, below): the
// matrix copied to scratch; for each column k the first row at or below k whose |value| is the largest
// (NaN never beats a number, but a NaN met first stays) is swapped up; unless that largest is 0 the column below the
// pivot is divided by it (correctly rounded, as the CPU's '/'), then every a_ij below and right of the pivot becomes
// a_ij - l_i u_j (product rounded, then the difference: no fma). det = (-1)^swaps x d_0 x d_1 x ... in that order;
// M = 0 gives 1.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(push_constant, scalar) uniform Push {
    uint64_t x, lu, y;
    uint count, m;
    GROUP_BASE;
} pc;

void main() {
    uint g = FLAT_ID(WG);
    if (g >= pc.count) return;
    uint m = pc.m, base = g * m * m;
    Tensor x = Tensor(pc.x), a = Tensor(pc.lu);
    for (uint e = 0u; e < m * m; ++e) STORE(a, base + e, LOAD(x, base + e));
    uint swaps = 0u;
    // Eigen's blocked LU past 16 rows: panels of 8 columns factored unblocked, the rows right of a panel solved
    // (each element's updates in order, as the unblocked LU), and the trailing block less the panel's product,
    // summed first (its GEMM); up to 16 rows one panel of all columns: the unblocked LU itself
    uint block = m <= 16u ? m : 8u;
    for (uint kb = 0u; kb < m; kb += block) {
        uint ke = min(kb + block, m);
        for (uint k = kb; k < ke; ++k) {
            uint best = k;
            float big = abs(LOAD(a, base + k * m + k));
            for (uint r = k + 1u; r < m; ++r) {
                float v = abs(LOAD(a, base + r * m + k));
                if (v > big) {
                    big = v;
                    best = r;
                }
            }
            if (big != 0.0) {  // (NaN too)
                if (best != k) {
                    for (uint c = 0u; c < m; ++c) {
                        float t = LOAD(a, base + k * m + c);
                        STORE(a, base + k * m + c, LOAD(a, base + best * m + c));
                        STORE(a, base + best * m + c, t);
                    }
                    ++swaps;
                }
                float pivot = LOAD(a, base + k * m + k);
                for (uint r = k + 1u; r < m; ++r) {
                    float v = LOAD(a, base + r * m + k);  // (precise_div's remainder is NaN for infinities)
                    STORE(a, base + r * m + k, isinf(v) || isinf(pivot) ? v / pivot : precise_div(v, pivot));
                }
            }
            for (uint r = k + 1u; r < m; ++r) {
                float l = LOAD(a, base + r * m + k);
                for (uint c = k + 1u; c < ke; ++c) {
                    precise float p = l * LOAD(a, base + k * m + c);
                    precise float d = LOAD(a, base + r * m + c) - p;
                    STORE(a, base + r * m + c, d);
                }
            }
        }
        for (uint r = kb + 1u; r < ke; ++r) {  // the panel's rows right of it: L11^-1 A12
            for (uint c = ke; c < m; ++c) {
                precise float v = LOAD(a, base + r * m + c);
                for (uint k = kb; k < r; ++k) v = v - LOAD(a, base + r * m + k) * LOAD(a, base + k * m + c);
                STORE(a, base + r * m + c, v);
            }
        }
        // A22 - A21 A12 (a panel of 8 whenever rows trail it). Eigen's GEMM runs the row-major product transposed:
        // its rows are A22's columns, in packets of 4; a column past the last whole packet (for a row within the
        // whole packets of 4 rows) is its 'swapped' path, which sums the 8 products as
        // ((p0 + p4) + (p1 + p5)) + ((p2 + p6) + (p3 + p7)); all else in order. A product of fewer than 20
        // rows + columns + depth is Eigen's coefficient-wise one: in order.
        uint trailing = m - ke, whole = trailing & ~3u;
        bool gemm = (ke - kb) + 2u * trailing >= 20u;
        for (uint r = ke; r < m; ++r) {
            for (uint c = ke; c < m; ++c) {
                precise float acc;
                if (gemm && c - ke >= whole && r - ke < whole) {
                    precise float q[4];
                    for (uint j = 0u; j < 4u; ++j) {
                        q[j] = LOAD(a, base + r * m + kb + j) * LOAD(a, base + (kb + j) * m + c)
                             + LOAD(a, base + r * m + kb + j + 4u) * LOAD(a, base + (kb + j + 4u) * m + c);
                    }
                    acc = (q[0] + q[1]) + (q[2] + q[3]);
                } else {
                    acc = LOAD(a, base + r * m + kb) * LOAD(a, base + kb * m + c);
                    for (uint k = kb + 1u; k < ke; ++k) acc = acc + LOAD(a, base + r * m + k) * LOAD(a, base + k * m + c);
                }
                precise float d = LOAD(a, base + r * m + c) - acc;
                STORE(a, base + r * m + c, d);
            }
        }
    }
    precise float det = 1.0;
    if (m > 0u) {
        det = LOAD(a, base);
        for (uint k = 1u; k < m; ++k) det = det * LOAD(a, base + k * m + k);
        if ((swaps & 1u) != 0u) det = -det;
    }
    STORE(Tensor(pc.y), g, det);
}
