#version 450
// ai.onnx.ml tree ensembles (TreeEnsemble 5, TreeEnsembleRegressor, TreeEnsembleClassifier), as ORT's CPU EP
// computes them (vkep/kernels/trees.py packs the attributes once into the arrays read here).
//
// MODE 0: one invocation per (sample, target): every tree in order, each walked from its root to a leaf (at most
//   `depth` branches), the leaf's weights for the target aggregated in the order ORT adds them (SUM, AVERAGE,
//   MIN, MAX), then the base value; with post transform per element (or none) the output is written here, else
//   the score goes to `scores` for MODE 1.
// MODE 1: one invocation per sample: SOFTMAX or SOFTMAX_ZERO over the sample's scores.
//
// The FLOAT64 variant computes in double (float64 tensors, or double thresholds): where the trees' type is float
// (TH64 0) every sum and quotient is rounded back to float, which gives float arithmetic's results exactly
// (double has more than 2 * 24 + 2 bits). The float variant computes in float throughout.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FLOAT64
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#define REAL double
#else
#define REAL float
#endif

#define WG 64
layout(local_size_x = WG) in;

layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint X64 = 0;   // the input is float64 (FLOAT64 variant only)
layout(constant_id = 2) const uint TH64 = 0;  // thresholds and weights are float64 (FLOAT64 variant only)
layout(constant_id = 3) const uint Y64 = 0;   // the output (scores) is float64 (FLOAT64 variant only)

