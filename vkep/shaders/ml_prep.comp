#version 450
// ai.onnx.ml preprocessing as ORT's CPU EP computes it (vkep/kernels/ml_prep.py, docs/design.md "ai.onnx.ml
// preprocessing"): every value in the type and order of ORT's loops, each operation `precise` (no fma) and every
// quotient and root correctly rounded (precise.glsl), so the outputs are the CPU EP's bit for bit.
//   MODE 0 Scaler:            y[i] = float((x[i] - offset[f]) * scale[f]), f = i % stride (or 0)
//   MODE 1 Binarizer:         y[i] = x[i] > threshold ? 1 : 0; a NaN fails the run (the error word)
//   MODE 2 Imputer:           y[i] = imputed[f] where x[i] is the replaced value (NaN: any NaN), else x[i]
//   MODE 3 Normalizer's norms: one invocation a row of `stride` elements adds a run of its columns (NORM 0 MAX, 1 L1,
//                             2 L2); MODE 7 divides each element by its row's norm
//   MODE 4 FeatureVectorizer: one input's rows copied into columns [offset, offset + width) of rows of `total`
//                             floats: its first min(stride, width) values of each of its `rows` rows, zeros after
//   MODE 5 LabelEncoder:      y[i] = values[k] for the first key k equal to x[i] (a NaN key matches a NaN where
//                             flags has NAN_MATCHES), else the default (value, or replaced_int for int64 values)
//   MODE 6 OneHotEncoder:     y[i, c] = 1 for the last category c equal to int64(x[i]), else 0; none found with
//                             flags 0 (zeros=0) fails the run (the error word)
// DTYPE is the input's type (float32, int32, int64); the FLOAT64 variant reads a float64 input (DTYPE 3 storage) as
// double. The output is float32 (Scaler, Normalizer, FeatureVectorizer) or the input's type (Binarizer, Imputer).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint NORM = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Ints64 { int64_t v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, y, table, err;  // table: Scaler's offsets then scales, Imputer's values; err: the error word
    int64_t replaced_int;       // Imputer of int64
    uint n, stride, per_feature, scales, rows, width, total, offset;
    uint keys, values_at, flags;  // LabelEncoder's keys (table) and their values (table + values_at bytes), OneHot's
    float value;                // Binarizer's threshold, Imputer's replaced float, LabelEncoder's float default
    GROUP_BASE;
} pc;

#if defined(FLOAT64)
#define XV(i) Doubles(pc.x).v[i]
#elif IS_FLOAT
#define XV(i) Tensor(pc.x).v[i]
#else
#define XV(i) LOAD(Tensor(pc.x), i)
#endif
#define NAN_MATCHES 1u

// Float32 denormals: drivers may flush them in arithmetic, comparisons and conversions (Mesa 26's lavapipe does;
// Vulkan's DenormPreserve is optional, and it lacks it). Comparisons go through fkey and fnan (integers ordered as
// the floats, +0 and -0 equal), and doubles become floats through to_float, so these steps keep them.
int fkey(float f) {
    int i = floatBitsToInt(f);
    return i >= 0 ? i : -(i & 0x7fffffff);
}
bool fnan(float f) {
    return (floatBitsToUint(f) & 0x7fffffffu) > 0x7f800000u;
}

#ifdef FLOAT64
// d rounded to float (to nearest even), a result in float's denormal range too: its bits are |d| * 2^149 rounded
float to_float(double d) {
    double a = abs(d);
    if (!(a < packDouble2x32(uvec2(0u, 0x38100000u))) || a == 0.0LF) return float(d);  // 2^-126 and up, 0, NaN
    uint m = uint(roundEven(a * packDouble2x32(uvec2(0u, 0x49400000u))));  // (2^149; 2^23 is the least normal)
    return uintBitsToFloat(m | (d < 0.0LF ? 0x80000000u : 0u));
}
#endif

// x[i] as ORT's static_cast<float>
float x_float(uint i) {
#ifdef FLOAT64
    return to_float(XV(i));
#else
    return float(XV(i));
#endif
}

