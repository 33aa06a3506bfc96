#version 450
// Softmax along one axis. The tensor is read as [outer, axis, inner]; one workgroup per (outer, inner)
// row reduces max and sum in shared memory. MODE=1 gives LogSoftmax, MODE=2 Hardmax (1 at the first
// maximum, 0 elsewhere). The workgroup size is specialization constant 1 (wide for long rows: lavapipe
// ends a shader's loops after 65535 iterations in all).
// ORDER 1 (Softmax, float32): as ORT's CPU EP computes it on x86-64 with AVX2 and FMA, to the last bit (MLAS's
// MlasComputeSoftmax): the row's max; each exp(x - max) by MlasComputeSumExpF32KernelFma3's range reduction and
// polynomial (mlas_exp); their sum in eight lanes (element k in lane k % 8, in order: a workgroup of 8 here, one
// invocation a lane), then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); y = exp * (1 / sum). Its multiply-adds
// exact on any device (precise.glsl's fma_exact).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint MODE = 0;  // 0 softmax, 1 log-softmax, 2 hardmax
layout(constant_id = 2) const uint ORDER = 0;  // 0 the workgroup's tree, 1 MLAS's (MODE 0, a workgroup of 8)

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint rows, axis_len, inner;
    GROUP_BASE;
} pc;

shared float partial[1024];
shared uint first_max[1024];

// MLAS's exp(v + neg_max) in a softmax's sum (MlasExpConstants; products and sums as its vfmadd and vaddps)
float mlas_exp(float v, float neg_max) {
    precise float x = v + neg_max;
    float lower = uintBitsToFloat(0xc2b0c0a5u);  // LowerRangeSumExp, -88.376...
    x = lower > x ? lower : x;
    float bias = uintBitsToFloat(0x4b400000u);  // RoundingBias, 1.5 * 2^23
    float t = fma_exact(uintBitsToFloat(0x3fb8aa3bu), x, bias);  // x / ln 2 plus the bias
    precise float m = t - bias;  // round(x / ln 2)
    x = fma_exact(m, uintBitsToFloat(0xbf317200u), x);  // x - m ln2_high
    x = fma_exact(m, uintBitsToFloat(0xb5bfbe8eu), x);  // x - m ln2_low
    float p = fma_exact(uintBitsToFloat(0x3ab4a000u), x, uintBitsToFloat(0x3c092f6eu));
    p = fma_exact(p, x, uintBitsToFloat(0x3d2aadadu));
    p = fma_exact(p, x, uintBitsToFloat(0x3e2aaa28u));
    p = fma_exact(p, x, uintBitsToFloat(0x3efffffbu));
    p = fma_exact(p, x, 1.0);
    p = fma_exact(p, x, 1.0);
    precise float e = p * intBitsToFloat((floatBitsToInt(t) << 23) + 0x3f800000);  // times 2^m
    return e;
}

void main() {
    uint row = FLAT_GROUP;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint base = (row / pc.inner) * pc.axis_len * pc.inner + row % pc.inner;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);

    float m = uintBitsToFloat(0xff800000u);  // -inf
    for (uint k = t; k < pc.axis_len; k += WG) m = max(m, LOAD(X, base + k * pc.inner));
    partial[t] = m;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] = max(partial[t], partial[t + s]);
        barrier();
    }
    m = partial[0];
    barrier();

    if (MODE == 2) {
        uint first = 0xffffffffu;
        for (uint k = t; k < pc.axis_len && first == 0xffffffffu; k += WG)
            if (LOAD(X, base + k * pc.inner) == m) first = k;
        first_max[t] = first;
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (t < s) first_max[t] = min(first_max[t], first_max[t + s]);
            barrier();
        }
        first = first_max[0];
        for (uint k = t; k < pc.axis_len; k += WG) STORE(Y, base + k * pc.inner, k == first ? 1.0 : 0.0);
        return;
    }

    if (ORDER == 1) {  // (WG = 8: invocation t is MLAS's lane t)
        precise float lane = 0.0;
        for (uint k = t; k < pc.axis_len; k += WG) {  // (the exps kept in y, as MLAS keeps them in its output)
            float e = mlas_exp(LOAD(X, base + k * pc.inner), -m);
            STORE(Y, base + k * pc.inner, e);
            lane = lane + e;
        }
        partial[t] = lane;
        barrier();
        precise float sum8 = ((partial[0] + partial[1]) + (partial[2] + partial[3]))
                           + ((partial[4] + partial[5]) + (partial[6] + partial[7]));
        precise float scale = precise_div(1.0, sum8);
        for (uint k = t; k < pc.axis_len; k += WG) {  // (this invocation's own stores)
            precise float y = LOAD(Y, base + k * pc.inner) * scale;
            STORE(Y, base + k * pc.inner, y);
        }
        return;
    }

    float sum = 0.0;
    for (uint k = t; k < pc.axis_len; k += WG) sum += exp(LOAD(X, base + k * pc.inner) - m);
    partial[t] = sum;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    sum = partial[0];

    for (uint k = t; k < pc.axis_len; k += WG) {
        float v = LOAD(X, base + k * pc.inner) - m;
        STORE(Y, base + k * pc.inner, MODE == 1 ? v - log(sum) : exp(v) / sum);
    }
}
