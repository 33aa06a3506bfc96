// Exact float32 arithmetic from GLSL's, for numbers that must equal the CPU's to the last bit: error-free
// sums and products, and division correctly rounded from '/' (Vulkan allows 2.5 ulp for it). Every
// operation 'precise': no contraction into fma. Used by resize.comp, requantize.glsl and MatMulNBits; fma_exact by
// mlas_sgemm.glsl and softmax.comp.
#ifndef VKEP_PRECISE_GLSL
#define VKEP_PRECISE_GLSL

precise vec2 precise_two_sum(float a, float b) {  // a + b = s + e exactly
    float s = a + b, bb = s - a;
    return vec2(s, (a - (s - bb)) + (b - bb));
}

// Dekker: a b = p + e exactly. The operands split into 12-bit halves by masking their low mantissa bits (Veltkamp's
// 4097 a overflowed past FLT_MAX / 4097 = 8.3e34, where quantization scales reach 1.3e36 when a mask holds
// float32's lowest); an infinite product has no error term
precise vec2 precise_two_prod(float a, float b) {
    float p = a * b;
    if (isinf(p)) return vec2(p, 0.0);
    float ah = uintBitsToFloat(floatBitsToUint(a) & 0xfffff000u), bh = uintBitsToFloat(floatBitsToUint(b) & 0xfffff000u);
    float al = a - ah, bl = b - bh;
    return vec2(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}

// a / b as q + r / b: q from '/', its remainder a - q b exact; a quotient that is 0, infinite or NaN has none
precise vec2 precise_div_pair(float a, float b) {
    float q = a / b;
    if (q == 0.0 || isinf(q) || isnan(q)) return vec2(q, 0.0);
    vec2 p = precise_two_prod(q, b);
    return vec2(q, ((a - p.x) - p.y) / b);
}

precise float precise_div(float a, float b) {  // correctly rounded a / b
    vec2 q = precise_div_pair(a, b);
    return q.x + q.y;
}

// a * b + c rounded once (x86's vfmadd), whatever the device's fma() does (lavapipe's rounds the product apart), in
// float (Boldo and Melquiond): the exact product's tail added rounded to odd, then one rounding. (A double version,
// the product plus c rounded to odd in double then to float, was exact on Mesa 22.3's lavapipe but 6,096 of 200,000
// of softmax.comp's exps apart on Mesa 26's: not kept.)
precise float fma_exact(float a, float b, float c) {
    vec2 p = precise_two_prod(a, b);
    vec2 t = precise_two_sum(c, p.x);
    vec2 u = precise_two_sum(t.y, p.y);
    float v = u.x;
    uint bits = floatBitsToUint(v);
    if (u.y != 0.0 && (bits & 1u) == 0u) {  // inexact and even: step one ulp towards the lost part (round to odd)
        bits = (v < 0.0) == (u.y < 0.0) ? bits + 1u : bits - 1u;
        v = uintBitsToFloat(bits);
    }
    return t.x + v;
}

#endif
