#version 450
// Reduce* over any set of axes. The host merges the input's dims into alternating groups of kept and
// reduced dims (at most 4 of each); an output element's base offset and a reduced element's offset are
// both decoded from their flat index with (dims, strides), so no permutation is needed.
// SPLIT=0: one thread per output element (small reductions); SPLIT=1: one workgroup per output element
// with a shared-memory tree (large reductions). The workgroup size is specialization constant 2 (up to
// 1024): lavapipe silently stops a shader's loops after 65535 iterations in all, so long reductions need
// wide workgroups. FLOAT64: float64 sums, means, extremes, products, L1, L2, sums of squares, log-sums and
// log-sum-exps, in double (exp and log as glibc's, which ORT's reduce_exp and reduce_log call: float64.glsl).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG gl_WorkGroupSize.x
#define MAX_WG 1024
layout(local_size_x_id = 2) in;
// 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 L1, 6 L2, 7 log-sum, 8 log-sum-exp, 9 sum-square
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint SPLIT = 0;
// 1 (SPLIT 0, float32 and float64 sums, means, max and min of contiguous rows: the reduced axes trailing): Eigen's
// vectorised redux, as ORT's CPU EP computes them on x86-64 (ReduceAggregator*::FastReduceKR, Eigen built for SSE):
// eigen_redux below. 2 (SPLIT 0, float32 and float64 sums and means over one group of leading or middle axes, the
// kept ones trailing: an NHWC image's spatial mean): the CPU EP's FastReduceRK / KRK, the first reduced row and then
// each next one added in order
layout(constant_id = 3) const uint ORDER = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint n_out, n_red;
    uint out_dims[4], out_strides[4];
    uint red_dims[4], red_strides[4];
    GROUP_BASE;
} pc;

#ifdef FLOAT64
#include "float64.glsl"
#define ACC_T double
#define EXP_ACC(v) exp_double(v)
#define LOG_ACC(v) log_double(v)
#define LOAD_X(i) Doubles(pc.x).v[i]
#define STORE_OUT(at, value) Doubles(pc.y).v[at] = (value)
#else
#if IS_FLOAT
#define ACC_T float
#else
#define ACC_T COMP_T
#endif
#define LOAD_X(i) ACC_T(LOAD(X, i))
#define EXP_ACC(v) exp(v)
#define LOG_ACC(v) log_any(v)
#define STORE_OUT(at, value) STORE(Tensor(pc.y), at, value)
#endif

shared ACC_T partial[MAX_WG];

// the element type's own extremes: the max (min) of nothing, as ORT's CPU EP gives it
ACC_T lowest() {
#if IS_FLOAT
    return ACC_T(uintBitsToFloat(0xff800000u));  // -inf
#elif DTYPE == 3
    return -9223372036854775807l - 1l;
#elif DTYPE == 4
    return ACC_T(0);  // uint8 (and bool)
#elif DTYPE == 5
    return ACC_T(-128);
#else
    return ACC_T(-2147483647 - 1);
#endif
}

ACC_T highest() {
#if IS_FLOAT
    return ACC_T(uintBitsToFloat(0x7f800000u));  // +inf
#elif DTYPE == 3
    return 9223372036854775807l;
#elif DTYPE == 4
    return ACC_T(255);
#elif DTYPE == 5
    return ACC_T(127);
#else
    return ACC_T(2147483647);
#endif
}

ACC_T identity() {
    if (OP == 2) return lowest();
    if (OP == 3) return highest();
    if (OP == 4) return ACC_T(1);
    return ACC_T(0);
}

// max and min with NaN propagating (log-sum-exp's shift: a NaN makes its sum NaN anyway; GLSL's max/min may
// return either operand)
ACC_T max_of(ACC_T a, ACC_T b) {
#if IS_FLOAT
    return isnan(a) || a > b ? a : b;
#else
    return max(a, b);
#endif
}

ACC_T min_of(ACC_T a, ACC_T b) {
#if IS_FLOAT
    return isnan(a) || a < b ? a : b;
#else
    return min(a, b);
#endif
}

// ReduceMax and ReduceMin as ORT's CPU EP (Eigen's maxCoeff, its update loops): a NaN in the accumulator stays,
// one met later is passed over, so the result is NaN where the reduction's first element is (main checks that
// one) and the extreme of the numbers otherwise; the accumulators here start at the identity and never hold NaN
ACC_T combine(ACC_T a, ACC_T b) {
    if (OP == 2) return b > a ? b : a;
    if (OP == 3) return b < a ? b : a;
    if (OP == 4) return a * b;
    return a + b;
}

// what one element contributes (log-sum-exp's second pass is handled by `shift`)
ACC_T term(ACC_T v) {
    if (OP == 5) return abs(v);
    if (OP == 6 || OP == 9) return v * v;
    return v;
}

uint decode(uint i, uint dims[4], uint strides[4]) {
    uint off = 0;
    for (int d = 3; d >= 0; --d) {
        off += (i % dims[d]) * strides[d];
        i /= dims[d];
    }
    return off;
}

ACC_T finish(ACC_T acc, ACC_T m) {
#if IS_FLOAT
    if (OP == 1) return pc.n_red == 0 ? ACC_T(0) : acc / ACC_T(pc.n_red);  // ORT: the mean of nothing is 0
    if (OP == 6) return sqrt(acc);
    if (OP == 7) return LOG_ACC(acc);  // (a sum of denormals stays one)
    if (OP == 8) return isinf(m) ? m : m + LOG_ACC(acc);
#else
    if (OP == 1) return pc.n_red == 0 ? ACC_T(0) : acc / ACC_T(pc.n_red);
#endif
    return acc;
}

