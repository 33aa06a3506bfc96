// One element of a float32 product as ORT's CPU EP computes it on x86-64 with AVX2 and FMA: MLAS's SGEMM
// (MlasGemmBatch), whose order of sums and roundings vkep follows where an answer must equal the CPU EP's to the last
// bit (docs/design.md, "MLAS's SGEMM, Softmax and Eigen's sums, followed"). Used by mlas_gemm.comp (MatMul, Gemm)
// and ml_linear.comp.
//
// The including shader defines float mlas_a(uint at, uint k) and float mlas_b(uint at, uint k): element k along K
// of the row of A and of the column of B that `at` names (its own meaning: an offset, a column).
// Needs common.glsl. Its multiply-adds are exact on any device (precise.glsl's fma_exact).
#ifndef VKEP_MLAS_SGEMM_GLSL
#define VKEP_MLAS_SGEMM_GLSL
#include "precise.glsl"

float mlas_a(uint at, uint k);
float mlas_b(uint at, uint k);

// MlasSgemmOperation's K block for a share of n columns and K = k (B as the node gives it): it grows for a narrow
// share only where A is read as given (a transposed A's panel keeps 128)
uint mlas_stride_k(uint n, uint k, bool trans_a) {
    uint stride_n = 128u, stride = 128u;
    if (n >= k) {
        while (stride / 2u >= k) stride /= 2u;
    } else if (!trans_a) {
        while (stride_n > 16u && stride_n / 2u >= n) { stride_n /= 2u; stride *= 2u; }
    }
    return stride;
}
#define MLAS_PACKED_STRIDE_K 256u
#ifndef MLAS_RB  // the rows and columns of the includer's blocks (mlas_fma3_block)
#define MLAS_RB 1u
#define MLAS_CB 1u
#endif  // MLAS_SGEMM_PACKED_STRIDEK: B packed once (a constant 2-D B: ORT's PrePack)

// (start, count) of the share holding item x when MlasPartitionWork splits `total` items, in blocks of `align`,
// among `parts` threads
uvec2 mlas_share(uint x, uint parts, uint total, uint align) {
    if (parts <= 1u) return uvec2(0u, total);
    uint blocks = (total + align - 1u) / align, per = blocks / parts, extra = blocks % parts, b = x / align;
    uint start, count;
    if (b < (per + 1u) * extra) {
        start = b / (per + 1u) * (per + 1u);
        count = per + 1u;
    } else {
        start = (extra + (b - (per + 1u) * extra) / per) * per + extra;
        count = per;
    }
    return uvec2(start * align, min(total - start * align, count * align));
}

struct MlasProduct {
    uint K;
    uint col, cols, threads_n;  // the element's column among the product's, split among threads_n threads
    bool packed;                // B packed (K blocks of MLAS_PACKED_STRIDE_K)
    bool m1;                    // the element's share of rows is one row, alpha 1, beta 0 or 1, A not transposed and
                                // B not packed: MLAS's M1 kernels
    bool trans_b;               // (M1) B transposed: MlasSgemmKernelM1TransposeBAvx; else MlasSgemmKernelM1Avx
    float alpha;
    bool has_c;                 // C, already times beta, is in the sum (beta not 0)
    float c;
};

float mlas_product(uint a_at, uint b_at, uint k) { precise float p = mlas_a(a_at, k) * mlas_b(b_at, k); return p; }

