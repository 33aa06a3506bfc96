#version 450
// DynamicQuantizeLSTM a step a dispatch (vkep/kernels/recurrent.py, Recurrent._stepped): its integer GEMMs as
// ORT's CPU EP computes them (uni_directional_lstm.cc, rnn_helpers.cc), for any number of batch rows.
// recurrent_step.comp does the cell updates; this shader quantizes and multiplies, in the phase PHASE:
//   0 (one workgroup) X's quantization (scale, zero point) over the rows the CPU EP's first GEMM takes: the first
//     max(sequence_lens) steps of every batch row;
//   1 XQ = X quantized with it, less its zero point;
//   2 (a workgroup per (group of rows, direction)) h's quantization over each group of `group` batch rows, and HQ
//     = h quantized with its group's parameters. The CPU EP multiplies each group's rows in a GEMM of their own
//     (its batch_parallel_ split: vkep/kernels/quantize.py, cpu_ep_lstm_rows), so each group has its own scale:
//     a row past its sequence counts as the CPU EP's previous state there, zeros where it writes Y, else the
//     state it kept;
//   3 DST [D, m, n] = the integer sums of A [m, k] (XQ, or this direction's HQ) by the weights' integers [D, n, k],
//     each times (A's row scale * the weight row's scale), as MLAS scales them (the product of the scales first).
//   4 DST (matmul.comp's sums of XQ or HQ by the weights' integers, exact where vkep/kernels/recurrent.py takes
//     them, or INTS: integer_float's int32 sums of slices of K) scaled as phase 3 scales its sums.
// The quantized values are held as floats (exact integers). `work` holds, after recurrent_step.comp's parts,
// XQ [T * B, I], HQ [D, B, H] and the parameters QP: X's (scale, zero point), then each (direction, row)'s of h.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"
#extension GL_EXT_control_flow_attributes : require

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 16) const uint PHASE = 0;
layout(constant_id = 17) const uint SATURATE = 0;  // phase 3: uint8 x int8 sums as MLAS's AVX2 kernels (recurrent_int.glsl)
layout(constant_id = 18) const uint TM = 4;  // phase 3: the block of DST an invocation computes, TM x TN
const uint TN = 8;

layout(push_constant, scalar) uniform Push {
    uint64_t x, lens, h, xq, hq, qp, w, dst;  // h: recurrent_step.comp's state H_ [D, B, H]; w: packed weights, scales
    uint64_t ints;   // phase 4: the sums as int32 (integer_float's slices) into DST, else DST's own floats
    uint T, batch, I, H;
    uint group;      // phase 2: batch rows a group
    uint step;       // phase 2: the processing step
    uint y_given;    // phase 2: whether the node writes Y (a finished row's previous state is then zeros)
    uint m, n, k;    // phase 3
    uint per_row;    // phase 3: A is HQ (each row its parameters), else XQ (X's)
} pc;

shared float scratch[1024];
#define QUANT_SCRATCH scratch
#include "recurrent_int.glsl"

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32Tensor { int v[]; };

uint length_of(uint b) {  // as recurrent_step.comp (its phase 0 reports a length past [0, T])
    int given = Int32Tensor(PRESENT_OR(pc.lens, pc.x)).v[PRESENT_AT(pc.lens, b)];
    return pc.lens == 0 ? pc.T : uint(clamp(given, 0, int(pc.T)));
}

