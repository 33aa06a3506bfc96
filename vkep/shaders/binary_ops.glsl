// The float formulas of binary.comp's ops, one function of the op code: binary.comp calls it with its
// specialization constant, fused.comp (elementwise chains fused through ORT's Compile) with an op read from
// its program. OP codes: vkep/kernels/elementwise.py, BINARY_OPS. Needs common.glsl and activation.glsl.

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
#define OP_SUB_LOG 27   // y = a - log(fmax(b, 1e-20f)), FLOAT64 only: float64 LogSoftmax's last step, as the CPU EP's
#define OP_SCALE_ADD 40 // y = a * scale + b (ImageScaler, a bias per channel)

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
// x OP z for float operands (Pow: C's powf; comparisons and logic are binary.comp's)
float binary_float(uint op, float x, float z, float scale) {
    switch (op) {
    case OP_ADD: return x + z;
    case OP_SUB: return x - z;
    case OP_MUL: return x * z;
    case OP_DIV: return x / z;
    case OP_POW: return pow_float(x, z);
#if DTYPE == 1
    // (as binary.comp's half_arith: the CPU EP's float16 PRelu of a negative finite x and a zero slope is +0)
    case OP_PRELU: return x < 0.0 ? (z == 0.0 && !isinf(x) ? 0.0 : x * z) : x;
#else
    case OP_PRELU: return x < 0.0 ? x * z : x;
#endif
    // NaN propagates (as ORT)
    case OP_MIN: return x != x ? x : (z != z || z < x ? z : x);
    case OP_MAX: return x != x ? x : (z != z || z > x ? z : x);
    case OP_ADD_SCALE: return (x + z) * scale;
    case OP_MUL_GELU: return x * gelu_erf(z);
    case OP_SCALE_ADD: return x * scale + z;
    case OP_FMOD: return fmod_c(x, z);
    case OP_MOD: return mod_floor(x, z);
    default: return x;  // OP_FIRST
    }
}
