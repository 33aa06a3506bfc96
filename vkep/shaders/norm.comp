#version 450
// Normalization. MODE 0: (x - mean) / sqrt(var + eps) per row (LayerNormalization, GroupNormalization,
// InstanceNormalization); MODE 1: x / sqrt(mean(x^2) + eps) per row (RMSNormalization); both use one
// workgroup per row of `len` contiguous elements. MODE 2: BatchNormalization in inference mode, one
// thread per element, with mean and var read from the `mean`/`inv` tensors per channel.
// Scale and bias (TensorY, the output type) are indexed by (g / div) % mod for the element at flat index g
// of X, which covers parameters broadcast over X, per-channel and per-group ones. A zero bias
// address means no bias; zero mean/inv addresses (MODE 0/1) mean those outputs are not wanted.
// A nonzero `skip` address (MODE 0/1, the com.microsoft skip norms) normalises x + skip (+ skip_bias) instead
// of x, summed in float32 as ORT's CPU EP does (skip indexed by g % skip_mod, skip_bias by g % len), and
// stores that sum at `sum` (the output type) where that address is nonzero.
// The workgroup size is specialization constant 1 (up to 1024: lavapipe ends a shader's loops after
// 65535 iterations in all, so long rows need wide workgroups).
// ORDER (specialization constant 2, MODE 0/1) is the order a row's statistics are summed in (vkep/kernels/norm.py):
// the workgroup's tree (0), or ORT 1.32's CPU EP's to the last bit: its scalar loop (1: the skip norms, and
// the LayerNormalization kernel where MLAS has no vector kernel), or MLAS's AVX2 kernel (2: the FLOAT64
// variant, which sums the mean in double as it does).
// X64 (specialization constant 3, FLOAT64 variant only): float64 tensors (X, Y, scale, bias, BatchNormalization's
// statistics; the Mean and InvStdDev outputs stay float), computed in double as ORT 1.32's CPU EP does
// (layer_norm_double, batch_norm_double).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 2) const uint ORDER = 0;
const uint ORDER_SCALAR = 1, ORDER_MLAS = 2;
layout(constant_id = 3) const uint X64 = 0;
layout(constant_id = 4) const uint SUMS = 0;  // (X64, MODE 0) the CPU EP's sums for broadcast scale or bias
layout(constant_id = 5) const uint PIECE = 32768;  // (X64, MODE 0) the elements one lane walks a dispatch

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer FloatTensor { float v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, scale, bias, y, mean, inv, skip, skip_bias, sum, state;  // (state, start: X64 MODE 0's pieces)
    uint rows, len, sdiv, smod, bdiv, bmod, skip_mod;
    float eps;
    uint start;
    GROUP_BASE;
} pc;

// element i of the rows to normalise: x, or x + skip (+ skip_bias)
float row_value(uint i) {
    float v = LOAD(Tensor(pc.x), i);
    float skip = LOAD(Tensor(PRESENT_OR(pc.skip, pc.x)), PRESENT_AT(pc.skip, i % pc.skip_mod));
    float skip_bias = LOAD(Tensor(PRESENT_OR(pc.skip_bias, pc.x)), PRESENT_AT(pc.skip_bias, i % pc.len));
    if (pc.skip != 0) {
        v += skip;
        if (pc.skip_bias != 0) v += skip_bias;
    }
    return v;
}

shared float partial[1024];

float group_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    float r = partial[0];
    barrier();
    return r;
}

// the scale and the bias of the element at flat index g (the bias read from a valid address either way: add it
// only where pc.bias is nonzero)
float scale_at(uint g) { return float(TensorY(pc.scale).v[(g / pc.sdiv) % pc.smod]); }
float bias_at(uint g) {
    return float(TensorY(PRESENT_OR(pc.bias, pc.scale)).v[PRESENT_AT(pc.bias, (g / pc.bdiv) % pc.bmod)]);
}

