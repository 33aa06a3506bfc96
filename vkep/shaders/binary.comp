#version 450
// y = a OP b with full ONNX (numpy) broadcasting: strides of a broadcast dimension are 0. OP codes are
// listed in vkep/kernels/elementwise.py (BINARY_OPS).
// Variants: a, b and y of type DTYPE; comparisons and logic write bool (DTYPE_Y = bool); Pow reads its
// base and writes y as DTYPE_Y and its exponent as DTYPE (the two may differ).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activation.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint WIDE = 0;  // 0: one element a lane; else the elements a workgroup covers (common.glsl)

#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3
#define OP_POW 4
#define OP_FMOD 5  // C fmod: the sign of the dividend
#define OP_MOD 6   // numpy's mod: the sign of the divisor
#define OP_PRELU 7
#define OP_MIN 8
#define OP_MAX 9
#define OP_EQUAL 10
#define OP_GREATER 11
#define OP_LESS 12
#define OP_GREATER_EQUAL 13
#define OP_LESS_EQUAL 14
#define OP_AND 15
#define OP_OR 16
#define OP_XOR 17
#define OP_BITWISE_AND 18
#define OP_BITWISE_OR 19
#define OP_BITWISE_XOR 20
#define OP_SHIFT_LEFT 21
#define OP_SHIFT_RIGHT 22
#define OP_FIRST 23  // y = a (a variadic op of one input)
#define OP_ADD_SCALE 24  // y = (a + b) * scale (the last step of Mean)
#define OP_ACCUMULATE 25 // y = (a + b) * scale with a of y's type: a float16 Sum's float32 accumulator
#define OP_MUL_GELU 26  // y = a * gelu(b), erf Gelu (com.microsoft BiasSplitGelu over the halves of a row)

#define MAX_RANK 6
layout(push_constant, scalar) uniform Push {
    uint64_t a, b, y;
    uint n, rank;
    uint shape[MAX_RANK];
    uint stride_a[MAX_RANK];
    uint stride_b[MAX_RANK];
    float scale;
    GROUP_BASE;
} pc;

#define IS_FLOAT_Y (DTYPE_Y <= 1)

// float → int as ORT's static_cast on x86: NaN and out of range give the type's minimum
#if DTYPE_Y == 3
int64_t float_to_y(float r) {
    return r >= -9223372036854775808.0 && r < 9223372036854775808.0 ? int64_t(r) : (-9223372036854775807L - 1L);
}
#else
int float_to_y(float r) { return r >= -2147483648.0 && r < 2147483648.0 ? int(r) : (-2147483647 - 1); }
#endif

// C's powf (C99 Annex F), which GLSL's pow() leaves undefined for x <= 0, infinities and NaN: the magnitude
// from |x| (integer exponents by squaring, pow_nonnegative for every other case, special values included),
// then the sign a negative base (-0 and -inf too) gives an odd exponent
float pow_float(float x, float e) {
    bool integral = floor(e) == e;  // (infinities count: they are even; NaN does not)
    if (x < 0.0 && !isinf(x) && !integral) return F_NAN;  // a negative finite base, a fractional exponent
    bool odd = integral && abs(e) < 16777216.0 && mod(e, 2.0) == 1.0;
    float m = abs(x), r;
    if (integral && abs(e) <= 64.0 && m != 0.0 && !isinf(m) && !isnan(m)) {
        r = 1.0;
        float p = m;
        for (uint k = uint(abs(e)); k != 0; k >>= 1) {
            if ((k & 1) != 0) r *= p;
            p *= p;
        }
        r = e < 0.0 ? 1.0 / r : r;
    } else {
        r = pow_nonnegative(m, e);
    }
    return odd && (floatBitsToUint(x) >> 31) != 0u ? -r : r;
}

COMP_TY pow_op(uint ia, uint ib) {
    COMP_TY x = COMP_TY(TensorY(pc.a).v[ia]);
    COMP_T e = LOAD(Tensor(pc.b), ib);
#if IS_FLOAT_Y
    return pow_float(x, float(e));
#elif IS_FLOAT
    return float_to_y(pow_float(float(x), e));  // integer base, float exponent: as C, through float
#else
    // both integers: as ORT, static_cast<T>(std::pow(x, e)); negative exponents truncate toward 0
    if (e < 0) {
        if (x == 1) return COMP_TY(1);
        if (x == -1) return (e & 1) != 0 ? COMP_TY(-1) : COMP_TY(1);
        if (x == 0) return float_to_y(uintBitsToFloat(0x7f800000u));
        return COMP_TY(0);
    }
    COMP_TY r = COMP_TY(1);
    for (COMP_T k = e; k != 0; k >>= 1) {
        if ((k & 1) != 0) r *= x;
        x *= x;
    }
    return r;
#endif
}

