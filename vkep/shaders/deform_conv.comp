#version 450
// DeformConv (ONNX 19, 22) as ORT's CPU EP computes it (deform_conv.cc): a deformable im2col, then one product per
// group, then the bias.
//  MODE 0: col [N, C*kH*kW, oH*oW] (scratch): one invocation a sample, ORT's bilinear plan: a sample at
//          h_im = h_col*stride + (-pad + i*dilation) + offset (and w likewise) outside (-1, H) x (-1, W) has four
//          zero weights on element 0 of its channel; a corner outside the image gets weight 0 and index 0; the
//          value is w00 v00 + w01 v01 + w10 v10 + w11 v11 in that order, then times the mask (v2). So a NaN or inf
//          at a channel's element 0 reaches every sample of it with a corner outside, as in the CPU EP.
//  (W [M/group, C/group*kH*kW] x col of each group: the MatMul kernel, deform_conv.py)
//  MODE 1: Y [N, M, oH, oW] += B, in place.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint MASK = 0;  // MODE 0: a mask input

layout(push_constant, scalar) uniform Push {
    // MODE 0: X, offset, mask (or 0), col; MODE 1: -, -, B, Y
    uint64_t src, aux, extra, dst;
    uint n;                    // invocations
    uint channels, height, width;
    uint kh, kw, out_h, out_w;
    int pad_h, pad_w;
    uint stride_h, stride_w, dil_h, dil_w;
    uint offset_groups, out_channels, groups;
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint plane = pc.out_h * pc.out_w, taps = pc.kh * pc.kw;
    uint p = i % plane;
    if (MODE == 0) {
        uint row = (i / plane) % (pc.channels * taps), b = i / (plane * pc.channels * taps);
        uint c = row / taps, tap = row % taps, ki = tap / pc.kw, kj = tap % pc.kw;
        uint og = c / (pc.channels / pc.offset_groups);
        uint h_col = p / pc.out_w, w_col = p % pc.out_w;
        Tensor off = Tensor(pc.aux);
        uint off_at = ((b * pc.offset_groups + og) * 2u * taps + 2u * tap) * plane + p;
        precise float base_h = float(-pc.pad_h) + float(ki) * float(pc.dil_h);
        precise float base_w = float(-pc.pad_w) + float(kj) * float(pc.dil_w);
        precise float h_im = float(h_col * pc.stride_h) + base_h + LOAD(off, off_at);
        precise float w_im = float(w_col * pc.stride_w) + base_w + LOAD(off, off_at + plane);
        int h = int(pc.height), w = int(pc.width);
        uint idx00 = 0u, idx01 = 0u, idx10 = 0u, idx11 = 0u;
        precise float w00 = 0.0, w01 = 0.0, w10 = 0.0, w11 = 0.0;
        if (!(h_im <= -1.0 || h_im >= float(h) || w_im <= -1.0 || w_im >= float(w))) {
            precise float h_floor = floor(h_im), w_floor = floor(w_im);
            int h_low = int(h_floor), w_low = int(w_floor), h_high = h_low + 1, w_high = w_low + 1;
            precise float lh = h_im - h_floor, lw = w_im - w_floor;
            precise float hh = 1.0 - lh, hw = 1.0 - lw;
            bool v00 = h_low >= 0 && w_low >= 0, v01 = h_low >= 0 && w_high < w;
            bool v10 = h_high < h && w_low >= 0, v11 = h_high < h && w_high < w;
            w00 = v00 ? hh * hw : 0.0;
            w01 = v01 ? hh * lw : 0.0;
            w10 = v10 ? lh * hw : 0.0;
            w11 = v11 ? lh * lw : 0.0;
            idx00 = v00 ? uint(h_low * w + w_low) : 0u;
            idx01 = v01 ? uint(h_low * w + w_high) : 0u;
            idx10 = v10 ? uint(h_high * w + w_low) : 0u;
            idx11 = v11 ? uint(h_high * w + w_high) : 0u;
        }
        Tensor x = Tensor(pc.src);
        uint im = (b * pc.channels + c) * pc.height * pc.width;
        precise float val = w00 * LOAD(x, im + idx00) + w01 * LOAD(x, im + idx01) + w10 * LOAD(x, im + idx10)
                          + w11 * LOAD(x, im + idx11);
        if (MASK != 0) {
            val *= LOAD(Tensor(pc.extra), ((b * pc.offset_groups + og) * taps + tap) * plane + p);
        }
        STORE(Tensor(pc.dst), i, val);
    } else {
        uint m = (i / plane) % pc.out_channels;
        Tensor y = Tensor(pc.dst);
        STORE(y, i, LOAD(y, i) + LOAD(Tensor(pc.extra), m));
    }
}
