// Exact float32 arithmetic from GLSL's, for numbers that must equal the CPU's to the last bit: error-free
// sums and products, and division correctly rounded from '/' (Vulkan allows 2.5 ulp for it). Every
// operation 'precise': no contraction into fma. Used by resize.comp, requantize.glsl and MatMulNBits.
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

#endif
