// unary.comp's FLOAT64 variant: Neg and Abs of float64, Cast between float64 and float32 (the manifest lists
// float64 for those alone; elementwise.Cast declines other pairs). F64 says which side is float64.
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#include "common.glsl"
#include "activation.glsl"
#include "unary_ops.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint BOOL_OUT = 0;  // (unary.comp's: unused here)
layout(constant_id = 2) const uint WIDE = 0;  // 0: one element a lane; else the elements a workgroup covers (common.glsl)
layout(constant_id = 3) const uint F64 = 3;  // 1: float64 in, float32 out; 2: float32 in, float64 out; 3: both float64

layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Doubles { double v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint64_t lo, hi;
    uint n;
    float alpha, beta;
    GROUP_BASE;
} pc;

void one(uint i) {
    double v = F64 == 2 ? double(Floats(pc.x).v[i]) : Doubles(pc.x).v[i];
    double r = OP == OP_NEG ? -v : OP == OP_ABS ? abs(v) : v;  // (else OP_CAST)
    if (F64 == 1) Floats(pc.y).v[i] = float(r);
    else Doubles(pc.y).v[i] = r;
}

void main() {
    if (WIDE == 0) {
        uint i = FLAT_ID(64);
        if (i < pc.n) one(i);
        return;
    }
    uint first = FLAT_GROUP * WIDE, lane = gl_LocalInvocationID.x;
    for (uint k = 0; k < WIDE / 64; ++k) {
        uint i = first + k * 64 + lane;
        if (i >= pc.n) break;
        one(i);
    }
}
