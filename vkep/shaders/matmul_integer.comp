#version 450
// MatMulInteger: Y[b, m, n] = sum_k (A[b, m, k] - a_zp) * (B[b', k, n] - b_zp) in int32, A and B 8-bit
// (A_SIGNED / B_SIGNED: int8, else uint8), zero points absent, scalar, per row of A or per column of B
// (a_zp_step / b_zp_step 1), B shared by every batch when its batch stride is 0. One invocation per output.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint A_SIGNED = 0;
layout(constant_id = 1) const uint B_SIGNED = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t a, b, azp, bzp, y;
    uint m, n, k, batches, b_batch_stride, a_zp_step, b_zp_step;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 1) buffer Bytes { uint8_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Ints { int v[]; };

int byte_at(uint64_t t, uint i, uint is_signed) {
    uint v = uint(Bytes(t).v[i]);
    return is_signed != 0 ? int(v << 24) >> 24 : int(v);
}

void main() {
    uint i = flat_index(64);
    if (i >= pc.batches * pc.m * pc.n) return;
    uint col = i % pc.n, row = (i / pc.n) % pc.m, batch = i / (pc.m * pc.n);
    int azp = pc.azp != 0 ? byte_at(pc.azp, row * pc.a_zp_step, A_SIGNED) : 0;
    int bzp = pc.bzp != 0 ? byte_at(pc.bzp, col * pc.b_zp_step, B_SIGNED) : 0;
    uint a_row = (batch * pc.m + row) * pc.k, b_base = batch * pc.b_batch_stride + col;
    int acc = 0;
    for (uint k = 0; k < pc.k; ++k)
        acc += (byte_at(pc.a, a_row + k, A_SIGNED) - azp) * (byte_at(pc.b, b_base + k * pc.n, B_SIGNED) - bzp);
    Ints(pc.y).v[i] = acc;
}
