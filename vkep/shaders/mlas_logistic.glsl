// MLAS's logistic (MlasComputeLogistic: ORT's CPU EP's Sigmoid, and the table of its QLinearSigmoid) to the last
// bit: MlasLogisticKernelFma3's rational polynomial (what x86-64 machines with AVX2 run), its fused multiply-adds
// emulated exactly (lavapipe does not fuse GLSL's fma()). Used by qlinear_lookup.comp and unary_ops.glsl, and with
// mlas_tanh (below) by recurrent.comp's LSTM.
#ifndef VKEP_MLAS_LOGISTIC_GLSL
#define VKEP_MLAS_LOGISTIC_GLSL
#include "precise.glsl"

// a * b + c rounded once (Boldo and Melquiond: the exact product's tail added rounded to odd, then one rounding)
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

precise float mlas_logistic(float x) {
    x = isnan(x) ? x : clamp(x, -18.0, 18.0);
    float x2 = x * x;
    float p = fma_exact(x2, 4.37031012579801e-11, 1.15627324459942e-07);
    p = fma_exact(x2, p, 6.08574864600143e-05);
    p = fma_exact(x2, p, 8.51377133304701e-03);
    p = fma_exact(x2, p, 2.48287947061529e-01);
    float q = fma_exact(x2, 6.10247389755681e-13, 5.76102136993427e-09);
    q = fma_exact(x2, q, 6.29106785017040e-06);
    q = fma_exact(x2, q, 1.70198817374094e-03);
    q = fma_exact(x2, q, 1.16817656904453e-01);
    q = fma_exact(x2, q, 9.93151921023180e-01);
    float r = precise_div(x * p, q) + 0.5;
    return isnan(r) ? r : max(r, 0.0);  // vmaxps(0, r) passes NaN on
}

// MLAS's tanh (MlasComputeTanh: what ORT's CPU EP's LSTM applies to its g and h gates) to the last bit: Eigen's
// rational polynomial on x clamped to [-9, 9], as MlasTanhKernelFma3 evaluates it (its fused multiply-adds
// emulated exactly). On this host it equals the CPU EP's Tanh in 500,000 of 500,000 values drawn over [-10, 10].
precise float mlas_tanh(float x) {
    float v = isnan(x) ? x : clamp(x, -9.0, 9.0);
    float v2 = v * v;
    float p = fma_exact(v2, -2.76076847742355e-16, 2.00018790482477e-13);
    p = fma_exact(p, v2, -8.60467152213735e-11);
    p = fma_exact(p, v2, 5.12229709037114e-08);
    p = fma_exact(p, v2, 1.48572235717979e-05);
    p = fma_exact(p, v2, 6.37261928875436e-04);
    p = fma_exact(p, v2, 4.89352455891786e-03);
    float q = fma_exact(v2, 1.19825839466702e-06, 1.18534705686654e-04);
    q = fma_exact(q, v2, 2.26843463243900e-03);
    q = fma_exact(q, v2, 4.89352518554385e-03);
    return precise_div(p * v, q);
}

#endif
