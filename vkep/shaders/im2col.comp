#version 450
// im2col (vkep/kernels/conv.py, float32): the patches of a 1-D or 2-D convolution as a matrix, so that a
// strided or k x k convolution runs as matmul.comp's broadcast GEMM with 64-bit loads along the pixels:
//   col[z][k][p] = x[z][c][oy * sh + ky * dh - ph][ox * sw + kx * dw - pw]   (0 outside the input)
// with k = (c * kh + ky) * kw + kx and p = oy * Wo + ox. Rows k >= C * kh * kw are zeros: the row that matches
// the zero column where Conv.pack made W's rows even. Rows are `pitch` apart: Ho * Wo, or one more where that is
// odd, whose column holds zeros (so that matmul.comp reads pairs along every row). An invocation writes RUN
// consecutive pixels of one row (lavapipe pays per invocation, not per element).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
#define RUN 8

layout(push_constant, scalar) uniform Push {
    uint64_t x, col;
    uint C, H, W;      // input channels (of the group) and spatial size
    uint Ho, Wo;       // output spatial size
    uint kh, kw, sh, sw, dh, dw;
    uint ph, pw;       // leading pads
    uint rows;         // rows of col (C * kh * kw, or one more)
    uint pitch;        // elements from one row of col to the next (Ho * Wo, or one more)
    uint runs;         // ceil(pitch / RUN)
    uint n;            // images * rows * runs
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(64);
    if (i >= pc.n) return;
    uint run = i % pc.runs, t = i / pc.runs;
    uint k = t % pc.rows, z = t / pc.rows;
    uint taps = pc.kh * pc.kw;
    uint c = k / taps, ky = (k % taps) / pc.kw, kx = k % pc.kw;
    uint pixels = pc.Ho * pc.Wo;
    uint p = run * RUN;
    uint oy = p / pc.Wo, ox = p % pc.Wo;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.col);
    uint x_base = (z * pc.C + min(c, pc.C - 1)) * pc.H * pc.W;
    uint y_base = (z * pc.rows + k) * pc.pitch;
    int row_off = int(ky * pc.dh) - int(pc.ph), col_off = int(kx * pc.dw) - int(pc.pw);
    for (uint j = 0; j < RUN && p < pc.pitch; ++j, ++p) {
        int iy = int(oy * pc.sh) + row_off, ix = int(ox * pc.sw) + col_off;
        float v = 0.0;
        if (c < pc.C && p < pixels && iy >= 0 && iy < int(pc.H) && ix >= 0 && ix < int(pc.W))
            v = LOAD(X, x_base + uint(iy) * pc.W + uint(ix));
        STORE(Y, y_base + p, v);
        if (++ox == pc.Wo) {
            ox = 0;
            ++oy;
        }
    }
}