layout(buffer_reference, scalar, buffer_reference_align = 4) readonly buffer Words { uint w[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
#ifdef FLOAT64
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Doubles { double v[]; };
#endif

layout(push_constant, scalar) uniform Push {
    uint64_t x, y, tables, scores;  // tables: trees.py's packed arrays, one after the other (byte offsets below)
    uint n, n_targets, stride, n_trees, depth, max_weights;
    uint aggregate, post, one_target, use_base, chunks;
    uint values, weights, targets, roots, sets, base;
    GROUP_BASE;
} pc;

#define TABLE(name) (pc.tables + uint64_t(pc.name))
// node words (trees.py NODE_WORDS), the first table: feature or first weight, mode | missing track true << 8, true node or weight
// count, false node, first set member, set members
#define NODE_WORDS 6u
#define LEAF 7u
#define BRANCH_LEQ 0u
#define BRANCH_LT 1u
#define BRANCH_GTE 2u
#define BRANCH_GT 3u
#define BRANCH_EQ 4u
#define BRANCH_NEQ 5u
#define BRANCH_MEMBER 6u
#define BRANCH_BIGSET 8u
#define AGG_AVERAGE 0u
#define AGG_SUM 1u
#define AGG_MIN 2u
#define AGG_MAX 3u
#define POST_NONE 0u
#define POST_SOFTMAX 1u
#define POST_LOGISTIC 2u
#define POST_SOFTMAX_ZERO 3u
#define POST_PROBIT 4u

REAL th(uint64_t addr, uint i) {
#ifdef FLOAT64
    if (TH64 != 0u) return Doubles(addr).v[i];
#endif
    return REAL(Floats(addr).v[i]);
}

// a result in the trees' type (float sums and quotients rounded once, as ORT's float arithmetic)
REAL rnd(REAL v) {
#ifdef FLOAT64
    if (TH64 == 0u) return REAL(float(v));
#endif
    return v;
}

REAL feature(uint i) {
#ifdef FLOAT64
    if (X64 != 0u) return Doubles(pc.x).v[i];
#endif
    return REAL(Floats(pc.x).v[i]);
}

void store(uint64_t addr, uint i, REAL v, bool wide) {
#ifdef FLOAT64
    if (wide) { Doubles(addr).v[i] = v; return; }
#endif
    Floats(addr).v[i] = float(v);
}

REAL load(uint64_t addr, uint i, bool wide) {
#ifdef FLOAT64
    if (wide) return Doubles(addr).v[i];
#endif
    return REAL(Floats(addr).v[i]);
}

bool branch_true(uint node, uint row) {
    Words N = Words(pc.tables);
    uint word = N.w[node * NODE_WORDS + 1u];
    uint mode = word & 0xFFu;
    REAL v = feature(row + N.w[node * NODE_WORDS]);
    REAL t = th(TABLE(values), node);
    bool take;
    if (mode == BRANCH_LEQ) take = v <= t;
    else if (mode == BRANCH_LT) take = v < t;
    else if (mode == BRANCH_GTE) take = v >= t;
    else if (mode == BRANCH_GT) take = v > t;
    else if (mode == BRANCH_EQ) take = v == t;
    else if (mode == BRANCH_NEQ) take = v != t;
    else {
        // BRANCH_MEMBER: the value is one of the set's members; BRANCH_BIGSET (ORT's sets of more than 30 members or
        // of members outside [0, 30], integers): the value within int32 truncated to an integer is
        uint first = N.w[node * NODE_WORDS + 4u], count = N.w[node * NODE_WORDS + 5u];
        bool big = mode == BRANCH_BIGSET;
        REAL key = big ? trunc(v) : v;
        take = false;
        if (!big || (v >= REAL(-2147483648.0) && v < REAL(2147483648.0)))
            for (uint k = 0u; k < count; ++k) take = take || key == th(TABLE(sets), first + k);
    }
    return take || ((word & 0x100u) != 0u && isnan(v));
}

// ORT's float ErfInv and ComputeProbit (ml_common.h)
float erf_inv(float x) {
    float sgn = x < 0.0 ? -1.0 : 1.0;
    x = (1.0 - x) * (1.0 + x);
    float lg = log(x);
    float v = 2.0 / (3.14159265358979323846 * 0.147) + 0.5 * lg;
    float v2 = 1.0 / 0.147 * lg;
    float v3 = -v + sqrt(v * v - v2);
    return sgn * sqrt(v3);
}

float probit(float v) { return 1.41421356237309504880 * erf_inv(2.0 * v - 1.0); }

float logistic(float v) {
    float e = 1.0 / (1.0 + exp(-abs(v)));
    return v < 0.0 ? 1.0 - e : e;
}

void score_target(uint o) {
    uint s = o / pc.n_targets, t = o % pc.n_targets, row = s * pc.stride;
    Words N = Words(pc.tables), R = Words(TABLE(roots)), T = Words(TABLE(targets));
    // ORT's threads each add a chunk of the trees (ThreadPool::PartitionWork), whose sums are then merged in order
    uint per_chunk = pc.n_trees / pc.chunks, extra = pc.n_trees % pc.chunks;
    precise REAL score = REAL(0.0);
    bool has = false;
    for (uint b = 0u; b < pc.chunks; ++b) {
        uint start = b * per_chunk + min(b, extra), end = start + per_chunk + (b < extra ? 1u : 0u);
        precise REAL part = REAL(0.0);
        bool part_has = false;
        for (uint j = start; j < end; ++j) {
            uint node = R.w[j];
            for (uint d = 0u; d < pc.depth; ++d) {
                if ((N.w[node * NODE_WORDS + 1u] & 0xFFu) == LEAF) break;
                node = N.w[node * NODE_WORDS + (branch_true(node, row) ? 2u : 3u)];
            }
            uint first = N.w[node * NODE_WORDS], count = N.w[node * NODE_WORDS + 2u];
            for (uint k = 0u; k < pc.max_weights; ++k) {
                // (one target: ORT adds each leaf's first weight, whatever its target)
                if (k >= count || (pc.one_target != 0u ? k > 0u : T.w[first + k] != t)) continue;
                REAL w = th(TABLE(weights), first + k);
                if (pc.aggregate == AGG_MIN) part = !part_has || w < part ? w : part;
                else if (pc.aggregate == AGG_MAX) part = !part_has || w > part ? w : part;
                else part = rnd(part + w);
                part_has = true;
            }
        }
        if (b == 0u) {
            score = part;
            has = part_has;
        } else if (pc.aggregate == AGG_MIN || pc.aggregate == AGG_MAX) {  // MergePrediction(1)
            if (part_has) score = has && (pc.aggregate == AGG_MIN ? score < part : score > part) ? score : part;
            has = has || part_has;
        } else if (part_has || pc.one_target != 0u) {
            score = rnd(score + part);
            has = true;
        }
    }
    REAL base = pc.use_base != 0u ? th(TABLE(base), t) : REAL(0.0);
    if (pc.one_target != 0u) {  // ORT's FinalizeScores1: the base value (origin) always added
        if (pc.aggregate == AGG_AVERAGE) score = rnd(score / REAL(pc.n_trees));
        score = pc.aggregate >= AGG_MIN && !has ? base : rnd(score + base);
        if (pc.post == POST_PROBIT) score = REAL(probit(float(score)));
    } else {
        if (pc.aggregate == AGG_AVERAGE) score = rnd(score / REAL(pc.n_trees));
        if (pc.aggregate >= AGG_MIN) score = rnd(base + (has ? score : REAL(0.0)));
        else if (pc.use_base != 0u) score = rnd(score + base);
        if (pc.post == POST_PROBIT) score = REAL(probit(float(score)));
        else if (pc.post == POST_LOGISTIC) score = REAL(logistic(float(score)));
    }
    if (pc.scores != 0ul) store(pc.scores, o, score, true);
    else store(pc.y, o, score, Y64 != 0u);
}

// SOFTMAX / SOFTMAX_ZERO over one sample's scores, in float as ORT's ComputeSoftmax / ComputeSoftmaxZero
void softmax_row(uint s) {
    uint at = s * pc.n_targets;
    float vmax = -3.40282347e38;
    for (uint t = 0u; t < pc.n_targets; ++t) {
        float f = float(load(pc.scores, at + t, true));
        if (f > vmax) vmax = f;
    }
    precise float sum = 0.0;
    float exp_neg_max = exp(-vmax);
    for (uint t = 0u; t < pc.n_targets; ++t) {
        REAL v = load(pc.scores, at + t, true);
        float f = float(v);
        if (pc.post == POST_SOFTMAX || f > 0.0000001 || f < -0.0000001) {
            float e = exp(f - vmax);
            sum += e;
            store(pc.scores, at + t, REAL(e), true);
        } else {
            store(pc.scores, at + t, rnd(v * REAL(exp_neg_max)), true);
        }
    }
    for (uint t = 0u; t < pc.n_targets; ++t) {
        REAL e = load(pc.scores, at + t, true);
        // SOFTMAX divides in float; SOFTMAX_ZERO in the scores' type
        REAL q = pc.post == POST_SOFTMAX ? REAL(float(e) / sum) : rnd(e / REAL(sum));
        store(pc.y, at + t, q, Y64 != 0u);
    }
}

void main() {
    uint o = FLAT_ID(WG);
    if (o >= pc.n) return;
    if (MODE == 0u) score_target(o);
    else softmax_row(o);
}
