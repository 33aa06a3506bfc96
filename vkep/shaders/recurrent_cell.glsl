// RNN, GRU and LSTM's cell, shared by recurrent.comp (a workgroup walks the sequence) and recurrent_step.comp
// (a step a dispatch): the node's constants and flags, its activations, and one hidden unit's update from its
// gates' pre-activations, as ORT's CPU EP computes them. The includer declares `pc` first, with members b (the
// bias, 0: none), p (LSTM's peepholes, 0: none), H, acts (4 bits per activation, then FLAG_* from bit 24) and
// clip (RNN: +inf for none; GRU / LSTM: FLT_MAX for none), FLAGS as pc.acts >> 24 and ANY_TENSOR as the
// address of a tensor always given; and includes common.glsl,
// activation.glsl and mlas_logistic.glsl.
layout(constant_id = 0) const uint CELL = 2;     // 0 RNN, 1 GRU, 2 LSTM
// activation_alpha / activation_beta of the activations f, g, h of direction 0, then of direction 1
layout(constant_id = 3) const float A0 = 0.0;
layout(constant_id = 4) const float A1 = 0.0;
layout(constant_id = 5) const float A2 = 0.0;
layout(constant_id = 6) const float A3 = 0.0;
layout(constant_id = 7) const float A4 = 0.0;
layout(constant_id = 8) const float A5 = 0.0;
layout(constant_id = 9) const float B0 = 0.0;
layout(constant_id = 10) const float B1 = 0.0;
layout(constant_id = 11) const float B2 = 0.0;
layout(constant_id = 12) const float B3 = 0.0;
layout(constant_id = 13) const float B4 = 0.0;
layout(constant_id = 14) const float B5 = 0.0;
const uint GATES = CELL == 2 ? 4 : (CELL == 1 ? 3 : 1);

#define FLAG_BIAS 1u
#define FLAG_INPUT_FORGET 2u
#define FLAG_LINEAR_BEFORE_RESET 4u
#define FLAG_BATCH_FIRST 8u   // layout = 1
#define FLAG_REVERSE 16u      // direction = reverse (direction 1 of bidirectional is reverse too)
#define FLAG_LAST 32u         // the dispatch that ends the sequence writes the final states
#define FLAG_VEC4 64u         // float32 with input and hidden sizes multiples of 4: rows read 4 at a time
#define FLAG_QUANTIZED 128u   // DynamicQuantizeLSTM: integer W and R, then their row scales (recurrent.comp)

float act(uint code, float x, float a, float b) {
    switch (code) {
    case 0: return x < 0.0 ? 0.0 : x;                    // Relu
    case 1: return CELL == 2 ? mlas_tanh(x) : tanh_safe(x);  // Tanh (LSTM: MLAS's, as the CPU EP; recurrent.comp)
    case 2: return CELL == 2 ? mlas_logistic(x) : 1.0 / (1.0 + exp(-x));  // Sigmoid (LSTM: MLAS's)
    case 3: return a * x + b;                            // Affine
    case 4: return x >= 0.0 ? x : a * x;                 // LeakyRelu
    case 5: return x > a ? x : 0.0;                      // ThresholdedRelu
    case 6: return a * tanh_safe(b * x);                 // ScaledTanh
    case 7: return min(1.0, max(0.0, a * x + b));        // HardSigmoid
    case 8: return x >= 0.0 ? x : a * (exp(x) - 1.0);    // Elu
    case 9: return x / (1.0 + abs(x));                   // Softsign
    default: {                                           // Softplus: log(1 + e^x), inf where e^x is (as ORT)
        float e = exp(x);
        return isinf(e) ? e : softplus(x);
    }
    }
}

// activation k (0 f, 1 g, 2 h) of direction d
float activation(uint d, uint k, float x) {
    const float alpha[6] = float[6](A0, A1, A2, A3, A4, A5);
    const float beta[6] = float[6](B0, B1, B2, B3, B4, B5);
    uint slot = d * 3 + k;
    return act((pc.acts >> (4 * slot)) & 15u, x, alpha[slot], beta[slot]);
}

