// ORT's float post-transforms of the ai.onnx.ml models (ml_common.h: ErfInv, ComputeProbit, ComputeLogistic), shared by
// ml_linear.comp and tree_ensemble.comp. ErfInv ends in a cancellation (sqrt(v * v - v2) - v, about 4.3 against a
// difference of 1e-4 near probit's middle): a multiply-add the compiler fused, or a rounding step skipped, moves the
// result by 1e-3 relative. `precise` keeps each float operation rounded where C++ rounds it.

float erf_inv(float x) {
    float sgn = x < 0.0 ? -1.0 : 1.0;
    precise float x2 = (1.0 - x) * (1.0 + x);
    float lg = log_eigen(x2);  // (C's logf; lavapipe's log is 6e-5 off relative near 1, Eigen's within an ulp)
    precise float v = 2.0 / (3.14159265358979323846 * 0.147) + 0.5 * lg;
    precise float v2 = 1.0 / 0.147 * lg;
    precise float v3 = -v + sqrt(v * v - v2);
    return sgn * sqrt(v3);
}

float probit(float v) { precise float a = 2.0 * v - 1.0; return 1.41421356237309504880 * erf_inv(a); }

float logistic(float v) {
    float e = 1.0 / (1.0 + exp(-abs(v)));
    return v < 0.0 ? 1.0 - e : e;
}
