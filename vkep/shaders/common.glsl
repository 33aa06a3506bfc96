// Shared by every vkep shader: tensors are buffer device addresses passed in push constants.
//
// A variant is chosen with -D defines (see vkep/kernels/base.py, SHADER_DTYPE):
//   DTYPE    element type of the inputs      0 float32, 1 float16, 2 int32, 3 int64, 4 uint8/bool, 5 int8,
//                                            6 int16, 7 uint16 (the 16-bit integers: quantize.comp only)
//   DTYPE_Y  element type of the output      (default: DTYPE; differs for Cast, comparisons, ...)
// Storage types are converted to a compute type on load: float for float16/float32, int for the small
// integers, int64_t for int64. (float16 arithmetic where it gives the float result rounded once: binary.comp's
// half_arith; GEMM-like shaders sum in MAC_T, below. docs/design.md, "float16 arithmetic".)
//   ACC16    (float16 only) GEMM-like shaders multiply and sum in float16: EP option fp16_accumulation=float16
//   FLOAT64  the float64 variant of a shader written with one: double arithmetic, float64 tensors read as Doubles
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_scalar_block_layout : require
#ifdef FLOAT64
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#endif

#ifndef DTYPE
#define DTYPE 0
#endif
#ifndef DTYPE_Y
#define DTYPE_Y DTYPE
#endif

#if DTYPE == 1 || DTYPE_Y == 1
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#if DTYPE == 4 || DTYPE == 5 || DTYPE_Y == 4 || DTYPE_Y == 5
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#endif
#if DTYPE == 6 || DTYPE == 7 || DTYPE_Y == 6 || DTYPE_Y == 7
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

#define T_STORE_0 float
#define T_STORE_1 float16_t
#define T_STORE_2 int
#define T_STORE_3 int64_t
#define T_STORE_4 uint8_t
#define T_STORE_5 int8_t
#define T_STORE_6 int16_t
#define T_STORE_7 uint16_t
#define T_COMP_0 float
#define T_COMP_1 float
#define T_COMP_2 int
#define T_COMP_3 int64_t
#define T_COMP_4 int
#define T_COMP_5 int
#define T_COMP_6 int
#define T_COMP_7 int
#define T_ALIGN_0 4
#define T_ALIGN_1 2
#define T_ALIGN_2 4
#define T_ALIGN_3 8
#define T_ALIGN_4 1
#define T_ALIGN_5 1
#define T_ALIGN_6 2
#define T_ALIGN_7 2
#define VKEP_PASTE(a, b) a##b
#define VKEP_XPASTE(a, b) VKEP_PASTE(a, b)

#define STORE_T VKEP_XPASTE(T_STORE_, DTYPE)
#define COMP_T VKEP_XPASTE(T_COMP_, DTYPE)
#define STORE_TY VKEP_XPASTE(T_STORE_, DTYPE_Y)
#define COMP_TY VKEP_XPASTE(T_COMP_, DTYPE_Y)
#define IS_FLOAT (DTYPE <= 1)
// the multiply-accumulate type of GEMM-like shaders (matmul.comp, conv.comp): float, or float16_t in the ACC16 variant,
// whose multiply-adds round each step as a GPU's packed half units do; LOAD_MAC reads an operand as MAC_T
#if defined(ACC16) && DTYPE == 1
#define MAC_T float16_t
#else
#define MAC_T float
#endif
#define LOAD_MAC(t, i) MAC_T((t).v[i])

