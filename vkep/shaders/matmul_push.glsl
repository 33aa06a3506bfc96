// matmul.comp's and matmul_coop.comp's push constants (vkep/kernels/matmul.py fills them by name:
// product_members; a 0 address of C means no C). PUSH_EXTRA: a shader's own members after them (mlas_gemm.comp's).
#ifndef EPILOGUE_OPERAND
#define EPILOGUE_OPERAND
#endif
#ifndef PUSH_EXTRA
#define PUSH_EXTRA
#endif
layout(push_constant, scalar) uniform Push {
    EPILOGUE_OPERAND                        // (matmul.comp's EPILOGUE variant's: epilogue.glsl)
    uint64_t a, b, c, y;
    uint M, N, K, batch_inner;              // batch index z = outer * batch_inner + inner
    uint a_outer, a_inner, a_m, a_k;        // element strides of A
    uint b_outer, b_inner, b_k, b_n;        // element strides of B
    uint c_m, c_n;                          // element strides of C
    float alpha, beta;
    PUSH_EXTRA
    GROUP_BASE;                             // (grids past the device's limit: common.glsl)
} pc;