float affine(float v, uint g) {
    v *= scale_at(g);
    float bias = bias_at(g);
    if (pc.bias != 0) v += bias;
    return v;
}

#ifdef FLOAT64
// sqrt correctly rounded (Vulkan allows GLSL's some ulps): r moved to the float whose square's interval holds a,
// the midpoints' squares exact in double
float rounded_sqrt(float a) {
    float r = sqrt(a);
    if (!(a > 0.0) || isinf(a)) return r;
    for (uint k = 0; k < 2; ++k) {
        float up = uintBitsToFloat(floatBitsToUint(r) + 1u), down = uintBitsToFloat(floatBitsToUint(r) - 1u);
        double high = (double(r) + double(up)) * 0.5, low = (double(r) + double(down)) * 0.5;
        if (double(a) > high * high) r = up;
        else if (double(a) < low * low) r = down;
    }
    return r;
}

// a * b + c rounded once, as x86's vfmadd: the product is exact in double (rounding the double sum to float
// differs from one rounding only where it falls within 2^-53 of a float's midpoint)
precise float fused(float a, float b, float c) {
    return float(double(a) * double(b) + double(c));
}

shared double lanes_d[4];

// (mean, 1 / sqrt(var + eps)) of a row as MLAS's AVX2 LayerNorm kernel computes them (ORT 1.32's CPU EP on x86-64
// with AVX2 and FMA): the mean from four double lanes (element j in lane j % 4; (l0 + l2) + (l1 + l3)), the
// rest in order; the squared deviations from the float mean (MODE 1: the squares) fused into eight float
// lanes, halves added, then (r0 + r2) + (r1 + r3), and the last n % 8 as the compiler built the scalar tail: a
// group of four products rounded and added in order, the rest fused.
vec2 mlas_statistics(uint base) {
    uint t = gl_LocalInvocationID.x, n = pc.len;
    float mean = 0.0;
    if (MODE == 0) {
        uint n4 = n & ~3u;
        if (t < 4) {
            precise double s = 0.0;
            for (uint j = t; j < n4; j += 4) s += double(row_value(base + j));
            lanes_d[t] = s;
        }
        barrier();
        if (t == 0) {
            precise double s = (lanes_d[0] + lanes_d[2]) + (lanes_d[1] + lanes_d[3]);
            for (uint j = n4; j < n; ++j) s += double(row_value(base + j));
            partial[8] = float(s / double(n));
        }
        barrier();
        mean = partial[8];
    }
    uint n8 = n & ~7u;
    if (t < 8) {
        precise float s = 0.0;
        for (uint j = t; j < n8; j += 8) {
            precise float d = row_value(base + j) - mean;
            s = fused(d, d, s);
        }
        partial[t] = s;
    }
    barrier();
    if (t == 0) {
        precise float s = ((partial[0] + partial[4]) + (partial[2] + partial[6]))
                        + ((partial[1] + partial[5]) + (partial[3] + partial[7]));
        uint rounded_end = n8 + ((n - n8) & ~3u);
        for (uint j = n8; j < n; ++j) {
            precise float d = row_value(base + j) - mean;
            if (j < rounded_end) {
                precise float square = d * d;
                s += square;
            } else {
                s = fused(d, d, s);
            }
        }
        partial[9] = precise_div(1.0, rounded_sqrt(precise_div(s, float(n)) + pc.eps));
    }
    barrier();
    return vec2(mean, partial[9]);
}

// the scale and the bias (read from a valid address either way) of element g, float64 tensors
double scale_d(uint g) { return Doubles(pc.scale).v[(g / pc.sdiv) % pc.smod]; }
double bias_d(uint g) { return Doubles(PRESENT_OR(pc.bias, pc.scale)).v[PRESENT_AT(pc.bias, (g / pc.bdiv) % pc.bmod)]; }

shared double partial_d[2];

