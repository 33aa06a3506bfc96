#version 450
// com.microsoft QLinearGlobalAveragePool (GLOBAL 1) and QLinearAveragePool (GLOBAL 0) over 8-bit NCHW tensors
// (SIGNED: int8, else uint8), one invocation per output, computed as ORT's CPU EP does:
//   global (MlasQLinearGlobalAveragePoolNchw; also an average pool whose window is the whole image, unpadded):
//     acc = sum(x) - x_zp * size (int32), multiplier = x_scale / (y_scale * float(size)),
//     y = requantize(acc, multiplier, y_zp) (requantize.glsl)
//   windowed (QLinearPool2DTask): the float sum of x_scale * float(x - x_zp) over the window's taps inside the
//     input, row by row, divided by the taps (or kernel_size with COUNT_PAD), then
//     y = clamp(int(round_half_even(avg / y_scale + y_zp))) (|value| >= 2^31 and NaN give the lowest value, as
//     x86's conversion gives INT_MIN).
// A 1-D pool is a 2-D one of height 1. CHANNELS_LAST: x and y are [N, spatial..., C] (ORT's transpose optimizer sets
// channels_last when it pushes an NHWC model's Transposes through the pool). SIGNED 2: int8 tensors computed as the uint8 ones the CPU EP makes of
// them (x + 128, zero points + 128: its QDQS8ToU8Transformer, vkep/ort/qdq.py), where the windowed form's
// `+ y_zp` rounds otherwise in rare values; stored back - 128.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "requantize.glsl"

#define WG 64  // (lavapipe runs a workgroup's dead lanes too: small tensors take narrow groups)
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint GLOBAL = 0;
layout(constant_id = 1) const uint SIGNED = 0;
layout(constant_id = 2) const uint COUNT_PAD = 0;
layout(constant_id = 3) const uint CHANNELS_LAST = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, x_scale, x_zp, y_scale, y_zp, y;
    uint n;                 // outputs
    uint ih, iw, oh, ow;    // global: ih * iw is the image size, oh = ow = 1
    uint kh, kw, sh, sw;
    int ph, pw;             // leading pads
    uint channels;          // CHANNELS_LAST: C, the elements between one pixel's and the next's
    GROUP_BASE;
} pc;

const int FLIP = SIGNED == 2 ? 0x80 : 0;  // (an int8 byte XOR 0x80, read unsigned, is its value + 128)

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    bool s = SIGNED == 1;
    int x_zp = rq_byte(PRESENT_OR(pc.x_zp, pc.x), 0, s), y_zp = rq_byte(PRESENT_OR(pc.y_zp, pc.x), 0, s);
    x_zp = pc.x_zp != 0 ? x_zp ^ FLIP : FLIP;
    y_zp = pc.y_zp != 0 ? y_zp ^ FLIP : FLIP;
    float x_scale = RqFloats(pc.x_scale).v[0], y_scale = RqFloats(pc.y_scale).v[0];
    uint osz = pc.oh * pc.ow, isz = pc.ih * pc.iw;
    // pixel t of this output's image and channel at base + t * step; p the output's pixel
    uint base = (i / osz) * isz, step = 1u, p = i % osz;
    if (CHANNELS_LAST != 0) {
        uint pixel = i / pc.channels;
        base = (pixel / osz) * isz * pc.channels + i % pc.channels;
        step = pc.channels;
        p = pixel % osz;
    }
    int result;
    if (GLOBAL == 1) {
        // steps of 8 unrolled taps: lavapipe ends an invocation's loops after 65,535 iterations in all
        int acc = -x_zp * int(isz);
        for (uint t0 = 0; t0 < isz; t0 += 8) {
            [[unroll]] for (uint j = 0; j < 8; ++j) {
                if (t0 + j < isz) acc += rq_byte(pc.x, base + (t0 + j) * step, s) ^ FLIP;
            }
        }
        precise float size_scale = y_scale * float(isz);
        result = requantize(acc, precise_div(x_scale, size_scale), y_zp, s);
    } else {
        int h0 = int((p / pc.ow) * pc.sh) - pc.ph, w0 = int((p % pc.ow) * pc.sw) - pc.pw;
        int h1 = min(h0 + int(pc.kh), int(pc.ih)), w1 = min(w0 + int(pc.kw), int(pc.iw));
        h0 = max(h0, 0);
        w0 = max(w0, 0);
        precise float sum = 0.0;
        for (int h = h0; h < h1; ++h) {
            for (int w = w0; w < w1; w += 8) {
                [[unroll]] for (int j = 0; j < 8; ++j) {
                    if (w + j < w1) {
                        int x = rq_byte(pc.x, base + (uint(h) * pc.iw + uint(w + j)) * step, s) ^ FLIP;
                        precise float v = x_scale * float(x - x_zp);
                        sum += v;
                    }
                }
            }
        }
        int count = COUNT_PAD == 1 ? int(pc.kh * pc.kw) : max(h1 - h0, 0) * max(w1 - w0, 0);
        precise float q = precise_div(precise_div(sum, float(count)), y_scale) + float(y_zp);
        result = (isnan(q) || abs(q) >= 2147483648.0) ? -2147483647 - 1 : int(roundEven(q));
    }
    int lo = s ? -128 : 0, hi = s ? 127 : 255;
    RqBytes(pc.y).v[i] = uint8_t((clamp(result, lo, hi) ^ FLIP) & 0xff);
}
