#version 450
// ai.onnx.ml linear and SVM models (LinearRegressor, LinearClassifier, SVMRegressor, SVMClassifier), as ORT's CPU EP
// computes them (vkep/kernels/ml_linear.py packs the attributes once into `tables`, whose first words are the
// offsets of its arrays).
//
// MODE 0: one invocation per sample: each target's dot product of the sample with its coefficients (a float
//   multiply-add chain, as MLAS's SGEMM kernels), plus its intercept; then the classifier's label (one target: the
//   score's sign; several: the first largest score) and the post transform of the row (ORT's
//   batched_update_scores_inplace). SVMRegressor's last step too (the kernels times the coefficients, plus rho[0],
//   then one_class's sign).
// MODE 1: one invocation per (sample, support vector): the SVM kernel (LINEAR, POLY, RBF, SIGMOID) of the sample and
//   the vector (SVMCommon::batched_kernel_dot), to `work` (or, a linear SVMClassifier, its scores to `y`).
// MODE 2: one invocation per sample: SVMClassifier's one-vs-one sums (in double, as ORT), votes, Platt scaling and
//   multiclass_probability, label and post transform (SVMClassifier::ComputeImpl).
// MODE 3: one invocation per input element: a float64, int32 or int64 input converted to float into `work`, which the
//   other MODEs then read (ORT's cast buffer: converted where they read it, Mesa 26's lavapipe folds the rounding to
//   float into the double arithmetic of fma_exact).
//
// Floats throughout as ORT (its inputs of other types converted to float first); the FLOAT64 variant reads float64
// inputs and adds the one-vs-one sums in double.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FLOAT64
#define REAL double
#else
#define REAL float
#endif

#define WG 64
layout(local_size_x = WG) in;

layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint XT = 0;  // the input's type: 0 float32, 1 float64 (FLOAT64 only), 2 int32, 3 int64

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) readonly buffer Ints32 { int v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Ints64 { int64_t v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, y, label, tables, work;
    uint n, features, targets, vectors, post, flags, kernel, threads_n;
    float gamma, coef0, degree, c;
    GROUP_BASE;
} pc;

// tables' header (ml_linear.py HEADER): the byte offset of each array
#define COEFS 0u
#define INTERCEPTS 1u
#define SVS 2u
#define RHO 3u
#define PROBA 4u
#define PROBB 5u
#define LABELS 6u
#define STARTS 7u
#define COUNTS 8u
uint64_t table(uint k) { return pc.tables + uint64_t(Words(pc.tables).w[k]); }
float tf(uint k, uint i) { return Floats(table(k)).v[i]; }

#define POST_NONE 0u
#define POST_LOGISTIC 1u
#define POST_SOFTMAX 2u
#define POST_SOFTMAX_ZERO 3u
#define POST_PROBIT 4u
#define K_LINEAR 0u
#define K_POLY 1u
#define K_RBF 2u
#define K_SIGMOID 3u
// flags
#define INTERCEPT 1u      // MODE 0: add the intercepts
#define LABEL 2u          // MODE 0: a classifier's label
#define SECOND_CLASS 4u   // MODE 0, one target: ORT's add_second_class (scores 1 - s, s)
#define ONE_CLASS 8u      // MODE 0: SVMRegressor's one_class (the sign)
#define PROBABILITIES 16u // MODE 2: prob_a and prob_b given
#define ALL_POSITIVE 32u  // MODE 2: every coefficient >= 0
#define SVC 64u           // MODE 2: support vectors (else liblinear's mode: MODE 1 wrote the scores)
#define M1 128u           // MODEs 0 and 1: one sample and alpha 1, MLAS's M1 kernel (else its K blocks of stride_k)
#define FLAG(f) ((pc.flags & (f)) != 0u)

float feature(uint i) {
#ifdef FLOAT64
    if (XT == 1u) return float(Doubles(pc.x).v[i]);
#endif
    if (XT == 2u) return float(Ints32(pc.x).v[i]);
    if (XT == 3u) return float(Ints64(pc.x).v[i]);
    return Floats(pc.x).v[i];
}

#include "ml_transforms.glsl"
#include "mlas_sgemm.glsl"
uint64_t gemm_w;  // the coefficients (or support vectors) gemm_element reads
float mlas_a(uint at, uint k) { return feature(at + k); }
float mlas_b(uint at, uint k) { return Floats(gemm_w).v[at + k]; }

// One element of ORT's Gemm<float>::ComputeGemm(NoTrans, Trans): alpha * (x row . w row) + c (mlas_sgemm.glsl). M1
// (one row, alpha 1): MlasSgemmKernelM1TransposeBAvx, its block of output columns `t` of `cols`
float gemm_element(uint64_t w, uint xrow, uint wrow, uint t, uint cols, float alpha, bool has_c, float c) {
    gemm_w = w;
    return mlas_element(xrow, wrow, MlasProduct(pc.features, t, cols, pc.threads_n, false, FLAG(M1), true, alpha,
                                                has_c, c));
}

// the post transform of `count` float scores at y[at ...] (batched_update_scores_inplace, batch_size > 1)
void post_row(uint at, uint count) {
    Floats Y = Floats(pc.y);
    if (pc.post == POST_PROBIT) {
        for (uint t = 0u; t < count; ++t) Y.v[at + t] = probit(Y.v[at + t]);
    } else if (pc.post == POST_LOGISTIC) {
        for (uint t = 0u; t < count; ++t) Y.v[at + t] = logistic(Y.v[at + t]);
    } else if (pc.post == POST_SOFTMAX || pc.post == POST_SOFTMAX_ZERO) {
        float vmax = -3.40282347e38;
        for (uint t = 0u; t < count; ++t) vmax = Y.v[at + t] > vmax ? Y.v[at + t] : vmax;
        float exp_neg_max = exp(-vmax);
        precise float sum = 0.0;
        for (uint t = 0u; t < count; ++t) {
            float f = Y.v[at + t];
            if (pc.post == POST_SOFTMAX || f > 0.0000001 || f < -0.0000001) {
                float e = exp(f - vmax);
                sum += e;
                Y.v[at + t] = e;
            } else {
                precise float z = f * exp_neg_max;
                Y.v[at + t] = z;
            }
        }
        for (uint t = 0u; t < count; ++t) Y.v[at + t] = Y.v[at + t] / sum;
    }
}

// ---- MODE 0 ----------------------------------------------------------------------------------------------------
void linear(uint s) {
    uint C = pc.targets, F = pc.features;
    uint row = s * (FLAG(SECOND_CLASS) ? 2u : C);
    Floats Y = Floats(pc.y);
    int best = 0;
    float best_score = 0.0;
    for (uint t = 0u; t < C; ++t) {
        float score = gemm_element(table(COEFS), s * F, t * F, t, C, 1.0, FLAG(INTERCEPT), tf(INTERCEPTS, t));
        if (t == 0u || score > best_score) { best = int(t); best_score = score; }
        Y.v[row + t] = score;
    }
    if (FLAG(LABEL)) {  // labels: (negative, positive) for one target, else one per target
        uint k = C == 1u ? (best_score > 0.0 ? 1u : 0u) : uint(best);
        Ints64(pc.label).v[s] = Ints64(table(LABELS)).v[k];
    }
    if (C == 1u) {
        float v = Y.v[row];
        if (FLAG(ONE_CLASS)) {
            Y.v[row] = v > 0.0 ? 1.0 : -1.0;
        } else if (FLAG(SECOND_CLASS)) {  // (ORT 1.32: LOGISTIC applied first; PROBIT declined: ORT leaves the second
            // score unwritten)
            if (pc.post == POST_LOGISTIC) v = logistic(v);
            precise float other = 1.0 - v;
            Y.v[row] = other;
            Y.v[row + 1u] = v;
        } else if (pc.post == POST_PROBIT) {
            Y.v[row] = probit(v);
        }
    } else {
        post_row(row, C);
    }
}

// ---- MODE 1 ----------------------------------------------------------------------------------------------------
float power(float v, float d) {  // std::pow(float, float) for the POLY kernel's degree
    if (d == 0.0) return 1.0;
    if (v == 0.0) return d > 0.0 ? 0.0 : uintBitsToFloat(0x7F800000u);
    if (v > 0.0) return pow(v, d);
    if (d != trunc(d)) return uintBitsToFloat(0x7FC00000u);
    float m = pow(-v, d);
    return mod(d, 2.0) == 1.0 ? -m : m;
}

float tanh_f(float v) {
    float e = exp(-2.0 * abs(v));
    float t = (1.0 - e) / (1.0 + e);
    return v < 0.0 ? -t : t;
}

void kernel_value(uint o) {
    uint s = o / pc.vectors, k = o % pc.vectors, F = pc.features;
    Floats V = Floats(table(SVS));
    precise float acc = 0.0;
    float value;
    if (pc.kernel == K_RBF) {  // (SVMCommon's own loop: float products and sums, in order)
        for (uint f = 0u; f < F; ++f) {
            precise float d = feature(s * F + f) - V.v[k * F + f];
            precise float dd = d * d;
            acc = acc + dd;
        }
        precise float g = -pc.gamma * acc;
        value = exp(g);
    } else {  // a GEMM of alpha 1 (LINEAR) or gamma, and c (a linear SVMClassifier's rho[0]; coef0) where not 0
        float w = gemm_element(table(SVS), s * F, k * F, k, pc.vectors, pc.kernel == K_LINEAR ? 1.0 : pc.gamma,
                               pc.c != 0.0, pc.c);
        if (pc.kernel == K_POLY) {
            if (pc.degree == 2.0) { precise float sq = w * w; w = sq; }
            else if (pc.degree == 3.0) { precise float sq = w * w; precise float cu = sq * w; w = cu; }
            else w = power(w, pc.degree);
        } else if (pc.kernel == K_SIGMOID) {
            w = tanh_f(w);
        }
        value = w;
    }
    Floats(FLAG(SVC) ? pc.work : pc.y).v[o] = value;
}

// ---- MODE 2 ----------------------------------------------------------------------------------------------------
// ORT's multiclass_probability (ml_common.h) over r (C x C), Q (C x C) and Qp (C) in `work`, to p = y[at ...]
void multiclass_probability(uint C, uint r, uint q, uint qp, uint at) {
    Floats A = Floats(pc.work), P = Floats(pc.y);
    float eps = 0.005 / float(C);
    for (uint i = 0u; i < C * C; ++i) A.v[q + i] = 0.0;
    for (uint i = 0u; i < C; ++i) {
        P.v[at + i] = 1.0 / float(C);
        for (uint j = 0u; j < i; ++j) {
            precise float d = A.v[q + i * C + i] + A.v[r + j * C + i] * A.v[r + j * C + i];
            A.v[q + i * C + i] = d;
            A.v[q + i * C + j] = A.v[q + j * C + i];
        }
        for (uint j = i + 1u; j < C; ++j) {
            precise float d = A.v[q + i * C + i] + A.v[r + j * C + i] * A.v[r + j * C + i];
            A.v[q + i * C + i] = d;
            precise float o = -A.v[r + j * C + i] * A.v[r + i * C + j];
            A.v[q + i * C + j] = o;
        }
    }
    for (uint loop = 0u; loop < 100u; ++loop) {
        precise float pQp = 0.0;
        for (uint i = 0u; i < C; ++i) {
            precise float qpi = 0.0;
            for (uint j = 0u; j < C; ++j) qpi = qpi + A.v[q + i * C + j] * P.v[at + j];
            A.v[qp + i] = qpi;
            pQp = pQp + P.v[at + i] * qpi;
        }
        float max_error = 0.0;
        for (uint i = 0u; i < C; ++i) {
            precise float error = abs(A.v[qp + i] - pQp);
            if (error > max_error) max_error = error;
        }
        if (max_error < eps) break;
        for (uint i = 0u; i < C; ++i) {
            float qii = A.v[q + i * C + i];
            precise float diff = (-A.v[qp + i] + pQp) / qii;
            P.v[at + i] = P.v[at + i] + diff;
            precise float num = pQp + diff * (diff * qii + 2.0 * A.v[qp + i]);
            precise float den = 1.0 + diff;
            pQp = num / den / den;
            for (uint j = 0u; j < C; ++j) {
                precise float qpj = (A.v[qp + j] + diff * A.v[q + i * C + j]) / den;
                A.v[qp + j] = qpj;
                P.v[at + j] = P.v[at + j] / den;
            }
        }
    }
}

void classify(uint s) {
    uint C = pc.targets, Vn = pc.vectors;
    uint pairs = C * (C - 1u) / 2u;
    Floats Y = Floats(pc.y), A = Floats(pc.work);
    Words starts = Words(table(STARTS)), counts = Words(table(COUNTS));
    // this sample's votes (C), r (C x C), Q (C x C), Qp (C) after the kernels
    uint votes = pc.n * Vn + s * (2u * C + 2u * C * C), r = votes + C, q = r + C * C, qp = q + C * C;
    bool proba = FLAG(PROBABILITIES);
    uint width = FLAG(SVC) && !proba ? (C > 2u ? pairs : 2u) : C;
    uint at = s * width;
    int best = 0;
    float max_weight = 0.0;
    if (FLAG(SVC)) {
        for (uint i = 0u; i < C; ++i) A.v[votes + i] = 0.0;
        for (uint i = 0u; i < C * C; ++i) A.v[r + i] = 0.0;
        uint kern = s * Vn, idx = 0u;
        for (uint i = 0u; i + 1u < C; ++i) {
            uint si = starts.w[i], ni = counts.w[i];
            for (uint j = i + 1u; j < C; ++j, ++idx) {
                uint sj = starts.w[j], nj = counts.w[j];
                precise REAL sum = REAL(0.0);
                for (uint m = 0u; m < ni; ++m) {
                    precise float prod = tf(COEFS, (j - 1u) * Vn + si + m) * A.v[kern + si + m];
                    sum = sum + REAL(prod);
                }
                for (uint m = 0u; m < nj; ++m) {
                    precise float prod = tf(COEFS, i * Vn + sj + m) * A.v[kern + sj + m];
                    sum = sum + REAL(prod);
                }
                sum = sum + REAL(tf(RHO, idx));
                float score = float(sum);
                uint winner = sum > REAL(0.0) ? i : j;
                A.v[votes + winner] = A.v[votes + winner] + 1.0;
                if (proba) {  // sigmoid_probability, clamped
                    precise float val = score * tf(PROBA, idx) + tf(PROBB, idx);
                    float val1 = 1.0 - logistic(val);
                    float val2 = min(max(val1, 1.0e-7), 1.0 - 1.0e-7);
                    A.v[r + i * C + j] = val2;
                    precise float other = 1.0 - val2;
                    A.v[r + j * C + i] = other;
                } else {
                    Y.v[at + (C > 2u ? idx : 0u)] = score;
                }
            }
        }
        if (proba) multiclass_probability(C, r, q, qp, at);
        float most = A.v[votes];
        for (uint k = 1u; k < C; ++k) {
            if (A.v[votes + k] > most) { most = A.v[votes + k]; best = int(k); }
        }
    } else {
        max_weight = Y.v[at];
        for (uint k = 1u; k < C; ++k) {
            if (Y.v[at + k] > max_weight) { max_weight = Y.v[at + k]; best = int(k); }
        }
    }
    // ChooseClass
    uint k = uint(best);
    if (C == 2u && !proba) {
        bool positive = FLAG(ALL_POSITIVE);
        if ((positive && max_weight >= 0.5) || (max_weight > 0.0 && !positive)) k = 1u;
    }
    Ints64(pc.label).v[s] = Ints64(table(LABELS)).v[k];
    if (FLAG(SVC) && !proba && C == 2u) {
        // write_additional_scores: 2 (NONE) -s, s; 0: 1 - s, s, of the logistic for LOGISTIC (ORT 1.32; PROBIT declined)
        float v = Y.v[at];
        if (pc.post == POST_LOGISTIC) v = logistic(v);
        precise float other = pc.post == POST_NONE ? -v : 1.0 - v;
        Y.v[at] = other;
        Y.v[at + 1u] = v;
    } else if (width > 1u) {
        post_row(at, width);
    } else if (pc.post == POST_PROBIT) {
        Y.v[at] = probit(Y.v[at]);
    }
}

void main() {
    uint o = FLAT_ID(WG);
    if (o >= pc.n) return;
    if (MODE == 0u) linear(o);
    else if (MODE == 1u) kernel_value(o);
    else if (MODE == 2u) classify(o);
    else Floats(pc.work).v[o] = feature(o);
}
