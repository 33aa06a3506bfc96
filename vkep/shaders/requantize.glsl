// Requantization of an int32 accumulator to 8 bits, computed as ORT's CPU EP (MLAS) does, so that values on
// a rounding boundary land where the CPU EP puts them:
//   multiplier = (a_scale * b_scale) / y_scale, each operation rounded to float32 (ComputeOutputScale);
//   v = float(acc) * multiplier, clamped to [lo - zp, hi - zp] (NaN to lo - zp, as _mm_max_ps gives it),
//   y = round_half_even(v) + zp (MlasRequantizeOutput).
// Every operation is 'precise' (no fma contraction) and the division correctly rounded (Vulkan allows
// 2.5 ulp for '/'): the quotient's remainder from an exact (Dekker) product corrects it.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#include "precise.glsl"

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer RqFloats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 1) buffer RqBytes { uint8_t v[]; };

precise float rq_multiplier(float a_scale, float b_scale, float y_scale) {
    float p = a_scale * b_scale;
    return precise_div(p, y_scale);
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
