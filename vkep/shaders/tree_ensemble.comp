#version 450
// ai.onnx.ml tree ensembles (TreeEnsemble 5, TreeEnsembleRegressor, TreeEnsembleClassifier), as ORT's CPU EP
// computes them (vkep/kernels/trees.py packs the attributes once into the arrays read here).
//
// MODE 0: one invocation per (sample, target): every tree in order, each walked from its root to a leaf (at most
//   `depth` branches), the leaf's weights for the target aggregated in the order ORT adds them (SUM, AVERAGE,
//   MIN, MAX), then the base value; with post transform per element (or none) the output is written here, else
//   the score goes to `scores` for MODE 1. A dispatch walks the trees [first_tree, end_tree): a forest past one
//   invocation's loop budget takes several, the sums carried from one to the next in `state`.
// MODE 1: one invocation per sample: SOFTMAX or SOFTMAX_ZERO over the sample's scores.
// MODE 2: one invocation per sample: TreeEnsembleClassifier's label and probabilities from the sample's class sums
//   (MODE 0 with CLASSIFY: `scores` holds the sums, then whether each class had a weight), as ORT's
//   TreeAggregatorClassifier::FinalizeScores.
//
// The FLOAT64 variant computes in double (float64 tensors, or double thresholds): where the trees' type is float
// (TH64 0) every sum and quotient is rounded back to float, which gives float arithmetic's results exactly
// (double has more than 2 * 24 + 2 bits). The float variant computes in float throughout.
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
layout(constant_id = 1) const uint X64 = 0;   // the input is float64 (FLOAT64 variant only)
layout(constant_id = 2) const uint TH64 = 0;  // thresholds and weights are float64 (FLOAT64 variant only)
layout(constant_id = 3) const uint Y64 = 0;   // the output (scores) is float64 (FLOAT64 variant only)

