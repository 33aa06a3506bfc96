#version 450
// Batched y = alpha * op(A) x op(B) + beta * C for float16 A and B on devices with VK_KHR_cooperative_matrix:
// the products run on the device's matrix units (tensor cores, WMMA, XMX; lavapipe lowers them to vector code),
// float16 operands and float32 sums. One subgroup a workgroup computes a BM x BN block of y as RM x RN
// cooperative matrices of TM x TN (the device's own size, from vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR:
// vkep/kernels/coopmat.py), over K in steps of TK. A and B are staged through shared memory with zeros past
// M, N and K, so any size, stride, transpose or broadcast batch that matmul.comp takes is taken here; its EPILOGUE
// variant applies a fused group's steps to each value it stores (epilogue.glsl), as matmul.comp's does.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#if DTYPE != 1
#error matmul_coop.comp multiplies float16 (float32 products stay on matmul.comp)
#endif
#include "epilogue.glsl"
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 32) in;
layout(local_size_x_id = 0) in;  // the subgroup size: one subgroup a workgroup
layout(constant_id = 1) const uint TM = 16;
layout(constant_id = 2) const uint TN = 16;
layout(constant_id = 3) const uint TK = 16;
layout(constant_id = 4) const uint RM = 2;  // cooperative matrices of y a subgroup holds: RM x RN
layout(constant_id = 5) const uint RN = 2;
const uint BM = RM * TM, BN = RN * TN;

#include "matmul_push.glsl"

shared float16_t tile_a[BM * TK];  // [m][k]
shared float16_t tile_b[TK * BN];  // [k][n]
shared float tile_y[BM * BN];      // [m][n], for the stores (y's edges, alpha, beta, C)

void main() {
    uint lane = gl_LocalInvocationIndex, lanes = gl_WorkGroupSize.x;
    uint m0 = WORKGROUP_ID.y * BM, n0 = WORKGROUP_ID.x * BN;
    uint z = WORKGROUP_ID.z;
    uint outer = z / pc.batch_inner, inner = z % pc.batch_inner;
    uint a_base = outer * pc.a_outer + inner * pc.a_inner;
    uint b_base = outer * pc.b_outer + inner * pc.b_inner;
    Tensor A = Tensor(pc.a), B = Tensor(pc.b);

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[RM][RN];
    [[unroll]] for (uint i = 0; i < RM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    for (uint k0 = 0; k0 < pc.K; k0 += TK) {
        for (uint e = lane; e < BM * TK; e += lanes) {
            uint m = m0 + e / TK, k = k0 + e % TK;
            tile_a[e] = m < pc.M && k < pc.K ? A.v[a_base + m * pc.a_m + k * pc.a_k] : float16_t(0.0);
        }
        for (uint e = lane; e < TK * BN; e += lanes) {
            uint k = k0 + e / BN, n = n0 + e % BN;
            tile_b[e] = n < pc.N && k < pc.K ? B.v[b_base + k * pc.b_k + n * pc.b_n] : float16_t(0.0);
        }
        barrier();
        coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[RM];
        coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b[RN];
        [[unroll]] for (uint i = 0; i < RM; ++i)
            coopMatLoad(a[i], tile_a, i * TM * TK, TK, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0; j < RN; ++j)
            coopMatLoad(b[j], tile_b, j * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint i = 0; i < RM; ++i)
            [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
        barrier();
    }

    [[unroll]] for (uint i = 0; i < RM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j)
            coopMatStore(acc[i][j], tile_y, i * TM * BN + j * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    for (uint e = lane; e < BM * BN; e += lanes) {
        uint m = m0 + e / BN, n = n0 + e % BN;
        if (m >= pc.M || n >= pc.N) continue;
        float r = pc.alpha * tile_y[e];
        float c = float(LOAD(Tensor(PRESENT_OR(pc.c, pc.a)), PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n)));
        if (pc.c != 0) r += pc.beta * c;
#ifdef EPILOGUE
        epilogue_at(pc.y, pc.epilogue_operand, z * pc.M * pc.N + m * pc.N + n, m, n, r);  // (a fused group's steps)
#else
        STORE(Tensor(pc.y), z * pc.M * pc.N + m * pc.N + n, r);
#endif
    }
}
