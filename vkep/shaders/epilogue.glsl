// A fused epilogue: elementwise steps applied by a producer (conv.comp, matmul.comp, winograd.comp) to the values
// it writes, in its EPILOGUE variant (vkep/kernels/epilogue.py; ORT's Compile gives the group, vkep/ort/fusion.py).
// The steps are fused.comp's (unary_ops.glsl and binary_ops.glsl: the formulas of the nodes' own shaders), held in
// specialization constants from id 64 on, which no producer uses. Registers: 0 the producer's value as stored (a
// float16 output rounded), 1 the operand (a tensor at `epilogue_operand`, the push block's first member: FULL, the
// output's shape; ROW, one value per output channel or row; COLUMN, one per column; SCALAR), 2 and 3 two constants
// (float bits), then the steps' results.
//
// The producer keeps each value it would store in `epi_values` (STORE_OR_KEEP, with constant indices: its
// accumulators stay in registers), then one loop (epilogue_block) runs the steps over them and stores them: the
// driver inlines every formula at every call before the constants fold them away, and a producer's stores are
// unrolled (256 of them in conv.comp's MODE 3), so the steps are expanded once per shader, not once per value.
//
// Needs common.glsl. The base variant (no EPILOGUE) gets an empty push member and nothing else.
#ifdef EPILOGUE
#extension GL_EXT_control_flow_attributes : require
#include "activation.glsl"
#include "unary_ops.glsl"
#include "binary_ops.glsl"

#define EPILOGUE_OPERAND uint64_t epilogue_operand;
#define EPI_REGISTERS 16
#define EPI_FULL 1u
#define EPI_ROW 2u
#define EPI_COLUMN 3u
#define EPI_SCALAR 4u
#define EPI_KIND_BINARY 1u
#define EPI_MIN_FROM_B 0x10000u
#define EPI_MAX_FROM_C 0x20000u

layout(constant_id = 64) const uint EPI_STEPS = 0;
layout(constant_id = 65) const uint EPI_MODE = 0;
layout(constant_id = 66) const uint EPI_OUT = 0;
layout(constant_id = 67) const uint EPI_K0 = 0;
layout(constant_id = 68) const uint EPI_K1 = 0;
#define EPI_STEP_CONSTANTS(k, a, b, c, d) \
    layout(constant_id = a) const uint EPI_CODE_##k = 0; layout(constant_id = b) const uint EPI_REGS_##k = 0; \
    layout(constant_id = c) const uint EPI_ALPHA_##k = 0; layout(constant_id = d) const uint EPI_BETA_##k = 0;
EPI_STEP_CONSTANTS(0, 72, 73, 74, 75)
EPI_STEP_CONSTANTS(1, 76, 77, 78, 79)
EPI_STEP_CONSTANTS(2, 80, 81, 82, 83)
EPI_STEP_CONSTANTS(3, 84, 85, 86, 87)
EPI_STEP_CONSTANTS(4, 88, 89, 90, 91)
EPI_STEP_CONSTANTS(5, 92, 93, 94, 95)
EPI_STEP_CONSTANTS(6, 96, 97, 98, 99)
EPI_STEP_CONSTANTS(7, 100, 101, 102, 103)

float epi_rounded(float v, uint zero) {
#if DTYPE == 1
    // the node's float16 output; times a 1 the compiler cannot know (`zero` is 0), or Mesa 26's lavapipe dropped the
    // rounding (float(float16_t(v)) folded to v: float16 epilogues an ulp from their nodes; fused.comp's too)
    return float(float16_t(v) * float16_t(1.0 + float(zero)));
#else
    return v;
#endif
}

// NaN, infinities and signed zeros: fused.comp declares SignedZeroInfNanPreserve, without which a compiler that
// sees one step's result go into the next may fold it as if no value were NaN or infinite (a - a gave 0 for an
// infinite a here too). A producer cannot declare it: those float controls also change how its own sums compile
// (lavapipe then contracts no a * b + c into an fma, and its values differ from the node's in the last bits).
// Instead every value a step reads is "laundered": its bits XORed with a zero the compiler cannot know (y is a
// device address, never 1 to 4), so each step meets its operands as unary.comp and binary.comp meet theirs, as
// values about which nothing is known, and compiles to what those shaders compute.
float epi_launder(float v, uint zero) { return uintBitsToFloat(floatBitsToUint(v) ^ zero); }

