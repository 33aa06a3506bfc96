#version 450
// Split-K's second pass (vkep/kernels/matmul.py): y = alpha * (the slices' float32 partial products summed in
// slice order) + beta * C, over y's [batches, M, N]. The partials are [slices][batches][M][N]; C (Gemm's, optional:
// address 0) is read through its strides as matmul.comp reads it. Its EPILOGUE variant applies a fused group's
// steps to each value (epilogue.glsl).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "epilogue.glsl"

layout(local_size_x = 256) in;

layout(push_constant, scalar) uniform Push {
    EPILOGUE_OPERAND                  // (the EPILOGUE variant's: epilogue.glsl)
    uint64_t partials, c, y;
    uint count, slices, M, N;         // count: batches * M * N, one slice's elements
    uint c_m, c_n;                    // element strides of C
    float alpha, beta;
    GROUP_BASE;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Partials { float v[]; };

void main() {
    uint e = FLAT_ID(256);
    if (e >= pc.count) return;
    float sum = 0.0;
    for (uint s = 0; s < pc.slices; ++s) sum += Partials(pc.partials).v[s * pc.count + e];
    uint at = e % (pc.M * pc.N), m = at / pc.N, n = at % pc.N;
    // C read from a valid address whether given or not, then chosen (common.glsl PRESENT_OR)
    float c = float(LOAD(Tensor(PRESENT_OR(pc.c, pc.y)), PRESENT_AT(pc.c, m * pc.c_m + n * pc.c_n)));
    float r = pc.alpha * sum;
    if (pc.c != 0) r += pc.beta * c;
    STORE_OR_KEEP(0, Tensor(pc.y), e, r);
#ifdef EPILOGUE
    epilogue_block(pc.y, pc.epilogue_operand, EpilogueBlock(e - at, pc.N, 0, 1, m, 1, 1, pc.M, n, 1, 1, pc.N, 1), 0);
#endif
}
