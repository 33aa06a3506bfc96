// MLAS's logistic (MlasComputeLogistic: ORT's CPU EP's Sigmoid, and the table of its QLinearSigmoid) to the last
// bit: MlasLogisticKernelFma3's rational polynomial (what x86-64 machines with AVX2 run), its fused multiply-adds
// exact (precise.glsl's fma_exact: lavapipe does not fuse GLSL's fma()). Used by qlinear_lookup.comp and
// unary_ops.glsl, and with mlas_tanh (below: also unary_ops.glsl's Tanh and tanh Gelu) by recurrent.comp's LSTM.
// MLAS's exp too: the Exp op's (unary_ops.glsl) and, from x - max, Softmax's (softmax.comp).
#ifndef VKEP_MLAS_LOGISTIC_GLSL
#define VKEP_MLAS_LOGISTIC_GLSL
#include "precise.glsl"

// MLAS's exp range reduction and polynomial (MlasExpConstants; products and sums as its vfmadd and vaddps) of an x
// already clamped: exp(x) = p 2^m, returned as p, with t = x / ln 2 plus the rounding bias (m in its low bits)
precise float mlas_exp_reduced(float x, out float m, out float t) {
    float bias = uintBitsToFloat(0x4b400000u);  // RoundingBias, 1.5 * 2^23
    t = fma_exact(uintBitsToFloat(0x3fb8aa3bu), x, bias);  // x / ln 2 plus the bias
    precise float rounded = t - bias;  // round(x / ln 2)
    m = rounded;
    x = fma_exact(m, uintBitsToFloat(0xbf317200u), x);  // x - m ln2_high
    x = fma_exact(m, uintBitsToFloat(0xb5bfbe8eu), x);  // x - m ln2_low
    float p = fma_exact(uintBitsToFloat(0x3ab4a000u), x, uintBitsToFloat(0x3c092f6eu));
    p = fma_exact(p, x, uintBitsToFloat(0x3d2aadadu));
    p = fma_exact(p, x, uintBitsToFloat(0x3e2aaa28u));
    p = fma_exact(p, x, uintBitsToFloat(0x3efffffbu));
    p = fma_exact(p, x, 1.0);
    return fma_exact(p, x, 1.0);
}

// MLAS's exp (MlasComputeExp: ORT's CPU EP's Exp of float32) to the last bit: x clamped to [LowerRange, UpperRange]
float mlas_exp(float x) {
    if (isnan(x)) return x;
    x = clamp(x, uintBitsToFloat(0xc2cff1b5u), 88.7762626647950);  // (-103.97: below it exp is 0 in float)
    float m, t;
    float p = mlas_exp_reduced(x, m, t);
    return ldexp_exact(p, int(m));
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
    // (a zero keeps its sign, as on the CPU: precise_div's remainder would add +0; a denormal that the device flushes
    // becomes the zero of its sign)
    return v == 0.0 ? uintBitsToFloat(floatBitsToUint(x) & 0x80000000u) : precise_div(p * v, q);
}

// MLAS's erf (MlasComputeErf: ORT's CPU EP's Erf and erf Gelu) to the last bit, as ORT 1.32's MlasErfKernelFma3
// evaluates it: a polynomial in x^2 up to |x| = 0.921875, else 1 - exp(-polynomial in |x|) with MLAS's own exp,
// the sign put back; fused multiply-adds emulated. |x| is not clamped (the constants' 3.725 is not applied: 1.0 from
// |x| ~3.9 on, as the CPU EP gives; equal to it at every one of 200,000 points over [-6, 6], 3,000 over [3.6, 12],
// and 20, 100, 1e10, inf). Past 8 the answer is 1 (the polynomial's overflow would make fma_exact's tail NaN).
precise float mlas_erf(float x) {
    uint sign = floatBitsToUint(x) & 0x80000000u;
    float a = uintBitsToFloat(floatBitsToUint(x) & 0x7fffffffu);
    if (a > 8.0) return uintBitsToFloat(floatBitsToUint(1.0) | sign);
    if (a <= 0.921875) {
        float s = a * a;
        float r = fma_exact(-5.99104969e-4, s, 4.99339588e-3);
        r = fma_exact(r, s, -2.67667342e-2);
        r = fma_exact(r, s, 1.12818025e-1);
        r = fma_exact(r, s, -3.76124859e-1);
        r = fma_exact(r, s, 1.28379151e-1);
        return uintBitsToFloat(floatBitsToUint(fma_exact(r, a, a)) | sign);
    }
    float r = fma_exact(1.72948930e-5, a, -3.83208680e-4);
    r = fma_exact(r, a, 3.88393435e-3);
    r = fma_exact(r, a, -2.42545605e-2);
    r = fma_exact(r, a, 1.06777847e-1);
    r = fma_exact(r, a, 6.34846687e-1);
    r = fma_exact(r, a, 1.28717512e-1);
    float e = -fma_exact(r, a, a);  // exp(e) below, e in [-88.4, 0]
    e = -88.3762626647949 > e ? -88.3762626647949 : e;  // (vmaxps(lower, e): a NaN goes on)
    float n = fma_exact(1.44269504088896341, e, 1.25829120e+7) - 1.25829120e+7;  // round(e / ln 2)
    float f = fma_exact(n, -1.42860677e-6, fma_exact(n, -6.93145752e-1, e));
    float y = fma_exact(1.38319808e-3, f, 8.37550033e-3);
    y = fma_exact(y, f, 4.16689515e-2);
    y = fma_exact(y, f, 1.66664466e-1);
    y = fma_exact(y, f, 4.99999851e-1);
    y = fma_exact(y, f, 1.0);
    y = fma_exact(y, f, 1.0);
    y = 1.0 - y * uintBitsToFloat(uint(int(n) + 127) << 23);
    return uintBitsToFloat(floatBitsToUint(y) | sign);
}

// ORT's Gelus (Gelu-20, com.microsoft Gelu, FastGelu, BiasGelu) as its CPU EP computes them: the erf form
// x / 2 (erf(x sqrt(1/2)) + 1), the tanh form x / 2 (tanh(x (C x x + B)) + 1), through MLAS's erf and tanh, each
// operation rounded on its own. ort_gelu_from(x, e): the last step from erf or tanh's value e.
precise float ort_gelu_tanh_arg(float x) { return x * (0.035677408136300125 * x * x + 0.7978845608028654); }
precise float ort_gelu_from(float x, float e) { return 0.5 * x * (e + 1.0); }

#endif
