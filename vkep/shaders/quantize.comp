#version 450
// QuantizeLinear (MODE 0: float x -> 8- or 16-bit y = clamp(round_half_even(x / scale) + zp)) and DequantizeLinear
// (MODE 1: 8-bit, 16-bit or int32 x -> float y = (x - zp) * scale), per tensor or per axis: the scale and zero
// point of element g are at (g / div) % mod (div = mod = 1 per tensor); blocked (block > 0: x's axis of
// length mod split into blocks of `block`, `div` the elements after the axis): at
// ((g / (mod div)) blocks + (g / div) % mod / block) div + g % div. The scale has the float side's
// type, the zero point the integer side's; a zero zp address means zero points of 0. NaN quantizes to the
// type's lowest value, as ORT's CPU EP gives it. NIBBLES (uint4 1, int4 2): the integer side is 4-bit, two
// elements a byte, element 2k in the low nibble of byte k (its zero points likewise); quantizing, an invocation
// then writes one byte, two elements.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 64  // (lavapipe runs a workgroup's dead lanes too: small tensors take narrow groups)
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint NIBBLES = 0;
layout(constant_id = 2) const uint WIDE = 0;  // 0: one element (or byte) a lane; else the ones a workgroup covers

layout(push_constant, scalar) uniform Push {
    uint64_t x, scale, zp, y;
    uint n, div, mod, block, blocks;
    GROUP_BASE;
} pc;

uint channel(uint i) {  // the index of element i's scale and zero point (per tensor: no division)
    if (pc.block == 0 && pc.mod == 1u) return 0u;
    return pc.block == 0 ? (i / pc.div) % pc.mod
                         : ((i / (pc.mod * pc.div)) * pc.blocks + (i / pc.div) % pc.mod / pc.block) * pc.div + i % pc.div;
}

#if DTYPE_Y == 4
int nibble_y(uint64_t base, uint i) {  // element i of a 4-bit tensor stored as the output type's bytes
    int v = int(uint(TensorY(base).v[i / 2]) >> (4 * (i & 1))) & 15;
    return NIBBLES == 2 ? (v ^ 8) - 8 : v;
}
#endif
#if DTYPE == 4
int nibble_x(uint64_t base, uint i) {  // the same, stored as the input type's bytes
    int v = int(uint(Tensor(base).v[i / 2]) >> (4 * (i & 1))) & 15;
    return NIBBLES == 2 ? (v ^ 8) - 8 : v;
}
#endif

#if DTYPE_Y >= 4  // (the integer types: 4-bit as uint8, 8-bit, 16-bit)
int quantized(uint i) {  // element i of y, clamped to its type (NaN: the lowest value)
    uint c = channel(i);
    float scale = LOAD(Tensor(pc.scale), c);
#if DTYPE_Y == 4
    int lo = NIBBLES == 2 ? -8 : 0, hi = NIBBLES == 2 ? 7 : NIBBLES == 1 ? 15 : 255;
    uint64_t zp_at = PRESENT_OR(pc.zp, pc.y);
    uint zc = PRESENT_AT(pc.zp, c);
    float zp = NIBBLES != 0 ? float(nibble_y(zp_at, zc)) : float(TensorY(zp_at).v[zc]);
    zp = pc.zp == 0 ? 0.0 : zp;
#else
    const int lo = DTYPE_Y == 5 ? -128 : DTYPE_Y == 6 ? -32768 : 0, hi = DTYPE_Y == 5 ? 127 : DTYPE_Y == 6 ? 32767 : 65535;
    float zp = float(TensorY(PRESENT_OR(pc.zp, pc.y)).v[PRESENT_AT(pc.zp, c)]);
    zp = pc.zp != 0 ? zp : 0.0;
#endif
    float q = roundEven(LOAD(Tensor(pc.x), i) / scale) + zp;
    return int(isnan(q) ? float(lo) : clamp(q, float(lo), float(hi)));
}
#endif

void one(uint i) {
    if (MODE == 0) {
#if DTYPE_Y >= 4
#if DTYPE_Y == 4
        if (NIBBLES != 0) {  // byte i: elements 2i and 2i + 1
            if (2 * i >= pc.n) return;
            int low = quantized(2 * i) & 15, high = 2 * i + 1 < pc.n ? quantized(2 * i + 1) & 15 : 0;
            TensorY(pc.y).v[i] = uint8_t(low | (high << 4));
            return;
        }
#endif
        if (i >= pc.n) return;
        TensorY(pc.y).v[i] = STORE_TY(quantized(i));
#endif
    } else {
        if (i >= pc.n) return;
        uint c = channel(i);
        float scale = float(TensorY(pc.scale).v[c]);
#if DTYPE == 4
        float x = NIBBLES != 0 ? float(nibble_x(pc.x, i)) : float(LOAD(Tensor(pc.x), i));
        uint64_t zp_at = PRESENT_OR(pc.zp, pc.x);
        uint zc = PRESENT_AT(pc.zp, c);
        float zp = NIBBLES != 0 ? float(nibble_x(zp_at, zc)) : float(LOAD(Tensor(zp_at), zc));
        zp = pc.zp == 0 ? 0.0 : zp;
#else
        float x = float(LOAD(Tensor(pc.x), i));
        float zp = float(LOAD(Tensor(PRESENT_OR(pc.zp, pc.x)), PRESENT_AT(pc.zp, c)));
        zp = pc.zp != 0 ? zp : 0.0;
#endif
        STORE_Y(TensorY(pc.y), i, (x - zp) * scale);
    }
}

void main() {
    if (WIDE == 0) {
        one(FLAT_ID(WG));
        return;
    }
    // (binary.comp's WIDE: fewer workgroups, each of which costs lavapipe a fixed setup)
    uint first = FLAT_GROUP * WIDE, lane = gl_LocalInvocationID.x;
    for (uint k = 0; k < WIDE / WG; ++k) {
        uint i = first + k * WG + lane;
        if (i >= pc.n) break;
        one(i);
    }
}
