#version 450
// Softmax along one axis. The tensor is read as [outer, axis, inner]; one workgroup per (outer, inner)
// row reduces max and sum in shared memory. MODE=1 gives LogSoftmax, MODE=2 Hardmax (1 at the first
// maximum, 0 elsewhere). The workgroup size is specialization constant 1 (wide for long rows: lavapipe
// ends a shader's loops after 65535 iterations in all).
// ORDER 1 (Softmax, float32): as ORT's CPU EP computes it on x86-64 with AVX2 and FMA, to the last bit (MLAS's
// MlasComputeSoftmax): the row's max; each exp(x - max) by MlasComputeSumExpF32KernelFma3's range reduction and
// polynomial (mlas_sum_exp); their sum in eight lanes (element k in lane k % 8, in order: a workgroup of 8 here, one
// invocation a lane), then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); y = exp * (1 / sum). Its multiply-adds
// exact on any device (precise.glsl's fma_exact). LogSoftmax (MODE 1) in that order takes the FLOAT64 variant: the
// same sum, its log as the C library's logf (glibc_logf: double arithmetic), then y = (x - max) - log.
// ORDER 2: the same on a host with AVX-512F, whose MlasComputeSumExpF32KernelAvx512F sums in sixteen lanes (a
// workgroup of 16), lanes k and k + 8 added first, and clamps x - max at LowerRange (not LowerRangeSumExp) and
// scales by 2^m with vscalefps.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "precise.glsl"
#include "mlas_logistic.glsl"

#define WG gl_WorkGroupSize.x
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint MODE = 0;  // 0 softmax, 1 log-softmax, 2 hardmax
layout(constant_id = 2) const uint ORDER = 0;  // 0 the workgroup's tree, 1 MLAS's FMA3 (a workgroup of 8), 2 AVX-512F (16)
// ORDER 1 and 2: one invocation a row (serial_row), its lanes an array: many short rows (a detector's 86,016 rows of
// 16 bins) cost lavapipe a workgroup each otherwise, more than their work
layout(constant_id = 3) const uint SERIAL = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint rows, axis_len, inner;
    GROUP_BASE;
} pc;

shared float partial[1024];
shared uint first_max[1024];

// MLAS's exp(v + neg_max) in a softmax's sum (mlas_logistic.glsl's reduction, clamped at LowerRangeSumExp; 2^m
// from the bits, as its normal-only scaling)
float mlas_sum_exp(float v, float neg_max) {
    precise float x = v + neg_max;
    float lower = uintBitsToFloat(ORDER == 2 ? 0xc2cff1b5u : 0xc2b0c0a5u);  // LowerRange -103.97, LowerRangeSumExp -88.38
    x = lower > x ? lower : x;
    float m, t;
    float p = mlas_exp_reduced(x, m, t);
    if (ORDER == 2) return ldexp(p, int(m));  // (vscalefps: exact, below 2^-126 too)
    precise float e = p * intBitsToFloat((floatBitsToInt(t) << 23) + 0x3f800000);  // times 2^m
    return e;
}

#ifdef FLOAT64
// log(x) for x >= 2^-126 (a sum of exps is at least 1) as glibc's logf computes it on x86-64 (ARM's optimized
// routines, which glibc took for 2.28): x = 2^k z, z within [0x3f330000, 2 x that], one of 16 subintervals, each
// with 1 / c and log(c) for a c near its centre (the constants below are glibc's, which its result depends on);
// log1p(z / c - 1) by a degree-3 polynomial, all in double, rounded to float once
const double LOGF_INVC[16] = double[16](
    1.3989071621465281lf, 1.3403141896637998lf, 1.286432210124115lf, 1.2367150214269895lf, 1.1906977166711752lf,
    1.1479821020556429lf, 1.1082251448272158lf, 1.0711297413057381lf, 1.0364372789772831lf, 1.0lf,
    0.9492859795739057lf, 0.89510494286090037lf, 0.84768216203511026lf, 0.80503148516920009lf, 0.7664671008843108lf,
    0.73142860331632797lf);
const double LOGF_LOGC[16] = double[16](
    -0.33569133332882284lf, -0.29290405637740741lf, -0.25187265809373688lf, -0.21245868807117255lf,
    -0.17453945183745634lf, -0.1380057072319758lf, -0.10275976698545139lf, -0.068713924470205245lf,
    -0.035789138739822798lf, 0.0lf, 0.052045177429294959lf, 0.11081431298787942lf, 0.16524952236951429lf,
    0.21687389031699977lf, 0.26596350281213971lf, 0.31275566640735569lf);
float glibc_logf(float x) {
    uint ix = floatBitsToUint(x);
    if (ix >= 0x7f800000u) return x;  // inf, NaN (x < 2^-126 never reaches here)
    uint tmp = ix - 0x3f330000u;
    uint i = (tmp >> 19u) % 16u;
    int k = int(tmp) >> 23;
    double z = double(uintBitsToFloat(ix - (tmp & (0x1ffu << 23u))));
    precise double r = z * LOGF_INVC[i] - 1.0;
    precise double y0 = LOGF_LOGC[i] + double(k) * 0.69314718055994529lf;
    precise double r2 = r * r;
    precise double y = 0.33345676574406602lf * r + -0.49999974858021029lf;  // A1 r + A2
    y = -0.25089342214237154lf * r2 + y;  // A0 r2 + y
    y = y * r2 + (y0 + r);
    return float(y);
}
#endif

