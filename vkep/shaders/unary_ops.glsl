// The float formulas of unary.comp's ops, one function of the op code: unary.comp calls it with its
// specialization constant, fused.comp (elementwise chains fused through ORT's Compile) with an op read from
// its program. OP codes: vkep/kernels/elementwise.py, UNARY_OPS. Needs common.glsl and activation.glsl.

#include "mlas_logistic.glsl"

#define OP_RELU 0
#define OP_SIGMOID 1
#define OP_TANH 2
#define OP_ABS 3
#define OP_NEG 4
#define OP_EXP 5
#define OP_LOG 6
#define OP_SQRT 7
#define OP_RECIPROCAL 8
#define OP_FLOOR 9
#define OP_CEIL 10
#define OP_ROUND 11
#define OP_SIGN 12
#define OP_SIN 13
#define OP_COS 14
#define OP_TAN 15
#define OP_ASIN 16
#define OP_ACOS 17
#define OP_ATAN 18
#define OP_SINH 19
#define OP_COSH 20
#define OP_ASINH 21
#define OP_ACOSH 22
#define OP_ATANH 23
#define OP_ERF 24
#define OP_ISNAN 25
#define OP_ISINF 26
#define OP_NOT 27
#define OP_BITWISE_NOT 28
#define OP_LEAKY_RELU 29
#define OP_ELU 30
#define OP_SELU 31
#define OP_CELU 32
#define OP_HARD_SIGMOID 33
#define OP_HARD_SWISH 34
#define OP_SOFTPLUS 35
#define OP_SOFTSIGN 36
#define OP_MISH 37
#define OP_GELU 38
#define OP_THRESHOLDED_RELU 39
#define OP_CLIP 40
#define OP_SHRINK 41
#define OP_CAST 42
#define OP_QUICK_GELU 43
// ORT's experimental activations of opsets 1-9 (kept for old models)
#define OP_SCALED_TANH 50
#define OP_PARAMETRIC_SOFTPLUS 51
#define OP_AFFINE 52
#define OP_SCALE 53  // (not Affine with beta 0: -0 stays -0)

