#version 450
// Integer products through float32 GEMMs (vkep/kernels/integer_float.py): lavapipe multiplies
// and adds float32 several times faster than int32, and a float32 sum of integer products is exact while every
// partial sum stays below 2^24. MODE 0 widens 8-bit values less their zero point to float32:
//   y[i] = x[i] - zp[(i / zp_div) % zp_mod]          (zp address 0: no zero point)
// MODE 1 adds the float32 partial products of K's slices (each exact: a slice is short enough) as int32:
//   y[i] = sum over s of int(partials[s * count + i])
// MODE 2 requantizes QLinearConv's int32 accumulators [N, M, pixels] to 8 bits as conv_integer.comp does
// (requantize.glsl): y[i] = requantize(x[i] + bias[m], x_scale * w_scale[m] / y_scale, zp), m = (i / zp_div) % zp_mod
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint SIGNED = 0;  // MODE 0: int8 x (and zero point), else uint8; MODE 2: int8 y

layout(push_constant, scalar) uniform Push {
    uint64_t x, zp, y;
    uint64_t bias, xs, ws, ys;  // MODE 2: the bias (or 0), X's, W's and Y's scales
    uint count;            // elements of y (MODE 1: of one slice)
    uint zp_div, zp_mod;   // MODE 0: the zero point of element i; MODE 2: its output channel
    uint slices;           // MODE 1; MODE 2: W's scale per output channel (1) or per tensor (0)
    GROUP_BASE;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Ints { int v[]; };

void main() {
    uint i = FLAT_ID(256);
    if (i >= pc.count) return;
    if (MODE == 0) {
        bool s = SIGNED != 0;
        int zp = rq_byte(PRESENT_OR(pc.zp, pc.x), PRESENT_AT(pc.zp, (i / pc.zp_div) % pc.zp_mod), s);
        Floats(pc.y).v[i] = float(rq_byte(pc.x, i, s) - (pc.zp != 0 ? zp : 0));
        return;
    }
    if (MODE == 2) {
        uint m = (i / pc.zp_div) % pc.zp_mod;
        int bias = pc.bias != 0 ? Ints(PRESENT_OR(pc.bias, pc.x)).v[PRESENT_AT(pc.bias, m)] : 0;
        float mult = rq_multiplier(RqFloats(pc.xs).v[0], RqFloats(pc.ws).v[pc.slices != 0 ? m : 0u],
                                   RqFloats(pc.ys).v[0]);
        int zp = pc.zp != 0 ? rq_byte(PRESENT_OR(pc.zp, pc.x), 0, SIGNED != 0) : 0;
        RqBytes(pc.y).v[i] = uint8_t(requantize(Ints(pc.x).v[i] + bias, mult, zp, SIGNED != 0) & 0xff);
        return;
    }
    int sum = 0;
    for (uint s = 0; s < pc.slices; ++s) sum += int(Floats(pc.x).v[s * pc.count + i]);
    Ints(pc.y).v[i] = sum;
}