// ORDER 1 and 2: the row's sum from MLAS's lanes (ORDER 2: sixteen lanes, k and k + 8 added first)
float mlas_lanes_sum(float lane[16]) {
    precise float l[8];
    for (uint j = 0; j < 8; ++j) l[j] = ORDER == 2 ? lane[j] + lane[j + 8] : lane[j];
    precise float sum8 = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    return sum8;
}

// ORDER 1 and 2: the row's outputs k = first, first + step, ... from its max and sum: LogSoftmax (the FLOAT64
// variant) glibc's logf of the sum, then (x + -max) - log (MlasComputeLogSoftmaxOutputF32Kernel); Softmax the exps
// it stored in y, times 1 / sum (the same invocation's own stores)
void mlas_row_outputs(uint base, float m, float sum8, uint first, uint step) {
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);
#ifdef FLOAT64
    if (MODE == 1) {
        float lg = glibc_logf(sum8);
        for (uint k = first; k < pc.axis_len; k += step) {
            precise float y = (LOAD(X, base + k * pc.inner) + -m) - lg;
            STORE(Y, base + k * pc.inner, y);
        }
        return;
    }
#endif
    precise float scale = precise_div(1.0, sum8);
    for (uint k = first; k < pc.axis_len; k += step) {
        precise float y = LOAD(Y, base + k * pc.inner) * scale;
        STORE(Y, base + k * pc.inner, y);
    }
}

// ORDER 1 and 2 for one row in one invocation: MLAS's lanes (k in lane k % lanes) as an array, each max, exp and sum
// in the order and tree main() gives them across a workgroup, so the same values
void serial_row() {
    const uint LANES = ORDER == 2 ? 16u : 8u;
    uint row = FLAT_ID(WG);
    if (row >= pc.rows) return;
    uint base = (row / pc.inner) * pc.axis_len * pc.inner + row % pc.inner;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);
    float lane_max[16];
    for (uint t = 0; t < LANES; ++t) {
        float m = uintBitsToFloat(0xff800000u);  // -inf
        for (uint k = t; k < pc.axis_len; k += LANES) m = max(m, LOAD(X, base + k * pc.inner));
        lane_max[t] = m;
    }
    for (uint s = LANES / 2; s > 0; s >>= 1)
        for (uint t = 0; t < s; ++t) lane_max[t] = max(lane_max[t], lane_max[t + s]);
    float m = lane_max[0];
    precise float lane[16];
    for (uint t = 0; t < 16u; ++t) lane[t] = 0.0;
    for (uint k = 0; k < pc.axis_len; ++k) {
        float e = mlas_sum_exp(LOAD(X, base + k * pc.inner), -m);
        if (MODE == 0) STORE(Y, base + k * pc.inner, e);
        lane[k % LANES] = lane[k % LANES] + e;
    }
    mlas_row_outputs(base, m, mlas_lanes_sum(lane), 0, 1);
}

void main() {
    if (SERIAL != 0) {
        serial_row();
        return;
    }
    uint row = FLAT_GROUP;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x;
    uint base = (row / pc.inner) * pc.axis_len * pc.inner + row % pc.inner;
    Tensor X = Tensor(pc.x), Y = Tensor(pc.y);

    float m = uintBitsToFloat(0xff800000u);  // -inf
    for (uint k = t; k < pc.axis_len; k += WG) m = max(m, LOAD(X, base + k * pc.inner));
    partial[t] = m;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] = max(partial[t], partial[t + s]);
        barrier();
    }
    m = partial[0];
    barrier();

    if (MODE == 2) {
        uint first = 0xffffffffu;
        for (uint k = t; k < pc.axis_len && first == 0xffffffffu; k += WG)
            if (LOAD(X, base + k * pc.inner) == m) first = k;
        first_max[t] = first;
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (t < s) first_max[t] = min(first_max[t], first_max[t + s]);
            barrier();
        }
        first = first_max[0];
        for (uint k = t; k < pc.axis_len; k += WG) STORE(Y, base + k * pc.inner, k == first ? 1.0 : 0.0);
        return;
    }

    if (ORDER != 0) {  // (WG = 8 or 16: invocation t is MLAS's lane t; LogSoftmax only in the FLOAT64 variant)
        precise float lane = 0.0;
        for (uint k = t; k < pc.axis_len; k += WG) {  // (Softmax keeps the exps in y, as MLAS keeps them in its
            float e = mlas_sum_exp(LOAD(X, base + k * pc.inner), -m);  // output; LogSoftmax's sum does not keep them)
            if (MODE == 0) STORE(Y, base + k * pc.inner, e);
            lane = lane + e;
        }
        partial[t] = lane;
        barrier();
        float lanes[16];
        for (uint j = 0; j < 16; ++j) lanes[j] = j < WG ? partial[j] : 0.0;
        mlas_row_outputs(base, m, mlas_lanes_sum(lanes), t, WG);
        return;
    }

    float sum = 0.0;
    for (uint k = t; k < pc.axis_len; k += WG) sum += exp(LOAD(X, base + k * pc.inner) - m);
    partial[t] = sum;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    sum = partial[0];

    for (uint k = t; k < pc.axis_len; k += WG) {
        float v = LOAD(X, base + k * pc.inner) - m;
        STORE(Y, base + k * pc.inner, MODE == 1 ? v - log(sum) : exp(v) / sum);
    }
}
