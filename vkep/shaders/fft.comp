#version 450
// DFT and STFT of float32 signals (vkep/kernels/spectral.py), as ORT's CPU EP computes them, so that the results
// agree bit for bit: `per_group` transforms a workgroup (as many as the shared buffer holds: lavapipe pays per
// workgroup, and an STFT of short frames has thousands), each a radix-2 FFT in its slice of shared memory (the
// CPU EP's bit-reversed load and butterfly order, twiddles from the host's table) where the length is a power of
// two; else Bluestein's chirp-z
// transform over a power-of-two `points` (signal x chirp -> FFT -> x FFT(b), a host table -> FFT -> / points ->
// read reversed x chirp), as the CPU EP does. Every complex product is `precise`: an fma would round differently.
//
// C2R: an inverse real FFT (DFT inverse and onesided): x holds `samples` = dft_length / 2 + 1 bins of a spectrum,
// the rest is their mirror X[N - k] = conj(X[k]) (the bins' own imaginary parts at 0 and N / 2 kept, as the CPU EP
// keeps them), and y the real part of each of the dft_length points, one float a point.
//
// Transform t reads x at x_outer * (t / inner) + x_inner * (t % inner) + x_step * n (floats; components
// interleaved when complex) and writes bin k at the same form over y (2 floats a bin).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint BLUESTEIN = 0;
layout(constant_id = 1) const uint CAPACITY = 2048;  // points the shared buffer holds (spectral.capacity)
layout(constant_id = 2) const uint C2R = 0;
const uint WG = 64;
const uint PER_LANE = CAPACITY / WG;

// (float32 whatever the variant: the manifest's integer types are those of the CPU inputs)
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Complex { vec2 v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, window, twiddles, chirp, b_fft, y;  // window: 0 when absent; chirp, b_fft: Bluestein's tables
    uint transforms, inner, x_outer, x_inner, x_step, y_outer, y_inner, y_step;
    uint samples;   // x's samples along the axis (those past `length` are left out, those missing are zeros)
    uint dft_length;  // the DFT's length
    uint points;    // the FFT's size: `length`, or Bluestein's power of two
    uint bits;      // log2(points)
    uint bins;      // the bins written
    uint components;  // 1: a real signal, 2: complex
    uint inverse;
    uint per_group;   // transforms a workgroup (each `points` long in buf)
    GROUP_BASE;
} pc;

shared vec2 buf[CAPACITY];

