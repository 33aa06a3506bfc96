// Correctly rounded float32 division from '/' (Vulkan allows 2.5 ulp for it), for numbers that must equal
// the CPU's to the last bit. Every operation 'precise': no contraction into fma.
// (resize.comp holds the same helpers as its own copy.)
#ifndef VKEP_PRECISE_GLSL
#define VKEP_PRECISE_GLSL

precise vec2 precise_two_prod(float a, float b) {  // Dekker: a b = p + e exactly
    float p = a * b;
    float ca = 4097.0 * a, cb = 4097.0 * b;
    float ah = ca - (ca - a), bh = cb - (cb - b);
    float al = a - ah, bl = b - bh;
    return vec2(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}

precise float precise_div(float a, float b) {  // q from '/', corrected by its exact remainder a - q b
    float q = a / b;
    vec2 p = precise_two_prod(q, b);
    return q + ((a - p.x) - p.y) / b;
}

#endif
