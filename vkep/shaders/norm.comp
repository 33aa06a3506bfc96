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
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"

#define WG gl_WorkGroupSize.x
// rows up to this long take SkipSimplifiedLayerNormalization's serial sum (one lane, within lavapipe's loop budget)
const uint SKIP_SERIAL_MAX = 32768;
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint MODE = 0;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer FloatTensor { float v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, scale, bias, y, mean, inv, skip, skip_bias, sum;
    uint rows, len, sdiv, smod, bdiv, bmod, skip_mod;
    float eps;
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

float affine(float v, uint g) {
    v *= float(TensorY(pc.scale).v[(g / pc.sdiv) % pc.smod]);
    float bias = float(TensorY(PRESENT_OR(pc.bias, pc.scale)).v[PRESENT_AT(pc.bias, (g / pc.bdiv) % pc.bmod)]);
    if (pc.bias != 0) v += bias;
    return v;
}

void main() {
    Tensor X = Tensor(pc.x);
    TensorY Y = TensorY(pc.y);
    if (MODE == 2) {
        uint i = FLAT_ID(WG);
        if (i >= pc.rows * pc.len) return;
        uint c = (i / pc.sdiv) % pc.smod;
        float inv = inversesqrt(float(TensorY(pc.inv).v[c]) + pc.eps);
        float v = (LOAD(X, i) - float(TensorY(pc.mean).v[c])) * inv;
        STORE_Y(Y, i, affine(v, i));
        return;
    }
    uint row = FLAT_GROUP;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint base = row * pc.len;
    if (MODE == 1 && pc.skip != 0 && pc.len <= SKIP_SERIAL_MAX) {
        // com.microsoft SkipSimplifiedLayerNormalization as ORT's CPU EP computes it (skip_layer_norm.cc), to
        // the last bit: one lane sums s * s over the row in order; sqrt(E[s^2] + eps); each output s / that *
        // gamma, divided, not multiplied by an inverse. (SkipLayerNormalization's mean and variance the CPU EP
        // does not compute that way in ORT 1.32: its outputs are 3-6 ulps from the exact ones and from this
        // order's alike, so it keeps the workgroup's sums below.)
        if (t == 0) {
            precise float squares = 0.0;
            for (uint j = 0; j < pc.len; ++j) {
                float v = row_value(base + j);
                squares += v * v;
            }
            partial[0] = sqrt(precise_div(squares, float(pc.len)) + pc.eps);
        }
        barrier();
        float root = partial[0];
        for (uint j = t; j < pc.len; j += WG) {
            float v = row_value(base + j);
            if (pc.sum != 0) STORE_Y(TensorY(pc.sum), base + j, v);
            float bias = float(TensorY(PRESENT_OR(pc.bias, pc.scale)).v[PRESENT_AT(pc.bias, ((base + j) / pc.bdiv) % pc.bmod)]);
            precise float value = precise_div(v, root) * float(TensorY(pc.scale).v[((base + j) / pc.sdiv) % pc.smod]);
            if (pc.bias != 0) value += bias;
            STORE_Y(Y, base + j, value);
        }
        if (t == 0 && pc.mean != 0) FloatTensor(pc.mean).v[row] = 0.0;  // (no mean: RMS)
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