// MlasSgemmKernelFma3 over a block of MLAS_RB rows (of A at a_at) by MLAS_CB columns (of B at b_at), all in one
// thread's share of the columns, K blocks of `stride`: per element a multiply-add chain from 0 over each K block,
// accumulated into C as fma(acc, alpha, C) (the first block without C: acc * alpha). `res` holds C (times beta) where
// has_c; the block's loads serve all its elements (lavapipe's time is its loads). Only its first `rows` rows are
// computed (a product of fewer rows than MLAS_RB: a GEMV's other rows would be 3 in 4 of its time)
void mlas_fma3_block(uint a_at[MLAS_RB], uint b_at[MLAS_CB], uint rows, uint K, uint stride, float alpha, bool has_c,
                     inout float res[MLAS_RB][MLAS_CB]) {
    bool have = has_c;
    for (uint k0 = 0u; k0 < K; k0 += stride) {
        float acc[MLAS_RB][MLAS_CB];
        for (uint i = 0u; i < MLAS_RB; ++i) for (uint j = 0u; j < MLAS_CB; ++j) acc[i][j] = 0.0;
        uint end = min(K, k0 + stride), k = k0;
#ifdef MLAS_PAIRS
        // elements k and k + 1 of A's rows or B's columns in one 64-bit load where the includer has them side by side
        // (K and the block even): a lane load costs lavapipe more than the arithmetic
        bool a_pairs = mlas_a_pairs(), b_pairs = mlas_b_pairs();
        if (a_pairs || b_pairs) {
            for (; k + 1u < end; k += 2u) {
                vec2 b[MLAS_CB];
                for (uint j = 0u; j < MLAS_CB; ++j)
                    b[j] = b_pairs ? mlas_b_pair(b_at[j], k) : vec2(mlas_b(b_at[j], k), mlas_b(b_at[j], k + 1u));
                for (uint i = 0u; i < MLAS_RB; ++i) {
                    if (i >= rows) break;
                    vec2 a = a_pairs ? mlas_a_pair(a_at[i], k) : vec2(mlas_a(a_at[i], k), mlas_a(a_at[i], k + 1u));
                    for (uint j = 0u; j < MLAS_CB; ++j) {
                        acc[i][j] = fma_exact(a.x, b[j].x, acc[i][j]);
                        acc[i][j] = fma_exact(a.y, b[j].y, acc[i][j]);
                    }
                }
            }
        }
#endif
        for (; k < end; ++k) {
            float a[MLAS_RB], b[MLAS_CB];
            for (uint j = 0u; j < MLAS_CB; ++j) b[j] = mlas_b(b_at[j], k);
            for (uint i = 0u; i < MLAS_RB; ++i) {
                if (i >= rows) break;
                a[i] = mlas_a(a_at[i], k);
                for (uint j = 0u; j < MLAS_CB; ++j) acc[i][j] = fma_exact(a[i], b[j], acc[i][j]);
            }
        }
        for (uint i = 0u; i < MLAS_RB; ++i) for (uint j = 0u; j < MLAS_CB; ++j) {
            if (have) res[i][j] = fma_exact(acc[i][j], alpha, res[i][j]);
            else { precise float m = acc[i][j] * alpha; res[i][j] = m; }
        }
        have = true;
    }
    if (!have) for (uint i = 0u; i < MLAS_RB; ++i) for (uint j = 0u; j < MLAS_CB; ++j) res[i][j] = 0.0;
}

// MlasSgemmKernelM1Avx (B as given, one row of A) over MLAS_CB columns (of B at b_at) at once, their loads shared:
// per column 4 rows of B a step, ((p0 + p1) + p2) + p3 then into the sum, then 2, then 1 (no fma). `res` holds C where
// has_c
void mlas_m1_block(uint a_at, uint b_at[MLAS_CB], uint K, bool has_c, inout float res[MLAS_CB]) {
    precise float r[MLAS_CB];
    for (uint j = 0u; j < MLAS_CB; ++j) r[j] = has_c ? res[j] : 0.0;
    uint k = 0u;
    for (; k + 4u <= K; k += 4u) {
        float a0 = mlas_a(a_at, k), a1 = mlas_a(a_at, k + 1u), a2 = mlas_a(a_at, k + 2u), a3 = mlas_a(a_at, k + 3u);
        for (uint j = 0u; j < MLAS_CB; ++j) {
            precise float t = a0 * mlas_b(b_at[j], k) + a1 * mlas_b(b_at[j], k + 1u);
            t = t + a2 * mlas_b(b_at[j], k + 2u);
            t = t + a3 * mlas_b(b_at[j], k + 3u);
            r[j] = t + r[j];
        }
    }
    if (K - k >= 2u) {
        float a0 = mlas_a(a_at, k), a1 = mlas_a(a_at, k + 1u);
        for (uint j = 0u; j < MLAS_CB; ++j) {
            precise float t = a0 * mlas_b(b_at[j], k) + a1 * mlas_b(b_at[j], k + 1u);
            r[j] = t + r[j];
        }
        k += 2u;
    }
    if (k < K) {
        float a0 = mlas_a(a_at, k);
        for (uint j = 0u; j < MLAS_CB; ++j) r[j] = a0 * mlas_b(b_at[j], k) + r[j];
    }
    for (uint j = 0u; j < MLAS_CB; ++j) res[j] = r[j];
}

