// unary.comp and unary_mlas.comp (which defines MLAS_OPS): y = f(x) elementwise over contiguous tensors; f is chosen by a specialization constant (OP codes in
// vkep/kernels/elementwise.py, UNARY_OPS). Float variants compute in float32; integer variants in int /
// int64_t. The output type (DTYPE_Y) may differ from the input's: IsNaN/IsInf give bool, Cast anything.
#include "common.glsl"
#include "activation.glsl"
#include "unary_ops.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint BOOL_OUT = 0;  // store r != 0 (Cast to bool: the byte must be 0 or 1)
layout(constant_id = 2) const uint WIDE = 0;  // 0: one element a lane; else the elements a workgroup covers (common.glsl)

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint64_t lo, hi;  // Clip's optional min/max scalars (0: absent)
    uint n;
    float alpha, beta;  // the op's attributes (alpha, beta, gamma, lambd, ...)
    GROUP_BASE;
} pc;

#if IS_FLOAT
float compute_float(float v) {
    if (OP == OP_CLIP) {  // min and max: optional scalar inputs, else the lowest and highest floats
        float lo = LOAD(Tensor(PRESENT_OR(pc.lo, pc.x)), 0), hi = LOAD(Tensor(PRESENT_OR(pc.hi, pc.x)), 0);
        return unary_float(OP, v, pc.lo != 0 ? lo : pc.alpha, pc.hi != 0 ? hi : pc.beta);
    }
    return unary_float(OP, v, pc.alpha, pc.beta);
}

#else
#if DTYPE == 3
#define COMP_MIN (-9223372036854775807L - 1L)
#define COMP_MAX 9223372036854775807L
#else
#define COMP_MIN (-2147483647 - 1)
#define COMP_MAX 2147483647
#endif

COMP_T compute_int(COMP_T v) {
    switch (OP) {
    case OP_RELU: return v < 0 ? COMP_T(0) : v;
    case OP_ABS: return v < 0 ? -v : v;
    case OP_NEG: return -v;
    case OP_SIGN: return v > 0 ? COMP_T(1) : (v < 0 ? COMP_T(-1) : COMP_T(0));
    case OP_NOT: return v == 0 ? COMP_T(1) : COMP_T(0);
    case OP_BITWISE_NOT: return ~v;
    case OP_CLIP: {
        COMP_T lo = LOAD(Tensor(PRESENT_OR(pc.lo, pc.x)), 0), hi = LOAD(Tensor(PRESENT_OR(pc.hi, pc.x)), 0);
        return min(max(v, pc.lo != 0 ? lo : COMP_T(COMP_MIN)), pc.hi != 0 ? hi : COMP_T(COMP_MAX));
    }
    case OP_SHRINK: {  // ORT computes x ± bias in float and truncates
        float f = float(v), r = f < -pc.beta ? f + pc.alpha : (f > pc.beta ? f - pc.alpha : 0.0);
        return COMP_T(r);
    }
    default: return v;  // OP_CAST
    }
}
#endif

#if DTYPE_Y > 1
// float → integer as ORT's static_cast on x86: out of range and NaN give the int32/int64 minimum, and
// the small types keep the low bits of the int32 result
COMP_TY to_int(float r) {
#if DTYPE_Y == 3
    bool ok = r >= -9223372036854775808.0 && r < 9223372036854775808.0;
    return ok ? int64_t(r) : (-9223372036854775807L - 1L);
#else
    bool ok = r >= -2147483648.0 && r < 2147483648.0;
    return ok ? int(r) : (-2147483647 - 1);
#endif
}
#endif

#ifdef FLOAT64
#include "float64.glsl"
// unary.comp's FLOAT64 variants: float64 Neg, Abs, Relu, Sqrt, Reciprocal, Floor, Ceil, Round, Sign, Exp, Log, Sigmoid,
// Clip, Shrink, IsNaN and IsInf, and unary_mlas.comp's Tanh (unary_double), Sin and Cos (sin_cos_double), and Cast between float64 and the variant's DTYPE. F64 says which side is float64. Casts follow ORT's CPU EP: float64
// to float16 through float32 (two roundings), to integers as to_int below, integers to float64 rounded once.
layout(constant_id = 3) const uint F64 = 3;  // 1: float64 in, DTYPE out; 2: DTYPE in, float64 out; 3: both

#if DTYPE_Y > 1
// float64 → integer as ORT's static_cast on x86: out of range and NaN give the int32/int64 minimum, and the
// small types keep the low bits of the int32 result
COMP_TY double_to_int(double r) {
#if DTYPE_Y == 3
    bool ok = r >= -9223372036854775808.0LF && r < 9223372036854775808.0LF;
    return ok ? int64_t(r) : (-9223372036854775807L - 1L);
#else
    bool ok = r >= -2147483648.0LF && r < 2147483648.0LF;
    return ok ? COMP_TY(int(r)) : COMP_TY(-2147483647 - 1);
#endif
}
#endif

