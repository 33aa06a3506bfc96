#version 450
// com.microsoft Attention's additive mask, as ORT's CPU EP builds it (PrepareMask, then attention_bias added):
// bias[b, h, s, t] = attention_bias[b, h, s, t] (0 without one) + mask_filter_value where mask_index masks key t
// for query s of batch b (KIND 1: [B] ends, keys t >= end; 2: [2B] ends then starts, also t < start; 3: a [B, T]
// raw mask; 4: a [B, S, T] raw mask; raw values 0 mask), and -inf where (CAUSAL) t is past the query's position
// (t > past + s). The padding bias is finite: a row it masks everywhere is the softmax of its biased scores, as
// on the CPU EP (measured: a row masked by both attends its causal keys). One invocation per element of bias
// [B, heads, S, T]. PAIRS: y holds (attention_bias, mask) pairs, [B, heads, S, T, 2], which attention.comp (MASK 2)
// adds one after the other as the CPU EP adds them: the score plus the bias, then the mask.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = 0;
layout(constant_id = 1) const uint CAUSAL = 0;
layout(constant_id = 2) const uint PAIRS = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t mask_index, attention_bias, y;
    uint n, heads, s, t, past;
    uint bias_sb, bias_sh;  // attention_bias's batch and head strides (0: broadcast)
    float filter_value;
    GROUP_BASE;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };

void main() {
    uint i = FLAT_ID(256);
    if (i >= pc.n) return;
    uint t = i % pc.t, r = i / pc.t;
    uint s = r % pc.s, bh = r / pc.s;
    uint h = bh % pc.heads, b = bh / pc.heads;
    bool masked = false;
    if (KIND == 1 || KIND == 2) {
        masked = int(t) >= Ints(pc.mask_index).v[b];
        if (KIND == 2) masked = masked || int(t) < Ints(pc.mask_index).v[b + pc.n / (pc.heads * pc.s * pc.t)];
    } else if (KIND == 3) {
        masked = Ints(pc.mask_index).v[b * pc.t + t] == 0;
    } else if (KIND == 4) {
        masked = Ints(pc.mask_index).v[(b * pc.s + s) * pc.t + t] == 0;
    }
    float bias = Floats(PRESENT_OR(pc.attention_bias, pc.y)).v[PRESENT_AT(pc.attention_bias,
                                                                          b * pc.bias_sb + h * pc.bias_sh + s * pc.t + t)];
    float v = pc.attention_bias != 0 ? bias : 0.0;
    float masking = masked ? pc.filter_value : 0.0;
    bool future = CAUSAL != 0 && t > pc.past + s;
    if (PAIRS != 0) {
        Floats(pc.y).v[2u * i] = v;
        Floats(pc.y).v[2u * i + 1u] = future ? uintBitsToFloat(0xff800000u) : masking;
        return;
    }
    precise float sum = v + masking;
    Floats(pc.y).v[i] = future ? uintBitsToFloat(0xff800000u) : sum;
}