// The correctly rounded a / b (Vulkan allows '/' 2.5 ulp): for finite normal operands, precise_div of their
// mantissas in [1, 2) (exact residuals, no overflow) scaled back by the exponents where the quotient is normal; the
// rest (zeros, infinities, NaN, denormals, quotients out of the normal range) as '/' gives them.
precise float exact_div(float a, float b) {
    float q = a / b;
    uint ea = (floatBitsToUint(a) >> 23) & 0xffu, eb = (floatBitsToUint(b) >> 23) & 0xffu;
    if (ea == 0u || ea == 255u || eb == 0u || eb == 255u) return q;
    int e = int(ea) - int(eb);
    float ma = uintBitsToFloat((floatBitsToUint(a) & 0x807fffffu) | 0x3f800000u);
    float mb = uintBitsToFloat((floatBitsToUint(b) & 0x807fffffu) | 0x3f800000u);
    float m = precise_div(ma, mb);  // in (0.5, 2)
    int em = int((floatBitsToUint(m) >> 23) & 0xffu) + e;
    if (em <= 0 || em >= 255) return q;
    return uintBitsToFloat((floatBitsToUint(m) & 0x807fffffu) | (uint(em) << 23));
}

// the correctly rounded square root of a (Vulkan allows sqrt an error): of sqrt's result and its two neighbours, the
// one whose square is nearest a (exact residuals: precise_two_prod), for a in [2^-100, 2^100]; else sqrt's
precise float exact_sqrt(float a) {
    float r = sqrt(a);
    if (!(a >= 7.888609e-31 && a <= 1.2676506e30)) return r;
    float best = r, best_err = F_INF;
    for (int k = -1; k <= 1; ++k) {
        float c = uintBitsToFloat(uint(int(floatBitsToUint(r)) + k));
        vec2 p = precise_two_prod(c, c);
        float e = abs((a - p.x) - p.y);
        if (e < best_err) {
            best = c;
            best_err = e;
        }
    }
    return best;
}

precise float scaled(uint i, uint f) {
    float offset = Floats(pc.table).v[f], scale = Floats(pc.table).v[pc.scales + f];
#ifdef FLOAT64
    return to_float((XV(i) - double(offset)) * double(scale));  // (double - float) * float in double, then float
#else
    return (x_float(i) - offset) * scale;  // integers: converted to float first, as C++ does
#endif
}

// x[i]^2 and |x[i]| in the input's type (integers wrap), as float
#ifdef FLOAT64
#define SQUARE(i) to_float(XV(i) * XV(i))
#define ABS(i) to_float(abs(XV(i)))
#define NEGATIVE(i) (XV(i) < 0.0LF)
#elif IS_FLOAT
#define SQUARE(i) float(XV(i) * XV(i))
#define ABS(i) float(abs(XV(i)))
#define NEGATIVE(i) (fkey(XV(i)) < 0)
#else
#define SQUARE(i) float(XV(i) * XV(i))
#define ABS(i) float(abs(XV(i)))
#define NEGATIVE(i) (XV(i) < 0)
#endif

// Normalizer's norm of a row, columns [offset, offset + width) of its `stride`, added in order to the row's partial
// norm in the table (flags 1: the first columns, from MAX's lowest float or 0): one pass per run of columns keeps each
// invocation's loop within lavapipe's budget, and the sum in ORT's order
void normalize_sum(uint row) {
    uint first = row * pc.stride + pc.offset, end = first + pc.width;
    precise float total = pc.flags != 0u ? (NORM == 0 ? uintBitsToFloat(0xff7fffffu) : 0.0) : Floats(pc.table).v[row];
    for (uint i = first; i < end; ++i) {
        if (NORM == 0) {
            float v = x_float(i);
            if (!fnan(v) && fkey(total) < fkey(v)) total = v;  // std::max: a NaN is never taken
        } else if (NORM == 1) {
            total += ABS(i);
        } else {
            float sq = SQUARE(i);  // the square in the input's type (integers wrap)
            total += sq;
        }
    }
    Floats(pc.table).v[row] = total;
}