// the float64 ops (the manifest lists float64 for these alone), exact in double but Exp (an ulp), Log, Tanh and Sigmoid
// (Eigen's, as the CPU EP: float64.glsl), NaN and -0 as the CPU EP's
double unary_double(double v) {
    switch (OP) {
    case OP_EXP: return exp_double(v);
    case OP_LOG: return eigen_log(v);
    case OP_SIGMOID: return eigen_sigmoid(v);
#ifdef MLAS_OPS
    case OP_TANH: return eigen_tanh(v);
#endif
    case OP_ISNAN: return isnan(v) ? 1.0LF : 0.0LF;
    case OP_ISINF: return isinf(v) && (v > 0.0LF ? pc.beta != 0.0 : pc.alpha != 0.0) ? 1.0LF : 0.0LF;
    case OP_NEG: return -v;
    case OP_ABS: return abs(v);
    case OP_RELU: return v < 0.0LF ? 0.0LF : v;
    case OP_SQRT: return sqrt(v);
    case OP_RECIPROCAL: return 1.0LF / v;
    case OP_FLOOR: return floor(v);
    case OP_CEIL: return ceil(v);
    case OP_ROUND: return roundEven(v);
    case OP_CLIP: {
        // the CPU EP's X.cwiseMax(min).cwiseMin(max): each keeps its first operand on a tie or NaN (SSE's maxpd/minpd
        // with Eigen's operands as std::max/min's), so NaN stays, min > max gives max, and between zeros x's sign, then
        // the bound's; absent bounds: the lowest and highest doubles
        double lo = Doubles(PRESENT_OR(pc.lo, pc.x)).v[0], hi = Doubles(PRESENT_OR(pc.hi, pc.x)).v[0];
        double bottom = pc.lo != 0 ? lo : -1.7976931348623157e308LF, top = pc.hi != 0 ? hi : 1.7976931348623157e308LF;
        double r = v < bottom ? bottom : v;
        return top < r ? top : r;
    }
    case OP_SHRINK: return double(unary_float(OP, float(v), pc.alpha, pc.beta));  // (the CPU EP's: in float)
    case OP_SIGN: {  // made from bits: lavapipe gave -0 for a select of 0.0 (zeros' signs taken as insignificant)
        uvec2 b = unpackDouble2x32(v);
        bool zero = ((b.y & 0x7fffffffu) | b.x) == 0u;
        return isnan(v) ? v : packDouble2x32(uvec2(0u, zero ? 0u : (b.y & 0x80000000u) | 0x3ff00000u));
    }
    default: return v;  // OP_CAST
    }
}

#ifdef MLAS_OPS
// Sin or Cos of x[i] as the CPU EP's Eigen computes it over its contiguous, 16-byte aligned tensor: packets of two
// elements (2j, 2j + 1), whose lanes reduce alike (eigen_sin_cos's `medium`), C's sin or cos past 1e14 and for the odd
// element left at the end. (The partner's index is clamped, not tested: common.glsl's PRESENT_OR)
double sin_cos_double(uint i, double v) {
    bool cosine = OP == OP_COS;
    double partner = abs(Doubles(pc.x).v[min(i ^ 1u, pc.n - 1u)]);
    if (isnan(v) || isinf(v)) return D_NAN;
    if (abs(v) > 1.0e14LF || (i ^ 1u) >= pc.n) return sin_cos_accurate_double(v, cosine);
    return eigen_sin_cos(v, abs(v) >= 15.0LF || partner >= 15.0LF, cosine);  // (a NaN partner: not >= 15)
}
#endif

void one(uint i) {
    double v = (F64 & 1) != 0 ? Doubles(pc.x).v[i] : double(LOAD(Tensor(pc.x), i));
#ifdef MLAS_OPS
    double r = OP == OP_SIN || OP == OP_COS ? sin_cos_double(i, v) : unary_double(v);
#else
    double r = unary_double(v);
#endif
    if ((F64 & 2) != 0) {
        Doubles(pc.y).v[i] = r;
        return;
    }
    TensorY y = TensorY(pc.y);
#if DTYPE_Y <= 1
    STORE_Y(y, i, float(r));
#else
    if (BOOL_OUT != 0) STORE_Y(y, i, r != 0.0LF ? 1 : 0);  // NaN → true
    else STORE_Y(y, i, double_to_int(r));
#endif
}
#else
void one(uint i) {
    TensorY y = TensorY(pc.y);
#if IS_FLOAT
    float r = compute_float(LOAD(Tensor(pc.x), i));
#if DTYPE_Y <= 1
    STORE_Y(y, i, r);
#else
    if (BOOL_OUT != 0) STORE_Y(y, i, r != 0.0 ? 1 : 0);  // NaN → true
    else STORE_Y(y, i, to_int(r));
#endif
#else
    COMP_T r = compute_int(LOAD(Tensor(pc.x), i));
#if DTYPE_Y <= 1
    STORE_Y(y, i, float(r));
#else
    if (BOOL_OUT != 0) STORE_Y(y, i, r != 0 ? 1 : 0);
    else STORE_Y(y, i, COMP_TY(r));
#endif
#endif
}
#endif

void main() {
    if (WIDE == 0) {
        uint i = FLAT_ID(64);
        if (i < pc.n) one(i);
        return;
    }
    uint first = FLAT_GROUP * WIDE, lane = gl_LocalInvocationID.x;
#if DTYPE == 0 && DTYPE_Y == 0 && !defined(FLOAT64)
    if (((pc.x | pc.y) & 7) == 0 && (pc.n & 1) == 0) {  // float32, 8-byte aligned: two elements a load
        for (uint k = 0; k < WIDE / (2 * 64); ++k) {
            uint i = first + 2 * (k * 64 + lane);
            if (i >= pc.n) break;
            vec2 v = load_pair(pc.x, i);
            store_pair(pc.y, i, vec2(compute_float(v.x), compute_float(v.y)));
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