precise vec2 cmul(vec2 a, vec2 b) {  // (C's complex product without fma)
    return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

uint reversed(uint i, uint bits) {
    return bits == 0u ? 0u : bitfieldReverse(i) >> (32u - bits);
}

vec2 sample_at(uint base, uint n) {  // (the CPU EP's complex(1, 0) * x, then * window)
    precise vec2 v;
    if (pc.components == 1u) {
        float r = Floats(pc.x).v[base + n * pc.x_step];
        v = vec2(r, 0.0 * r);
    } else {
        uint at = base + n * pc.x_step;
        v = cmul(vec2(1.0, 0.0), vec2(Floats(pc.x).v[at], Floats(pc.x).v[at + 1u]));
    }
    float w = Floats(PRESENT_OR(pc.window, pc.x)).v[PRESENT_AT(pc.window, n)];
    if (pc.window != 0) v = v * w;
    return v;
}

// the transform's points: the signal's samples (zeros past them), or a one-sided spectrum and its mirror
uint signal_points() { return C2R != 0u ? pc.dft_length : pc.samples; }

vec2 signal_at(uint base, uint n) {
    if (C2R == 0u || n < pc.samples) return sample_at(base, n);
    uint mirror = pc.dft_length - n;
    vec2 v = mirror < pc.samples ? sample_at(base, mirror) : vec2(0.0);
    return vec2(v.x, -v.y);
}

// buf[0 .. points) in bit-reversed order -> its FFT with the table's twiddles (the CPU EP's stage and butterfly
// order: the second twiddle of a butterfly is the table's own entry, not minus the first)
void radix2() {
    uint half_points = pc.points / 2u;
    for (uint s = 1u; s <= pc.bits; s++) {
        uint half_span = 1u << (s - 1u), shift = pc.bits - s;
        for (uint c = gl_LocalInvocationID.x; c < pc.per_group * half_points; c += WG) {
            uint b = c & (half_points - 1u), slot = (c >> (pc.bits - 1u)) << pc.bits;  // (points: a power of two)
            uint k = b & (half_span - 1u), even = slot + ((b >> (s - 1u)) << s) + k, odd = even + half_span;
            vec2 first = Complex(pc.twiddles).v[k << shift], second = Complex(pc.twiddles).v[(half_span + k) << shift];
            vec2 e = buf[even], o = buf[odd];
            precise vec2 p = e + cmul(first, o), q = e + cmul(second, o);
            buf[even] = p;
            buf[odd] = q;
        }
        barrier();
    }
}

// where transform t reads x and writes y
void bases(uint t, out uint x_base, out uint y_base) {
    uint outer = t / pc.inner, inner = t % pc.inner;
    x_base = outer * pc.x_outer + inner * pc.x_inner;
    y_base = outer * pc.y_outer + inner * pc.y_inner;
}

void main() {
    uint lane = gl_LocalInvocationID.x, first = FLAT_GROUP * pc.per_group;  // (its first transform)
    if (first >= pc.transforms) return;  // (the whole workgroup)
    uint all_points = pc.per_group * pc.points, x_base, y_base;
    if (BLUESTEIN == 0u) {
        for (uint e = lane; e < all_points; e += WG) {
            uint slot = e >> pc.bits, i = e & (pc.points - 1u), n = reversed(i, pc.bits);
            bases(first + slot, x_base, y_base);
            buf[e] = n < signal_points() && first + slot < pc.transforms ? signal_at(x_base, n) : vec2(0.0);
        }
        barrier();
        radix2();
    } else {
        // a[n] = x[n] window[n] chirp[n] (zero past the signal; chirp is zero past `length`), loaded bit-reversed
        for (uint e = lane; e < all_points; e += WG) {
            uint slot = e >> pc.bits, n = e & (pc.points - 1u);
            bases(first + slot, x_base, y_base);
            precise vec2 a = vec2(0.0);
            if (n < signal_points() && first + slot < pc.transforms) {
                a = cmul(signal_at(x_base, n), Complex(pc.chirp).v[n]);
            }
            buf[(slot << pc.bits) + reversed(n, pc.bits)] = cmul(vec2(1.0, 0.0), a);
        }
        barrier();
        radix2();
        // x FFT(b), then the CPU EP's inverse FFT, which reuses the forward twiddles: a forward FFT, / points,
        // and the bins read back reversed
        vec2 held[PER_LANE];
        for (uint j = 0u; j < PER_LANE; j++) {
            uint e = lane + j * WG;
            if (e < all_points) {
                uint slot = e >> pc.bits, r = reversed(e & (pc.points - 1u), pc.bits);
                held[j] = cmul(vec2(1.0, 0.0), cmul(buf[(slot << pc.bits) + r], Complex(pc.b_fft).v[r]));
            }
        }
        barrier();
        for (uint j = 0u; j < PER_LANE; j++) {
            uint e = lane + j * WG;
            if (e < all_points) buf[e] = held[j];
        }
        barrier();
        radix2();
    }
    float scale = BLUESTEIN == 0u ? float(pc.dft_length) : float(pc.points);
    float out_scale = pc.inverse != 0u ? 1.0 / float(pc.dft_length) : 1.0;
    for (uint e = lane; e < pc.per_group * pc.bins; e += WG) {
        uint slot = e / pc.bins, k = e % pc.bins;
        if (first + slot >= pc.transforms) break;  // (e grows: every later one is past too)
        bases(first + slot, x_base, y_base);
        uint at_buf = slot * pc.points;
        precise vec2 v = buf[at_buf + k];
        if (BLUESTEIN == 0u) {
            if (pc.inverse != 0u) v = v / scale;
        } else {
            v = buf[at_buf + (k == 0u ? 0u : pc.points - k)] / scale;
            v = cmul(v, Complex(pc.chirp).v[k]) * out_scale;
        }
        uint at = y_base + k * pc.y_step;
        Floats(pc.y).v[at] = v.x;
        if (C2R == 0u) Floats(pc.y).v[at + 1u] = v.y;
    }
}
