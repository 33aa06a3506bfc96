#version 450
// DynamicQuantizeLinear's parameters as ORT's CPU EP computes them: min and max of all n elements of x,
// widened to include 0; scale = (max - min) / 255 (1 when they are equal); zero point =
// round_half_even(clamp(0 - min / scale, 0, 255)). The quantization is quantize.comp's.
// STAGE 0: one workgroup over all of x. A larger x (past one workgroup's loop budget) takes two: STAGE 1, each
// workgroup the min and max of its `chunk` elements into `partial` (pairs); STAGE 2, one workgroup over the
// pairs. (min and max are exact whatever the order: the same answer.)
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint STAGE = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, scale, zp, partial;
    uint n;      // elements of x (STAGE 0, 1), pairs in partial (STAGE 2)
    uint chunk;  // STAGE 1: elements a workgroup
    GROUP_BASE;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 1) buffer Bytes { uint8_t v[]; };

shared float lo[256], hi[256];

void main() {
    uint t = gl_LocalInvocationID.x;
    float mn = 0.0, mx = 0.0;  // the range always holds 0
    if (STAGE == 2) {
        for (uint j = t; j < pc.n; j += 256) {
            mn = min(mn, Floats(pc.partial).v[2 * j]);
            mx = max(mx, Floats(pc.partial).v[2 * j + 1]);
        }
    } else {
        uint first = STAGE == 1 ? WORKGROUP_ID.x * pc.chunk : 0;
        uint end = STAGE == 1 ? min(pc.n, first + pc.chunk) : pc.n;
        for (uint j = first + t; j < end; j += 256) {
            float v = LOAD(Tensor(pc.x), j);
            mn = min(mn, v);
            mx = max(mx, v);
        }
    }
    lo[t] = mn;
    hi[t] = mx;
    barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s) {
            lo[t] = min(lo[t], lo[t + s]);
            hi[t] = max(hi[t], hi[t + s]);
        }
        barrier();
    }
    if (t == 0 && STAGE == 1) {
        Floats(pc.partial).v[2 * WORKGROUP_ID.x] = lo[0];
        Floats(pc.partial).v[2 * WORKGROUP_ID.x + 1] = hi[0];
    } else if (t == 0) {
        float scale = hi[0] == lo[0] ? 1.0 : (hi[0] - lo[0]) / 255.0;
        Floats(pc.scale).v[0] = scale;
        Bytes(pc.zp).v[0] = uint8_t(uint(roundEven(clamp(0.0 - lo[0] / scale, 0.0, 255.0))));
    }
}
