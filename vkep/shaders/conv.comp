#version 450
// Conv (1-D, 2-D, 3-D; groups, strides, dilations, pads, optional bias) in NC[D]HW layout.
// Spatial shapes are read as 3-D: a 1-D or 2-D conv has leading dims of size 1.
//
// MODE 0: implicit GEMM per (batch, group): Y[m, p] = sum_k W[m, k] * im2col(X)[k, p] + bias[m], with
//         m an output channel, p an output pixel, k = (input channel, kernel offset); X is gathered on the
//         fly (no im2col buffer) and each thread accumulates a TM x TN block in registers (see gemm()).
// MODE 1: the same GEMM for 1x1 kernels with stride 1 and no padding: X is the GEMM's B matrix as is.
// MODE 2: direct: one thread per output, for convs with few output channels per group (depthwise).
// The GEMM modes take the kernel's size and the workgroup's shape as push constants, so one pipeline serves
// every conv of a model (each pipeline costs lavapipe ~0.25 s to compile cold); their taps loop (unrolled,
// a 7x7 kernel took lavapipe 7.5 s to compile), except MODE 1's single one. The direct mode unrolls its taps
// (only its channel loop counts against lavapipe's loop budget), so the kernel's size is a specialization
// constant there. The register block is a specialization constant in every mode.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;  // GEMM: pc.wn threads along output pixels x 64 / pc.wn along output channels
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint KD = 1;   // direct mode only (the GEMM modes read pc.kd, pc.kh, pc.kw)
layout(constant_id = 2) const uint KH = 1;
layout(constant_id = 3) const uint KW = 1;
const uint KHW = KH * KW;
const uint KSZ = KD * KHW;
const uint WG = 64;
layout(constant_id = 4) const uint TM = 8;   // output channels per thread
layout(constant_id = 5) const uint TN = 8;   // output pixels per thread

layout(push_constant, scalar) uniform Push {
    uint64_t x, w, b, y;     // b: bias or 0
    uint cg, mg, groups;     // input channels per group, output channels per group, groups
    uint id, ih, iw;         // input spatial dims
    uint od, oh, ow;         // output spatial dims
    uint sd, sh, sw;         // strides
    uint dd, dh, dw;         // dilations
    int pd, ph, pw;          // leading pads
    uint kd, kh, kw;         // kernel size (GEMM modes)
    uint wn;                 // GEMM: threads along output pixels (a power of two from 8 to 64)
} pc;

// X at (channel offset c_off, kernel offset r) for output pixel origin (d0, h0, w0); 0 in the padding
float gather(Tensor X, uint c_off, uint r, int d0, int h0, int w0) {
    uint kd = r / KHW, r2 = r % KHW;
    int d = d0 + int(kd * pc.dd), h = h0 + int((r2 / KW) * pc.dh), w = w0 + int((r2 % KW) * pc.dw);
    if (uint(d) >= pc.id || uint(h) >= pc.ih || uint(w) >= pc.iw) return 0.0;
    return LOAD(X, c_off + (uint(d) * pc.ih + uint(h)) * pc.iw + uint(w));
}

// One kernel tap r of input channel c (at cx) for the thread's TM x TN block: TM weights, TN inputs, TM x TN
// multiply-adds (a macro, so that the unrolled and the looped forms share it without copying the block).
#define TAP(r) {                                                                                              \
    uint k = c * ksz + (r);                                                                                   \
    float a[TM], b[TN];                                                                                       \
    [[unroll]] for (uint i = 0; i < TM; ++i) a[i] = LOAD(W, wrow[i] + k);                                     \
    if (MODE == 1) {                                                                                          \
        [[unroll]] for (uint j = 0; j < TN; ++j) b[j] = LOAD(X, cx + pix[j]);                                 \
    } else {                                                                                                  \
        uint kd = (r) / khw, kh = ((r) % khw) / pc.kw, kw = (r) % pc.kw;                                      \
        [[unroll]] for (uint j = 0; j < TN; ++j) {                                                            \
            int d = d0[j] + int(kd * pc.dd), h = h0[j] + int(kh * pc.dh), w = w0[j] + int(kw * pc.dw);        \
            bool inside = uint(d) < pc.id && uint(h) < pc.ih && uint(w) < pc.iw;                              \
            float v = LOAD(X, inside ? cx + (uint(d) * pc.ih + uint(h)) * pc.iw + uint(w) : cx);              \
            b[j] = inside ? v : 0.0;                                                                          \
        }                                                                                                     \
    }                                                                                                         \
    [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j]; \
}