// the whole workgroup combines its threads' values; every thread gets the result
ACC_T group_reduce(ACC_T v, bool use_max) {
    uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] = use_max ? max_of(partial[t], partial[t + s]) : combine(partial[t], partial[t + s]);
        barrier();
    }
    ACC_T r = partial[0];
    barrier();
    return r;
}

// The reduction of the row of n elements at `base` as Eigen's redux makes it with packets of LANES (SSE's: 4 floats, 2
// doubles), the row's first 16-byte aligned element its start s (ORT's buffers are aligned): two packets over 2 LANES
// elements a step, combined, then a last packet, then the lanes ((p0, p2), (p1, p3); or (p0, p1)), then the
// elements before s and after the packets, in order. Sums add; max and min keep the first operand where either is
// NaN (std::max, and SSE's maxps with the operands swapped as Eigen's pmax has them).
#if IS_FLOAT
#ifdef FLOAT64
#define LANES 2u
#else
#define LANES 4u
#endif
ACC_T eigen_op(ACC_T a, ACC_T b) {
    if (OP == 2) return b > a ? b : a;
    if (OP == 3) return b < a ? b : a;
    precise ACC_T r = a + b;
    return r;
}

ACC_T eigen_redux(uint base, uint n) {
    Tensor X = Tensor(pc.x);
    uint s = min((LANES - base % LANES) % LANES, n), size = (n - s) / LANES * LANES;
    uint size2 = (n - s) / (2u * LANES) * (2u * LANES);
    precise ACC_T res;
    if (size == 0u) {
        res = LOAD_X(base);
        for (uint r = 1u; r < n; ++r) res = eigen_op(res, LOAD_X(base + r));
        return res;
    }
    precise ACC_T p[2u * LANES];
    for (uint j = 0u; j < LANES; ++j) p[j] = LOAD_X(base + s + j);
    if (size > LANES) {
        for (uint j = 0u; j < LANES; ++j) p[LANES + j] = LOAD_X(base + s + LANES + j);
        for (uint i = s + 2u * LANES; i < s + size2; i += 2u * LANES)
            for (uint j = 0u; j < 2u * LANES; ++j) p[j] = eigen_op(p[j], LOAD_X(base + i + j));
        for (uint j = 0u; j < LANES; ++j) p[j] = eigen_op(p[j], p[LANES + j]);
        if (size > size2)
            for (uint j = 0u; j < LANES; ++j) p[j] = eigen_op(p[j], LOAD_X(base + s + size2 + j));
    }
    res = LANES == 4u ? eigen_op(eigen_op(p[0], p[2]), eigen_op(p[1], p[3])) : eigen_op(p[0], p[1]);
    for (uint r = 0u; r < s; ++r) res = eigen_op(res, LOAD_X(base + r));
    for (uint r = s + size; r < n; ++r) res = eigen_op(res, LOAD_X(base + r));
    return res;
}
#endif

void main() {
    Tensor X = Tensor(pc.x);
    uint o, first, step;
    if (SPLIT == 1) {
        o = FLAT_GROUP;
        first = gl_LocalInvocationID.x;
        step = WG;
    } else {
        o = FLAT_ID(WG);
        first = 0;
        step = 1;
    }
    if (o >= pc.n_out) return;  // uniform per workgroup in SPLIT mode
    uint base = decode(o, pc.out_dims, pc.out_strides);

    ACC_T m = ACC_T(0);
#if IS_FLOAT
    if (OP == 8) {  // log-sum-exp: the max first, so exp() cannot overflow
        m = lowest();
        for (uint r = first; r < pc.n_red; r += step) m = max_of(m, LOAD_X(base + decode(r, pc.red_dims, pc.red_strides)));
        if (SPLIT == 1) m = group_reduce(m, true);
    }
#endif
#if IS_FLOAT
    if (ORDER == 1 && pc.n_red > 0u) {
        STORE_OUT(o, finish(eigen_redux(base, pc.n_red), m));
        return;
    }
    if (ORDER == 2 && pc.n_red > 0u) {  // (the first element as it is: a sum of -0s stays -0)
        ACC_T in_order = LOAD_X(base);
        for (uint r = 1u; r < pc.n_red; ++r) in_order += LOAD_X(base + decode(r, pc.red_dims, pc.red_strides));
        STORE_OUT(o, finish(in_order, m));
        return;
    }
#endif
    ACC_T acc = identity();
    for (uint r = first; r < pc.n_red; r += step) {
        ACC_T v = LOAD_X(base + decode(r, pc.red_dims, pc.red_strides));
#if IS_FLOAT
        if (OP == 8) { acc += isinf(m) ? ACC_T(0) : EXP_ACC(v - m); continue; }
#endif
        acc = combine(acc, term(v));
    }
    if (SPLIT == 1) {
        acc = group_reduce(acc, false);
        if (gl_LocalInvocationID.x != 0) return;
    }
#if IS_FLOAT
    if ((OP == 2 || OP == 3) && pc.n_red > 0u) {  // (the first reduced element sits at base: decode(0) is 0)
        ACC_T first = LOAD_X(base);
        if (isnan(first)) acc = first;
    }
#endif
    STORE_OUT(o, finish(acc, m));
}
