#version 450
// y = a OP b with full ONNX (numpy) broadcasting: strides of a broadcast dimension are 0. OP codes are
// listed in vkep/kernels/elementwise.py (BINARY_OPS).
// Variants: a, b and y of type DTYPE; comparisons and logic write bool (DTYPE_Y = bool); Pow reads its
// base and writes y as DTYPE_Y and its exponent as DTYPE (the two may differ).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activation.glsl"
#include "binary_ops.glsl"
// FLOAT64: float64 a (and b, and y) in double: Add, Sub, Mul, Div, Min, Max, Mod; Pow (b float64, or int32/int64 as DTYPE);
// the comparisons (y bool: DTYPE bool). The manifest lists float64 for these alone
#ifdef FLOAT64
#include "float64.glsl"
#endif

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint WIDE = 0;  // 0: one element a lane; else the elements a workgroup covers (common.glsl)

#define MAX_RANK 6
layout(push_constant, scalar) uniform Push {
    uint64_t a, b, y;
    uint n, rank;
    uint shape[MAX_RANK];
    uint stride_a[MAX_RANK];
    uint stride_b[MAX_RANK];
    float scale;
    uint inner_divisor[2];  // the innermost dimension's (magic, shift) for fast_div (common.glsl)
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

COMP_TY pow_op(uint ia, uint ib) {
    COMP_TY x = COMP_TY(TensorY(pc.a).v[ia]);
    COMP_T e = LOAD(Tensor(pc.b), ib);
#if IS_FLOAT_Y
    return pow_float(x, float(e));
#elif IS_FLOAT
    return float_to_y(pow_float(float(x), e));  // integer base, float exponent: as C, through float
#else
    // both integers: as ORT, static_cast<T>(std::pow(x, e)); negative exponents truncate toward 0
#if DTYPE == 3
    if (e >= 9007199254740992l || e <= -9007199254740992l) e &= ~1l;  // (pow's double exponent: even past 2^53)
#endif
    if (e < 0) {
        if (x == 1) return COMP_TY(1);
        if (x == -1) return (e & 1) != 0 ? COMP_TY(-1) : COMP_TY(1);
        if (x == 0) return float_to_y(uintBitsToFloat(0x7f800000u));
        return COMP_TY(0);
    }
#if DTYPE_Y == 2
    // int32: the power is exact in pow's double where it fits int32; past it the conversion back gives INT_MIN
    // (x86-64's value for an out-of-range double), not the wrapped product
    int64_t r = 1l, b = int64_t(x);
    for (COMP_T k = e; k != 0; k >>= 1) {
        if ((k & 1) != 0) {
            r *= b;  // (|r|, |b| <= 2^31: no int64 overflow)
            if (r > 2147483647l || r < -2147483648l) return -2147483647 - 1;
        }
        if ((k >> 1) != 0) {
            b *= b;
            if (b > 2147483648l) return -2147483647 - 1;  // (a bit of e is left: r will take this factor)
        }
    }
    return int(r);
#elif DTYPE_Y == 3
    // int64: pow's double holds 53 bits, so a power past 2^53 comes back rounded to them (to nearest, ties to
    // even), and one past int64 as INT64_MIN
    const int64_t MIN64 = -9223372036854775807l - 1l;
    int64_t r = 1l, b = x;
    for (COMP_T k = e; k != 0; k >>= 1) {
        if ((k & 1) != 0) {
            if (b == MIN64 || r == MIN64) {  // (|b| or |r| is 2^63: the product fits only times 1 or 0)
                int64_t other = b == MIN64 ? r : b;
                if (abs(other) > 1l) return MIN64;
                r = other == 0l ? 0l : MIN64;  // (-2^63 times -1 is 2^63: out of range, INT64_MIN too)
            } else if (b != 0l && abs(r) > 9223372036854775807l / abs(b)) {
                return MIN64;
            } else {
                r *= b;
            }
        }
        if ((k >> 1) != 0) {
            if (abs(b) > 3037000499l) return MIN64;  // (b * b > 2^63, and a bit of e is left for it)
            b *= b;
        }
    }
    uint64_t m = uint64_t(r < 0l ? -r : r);  // (r = INT64_MIN: 2^63, as the conversion gives it)
    uint hi = uint(m >> 32);
    int bits = hi != 0u ? findMSB(hi) + 33 : findMSB(uint(m)) + 1;
    if (bits > 53) {
        int shift = bits - 53;
        uint64_t q = m >> shift, rest = m & ((1ul << shift) - 1ul), tie = 1ul << (shift - 1);
        if (rest > tie || (rest == tie && (q & 1ul) != 0ul)) q += 1ul;
        m = q << shift;
    }
    if (m >= 9223372036854775808ul) return MIN64;
    return r < 0l ? -int64_t(m) : int64_t(m);
#else
    COMP_TY r = COMP_TY(1);
    for (COMP_T k = e; k != 0; k >>= 1) {
        if ((k & 1) != 0) r *= x;
        x *= x;
    }
    return r;
#endif
#endif
}

// the ops whose result has the inputs' type
COMP_T arith(COMP_T x, COMP_T z) {
#if IS_FLOAT
    return binary_float(OP, x, z, pc.scale);
#else
    switch (OP) {
    case OP_ADD: return x + z;
    case OP_SUB: return x - z;
    case OP_MUL: return x * z;
    case OP_DIV: return x / z;
    case OP_PRELU: return x < COMP_T(0) ? x * z : x;
    case OP_MIN: return min(x, z);
    case OP_MAX: return max(x, z);
    case OP_FMOD: return x - z * (x / z);  // integer division truncates toward 0
    case OP_MOD: {
        COMP_T r = x - z * (x / z);
        return r != 0 && ((r < 0) != (z < 0)) ? r + z : r;
    }
    case OP_BITWISE_AND: return x & z;
    case OP_BITWISE_OR: return x | z;
    case OP_BITWISE_XOR: return x ^ z;
    // unsigned only (ONNX's BitShift types: uint32 and uint64 in the int32 and int64 variants): right shifts are
    // logical, and counts past the width shift everything out, as ORT's CPU EP gives them (its vector shifts)
#if DTYPE == 3
    case OP_SHIFT_LEFT: return uint64_t(z) < 64ul ? x << z : COMP_T(0);
    case OP_SHIFT_RIGHT: return uint64_t(z) < 64ul ? int64_t(uint64_t(x) >> uint64_t(z)) : COMP_T(0);
#else
    case OP_SHIFT_LEFT: return uint(z) < 32u ? x << z : COMP_T(0);
    case OP_SHIFT_RIGHT: return uint(z) < 32u ? COMP_T(uint(x) >> uint(z)) : COMP_T(0);
#endif
    default: return x;  // OP_FIRST
    }
#endif
}

#if DTYPE == 1
// float16 operands: Add, Sub, Mul, Min, Max and PRelu (one operation, rounded once) run in float16, which gives
// the float result rounded to float16 bit for bit (float's 24 bits are more than 2 x 11 + 2, so rounding twice
// is harmless), and comparisons compare float16 values (exact in either type); everything else computes in float
// as the CPU EP does. Div too: Vulkan lets OpFDiv be 2.5 ulp off in its type, which in float16 would miss the
// correctly rounded quotient the CPU EP gives. docs/design.md, "float16 arithmetic".
bool half_exact(uint op) {
    return op == OP_ADD || op == OP_SUB || op == OP_MUL || op == OP_MIN || op == OP_MAX || op == OP_PRELU;
}

float16_t half_arith(float16_t x, float16_t z) {
    switch (OP) {
    case OP_ADD: return x + z;
    case OP_SUB: return x - z;
    case OP_MUL: return x * z;
    // the CPU EP's float16 PRelu gives +0 where a negative finite x meets a zero slope (x * z, and its float32
    // PRelu, give -0)
    case OP_PRELU: return x < float16_t(0.0) ? (z == float16_t(0.0) && !isinf(x) ? float16_t(0.0) : x * z) : x;
    // NaN propagates (as binary_float)
    case OP_MIN: return x != x ? x : (z != z || z < x ? z : x);
    default: return x != x ? x : (z != z || z > x ? z : x);  // OP_MAX
    }
}

bool compare(float16_t x, float16_t z) {
    switch (OP) {
    case OP_EQUAL: return x == z;
    case OP_GREATER: return x > z;
    case OP_LESS: return x < z;
    case OP_GREATER_EQUAL: return x >= z;
    default: return x <= z;  // OP_LESS_EQUAL (And, Or, Xor take bool)
    }
}
#endif

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

#ifdef FLOAT64
// Min and Max of doubles as ORT's CPU EP takes them: Eigen's cwiseMin/cwiseMax propagating NaN, of (first, second) =
// (a, b), or (b, a) where a is one value for a span of its broadcast loop (the last collapsed dim) and b is not. They
// differ where the two tie (+0 and -0): SSE2's packets of two take the second, and the scalar head and tail of a span
// the first (Eigen peels an element where the span starts off 16 bytes: ORT's buffers are 64-byte aligned). (ORT splits
// a large single span across threads: there the ties at its blocks' ends differ.)
double min_max_double(uint i, double x, double z) {
    uint last = pc.rank - 1u, span = pc.shape[last], start = i - i % span, head = start & 1u;
    bool swap = pc.stride_a[last] == 0u && pc.stride_b[last] != 0u;
    double f = swap ? z : x, s = swap ? x : z;
    if (isnan(f)) return f;
    if (isnan(s)) return s;
    bool scalar = (head != 0u && i == start) || (((span - head) & 1u) != 0u && i == start + span - 1u);
    bool take_f = OP == OP_MAX ? (scalar ? !(f < s) : f > s) : (scalar ? !(s < f) : f < s);
    return take_f ? f : s;
}

// (Pow's scale: 1 where ORT's loop takes the exponent as one value per row of the base, Pow's host sets it)
double arith_double(uint i, double x, double z) {
    switch (OP) {
    case OP_ADD: return x + z;
    case OP_SUB: return x - z;
    case OP_MUL: return x * z;
    case OP_DIV: return x / z;
    case OP_POW: return pow_double(x, z, pc.scale != 0.0);
    case OP_FMOD: return fmod_double(x, z);
    case OP_MOD: return mod_floor_double(x, z);
    case OP_SUB_LOG: {  // (fmax drops NaN; 1e-20f, a float, as a double)
        const double least = 9.999999682655225e-21LF;
        return x - log_double(isnan(z) || z < least ? least : z);
    }
    default: return min_max_double(i, x, z);  // OP_MIN, OP_MAX
    }
}
#endif

void one(uint i) {
    uint ia = 0, ib = 0, rem = i;
    if (pc.rank > 1) {  // the innermost dimension, the one every broadcast has, without a division
        uint last = pc.rank - 1, q = fast_div(rem, pc.shape[last], pc.inner_divisor[0], pc.inner_divisor[1]);
        uint c = rem - q * pc.shape[last];
        ia += c * pc.stride_a[last];
        ib += c * pc.stride_b[last];
        rem = q;
    }
    for (int d = int(pc.rank) - 2; d > 0; --d) {
        uint c = rem % pc.shape[d];
        rem /= pc.shape[d];
        ia += c * pc.stride_a[d];
        ib += c * pc.stride_b[d];
    }
    // the outermost coordinate is what is left (i < n): no division, none at all in one dimension (rank 0: i = 0)
    ia += rem * pc.stride_a[0];
    ib += rem * pc.stride_b[0];
#ifdef FLOAT64
    double x64 = Doubles(pc.a).v[ia];
#if DTYPE == 2 || DTYPE == 3
    double z64 = double(LOAD(Tensor(pc.b), ib));  // (Pow's integer exponent)
#else
    double z64 = Doubles(pc.b).v[ib];
#endif
#if DTYPE == 4
    bool c;  // (NaN compares false, -0 equals 0)
    switch (OP) {
    case OP_EQUAL: c = x64 == z64; break;
    case OP_GREATER: c = x64 > z64; break;
    case OP_LESS: c = x64 < z64; break;
    case OP_GREATER_EQUAL: c = x64 >= z64; break;
    default: c = x64 <= z64;  // OP_LESS_EQUAL
    }
    STORE_Y(TensorY(pc.y), i, c ? 1 : 0);
#else
    Doubles(pc.y).v[i] = arith_double(i, x64, z64);
#endif
    return;
#endif
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
#if DTYPE == 1
    float16_t hx = Tensor(pc.a).v[ia], hz = Tensor(pc.b).v[ib];
    if (OP >= OP_EQUAL && OP <= OP_LESS_EQUAL) {
        STORE_Y(y, i, compare(hx, hz) ? 1 : 0);
        return;
    }
#if DTYPE_Y == 1
    if (half_exact(OP)) {
        y.v[i] = half_arith(hx, hz);
        return;
    }
#endif
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
#if DTYPE == 0 && DTYPE_Y == 0 && !defined(FLOAT64)
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
