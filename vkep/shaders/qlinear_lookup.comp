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
#include "mlas_logistic.glsl"

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
        v = mlas_logistic(v);
    }
    int lo = s ? -128 : 0, hi = s ? 127 : 255;
    float q = precise_div(v, RqFloats(pc.y_scale).v[0]);
    float qlo = float(lo - y_zp), qhi = float(hi - y_zp);
    q = isnan(q) ? qlo : min(max(q, qlo), qhi);
    uint chunk = pc.len * pc.inner, o = i / chunk;
    uint at = (o * pc.total + pc.base) * pc.inner + (i - o * chunk);
    RqBytes(pc.y).v[at] = uint8_t((int(roundEven(q)) + y_zp) & 0xff);
}
