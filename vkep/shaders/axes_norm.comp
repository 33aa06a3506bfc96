#version 450
// Normalization over a set of axes, one workgroup per row: a row is the elements that share their coordinates on
// the kept axes, read at a strided offset (kept and reduced axes collapsed to at most 4 runs each, alternating).
// MODE 0: MeanVarianceNormalization, y = d / sqrt(mean(d^2)) with d = x - mean(x) (no epsilon: a constant row is
//         0/0 = NaN, as ORT's CPU EP);
// MODE 1: LpNormalization p=1, y = x / sum(|x|); MODE 2: p=2, y = x / sqrt(sum(x^2)); a zero norm gives zeros.
// MODE 3: MeanVarianceNormalization 1 with normalize_variance 0, y = x - mean(x).
// Float32, and (FLOAT64, common.glsl's VAL) float64 LpNormalization in double, as the CPU EP has them. The workgroup
// size is specialization constant 1 (a power of two).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#define WG gl_WorkGroupSize.x
#define RUNS 4
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint MODE = 0;

layout(push_constant, scalar) uniform Push {
    uint64_t x, y;
    uint rows, len;
    uint kept_dims[RUNS], kept_strides[RUNS], red_dims[RUNS], red_strides[RUNS];
    GROUP_BASE;
} pc;

shared VAL partial[1024];

VAL group_sum(VAL v) {
    uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    VAL r = partial[0];
    barrier();
    return r;
}

// the offset of index i of a run list (innermost run last; a run of size 1 adds nothing)
#define OFFSET(i, dims, strides, result) { \
    uint rest = (i); result = 0u; \
    [[unroll]] for (int d = RUNS - 1; d >= 0; --d) { result += (rest % dims[d]) * strides[d]; rest /= dims[d]; } }

void main() {
    uint row = FLAT_GROUP;
    if (row >= pc.rows) return;
    uint t = gl_LocalInvocationID.x, base;
    OFFSET(row, pc.kept_dims, pc.kept_strides, base)
    VAL acc = VAL(0);
    for (uint j = t; j < pc.len; j += WG) {
        uint at; OFFSET(j, pc.red_dims, pc.red_strides, at)
        VAL v = LOAD_VAL(pc.x, base + at);
        acc += MODE == 0 || MODE == 3 ? v : (MODE == 1 ? abs(v) : v * v);
    }
    VAL total = group_sum(acc);
    VAL mean = total / VAL(pc.len), scale;
    if (MODE == 0) {
        acc = VAL(0);
        for (uint j = t; j < pc.len; j += WG) {
            uint at; OFFSET(j, pc.red_dims, pc.red_strides, at)
            VAL d = LOAD_VAL(pc.x, base + at) - mean;
            acc += d * d;
        }
        scale = sqrt(group_sum(acc) / VAL(pc.len));
    } else {
        scale = MODE == 1 ? total : MODE == 2 ? sqrt(total) : VAL(1);
    }
    for (uint j = t; j < pc.len; j += WG) {
        uint at; OFFSET(j, pc.red_dims, pc.red_strides, at)
        VAL v = LOAD_VAL(pc.x, base + at);
        VAL r = MODE == 0 ? (v - mean) / scale : MODE == 3 ? v - mean : (scale != VAL(0) ? v / scale : VAL(0));
        STORE_VAL(pc.y, base + at, r);
    }
}
