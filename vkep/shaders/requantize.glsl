// Requantization of an int32 accumulator to 8 bits, computed as ORT's CPU EP (MLAS) does, so that values on
// a rounding boundary land where the CPU EP puts them:
//   multiplier = (a_scale * b_scale) / y_scale, each operation rounded to float32 (ComputeOutputScale);
//   v = float(acc) * multiplier, clamped to [lo - zp, hi - zp] (NaN to lo - zp, as _mm_max_ps gives it),
//   y = round_half_even(v) + zp (MlasRequantizeOutput).
// Every operation is 'precise' (no fma contraction) and the division correctly rounded (Vulkan allows
// 2.5 ulp for '/'): the quotient's remainder from an exact (Dekker) product corrects it.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer RqFloats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 1) buffer RqBytes { uint8_t v[]; };

precise vec2 rq_two_prod(float a, float b) {  // a b = p + e exactly, with correctly rounded * and +
    float p = a * b;
    float ca = 4097.0 * a, cb = 4097.0 * b;
    float ah = ca - (ca - a), bh = cb - (cb - b);
    float al = a - ah, bl = b - bh;
    return vec2(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}

precise float rq_div(float a, float b) {
    float q = a / b;
    vec2 p = rq_two_prod(q, b);
    return q + ((a - p.x) - p.y) / b;
}

precise float rq_multiplier(float a_scale, float b_scale, float y_scale) {
    float p = a_scale * b_scale;
    return rq_div(p, y_scale);
}

// an 8-bit value at byte i, sign-extended when is_signed
int rq_byte(uint64_t t, uint i, bool is_signed) {
    uint v = uint(RqBytes(t).v[i]);
    return is_signed ? int(v << 24) >> 24 : int(v);
}

int requantize(int acc, float multiplier, int zp, bool is_signed) {
    int lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
    precise float v = float(acc) * multiplier;
    float vlo = float(lo - zp), vhi = float(hi - zp);
    v = isnan(v) ? vlo : min(max(v, vlo), vhi);
    return int(roundEven(v)) + zp;
}
