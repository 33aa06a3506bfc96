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
        // A22 - A21 A12 (a panel of 8 whenever rows trail it), as Eigen's GEMM sums the panel's 8 products p0..p7
        // (ORT builds it for SSE2 without fma: packets of 4, mr = 8). It runs the row-major product transposed: its
        // rows are A22's columns, its columns A22's rows (in blocks of 4). Columns in whole blocks of 8 sum in order;
        // in the next whole block of 4 (its one-packet kernel) a row within the whole blocks of 4 sums even and odd
        // products apart, (((p0 + p2) + p4) + p6) + (((p1 + p3) + p5) + p7); a column past those, in such a row,
        // is its 'swapped' path: ((p0 + p4) + (p1 + p5)) + ((p2 + p6) + (p3 + p7)); else in order. A product of
        // fewer than 20 rows + columns + depth is Eigen's coefficient-wise one: in order. (Found against the CPU
        // EP: bit for bit for every M up to 48.)
        uint trailing = m - ke, whole8 = trailing & ~7u, whole4 = trailing & ~3u;
        bool gemm = (ke - kb) + 2u * trailing >= 20u;
        for (uint r = ke; r < m; ++r) {
            for (uint c = ke; c < m; ++c) {
                precise float acc;
                precise float p[8];
                for (uint j = 0u; j < 8u && kb + j < ke; ++j) {
                    p[j] = LOAD(a, base + r * m + kb + j) * LOAD(a, base + (kb + j) * m + c);
                }
                uint cc = c - ke;
                if (gemm && cc >= whole8 && cc < whole4 && r - ke < whole4) {
                    acc = (((p[0] + p[2]) + p[4]) + p[6]) + (((p[1] + p[3]) + p[5]) + p[7]);
                } else if (gemm && cc >= whole4 && r - ke < whole4) {
                    acc = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
                } else {
                    acc = p[0];
                    for (uint k = 1u; k < ke - kb; ++k) acc = acc + p[k];
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