// Register-blocked GEMM straight from memory: per reduction step a thread loads TM weights and TN input
// values and does TM x TN multiply-adds; a workgroup covers 64 / wn * TM channels x wn * TN pixels (a thread's
// pixels are wn apart, its channels adjacent). On a CPU driver (lavapipe) every load is costly and
// shared memory is no cheaper than global memory, so loads per multiply-add is what counts.
void gemm() {
    uint lane = gl_LocalInvocationIndex % pc.wn, row = gl_LocalInvocationIndex / pc.wn;
    uint khw = pc.kh * pc.kw, ksz = pc.kd * khw;
    uint bat = gl_WorkGroupID.z / pc.groups, g = gl_WorkGroupID.z % pc.groups;
    uint M = pc.mg, K = pc.cg * ksz, N = pc.od * pc.oh * pc.ow;
    uint m0 = (gl_WorkGroupID.y * (WG / pc.wn) + row) * TM, n0 = gl_WorkGroupID.x * (pc.wn * TN) + lane;
    uint isz = pc.id * pc.ih * pc.iw;
    Tensor X = Tensor(pc.x), W = Tensor(pc.w);
    uint xbase = (bat * pc.groups + g) * pc.cg * isz;
    uint wrow[TM];
    [[unroll]] for (uint i = 0; i < TM; ++i) wrow[i] = (g * pc.mg + min(m0 + i, M - 1)) * K;
    int d0[TN], h0[TN], w0[TN];
    uint pix[TN];
    [[unroll]] for (uint j = 0; j < TN; ++j) {
        uint p = min(n0 + pc.wn * j, N - 1);
        pix[j] = p;
        uint q = p / pc.ow;
        w0[j] = int((p % pc.ow) * pc.sw) - pc.pw;
        h0[j] = int((q % pc.oh) * pc.sh) - pc.ph;
        d0[j] = int((q / pc.oh) * pc.sd) - pc.pd;
    }
    float acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

    for (uint c = 0; c < pc.cg; ++c) {
        uint cx = xbase + c * isz;
        if (MODE == 1) {
            TAP(0)
        } else {
            [[dont_unroll]] for (uint r = 0; r < ksz; ++r) TAP(r)
        }
    }

    Tensor Y = Tensor(pc.y);
    [[unroll]] for (uint i = 0; i < TM; ++i) {
        uint m = m0 + i;
        if (m < M) {
            uint oc = g * pc.mg + m;
            float bias = pc.b != 0 ? LOAD(Tensor(pc.b), oc) : 0.0;
            uint ybase = (bat * pc.groups * pc.mg + oc) * N;
            [[unroll]] for (uint j = 0; j < TN; ++j) {
                uint n = n0 + pc.wn * j;
                if (n < N) STORE(Y, ybase + n, acc[i][j] + bias);
            }
        }
    }
}

void direct() {
    uint N = pc.od * pc.oh * pc.ow, per_batch = pc.groups * pc.mg * N;
    uint i = flat_index(WG);
    if (i >= per_batch) return;
    uint bat = gl_WorkGroupID.z;
    uint oc = i / N, p = i % N, g = oc / pc.mg;
    uint q = p / pc.ow;
    int w0 = int((p % pc.ow) * pc.sw) - pc.pw;
    int h0 = int((q % pc.oh) * pc.sh) - pc.ph;
    int d0 = int((q / pc.oh) * pc.sd) - pc.pd;
    uint isz = pc.id * pc.ih * pc.iw;
    Tensor X = Tensor(pc.x), W = Tensor(pc.w);
    uint xbase = (bat * pc.groups + g) * pc.cg * isz;
    uint wbase = oc * pc.cg * KSZ;
    float acc = pc.b != 0 ? LOAD(Tensor(pc.b), oc) : 0.0;
    for (uint c = 0; c < pc.cg; ++c) {
        // (unrolled: KSZ is a specialization constant, and only the channel loop counts against lavapipe's
        // loop budget, see vkep/kernels/conv.py)
        [[unroll]] for (uint r = 0; r < KSZ; ++r) acc += LOAD(W, wbase + c * KSZ + r) * gather(X, xbase + c * isz, r, d0, h0, w0);
    }
    STORE(Tensor(pc.y), bat * per_batch + i, acc);
}

void main() {
    if (MODE == 2) direct();
    else gemm();
}
