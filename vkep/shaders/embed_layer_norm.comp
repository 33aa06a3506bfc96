#version 450
// com.microsoft EmbedLayerNormalization as ORT's CPU EP computes it (embed_layer_norm.cc): one thread per token
// sums its word, position and (optional) segment rows in that order, then normalizes the row with sequential
// sums (mean, then the squares), so the float operations are ORT's. An index out of its table reports to the
// error word (the run fails, as on the CPU EP) and reads row 0. (mask_index: mask_index.comp.)
// com.microsoft QEmbedLayerNormalization (QUANT 1: uint8 tables, 2: int8): every table element read as the CPU EP
// dequantizes it, float(q - zero_point) * scale, with the five tables' scales (float32) then zero points (int32)
// at `params` (word, position, segment, gamma, beta).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint QUANT = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Int32s { int v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t input_ids, segment_ids, word, position, segment, gamma, beta, position_ids, y, sum, err, params;
    uint tokens, seq, hidden, words, positions, segments, batch_positions;  // batch_positions: position_ids [B, S]
    float epsilon;
} pc;

// the row ids[i] names in a table of `rows` (0 where the ids are absent, or out of range: reported). The ids are
// read from a valid address either way (an absent one's is input_ids'), then chosen (common.glsl PRESENT_OR).
uint row(uint64_t ids, uint i, uint rows) {
    int id = Int32s(PRESENT_OR(ids, pc.input_ids)).v[i];
    bool bad = id < 0 || uint(id) >= rows;
    if (ids != 0 && bad) report_index_error(pc.err);
    return ids != 0 && !bad ? uint(id) : 0u;
}

const uint WORD = 0, POSITION = 1, SEGMENT = 2, GAMMA = 3, BETA = 4;  // (their place in params)

// element `at` of a table (`which`: its place in params)
float table(uint64_t t, uint which, uint at) {
    if (QUANT == 0) return LOAD(Tensor(t), at);
    precise float v = float(rq_byte(t, at, QUANT == 2) - Int32s(pc.params).v[5 + which]) *
                      RqFloats(pc.params).v[which];
    return v;
}

void main() {
    uint t = flat_index(64);
    if (t >= pc.tokens) return;
    uint h = pc.hidden, s = t % pc.seq;
    uint w = row(pc.input_ids, t, pc.words);
    uint p = row(pc.position_ids, pc.batch_positions != 0u ? t : s, pc.positions);
    if (pc.position_ids == 0) {  // (the token's place in its sequence)
        p = s < pc.positions ? s : 0u;
        if (s >= pc.positions) report_index_error(pc.err);
    }
    uint g = row(pc.segment_ids, t, pc.segments);
    uint64_t segment = PRESENT_OR(pc.segment, pc.word);
    Tensor y = Tensor(pc.y), sums = Tensor(PRESENT_OR(pc.sum, pc.y));
    precise float total = 0.0;
    for (uint i = 0u; i < h; ++i) {
        precise float v = table(pc.word, WORD, w * h + i) + table(pc.position, POSITION, p * h + i);
        if (pc.segment_ids != 0) v += table(segment, SEGMENT, g * h + i);
        STORE(y, t * h + i, v);
        if (pc.sum != 0) STORE(sums, t * h + i, v);
        total += v;
    }
    precise float mean = total / float(h);
    precise float squares = 0.0;
    for (uint i = 0u; i < h; ++i) {
        precise float a = LOAD(y, t * h + i) - mean;
        squares += a * a;
    }
    precise float e = sqrt(squares / float(h) + pc.epsilon);
    for (uint i = 0u; i < h; ++i) {
        precise float a = LOAD(y, t * h + i) - mean;
        STORE(y, t * h + i, a / e * table(pc.gamma, GAMMA, i) + table(pc.beta, BETA, i));
    }
}
