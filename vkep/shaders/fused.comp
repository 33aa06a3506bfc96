#version 450
// A group of elementwise nodes fused into one dispatch (ORT's Compile; vkep/kernels/fused.py builds the
// program): every element of the group's output shape loads the group's inputs (numpy broadcasting) into
// registers, runs the steps, and stores the outputs. The program is specialization constants, so the driver
// compiles each group to straight-line code (a program read at run time costs lavapipe ~10x on large
// tensors: a load per word per element). The steps are unary.comp's and binary.comp's own float formulas
// (unary_ops.glsl, binary_ops.glsl): a fused group computes what its nodes compute, and a float16 group
// rounds every step's result to float16 as the nodes' outputs are.
//
// Constants: WIDE (as unary.comp's), INPUTS, STEPS, OUTPUTS, MODES (2 bits an input: FULL, the output's
// shape, contiguous; SCALAR; STRIDED, broadcast by the strides at `layout`), OUT_REGS (4 bits an output);
// then per step k (ids 8 + 4k ..): kind << 16 | op code, registers (dst | a << 4 | b << 8 | c << 12,
// MIN_FROM_B: alpha from register b, MAX_FROM_C: beta from register c), alpha and beta (float bits).
// `layout` (uint words, read only by STRIDED inputs): rank, shape[MAX_RANK], strides[MAX_RANK] per input.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require
#include "common.glsl"
#include "activation.glsl"
#include "unary_ops.glsl"
#include "binary_ops.glsl"

layout(local_size_x = 64) in;
// NaN, infinities and signed zeros kept through every step (SPIR-V SignedZeroInfNanPreserve for 32-bit floats,
// in which every variant computes): without it a driver may assume no float is NaN, and once a group's steps are
// one piece of code it folds the formulas' NaN tests away (lavapipe: HardSwish of a Log's NaN gave 0, a - a gave
// 0 for an infinite a). unary.comp and binary.comp meet each value as a load, which no compiler can assume about.
// fusion.py fuses only on devices that support it. (One declaration: glslang keeps one per execution mode, so a
// second one for 16-bit floats replaced this one, and the float16 variant lost it.)
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);

#define MAX_INPUTS 8
#define MAX_OUTPUTS 4
#define MAX_RANK 6
#define REGISTERS 16
#define MODE_SCALAR 1u
#define MODE_STRIDED 2u
#define KIND_BINARY 1u
#define MIN_FROM_B 0x10000u
#define MAX_FROM_C 0x20000u

layout(constant_id = 0) const uint WIDE = 0;
layout(constant_id = 1) const uint INPUTS = 1;
layout(constant_id = 2) const uint STEPS = 0;
layout(constant_id = 3) const uint OUTPUTS = 1;
layout(constant_id = 4) const uint MODES = 0;
layout(constant_id = 5) const uint OUT_REGS = 0;
#define STEP_CONSTANTS(k, a, b, c, d) \
    layout(constant_id = a) const uint CODE_##k = 0; layout(constant_id = b) const uint REGS_##k = 0; \
    layout(constant_id = c) const uint ALPHA_##k = 0; layout(constant_id = d) const uint BETA_##k = 0;
STEP_CONSTANTS(0, 8, 9, 10, 11)
STEP_CONSTANTS(1, 12, 13, 14, 15)
STEP_CONSTANTS(2, 16, 17, 18, 19)
STEP_CONSTANTS(3, 20, 21, 22, 23)
STEP_CONSTANTS(4, 24, 25, 26, 27)
STEP_CONSTANTS(5, 28, 29, 30, 31)
STEP_CONSTANTS(6, 32, 33, 34, 35)
STEP_CONSTANTS(7, 36, 37, 38, 39)
STEP_CONSTANTS(8, 40, 41, 42, 43)
STEP_CONSTANTS(9, 44, 45, 46, 47)
STEP_CONSTANTS(10, 48, 49, 50, 51)
STEP_CONSTANTS(11, 52, 53, 54, 55)
STEP_CONSTANTS(12, 56, 57, 58, 59)
STEP_CONSTANTS(13, 60, 61, 62, 63)
STEP_CONSTANTS(14, 64, 65, 66, 67)
STEP_CONSTANTS(15, 68, 69, 70, 71)

layout(buffer_reference, scalar, buffer_reference_align = 4) readonly buffer Layout { uint w[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t y[MAX_OUTPUTS];
    uint64_t x[MAX_INPUTS];
    uint64_t layout_words;
    uint n;
    GROUP_BASE;
} pc;

float load_input(uint k, uint i) {
    uint mode = (MODES >> (2 * k)) & 3u;
    if (mode == MODE_SCALAR) return LOAD(Tensor(pc.x[k]), 0);
    if (mode != MODE_STRIDED) return LOAD(Tensor(pc.x[k]), i);
    Layout l = Layout(pc.layout_words);
    uint rank = l.w[0], at = 0, rem = i;
    for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = l.w[1 + d];
        at += (rem % dim) * l.w[1 + MAX_RANK * (1 + k) + d];
        rem /= dim;
    }
    return LOAD(Tensor(pc.x[k]), at);
}

