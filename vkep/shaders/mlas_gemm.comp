#version 450
// Batched y = alpha * op(A) x op(B) + beta * C as ORT's CPU EP computes it on x86-64 with AVX2 and FMA, to the last
// bit: MLAS's SGEMM (mlas_sgemm.glsl), for the MatMul, Gemm and FusedMatMul nodes vkep/kernels/matmul.py gives it
// (mlas_gemm.variant). One invocation an element of y; its multiply-adds exact on any device (precise.glsl).
// matmul.comp's push constants (A, B and C read through their strides), then the CPU EP's split of the product:
// `rows`, the rows of its SGEMM (M, or every batch's rows where ORT folds A's batch into M: B of rank 2 or less),
// shared among `threads` threads (over the columns with COLUMNS), and the flags below.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define EPILOGUE_REREAD
#include "epilogue.glsl"

#define WG 64
layout(local_size_x = WG) in;

#define PUSH_EXTRA uint rows, threads, flags;
#include "matmul_push.glsl"
#define PACKED 1u       // B is a 2-D constant, which the CPU EP packs (K blocks of 256)
#define TRANS_A 2u      // the CPU EP's SGEMM reads A transposed (no M1 kernel)
#define TRANS_B 4u      // ... and B (the M1 kernel for a transposed B)
#define INTERLEAVED 8u  // B is MatMul.pack's [N / 8][K / 2][8][2] (matmul.comp's PAIRS 2)
#define COLUMNS 16u     // the threads split the columns (else the rows)
#define FLAG(f) ((pc.flags & (f)) != 0u)

float mlas_a(uint at, uint k) { return LOAD(Tensor(pc.a), at + k * pc.a_k); }
float mlas_b(uint at, uint k) {  // (INTERLEAVED: `at` is the column)
    uint i = FLAG(INTERLEAVED) ? (((at / 8u) * (pc.K / 2u) + k / 2u) * 8u + at % 8u) * 2u + k % 2u : at + k * pc.b_k;
    return LOAD(Tensor(pc.b), i);
}
#include "mlas_sgemm.glsl"

void main() {
    uint idx = WORKGROUP_ID.x * WG + gl_LocalInvocationIndex, z = WORKGROUP_ID.z;
    if (idx >= pc.M * pc.N) return;
    uint m = idx / pc.N, n = idx % pc.N;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_at = outer * pc.a_outer + inner * pc.a_inner + m * pc.a_m;
    uint b_at = FLAG(INTERLEAVED) ? n : outer * pc.b_outer + inner * pc.b_inner + n * pc.b_n;
    // C: copied into y, then times beta where beta is not 0 or 1 (MlasSgemmMultiplyBeta)
    float c = LOAD(Tensor(PRESENT_OR(pc.c, pc.a)), PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n));
    bool has_c = pc.c != 0ul && pc.beta != 0.0;
    precise float scaled = c * pc.beta;
    uint row = pc.rows == pc.M ? m : z * pc.M + m;
    uvec2 rows = FLAG(COLUMNS) ? uvec2(0u, pc.rows) : mlas_share(row, pc.threads, pc.rows, 1u);
    bool m1 = rows.y == 1u && (pc.flags & (PACKED | TRANS_A)) == 0u && pc.alpha == 1.0
              && (!has_c || pc.beta == 1.0);
    float r = mlas_element(a_at, b_at, MlasProduct(pc.K, n, pc.N, FLAG(COLUMNS) ? pc.threads : 1u, FLAG(PACKED), m1,
                                                   FLAG(TRANS_B), pc.alpha, has_c, pc.beta == 1.0 ? c : scaled));
    uint at = z * pc.M * pc.N + idx;
#ifdef EPILOGUE
    epilogue_at(pc.y, pc.epilogue_operand, at, m, n, r);
#else
    STORE(Tensor(pc.y), at, r);
#endif
}