layout(buffer_reference, scalar, buffer_reference_align = VKEP_XPASTE(T_ALIGN_, DTYPE)) buffer Tensor {
    STORE_T v[];
};
layout(buffer_reference, scalar, buffer_reference_align = VKEP_XPASTE(T_ALIGN_, DTYPE_Y)) buffer TensorY {
    STORE_TY v[];
};
// ONNX indices, shapes and axes are int64
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Int64Tensor { int64_t v[]; };
#ifdef FLOAT64
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Doubles { double v[]; };
#endif
// The values of a shader written for its types and FLOAT64 alike (cumsum.comp, unique.comp): VAL, COMP_T read from and
// written to a Tensor, or in the FLOAT64 variant double through Doubles
#ifdef FLOAT64
#define VAL double
#define LOAD_VAL(addr, i) Doubles(addr).v[i]
#define STORE_VAL(addr, i, value) Doubles(addr).v[i] = (value)
#else
#define VAL COMP_T
#define LOAD_VAL(addr, i) LOAD(Tensor(addr), i)
#define STORE_VAL(addr, i, value) STORE(Tensor(addr), i, value)
#endif

// The address of an optional tensor, or `fallback` (a tensor the shader reads anyway) where it is absent (0), for
// reading it as `v = LOAD(Tensor(PRESENT_OR(pc.opt, pc.x)), PRESENT_AT(pc.opt, i))` OUTSIDE any test of pc.opt and
// then choosing (`pc.opt != 0 ? v : otherwise`). A compiler may perform a load whatever the branch around it says:
// Mesa 26's lavapipe (LLVM 19) did, for Clip's absent min and a Winograd conv's absent bias, and the load from
// address 0 crashed the process (conformance and the test files run on that driver found them); inside the test it
// also knows that PRESENT_OR gives pc.opt there, and folds it back.
#define PRESENT_OR(addr, fallback) ((addr) != 0 ? (addr) : (fallback))
#define PRESENT_AT(addr, i) ((addr) != 0 ? (i) : 0u)  // the index to read there: element 0 of the fallback
#define LOAD(t, i) COMP_T((t).v[i])
#define STORE(t, i, x) (t).v[i] = STORE_T(x)
#define STORE_Y(t, i, x) (t).v[i] = STORE_TY(x)

// ---- a workgroup's sum, one uint a lane ------------------------------------------------------------------
// array[0] = the sum of the shared array[0 .. size) (size a power of two, one element a lane): every lane of the
// workgroup runs it (its barriers are the workgroup's), after a barrier that follows the lanes' writes.
#define SHARED_SUM(array, lane, size) \
    for (uint vkep_half = (size) / 2u; vkep_half > 0u; vkep_half >>= 1u) { \
        if ((lane) < vkep_half) array[lane] += array[(lane) + vkep_half]; \
        barrier(); \
    }

// ---- grids past the device's workgroup-count limit ------------------------------------------------------
// vkep/gpu/native/recorder.c records such a grid as several dispatches and gives each its first workgroup in
// the last 12 bytes of the push constants. A shader that declares GROUP_BASE as the last member of its push
// block (`pc`) and reads WORKGROUP_ID / GLOBAL_ID / FLAT_ID / FLAT_GROUP, never the gl_ built-ins, takes any
// grid (gl_NumWorkGroups would be a piece's count). Its push block must end before byte 116.
#define GROUP_BASE layout(offset = 116) uvec3 vkep_group_base
#define WORKGROUP_ID (gl_WorkGroupID + pc.vkep_group_base)
#define GLOBAL_ID (gl_GlobalInvocationID + pc.vkep_group_base * gl_WorkGroupSize)
// vkep.kernels.base.grid_1d folds a 1-D grid wider than GRID_FOLD workgroups into y rows of GRID_FOLD
#define GRID_FOLD 65535u
// flat invocation index, and flat workgroup index, over grid_1d's grid
#define FLAT_ID(wg_size) (GLOBAL_ID.x + GLOBAL_ID.y * (GRID_FOLD * (wg_size)))
#define FLAT_GROUP (WORKGROUP_ID.x + WORKGROUP_ID.y * GRID_FOLD)