// MODE 0 of float64 tensors (X64): the row's mean and sqrt(var + eps) as the CPU EP's LayerNormalization<double>,
// one lane walking the row in order: where scale and bias have the row's size its Welford loop (d = x - mean;
// mean += d / k; M2 += d * (x - mean); var = M2 / n), where they broadcast otherwise (SUMS) its sums
// (var = sum(x^2) / n - mean^2). A row past one lane's loop budget is walked in pieces of PIECE elements from
// `start`, a dispatch each, the running pair kept at `state` (two doubles a row) between them; the last piece
// writes y = (x - mean) / root * scale (+ bias; the sums' path adds +0 for an absent one, making -0 +0).
void layer_norm_double(uint row) {
    uint t = gl_LocalInvocationID.x, base = row * pc.len, end = min(pc.start + PIECE, pc.len);
    double n = double(pc.len);
    if (t == 0) {
        // (the running mean and M2, or the sums of x and x^2: zeros, or the last piece's, read outside any test of
        // the state's address, as common.glsl's PRESENT_OR says)
        double a0 = Doubles(PRESENT_OR(pc.state, pc.x)).v[PRESENT_AT(pc.state, 2 * row)];
        double b0 = Doubles(PRESENT_OR(pc.state, pc.x)).v[PRESENT_AT(pc.state, 2 * row + 1)];
        precise double a = pc.start != 0 ? a0 : 0.0LF, b = pc.start != 0 ? b0 : 0.0LF;
        for (uint j = pc.start; j < end; ++j) {
            double v = Doubles(pc.x).v[base + j];
            if (SUMS != 0) {
                a += v;
                b += v * v;
            } else {
                precise double d = v - a;
                a += d / double(j + 1);
                b += d * (v - a);
            }
        }
        if (end < pc.len) {
            Doubles(pc.state).v[2 * row] = a;
            Doubles(pc.state).v[2 * row + 1] = b;
        }
        partial_d[0] = a;
        partial_d[1] = b;
    }
    if (end < pc.len) return;  // (uniform: the next piece goes on)
    barrier();
    precise double mean = partial_d[0], m2 = partial_d[1], var;
    if (SUMS != 0) {
        mean = mean / n;
        var = m2 / n - mean * mean;
    } else {
        var = m2 / n;
    }
    precise double root = sqrt(var + double(pc.eps));
    for (uint j = t; j < pc.len; j += WG) {
        double bias = bias_d(base + j);
        precise double value = (Doubles(pc.x).v[base + j] - mean) / root * scale_d(base + j);
        if (pc.bias != 0 || SUMS != 0) value += pc.bias != 0 ? bias : 0.0LF;  // (the sums' path adds a 0 bias: -0 + 0)
        Doubles(pc.y).v[base + j] = value;
    }
    precise double inv = 1.0LF / root;
    if (t == 0 && pc.mean != 0) FloatTensor(pc.mean).v[row] = float(mean);
    if (t == 0 && pc.inv != 0) FloatTensor(pc.inv).v[row] = float(inv);
}

// MODE 2 of float64 tensors (X64), element i of channel c: the CPU EP's BatchNormalization<double>
void batch_norm_double(uint i, uint c) {
    precise double inv = 1.0LF / sqrt(Doubles(pc.inv).v[c] + double(pc.eps));
    precise double scale = inv * Doubles(pc.scale).v[c];
    precise double bias = Doubles(pc.bias).v[c] - Doubles(pc.mean).v[c] * scale;
    precise double y = Doubles(pc.x).v[i] * scale + bias;
    Doubles(pc.y).v[i] = y;
}
#else
#define rounded_sqrt sqrt
#endif

