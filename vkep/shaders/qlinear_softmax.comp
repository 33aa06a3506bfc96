#version 450
// com.microsoft QLinearSoftmax over 8-bit tensors (SIGNED: int8, else uint8) as ORT's CPU EP computes it
// (qlinear_softmax.cc): one invocation walks one softmax row three times: its largest x; vsum, the sum in
// order of e(x) = table[255 - (max - x)] (the kernel's 256 floats: exp((i - 255 + shift) * x_scale) in double,
// rounded to float, built on the host); y = round_half_even(e(x) * (ys / vsum)) + y_zp saturated to the type
// (ys = floor(1 / y_scale)). X's zero point shifts every x alike: the CPU EP does not read it. Row r of the [outer, len, inner] input starts at
// (r / inner) * len * inner + r % inner; its elements are inner apart.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint SIGNED = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, table, y_scale, y_zp, y;
    uint rows, len, inner;
    GROUP_BASE;
} pc;

// a / b correctly rounded, for the table's large values (up to ~1e38): both are first scaled by b's power of
// two (exact), so that precise_div's Dekker products cannot overflow
float quotient(float a, float b) {
    int e;
    frexp(b, e);
    return precise_div(ldexp(a, -e), ldexp(b, -e));
}

void main() {
    uint row = FLAT_ID(WG);
    if (row >= pc.rows) return;
    bool s = SIGNED != 0;
    uint o = row / pc.inner, first = o * pc.len * pc.inner + (row - o * pc.inner);
    int top = -128;
    for (uint k = 0; k < pc.len; ++k) top = max(top, rq_byte(pc.x, first + k * pc.inner, s));
    RqFloats table = RqFloats(pc.table);
    precise float vsum = 0.0;
    for (uint k = 0; k < pc.len; ++k) vsum += table.v[255 - (top - rq_byte(pc.x, first + k * pc.inner, s))];
    float ys = floor(precise_div(1.0, RqFloats(pc.y_scale).v[0]));
    int y_zp = rq_byte(PRESENT_OR(pc.y_zp, pc.x), 0, s);
    y_zp = pc.y_zp != 0 ? y_zp : 0;
    // (the row's scale ys / vsum first, then each e(x) times it: the CPU EP's rounding, 1,216 of 1,216 rows and ties
    // where e(x) * ys / vsum left 1 in 30 of its ties apart)
    float row_scale = quotient(ys, vsum);
    for (uint k = 0; k < pc.len; ++k) {
        uint at = first + k * pc.inner;
        float e_x = table.v[255 - (top - rq_byte(pc.x, at, s))];
        precise float ratio = e_x * row_scale;
        int q = int(roundEven(ratio)) + y_zp;
        RqBytes(pc.y).v[at] = uint8_t(clamp(q, s ? -128 : 0, s ? 127 : 255) & 0xff);
    }
}
