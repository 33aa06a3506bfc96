#version 450
// com.microsoft QLinearAdd (OP 0) and QLinearMul (OP 1) over 8-bit tensors (SIGNED: int8, else uint8),
// broadcast up to rank 4, computed as ORT's CPU EP does on x86-64 (MLAS: qladd_avx2.cpp, qlmul.cpp), so
// that values on a rounding boundary land where it puts them:
//   Add: r_a = s_a / s_c, r_b = s_b / s_c; base = z_c - fma(r_f, z_f, r_g * z_g);
//        c = fma(outer, r_outer, fma(inner, r_inner, base)), where which operand is f / outer follows
//        ORT's broadcast spans (the host decides: bit 0 of `flags` swaps f and g, bit 1 outer and inner)
//   Mul: c = float((a - z_a) * (b - z_b)) * ((s_a * s_b) / s_c) + z_c
// then rounded half to even; |c| >= 2^31 and NaN give the integer indefinite value, and the packs saturate.
// SIGNED 2: int8 tensors computed as the uint8 ones the CPU EP makes of them (x + 128, zero points + 128: its
// QDQS8ToU8Transformer, vkep/ort/qdq.py), whose float steps round otherwise in rare values; stored back - 128.
// Divisions are correctly rounded, products and sums 'precise' (requantize.glsl).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "requantize.glsl"
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#define WG 64  // (lavapipe runs a workgroup's dead lanes too: small tensors take narrow groups)
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint SIGNED = 0;
// MODE 0: each element computed; 1: the table of every pair of bytes (a << 8 | b: n = 65536, y the table, a and b
// unread); 2: each element looked up in that table, whose address comes in a_scale (the scales unread)
layout(constant_id = 2) const uint MODE = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp, y;
    uint n, rank_flags;        // rank in bits 0-7, flags from bit 8
    uint dims[4], a_strides[4], b_strides[4];
} pc;

// fma(float(a), r, c) with one rounding, for an integer a: GLSL's fma() need not be fused (lavapipe splits it),
// so the exact sum is formed in int64 (a * r's 33-bit mantissa and c's 24-bit one aligned, a term more than
// 28 binades below the other kept as a sticky bit) and rounded once by the conversion to float.
int64_t shift_sticky(int64_t v, int s) {  // v / 2^s, truncated, with its lowest bit set when bits were lost
    int64_t m = abs(v);
    int64_t kept = s >= 63 ? 0l : m >> s;
    bool lost = s >= 63 ? m != 0 : (m & ((1l << s) - 1l)) != 0;
    kept |= lost ? 1l : 0l;
    return v < 0 ? -kept : kept;
}

float fma_int(int a, float r, float c) {
    if (a == 0 || r == 0.0) return c;
    precise float product = float(a) * r;
    if (c == 0.0) return product;
    // special and denormal values (never among the scale ratios of real models): the plain expression
    if (isinf(r) || isnan(r) || isinf(c) || isnan(c) || abs(r) < 1.2e-38 || abs(c) < 1.2e-38) {
        precise float sum = product + c;
        return sum;
    }
    int er, ec;
    float fr = frexp(r, er), fc = frexp(c, ec);  // r = fr * 2^er, fr in [0.5, 1)
    int64_t tr = int64_t(a) * int64_t(fr * 16777216.0), tc = int64_t(fc * 16777216.0);
    er -= 24;
    ec -= 24;
    int d = er - ec;  // tr's binade above tc's
    int64_t x;
    int e;
    if (abs(d) <= 28) {
        x = d >= 0 ? (tr << d) + tc : tr + (tc << -d);
        e = min(er, ec);
    } else if (d > 0) {
        x = (tr << 28) + shift_sticky(tc, d - 28);
        e = er - 28;
    } else {
        x = shift_sticky(tr, -d - 28) + (tc << 28);
        e = ec - 28;
    }
    return ldexp(float(x), e);
}

const bool S = SIGNED == 1;
const int FLIP = SIGNED == 2 ? 0x80 : 0;  // (an int8 byte XOR 0x80, read unsigned, is its value + 128)

int zero_point(uint64_t t) {  // (read from a valid address whether given or not, then chosen: common.glsl PRESENT_OR)
    int z = rq_byte(PRESENT_OR(t, pc.a), 0, S);
    return t != 0 ? z ^ FLIP : FLIP;
}

// the stored byte of a OP b, for the operands' values (as rq_byte reads them, FLIP applied)
uint result(int a, int b, uint flags) {
    bool s = S;
    float sa = RqFloats(pc.a_scale).v[0], sb = RqFloats(pc.b_scale).v[0], sc = RqFloats(pc.c_scale).v[0];
    int za = zero_point(pc.a_zp), zb = zero_point(pc.b_zp), zc = zero_point(pc.c_zp);
    precise float c;
    if (OP == 0) {
        float ra = precise_div(sa, sc), rb = precise_div(sb, sc);
        bool swap_fixed = (flags & 1u) != 0, swap_outer = (flags & 2u) != 0;
        precise float g = swap_fixed ? ra * float(za) : rb * float(zb);
        precise float base = float(zc) - (swap_fixed ? fma_int(zb, rb, g) : fma_int(za, ra, g));
        float inner = swap_outer ? fma_int(a, ra, base) : fma_int(b, rb, base);
        c = swap_outer ? fma_int(b, rb, inner) : fma_int(a, ra, inner);
    } else {
        precise float ratio = precise_div(sa * sb, sc);
        c = float((a - za) * (b - zb)) * ratio + float(zc);
    }
    int q = (isnan(c) || abs(c) >= 2147483648.0) ? -2147483647 - 1 : int(roundEven(c));
    return uint((clamp(q, s ? -128 : 0, s ? 127 : 255) ^ FLIP) & 0xff);
}

void main() {
    uint i = flat_index(WG);
    if (i >= pc.n) return;
    uint rank = pc.rank_flags & 0xffu, flags = pc.rank_flags >> 8;
    if (MODE == 1) {  // (a byte's value as rq_byte reads it: sign-extended for int8)
        int a = S ? int(i << 16) >> 24 : int(i >> 8), b = S ? int(i << 24) >> 24 : int(i & 0xffu);
        RqBytes(pc.y).v[i] = uint8_t(result(a ^ FLIP, b ^ FLIP, flags));
        return;
    }
    uint ia = 0, ib = 0, rest = i;
    for (int d = int(rank) - 1; d > 0; --d) {
        uint coord = rest % pc.dims[d];
        rest /= pc.dims[d];
        ia += coord * pc.a_strides[d];
        ib += coord * pc.b_strides[d];
    }
    ia += rest * pc.a_strides[0];  // (the outermost coordinate is what is left: binary.comp)
    ib += rest * pc.b_strides[0];
    if (MODE == 2) {
        uint pair = (uint(RqBytes(pc.a).v[ia]) << 8) | uint(RqBytes(pc.b).v[ib]);
        RqBytes(pc.y).v[i] = RqBytes(pc.a_scale).v[pair];
        return;
    }
    int a = rq_byte(pc.a, ia, S) ^ FLIP, b = rq_byte(pc.b, ib, S) ^ FLIP;
    RqBytes(pc.y).v[i] = uint8_t(result(a, b, flags));
}
