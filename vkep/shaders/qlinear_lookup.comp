#version 450
// com.microsoft QLinearConcat (OP 0), QLinearLeakyRelu (OP 1) and QLinearSigmoid (OP 2) over 8-bit tensors
// (SIGNED: int8, else uint8), computed per element as ORT's CPU EP computes its 256-entry lookup table
// (QlinearBuildLookupTable), so that values on a rounding boundary land where it puts them:
//   v = x_scale * float(x - x_zp); f = identity, (v >= 0 ? v : alpha * v) or MLAS's logistic;
//   y = round_half_even(clamp(f / y_scale, lo - y_zp, hi - y_zp)) + y_zp (MlasQuantizeLinear, NaN gives lo).
// The logistic is MlasLogisticKernelFma3's rational polynomial with its fused multiply-adds, emulated exactly
// (lavapipe does not fuse GLSL's fma()). One dispatch per input: the output is read as [outer, total, inner] and
// this input fills axis positions [base, base + len) (a unary op: one input of len = total = 1).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

#define WG 64  // (lavapipe runs a workgroup's dead lanes too: small tensors take narrow groups)
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint SIGNED = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, x_scale, x_zp, y_scale, y_zp, y;
    uint n, inner, len, total, base;
    float alpha;
    GROUP_BASE;
} pc;

// a * b + c rounded once (Boldo and Melquiond: the exact product's tail added rounded to odd, then one rounding)
precise float fma_exact(float a, float b, float c) {
    vec2 p = precise_two_prod(a, b);
    vec2 t = precise_two_sum(c, p.x);
    vec2 u = precise_two_sum(t.y, p.y);
    float v = u.x;
    uint bits = floatBitsToUint(v);
    if (u.y != 0.0 && (bits & 1u) == 0u) {  // inexact and even: step one ulp towards the lost part (round to odd)
        bits = (v < 0.0) == (u.y < 0.0) ? bits + 1u : bits - 1u;
        v = uintBitsToFloat(bits);
    }
    return t.x + v;
}

precise float logistic(float x) {
    x = isnan(x) ? x : clamp(x, -18.0, 18.0);
    float x2 = x * x;
    float p = fma_exact(x2, 4.37031012579801e-11, 1.15627324459942e-07);
    p = fma_exact(x2, p, 6.08574864600143e-05);
    p = fma_exact(x2, p, 8.51377133304701e-03);
    p = fma_exact(x2, p, 2.48287947061529e-01);
    float q = fma_exact(x2, 6.10247389755681e-13, 5.76102136993427e-09);
    q = fma_exact(x2, q, 6.29106785017040e-06);
    q = fma_exact(x2, q, 1.70198817374094e-03);
    q = fma_exact(x2, q, 1.16817656904453e-01);
    q = fma_exact(x2, q, 9.93151921023180e-01);
    float r = precise_div(x * p, q) + 0.5;
    return isnan(r) ? r : max(r, 0.0);  // vmaxps(0, r) passes NaN on
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    bool s = SIGNED != 0;
    int x_zp = rq_byte(PRESENT_OR(pc.x_zp, pc.x), 0, s), y_zp = rq_byte(PRESENT_OR(pc.y_zp, pc.x), 0, s);
    x_zp = pc.x_zp != 0 ? x_zp : 0;
    y_zp = pc.y_zp != 0 ? y_zp : 0;
    precise float v = RqFloats(pc.x_scale).v[0] * float(rq_byte(pc.x, i, s) - x_zp);
    if (OP == 1) {
        precise float leaky = pc.alpha * v;
        v = v >= 0.0 ? v : leaky;
    } else if (OP == 2) {
        v = logistic(v);
    }
    int lo = s ? -128 : 0, hi = s ? 127 : 255;
    float q = precise_div(v, RqFloats(pc.y_scale).v[0]);
    float qlo = float(lo - y_zp), qhi = float(hi - y_zp);
    q = isnan(q) ? qlo : min(max(q, qlo), qhi);
    uint chunk = pc.len * pc.inner, o = i / chunk;
    uint at = (o * pc.total + pc.base) * pc.inner + (i - o * chunk);
    RqBytes(pc.y).v[at] = uint8_t((int(roundEven(q)) + y_zp) & 0xff);
}
