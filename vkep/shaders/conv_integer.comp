#version 450
// ConvInteger (REQUANT 0: int32 Y) and QLinearConv (REQUANT 1: 8-bit Y requantized as requantize.glsl says)
// over NCHW with 1 or 2 spatial dims (1-D as H = 1): each output sums
// (X - x_zp) * (W - w_zp) over the group's input channels and the kernel's taps in int32 (the padding adds
// nothing: ORT pads with the zero point), plus QLinearConv's int32 bias. X and W are 8-bit (X_SIGNED /
// W_SIGNED: int8, else uint8); w_zp and w_scale scalar or per output channel (their *_step 1); a zero
// address is an absent input (zero points 0). Sizes are packed two 16-bit halves to a word to fit the
// push constants (the host checks they fit).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"
#extension GL_EXT_control_flow_attributes : require

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

// Each invocation computes a TM x TN block: TM output channels of one group by TN neighbouring output pixels
// of one row, so that every input byte it loads serves TM channels and every weight TN pixels (timings in
// vkep/kernels/quantize.py).
layout(constant_id = 4) const uint TM = 16;  // 1, 4 or 16 (fewer where a group has fewer channels)
const uint TN = 8;  // CONV_TN in vkep/kernels/quantize.py

void main() {
    uint i = flat_index(64);
    uint ih = pc.in_hw >> 16, iw = pc.in_hw & 0xffffu, oh = pc.out_hw >> 16, ow = pc.out_hw & 0xffffu;
    uint m_tiles = (pc.mg + TM - 1) / TM, w_tiles = (ow + TN - 1) / TN, groups = pc.m / pc.mg;
    if (i >= groups * m_tiles * oh * w_tiles) return;
    uint wt = i % w_tiles, row = (i / w_tiles) % oh, mt = (i / (w_tiles * oh)) % m_tiles;
    uint g = i / (w_tiles * oh * m_tiles), batch = gl_WorkGroupID.z;
    uint kh = pc.kernel >> 16, kw = pc.kernel & 0xffffu, taps = kh * kw;
    uint sh = pc.stride >> 16, sw = pc.stride & 0xffffu, dh = pc.dilation >> 16, dw = pc.dilation & 0xffffu;
    int h0 = int(row * sh) - int(pc.pad >> 16);
    int w0 = int(wt * TN * sw) - int(pc.pad & 0xffffu);
    bool xs = X_SIGNED != 0, ws = W_SIGNED != 0;
    int xzp = rq_byte(PRESENT_OR(pc.xzp, pc.x), 0, xs);
    xzp = pc.xzp != 0 ? xzp : 0;
    uint oc[TM];
    int wzp[TM];
    [[unroll]] for (uint j = 0; j < TM; ++j) {
        oc[j] = g * pc.mg + min(mt * TM + j, pc.mg - 1);  // (past the group's last channel: computed, not stored)
        wzp[j] = rq_byte(PRESENT_OR(pc.wzp, pc.w), PRESENT_AT(pc.wzp, (pc.steps & 1u) != 0 ? oc[j] : 0), ws);
        wzp[j] = pc.wzp != 0 ? wzp[j] : 0;
    }
    uint x_base = (batch * groups * pc.cg + g * pc.cg) * ih * iw;
    int acc[TM][TN];
    [[unroll]] for (uint j = 0; j < TM; ++j)
        [[unroll]] for (uint k = 0; k < TN; ++k) acc[j][k] = 0;
    for (uint c = 0; c < pc.cg; ++c) {
        for (uint r = 0; r < kh; ++r) {
            int h = h0 + int(r * dh);
            if (uint(h) >= ih) continue;
            uint x_row = x_base + (c * ih + uint(h)) * iw;
            for (uint s = 0; s < kw; ++s) {
                int xv[TN], wv[TM];
                [[unroll]] for (uint k = 0; k < TN; ++k) {  // the padding adds nothing (ORT pads with x_zp)
                    int w = w0 + int(k * sw + s * dw);
                    bool inside = uint(w) < iw;  // (the load reads a valid address either way, then the choice:
                    int v = rq_byte(pc.x, x_row + (inside ? uint(w) : 0u), xs);  // common.glsl PRESENT_OR)
                    xv[k] = inside ? v - xzp : 0;
                }
                [[unroll]] for (uint j = 0; j < TM; ++j)
                    wv[j] = rq_byte(pc.w, (oc[j] * pc.cg + c) * taps + r * kw + s, ws) - wzp[j];
                [[unroll]] for (uint j = 0; j < TM; ++j)
                    [[unroll]] for (uint k = 0; k < TN; ++k) acc[j][k] += wv[j] * xv[k];
            }
        }
    }
    float y_scale = REQUANT != 0 ? RqFloats(pc.ys).v[0] : 0.0, x_scale = REQUANT != 0 ? RqFloats(pc.xs).v[0] : 0.0;
    int yzp = rq_byte(PRESENT_OR(pc.yzp, pc.x), 0, Y_SIGNED != 0);
    yzp = pc.yzp != 0 ? yzp : 0;
    [[unroll]] for (uint j = 0; j < TM; ++j) {
        if (mt * TM + j >= pc.mg) break;
        uint o = (batch * pc.m + oc[j]) * oh * ow + row * ow + wt * TN;
        float mult = 0.0;
        int bias = 0;
        if (REQUANT != 0) {
            mult = rq_multiplier(x_scale, RqFloats(pc.ws).v[(pc.steps & 2u) != 0 ? oc[j] : 0], y_scale);
            bias = Ints(PRESENT_OR(pc.bias, pc.y)).v[PRESENT_AT(pc.bias, oc[j])];
            bias = pc.bias != 0 ? bias : 0;
        }
        [[unroll]] for (uint k = 0; k < TN; ++k) {
            if (wt * TN + k >= ow) break;
            if (REQUANT == 0)
                Ints(pc.y).v[o + k] = acc[j][k];
            else
                RqBytes(pc.y).v[o + k] = uint8_t(requantize(acc[j][k] + bias, mult, yzp, Y_SIGNED != 0) & 0xff);
        }
    }
}
