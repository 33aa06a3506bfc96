#version 450
// A chain of elementwise nodes fused into one dispatch (ORT's Compile; vkep/kernels/fused.py builds the
// program): every element of the chain's output shape loads the chain's inputs (numpy broadcasting by
// strides) into registers, runs the program's steps over registers, and stores its outputs. The steps are
// unary.comp's and binary.comp's own float formulas (unary_ops.glsl, binary_ops.glsl), so a fused chain
// computes what the unfused nodes compute; a float16 chain rounds every step's result to float16 as the
// nodes' outputs are.
//
// Program (uint words at `program`): rank, inputs, steps, outputs; shape[MAX_RANK]; per input: its mode
// (FULL: the output's shape, contiguous; SCALAR; STRIDED) then its element strides[MAX_RANK]; the register
// of each output [MAX_OUTPUTS]; then per step: kind << 16 | op code, registers (dst | a << 4 | b << 8 |
// c << 12, MIN_FROM_B: alpha from register b, MAX_FROM_C: beta from register c), alpha, beta (float bits).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activation.glsl"
#include "unary_ops.glsl"
#include "binary_ops.glsl"

layout(local_size_x = 64) in;

#define MAX_INPUTS 8
#define MAX_OUTPUTS 4
#define MAX_RANK 6
#define REGISTERS 16
#define MODE_FULL 0u
#define MODE_SCALAR 1u
#define HEADER 4
#define INPUTS_AT (HEADER + MAX_RANK)
#define OUTPUTS_AT (INPUTS_AT + MAX_INPUTS * (1 + MAX_RANK))
#define STEPS_AT (OUTPUTS_AT + MAX_OUTPUTS)
#define KIND_BINARY 1u
#define MIN_FROM_B 0x10000u
#define MAX_FROM_C 0x20000u

layout(buffer_reference, scalar, buffer_reference_align = 4) readonly buffer Program { uint w[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t y[MAX_OUTPUTS];
    uint64_t x[MAX_INPUTS];
    uint64_t program;
    uint n;
    GROUP_BASE;
} pc;

// the unary ops a chain may hold (vkep/kernels/fused.py UNARY): each case is unary.comp's formula, folded
float unary_step(uint op, float v, float a, float b) {
    switch (op) {
    case OP_RELU: return unary_float(OP_RELU, v, a, b);
    case OP_SIGMOID: return unary_float(OP_SIGMOID, v, a, b);
    case OP_TANH: return unary_float(OP_TANH, v, a, b);
    case OP_ABS: return unary_float(OP_ABS, v, a, b);
    case OP_NEG: return unary_float(OP_NEG, v, a, b);
    case OP_EXP: return unary_float(OP_EXP, v, a, b);
    case OP_LOG: return unary_float(OP_LOG, v, a, b);
    case OP_SQRT: return unary_float(OP_SQRT, v, a, b);
    case OP_RECIPROCAL: return unary_float(OP_RECIPROCAL, v, a, b);
    case OP_FLOOR: return unary_float(OP_FLOOR, v, a, b);
    case OP_CEIL: return unary_float(OP_CEIL, v, a, b);
    case OP_ERF: return unary_float(OP_ERF, v, a, b);
    case OP_LEAKY_RELU: return unary_float(OP_LEAKY_RELU, v, a, b);
    case OP_ELU: return unary_float(OP_ELU, v, a, b);
    case OP_HARD_SIGMOID: return unary_float(OP_HARD_SIGMOID, v, a, b);
    case OP_HARD_SWISH: return unary_float(OP_HARD_SWISH, v, a, b);
    case OP_SOFTPLUS: return unary_float(OP_SOFTPLUS, v, a, b);
    case OP_GELU: return unary_float(OP_GELU, v, a, b);
    case OP_CLIP: return unary_float(OP_CLIP, v, a, b);
    case OP_QUICK_GELU: return unary_float(OP_QUICK_GELU, v, a, b);
    default: return F_NAN;  // (fused.py takes no other op)
    }
}

// the binary ops a chain may hold (fused.py BINARY)
float binary_step(uint op, float x, float z) {
    switch (op) {
    case OP_ADD: return binary_float(OP_ADD, x, z, 1.0);
    case OP_SUB: return binary_float(OP_SUB, x, z, 1.0);
    case OP_MUL: return binary_float(OP_MUL, x, z, 1.0);
    case OP_DIV: return binary_float(OP_DIV, x, z, 1.0);
    case OP_POW: return binary_float(OP_POW, x, z, 1.0);
    case OP_MIN: return binary_float(OP_MIN, x, z, 1.0);
    case OP_MAX: return binary_float(OP_MAX, x, z, 1.0);
    case OP_PRELU: return binary_float(OP_PRELU, x, z, 1.0);
    default: return F_NAN;  // (fused.py takes no other op)
    }
}

float load_input(Program p, uint k, uint i, uint rank) {
    uint mode = p.w[INPUTS_AT + k * (1 + MAX_RANK)];
    uint at = i;
    if (mode == MODE_SCALAR) {
        at = 0;
    } else if (mode != MODE_FULL) {
        at = 0;
        uint rem = i;
        for (int d = int(rank) - 1; d >= 0; --d) {
            uint dim = p.w[HEADER + d];
            at += (rem % dim) * p.w[INPUTS_AT + k * (1 + MAX_RANK) + 1 + d];
            rem /= dim;
        }
    }
    return LOAD(Tensor(pc.x[k]), at);
}

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    Program p = Program(pc.program);
    uint rank = p.w[0], inputs = p.w[1], steps = p.w[2], outputs = p.w[3];
    float r[REGISTERS];
    for (uint k = 0; k < inputs; ++k) r[k] = load_input(p, k, i, rank);
    for (uint s = 0; s < steps; ++s) {
        uint at = STEPS_AT + 4 * s;
        uint code = p.w[at], regs = p.w[at + 1];
        float a = (regs & MIN_FROM_B) != 0 ? r[(regs >> 8) & 15u] : uintBitsToFloat(p.w[at + 2]);
        float b = (regs & MAX_FROM_C) != 0 ? r[(regs >> 12) & 15u] : uintBitsToFloat(p.w[at + 3]);
        float u = r[(regs >> 4) & 15u];
        float v = (code >> 16) == KIND_BINARY ? binary_step(code & 0xffffu, u, r[(regs >> 8) & 15u])
                                               : unary_step(code & 0xffffu, u, a, b);
#if DTYPE == 1
        v = float(float16_t(v));  // the node's float16 output
#endif
        r[regs & 15u] = v;
    }
    for (uint k = 0; k < outputs; ++k) STORE(Tensor(pc.y[k]), i, r[p.w[OUTPUTS_AT + k]]);
}
