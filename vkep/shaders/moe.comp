#version 450
// com.microsoft MoE and QMoE (vkep/kernels/moe.py) as ORT's CPU EP computes them, in three passes (MODE):
//  0 routing, one invocation a token: the softmax of its router logits (max, exp(l - max), a sequential sum, each
//    divided by it), its k largest probabilities, largest first, an equal probability taken at the higher expert
//    index first (std::partial_sort with std::greater on (probability, index)), divided by their sum where
//    NORMALIZE; `out` gets the k expert indices then the k weights of every token (uint words).
//  1 FC1 and the activation, one invocation an (token, choice, inter unit): the dot of the token's row of `a` (the
//    input) with the expert's FC1 row (rows 2u and 2u + 1, gate and linear, for SwiGLU's interleaved layout), plus
//    its bias, activated; `out` [tokens, k, inter] float32.
//  2 FC2 and the sum, one invocation an (token, hidden unit): the weighted sum over the token's choices of the dot
//    of its activation row (`a`, pass 1's) with the expert's FC2 row, plus its bias; a choice of weight not > 0
//    counts nothing (the CPU EP skips it).
// Expert weights [experts, rows, cols] are DTYPE (BITS 0), or uint8 holding 8-bit or two 4-bit values (element 2c
// in the low nibble of byte c), dequantized as read: scale * (q - zero point), a scale per row (block 0) or per
// block of `block` columns, the zero points uint8 (4-bit: two a byte, along the rows for per-row scales, along a
// row's blocks otherwise) or, absent, 2^(BITS - 1). float16 (DTYPE 1): computed in float, rounded once at the
// output (what ORT 1.32's CPU EP gives: intermediates rounded to float16 moved 60% of its outputs by an ulp).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activation.glsl"
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint ACT = 0;  // relu, gelu, silu, identity, swiglu
layout(constant_id = 2) const uint BITS = 0;
layout(constant_id = 3) const uint NORMALIZE = 0;