// Elementwise shaders (unary.comp, binary.comp) over a large tensor cover WIDE elements a workgroup (their
// specialization constant, vkep.kernels.elementwise.CHUNK): fewer workgroups (each costs lavapipe a fixed
// setup) and, for float32, 64-bit loads of two elements (a load is a loop over the SIMD lanes there, whatever
// its width): Relu over 800K floats 5.0 -> 1.1 ms, Add 18.5 -> 2.3 ms on Mesa 25 lavapipe. A small tensor
// keeps one element a lane (WIDE 0: a loop costs its lone workgroup more than it saves).
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer PairWords { uint64_t v[]; };
vec2 load_pair(uint64_t base, uint i) {  // float32 elements i, i + 1 (i even, base 8-byte aligned)
    uint64_t w = PairWords(base).v[i / 2];
    return uintBitsToFloat(uvec2(uint(w), uint(w >> 32)));
}
void store_pair(uint64_t base, uint i, vec2 v) {
    uvec2 u = floatBitsToUint(v);
    PairWords(base).v[i / 2] = uint64_t(u.x) | (uint64_t(u.y) << 32);
}

// the same for a shader that cannot be split (no GROUP_BASE: its grid stays within the device's limit)
uint flat_index(uint wg_size) {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * wg_size;
}

// n / d for a divisor the host prepared as (magic, shift) (vkep/kernels/base.py, fast_divisor): a multiply-high,
// an add and two shifts instead of an integer division, which no CPU's SIMD has (lavapipe splits a vector's
// division into one per lane) and GPUs emulate in a few dozen instructions. Exact for every 32-bit n; d = 1 has
// no magic of its own (the host gives (0, 0))
uint fast_div(uint n, uint d, uint magic, uint shift) {
    uint hi, lo;
    umulExtended(n, magic, hi, lo);
    return d == 1u ? n : (hi + ((n - hi) >> 1)) >> shift;
}

// An index out of range (Gather*, Scatter*): the shader clamps it so that nothing is read or written out
// of bounds, and sets the device's error word (`err` in its push constants), which the host checks when
// it next waits for the device and turns into the run's error, as ORT's CPU EP fails the run.
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer ErrorWord { uint v; };
void report_index_error(uint64_t err) {
    if (err != 0) ErrorWord(err).v = 1u;
}


// ---- log that takes denormals: lavapipe flushes denormal operands to zero (log would give -inf) ----------
float log_any(float v) {
    uint bits = floatBitsToUint(v);
    if ((bits & 0x7F800000u) != 0u || (bits & 0x7FFFFFu) == 0u) return log(v);
    return (bits >> 31) != 0u ? uintBitsToFloat(0x7FC00000u) : log(float(bits & 0x7FFFFFu)) - 149.0 * 0.6931471805599453;
}

// ---- pow for a base >= 0 (or NaN), as C's powf ------------------------------------------------------------
// GLSL leaves pow() undefined for x <= 0, and lavapipe flushes denormal operands and mishandles infinities:
// this one follows C for every special value. (binary.comp's pow_float adds negative bases.)
#define F_INF uintBitsToFloat(0x7f800000u)
#define F_NAN uintBitsToFloat(0x7fc00000u)

// p 2^m rounded as x86 rounds it, for p normal in [0.5, 2): exact where the result is normal (in two steps: 2^m itself
// need not be a float), and from the bits where it is denormal, rounded to nearest even (lavapipe flushes denormal
// results of its arithmetic; MLAS's and Eigen's exps give them below -87.3)
float ldexp_exact(float p, int m) {
    uint bits = floatBitsToUint(p);
    int e = int((bits >> 23) & 0xffu) - 127 + m;
    if (e >= -126) return ldexp(ldexp(p, m / 2), m - m / 2);
    uint mant = (bits & 0x7fffffu) | 0x800000u;
    int shift = -126 - e;  // (the denormal's bits: the significand moved right)
    if (shift > 24) return 0.0;
    uint kept = mant >> uint(shift), rest = mant & ((1u << uint(shift)) - 1u), half_ulp = 1u << uint(shift - 1);
    if (rest > half_ulp || (rest == half_ulp && (kept & 1u) != 0u)) kept += 1u;
    return uintBitsToFloat(kept);  // (a carry into bit 23 is the smallest normal's bits: still right)
}

