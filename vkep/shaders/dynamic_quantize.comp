#version 450
// DynamicQuantizeLinear's parameters as ORT's CPU EP computes them: min and max of all n elements of x,
// widened to include 0; scale = (max - min) / 255 (1 when they are equal); zero point =
// round_half_even(clamp(0 - min / scale, 0, 255)). The quantization is quantize.comp's.
// STAGE 0: one workgroup over all of x. A larger x (past one workgroup's loop budget) takes two: STAGE 1, each
// workgroup the min and max of its `chunk` elements into `partial` (pairs); STAGE 2, one workgroup over the
// pairs. (min and max are exact whatever the order: the same answer.)
// NaN (STAGE 0, `streams` set: n within 32 x the loop budget): where x holds a NaN, min and max are those of
// MlasReduceMinimumMaximumF32KernelAvx over the whole tensor, whose vminps / vmaxps keep the second operand when
// either is NaN: 4 accumulators of 8 lanes over runs of 32 (invocation t follows accumulator t / 8, lane t % 8),
// then 8 lanes over runs of 8, the lanes folded (4 with 4, 2 with 2, 1 with 1), the tail with std::min / max. So a
// NaN wipes what its lane held, and survives only as its lane's last element. The range's 0, the scale ((max - min) /
// 255: NaN) and the zero point (NaN or infinite: 255) follow ORT's std::min / max in the same way.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint STAGE = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, scale, zp, partial;
    uint n;        // elements of x (STAGE 0, 1), pairs in partial (STAGE 2)
    uint chunk;    // STAGE 1: elements a workgroup
    uint streams;  // STAGE 0: MLAS's NaN order where x holds a NaN (n within 32 x the loop budget)
    GROUP_BASE;
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 1) buffer Bytes { uint8_t v[]; };

shared float lo[256], hi[256];
shared uint has_nan;

// x86's maxps / minps (the second operand unless the first compares greater / less: NaN gives the second) and
// std::max / std::min (the first unless it compares less / the second compares less: NaN gives the first)
float maxps(float a, float b) { return isnan(a) || isnan(b) || !(a > b) ? b : a; }
float minps(float a, float b) { return isnan(a) || isnan(b) || !(a < b) ? b : a; }
float std_max(float a, float b) { return isnan(a) || isnan(b) || !(a < b) ? a : b; }
float std_min(float a, float b) { return isnan(a) || isnan(b) || !(b < a) ? a : b; }

// min (x) and max (y) of x[0, n) as MlasReduceMinimumMaximumF32KernelAvx finds them (invocations 0-31 each fold one
// accumulator lane into lo / hi first); invocation 0 returns them
vec2 mlas_min_max(uint t) {
    const float LOWEST = -3.40282347e38, HIGHEST = 3.40282347e38;
    uint runs = pc.n / 32u, eights = pc.n / 8u * 8u;
    if (t < 32u) {
        float mx = LOWEST, mn = HIGHEST;
        for (uint r = 0u; r < runs; ++r) {
            float v = LOAD(Tensor(pc.x), r * 32u + t);
            mx = maxps(mx, v);
            mn = minps(mn, v);
        }
        lo[t] = mn;
        hi[t] = mx;
    }
    barrier();
    if (t != 0u) return vec2(0.0);
    float tmin = HIGHEST, tmax = LOWEST;
    if (pc.n >= 8u) {
        float vmax[8], vmin[8];
        for (uint l = 0u; l < 8u; ++l) {
            vmax[l] = runs == 0u ? LOWEST : maxps(maxps(hi[l], hi[8u + l]), maxps(hi[16u + l], hi[24u + l]));
            vmin[l] = runs == 0u ? HIGHEST : minps(minps(lo[l], lo[8u + l]), minps(lo[16u + l], lo[24u + l]));
        }
        for (uint i = runs * 32u; i < eights; i += 8u)
            for (uint l = 0u; l < 8u; ++l) {
                float v = LOAD(Tensor(pc.x), i + l);
                vmax[l] = maxps(vmax[l], v);
                vmin[l] = minps(vmin[l], v);
            }
        for (uint l = 0u; l < 4u; ++l) {
            vmax[l] = maxps(vmax[l], vmax[l + 4u]);
            vmin[l] = minps(vmin[l], vmin[l + 4u]);
        }
        tmax = maxps(maxps(vmax[0], vmax[2]), maxps(vmax[1], vmax[3]));
        tmin = minps(minps(vmin[0], vmin[2]), minps(vmin[1], vmin[3]));
    }
    for (uint i = pc.n >= 8u ? eights : 0u; i < pc.n; ++i) {
        float v = LOAD(Tensor(pc.x), i);
        tmax = std_max(tmax, v);
        tmin = std_min(tmin, v);
    }
    return vec2(tmin, tmax);
}

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
        bool nan = false;
        for (uint j = first + t; j < end; j += 256) {
            float v = LOAD(Tensor(pc.x), j);
            nan = nan || isnan(v);
            mn = min(mn, v);
            mx = max(mx, v);
        }
        if (t == 0u) has_nan = 0u;
        barrier();
        if (nan) atomicOr(has_nan, 1u);
    }
    lo[t] = mn;
    hi[t] = mx;
    barrier();
    if (STAGE == 0 && pc.streams != 0u && has_nan != 0u) {  // (uniform: every invocation takes it)
        barrier();
        vec2 r = mlas_min_max(t);
        if (t == 0u) {
            float mlo = std_min(r.x, 0.0), mhi = std_max(r.y, 0.0);  // (ORT: the range includes 0)
            float scale = mhi == mlo ? 1.0 : (mhi - mlo) / 255.0;
            Floats(pc.scale).v[0] = scale;
            Bytes(pc.zp).v[0] = uint8_t(uint(roundEven(std_max(0.0, std_min(255.0, 0.0 - mlo / scale)))));
        }
        return;
    }
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
        Floats(pc.scale).v[0] = scale;  // (a NaN zero point, -inf over inf: 255, as ORT's std::min(255, NaN))
        Bytes(pc.zp).v[0] = uint8_t(uint(roundEven(std_max(0.0, std_min(255.0, 0.0 - lo[0] / scale)))));
    }
}