void main() {
    Tensor X = Tensor(pc.x);
    TensorY Y = TensorY(pc.y);
    if (MODE == 2) {
        uint i = FLAT_ID(WG);
        if (i >= pc.rows * pc.len) return;
        uint c = (i / pc.sdiv) % pc.smod;
#ifdef FLOAT64
        if (X64 != 0) {
            batch_norm_double(i, c);
            return;
        }
#endif
        float inv = inversesqrt(float(TensorY(pc.inv).v[c]) + pc.eps);
        float v = (LOAD(X, i) - float(TensorY(pc.mean).v[c])) * inv;
        STORE_Y(Y, i, affine(v, i));
        return;
    }
    uint row = FLAT_GROUP;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint base = row * pc.len;
#ifdef FLOAT64
    if (X64 != 0) {
        layer_norm_double(row);
        return;
    }
    if (ORDER == ORDER_MLAS) {
        vec2 stats = mlas_statistics(base);
        float mean = stats.x, inv = stats.y;
        for (uint j = t; j < pc.len; j += WG) {
            precise float v = (row_value(base + j) - mean) * inv;
            float gamma = scale_at(base + j), bias = bias_at(base + j);
            precise float scaled = v * gamma;
            STORE_Y(Y, base + j, pc.bias != 0 ? fused(v, gamma, bias) : scaled);
        }
        if (t == 0 && pc.mean != 0) FloatTensor(pc.mean).v[row] = mean;
        if (t == 0 && pc.inv != 0) FloatTensor(pc.inv).v[row] = inv;
        return;
    }
#endif
    if (ORDER == ORDER_SCALAR) {
        // ORT's scalar loop (skip_layer_norm.cc, and layer_norm_impl.cc's where MLAS has no kernel): one lane
        // walks the row in order. MODE 1 sums s * s: root = sqrt(E[s^2] + eps), mean 0. MODE 0 keeps Welford's
        // running mean and M2 (d = s - mean; mean += d / k; M2 += d * (s - mean)): root = sqrt(M2 / len + eps).
        // Each output is (s - mean) / root * gamma (+ beta), divided, not multiplied by an inverse.
        if (t == 0) {
            precise float mean = 0.0, m2 = 0.0;
            for (uint j = 0; j < pc.len; ++j) {
                float v = row_value(base + j);
                if (MODE == 1) {
                    m2 += v * v;
                } else {
                    precise float d = v - mean;
                    mean += precise_div(d, float(j + 1));
                    m2 += d * (v - mean);
                }
            }
            partial[0] = mean;
            partial[1] = rounded_sqrt(precise_div(m2, float(pc.len)) + pc.eps);
        }
        barrier();
        float mean = partial[0], root = partial[1];
        for (uint j = t; j < pc.len; j += WG) {
            float v = row_value(base + j);
            if (pc.sum != 0) STORE_Y(TensorY(pc.sum), base + j, v);
            float bias = bias_at(base + j);
            precise float value = precise_div(v - mean, root) * scale_at(base + j);
            if (pc.bias != 0) value += bias;
            STORE_Y(Y, base + j, value);
        }
        if (t == 0 && pc.mean != 0) FloatTensor(pc.mean).v[row] = mean;
        if (t == 0 && pc.inv != 0) FloatTensor(pc.inv).v[row] = precise_div(1.0, root);
        return;
    }
    float mean = 0.0;
    if (MODE == 0) {
        float s = 0.0;
        for (uint j = t; j < pc.len; j += WG) s += row_value(base + j);
        mean = group_sum(s) / float(pc.len);
    }
    float s2 = 0.0;
    for (uint j = t; j < pc.len; j += WG) {
        float d = row_value(base + j) - mean;
        s2 += d * d;
    }
    float inv = inversesqrt(group_sum(s2) / float(pc.len) + pc.eps);
    for (uint j = t; j < pc.len; j += WG) {
        float v = row_value(base + j);
        if (pc.sum != 0) STORE_Y(TensorY(pc.sum), base + j, v);
        STORE_Y(Y, base + j, affine((v - mean) * inv, base + j));
    }
    if (t == 0 && pc.mean != 0) FloatTensor(pc.mean).v[row] = mean;
    if (t == 0 && pc.inv != 0) FloatTensor(pc.inv).v[row] = inv;
}
