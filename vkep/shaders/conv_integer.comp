#version 450
// ConvInteger (REQUANT 0: int32 Y) and QLinearConv (REQUANT 1: 8-bit Y requantized as requantize.glsl says)
// over NCHW with 1 or 2 spatial dims (1-D as H = 1): each output sums
// (X - x_zp) * (W - w_zp) over the group's input channels and the kernel's taps in int32 (the padding adds
// nothing: ORT pads with the zero point), plus QLinearConv's int32 bias. X and W are 8-bit (X_SIGNED /
// W_SIGNED: int8, else uint8); w_zp and w_scale scalar or per output channel (their *_step 1); a zero
// address is an absent input (zero points 0). The attributes' sizes are packed two 16-bit halves to a word to fit
// the push constants (GetCapability checks they fit); the tensors' are whole words (a 1-D audio conv's width
// passes 65,535: Kokoro's noise convolutions).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint REQUANT = 0;
layout(constant_id = 1) const uint X_SIGNED = 0;
layout(constant_id = 2) const uint W_SIGNED = 0;
layout(constant_id = 3) const uint Y_SIGNED = 0;
// SATURATE: QLinearConv as ORT's CPU EP computes uint8 X times int8 W on x86-64 without VNNI (MLAS's vpmaddubsw,
// vkep/kernels/quantize.py): over the group's K in the order of its NHWC im2col, (ky, kx, c), the raw bytes'
// products added in pairs (k, k + 1) into int16 (so a pair may join two taps where the group's channels are
// odd), each pair sum clamped to [-32768, 32767], the padding's bytes the zero point; then the zero points taken
// off as sums: - x_zp * sum(w) - w_zp * sum(x) + K * x_zp * w_zp. SATURATE 2: int8 X that the CPU EP computes as
// the uint8 X + 128 (its QDQS8ToU8Transformer: vkep/ort/qdq.py), zero point + 128.
layout(constant_id = 5) const uint SATURATE = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, w, xzp, wzp, y, bias, xs, ws, ys, yzp;
    uint cg, m, mg;            // input channels per group, output channels, output channels per group
    uint ih, iw, oh, ow;       // the input's and the output's height and width
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
    uint ih = pc.ih, iw = pc.iw, oh = pc.oh, ow = pc.ow;
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
    int x_sum[TN], w_sum[TM];  // (SATURATE: the raw bytes' sums along K)
    [[unroll]] for (uint k = 0; k < TN; ++k) x_sum[k] = 0;
    [[unroll]] for (uint j = 0; j < TM; ++j) w_sum[j] = 0;
    int raw_xzp = SATURATE == 2 ? xzp + 128 : xzp;
    uint kk = pc.cg * taps, kc = 0, kr = 0, ks = 0;  // (SATURATE: element k's channel, kernel row and column)
    for (uint k = 0; SATURATE != 0 && k < kk; k += 2) {
        int xv[2][TN], wv[2][TM];
        [[unroll]] for (uint e = 0; e < 2; ++e) {
            bool real = k + e < kk;  // (a last odd element is alone)
            int h = h0 + int(kr * dh);
            uint x_row = x_base + (kc * ih + uint(clamp(h, 0, int(ih) - 1))) * iw;
            [[unroll]] for (uint n = 0; n < TN; ++n) {
                int w = w0 + int(n * sw + ks * dw);
                bool inside = uint(h) < ih && uint(w) < iw;
                int v = rq_byte(pc.x, x_row + (inside ? uint(w) : 0u), xs) + (SATURATE == 2 ? 128 : 0);
                xv[e][n] = real ? (inside ? v : raw_xzp) : 0;
                x_sum[n] += xv[e][n];
            }
            [[unroll]] for (uint j = 0; j < TM; ++j) {
                uint at = real ? (oc[j] * pc.cg + kc) * taps + kr * kw + ks : 0u;  // (an address valid either way)
                wv[e][j] = real ? rq_byte(pc.w, at, ws) : 0;
                w_sum[j] += wv[e][j];
            }
            if (++kc == pc.cg) {
                kc = 0;
                if (++ks == kw) { ks = 0; ++kr; }
            }
        }
        [[unroll]] for (uint j = 0; j < TM; ++j)
            [[unroll]] for (uint n = 0; n < TN; ++n)
                acc[j][n] += clamp(xv[0][n] * wv[0][j] + xv[1][n] * wv[1][j], -32768, 32767);
    }
    if (SATURATE != 0) {
        [[unroll]] for (uint j = 0; j < TM; ++j)
            [[unroll]] for (uint n = 0; n < TN; ++n)
                acc[j][n] += int(kk) * raw_xzp * wzp[j] - raw_xzp * w_sum[j] - wzp[j] * x_sum[n];
    }
    for (uint c = 0; SATURATE == 0 && c < pc.cg; ++c) {
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
