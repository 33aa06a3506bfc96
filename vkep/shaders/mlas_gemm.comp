#version 450
// Batched y = alpha * op(A) x op(B) + beta * C as ORT's CPU EP computes it on x86-64 with AVX2 and FMA, to the last
// bit: MLAS's SGEMM (mlas_sgemm.glsl), for the MatMul, Gemm and FusedMatMul nodes vkep/kernels/matmul.py gives it
// (mlas_gemm.variant). One invocation a block of RB x CB elements of y; its multiply-adds exact on any device
// (precise.glsl).
// matmul.comp's push constants (A, B and C read through their strides), then the CPU EP's split of the product:
// `rows`, the rows of its SGEMM (M, or every batch's rows where ORT folds A's batch into M: B of rank 2 or less),
// shared among `threads` threads (over the columns with COLUMNS), and the flags below.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define EPILOGUE_REREAD
#include "epilogue.glsl"

#define WG 64
layout(local_size_x = WG) in;
#define RB 4u  // rows and columns of y an invocation (vkep/kernels/mlas_gemm.py BLOCK)
#define CB 4u
#define MLAS_RB RB
#define MLAS_CB CB

#define PUSH_EXTRA uint rows, threads, flags;
#include "matmul_push.glsl"
#define PACKED 1u       // B is a 2-D constant, which the CPU EP packs (K blocks of 256)
#define TRANS_A 2u      // the CPU EP's SGEMM reads A transposed (no M1 kernel)
#define TRANS_B 4u      // ... and B (the M1 kernel for a transposed B)
#define INTERLEAVED 8u  // B is MatMul.pack's [N / 8][K / 2][8][2] (matmul.comp's PAIRS 2)
#define COLUMNS 16u     // the threads split the columns (else the rows)
#define A_PAIRS 32u     // A's rows contiguous along K, K and A's strides even: two elements a 64-bit load
#define B_PAIRS 64u     // ... B's columns
#define FOLDED 128u     // the batches (flags >> 8) folded into the grid's x (fewer blocks a batch than lanes a workgroup)
#define FLAG(f) ((pc.flags & (f)) != 0u)

float mlas_a(uint at, uint k) { return LOAD(Tensor(pc.a), at + k * pc.a_k); }
float mlas_b(uint at, uint k) {  // (INTERLEAVED: `at` is the column)
    uint i = FLAG(INTERLEAVED) ? (((at / 8u) * (pc.K / 2u) + k / 2u) * 8u + at % 8u) * 2u + k % 2u : at + k * pc.b_k;
    return LOAD(Tensor(pc.b), i);
}
// elements k and k + 1 (k even) side by side: A_PAIRS / B_PAIRS (contiguous along K, every stride and K even), or
// MatMul.pack's interleaved B
bool mlas_a_pairs() { return FLAG(A_PAIRS); }
bool mlas_b_pairs() { return FLAG(B_PAIRS | INTERLEAVED); }
vec2 mlas_a_pair(uint at, uint k) { return load_pair(pc.a, at + k); }
vec2 mlas_b_pair(uint at, uint k) {
    return load_pair(pc.b, FLAG(INTERLEAVED) ? (((at / 8u) * (pc.K / 2u) + k / 2u) * 8u + at % 8u) * 2u : at + k);
}
#define MLAS_PAIRS
#include "mlas_sgemm.glsl"

