#version 450
// ConvInteger (REQUANT 0: int32 Y) and QLinearConv (REQUANT 1: 8-bit Y requantized as requantize.glsl says)
// over NCHW with 1 or 2 spatial dims (1-D as H = 1): one invocation per output, summing
// (X - x_zp) * (W - w_zp) over the group's input channels and the kernel's taps in int32 (the padding adds
// nothing: ORT pads with the zero point), plus QLinearConv's int32 bias. X and W are 8-bit (X_SIGNED /
// W_SIGNED: int8, else uint8); w_zp and w_scale scalar or per output channel (their *_step 1); a zero
// address is an absent input (zero points 0). Sizes are packed two 16-bit halves to a word to fit the
// push constants (the host checks they fit).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint REQUANT = 0;
layout(constant_id = 1) const uint X_SIGNED = 0;
layout(constant_id = 2) const uint W_SIGNED = 0;
layout(constant_id = 3) const uint Y_SIGNED = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, w, xzp, wzp, y, bias, xs, ws, ys, yzp;
    uint cg, m, mg;            // input channels per group, output channels, output channels per group
    uint in_hw, out_hw;        // (h << 16) | w of the input and the output
    uint stride, dilation, pad, kernel;  // (h << 16) | w each; pad: the leading pads
    uint steps;                // bit 0: w_zp per channel, bit 1: w_scale per channel
} pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Ints { int v[]; };

void main() {
    uint i = flat_index(64);
    uint ih = pc.in_hw >> 16, iw = pc.in_hw & 0xffffu, oh = pc.out_hw >> 16, ow = pc.out_hw & 0xffffu;
    uint pixels = oh * ow;
    if (i >= pc.m * pixels) return;
    uint batch = gl_WorkGroupID.z, oc = i / pixels, p = i % pixels;
    uint kh = pc.kernel >> 16, kw = pc.kernel & 0xffffu;
    int h0 = int((p / ow) * (pc.stride >> 16)) - int(pc.pad >> 16);
    int w0 = int((p % ow) * (pc.stride & 0xffffu)) - int(pc.pad & 0xffffu);
    uint dh = pc.dilation >> 16, dw = pc.dilation & 0xffffu;
    int xzp = pc.xzp != 0 ? rq_byte(pc.xzp, 0, X_SIGNED != 0) : 0;
    int wzp = pc.wzp != 0 ? rq_byte(pc.wzp, (pc.steps & 1u) != 0 ? oc : 0, W_SIGNED != 0) : 0;
    uint c0 = (oc / pc.mg) * pc.cg, channels = pc.cg * (uint(pc.m / pc.mg));
    uint x_base = (batch * channels + c0) * ih * iw, w_base = oc * pc.cg * kh * kw;
    int acc = 0;
    for (uint c = 0; c < pc.cg; ++c) {
        for (uint r = 0; r < kh; ++r) {
            int h = h0 + int(r * dh);
            if (uint(h) >= ih) continue;
            for (uint s = 0; s < kw; ++s) {
                int w = w0 + int(s * dw);
                if (uint(w) >= iw) continue;
                int xv = rq_byte(pc.x, x_base + (c * ih + uint(h)) * iw + uint(w), X_SIGNED != 0);
                int wv = rq_byte(pc.w, w_base + (c * kh + r) * kw + s, W_SIGNED != 0);
                acc += (xv - xzp) * (wv - wzp);
            }
        }
    }
    uint o = batch * pc.m * pixels + i;
    if (REQUANT == 0) {
        Ints(pc.y).v[o] = acc;
        return;
    }
    if (pc.bias != 0) acc += Ints(pc.bias).v[oc];
    float mult = rq_multiplier(RqFloats(pc.xs).v[0], RqFloats(pc.ws).v[(pc.steps & 2u) != 0 ? oc : 0],
                               RqFloats(pc.ys).v[0]);
    int yzp = pc.yzp != 0 ? rq_byte(pc.yzp, 0, Y_SIGNED != 0) : 0;
    RqBytes(pc.y).v[o] = uint8_t(requantize(acc, mult, yzp, Y_SIGNED != 0) & 0xff);
}
