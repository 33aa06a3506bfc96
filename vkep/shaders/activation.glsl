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

// log(1 + y) accurate for small y (Goldberg's trick: the rounding of 1 + y cancels out)
float log1p_accurate(float y) {
    float u = 1.0 + y;
    return u == 1.0 ? y : log(u) * (y / (u - 1.0));
}

// log(1 + exp(v)) without overflow
float softplus(float v) { return max(v, 0.0) + log1p_accurate(exp(-abs(v))); }

