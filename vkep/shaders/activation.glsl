// Float activations shared by unary.comp, binary.comp and recurrent.comp: accurate where lavapipe's builtins are not.

// tanh as a rational approximation (Eigen's float tanh, a few ulp): lavapipe's tanh() loses all relative
// precision near 0 and overflows exp() for large arguments
float tanh_safe(float v) {
    if (abs(v) < 0.0004) return v;
    float x = clamp(v, -7.90531110763549805, 7.90531110763549805);
    float x2 = x * x;
    float p = -2.76076847742355e-16;
    p = p * x2 + 2.00018790482477e-13;
    p = p * x2 - 8.60467152213735e-11;
    p = p * x2 + 5.12229709037114e-08;
    p = p * x2 + 1.48572235717979e-05;
    p = p * x2 + 6.37261928875436e-04;
    p = p * x2 + 4.89352455891786e-03;
    float q = 1.19825839466702e-06;
    q = q * x2 + 1.18534705686654e-04;
    q = q * x2 + 2.26843463243900e-03;
    q = q * x2 + 4.89352518554385e-03;
    return x * p / q;
}

// log(1 + y) accurate for small y (Goldberg's trick: the rounding of 1 + y cancels out), with common.glsl's log_eigen:
// lavapipe's log is 4e-8 off near 1, which the trick would carry into a small y's result. `precise`, or the
// compiler folds (1 + y) - 1 to y and the trick with it (asinh of 4.5e-5 was 3e-4 relative off)
float log1p_accurate(float y) {
    precise float u = 1.0 + y;
    precise float d = u - 1.0;
    if (u == 1.0) return y;
    if (isinf(u)) return log_eigen(u);  // (inf, or NaN for -inf: not inf / inf)
    return log_eigen(u) * (y / d);
}

// log(1 + exp(v)) without overflow
float softplus(float v) { return max(v, 0.0) + log1p_accurate(exp(-abs(v))); }

// erf as a rational approximation on [-4, 4] (Eigen's float erf; |error| ~ 1 ulp); erf(±4) rounds to ±1
float erf_approx(float x) {
    x = clamp(x, -4.0, 4.0);
    float x2 = x * x;
    float p = -2.72614225801306e-10;
    p = p * x2 + 2.77068142495902e-08;
    p = p * x2 - 2.10102402082508e-06;
    p = p * x2 - 5.69250639462346e-05;
    p = p * x2 - 7.34990630326855e-04;
    p = p * x2 - 2.95459980854025e-03;
    p = p * x2 - 1.60960333262415e-02;
    float q = -1.45660718464996e-05;
    q = q * x2 - 2.13374055278905e-04;
    q = q * x2 - 1.68282697438203e-03;
    q = q * x2 - 7.37332916720468e-03;
    q = q * x2 - 1.42647390514189e-02;
    return x * p / q;
}

// Gelu with that erf (BiasSplitGelu, binary_ops.glsl: ORT's CPU EP has no kernel for it; the Gelu ops
// are MLAS's, unary_ops.glsl)
float gelu_erf(float v) { return 0.5 * v * (1.0 + erf_approx(v * 0.7071067811865476)); }
