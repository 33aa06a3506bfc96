#version 450
// com.microsoft QLinearAdd (OP 0) and QLinearMul (OP 1) over 8-bit tensors (SIGNED: int8, else uint8),
// broadcast up to rank 4, computed as ORT's CPU EP does on x86-64 (MLAS: qladd_avx2.cpp, qlmul.cpp), so
// that values on a rounding boundary land where it puts them:
//   Add: r_a = s_a / s_c, r_b = s_b / s_c; fixed = z_c - fma(r_f, z_f, r_g * z_g);
//        c = fma(outer, r_outer, fma(inner, r_inner, fixed)), where which operand is f / outer follows
//        ORT's broadcast spans (the host decides: bit 0 of `flags` swaps f and g, bit 1 outer and inner)
//   Mul: c = float((a - z_a) * (b - z_b)) * ((s_a * s_b) / s_c) + z_c
// then rounded half to even; |c| >= 2^31 and NaN give the integer indefinite value, and the packs saturate.
// Divisions are correctly rounded, products and sums 'precise' (requantize.glsl).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint SIGNED = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp, y;
    uint n, rank_flags;        // rank in bits 0-7, flags from bit 8
    uint dims[4], a_strides[4], b_strides[4];
} pc;

int zero_point(uint64_t t) {
    return t != 0 ? rq_byte(t, 0, SIGNED != 0) : 0;
}

void main() {
    uint i = flat_index(256);
    if (i >= pc.n) return;
    uint rank = pc.rank_flags & 0xffu, flags = pc.rank_flags >> 8;
    uint ia = 0, ib = 0, rest = i;
    for (int d = int(rank) - 1; d >= 0; --d) {
        uint coord = rest % pc.dims[d];
        rest /= pc.dims[d];
        ia += coord * pc.a_strides[d];
        ib += coord * pc.b_strides[d];
    }
    bool s = SIGNED != 0;
    float sa = RqFloats(pc.a_scale).v[0], sb = RqFloats(pc.b_scale).v[0], sc = RqFloats(pc.c_scale).v[0];
    int za = zero_point(pc.a_zp), zb = zero_point(pc.b_zp), zc = zero_point(pc.c_zp);
    int a = rq_byte(pc.a, ia, s), b = rq_byte(pc.b, ib, s);
    precise float c;
    if (OP == 0) {
        float ra = rq_div(sa, sc), rb = rq_div(sb, sc);
        bool swap_fixed = (flags & 1u) != 0, swap_outer = (flags & 2u) != 0;
        precise float g = swap_fixed ? ra * float(za) : rb * float(zb);
        precise float fixed = float(zc) - (swap_fixed ? fma(rb, float(zb), g) : fma(ra, float(za), g));
        precise float inner = swap_outer ? fma(float(a), ra, fixed) : fma(float(b), rb, fixed);
        c = swap_outer ? fma(float(b), rb, inner) : fma(float(a), ra, inner);
    } else {
        precise float ratio = rq_div(sa * sb, sc);
        c = float((a - za) * (b - zb)) * ratio + float(zc);
    }
    int q = (isnan(c) || abs(c) >= 2147483648.0) ? -2147483647 - 1 : int(roundEven(c));
    RqBytes(pc.y).v[i] = uint8_t(clamp(q, s ? -128 : 0, s ? 127 : 255) & 0xff);
}
