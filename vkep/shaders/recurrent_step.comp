#version 450
// RNN, GRU and LSTM a step a dispatch, for batches of many rows (vkep/kernels/recurrent.py, Recurrent._stepped;
// recurrent.comp walks the whole sequence in one workgroup per row instead). matmul.comp computes X . W^T for
// every step before the loop (XW [D, T * B, G * H], X's rows in X's order) and each step's h . R^T (HR
// [D, B, G * H]); GRU without linear_before_reset also (r (.) h) . Rh^T (RH [D, B, H]). This shader is the rest,
// one invocation per (direction, batch row, hidden unit), in the phase PHASE:
//   0 (before the first step) the state from initial_h / initial_c, or zeros, and sequence_lens checked;
//   1 a step's cell update (recurrent_cell.glsl) and its Y;
//   2 GRU's aux = r (.) h, which matmul.comp then multiplies by Rh;
//   3 (after the last step) the final states.
// The state H_ (and C_) [D, B, H] is updated in place: each invocation reads and writes only its own unit.
// `work` holds, one after the other (float32): XW, HR, H_, C_, aux, RH (Recurrent._stepped).
// Steps past a row's sequence_lens[b] write zeros to Y and leave the state; the reverse direction (and
// direction 1 of bidirectional) walks t = len - 1 down to 0. Layouts as recurrent.comp's.
// DynamicQuantizeLSTM: recurrent_quant.comp's integer GEMMs give XW and HR instead, scaled as the CPU EP's.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activation.glsl"
#include "mlas_logistic.glsl"

layout(local_size_x_id = 1) in;
layout(constant_id = 16) const uint PHASE = 1;

layout(push_constant, scalar) uniform Push {
    uint64_t work, b, lens, h0, c0, p, y, yh, yc, err;  // 0: absent
    uint T, batch, H;
    uint hr_row;      // HR's row: G * H, or 2 * H (GRU without linear_before_reset: its h gate is RH)
    uint step;        // phases 1 and 2: the processing step
    uint acts;        // as recurrent.comp's
    float clip;
} pc;
#define FLAGS (pc.acts >> 24)
#define ANY_TENSOR pc.work
#include "recurrent_cell.glsl"

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32Tensor { int v[]; };

// row b's sequence length (T without sequence_lens; the CPU EP fails the run past [0, T], and so does phase 0)
uint length_of(uint b) {
    int given = Int32Tensor(PRESENT_OR(pc.lens, pc.work)).v[PRESENT_AT(pc.lens, b)];
    return pc.lens == 0 ? pc.T : uint(clamp(given, 0, int(pc.T)));
}

void main() {
    uint B = pc.batch, H = pc.H, GH = GATES * H;
    uint d = gl_WorkGroupID.z, D = gl_NumWorkGroups.z;  // (the grid's z: the directions)
    uint index = flat_index(gl_WorkGroupSize.x);
    if (index >= B * H) return;
    uint j = index % H, b = index / H;
    // the parts of `work`, as element offsets
    uint units = D * B * H, at_hr = D * pc.T * B * GH, at_h = at_hr + D * B * pc.hr_row, at_c = at_h + units;
    uint at_aux = at_c + (CELL == 2 ? units : 0), at_rh = at_aux + units;
    Tensor Work = Tensor(pc.work);
    bool batch_first = (FLAGS & FLAG_BATCH_FIRST) != 0;
    uint unit = (d * B + b) * H + j;                                          // in H_, C_, aux, RH
    uint state = batch_first ? (b * D + d) * H + j : unit;                    // in the node's states
    if (PHASE == 0) {
        if (pc.lens != 0 && d == 0 && j == 0) {
            int given = Int32Tensor(pc.lens).v[b];
            if (given < 0 || uint(given) > pc.T) report_index_error(pc.err);
        }
        float h0 = LOAD(Tensor(PRESENT_OR(pc.h0, pc.work)), PRESENT_AT(pc.h0, state));
        float c0 = LOAD(Tensor(PRESENT_OR(pc.c0, pc.work)), PRESENT_AT(pc.c0, state));
        STORE(Work, at_h + unit, pc.h0 != 0 ? h0 : 0.0);
        if (CELL == 2) STORE(Work, at_c + unit, pc.c0 != 0 ? c0 : 0.0);
        return;
    }
    uint len = length_of(b), s = pc.step;
    if (PHASE == 3) {  // the final states: GRU and LSTM give zeros for an empty sequence, RNN the state it carried
        bool empty = CELL != 0 && len == 0;
        if (pc.yh != 0) STORE(Tensor(pc.yh), state, empty ? 0.0 : LOAD(Work, at_h + unit));
        if (CELL == 2 && pc.yc != 0) STORE(Tensor(pc.yc), state, empty ? 0.0 : LOAD(Work, at_c + unit));
        return;
    }
    bool reverse = d == 1 || (FLAGS & FLAG_REVERSE) != 0;
    bool valid = s < len;
    uint t = valid && reverse ? len - 1 - s : s;
    // XW's row of (t, b): X's row order
    uint xw = (d * pc.T * B + (batch_first ? b * pc.T + t : t * B + b)) * GH + j;
    uint hr = at_hr + (d * B + b) * pc.hr_row + j;
    vec4 pre = vec4(0.0);
    for (uint k = 0; k < GATES; ++k) {  // (a constant trip count: unrolled)
        float x = LOAD(Work, xw + k * H), h = 0.0;
        if (k * H < pc.hr_row) h = LOAD(Work, hr + k * H);
        pre[k] = CELL == 1 && k == 2 ? x : x + h;  // (GRU's h gate adds h's part in the cell)
    }
    if (PHASE == 2) {
        if (valid) STORE(Work, at_aux + unit, gru_reset(d, j, pre.y) * LOAD(Work, at_h + unit));
        return;
    }
    uint yrow = batch_first ? ((b * pc.T + t) * D + d) * H : ((t * D + d) * B + b) * H;
    float h = LOAD(Work, at_h + unit), c = CELL == 2 ? LOAD(Work, at_c + unit) : 0.0;
    if (valid) {
        float rh = 0.0;  // GRU: h . Rh (linear_before_reset), or (r (.) h) . Rh
        if (CELL == 1)
            rh = (FLAGS & FLAG_LINEAR_BEFORE_RESET) != 0 ? LOAD(Work, hr + 2 * H) : LOAD(Work, at_rh + unit);
        h = unit_update(d, j, pre, rh, h, c);
        STORE(Work, at_h + unit, h);
        if (CELL == 2) STORE(Work, at_c + unit, c);
    }
    if (pc.y != 0) STORE(Tensor(pc.y), yrow + j, valid ? h : 0.0);
}
