#version 450
// RNN, GRU and LSTM (ONNX): one workgroup per (batch row, direction) walks the whole sequence (or the
// steps [first, end) of it) inside one dispatch, holding the hidden state h (and LSTM's cell c) in shared
// memory, with barriers between the phases of a step. No dispatch per step or per gate.
//
// Each step: (A) every gate row's pre-activation, x_t . W[row] + h . R[row], one row per invocation
// (GRU's h gate takes only x_t . W here, and with linear_before_reset h . R apart); (B) each hidden unit's
// update from its gates, as ORT's CPU EP computes it: the bias is added where its clip adds it, the
// activations are those of the node. Steps past a row's sequence_lens[b] write zeros to Y and leave the
// state; the reverse direction walks t = len - 1 down to 0.
//
// Tensors (layout 0 / layout 1): X [T, B, I] / [B, T, I]; Y [T, D, B, H] / [B, T, D, H]; initial and final
// states [D, B, H] / [B, D, H]; W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H], P [D, 3*H] as in ONNX.
// A dispatch that is not the last of a sequence split into several (lavapipe's loop budget) writes the
// running state to yh / yc, which the next one reads as h0 / c0.
//
// DynamicQuantizeLSTM (FLAG_QUANTIZED): W and R hold the 8-bit weights less their zero point (as floats),
// each followed by the scale of every gate row ([D, G*H]). With one batch row, the gates are computed as
// ORT's CPU EP computes them (rnn_helpers.cc, the quantized ComputeGemm): X (its first `len` steps, all
// of it) and each step's h are quantized to uint8 with their own min / max (GetQuantizationParameter), the
// products summed in integers and scaled by (activation scale * weight scale) (recurrent_int.glsl). More rows run
// a step a dispatch (recurrent_quant.comp), as the CPU EP quantizes h over groups of them.
// The LSTM's Sigmoid and Tanh are MLAS's to the last bit (mlas_logistic.glsl), as the CPU EP's LSTM calls them:
// each step requantizes h, and an h one ulp off flips a rounding near a tie, which moves later steps by 1e-3 to 1.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activation.glsl"
#include "precise.glsl"
#include "mlas_logistic.glsl"

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 2) const uint HMAX = 64;    // shared state size, >= hidden_size
layout(constant_id = 15) const uint IMAX = 4;  // DynamicQuantizeLSTM: the quantized step of X, >= input_size
// DynamicQuantizeLSTM's integer GEMMs as ORT's CPU EP computes uint8 x int8 on x86-64 without VNNI (MLAS's
// vpmaddubsw, vkep/kernels/quantize.py): the raw bytes' products in pairs along K into int16, each pair clamped,
// then the activation's zero point taken off as zp * sum(w). Bit 0: W's GEMM (over X), bit 1: R's (over h);
// set for int8 weights with zero points 0.
layout(constant_id = 16) const uint SATURATE = 0;
// XW: pc.x is X . W^T for every step and direction, [D, T * B, G * H] in X's row order (vkep/kernels/recurrent.py
// computes it with matmul.comp: a step then reads its gates' x part instead of a dot product over the input)
layout(constant_id = 17) const uint XW = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, w, r, b, lens, h0, c0, p, y, yh, yc, err;  // 0: absent
    uint T, batch, I, H;
    uint first, end;  // the processing steps of this dispatch
    uint acts;        // 4 bits per activation, as the constants above (codes: vkep/kernels/recurrent.py),
                      // then FLAG_* from bit 24
    float clip;       // RNN: +inf for none; GRU / LSTM: FLT_MAX for none
} pc;
#define FLAGS (pc.acts >> 24)
#define ANY_TENSOR pc.x
#include "recurrent_cell.glsl"


layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32Tensor { int v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Vec4Tensor { vec4 v[]; };

// h of the previous step, then GRU's aux: r (.) h, or with linear_before_reset h . Rh; 4 units an element
// (vec4 reads in dot_shared)
shared vec4 vecs[2 * HMAX / 4];
const uint AUX = HMAX / 4;
#define unit(from, j) vecs[(from) + ((j) >> 2)][(j) & 3]
#define hs(j) unit(0, j)
#define aux(j) unit(AUX, j)
shared float cs[HMAX];          // LSTM: c of the previous step
shared float gates[GATES * HMAX];  // (also the min / max reductions of the quantized steps)
shared float xq[IMAX];             // DynamicQuantizeLSTM: this step's X, quantized, less its zero point

// sum over k < n of M[m + k] * V[v + k], M and V in device memory
float dot_global(uint64_t maddr, uint m, uint64_t vaddr, uint v, uint n) {
#if DTYPE == 0
    if ((FLAGS & FLAG_VEC4) != 0) {  // a load costs lavapipe the same, whatever its width
        Vec4Tensor M4 = Vec4Tensor(maddr + 4 * uint64_t(m)), V4 = Vec4Tensor(vaddr + 4 * uint64_t(v));
        vec4 a = vec4(0.0), b = vec4(0.0);
        uint k4 = 0;
        for (; k4 + 2 <= n / 4; k4 += 2) {
            a += M4.v[k4] * V4.v[k4];
            b += M4.v[k4 + 1] * V4.v[k4 + 1];
        }
        if (k4 < n / 4) a += M4.v[k4] * V4.v[k4];
        vec4 s = a + b;
        return (s.x + s.y) + (s.z + s.w);
    }
#endif
    Tensor M = Tensor(maddr), V = Tensor(vaddr);
    float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    uint k = 0;
    for (; k + 8 <= n; k += 8) {  // 8 a step: lavapipe counts loop iterations (see kernels/base.py)
        s0 += LOAD(M, m + k) * LOAD(V, v + k) + LOAD(M, m + k + 4) * LOAD(V, v + k + 4);
        s1 += LOAD(M, m + k + 1) * LOAD(V, v + k + 1) + LOAD(M, m + k + 5) * LOAD(V, v + k + 5);
        s2 += LOAD(M, m + k + 2) * LOAD(V, v + k + 2) + LOAD(M, m + k + 6) * LOAD(V, v + k + 6);
        s3 += LOAD(M, m + k + 3) * LOAD(V, v + k + 3) + LOAD(M, m + k + 7) * LOAD(V, v + k + 7);
    }
    for (uint u = 0; u < 7; ++u)  // a constant trip count: unrolled, outside the budget
        if (k + u < n) s0 += LOAD(M, m + k + u) * LOAD(V, v + k + u);
    return (s0 + s1) + (s2 + s3);
}

// the same with V in shared memory: h (from = 0) or GRU's aux (from = AUX)
float dot_shared(uint64_t maddr, uint m, uint n, uint from) {
#if DTYPE == 0
    if ((FLAGS & FLAG_VEC4) != 0) {
        Vec4Tensor M4 = Vec4Tensor(maddr + 4 * uint64_t(m));
        vec4 a = vec4(0.0), b = vec4(0.0);
        uint k = 0;
        for (; k + 8 <= n; k += 8) {
            a += M4.v[k / 4] * vecs[from + k / 4];
            b += M4.v[k / 4 + 1] * vecs[from + k / 4 + 1];
        }
        if (k < n) a += M4.v[k / 4] * vecs[from + k / 4];
        vec4 s = a + b;
        return (s.x + s.y) + (s.z + s.w);
    }
#endif
    Tensor M = Tensor(maddr);
    float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    uint k = 0;
    for (; k + 8 <= n; k += 8) {
        s0 += LOAD(M, m + k) * unit(from, k) + LOAD(M, m + k + 4) * unit(from, k + 4);
        s1 += LOAD(M, m + k + 1) * unit(from, k + 1) + LOAD(M, m + k + 5) * unit(from, k + 5);
        s2 += LOAD(M, m + k + 2) * unit(from, k + 2) + LOAD(M, m + k + 6) * unit(from, k + 6);
        s3 += LOAD(M, m + k + 3) * unit(from, k + 3) + LOAD(M, m + k + 7) * unit(from, k + 7);
    }
    for (uint u = 0; u < 7; ++u)
        if (k + u < n) s0 += LOAD(M, m + k + u) * unit(from, k + u);
    return (s0 + s1) + (s2 + s3);
}

// the CPU EP's integer GEMMs (recurrent_int.glsl), with V this step's quantized X (xq) or h (aux)
#define QUANT_SCRATCH gates
#include "recurrent_int.glsl"
#define V(k) int(xq[k])
INT_DOT(int_dot_x)
SAT_DOT(sat_dot_x)
#undef V
#define V(k) int(aux(k))
INT_DOT(int_dot_h)
SAT_DOT(sat_dot_h)
#undef V

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint b = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x, d = gl_WorkGroupID.y, D = gl_NumWorkGroups.y;
    if (b >= pc.batch) return;  // batches past 65535 rows fold into z
    uint T = pc.T, B = pc.batch, I = pc.I, H = pc.H, GH = GATES * H;
    bool batch_first = (FLAGS & FLAG_BATCH_FIRST) != 0;
    bool reverse = d == 1 || (FLAGS & FLAG_REVERSE) != 0;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);

    uint len = T;
    int lens_b = Int32Tensor(PRESENT_OR(pc.lens, pc.x)).v[PRESENT_AT(pc.lens, b)];
    if (pc.lens != 0) {
        int given = lens_b;
        if (given < 0 || uint(given) > T) {  // the CPU EP fails the run: so does this (common.glsl)
            report_index_error(pc.err);
            given = clamp(given, 0, int(T));
        }
        len = uint(given);
    }
    uint state = batch_first ? (b * D + d) * H : (d * B + b) * H;  // this row in [D, B, H] / [B, D, H]
    uint wrow = d * GH * I, rrow = d * GH * H;
    bool quantized_weights = (FLAGS & FLAG_QUANTIZED) != 0;
    Tensor WScale = Tensor(pc.w + 4 * uint64_t(D * GH * I)), RScale = Tensor(pc.r + 4 * uint64_t(D * GH * H));
    vec2 xquant = vec2(1.0, 0.0);
    if (quantized_weights) {  // X's first len steps (one row each), quantized as one tensor
        float lo = 0.0, hi = 0.0;
        for (uint k = tid; k < len * I; k += WG) {
            float v = LOAD(X, k);
            lo = min(lo, v);
            hi = max(hi, v);
        }
        xquant = quantization(lo, hi);
    }
    for (uint j = tid; j < H; j += WG) {
        float h0 = LOAD(Tensor(PRESENT_OR(pc.h0, pc.x)), PRESENT_AT(pc.h0, state + j));
        float c0 = LOAD(Tensor(PRESENT_OR(pc.c0, pc.x)), PRESENT_AT(pc.c0, state + j));
        hs(j) = pc.h0 != 0 ? h0 : 0.0;
        if (CELL == 2) cs[j] = pc.c0 != 0 ? c0 : 0.0;
    }
    barrier();

    for (uint s = pc.first; s < pc.end; ++s) {
        bool valid = s < len;  // uniform in the workgroup: its barriers are too
        uint t = valid && reverse ? len - 1 - s : s;
        uint yrow = batch_first ? ((b * T + t) * D + d) * H : ((t * D + d) * B + b) * H;
        if (!valid) {
            if (pc.y != 0)
                for (uint j = tid; j < H; j += WG) STORE(Y, yrow + j, 0.0);
            continue;
        }
        uint xrow = batch_first ? (b * T + t) * I : (t * B + b) * I;
        vec2 hquant = vec2(1.0, 0.0);
        if (quantized_weights) {  // this step's x and h quantized
            float lo = 0.0, hi = 0.0;
            for (uint j = tid; j < H; j += WG) {
                lo = min(lo, hs(j));
                hi = max(hi, hs(j));
            }
            hquant = quantization(lo, hi);
            for (uint k = tid; k < I; k += WG) xq[k] = quantized(LOAD(X, xrow + k), xquant);
            for (uint j = tid; j < H; j += WG) aux(j) = quantized(hs(j), hquant);
            barrier();
        }
        // (A) pre-activations of the gate rows
        for (uint row = tid; row < GH; row += WG) {
            if (quantized_weights) {
                float ws = LOAD(WScale, d * GH + row), rs = LOAD(RScale, d * GH + row);
                // as MLAS: each GEMM's int32 sum times (its scales' product), then added
                int sx = (SATURATE & 1u) != 0 ? sat_dot_x(pc.w, wrow + row * I, I, int(xquant.y))
                                              : int_dot_x(pc.w, wrow + row * I, I);
                int sh = (SATURATE & 2u) != 0 ? sat_dot_h(pc.r, rrow + row * H, H, int(hquant.y))
                                              : int_dot_h(pc.r, rrow + row * H, H);
                precise float acc = float(sx) * (xquant.x * ws) + float(sh) * (hquant.x * rs);
                gates[row] = acc;
                continue;
            }
            // (XW: x_t . W[row] as matmul.comp computed it for every step before this dispatch)
            float acc = XW != 0 ? LOAD(X, (d * T * B + xrow / I) * GH + row) : dot_global(pc.w, wrow + row * I, pc.x, xrow, I);
            if (CELL != 1 || row < 2 * H) acc += dot_shared(pc.r, rrow + row * H, H, 0);
            else if ((FLAGS & FLAG_LINEAR_BEFORE_RESET) != 0) aux(row - 2 * H) = dot_shared(pc.r, rrow + row * H, H, 0);
            gates[row] = acc;
        }
        barrier();
        if (CELL == 1 && (FLAGS & FLAG_LINEAR_BEFORE_RESET) == 0) {
            // GRU: r, then (r (.) h) . Rh for the h gate
            for (uint j = tid; j < H; j += WG) aux(j) = gru_reset(d, j, gates[H + j]) * hs(j);
            barrier();
        }
        // (B) the state update of each hidden unit
        for (uint j = tid; j < H; j += WG) {
            vec4 pre = vec4(gates[j], 0.0, 0.0, 0.0);
            if (CELL != 0) pre.yz = vec2(gates[H + j], gates[2 * H + j]);
            if (CELL == 2) pre.w = gates[3 * H + j];
            float rh = 0.0;  // GRU: h . Rh (linear_before_reset), or (r (.) h) . Rh
            if (CELL == 1)
                rh = (FLAGS & FLAG_LINEAR_BEFORE_RESET) != 0 ? aux(j) : dot_shared(pc.r, rrow + (2 * H + j) * H, H, AUX);
            float c = CELL == 2 ? cs[j] : 0.0;
            float h = unit_update(d, j, pre, rh, hs(j), c);
            if (CELL == 2) cs[j] = c;
            hs(j) = h;  // (A) of this step is over: no invocation reads h until the barrier below
            if (pc.y != 0) STORE(Y, yrow + j, h);
        }
        barrier();
    }

    // the final states: GRU and LSTM give zeros for an empty sequence, RNN the state it carried
    bool last = (FLAGS & FLAG_LAST) != 0;
    bool empty = last && CELL != 0 && len == 0;
    for (uint j = tid; j < H; j += WG) {
        if (pc.yh != 0) STORE(Tensor(pc.yh), state + j, empty ? 0.0 : hs(j));
        if (CELL == 2 && pc.yc != 0) STORE(Tensor(pc.yc), state + j, empty ? 0.0 : cs[j]);
    }
}