// element i divided by its row's norm (a norm of 0: copied)
void normalize_out(uint i) {
    float total = Floats(pc.table).v[i / pc.stride], v = x_float(i);
    TensorY y = TensorY(pc.y);
    if (fkey(total) == 0) {
        STORE_Y(y, i, v);
    } else if (NORM == 2) {
        float r = exact_sqrt(exact_div(SQUARE(i), total));
        STORE_Y(y, i, NEGATIVE(i) ? -r : r);
    } else {
        STORE_Y(y, i, exact_div(v, total));
    }
}

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    TensorY y = TensorY(pc.y);
    uint f = pc.per_feature != 0 ? i % pc.stride : 0u;
    if (MODE == 0) {
        STORE_Y(y, i, scaled(i, f));
    } else if (MODE == 1) {
        float v = x_float(i);
        if (fnan(v)) report_index_error(pc.err);
        STORE_Y(y, i, !fnan(v) && !fnan(pc.value) && fkey(v) > fkey(pc.value) ? 1.0 : 0.0);
    } else if (MODE == 2) {
#if DTYPE == 3 && !defined(FLOAT64)
        int64_t v = XV(i);
        STORE_Y(y, i, v == pc.replaced_int ? Ints64(pc.table).v[f] : v);
#else
        float v = float(XV(i));
        bool hit = fnan(v) ? fnan(pc.value) : !fnan(pc.value) && fkey(v) == fkey(pc.value);
        STORE_Y(y, i, hit ? Floats(pc.table).v[f] : v);
#endif
    } else if (MODE == 3) {
        normalize_sum(i);
    } else if (MODE == 7) {
        normalize_out(i);
    } else if (MODE == 5) {
        uint found = pc.keys;
#if IS_FLOAT && !defined(FLOAT64)
        float v = XV(i);
        bool nan = fnan(v);
        for (uint k = 0; k < pc.keys; ++k) {
            float key = Floats(pc.table).v[k];
            if (nan ? (pc.flags & NAN_MATCHES) != 0u && fnan(key) : !fnan(key) && fkey(key) == fkey(v)) {
                found = k;
                break;
            }
        }
#else
        int64_t v = int64_t(XV(i));
        for (uint k = 0; k < pc.keys; ++k) {
            if (Ints64(pc.table).v[k] == v) {
                found = k;
                break;
            }
        }
#endif
#if DTYPE_Y == 3
        STORE_Y(y, i, found < pc.keys ? Ints64(pc.table + pc.values_at).v[found] : pc.replaced_int);
#else
        STORE_Y(y, i, found < pc.keys ? Floats(pc.table + pc.values_at).v[found] : pc.value);
#endif
    } else if (MODE == 6) {
#if IS_FLOAT || defined(FLOAT64)
        // static_cast<int64_t> on x86-64: truncation; NaN and values out of range give the int64 minimum
        bool ok = XV(i) >= -9223372036854775808.0 && XV(i) < 9223372036854775808.0;
        int64_t key = ok ? int64_t(XV(i)) : (-9223372036854775807L - 1L);
#else
        int64_t key = int64_t(XV(i));
#endif
        uint found = pc.keys;
        for (uint k = pc.keys; k > 0u; --k) {  // (ORT's map keeps a repeated category's last index)
            if (Ints64(pc.table).v[k - 1u] == key) {
                found = k - 1u;
                break;
            }
        }
        if (found == pc.keys && pc.flags == 0u) report_index_error(pc.err);
        for (uint c = 0; c < pc.keys; ++c) STORE_Y(y, i * pc.keys + c, c == found ? 1.0 : 0.0);
    } else {
        uint row = i / pc.width, col = i % pc.width;
        float v = row < pc.rows && col < min(pc.stride, pc.width) ? x_float(row * pc.stride + col) : 0.0;
        STORE_Y(y, row * pc.total + pc.offset + col, v);
    }
}