// the bias added and the clip applied, as ORT's CPU EP: GRU and LSTM clip with std::min/max when there is a
// bias (NaN becomes the bound) and with comparisons when there is none; RNN adds the bias first, NaN stays
float clipped(float x, float bias) {
    float c = pc.clip;
    if (CELL == 0) {
        x += bias;
        float r = c < x ? c : x;
        return r < -c ? -c : r;
    }
    if ((FLAGS & FLAG_BIAS) != 0) {
        x += bias;
        float r = x < c ? x : c;
        return -c < r ? r : -c;
    }
    return x > c ? c : (x < -c ? -c : x);
}

// the bias of gate k of unit j (direction d): Wb (part 0), Rb (1) or Wb + Rb (2); 0 without a bias
float bias_of(uint d, uint k, uint j, uint part) {
    if ((FLAGS & FLAG_BIAS) == 0) return 0.0;
    Tensor Bias = Tensor(pc.b);
    uint gh = GATES * pc.H, at = d * 2 * gh + k * pc.H + j;
    return part == 0 ? LOAD(Bias, at) : part == 1 ? LOAD(Bias, at + gh) : LOAD(Bias, at) + LOAD(Bias, at + gh);
}

// GRU's reset gate r of unit j from its pre-activation (x . Wr + h . Rr, without the bias)
float gru_reset(uint d, uint j, float pre_r) {
    return activation(d, 0, clipped(pre_r, bias_of(d, 1, j, 2)));
}

// unit j's new h (direction d) from its gates' pre-activations without the bias (pre: RNN's in .x; GRU's z, r
// and the h gate's x . Wh; LSTM's i, o, f, c) and its previous h; GRU's `rh` is h . Rh with
// linear_before_reset, else (r (.) h) . Rh. LSTM's cell state c is read and replaced.
float unit_update(uint d, uint j, vec4 pre, float rh, float h_prev, inout float c) {
    uint H = pc.H;
    if (CELL == 0)
        return activation(d, 0, clipped(pre.x, bias_of(d, 0, j, 2)));
    if (CELL == 1) {
        float z = activation(d, 0, clipped(pre.x, bias_of(d, 0, j, 2)));
        float hpre, hbias;
        if ((FLAGS & FLAG_LINEAR_BEFORE_RESET) != 0) {
            float r = gru_reset(d, j, pre.y);
            hpre = pre.z + r * (rh + bias_of(d, 2, j, 1));
            hbias = bias_of(d, 2, j, 0);
        } else {
            hpre = pre.z + rh;
            hbias = bias_of(d, 2, j, 2);
        }
        float g = activation(d, 1, clipped(hpre, hbias));
        return (1.0 - z) * g + z * h_prev;
    }
    // LSTM gates in ONNX order i, o, f, c; peepholes P = [i, o, f]
    float c_prev = c, ipre = pre.x, opre = pre.y, fpre = pre.z;
    // peepholes read from a valid address whether given or not, then chosen (common.glsl PRESENT_OR)
    Tensor Peep = Tensor(PRESENT_OR(pc.p, ANY_TENSOR));
    float pi = LOAD(Peep, PRESENT_AT(pc.p, d * 3 * H + j)), po = LOAD(Peep, PRESENT_AT(pc.p, d * 3 * H + H + j));
    float pf = LOAD(Peep, PRESENT_AT(pc.p, d * 3 * H + 2 * H + j));
    if (pc.p != 0) {
        ipre += c_prev * pi;
        fpre += c_prev * pf;
    }
    float i = activation(d, 0, clipped(ipre, bias_of(d, 0, j, 2)));
    float f = (FLAGS & FLAG_INPUT_FORGET) != 0 ? 1.0 - i : activation(d, 0, clipped(fpre, bias_of(d, 2, j, 2)));
    float g = activation(d, 1, clipped(pre.w, bias_of(d, 3, j, 2)));
    c = c_prev * f + i * g;
    if (pc.p != 0) opre += c * po;
    float o = activation(d, 0, clipped(opre, bias_of(d, 1, j, 2)));
    return o * activation(d, 2, c);
}
