#version 450
// MatMulInteger (REQUANT 0): Y[b, m, n] = sum_k (A[b, m, k] - a_zp) * (B[b', k, n] - b_zp) in int32, and
// QLinearMatMul (REQUANT 1): that sum requantized to 8 bits with the multiplier a_scale * b_scale / y_scale
// (requantize.glsl). A and B 8-bit (A_SIGNED / B_SIGNED: int8, else uint8). a_zp absent, scalar or per row of
// A (a_zp_step 1); b_zp and b_scale absent, scalar or per column of B (*_step 1), and per batch of B
// (*_batch_step n); a batch stride of 0 shares A or B across the batches. The variant (DTYPE) is the scales'
// type, float32 or float16 (QLinearMatMul 21).
// com.microsoft QGemm: one batch, A and B transposed or not (TRANS_A / TRANS_B), an int32 bias C added to the sum
// (BIAS: 0 none, 1 scalar, 2 per column, 3 per row, 4 [M, N]; 5 below), alpha folded into the multiplier as ORT's CPU EP
// folds it ((alpha * a_scale) * b_scale / y_scale), and without y_scale (REQUANT 2) float32 outputs
// float(sum) * ((alpha * a_scale) * b_scale).
// com.microsoft MatMulInteger16 (REQUANT 0, WIDE16): A and B int16, read as two bytes each, no zero points.
// com.microsoft MatMulIntegerToFloat / DynamicQuantizeMatMul / QAttention's projections: REQUANT 2 with BIAS 5, a
// float32 bias per column added to the scaled sum (MLAS's scale-bias output processor: a product, then a sum).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint A_SIGNED = 0;
layout(constant_id = 1) const uint B_SIGNED = 0;
layout(constant_id = 2) const uint REQUANT = 0;
layout(constant_id = 3) const uint Y_SIGNED = 0;
layout(constant_id = 4) const uint TRANS_A = 0;
layout(constant_id = 5) const uint TRANS_B = 0;
layout(constant_id = 6) const uint BIAS = 0;
layout(constant_id = 7) const uint WIDE16 = 0;
// SATURATE: uint8 A times int8 B as ORT's CPU EP computes them on x86-64 without VNNI (MLAS's vpmaddubsw): the raw
// bytes' products added in pairs along K (k, k + 1) into int16, each pair sum clamped to [-32768, 32767], then the
// zero points taken off as sums: - a_zp * sum(b) - b_zp * sum(a) + K * a_zp * b_zp (vkep/kernels/quantize.py).
// SATURATE 2: int8 A that the CPU EP computes as the uint8 A + 128 (a QDQ group, vkep/ort/qdq.py), zero point + 128.
layout(constant_id = 8) const uint SATURATE = 0;
const int A_SHIFT = SATURATE == 2 ? 128 : 0;