// An element by the M1 kernels (p.m1): products rounded, then added (no fma)
float mlas_m1_element(uint a_at, uint b_at, MlasProduct p) {
    uint K = p.K;
    if (!p.trans_b) {  // 4 rows of B a step: ((p0 + p1) + p2) + p3, then into C; then 2, then 1
        precise float r = p.has_c ? p.c : 0.0;
        uint k = 0u;
        for (; k + 4u <= K; k += 4u) {
            precise float t = mlas_product(a_at, b_at, k) + mlas_product(a_at, b_at, k + 1u);
            t = t + mlas_product(a_at, b_at, k + 2u);
            t = t + mlas_product(a_at, b_at, k + 3u);
            r = t + r;
        }
        if (K - k >= 2u) {
            precise float t = mlas_product(a_at, b_at, k) + mlas_product(a_at, b_at, k + 1u);
            r = t + r;
            k += 2u;
        }
        if (k < K) r = mlas_product(a_at, b_at, k) + r;
        return r;
    }
    // B transposed: eight lanes of products and sums (lane l: k = l mod 8), reduced as the column's block of 4, 2 or 1
    float a[8];
    for (uint l = 0u; l < 8u; ++l) {
        precise float acc = 0.0;
        for (uint k = l; k < K; k += 8u) acc = acc + mlas_product(a_at, b_at, k);
        a[l] = acc;
    }
    uvec2 share = mlas_share(p.col, p.threads_n, p.cols, 16u);
    uint t = p.col - share.x, cols = share.y, fours = cols / 4u * 4u;
    precise float r;
    if (t < fours) r = (((a[0] + a[1]) + a[2]) + a[3]) + (((a[4] + a[5]) + a[6]) + a[7]);
    else if ((cols & 2u) != 0u && t < fours + 2u)
        r = ((a[0] + a[2]) + (a[4] + a[6])) + ((a[1] + a[3]) + (a[5] + a[7]));
    else r = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    precise float sum = r + (p.has_c ? p.c : 0.0);
    return sum;
}

// The element: the M1 kernels, or MlasSgemmKernelFma3 (mlas_fma3_block, every row and column of the block this one)
float mlas_element(uint a_at, uint b_at, MlasProduct p) {
    if (p.m1) return mlas_m1_element(a_at, b_at, p);
    uint K = p.K;
    uvec2 share = mlas_share(p.col, p.threads_n, p.cols, 16u);
    float res[MLAS_RB][MLAS_CB];
    uint a_ats[MLAS_RB], b_ats[MLAS_CB];
    for (uint i = 0u; i < MLAS_RB; ++i) a_ats[i] = a_at;
    for (uint j = 0u; j < MLAS_CB; ++j) b_ats[j] = b_at;
    for (uint i = 0u; i < MLAS_RB; ++i) for (uint j = 0u; j < MLAS_CB; ++j) res[i][j] = p.c;
    uint stride = p.packed ? MLAS_PACKED_STRIDE_K : mlas_stride_k(share.y, K, false);
    mlas_fma3_block(a_ats, b_ats, 1u, K, stride, p.alpha, p.has_c, res);
    return res[0][0];
}

#endif
