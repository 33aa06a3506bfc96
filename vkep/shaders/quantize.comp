#version 450
// QuantizeLinear (MODE 0: float x -> 8-bit y = clamp(round_half_even(x / scale) + zp)) and DequantizeLinear
// (MODE 1: 8-bit or int32 x -> float y = (x - zp) * scale), per tensor or per axis: the scale and zero
// point of element g are at (g / div) % mod (div = mod = 1 per tensor); blocked (block > 0: x's axis of
// length mod split into blocks of `block`, `div` the elements after the axis): at
// ((g / (mod div)) blocks + (g / div) % mod / block) div + g % div. The scale has the float side's
// type, the zero point the integer side's; a zero zp address means zero points of 0. NaN quantizes to the
// type's lowest value, as ORT's CPU EP gives it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64  // (lavapipe runs a workgroup's dead lanes too: small tensors take narrow groups)
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, scale, zp, y;
    uint n, div, mod, block, blocks;
    GROUP_BASE;
} pc;

void main() {
    uint i = FLAT_ID(WG);
    if (i >= pc.n) return;
    uint c = pc.block == 0 ? (i / pc.div) % pc.mod
                           : ((i / (pc.mod * pc.div)) * pc.blocks + (i / pc.div) % pc.mod / pc.block) * pc.div + i % pc.div;
    if (MODE == 0) {
        float scale = LOAD(Tensor(pc.scale), c);
#if DTYPE_Y == 4
        const int lo = 0, hi = 255;
#else
        const int lo = -128, hi = 127;
#endif
        float zp = pc.zp != 0 ? float(TensorY(pc.zp).v[c]) : 0.0;
        float q = roundEven(LOAD(Tensor(pc.x), i) / scale) + zp;
        q = isnan(q) ? float(lo) : clamp(q, float(lo), float(hi));
        TensorY(pc.y).v[i] = STORE_TY(int(q));
    } else {
        float scale = float(TensorY(pc.scale).v[c]);
        float zp = pc.zp != 0 ? float(LOAD(Tensor(pc.zp), c)) : 0.0;
        STORE_Y(TensorY(pc.y), i, (float(LOAD(Tensor(pc.x), i)) - zp) * scale);
    }
}
