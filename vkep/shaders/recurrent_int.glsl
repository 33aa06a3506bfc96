// DynamicQuantizeLSTM's integer GEMMs as ORT's CPU EP computes them (rnn_helpers.cc, the quantized ComputeGemm).
// recurrent.comp (one batch row, a workgroup walks the sequence) and recurrent_quant.comp (a step a dispatch)
// share the quantization: an activation's uint8 scale and zero point over its min / max
// (GetQuantizationParameter) and a value quantized with them. The dot products INT_DOT / SAT_DOT are
// recurrent.comp's; recurrent_quant.comp's phase 3 tiles its own pair loop. The includer includes common.glsl and
// precise.glsl, defines WG (its workgroup size) and QUANT_SCRATCH (a shared float array of WG elements), and,
// before each INT_DOT / SAT_DOT, the macro V(k) that reads the activation's k-th value less its zero point.

// (scale, zero point) of uint8 values over the workgroup's partial minima and maxima, the range widened to
// hold 0, as ORT's GetQuantizationParameter. Every invocation calls it; it uses QUANT_SCRATCH.
vec2 quantization(float lo, float hi) {
    uint tid = gl_LocalInvocationID.x;
    for (uint pass = 0; pass < 2; ++pass) {
        QUANT_SCRATCH[tid] = pass == 0 ? lo : hi;
        barrier();
        for (uint s = 1; s < WG; s <<= 1) {
            if ((tid & (2 * s - 1)) == 0 && tid + s < WG)
                QUANT_SCRATCH[tid] = pass == 0 ? min(QUANT_SCRATCH[tid], QUANT_SCRATCH[tid + s])
                                               : max(QUANT_SCRATCH[tid], QUANT_SCRATCH[tid + s]);
            barrier();
        }
        if (pass == 0) lo = QUANT_SCRATCH[0]; else hi = QUANT_SCRATCH[0];
        barrier();
    }
    float scale = hi == lo ? 1.0 : precise_div(hi - lo, 255.0);
    return vec2(scale, roundEven(clamp(0.0 - precise_div(lo, scale), 0.0, 255.0)));
}

// v quantized with q = (scale, zero point), less the zero point (MLAS: round half to even, saturate)
float quantized(float v, vec2 q) {
    return clamp(roundEven(precise_div(v, q.x)) + q.y, 0.0, 255.0) - q.y;
}

// sum over k < n of M[m + k] (a weight's integer, as a float) * V(k), in integers
#define INT_DOT(NAME)                                                                     \
int NAME(uint64_t maddr, uint m, uint n) {                                                \
    Tensor M = Tensor(maddr);                                                             \
    int s0 = 0, s1 = 0;                                                                   \
    uint k = 0;                                                                           \
    for (; k + 8 <= n; k += 8) {                                                          \
        s0 += int(LOAD(M, m + k)) * V(k) + int(LOAD(M, m + k + 1)) * V(k + 1)             \
            + int(LOAD(M, m + k + 2)) * V(k + 2) + int(LOAD(M, m + k + 3)) * V(k + 3);    \
        s1 += int(LOAD(M, m + k + 4)) * V(k + 4) + int(LOAD(M, m + k + 5)) * V(k + 5)     \
            + int(LOAD(M, m + k + 6)) * V(k + 6) + int(LOAD(M, m + k + 7)) * V(k + 7);    \
    }                                                                                     \
    for (uint u = 0; u < 7; ++u)                                                          \
        if (k + u < n) s0 += int(LOAD(M, m + k + u)) * V(k + u);                          \
    return s0 + s1;                                                                       \
}

// the same as the CPU EP computes uint8 x int8 on x86-64 without VNNI (MLAS's vpmaddubsw, vkep/kernels/quantize.py),
// V's zero point zp: the raw bytes' products in pairs along K into int16, each pair clamped, then the zero point
// taken off as zp * sum(w). 4 pairs an iteration.
#define SAT_PAIR(k) {                                                                        \
        bool second = (k) + 1 < n;  /* (a last odd element is alone; k1: an index valid either way) */ \
        uint k1 = second ? (k) + 1 : (k);                                                    \
        int w0 = int(LOAD(M, m + (k))), w1 = second ? int(LOAD(M, m + k1)) : 0;              \
        int v1 = second ? V(k1) + zp : 0;                                                    \
        s += clamp((V(k) + zp) * w0 + v1 * w1, -32768, 32767);                               \
        w_sum += w0 + w1;                                                                    \
    }
#define SAT_DOT(NAME)                                                                      \
int NAME(uint64_t maddr, uint m, uint n, int zp) {                                         \
    Tensor M = Tensor(maddr);                                                              \
    int s = 0, w_sum = 0;                                                                  \
    uint k = 0;                                                                            \
    for (; k + 8 <= n; k += 8) {                                                           \
        SAT_PAIR(k) SAT_PAIR(k + 2) SAT_PAIR(k + 4) SAT_PAIR(k + 6)                        \
    }                                                                                      \
    for (uint u = 0; u < 8; u += 2)                                                        \
        if (k + u < n) SAT_PAIR(k + u)                                                     \
    return s - zp * w_sum;                                                                 \
}
