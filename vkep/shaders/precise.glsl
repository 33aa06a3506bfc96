// Exact float32 arithmetic from GLSL's, for numbers that must equal the CPU's to the last bit: error-free
// sums and products, and division correctly rounded from '/' (Vulkan allows 2.5 ulp for it). Every
// operation 'precise': no contraction into fma. Used by resize.comp, requantize.glsl and MatMulNBits; fma_exact by
// mlas_sgemm.glsl and softmax.comp (a shader's FLOAT64 variant makes it exact: the includer enables float64 types).
#ifndef VKEP_PRECISE_GLSL
#define VKEP_PRECISE_GLSL

precise vec2 precise_two_sum(float a, float b) {  // a + b = s + e exactly
    float s = a + b, bb = s - a;
    return vec2(s, (a - (s - bb)) + (b - bb));
}

precise vec2 precise_two_prod(float a, float b) {  // Dekker: a b = p + e exactly
    float p = a * b;
    float ca = 4097.0 * a, cb = 4097.0 * b;
    float ah = ca - (ca - a), bh = cb - (cb - b);
    float al = a - ah, bl = b - bh;
    return vec2(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}

precise vec2 precise_div_pair(float a, float b) {  // a / b as q + r / b: q from '/', its remainder a - q b exact
    float q = a / b;
    vec2 p = precise_two_prod(q, b);
    return vec2(q, ((a - p.x) - p.y) / b);
}

precise float precise_div(float a, float b) {  // correctly rounded a / b
    vec2 q = precise_div_pair(a, b);
    return q.x + q.y;
}

// a * b + c rounded once (x86's vfmadd), whatever the device's fma() does (lavapipe's rounds the product apart).
// The FLOAT64 variant of a shader: the exact double product plus c (TwoSum) rounded to odd, then to float (53 >= 24 + 2
// bits); else in float (Boldo and Melquiond): the exact product's tail added rounded to odd, then one rounding
#ifdef FLOAT64
float fma_exact(float a, float b, float c) {
    precise double p = double(a) * double(b);
    precise double s = p + double(c);
    precise double bb = s - p;
    precise double e = (p - (s - bb)) + (double(c) - bb);
    if (e != 0.0) {
        uint64_t bits = packUint2x32(unpackDouble2x32(s));
        if ((bits & 1ul) == 0ul) bits = (e > 0.0) == (s > 0.0) ? bits + 1ul : bits - 1ul;
        s = packDouble2x32(unpackUint2x32(bits));
    }
    return float(s);
}
#else
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

#endif
