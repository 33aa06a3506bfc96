#version 450
// y = a OP b with full ONNX (numpy) broadcasting: strides of a broadcast dimension are 0. OP codes are
// listed in vkep/kernels/elementwise.py (BINARY_OPS).
// Variants: a, b and y of type DTYPE; comparisons and logic write bool (DTYPE_Y = bool); Pow reads its
// base and writes y as DTYPE_Y and its exponent as DTYPE (the two may differ).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;

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

#define MAX_RANK 6
layout(push_constant, scalar) uniform Push {
    uint64_t a, b, y;
    uint n, rank;
    uint shape[MAX_RANK];
    uint stride_a[MAX_RANK];
    uint stride_b[MAX_RANK];
    float scale;
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

// C's powf for the cases GLSL's pow() leaves undefined (x < 0, x == 0); integer exponents by squaring
float pow_float(float x, float e) {
    if (e == 0.0 || x == 1.0) return 1.0;  // even for a NaN exponent or base
    if (floor(e) == e && abs(e) <= 64.0) {
        float r = 1.0, p = x;
        for (uint k = uint(abs(e)); k != 0; k >>= 1) {
            if ((k & 1) != 0) r *= p;
            p *= p;
        }
        return e < 0.0 ? 1.0 / r : r;
    }
    if (x < 0.0) {
        if (floor(e) != e) return uintBitsToFloat(0x7fc00000u);  // NaN
        float r = pow(-x, e);
        return mod(e, 2.0) == 1.0 ? -r : r;
    }
    if (x == 0.0) return e > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);  // 0^negative = inf
    return pow(x, e);
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
// C's fmod: the sign of the dividend (also for a zero result); x mod ±inf = x
float fmod_c(float x, float z) {
    if (isinf(z) && !isinf(x)) return x;
    float r = x - z * trunc(x / z);
    return r == 0.0 ? x * 0.0 : r;
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

void main() {
    uint i = flat_index(256);
    if (i >= pc.n) return;
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
