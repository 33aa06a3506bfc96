#version 450
// Integer products through float32 GEMMs (vkep/kernels/integer_float.py): lavapipe multiplies
// and adds float32 several times faster than int32, and a float32 sum of integer products is exact while every
// partial sum stays below 2^24. MODE 0 widens 8-bit values less their zero point to float32:
//   y[i] = x[i] - zp[(i / zp_div) % zp_mod]          (zp address 0: no zero point)
// MODE 1 adds the float32 partial products of K's slices (each exact: a slice is short enough) as int32:
//   y[i] = sum over s of int(partials[s * count + i])
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint SIGNED = 0;  // MODE 0: int8 x (and zero point), else uint8

layout(push_constant, scalar) uniform Push {
    uint64_t x, zp, y;
    uint count;            // elements of y (MODE 1: of one slice)
    uint zp_div, zp_mod;   // MODE 0: the zero point of element i
    uint slices;           // MODE 1
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
    int sum = 0;
    for (uint s = 0; s < pc.slices; ++s) sum += int(Floats(pc.x).v[s * pc.count + i]);
    Ints(pc.y).v[i] = sum;
}