layout(push_constant, scalar) uniform Push {
    uint64_t a, b, azp, bzp, y, a_scale, b_scale, y_scale, yzp, c;
    uint m, n, k, batches, a_batch_stride, b_batch_stride, a_zp_step;
    uint bzp_step, bzp_batch_step, bs_step, bs_batch_step;  // per column, per batch
    float alpha;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Ints { int v[]; };

int operand(uint64_t t, uint i, bool is_signed) {  // element i of A or B: 8-bit, or int16 (WIDE16)
    if (WIDE16 != 0) {
        int v = int(uint(RqBytes(t).v[2 * i]) | (uint(RqBytes(t).v[2 * i + 1]) << 8));
        return (v << 16) >> 16;
    }
    return rq_byte(t, i, is_signed);
}

// Each invocation computes a TM x TN block of one batch's output, so that every byte of A it loads serves TN
// columns and every byte of B TM rows (TM_ROWS / TN_COLS in vkep/kernels/quantize.py).
const uint TM = 8, TN = 16;

void main() {
    uint i = flat_index(64);
    uint m_tiles = (pc.m + TM - 1) / TM, n_tiles = (pc.n + TN - 1) / TN;
    if (i >= pc.batches * m_tiles * n_tiles) return;
    uint nt = i % n_tiles, mt = (i / n_tiles) % m_tiles, batch = i / (n_tiles * m_tiles);
    bool a_signed = A_SIGNED != 0, b_signed = B_SIGNED != 0;
    uint rows[TM], cols[TN];
    int azp[TM], bzp[TN];
    [[unroll]] for (uint r = 0; r < TM; ++r) {
        rows[r] = min(mt * TM + r, pc.m - 1);  // (past the last row or column: computed, not stored)
        azp[r] = rq_byte(PRESENT_OR(pc.azp, pc.a), PRESENT_AT(pc.azp, rows[r] * pc.a_zp_step), a_signed);
        azp[r] = pc.azp != 0 ? azp[r] : 0;
    }
    [[unroll]] for (uint c = 0; c < TN; ++c) {
        cols[c] = min(nt * TN + c, pc.n - 1);
        bzp[c] = rq_byte(PRESENT_OR(pc.bzp, pc.b), PRESENT_AT(pc.bzp, batch * pc.bzp_batch_step + cols[c] * pc.bzp_step),
                         b_signed);
        bzp[c] = pc.bzp != 0 ? bzp[c] : 0;
    }
    uint a_base = batch * pc.a_batch_stride, b_base = batch * pc.b_batch_stride;
    int acc[TM][TN];
    [[unroll]] for (uint r = 0; r < TM; ++r)
        [[unroll]] for (uint c = 0; c < TN; ++c) acc[r][c] = 0;
    int a_sum[TM], b_sum[TN];  // (SATURATE: the raw bytes' sums along K)
    [[unroll]] for (uint r = 0; r < TM; ++r) a_sum[r] = 0;
    [[unroll]] for (uint c = 0; c < TN; ++c) b_sum[c] = 0;
    for (uint k = 0; SATURATE != 0 && k < pc.k; k += 2) {
        bool second = k + 1 < pc.k;
        int a0[TM], a1[TM], b0[TN], b1[TN];
        [[unroll]] for (uint r = 0; r < TM; ++r) {
            uint at = TRANS_A != 0 ? k * pc.m + rows[r] : rows[r] * pc.k + k;
            a0[r] = operand(pc.a, a_base + at, a_signed) + A_SHIFT;
            a1[r] = second ? operand(pc.a, a_base + at + (TRANS_A != 0 ? pc.m : 1), a_signed) + A_SHIFT : 0;
            a_sum[r] += a0[r] + a1[r];
        }
        [[unroll]] for (uint c = 0; c < TN; ++c) {
            uint at = TRANS_B != 0 ? cols[c] * pc.k + k : k * pc.n + cols[c];
            b0[c] = operand(pc.b, b_base + at, b_signed);
            b1[c] = second ? operand(pc.b, b_base + at + (TRANS_B != 0 ? 1 : pc.n), b_signed) : 0;
            b_sum[c] += b0[c] + b1[c];
        }
        [[unroll]] for (uint r = 0; r < TM; ++r)
            [[unroll]] for (uint c = 0; c < TN; ++c) acc[r][c] += clamp(a0[r] * b0[c] + a1[r] * b1[c], -32768, 32767);
    }
    if (SATURATE != 0) {
        [[unroll]] for (uint r = 0; r < TM; ++r)
            [[unroll]] for (uint c = 0; c < TN; ++c)
                acc[r][c] += int(pc.k) * (azp[r] + A_SHIFT) * bzp[c] - (azp[r] + A_SHIFT) * b_sum[c] - bzp[c] * a_sum[r];
    }
    for (uint k = 0; SATURATE == 0 && k < pc.k; ++k) {
        int av[TM], bv[TN];
        [[unroll]] for (uint r = 0; r < TM; ++r) {
            uint at = TRANS_A != 0 ? k * pc.m + rows[r] : rows[r] * pc.k + k;
            av[r] = operand(pc.a, a_base + at, a_signed) - azp[r];
        }
        [[unroll]] for (uint c = 0; c < TN; ++c) {
            uint at = TRANS_B != 0 ? cols[c] * pc.k + k : k * pc.n + cols[c];
            bv[c] = operand(pc.b, b_base + at, b_signed) - bzp[c];
        }
        [[unroll]] for (uint r = 0; r < TM; ++r)
            [[unroll]] for (uint c = 0; c < TN; ++c) acc[r][c] += av[r] * bv[c];
    }
    precise float a_scale = REQUANT != 0 ? pc.alpha * LOAD(Tensor(pc.a_scale), 0) : 0.0;
    float y_scale = REQUANT != 0 ? LOAD(Tensor(pc.y_scale), 0) : 0.0;
    int yzp = rq_byte(PRESENT_OR(pc.yzp, pc.a), 0, Y_SIGNED != 0);
    yzp = pc.yzp != 0 ? yzp : 0;
    [[unroll]] for (uint c = 0; c < TN; ++c) {
        if (nt * TN + c >= pc.n) break;
        precise float mult = 0.0;
        if (REQUANT != 0) {
            float b_scale = LOAD(Tensor(pc.b_scale), batch * pc.bs_batch_step + cols[c] * pc.bs_step);
            mult = REQUANT == 2 ? a_scale * b_scale : rq_multiplier(a_scale, b_scale, y_scale);
        }
        [[unroll]] for (uint r = 0; r < TM; ++r) {
            if (mt * TM + r >= pc.m) break;
            uint o = (batch * pc.m + rows[r]) * pc.n + cols[c];
            if (BIAS != 0 && BIAS != 5) {
                uint at = BIAS == 1 ? 0 : BIAS == 2 ? cols[c] : BIAS == 3 ? rows[r] : rows[r] * pc.n + cols[c];
                acc[r][c] += Ints(pc.c).v[at];
            }
            if (REQUANT == 2) {
                precise float v = float(acc[r][c]) * mult;
                if (BIAS == 5) v += RqFloats(pc.c).v[cols[c]];
                RqFloats(pc.y).v[o] = v;
            } else if (REQUANT == 0)
                Ints(pc.y).v[o] = acc[r][c];
            else
                RqBytes(pc.y).v[o] = uint8_t(requantize(acc[r][c], mult, yzp, Y_SIGNED != 0) & 0xff);
        }
    }
}