#define EPI_STEP(k) \
    if (k < EPI_STEPS) { \
        float u = epi_launder(r[(EPI_REGS_##k >> 4) & 15u], zero_u); \
        float z = epi_launder(r[(EPI_REGS_##k >> 8) & 15u], zero_z); \
        float a = epi_launder((EPI_REGS_##k & EPI_MIN_FROM_B) != 0u ? r[(EPI_REGS_##k >> 8) & 15u] \
                                                                  : uintBitsToFloat(EPI_ALPHA_##k), zero_a); \
        float b = epi_launder((EPI_REGS_##k & EPI_MAX_FROM_C) != 0u ? r[(EPI_REGS_##k >> 12) & 15u] \
                                                                  : uintBitsToFloat(EPI_BETA_##k), zero_b); \
        r[EPI_REGS_##k & 15u] = epi_rounded((EPI_CODE_##k >> 16) == EPI_KIND_BINARY \
            ? binary_float(EPI_CODE_##k & 0xffffu, u, z, 1.0) : unary_float(EPI_CODE_##k & 0xffffu, u, a, b), zero_u); \
    }

// The producer's values, kept where it would have stored them (STORE_OR_KEEP: k numbers them as epilogue_block
// walks them), with constant indices, so its accumulators stay in registers
// A shader that defines EPILOGUE_REREAD stores its values as usual and the loop reads them back (the invocation's
// own stores, in its cache): conv.comp, where the private array cost lavapipe ~4 s more to compile per pipeline
// (MODE 3: 5.8 s against 1.5 s; matmul.comp's broadcast mode 2.4 against 1.7 s), for ~10-20% of a fused conv's
// time
#ifdef EPILOGUE_REREAD
#define STORE_OR_KEEP(k, t, i, v) STORE(t, i, v)
#define EPI_VALUE(k, y, index) LOAD(Tensor(y), index)
#else
#define EPI_VALUES 256
float epi_values[EPI_VALUES];
#define STORE_OR_KEEP(k, t, i, v) epi_values[k] = (v)
#define EPI_VALUE(k, y, index) epi_values[k]
#endif

// y[index] := the steps over the producer's value v; `row` and `column` index a ROW or COLUMN operand
void epilogue_at(uint64_t y, uint64_t operand, uint index, uint row, uint column, float v) {
    Tensor Y = Tensor(y);
    uint zero_u = uint(y == 1ul), zero_z = uint(y == 2ul), zero_a = uint(y == 3ul), zero_b = uint(y == 4ul);
    float r[EPI_REGISTERS];
    r[0] = epi_rounded(v, zero_u);  // (a float16 output: as stored)
    uint at = EPI_MODE == EPI_FULL ? index : EPI_MODE == EPI_ROW ? row : EPI_MODE == EPI_COLUMN ? column : 0u;
    r[1] = EPI_MODE != 0u ? LOAD(Tensor(operand), at) : 0.0;
    r[2] = uintBitsToFloat(EPI_K0);
    r[3] = uintBitsToFloat(EPI_K1);
    EPI_STEP(0) EPI_STEP(1) EPI_STEP(2) EPI_STEP(3) EPI_STEP(4) EPI_STEP(5) EPI_STEP(6) EPI_STEP(7)
    STORE(Y, index, r[EPI_OUT]);
}

// The values an invocation stored: rows row0 + i * row_step (i < rows, below row_end), columns
// col0 + (j / pair) * col_step + j % pair (j < cols, below col_end), at base + row * row_stride + column; its
// ROW operand index is channel0 + row * channel_step (0: winograd.comp, whose rows are pixels of one channel).
// (pair 2: matmul.comp's column pairs.)
struct EpilogueBlock {
    uint base, row_stride, channel0, channel_step;
    uint row0, row_step, rows, row_end;
    uint col0, col_step, cols, col_end, pair;
};

void epilogue_block(uint64_t y, uint64_t operand, EpilogueBlock b, uint first) {
    // (loops, not unrolled: one expansion of the steps; at most 256 + 32 iterations against lavapipe's loop
    // budget, within the margin vkep.kernels.base.LOOP_BUDGET leaves)
    [[dont_unroll]] for (uint i = 0; i < b.rows; ++i) {
        uint row = b.row0 + i * b.row_step;
        if (row >= b.row_end) break;
        [[dont_unroll]] for (uint j = 0; j < b.cols; ++j) {
            uint col = b.col0 + (j / b.pair) * b.col_step + j % b.pair;
            uint index = b.base + row * b.row_stride + col;
            if (col < b.col_end)
                epilogue_at(y, operand, index, b.channel0 + row * b.channel_step, col,
                            EPI_VALUE(first + i * b.cols + j, y, index));
        }
    }
}
#else
#define EPILOGUE_OPERAND
#define STORE_OR_KEEP(k, t, i, v) STORE(t, i, v)
#endif