#if IS_FLOAT
// C's fmod, exact for all finite inputs (denormals included, which lavapipe flushes in arithmetic, and a
// quotient past 2^24, where x - z * trunc(x / z) loses everything): long division on the integer
// significands. The sign of the dividend, also for a zero result; x mod ±inf = x.
float fmod_c(float x, float z) {
    if (isnan(x) || isnan(z) || isinf(x) || z == 0.0) return F_NAN;
    if (isinf(z)) return x;
    uint bx = floatBitsToUint(x), bz = floatBitsToUint(z), sign = bx & 0x80000000u;
    int ex = int((bx >> 23) & 0xffu), ez = int((bz >> 23) & 0xffu);
    uint mx = bx & 0x7fffffu, mz = bz & 0x7fffffu;
    // significands as integers (the hidden bit set for normal numbers); a denormal's exponent is 1
    if (ex != 0) mx |= 0x800000u; else ex = 1;
    if (ez != 0) mz |= 0x800000u; else ez = 1;
    if (ex < ez || (ex == ez && mx < mz)) return x;  // |x| < |z|
    // |x| mod |z| = ((mx * 2^(ex - ez)) mod mz) * 2^ez: one doubling per step of exponent difference
    uint r = mx % mz;
    for (int k = ex - ez; k > 0; --k) r = (r << 1) % mz;
    if (r == 0u) return uintBitsToFloat(sign);  // ±0
    // back to a float: normalise the significand down to exponent 1 (a denormal result stays so)
    int e = ez;
    while (r < 0x800000u && e > 1) { r <<= 1; --e; }
    uint bits = r < 0x800000u ? r : ((uint(e) << 23) | (r & 0x7fffffu));
    return uintBitsToFloat(bits | sign);
}

// numpy's mod (ONNX Mod fmod=0): the sign of the divisor
float mod_floor(float x, float z) {
    float r = fmod_c(x, z);
    if (r == 0.0) return z < 0.0 ? uintBitsToFloat(0x80000000u) : 0.0;
    return (r < 0.0) != (z < 0.0) ? r + z : r;
}
#endif

// the ops whose result has the inputs' type
COMP_T arith(COMP_T x, COMP_T z) {
    switch (OP) {
    case OP_ADD: return x + z;
    case OP_SUB: return x - z;
    case OP_MUL: return x * z;
    case OP_DIV: return x / z;
    case OP_PRELU: return x < COMP_T(0) ? x * z : x;
    // NaN propagates (as ORT)
    case OP_MIN: return x != x ? x : (z != z || z < x ? z : x);
    case OP_MAX: return x != x ? x : (z != z || z > x ? z : x);
    case OP_FIRST: return x;
#if IS_FLOAT
    case OP_ADD_SCALE: return (x + z) * pc.scale;
    case OP_MUL_GELU: return x * gelu_erf(z);
    case OP_FMOD: return fmod_c(x, z);
    case OP_MOD: return mod_floor(x, z);
#else
    case OP_FMOD: return x - z * (x / z);  // integer division truncates toward 0
    case OP_MOD: {
        COMP_T r = x - z * (x / z);
        return r != 0 && ((r < 0) != (z < 0)) ? r + z : r;
    }
    case OP_BITWISE_AND: return x & z;
    case OP_BITWISE_OR: return x | z;
    case OP_BITWISE_XOR: return x ^ z;
    // uint8 only (ONNX's BitShift types); counts past the width shift everything out
    case OP_SHIFT_LEFT: return z < 32 ? x << z : COMP_T(0);
    case OP_SHIFT_RIGHT: return z < 32 ? x >> z : COMP_T(0);
#endif
    default: return x;
    }
}

bool compare(COMP_T x, COMP_T z) {
    switch (OP) {
    case OP_EQUAL: return x == z;
    case OP_GREATER: return x > z;
    case OP_LESS: return x < z;
    case OP_GREATER_EQUAL: return x >= z;
    case OP_LESS_EQUAL: return x <= z;
    case OP_AND: return x != 0 && z != 0;
    case OP_OR: return x != 0 || z != 0;
    default: return (x != 0) != (z != 0);  // OP_XOR
    }
}

void one(uint i) {
    uint ia = 0, ib = 0, rem = i;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint c = rem % pc.shape[d];
        rem /= pc.shape[d];
        ia += c * pc.stride_a[d];
        ib += c * pc.stride_b[d];
    }
    TensorY y = TensorY(pc.y);
    if (OP == OP_POW) {
        STORE_Y(y, i, pow_op(ia, ib));
        return;
    }
#if IS_FLOAT_Y
    if (OP == OP_ACCUMULATE) {
        STORE_Y(y, i, (COMP_TY(TensorY(pc.a).v[ia]) + COMP_TY(LOAD(Tensor(pc.b), ib))) * pc.scale);
        return;
    }
#endif
    COMP_T x = LOAD(Tensor(pc.a), ia);
    COMP_T z = LOAD(Tensor(pc.b), ib);
    if (OP >= OP_EQUAL && OP <= OP_XOR) {
        STORE_Y(y, i, compare(x, z) ? 1 : 0);
        return;
    }
    COMP_T r;
    r = arith(x, z);
    STORE_Y(y, i, r);
}

void main() {
    if (WIDE == 0) {
        uint i = FLAT_ID(64);
        if (i < pc.n) one(i);
        return;
    }
    uint first = FLAT_GROUP * WIDE, lane = gl_LocalInvocationID.x;
#if DTYPE == 0 && DTYPE_Y == 0
    // float32 arithmetic over two contiguous operands of y's shape, 8-byte aligned: two elements a load
    if (OP != OP_POW && OP != OP_ACCUMULATE && pc.rank == 1 && pc.stride_a[0] == 1 && pc.stride_b[0] == 1
            && ((pc.a | pc.b | pc.y) & 7) == 0 && (pc.n & 1) == 0) {
        for (uint k = 0; k < WIDE / (2 * 64); ++k) {
            uint i = first + 2 * (k * 64 + lane);
            if (i >= pc.n) break;
            vec2 x = load_pair(pc.a, i), z = load_pair(pc.b, i);
            store_pair(pc.y, i, vec2(arith(x.x, z.x), arith(x.y, z.y)));
        }
        return;
    }
#endif
    for (uint k = 0; k < WIDE / 64; ++k) {
        uint i = first + k * 64 + lane;
        if (i >= pc.n) break;
        one(i);
    }
}