layout(buffer_reference, scalar, buffer_reference_align = 4) readonly buffer Words { uint w[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 8) buffer Ints64 { int64_t v[]; };

layout(push_constant, scalar) uniform Push {
    uint64_t x, y, tables, scores, label, state;  // tables: trees.py's packed arrays after a header of offsets
    uint n, n_targets, stride, n_trees, depth, max_weights;
    uint aggregate, post, flags, chunks, n_base;
    uint first_tree, end_tree;  // this dispatch's trees
    GROUP_BASE;
} pc;

// tables' header (trees.py HEADER): the byte offset of each array
#define AT_nodes 0u
#define AT_values 1u
#define AT_weights 2u
#define AT_targets 3u
#define AT_roots 4u
#define AT_sets 5u
#define AT_base 6u
#define AT_labels 7u
#define AT_tree_lists 8u   // the trees each target walks, one list after the other
#define AT_list_starts 9u  // where each target's list starts (and the last ends)
#define TABLE(name) (pc.tables + uint64_t(Words(pc.tables).w[AT_##name]))
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
// flags
#define ONE_TARGET 1u  // n_targets 1: ORT's FinalizeScores1
#define USE_BASE 2u    // a base value per target (one target: one)
#define CLASSIFY 4u    // MODE 0 of a classifier: the class sums and whether each class had a weight
#define BINARY 8u      // a classifier of two classes whose weights are all for one class (ORT's binary_case_)
#define POSITIVE 16u   // ... and all its weights positive
#define FLAG(f) ((pc.flags & (f)) != 0u)

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
    Words N = Words(TABLE(nodes));
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

#include "ml_transforms.glsl"

// the run of trees (ThreadPool::PartitionWork's chunk) tree j is in
uint chunk_of(uint j, uint per_chunk, uint extra) {
    if (per_chunk == 0u) return j;  // (fewer trees than chunks: one each)
    uint wide = extra * (per_chunk + 1u);  // (the first `extra` chunks hold one tree more)
    return j < wide ? j / (per_chunk + 1u) : extra + (j - wide) / per_chunk;
}

uint chunk_start(uint b, uint per_chunk, uint extra) { return b * per_chunk + min(b, extra); }

// the sum so far (score, has) merged with chunk b's (part, part_has), as ORT merges its threads' sums in order
void merge(uint b, inout REAL score, inout bool has, REAL part, bool part_has) {
    if (b == 0u) {
        score = part;
        has = part_has;
    } else if (pc.aggregate == AGG_MIN || pc.aggregate == AGG_MAX) {  // MergePrediction(1)
        if (part_has) score = has && (pc.aggregate == AGG_MIN ? score < part : score > part) ? score : part;
        has = has || part_has;
    } else if (part_has || FLAG(ONE_TARGET)) {
        score = rnd(score + part);
        has = true;
    }
}

void score_target(uint o) {
    uint s = o / pc.n_targets, t = o % pc.n_targets, row = s * pc.stride;
    Words N = Words(TABLE(nodes)), R = Words(TABLE(roots)), T = Words(TABLE(targets));
    Words L = Words(TABLE(tree_lists)), S = Words(TABLE(list_starts));
    // ORT's threads each add a chunk of the trees (ThreadPool::PartitionWork), whose sums are then merged in order
    uint per_chunk = pc.n_trees / pc.chunks, extra = pc.n_trees % pc.chunks;
    precise REAL score = REAL(0.0), part = REAL(0.0);
    bool has = false, part_has = false;
    if (pc.first_tree > 0u) {  // (the sums so far, carried from the dispatch before)
        score = load(pc.state, o, true);
        part = load(pc.state, pc.n + o, true);
        uint bits = uint(load(pc.state, 2u * pc.n + o, true));
        has = (bits & 1u) != 0u;
        part_has = (bits & 2u) != 0u;
    }
    // the chunk open (its sum in part): the first tree's; the target's trees in chunks between add nothing
    uint b = chunk_of(pc.first_tree, per_chunk, extra);
    if (chunk_start(b, per_chunk, extra) >= pc.first_tree) {
        part = REAL(0.0);
        part_has = false;
    }
    // the target's first tree from first_tree on: a binary search of its list
    uint lo = S.w[t], hi = S.w[t + 1u];
    while (lo < hi) {
        uint mid = (lo + hi) / 2u;
        if (L.w[mid] < pc.first_tree) lo = mid + 1u; else hi = mid;
    }
    for (uint i = lo; i < S.w[t + 1u]; ++i) {
        uint j = L.w[i];
        if (j >= pc.end_tree) break;
        uint bj = chunk_of(j, per_chunk, extra);
        if (bj != b) {
            merge(b, score, has, part, part_has);
            b = bj;
            part = REAL(0.0);
            part_has = false;
        }
        uint node = R.w[j];
        for (uint d = 0u; d < pc.depth; ++d) {
            if ((N.w[node * NODE_WORDS + 1u] & 0xFFu) == LEAF) break;
            node = N.w[node * NODE_WORDS + (branch_true(node, row) ? 2u : 3u)];
        }
        uint first = N.w[node * NODE_WORDS], count = N.w[node * NODE_WORDS + 2u];
        for (uint k = 0u; k < pc.max_weights; ++k) {
            // (one target: ORT adds each leaf's first weight, whatever its target)
            if (k >= count || (FLAG(ONE_TARGET) ? k > 0u : T.w[first + k] != t)) continue;
            REAL w = th(TABLE(weights), first + k);
            if (pc.aggregate == AGG_MIN) part = !part_has || w < part ? w : part;
            else if (pc.aggregate == AGG_MAX) part = !part_has || w > part ? w : part;
            else part = rnd(part + w);
            part_has = true;
        }
    }
    // (a chunk that goes on past end_tree is merged in a later dispatch; one merged here carries nothing on)
    if (chunk_start(b + 1u, per_chunk, extra) <= pc.end_tree) {
        merge(b, score, has, part, part_has);
        part = REAL(0.0);
        part_has = false;
    }
    if (pc.end_tree < pc.n_trees) {
        store(pc.state, o, score, true);
        store(pc.state, pc.n + o, part, true);
        store(pc.state, 2u * pc.n + o, REAL((has ? 1u : 0u) | (part_has ? 2u : 0u)), true);
        return;
    }
    if (FLAG(CLASSIFY)) {
        store(pc.scores, o, score, true);
        store(pc.scores, pc.n + o, REAL(has ? 1.0 : 0.0), true);
        return;
    }
    REAL base = FLAG(USE_BASE) ? th(TABLE(base), t) : REAL(0.0);
    if (FLAG(ONE_TARGET)) {  // ORT's FinalizeScores1: the base value (origin) always added
        if (pc.aggregate == AGG_AVERAGE) score = rnd(score / REAL(pc.n_trees));
        score = pc.aggregate >= AGG_MIN && !has ? base : rnd(score + base);
        if (pc.post == POST_PROBIT) score = REAL(probit(float(score)));
    } else {
        if (pc.aggregate == AGG_AVERAGE) score = rnd(score / REAL(pc.n_trees));
        if (pc.aggregate >= AGG_MIN) score = rnd(base + (has ? score : REAL(0.0)));
        else if (FLAG(USE_BASE)) score = rnd(score + base);
        if (!has) score = REAL(0.0);  // (ORT writes a target no leaf had a weight for as 0, base value or not)
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

// ORT's write_scores for a classifier's scores (a score without a weight reads as 0, in float)
void write_class_scores(uint s, uint count, float v[2], REAL w, int additional) {
    uint at = s * pc.n_targets;
    if (count == 2u) {
        for (uint k = 0u; k < 2u; ++k) {
            float f = v[k];
            if (pc.post == POST_PROBIT) f = probit(f);
            else if (pc.post == POST_LOGISTIC) f = logistic(f);
            v[k] = f;
        }
        if (pc.post == POST_SOFTMAX || pc.post == POST_SOFTMAX_ZERO) {
            float vmax = max(v[0], v[1]);
            bool z0 = pc.post == POST_SOFTMAX_ZERO && !(v[0] > 0.0000001 || v[0] < -0.0000001);
            bool z1 = pc.post == POST_SOFTMAX_ZERO && !(v[1] > 0.0000001 || v[1] < -0.0000001);
            float e0 = z0 ? v[0] * exp(-vmax) : exp(v[0] - vmax), e1 = z1 ? v[1] * exp(-vmax) : exp(v[1] - vmax);
            precise float sum = (z0 ? 0.0 : e0) + (z1 ? 0.0 : e1);
            v[0] = e0 / sum;
            v[1] = e1 / sum;
        }
        Floats(pc.y).v[at] = v[0];
        Floats(pc.y).v[at + 1u] = v[1];
        return;
    }
    REAL r = w;  // one score: the binary cases (ORT's ScoreValue arithmetic in the trees' type)
    float f = float(r);
    if (pc.post == POST_PROBIT) {
        Floats(pc.y).v[at] = probit(f);
        Floats(pc.y).v[at + 1u] = 0.0;  // (ORT leaves this one unwritten: where that is known, the node is declined)
    } else if (additional == 0 || additional == 1) {
        Floats(pc.y).v[at] = float(rnd(REAL(1.0) - r));
        Floats(pc.y).v[at + 1u] = f;
    } else if (additional == 2 || additional == 3) {
        Floats(pc.y).v[at] = pc.post == POST_LOGISTIC ? logistic(-f) : -f;
        Floats(pc.y).v[at + 1u] = pc.post == POST_LOGISTIC ? logistic(f) : f;
    } else {
        Floats(pc.y).v[at] = f;
        Floats(pc.y).v[at + 1u] = 0.0;  // (ORT leaves this one unwritten)
    }
}

int64_t class_label(uint k) { return Ints64(TABLE(labels)).v[k]; }

void classify(uint s) {
    uint at = s * pc.n_targets, C = pc.n_targets;
    if (C > 2u) {
        int64_t best = -1;
        REAL best_score = REAL(0.0);
        for (uint k = 0u; k < C; ++k) {
            REAL v = load(pc.scores, at + k, true);
            bool has = load(pc.scores, pc.n * C + at + k, true) != REAL(0.0);
            if (k < pc.n_base) {
                v = has ? rnd(v + th(TABLE(base), k)) : th(TABLE(base), k);
                has = true;
            }
            if (has && (best == -1 || v > best_score)) { best = int64_t(k); best_score = v; }
            store(pc.scores, at + k, v, true);
            store(pc.scores, pc.n * C + at + k, REAL(has ? 1.0 : 0.0), true);
        }
        Ints64(pc.label).v[s] = class_label(uint(max(best, 0)));
        // write_scores over every class
        float vmax = -3.40282347e38;
        for (uint k = 0u; k < C; ++k) {
            bool has = load(pc.scores, pc.n * C + at + k, true) != REAL(0.0);
            float f = has ? float(load(pc.scores, at + k, true)) : 0.0;
            if (f > vmax) vmax = f;
        }
        precise float sum = 0.0;
        for (uint k = 0u; k < C; ++k) {
            bool has = load(pc.scores, pc.n * C + at + k, true) != REAL(0.0);
            float f = has ? float(load(pc.scores, at + k, true)) : 0.0;
            if (pc.post == POST_PROBIT) f = probit(f);
            else if (pc.post == POST_LOGISTIC) f = logistic(f);
            else if (pc.post == POST_SOFTMAX || (pc.post == POST_SOFTMAX_ZERO && (f > 0.0000001 || f < -0.0000001))) {
                f = exp(f - vmax);
                sum += f;
            } else if (pc.post == POST_SOFTMAX_ZERO) {
                f = f * exp(-vmax);
            }
            Floats(pc.y).v[at + k] = f;
        }
        if (pc.post == POST_SOFTMAX || pc.post == POST_SOFTMAX_ZERO)
            for (uint k = 0u; k < C; ++k) Floats(pc.y).v[at + k] = Floats(pc.y).v[at + k] / sum;
        return;
    }
    REAL s0 = load(pc.scores, at, true), s1 = load(pc.scores, at + 1u, true);
    bool h0 = load(pc.scores, pc.n * C + at, true) != REAL(0.0), h1 = load(pc.scores, pc.n * C + at + 1u, true) != REAL(0.0);
    int additional = -1;
    uint count = 2u;
    if (pc.n_base == 2u) {
        if (h1) {  // (ORT: base_values[1] + the score of class 0)
            s1 = rnd(th(TABLE(base), 1u) + s0);
            s0 = -s1;
        } else {
            s1 = rnd(s1 + th(TABLE(base), 1u));
            s0 = rnd(s0 + th(TABLE(base), 0u));
        }
    } else if (pc.n_base == 1u) {
        s0 = rnd(s0 + th(TABLE(base), 0u));
        if (!h1) count = 1u;
    } else {
        additional = 3;
        if (!h1) count = 1u;
    }
    // ORT's _set_score_binary
    bool h1_now = count == 2u && h1;
    REAL pos = h1_now ? s1 : (h0 ? s0 : REAL(0.0));
    int64_t y;
    if (FLAG(BINARY)) {
        if (FLAG(POSITIVE)) { additional = pos > REAL(0.5) ? 0 : 1; y = class_label(pos > REAL(0.5) ? 1u : 0u); }
        else { additional = pos > REAL(0.0) ? 2 : 3; y = class_label(pos > REAL(0.0) ? 1u : 0u); }
    } else {
        y = pos > REAL(0.0) ? 1l : 0l;
    }
    Ints64(pc.label).v[s] = y;
    float v[2] = float[2](h0 ? float(s0) : 0.0, h1 ? float(s1) : 0.0);
    write_class_scores(s, count, v, h0 ? s0 : REAL(0.0), additional);
}

void main() {
    uint o = FLAT_ID(WG);
    if (o >= pc.n) return;
    if (MODE == 0u) score_target(o);
    else if (MODE == 1u) softmax_row(o);
    else classify(o);
}