// log as the CPU EP's Log computes it, to the last bit: Eigen's plog for float (ORT's Eigen: a rational (3, 3)
// approximation of log(1 + x) on [sqrt(1/2) - 1, sqrt(2) - 1], plus the exponent times ln 2; every operation rounded,
// no multiply-add, as ORT's SSE build runs it). Within about an ulp everywhere, near 1 too, where lavapipe's log is
// 4e-8 off (6e-5 relative at 0.9994). frexp from the bits, denormals included (lavapipe flushes them); ±0 gives
// -inf, +inf itself, negatives and NaN NaN.
float log_eigen(float v) {
    uint bits = floatBitsToUint(v);
    if ((bits & 0x7fffffffu) == 0u) return -F_INF;
    if ((bits >> 31) != 0u || bits > 0x7f800000u) return F_NAN;
    if (bits == 0x7f800000u) return F_INF;
    uint field = bits >> 23, mant = bits & 0x7fffffu;
    int exponent = int(field) - 126;
    if (field == 0u) {  // a denormal: its significand normalised
        int top = findMSB(mant);
        mant = (mant << uint(23 - top)) & 0x7fffffu;
        exponent = top - 148;
    }
    precise float x = uintBitsToFloat(mant | 0x3f000000u);  // in [0.5, 1)
    precise float e = float(exponent);
    bool low = x < 0.707106781186547524;
    precise float tmp = low ? x : 0.0;
    x = x - 1.0;
    e = e - (low ? 1.0 : 0.0);
    x = x + tmp;
    precise float p = 0.18256296349849254 * x + 1.0000000190281063;
    p = p * x + 1.0000000190281136;
    p = x * p;
    precise float q = 0.049616247954120038 * x + 0.59923249590823520;
    q = q * x + 1.4999999999999927;
    q = q * x + 1.0;
    precise float r = p / q;
    return e * 0.693147180559945309 + r;
}

// exp as Eigen's float pexp computes it (the CPU EP's Elu, Selu and Celu: Eigen expressions; its Exp op is MLAS's,
// mlas_logistic.glsl), to the last bit: m = floor(x log2(e) + 1/2), r = x - m ln 2 in two parts, a degree-6
// polynomial in r and r^2, times 2^m (from the bits where that is denormal); each step rounded, no multiply-add
float exp_eigen(float v) {
    if (isnan(v)) return v;
    precise float x = min(v, 88.723);
    precise float m = floor(x * 1.44269504088896341 + 0.5);
    precise float r = m * -0.693359375 + x;
    r = m * 2.12194440e-4 + r;
    precise float r2 = r * r;
    precise float p_even = r2 * 1.37449637986719608306884765625e-3 + 4.166965186595916748046875e-2;
    precise float p_odd = r2 * 8.36894474923610687255859375e-3 + 0.16666518151760101318359375;
    p_even = p_even * r2 + 0.49999988079071044921875;
    precise float p_low = r + 1.0;
    precise float y = p_odd * r + p_even;
    y = y * r2 + p_low;
    return v < -104.0 ? 0.0 : max(ldexp_exact(y, int(m)), v);
}

// log2 of a positive finite x, denormals included (their logarithm from the bits: mantissa * 2^-149)
float log2_positive(float x) {
    uint bits = floatBitsToUint(x);
    return (bits & 0x7f800000u) == 0u ? log2(float(bits & 0x7fffffu)) - 149.0 : log2(x);
}

float pow_nonnegative(float x, float e) {
    if (e == 0.0 || x == 1.0) return 1.0;
    if (isnan(x) || isnan(e)) return F_NAN;
    if (x == 0.0) return e > 0.0 ? 0.0 : F_INF;
    if (isinf(x)) return e > 0.0 ? F_INF : 0.0;
    if (isinf(e)) return (x < 1.0) == (e < 0.0) ? F_INF : 0.0;
    return exp2(e * log2_positive(x));
}
