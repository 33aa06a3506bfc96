#version 450
// com.microsoft MatMulNBits: Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, k / block]) * scale[n, k / block]
// (+ bias[n]), the weights quantized to BITS (4 or 8) in blocks of `block` along K as ORT packs them:
// B is [N][blocks][block * BITS / 8] bytes, a byte's low nibble first; scales [N * blocks] of A's type;
// zero points absent (2^(BITS-1)) or bytes packed like B, ceil(blocks * BITS / 8) per row of B.
// One invocation per output element, accumulating in float32 (A's type: DTYPE = DTYPE_Y).
// INT8_A (accuracy_level 4, as ORT's CPU EP computes it: MLAS's CompInt8): each block of A's row is quantized
// to int8 (scale max|a| / 127, round to nearest even), its integer dot product with the weights' block is
// scaled by both scales.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint BITS = 4;
layout(constant_id = 1) const uint INT8_A = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t a, b, scales, zp, bias, y;
    uint m, n, k, block, blocks;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 1) buffer Bytes { uint8_t v[]; };

uint nibble_or_byte(Bytes t, uint row_start, uint j) {
    if (BITS == 8) return uint(t.v[row_start + j]);
    uint byte = uint(t.v[row_start + j / 2]);
    return (j & 1u) != 0 ? byte >> 4 : byte & 15u;
}

void main() {
    uint i = flat_index(64);
    if (i >= pc.m * pc.n) return;
    uint row = i / pc.n, col = i % pc.n;
    Tensor A = Tensor(pc.a);
    Tensor S = Tensor(pc.scales);
    Bytes B = Bytes(pc.b);
    uint blob = pc.block * BITS / 8;
    uint zp_row = (pc.blocks * BITS + 7) / 8;
    float acc = 0.0;
    for (uint kb = 0; kb < pc.blocks; ++kb) {
        float scale = LOAD(S, col * pc.blocks + kb);
        float zp = pc.zp != 0 ? float(nibble_or_byte(Bytes(pc.zp), col * zp_row, kb)) : float(1u << (BITS - 1));
        uint k0 = kb * pc.block, kend = min(k0 + pc.block, pc.k);
        uint base = (col * pc.blocks + kb) * blob;
        if (INT8_A != 0) {
            float amax = 0.0;
            for (uint k = k0; k < kend; ++k) amax = max(amax, abs(LOAD(A, row * pc.k + k)));
            float inverse = amax != 0.0 ? precise_div(127.0, amax) : 0.0;
            int izp = int(zp), dot = 0;
            for (uint k = k0; k < kend; ++k) {
                precise float scaled = LOAD(A, row * pc.k + k) * inverse;
                dot += int(roundEven(scaled)) * (int(nibble_or_byte(B, base, k - k0)) - izp);
            }
            acc += float(dot) * (precise_div(amax, 127.0) * scale);
        } else {
            for (uint k = k0; k < kend; ++k)
                acc += LOAD(A, row * pc.k + k) * ((float(nibble_or_byte(B, base, k - k0)) - zp) * scale);
        }
    }
    if (pc.bias != 0) acc += LOAD(Tensor(pc.bias), col);
    STORE_Y(TensorY(pc.y), i, acc);
}
