#version 450
// Resize (ONNX opset 10-19) over up to 4 dims: each output coordinate maps back to an input coordinate
// through COORD (the coordinate_transformation_mode, formulas as in ORT's upsamplebase.h), then
//   MODE 0 nearest (NEAREST: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil, 4 opset 10:
//          ceil when downsampling, else floor),
//   MODE 1 linear, MODE 2 cubic (coefficient uintBitsToFloat(CUBIC_A), EXCLUDE_OUTSIDE, ANTIALIAS:
//   downsampling widens the kernel by 1/scale) interpolates separably over every dim, edge-clamped.
// Dims whose source coordinate is an integer take one tap.
//   MODE 3 linear as ORT's CPU EP computes it (UpsampleBilinear over the last 2 dims of a 2-D or 4-D input,
//   UpsampleTrilinear over the last 3 of a 3-D or 5-D one): `rank` is those 2 or 3 dims here, the outer ones planes
//   (ort_linear).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint COORD = 0;  // 0 half_pixel 1 asymmetric 2 pytorch_half_pixel
                                               // 3 tf_half_pixel_for_nn 4 align_corners
                                               // 5 tf_crop_and_resize 6 half_pixel_symmetric
layout(constant_id = 2) const uint NEAREST = 0;
layout(constant_id = 3) const uint EXCLUDE_OUTSIDE = 0;
layout(constant_id = 4) const uint CUBIC_A = 0xBF400000u;  // -0.75
layout(constant_id = 5) const uint ANTIALIAS = 0;

#define R 4
layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint n, rank;
    float extrapolation;
    uint in_dims[R];
    uint out_dims[R];
    float scale[R];
    float roi_start[R];
    float roi_end[R];
    GROUP_BASE;
} pc;

precise float precise_sub(float a, float b) { return a - b; }

// The source coordinate exactly as ORT's CPU EP computes it, so that a coordinate on a rounding boundary
// (nearest modes) picks the same pixel: every operation 'precise' (no contraction into fma), divisions
// correctly rounded (Vulkan allows 2.5 ulp for '/'), and half_pixel_symmetric's sum in double as ORT has it
// (its 0.5 is a double literal there), here as a float pair.
float original(uint d, float x) {
    precise float s = pc.scale[d], len_in = float(pc.in_dims[d]), len_out = float(pc.out_dims[d]);
    if (COORD == 0) return precise_sub(precise_div(x + 0.5, s), 0.5);
    if (COORD == 1) return precise_div(x, s);
    if (COORD == 2) return len_out > 1.0 ? precise_sub(precise_div(x + 0.5, s), 0.5) : 0.0;
    if (COORD == 3) return precise_div(x + 0.5, s);
    if (COORD == 4) return len_out == 1.0 ? 0.0 : precise_div(x * (len_in - 1.0), len_out - 1.0);
    if (COORD == 5) {
        precise float a = pc.roi_start[d], b = pc.roi_end[d];
        if (len_out <= 1.0) return 0.5 * (a + b) * (len_in - 1.0);
        precise float r = a * (len_in - 1.0) + precise_div(x * (b - a) * (len_in - 1.0), len_out - 1.0);
        return r;
    }
    precise float adjustment = precise_div(len_out, s * len_in);
    precise float offset = len_in / 2.0 * (1.0 - adjustment);
    vec2 t = precise_div_pair(x + 0.5, s);       // offset + (x + 0.5) / s - 0.5, summed as ORT does in double
    vec2 u = precise_two_sum(offset, t.x);
    vec2 v = precise_two_sum(u.x, -0.5);
    precise float r = v.x + (v.y + (u.y + t.y));
    return r;
}

int nearest(float x, float scale) {
    if (NEAREST == 4) return int(scale < 1.0 ? ceil(x) : floor(x));
    if (NEAREST == 2) return int(floor(x));
    if (NEAREST == 3) return int(ceil(x));
    float f = floor(x);
    if (x - f == 0.5) return int(NEAREST == 0 ? f : f + 1.0);
    return int(floor(x + 0.5));
}

// the interpolation kernel at distance x (linear: triangle, cubic: Keys with coefficient A)
float kernel(float x) {
    x = abs(x);
    if (MODE == 1) return max(1.0 - x, 0.0);
    float A = uintBitsToFloat(CUBIC_A);
    if (x <= 1.0) return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    if (x < 2.0) return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    return 0.0;
}

