#version 450
// MatMulInteger (REQUANT 0): Y[b, m, n] = sum_k (A[b, m, k] - a_zp) * (B[b', k, n] - b_zp) in int32, and
// QLinearMatMul (REQUANT 1): that sum requantized to 8 bits with the multiplier a_scale * b_scale / y_scale
// (requantize.glsl). A and B 8-bit (A_SIGNED / B_SIGNED: int8, else uint8). a_zp absent, scalar or per row of
// A (a_zp_step 1); b_zp and b_scale absent, scalar or per column of B (*_step 1), and per batch of B
// (*_batch_step n); a batch stride of 0 shares A or B across the batches. One invocation per output. The
// variant (DTYPE) is the scales' type, float32 or float16 (QLinearMatMul 21).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint A_SIGNED = 0;
layout(constant_id = 1) const uint B_SIGNED = 0;
layout(constant_id = 2) const uint REQUANT = 0;
layout(constant_id = 3) const uint Y_SIGNED = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t a, b, azp, bzp, y, a_scale, b_scale, y_scale, yzp;
    uint m, n, k, batches, a_batch_stride, b_batch_stride, a_zp_step;
    uint bzp_step, bzp_batch_step, bs_step, bs_batch_step;  // per column, per batch

} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Ints { int v[]; };

void main() {
    uint i = flat_index(64);
    if (i >= pc.batches * pc.m * pc.n) return;
    uint col = i % pc.n, row = (i / pc.n) % pc.m, batch = i / (pc.m * pc.n);
    int azp = pc.azp != 0 ? rq_byte(pc.azp, row * pc.a_zp_step, A_SIGNED != 0) : 0;
    int bzp = pc.bzp != 0 ? rq_byte(pc.bzp, batch * pc.bzp_batch_step + col * pc.bzp_step, B_SIGNED != 0) : 0;
    uint a_row = batch * pc.a_batch_stride + row * pc.k, b_base = batch * pc.b_batch_stride + col;
    int acc = 0;
    for (uint k = 0; k < pc.k; ++k)
        acc += (rq_byte(pc.a, a_row + k, A_SIGNED != 0) - azp) * (rq_byte(pc.b, b_base + k * pc.n, B_SIGNED != 0) - bzp);
    if (REQUANT == 0) {
        Ints(pc.y).v[i] = acc;
        return;
    }
    float b_scale = LOAD(Tensor(pc.b_scale), batch * pc.bs_batch_step + col * pc.bs_step);
    float mult = rq_multiplier(LOAD(Tensor(pc.a_scale), 0), b_scale, LOAD(Tensor(pc.y_scale), 0));
    int yzp = pc.yzp != 0 ? rq_byte(pc.yzp, 0, Y_SIGNED != 0) : 0;
    RqBytes(pc.y).v[i] = uint8_t(requantize(acc, mult, yzp, Y_SIGNED != 0) & 0xff);
}