void main() {
    // a block of RB rows by CB columns an invocation (columns from a multiple of CB: one thread share of MLAS's,
    // whose shares are 16 columns apart); rows and columns past y read the last one and are not stored
    uint col_blocks = (pc.N + CB - 1u) / CB, blocks = col_blocks * ((pc.M + RB - 1u) / RB);
    uint idx = WORKGROUP_ID.x * WG + gl_LocalInvocationIndex, z = WORKGROUP_ID.z;
    if (FLAG(FOLDED)) {  // (a workgroup a batch left its other lanes idle: 102,400 products of 2 x 2 by 2 x 1 took 2.9 s)
        uint item = FLAT_GROUP * WG + gl_LocalInvocationIndex;
        if (item >= blocks * (pc.flags >> 8u)) return;
        idx = item % blocks;
        z = item / blocks;
    }
    if (idx >= blocks) return;
    uint m0 = idx / col_blocks * RB, n0 = idx % col_blocks * CB;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_at[RB], b_at[CB];
    for (uint i = 0u; i < RB; ++i) a_at[i] = outer * pc.a_outer + inner * pc.a_inner + min(m0 + i, pc.M - 1u) * pc.a_m;
    for (uint j = 0u; j < CB; ++j) {
        uint n = min(n0 + j, pc.N - 1u);
        b_at[j] = FLAG(INTERLEAVED) ? n : outer * pc.b_outer + inner * pc.b_inner + n * pc.b_n;
    }
    // C: copied into y, then times beta where beta is not 0 or 1 (MlasSgemmMultiplyBeta)
    bool has_c = pc.c != 0ul && pc.beta != 0.0;
    float cs[RB][CB], res[RB][CB];
    for (uint i = 0u; i < RB; ++i) for (uint j = 0u; j < CB; ++j) {
        uint m = min(m0 + i, pc.M - 1u), n = min(n0 + j, pc.N - 1u);
        float c = LOAD(Tensor(PRESENT_OR(pc.c, pc.a)), PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n));
        precise float scaled = c * pc.beta;
        cs[i][j] = res[i][j] = pc.beta == 1.0 ? c : scaled;
    }
    // a row that is a thread's whole share takes the M1 kernels (alpha 1, beta 0 or 1, A as given, B not packed);
    // else one column (N 1, B's and C's rows one element apart) takes them with A and B's roles swapped: each row of
    // the thread's share is a column of the M1 kernel for a transposed B (A as given; the M1 kernel else)
    bool m1[RB], fma3 = false, m1_kernels = pc.alpha == 1.0 && (!has_c || pc.beta == 1.0) && !FLAG(PACKED);
    bool n1 = m1_kernels && pc.N == 1u && (!FLAG(TRANS_B) || pc.K == 1u);
    uvec2 row_share[RB];
    for (uint i = 0u; i < RB; ++i) {
        uint row = pc.rows == pc.M ? m0 + i : z * pc.M + m0 + i;
        uvec2 rows = FLAG(COLUMNS) ? uvec2(0u, pc.rows) : mlas_share(row, pc.threads, pc.rows, 1u);
        row_share[i] = uvec2(row - rows.x, rows.y);
        m1[i] = rows.y == 1u && !FLAG(TRANS_A) && m1_kernels;
        fma3 = fma3 || (m0 + i < pc.M && !m1[i] && !n1);
    }
    uint threads_n = FLAG(COLUMNS) ? pc.threads : 1u;
    if (fma3) {
        uvec2 share = mlas_share(n0, threads_n, pc.N, 16u);
        uint stride = FLAG(PACKED) ? MLAS_PACKED_STRIDE_K : mlas_stride_k(share.y, pc.K, FLAG(TRANS_A));
        mlas_fma3_block(a_at, b_at, min(RB, pc.M - m0), pc.K, stride, pc.alpha, has_c, res);
    }
    for (uint i = 0u; i < RB; ++i) {
        uint m = m0 + i;
        if (m >= pc.M) break;
        bool m1_block = m1[i] && !FLAG(TRANS_B);  // B as given: the block's columns share their loads
        if (m1_block) mlas_m1_block(a_at[i], b_at, pc.K, has_c, cs[i]);
        for (uint j = 0u; j < CB; ++j) {
            uint n = n0 + j;
            if (n >= pc.N) break;
            float r = m1_block ? cs[i][j]
                    : m1[i] ? mlas_m1_element(a_at[i], b_at[j], MlasProduct(pc.K, n, pc.N, threads_n, false, true,
                                                                            true, 1.0, has_c, cs[i][j]))
                    : n1 ? mlas_m1_element(a_at[i], b_at[j], MlasProduct(pc.K, row_share[i].x, row_share[i].y, 1u,
                                                                         false, true, !FLAG(TRANS_A), 1.0, has_c,
                                                                         cs[i][j]))
                    : res[i][j];
            uint at = z * pc.M * pc.N + m * pc.N + n;
#ifdef EPILOGUE
            epilogue_at(pc.y, pc.epilogue_operand, at, m, n, r);
#else
            STORE(Tensor(pc.y), at, r);
#endif
        }
    }
}