// MODE 3: per dim the coordinate (the dim's own where its scale is 1), clamped, its taps in1 = int(x) and
// in2 = in1 + 1 (at most the last) and weights d1 = |x - in1|, d2 = |x - in2| (0.5 each where in1 = in2); then the
// 4 or 8 products dx * dy (* dz) * X in ORT's order, summed left to right
void ort_linear(uint i) {
    uint out_plane = 1u, in_plane = 1u;
    for (uint d = 0u; d < pc.rank; ++d) { out_plane *= pc.out_dims[d]; in_plane *= pc.in_dims[d]; }
    uint rem = i % out_plane;
    int t1[3], t2[3];
    float w1[3], w2[3];
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint c = rem % pc.out_dims[d];
        rem /= pc.out_dims[d];
        float x = pc.scale[d] == 1.0 ? float(c) : original(d, float(c));
        x = max(0.0, min(x, float(pc.in_dims[d] - 1u)));  // (not tf_crop_and_resize: no extrapolation)
        int a = min(int(x), int(pc.in_dims[d]) - 1), b = min(a + 1, int(pc.in_dims[d]) - 1);
        t1[d] = a;
        t2[d] = b;
        w1[d] = a == b ? 0.5 : abs(precise_sub(x, float(a)));
        w2[d] = a == b ? 0.5 : abs(precise_sub(x, float(b)));
    }
    Tensor X = Tensor(pc.x);
    uint base = i / out_plane * in_plane;
    precise float r;
    if (pc.rank == 2u) {  // (y, x): X11 = (y1, x1), X21 = (y1, x2), X12 = (y2, x1), X22 = (y2, x2)
        uint W = pc.in_dims[1];
        r = w2[1] * w2[0] * LOAD(X, base + t1[0] * W + t1[1]);
        r = r + w1[1] * w2[0] * LOAD(X, base + t1[0] * W + t2[1]);
        r = r + w2[1] * w1[0] * LOAD(X, base + t2[0] * W + t1[1]);
        r = r + w1[1] * w1[0] * LOAD(X, base + t2[0] * W + t2[1]);
    } else {  // (z, y, x): Xxyz, z outermost in ORT's order of terms
        uint W = pc.in_dims[2], HW = pc.in_dims[1] * pc.in_dims[2];
        r = 0.0;
        for (uint k = 0u; k < 8u; ++k) {  // k: bit 0 x2, bit 1 y2, bit 2 z2 (ORT's X111, X211, X121, X221, X112, ...)
            bool bx = (k & 1u) != 0u, by = (k & 2u) != 0u, bz = (k & 4u) != 0u;
            precise float w = (bx ? w1[2] : w2[2]) * (by ? w1[1] : w2[1]) * (bz ? w1[0] : w2[0]);
            precise float term = w * LOAD(X, base + uint(bz ? t2[0] : t1[0]) * HW + uint(by ? t2[1] : t1[1]) * W
                                                  + uint(bx ? t2[2] : t1[2]));
            r = k == 0u ? term : r + term;
        }
    }
    STORE(Tensor(pc.y), i, r);
}

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    if (MODE == 3) {
        ort_linear(i);
        return;
    }
    // per dim: taps first[d] .. first[d] + taps[d] - 1 (clamped to the edge), at kernel distance
    // (tap - x) * s[d] (s < 1 widens the kernel: antialiasing), weights divided by norm[d]
    int first[R];
    uint taps[R];
    float x_of[R], s_of[R], norm[R];
    uint rem = i, total = 1;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint c = rem % pc.out_dims[d];
        rem /= pc.out_dims[d];
        float x = original(d, float(c));
        int len = int(pc.in_dims[d]);
        if (COORD == 5 && (x < 0.0 || x > float(len - 1))) {
            STORE(Tensor(pc.y), i, pc.extrapolation);
            return;
        }
        float f = floor(x);
        float s = ANTIALIAS == 1 ? min(pc.scale[d], 1.0) : 1.0;
        x_of[d] = x;
        s_of[d] = s;
        norm[d] = 1.0;
        if (MODE == 0) {
            first[d] = clamp(nearest(x, pc.scale[d]), 0, len - 1);
            taps[d] = 1;
        } else if (x == f && s == 1.0) {
            first[d] = clamp(int(f), 0, len - 1);
            x_of[d] = float(first[d]);
            taps[d] = 1;
        } else {
            int start = int(floor((MODE == 1 ? -1.0 : -2.0) / s)) + 1;  // the kernel's support
            first[d] = int(f) + start;
            taps[d] = uint(2 * (1 - start));
            float sum = 0.0;
            for (uint t = 0; t < taps[d]; ++t) {
                int at = first[d] + int(t);
                if (EXCLUDE_OUTSIDE == 0 || (at >= 0 && at < len)) sum += kernel((float(at) - x) * s);
            }
            norm[d] = sum;
        }
        total *= taps[d];
    }
    Tensor X = Tensor(pc.x);
    float acc = 0.0;
    for (uint t = 0; t < total; ++t) {
        uint k = t, src = 0, step = 1;
        float weight = 1.0;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint tap = k % taps[d];
            k /= taps[d];
            int len = int(pc.in_dims[d]);
            int at = first[d] + int(tap);
            src += uint(clamp(at, 0, len - 1)) * step;
            step *= uint(len);
            if (taps[d] > 1) {
                bool outside = EXCLUDE_OUTSIDE == 1 && (at < 0 || at >= len);
                weight *= outside ? 0.0 : kernel((float(at) - x_of[d]) * s_of[d]) / norm[d];
            }
        }
        if (weight != 0.0) acc += weight * LOAD(X, src);
    }
    STORE(Tensor(pc.y), i, acc);
}