void main() {
    uint tid = gl_LocalInvocationID.x, B = pc.batch, H = pc.H;
    Tensor QP = Tensor(pc.qp);
    if (PHASE == 0) {
        uint steps = 0;
        for (uint b = 0; b < B; ++b) steps = max(steps, length_of(b));
        float lo = 0.0, hi = 0.0;
        Tensor X = Tensor(pc.x);
        uint n = steps * B * pc.I;
        for (uint i0 = tid * 8u; i0 < n; i0 += WG * 8u) {  // (8 a loop step: lavapipe's loop budget, recurrent.py)
            [[unroll]] for (uint j = 0u; j < 8u; ++j) {
                if (i0 + j < n) {
                    float v = LOAD(X, i0 + j);
                    lo = min(lo, v);
                    hi = max(hi, v);
                }
            }
        }
        vec2 q = quantization(lo, hi);
        if (tid == 0) {
            STORE(QP, 0, q.x);
            STORE(QP, 1, q.y);
        }
        return;
    }
    if (PHASE == 1) {
        uint i = flat_index(WG);
        if (i < pc.T * B * pc.I) STORE(Tensor(pc.xq), i, quantized(LOAD(Tensor(pc.x), i), vec2(LOAD(QP, 0), LOAD(QP, 1))));
        return;
    }
    if (PHASE == 2) {
        uint d = gl_WorkGroupID.y, first = gl_WorkGroupID.x * pc.group, end = min(B, first + pc.group);
        Tensor Hs = Tensor(pc.h), HQ = Tensor(pc.hq);
        float lo = 0.0, hi = 0.0;
        uint n = (end - first) * H;
        for (uint i0 = tid * 8u; i0 < n; i0 += WG * 8u) {  // (8 a loop step, as phase 0)
            [[unroll]] for (uint j = 0u; j < 8u; ++j) {
                uint i = i0 + j, b = first + i / H;
                if (i < n && (pc.y_given == 0 || pc.step <= length_of(b))) {
                    float v = LOAD(Hs, (d * B + first) * H + i);
                    lo = min(lo, v);
                    hi = max(hi, v);
                }
            }
        }
        vec2 q = quantization(lo, hi);
        for (uint i0 = tid * 8u; i0 < n; i0 += WG * 8u) {
            [[unroll]] for (uint j = 0u; j < 8u; ++j) {
                uint i = i0 + j;
                if (i < n) STORE(HQ, (d * B + first) * H + i, quantized(LOAD(Hs, (d * B + first) * H + i), q));
            }
        }
        for (uint b = first + tid; b < end; b += WG) {
            STORE(QP, 2 + 2 * (d * B + b), q.x);
            STORE(QP, 3 + 2 * (d * B + b), q.y);
        }
        return;
    }
    if (PHASE == 4) {  // DST [D, m, n] (matmul.comp's exact sums) times (A's row scale * the weight row's scale)
        uint i = flat_index(WG), d = gl_WorkGroupID.z, D = gl_NumWorkGroups.z;  // (the grid's z: the directions)
        if (i >= pc.m * pc.n) return;
        uint at = d * pc.m * pc.n + i, params = pc.per_row != 0 ? 2 + 2 * (d * pc.m + i / pc.n) : 0;
        precise float scale = LOAD(QP, params) * LOAD(Tensor(pc.w), D * pc.n * pc.k + d * pc.n + i % pc.n);
        int int_sum = Int32Tensor(PRESENT_OR(pc.ints, pc.dst)).v[at];  // (read outside the test: common.glsl)
        float sum = pc.ints != 0 ? float(int_sum) : LOAD(Tensor(pc.dst), at);
        precise float value = sum * scale;
        STORE(Tensor(pc.dst), at, value);
        return;
    }
    // PHASE 3: an invocation a TM x TN block of DST, the grid's z the directions. The sums run over the raw uint8
    // values (quantized + zero point) in pairs along K, as MLAS's kernels pair them (each pair clamped to int16
    // where SATURATE), then take off zp * sum(w): the exact sum of (a - zp) * w otherwise.
    uint M = pc.m, N = pc.n, K = pc.k, d = gl_WorkGroupID.z, D = gl_NumWorkGroups.z;
    uint n_tiles = (N + TN - 1) / TN, index = flat_index(WG);
    if (index >= ((M + TM - 1) / TM) * n_tiles) return;
    uint row0 = index / n_tiles * TM, col0 = index % n_tiles * TN;
    Tensor A = Tensor(pc.per_row != 0 ? pc.hq : pc.xq), W = Tensor(pc.w);
    uint a_at[TM], w_at[TN];
    int zp[TM], sums[TM][TN], w_sums[TN];
    [[unroll]] for (uint i = 0; i < TM; ++i) {
        uint row = min(row0 + i, M - 1);  // (rows and columns past the end repeat the last: not stored)
        a_at[i] = ((pc.per_row != 0 ? d * M : 0) + row) * K;
        zp[i] = int(LOAD(QP, pc.per_row != 0 ? 3 + 2 * (d * M + row) : 1));
        [[unroll]] for (uint j = 0; j < TN; ++j) sums[i][j] = 0;
    }
    [[unroll]] for (uint j = 0; j < TN; ++j) {
        w_at[j] = (d * N + min(col0 + j, N - 1)) * K;
        w_sums[j] = 0;
    }
    for (uint k = 0; k < K; k += 2) {
        bool second = k + 1 < K;  // (a last odd element is alone; k1: an index valid either way)
        uint k1 = second ? k + 1 : k;
        int w0[TN], w1[TN];
        [[unroll]] for (uint j = 0; j < TN; ++j) {
            w0[j] = int(LOAD(W, w_at[j] + k));
            w1[j] = second ? int(LOAD(W, w_at[j] + k1)) : 0;
            w_sums[j] += w0[j] + w1[j];
        }
        [[unroll]] for (uint i = 0; i < TM; ++i) {
            int a0 = int(LOAD(A, a_at[i] + k)) + zp[i], a1 = second ? int(LOAD(A, a_at[i] + k1)) + zp[i] : 0;
            [[unroll]] for (uint j = 0; j < TN; ++j) {
                int pair = a0 * w0[j] + a1 * w1[j];
                sums[i][j] += SATURATE != 0 ? clamp(pair, -32768, 32767) : pair;
            }
        }
    }
    Tensor Dst = Tensor(pc.dst);
    [[unroll]] for (uint i = 0; i < TM; ++i) {
        uint row = row0 + i;
        if (row >= M) break;
        float a_scale = LOAD(QP, pc.per_row != 0 ? 2 + 2 * (d * M + row) : 0);
        [[unroll]] for (uint j = 0; j < TN; ++j) {
            uint col = col0 + j;
            if (col >= N) break;
            precise float scale = a_scale * LOAD(W, D * N * K + d * N + col);  // (the weights' row scales)
            precise float value = float(sums[i][j] - zp[i] * w_sums[j]) * scale;
            STORE(Dst, (d * M + row) * N + col, value);
        }
    }
}
