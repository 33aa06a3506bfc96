#version 450
// ONNX GridSample (opsets 16-22), one invocation per output element of Y [N, C, *out].
//
// The grid point grid[n, *out, :] holds normalized (x, y[, z]) in [-1, 1] (x indexes the last axis of X).
// Each is mapped to an input coordinate (ALIGN: -1/1 are the centres of the edge pixels, else their outer
// edges), then
//   MODE 0 nearest: rounded half to even (std::nearbyint, as ORT's CPU EP and PyTorch),
//   MODE 1 linear: 2^DIMS taps, MODE 2 cubic (DIMS 2 only): 4x4 taps of Keys' kernel with a = -0.75.
// Padding is applied per integer tap, as ORT's CPU EP does: PADDING 0 zeros (a tap outside X reads 0),
// 1 border (clamped to the edge), 2 reflection (mirrored at the same borders the coordinate map uses).
// onnx's reference also clamps/reflects the continuous coordinate first; that changes only cubic+border.
// For DIMS 2 the depth axis has size 1 and every tap sits at depth 0. DTYPE is the type of X, grid and
// Y; arithmetic is float32.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 1;
layout(constant_id = 1) const uint PADDING = 0;
layout(constant_id = 2) const uint ALIGN = 0;
layout(constant_id = 3) const uint DIMS = 2;   // spatial dims: 2 (X 4-D) or 3 (X 5-D)

layout(push_constant, scalar) uniform Push {
    uint64_t x, grid, y;
    uint n;          // output elements
    uint channels;   // C
    uint points;     // output points per (n, c): prod(out)
    uint size[3];    // input W, H, D (D = 1 for DIMS 2)
    GROUP_BASE;
} pc;

// input coordinate of the normalized coordinate g along an axis of `len` pixels
float denormalize(float g, float len) {
    return ALIGN != 0 ? (g + 1.0) / 2.0 * (len - 1.0) : ((g + 1.0) * len - 1.0) / 2.0;
}

// reflect v at lo and hi until it lies between them (ORT's GsReflect, in float32 as there)
float reflect_at(float v, float lo, float hi) {
    float range = hi - lo;
    if (range <= 0.0) return lo;  // one pixel with ALIGN: every tap is that pixel
    if (v < lo) {
        float dx = lo - v;
        int k = int(dx / range);
        float r = dx - float(k) * range;
        return (k % 2 == 0) ? lo + r : hi - r;
    }
    if (v > hi) {
        float dx = v - hi;
        int k = int(dx / range);
        float r = dx - float(k) * range;
        return (k % 2 == 0) ? hi - r : lo + r;
    }
    return v;
}

// the index along an axis of `len` pixels that tap `at` reads after padding; -1: a zero
int padded(int at, uint len) {
    int last = int(len) - 1;
    if (PADDING == 0) return (at < 0 || at > last) ? -1 : at;
    if (PADDING == 1) return clamp(at, 0, last);
    float lo = ALIGN != 0 ? 0.0 : -0.5;
    float hi = ALIGN != 0 ? float(last) : float(len) - 0.5;
    // int() truncates like ORT's static_cast; the clamp only guards memory against float rounding
    return clamp(int(reflect_at(float(at), lo, hi)), 0, last);
}

// X[base + (d, h, w)] with padding; at = (w, h, d)
float pixel(Tensor X, uint base, ivec3 at) {
    int w = padded(at.x, pc.size[0]), h = padded(at.y, pc.size[1]), d = padded(at.z, pc.size[2]);
    if (w < 0 || h < 0 || d < 0) return 0.0;
    return float(LOAD(X, base + (uint(d) * pc.size[1] + uint(h)) * pc.size[0] + uint(w)));
}

// Keys' cubic convolution weights of the taps at -1, 0, 1, 2 from floor(x), t = x - floor(x)
vec4 cubic_weights(float t) {
    const float A = -0.75;
    float t1 = t + 1.0, s = 1.0 - t, s1 = 2.0 - t;
    return vec4(((A * t1 - 5.0 * A) * t1 + 8.0 * A) * t1 - 4.0 * A,
                ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0,
                ((A + 2.0) * s - (A + 3.0)) * s * s + 1.0,
                ((A * s1 - 5.0 * A) * s1 + 8.0 * A) * s1 - 4.0 * A);
}

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint p = i % pc.points;
    uint nc = i / pc.points;       // n * C + c
    uint batch = nc / pc.channels;
    Tensor X = Tensor(pc.x), G = Tensor(pc.grid);
    uint base = nc * pc.size[0] * pc.size[1] * pc.size[2];
    uint g = (batch * pc.points + p) * DIMS;
    vec3 c = vec3(0.0);
    for (uint k = 0; k < DIMS; ++k) c[k] = denormalize(float(LOAD(G, g + k)), float(pc.size[k]));
    // keeps the taps' int conversion defined; float32 has no integer precision this far out anyway
    c = clamp(c, vec3(-1.0e9), vec3(1.0e9));

    float result;
    if (MODE == 0) {
        result = pixel(X, base, ivec3(roundEven(c)));
    } else if (MODE == 1) {
        vec3 f = floor(c);
        ivec3 lo = ivec3(f);
        vec3 t1 = c - f, t0 = (f + 1.0) - c;  // weights of the upper and lower taps, as ORT forms them
        result = 0.0;
        for (uint dz = 0; dz < (DIMS == 3 ? 2u : 1u); ++dz) {
            float wz = DIMS == 3 ? (dz == 0 ? t0.z : t1.z) : 1.0;
            float plane = 0.0;
            for (uint dy = 0; dy < 2; ++dy) {
                ivec3 at = lo + ivec3(0, dy, dz);
                float row = t0.x * pixel(X, base, at) + t1.x * pixel(X, base, at + ivec3(1, 0, 0));
                plane += (dy == 0 ? t0.y : t1.y) * row;
            }
            result += wz * plane;
        }
    } else {
        vec2 f = floor(c.xy);
        ivec2 lo = ivec2(f) - 1;
        vec4 wx = cubic_weights(c.x - f.x), wy = cubic_weights(c.y - f.y);
        result = 0.0;
        for (int r = 0; r < 4; ++r) {
            vec4 row = vec4(pixel(X, base, ivec3(lo.x, lo.y + r, 0)), pixel(X, base, ivec3(lo.x + 1, lo.y + r, 0)),
                            pixel(X, base, ivec3(lo.x + 2, lo.y + r, 0)), pixel(X, base, ivec3(lo.x + 3, lo.y + r, 0)));
            result += wy[r] * dot(wx, row);
        }
    }
    STORE(Tensor(pc.y), i, result);
}