// asin on [-0.5, 0.5] (Cephes asinf: ~1 ulp; lavapipe's asin() is off by ~4e-4)
float asin_core(float x) {
    float z = x * x;
    float p = (((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z + 7.4953002686e-2) * z
              + 1.6666752422e-1;
    return p * z * x + x;
}

float asin_accurate(float x) {
    float a = abs(x);
    float r = a > 0.5 ? 1.5707963267948966 - 2.0 * asin_core(sqrt(0.5 * (1.0 - a))) : asin_core(a);
    return x < 0.0 ? -r : r;  // |x| > 1: sqrt of a negative, NaN
}

float acos_accurate(float x) {
    if (x < -0.5) return 3.141592653589793 - 2.0 * asin_core(sqrt(0.5 * (1.0 + x)));
    if (x > 0.5) return 2.0 * asin_core(sqrt(0.5 * (1.0 - x)));
    return 1.5707963267948966 - asin_core(x);
}

// sin, cos and tan with vkep's own argument reduction: Vulkan bounds sin() and cos() only inside [-pi, pi]
// (lavapipe's lose every digit past |x| ~ 1e8). x = q pi/2 + r, |r| <= pi/4, where q and r come from
// x 2/pi modulo 4 computed exactly from 2/pi's bits (Payne-Hanek), so that every float32 reduces right.
// 2/pi's first 224 bits after the point, behind a zero word (for the windows of |x| < 2^8 or so)
const uint TWO_OVER_PI[8] = uint[8](0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u,
                                    0x3c439041u, 0xfe5163abu);

float reduce_half_pi(float x, out uint q) {
    float a = abs(x);
    q = 0u;
    if (a <= 0.7853981633974483) return x;
    uint bits = floatBitsToUint(a);
    int k = int(bits >> 23) - 150;  // a = m 2^k with m the 24-bit significand
    uint64_t m = uint64_t((bits & 0x7fffffu) | 0x800000u);
    // m 2^k times 2/pi's bits b_i (worth 2^-i) before b_(k-1) gives multiples of 4: the 96-bit window from
    // b_(k-1) on (table offset 30 + k, as G:H) is all that x 2/pi modulo 4 needs, = (m G + m H 2^-32) 2^-62
    uint o = uint(30 + k), w = o >> 5, s = o & 31u;
    uint64_t hi = packUint2x32(uvec2(TWO_OVER_PI[w + 1], TWO_OVER_PI[w]));
    uint64_t lo = packUint2x32(uvec2(TWO_OVER_PI[w + 3], TWO_OVER_PI[w + 2]));
    uint64_t g = s == 0u ? hi : (hi << s) | (lo >> (64u - s));
    uint64_t h = (lo << s) >> 32;
    uint64_t v = m * g + ((m * h) >> 32);  // modulo 2^64: 2 integer bits, 62 fraction bits
    uint64_t f = v << 2;
    q = uint(v >> 62) + uint(f >> 63);  // a fraction of 1/2 or more rounds q up and r goes negative
    float r = float(int64_t(f)) * 8.515303950216380e-20;  // (pi/2) 2^-64
    if (x < 0.0) {
        q = 0u - q;
        r = -r;
    }
    return r;
}

// sin and cos on [-pi/4, pi/4] (Cephes sinf/cosf polynomials, ~1 ulp)
float sin_core(float r) {
    float z = r * r;
    return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
}

float cos_core(float r) {
    float z = r * r;
    return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
}

// (not x - x for an infinite x: compilers fold it to 0)
float nan_f() { return uintBitsToFloat(0x7fc00000u); }

// sin (shift 0) or cos (shift 1) of any float
float sin_cos_accurate(float x, uint shift) {
    if (isinf(x)) return nan_f();
    if (shift == 0u && abs(x) < 2.44140625e-4) return x;  // sin x = x in float32 below 2^-12 (keeps -0)
    uint q;
    float r = reduce_half_pi(x, q);
    q += shift;
    float v = (q & 1u) == 0u ? sin_core(r) : cos_core(r);
    return (q & 2u) == 0u ? v : -v;
}

float tan_accurate(float x) {
    if (isinf(x)) return nan_f();
    if (abs(x) < 2.44140625e-4) return x;  // tan x = x in float32 below 2^-12 (keeps -0)
    uint q;
    float r = reduce_half_pi(x, q);
    return (q & 1u) == 0u ? sin_core(r) / cos_core(r) : -cos_core(r) / sin_core(r);
}

// sinh without the cancellation of (e^x - e^-x) / 2 near 0
float sinh_accurate(float v) {
    if (abs(v) >= 1.0) return sinh(v);
    float v2 = v * v;
    return v * (1.0 + v2 / 6.0 * (1.0 + v2 / 20.0 * (1.0 + v2 / 42.0 * (1.0 + v2 / 72.0 * (1.0 + v2 / 110.0)))));
}

const float LN2 = 0.6931471805599453;

// ops whose result for NaN is not NaN (or is decided in the op): every other float op returns NaN
// for NaN, as ORT's CPU EP does (lavapipe's tanh/atan, and clamps, turn it into a number)
bool nan_is_computed(uint op) {
    return op == OP_ISNAN || op == OP_ISINF || op == OP_THRESHOLDED_RELU || op == OP_SHRINK || op == OP_CAST;
}

#ifdef MLAS_OPS
// sin or cos as ORT's CPU EP computes float32 Sin and Cos, to the last bit: Eigen's psincos_float as built there (SSE,
// no FMA: each pmadd a product rounded, then a sum). y = round(|v| 2/pi) by the 1.5 2^23 bias; r = |v| - y pi/2 in four
// steps; the sin or cos polynomial by y's parity; the sign from y's second bit (and v's sign for sin). Past Eigen's
// huge_th (25966 for sin, 18838 for cos) it reduces in float by trig_reduce_huge: vkep's exact reduction instead
// (reduce_half_pi), the same polynomials (within an ulp of Eigen's there).
float eigen_sin_cos(float v, bool cosine) {
    float x = abs(v);
    precise float y_scaled = x * 0.636619746685028076171875;
    precise float y_round = y_scaled + 12582912.0;
    int y_int = floatBitsToInt(y_round);
    precise float y = y_round - 12582912.0;
    precise float r = x;
    if (x >= (cosine ? 18838.0 : 25966.0) && !isinf(x)) {
        uint q;
        r = reduce_half_pi(x, q);
        y_int = int(q);
    } else {
        precise float t = y * -1.5703125;
        r = t + r;
        t = y * -0.000483989715576171875;
        r = t + r;
        t = y * 1.62865035235881805419921875e-07;
        r = t + r;
        t = y * 5.5644315544167710640977020375430583953857421875e-11;
        r = t + r;
    }
    precise float r2 = r * r;
    precise float c = 2.4372266125283204019069671630859375e-05 * r2 + -0.00138865201734006404876708984375;
    c = c * r2 + 0.041666619479656219482421875;
    c = c * r2 + -0.5;
    c = c * r2 + 1.0;
    precise float s = -0.0001959234114083702898469196984621021329076029360294342041015625 * r2
                      + 0.0083326873655616851693794799871284340042620897293090820312500000;
    s = s * r2 + -0.1666666203982298255503735617821803316473960876464843750000000000;
    s = s * r2;
    s = s * r + r;
    bool even = (y_int & 1) == 0;
    float p = cosine == even ? c : s;
    uint sign = cosine ? uint(y_int + 1) << 30 : floatBitsToUint(v) ^ (uint(y_int) << 30);
    return uintBitsToFloat(floatBitsToUint(p) ^ (sign & 0x80000000u));
}
#endif

// f(v) with the op's attributes a and b (alpha, beta, gamma, lambd, ...; Clip's min and max)
float unary_float(uint op, float v, float a, float b) {
#if DTYPE == 1
    if (isnan(v) && op == OP_SIGN) return 0.0;  // the CPU EP's float16 Sign gives 0 for NaN (float32: NaN)
#endif
    if (isnan(v) && !nan_is_computed(op)) return v;
#ifdef MLAS_OPS  // (unary_mlas.comp; elsewhere, as fused groups and epilogues compute them: below)
    if (op == OP_TANH || op == OP_ERF || op == OP_GELU) {
        // MLAS's tanh and erf as the CPU EP computes these ops, to the last bit (mlas_logistic.glsl), each called
        // from one place: lavapipe inlines every call before a pipeline's constants fold the others away
        bool tanh_form = op == OP_TANH || (op == OP_GELU && a != 0.0);  // (Gelu's alpha 1: the tanh form)
        float t = op != OP_GELU ? v : tanh_form ? ort_gelu_tanh_arg(v) : v * 0.70710677;
        float e = tanh_form ? mlas_tanh(t) : mlas_erf(t);
        return op == OP_GELU ? ort_gelu_from(v, e) : e;
    }
#if DTYPE == 0
    if (op == OP_SIN || op == OP_COS) return eigen_sin_cos(v, op == OP_COS);  // (float16: below)
    if (op == OP_EXP) return mlas_exp(v);  // (MlasComputeExp, as the CPU EP's float32 Exp; float16: below)
#endif
#endif
    switch (op) {
    case OP_RELU: return v < 0.0 ? 0.0 : v;  // not max(): keeps NaN
    case OP_SIGMOID: return mlas_logistic(v);  // as the CPU EP, to the last bit (mlas_logistic.glsl)
    case OP_TANH: return tanh_safe(v);
    case OP_ABS: return abs(v);
    case OP_NEG: return -v;
    case OP_EXP: return exp(v);
    case OP_LOG: return log_eigen(v);  // (the CPU EP's, to the last bit)
    case OP_SQRT: return sqrt(v);
    case OP_RECIPROCAL: return 1.0 / v;
    case OP_FLOOR: return floor(v);
    case OP_CEIL: return ceil(v);
    case OP_ROUND: return roundEven(v);
    case OP_SIGN: return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : (v == 0.0 ? 0.0 : v));  // NaN → NaN
    case OP_SIN: return sin_cos_accurate(v, 0u);
    case OP_COS: return sin_cos_accurate(v, 1u);
    case OP_TAN: return tan_accurate(v);
    case OP_ASIN: return asin_accurate(v);
    case OP_ACOS: return acos_accurate(v);
    case OP_ATAN: return atan(v);
    case OP_SINH: return sinh_accurate(v);
    case OP_COSH: return cosh(v);
    // the inverse hyperbolics written out: accurate for negative, small and large arguments, through log1p where
    // the logarithm's argument is near 1 (within a few ulps of C's; lavapipe's log near 1 was 8e-4 relative off
    // for asinh, 1e-2 for atanh); past 1e18, v * v overflows and sqrt(v * v ± 1) is |v| anyway: log(2|v|)
    case OP_ASINH: {
        float a = abs(v);
        return sign(v) * (a > 1e18 ? log_eigen(a) + LN2 : log1p_accurate(a + a * a / (1.0 + sqrt(a * a + 1.0))));
    }
    case OP_ACOSH:
        if (v < 1.0) return uintBitsToFloat(0x7FC00000u);  // NaN, as the CPU EP
        return v > 1e18 ? log_eigen(v) + LN2 : log1p_accurate((v - 1.0) + sqrt((v - 1.0) * (v + 1.0)));
    case OP_ATANH: return abs(v) > 1.0 ? uintBitsToFloat(0x7FC00000u) : 0.5 * log1p_accurate(2.0 * v / (1.0 - v));
    case OP_ERF: return erf_approx(v);
    case OP_ISNAN: return isnan(v) ? 1.0 : 0.0;
    // alpha = detect_negative, beta = detect_positive
    case OP_ISINF: return isinf(v) && (v > 0.0 ? b != 0.0 : a != 0.0) ? 1.0 : 0.0;
    case OP_LEAKY_RELU: return v >= 0.0 ? v : a * v;
    // Elu, Selu, Celu and HardSwish as the CPU EP's Eigen expressions compute them, to the last bit (Eigen's exp,
    // gamma alpha folded first, a sixth multiplied): near 0 the exp's last bit is the result's first
    case OP_ELU: { precise float e = exp_eigen(v) - 1.0; return v >= 0.0 ? v : a * e; }
    case OP_SELU: {  // beta = gamma
        precise float ga = b * a, e = exp_eigen(v) - 1.0;
        return v > 0.0 ? b * v : ga * e;
    }
    case OP_CELU: { precise float e = a * (exp_eigen(v / a) - 1.0); return max(v, 0.0) + min(0.0, e); }
    case OP_HARD_SIGMOID: return clamp(a * v + b, 0.0, 1.0);
    case OP_HARD_SWISH: { precise float t = v * (1.0 / 6.0) + 0.5; return v * clamp(t, 0.0, 1.0); }
    case OP_SOFTPLUS: return softplus(v);
    case OP_SOFTSIGN: { precise float r = 1.0 / (1.0 + abs(v)); return v * r; }  // (the CPU EP's: times the reciprocal)
    case OP_MISH: return v * tanh_safe(softplus(v));
    case OP_GELU:  // alpha = 1: the tanh approximation
        if (a != 0.0) return 0.5 * v * (1.0 + tanh_safe(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        return gelu_erf(v);
    case OP_THRESHOLDED_RELU: return v > a ? v : 0.0;
    case OP_QUICK_GELU: return v / (1.0 + exp(-a * v));  // x * sigmoid(alpha * x)
    case OP_SCALED_TANH: return a * tanh_safe(b * v);
    case OP_PARAMETRIC_SOFTPLUS: {  // as ORT: log(1 + exp(-t)) added to t where t > 0 (no overflow)
        float t = v * b;
        return a * (t > 0.0 ? t + log(exp(-t) + 1.0) : log(exp(t) + 1.0));
    }
    case OP_AFFINE: return a * v + b;
    case OP_SCALE: return a * v;
    case OP_CLIP: {  // alpha = min, beta = max; min > max gives max (as ORT); NaN stays NaN
        float r = v < a ? a : v;
        return r > b ? b : r;
    }
    case OP_SHRINK: return v < -b ? v + a : (v > b ? v - a : 0.0);  // alpha = bias, beta = lambd
    default: return v;  // OP_CAST
    }
}