// Each step meets its operands as its node's shader meets them, as values about which the compiler knows nothing
// (loads and push constants there): their bits XORed with zeros it cannot know (pc.n, an element count, is never
// 0xfffffff0 to 0xfffffff3), a different one per operand, so that a - a over one register is not a - a to it.
// The float controls alone (SignedZeroInfNanPreserve, above) did not keep Mesa 26's lavapipe (LLVM 19) from folding
// such a step to 0 for an infinite a, nor from moving a float16 group an ulp from its nodes in 17 of 300 elements
// (test_random_elementwise_graphs_fuse_to_what_their_nodes_compute and test_float16_rounds_every_step_as_the_nodes_do,
// run on that driver).
uvec4 opaque_zero;
float launder(float v, uint zero) { return uintBitsToFloat(floatBitsToUint(v) ^ zero); }

float rounded(float v) {
#if DTYPE == 1
    // the node's float16 output; times a 1 the compiler cannot know, or Mesa 26's lavapipe dropped the rounding
    // (float(float16_t(v)) folded to v: groups an ulp from their nodes)
    return float(float16_t(v) * float16_t(1.0 + float(opaque_zero.x)));
#else
    return v;
#endif
}


// step k over the registers `r` (every index and op a constant once specialized: straight-line code)
#define RUN_STEP(k, r) \
    if (k < STEPS) { \
        float u = launder(r[(REGS_##k >> 4) & 15u], opaque_zero.x), z = launder(r[(REGS_##k >> 8) & 15u], opaque_zero.y); \
        float a = launder((REGS_##k & MIN_FROM_B) != 0u ? r[(REGS_##k >> 8) & 15u] : uintBitsToFloat(ALPHA_##k), \
                          opaque_zero.z); \
        float b = launder((REGS_##k & MAX_FROM_C) != 0u ? r[(REGS_##k >> 12) & 15u] : uintBitsToFloat(BETA_##k), \
                          opaque_zero.w); \
        r[REGS_##k & 15u] = rounded((CODE_##k >> 16) == KIND_BINARY \
            ? binary_float(CODE_##k & 0xffffu, u, z, 1.0) : unary_float(CODE_##k & 0xffffu, u, a, b)); \
    }
#define RUN_STEPS(r) \
    RUN_STEP(0, r) RUN_STEP(1, r) RUN_STEP(2, r) RUN_STEP(3, r) RUN_STEP(4, r) RUN_STEP(5, r) RUN_STEP(6, r) \
    RUN_STEP(7, r) RUN_STEP(8, r) RUN_STEP(9, r) RUN_STEP(10, r) RUN_STEP(11, r) RUN_STEP(12, r) \
    RUN_STEP(13, r) RUN_STEP(14, r) RUN_STEP(15, r)

#if DTYPE == 0
// float32 with no STRIDED input: elements i and i + 1 (i even) with one 64-bit load a contiguous input and one
// store an output (a load is a loop over the SIMD lanes on lavapipe, whatever its width), as unary.comp's
bool pairs_fit() {
    uint64_t bits = 0;
    for (uint k = 0; k < INPUTS; ++k) bits |= ((MODES >> (2 * k)) & 3u) == 0u ? pc.x[k] : 0;
    for (uint k = 0; k < OUTPUTS; ++k) bits |= pc.y[k];
    return (MODES & 0xaaaau) == 0u && (bits & 7) == 0 && (pc.n & 1u) == 0u;
}
#else
bool pairs_fit() { return false; }
#endif

// One expansion of the steps in the whole shader (a loop over one element or a pair): the driver inlines every
// formula at every expansion before the constants fold them away, so each copy costs it compile time (three
// copies took lavapipe ~3 s cold for an Add+Relu group)
void main() {
    opaque_zero = uvec4(equal(uvec4(pc.n), uvec4(0xfffffff0u, 0xfffffff1u, 0xfffffff2u, 0xfffffff3u)));
    bool pairs = WIDE != 0 && pairs_fit();
    uint width = pairs ? 2u : 1u, lane = gl_LocalInvocationID.x;
    uint iterations = WIDE == 0 ? 1u : WIDE / (64u * width);
    uint first = WIDE == 0 ? FLAT_ID(64) : FLAT_GROUP * WIDE;
    for (uint k = 0; k < iterations; ++k) {
        uint i = WIDE == 0 ? first : first + width * (k * 64u + lane);
        if (i >= pc.n) break;
        float r[2][REGISTERS];
        for (uint q = 0; q < INPUTS; ++q) {
            if (pairs && ((MODES >> (2 * q)) & 3u) != MODE_SCALAR) {
                vec2 v = load_pair(pc.x[q], i);
                r[0][q] = v.x;
                r[1][q] = v.y;
            } else {
                r[0][q] = r[1][q] = load_input(q, i);
            }
        }
        for (uint h = 0; h < width; ++h) {
            RUN_STEPS(r[h])
        }
        for (uint q = 0; q < OUTPUTS; ++q) {
            uint reg = (OUT_REGS >> (4 * q)) & 15u;
            if (pairs) store_pair(pc.y[q], i, vec2(r[0][reg], r[1][reg]));
            else STORE(Tensor(pc.y[q]), i, r[0][reg]);
        }
    }
}