layout(buffer_reference, scalar, buffer_reference_align = 1) buffer Bytes { uint8_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Words { uint v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t a, w, scale, zp, bias, route, out_;
    uint n, tokens, experts, k, rows, cols, block;
    float alpha, beta, limit;
    GROUP_BASE;
} pc;

// the scale and zero point of block b of a row (rows of pc.cols elements; pc.block 0: one block a row). Zero points:
// a byte a row or block (8-bit); 4-bit, two rows a byte within an expert (per row) or two blocks a byte, a row's
// bytes padded (per block); absent, 2^(BITS - 1)
void block_params(uint row, uint b, uint blocks, out float s, out float zp) {
    s = LOAD(Tensor(pc.scale), row * blocks + b);
    uint zp_index, shift = 0;
    if (BITS == 8) {
        zp_index = row * blocks + b;
    } else if (pc.block == 0) {
        uint e = row / pc.rows, r = row % pc.rows;
        zp_index = e * ((pc.rows + 1) / 2) + r / 2;
        shift = 4 * (r & 1);
    } else {
        zp_index = row * ((blocks + 1) / 2) + b / 2;
        shift = 4 * (b & 1);
    }
    uint z = (uint(Bytes(PRESENT_OR(pc.zp, pc.w)).v[PRESENT_AT(pc.zp, zp_index)]) >> shift) & (BITS == 8 ? 255u : 15u);
    zp = pc.zp != 0 ? float(z) : float(1u << (BITS - 1));
}

// the dot of an expert weight row (DTYPE, or dequantized as read: scale * (q - zero point), as the CPU EP
// dequantizes) with pc.cols values X(c) read by the macro X_AT
#define ROW_DOT(name, X_AT) \
float name(uint row, uint x0) { \
    float acc = 0.0; \
    if (BITS == 0) { \
        for (uint c = 0; c < pc.cols; c++) acc += X_AT(x0 + c) * LOAD(Tensor(pc.w), row * pc.cols + c); \
        return acc; \
    } \
    uint blocks = pc.block == 0 ? 1 : pc.cols / pc.block, size = pc.block == 0 ? pc.cols : pc.block; \
    for (uint b = 0; b < blocks; b++) { \
        float s, zp; \
        block_params(row, b, blocks, s, zp); \
        uint c0 = b * size, base = row * pc.cols + c0; \
        if (BITS == 8) { \
            for (uint c = 0; c < size; c++) \
                acc += X_AT(x0 + c0 + c) * (s * (float(uint(Bytes(pc.w).v[base + c])) - zp)); \
        } else { \
            for (uint c = 0; c < size; c += 2) { \
                uint q = uint(Bytes(pc.w).v[(base + c) / 2]); \
                acc += X_AT(x0 + c0 + c) * (s * (float(q & 15u) - zp)); \
                acc += X_AT(x0 + c0 + c + 1) * (s * (float(q >> 4) - zp)); \
            } \
        } \
    } \
    return acc; \
}
#define INPUT_AT(i) LOAD(Tensor(pc.a), i)
#define HIDDEN_AT(i) Floats(pc.a).v[i]
ROW_DOT(dot_input, INPUT_AT)
ROW_DOT(dot_hidden, HIDDEN_AT)

float activate(float x) {
    if (ACT == 0) return max(0.0, x);
    if (ACT == 1) return 0.5 * x * (1.0 + tanh_safe(0.7978845608 * (x + 0.044715 * x * x * x)));
    if (ACT == 2) return x * (1.0 / (1.0 + exp(-x)));
    return x;
}

// the softmax probability of expert e of a token whose logits start at `base`
float probability(uint base, uint e, float top, float sum) {
    return exp(LOAD(Tensor(pc.a), base + e) - top) / sum;
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint route_weights = pc.tokens * pc.k;  // (the weights' words follow the indices')
    if (MODE == 0) {
        uint base = i * pc.experts;
        float top = LOAD(Tensor(pc.a), base);
        for (uint e = 1; e < pc.experts; e++) top = max(top, LOAD(Tensor(pc.a), base + e));
        float sum = 0.0;
        for (uint e = 0; e < pc.experts; e++) sum += exp(LOAD(Tensor(pc.a), base + e) - top);
        // the j-th pick: the largest (probability, index) below the previous pick's
        float last_p = 0.0, total = 0.0;
        uint last_e = 0;
        for (uint j = 0; j < pc.k; j++) {
            float best_p = 0.0;
            uint best_e = 0;
            bool found = false;
            for (uint e = 0; e < pc.experts; e++) {
                float p = probability(base, e, top, sum);
                bool below = j == 0 || p < last_p || (p == last_p && e < last_e);
                bool above = !found || p > best_p || (p == best_p && e > best_e);
                if (below && above) {
                    best_p = p;
                    best_e = e;
                    found = true;
                }
            }
            Words(pc.out_).v[i * pc.k + j] = best_e;
            Words(pc.out_).v[route_weights + i * pc.k + j] = floatBitsToUint(best_p);
            total += best_p;
            last_p = best_p;
            last_e = best_e;
        }
        if (NORMALIZE == 1) {
            for (uint j = 0; j < pc.k; j++) {
                uint at = route_weights + i * pc.k + j;
                Words(pc.out_).v[at] = floatBitsToUint(uintBitsToFloat(Words(pc.out_).v[at]) / total);
            }
        }
    } else if (MODE == 1) {
        uint inter = ACT == 4 ? pc.rows / 2 : pc.rows;
        uint u = i % inter, choice = i / inter;  // choice: token * k + j
        uint token = choice / pc.k;
        uint e = Words(pc.route).v[choice];
        float w = uintBitsToFloat(Words(pc.route).v[route_weights + choice]);
        float result = 0.0;
        if (w > 0.0) {
            uint x0 = token * pc.cols;
            uint row = e * pc.rows + (ACT == 4 ? 2 * u : u);
            float gate = dot_input(row, x0), linear = ACT == 4 ? dot_input(row + 1, x0) : 0.0;
            float b0 = LOAD(Tensor(PRESENT_OR(pc.bias, pc.a)), PRESENT_AT(pc.bias, row));
            float b1 = LOAD(Tensor(PRESENT_OR(pc.bias, pc.a)), PRESENT_AT(pc.bias, row + (ACT == 4 ? 1 : 0)));
            if (pc.bias != 0) {
                gate += b0;
                linear += b1;
            }
            if (ACT == 4) {
                gate = min(gate, pc.limit);
                linear = clamp(linear, -pc.limit, pc.limit);
                float sigmoid = 1.0 / (1.0 + exp(-(pc.alpha * gate)));
                result = gate * sigmoid * (linear + pc.beta);
            } else {
                result = activate(gate);
            }
        }
        Floats(pc.out_).v[i] = result;
    } else {
        uint hidden = pc.rows, inter = pc.cols;
        uint o = i % hidden, token = i / hidden;
        float sum = 0.0;
        for (uint j = 0; j < pc.k; j++) {
            uint choice = token * pc.k + j;
            uint e = Words(pc.route).v[choice];
            float w = uintBitsToFloat(Words(pc.route).v[route_weights + choice]);
            if (!(w > 0.0)) continue;
            uint row = e * hidden + o, h0 = choice * inter;
            float v = dot_hidden(row, h0);
            float b = LOAD(Tensor(PRESENT_OR(pc.bias, pc.route)), PRESENT_AT(pc.bias, row));
            if (pc.bias != 0) v += b;
            sum += w * v;
        }
        STORE(Tensor(pc.out_), i, sum);
    }
}
